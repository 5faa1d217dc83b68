# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The hosts a controller-side action reads settings of (``aligned.dra.preflight``, ``aligned.dra.validate``)."""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail

NODES_GROUP = "aligned_dra_nodes"


def node_hosts(task_vars: dict[str, Any], requested: list[str]) -> list[str]:
    """``requested``, or every host of the ``aligned_dra_nodes`` group; each one must be in the inventory."""
    hosts = requested or list(task_vars.get("groups", {}).get(NODES_GROUP, []))
    unknown = [host for host in hosts if host not in task_vars["hostvars"]]
    if unknown:
        raise AnsibleActionFail(f"hosts: not in the inventory: {', '.join(unknown)}")
    return hosts
