# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.topology_info``: the module on the node, and with ``fact``, the node's fact.

Without ``fact`` the module's result is returned as it is. With ``fact: true``
the whole topology goes to this run's store on the controller
(:mod:`plugin_utils.topology_store`), as the result arrives, and the host gets
the slim fact ``aligned_dra_topology`` (:func:`topology_fact.fact_of`) in the
same round: no ``set_fact`` round per node, and the topology does not pile up
in the controller's memory and its forks. The network plan the module made
with ``network_plan`` goes to the store too, with the options it was made
for, for the node's next ``aligned.dra.network_plan`` call of the run.
"""

from __future__ import annotations

import os
from typing import Any

from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase

from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import fact as topology_fact
from ansible_collections.aligned.dra.plugins.plugin_utils import topology_store

FACT_NAME = "aligned_dra_topology"


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        module_args = dict(self._task.args)
        try:
            as_fact = boolean(module_args.pop("fact", False), strict=True)
        except TypeError as exc:
            return {"failed": True, "msg": f"fact: {exc}"}
        result = super().run(tmp, task_vars)
        result.update(
            self._execute_module(module_name="aligned.dra.topology_info", module_args=module_args, task_vars=task_vars)
        )
        if not as_fact or result.get("failed") or not isinstance(result.get("topology"), dict):
            return result
        host = str(task_vars.get("inventory_hostname"))
        path = topology_store.path_for(host)
        topology = result.pop("topology")
        try:
            topology_fact.keep(path, topology)
        except topology_fact.TopologyFactError as exc:
            return {"failed": True, "msg": f"{host}: {exc}"}
        planned = result.pop("network_plan", None)
        plan_path = topology_store.network_plan_path_for(host)
        if os.path.lexists(plan_path):
            os.unlink(plan_path)  # an earlier probe's plan: this probe is the node as it is now
        if isinstance(planned, dict) and "not_planned" not in planned:
            try:
                topology_fact.keep(plan_path, {"options": module_args["network_plan"], **planned})
            except topology_fact.TopologyFactError:
                pass  # not kept: the network stage reads the node itself, as without the option
        facts = {FACT_NAME: topology_fact.fact_of(topology, path)}
        # Like set_fact: a fact of this run only. A fact cache must not carry
        # it into a later run, whose store no longer holds the file.
        register = getattr(self, "register_host_variables", None)
        if register is not None:
            from ansible.plugins.action import VariableLayer

            register({}, VariableLayer.CACHEABLE_FACT)
            register(facts, VariableLayer.EPHEMERAL_FACT)
        result["ansible_facts"] = facts
        return result
