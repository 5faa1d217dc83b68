# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.topology_output``: the play's node files, written in the controller process.

Each host's ``aligned_dra_topology`` and ``aligned_dra_site`` are read once
from ``hostvars``; the fact's whole topology is read from the run's store one
node at a time (:mod:`controller.topology.fact`), and the files are written by
the ``topology_output`` stage (:func:`controller.stages.topology_output.run`),
which the module runs too. Run once per play (``run_once``): one call writes
every node's file, instead of one worker round per node.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs.site import site_of
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, topology_output
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import fact as topology_fact


class ActionModule(ActionBase):
    _VALID_ARGS = frozenset(("output_dir", "hosts", "all_hosts"))
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(
            argument_spec={
                "output_dir": {"type": "path", "required": True},
                # the nodes whose facts are written (the play's hosts that did not fail)
                "hosts": {"type": "list", "elements": "str", "required": True},
                # every host the play targets: each of their sites gets its directory
                "all_hosts": {"type": "list", "elements": "str", "default": []},
            }
        )[1]
        hostvars = task_vars["hostvars"]
        nodes: dict[str, Any] = {}
        sites = []
        for host in dict.fromkeys(args["all_hosts"] + args["hosts"]):
            facts = hostvars[host]
            site = site_of(facts)
            sites.append(site)
            topology = facts.get("aligned_dra_topology") if host in args["hosts"] else None
            if topology is not None:
                nodes[host] = {"site": site, "topology": topology}
        params = {"output_dir": args["output_dir"], "nodes": nodes, "sites": sorted(set(sites))}
        try:
            outcome = topology_output.run(
                params, self._task.check_mode, self._task.diff, load=topology_fact.full_topology
            )
        except StageError as exc:
            result.update(failed=True, msg=str(exc), **exc.fields)
            return result
        result.update(outcome)
        return result
