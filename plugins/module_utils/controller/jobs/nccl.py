# SPDX-License-Identifier: Apache-2.0
"""The NCCL environment a job's template justifies, and nothing the inventory does not give.

``NCCL_CROSS_NIC=0`` when the template is pinned to rails (every worker's NICs are on the same rails
by construction) and the job has more than one worker: on a rail-optimised fabric NIC *i* of every
node sits on leaf *i*, and 0 keeps each ring or tree on one rail across nodes. A template that is not
pinned gets nothing, even where a simulation found equal rails: the scheduler does not promise them.

Not set:

- ``NCCL_NET_GDR_LEVEL``: it would have to hold for every allocation the template allows on every
  node the job may land on, and nothing computes that bound (the planner's levels are those of one
  simulated packing, not a promise), so NCCL's own, architecture-aware default stays;
- ``NCCL_IB_HCA`` and ``NCCL_SOCKET_IFNAME``: which NICs a worker gets is decided at allocation, on
  the node;
- every tuning or debug variable.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def nccl_env(workers: int, rails: list[int] | None) -> list[dict[str, Any]]:
    """Container env entries (name/value) for a job of ``workers`` on a template pinned to ``rails``
    (None or empty: not pinned)."""
    if rails and workers > 1:
        return [{"name": "NCCL_CROSS_NIC", "value": "0"}]
    return []
