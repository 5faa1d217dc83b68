# SPDX-License-Identifier: Apache-2.0
"""The NCCL environment a job's template justifies, and nothing the inventory does not give.

- ``NCCL_CROSS_NIC=0`` when the template is pinned to rails (every worker's NICs are on the same
  rails by construction) and the job has more than one worker: on a rail-optimised fabric NIC *i* of
  every node sits on leaf *i*, and 0 keeps each ring or tree on one rail across nodes. A template
  that is not pinned gets nothing, even where a simulation found equal rails: the scheduler does not
  promise them.
- ``NCCL_NET_GDR_LEVEL`` = the template's worst GPU-NIC level on the site when that is known and at
  most PXB (a bound "PXB or better" will do: the variable is a maximum distance). GPU Direct RDMA is then
  the intended path for every pair; for PHB, NODE, SYS or unknown NCCL's own, architecture-aware
  default is left alone.

Not set: ``NCCL_IB_HCA`` and ``NCCL_SOCKET_IFNAME`` (which NICs a worker gets is decided at allocation,
on the node) and every tuning or debug variable. Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Levels at which GPU Direct RDMA is set explicitly (NCCL's names; the project's levels PIX and PXB
# mean the same PCIe paths).
GDR_LEVELS = ("PIX", "PXB")


def nccl_env(workers: int, rails: list[int] | None, worst_level: str | None) -> list[dict[str, Any]]:
    """Container env entries (name/value) for a job of ``workers`` on a template pinned to ``rails``
    (None: not pinned) whose worst GPU-NIC level on the site is ``worst_level`` (None: unknown)."""
    env = []
    if rails and workers > 1:
        env.append({"name": "NCCL_CROSS_NIC", "value": "0"})
    if worst_level in GDR_LEVELS:
        env.append({"name": "NCCL_NET_GDR_LEVEL", "value": worst_level})
    return env
