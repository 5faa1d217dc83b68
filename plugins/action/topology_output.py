# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.topology_output``: the play's node files, written in the controller process.

Each host's ``aligned_dra_topology`` and ``aligned_dra_site`` are read once
from ``hostvars``; the fact's whole topology is read from the run's store one
node at a time (:mod:`module_utils.topology_fact`), and the files are written
by :mod:`module_utils.json_file`, which the module uses too. Run once per play (``run_once``): one call writes
every node's file, instead of one worker round per node.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.aligned.dra.plugins.module_utils import json_file
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs.site import site_of
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
        entries, problem = json_file.node_entries(nodes, sorted(set(sites)))
        if problem:
            result.update(failed=True, msg=problem)
            return result
        try:
            written = json_file.write_node_files(
                args["output_dir"], entries, sorted(set(sites)), self._task.check_mode, topology_fact.full_topology
            )
        except (json_file.JsonFileError, topology_fact.TopologyFactError) as exc:
            result.update(failed=True, msg=str(exc))
            return result
        result.update(changed=bool(written), written=written, nodes=len(entries))
        if written and self._task.diff:
            result["diff"] = {
                "before": "",
                "after": "".join(path + "\n" for path in written),
                "after_header": "files written",
            }
        return result
