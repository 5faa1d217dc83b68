# SPDX-License-Identifier: Apache-2.0
"""The ``topology_output`` stage: each node's topology file written to the output directory, by site.

:func:`run` takes the module's parameters: the nodes' entries checked
(:func:`json_file.node_entries`) and written (:func:`json_file.write_node_files`:
only what changed; nothing in check mode). The module and the action plugin
(``plugins/action/topology_output.py``, which reads the play's hostvars in the
controller process) both run it; the action passes ``load``
(:func:`topology_fact.full_topology`), so that a fact's whole topology is read
from the run's store as each file is written.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils import json_file
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import fact as topology_fact

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def run(
    params: Mapping[str, Any], check_mode: bool, diff: bool, load: Callable[[str, Any], Any] | None = None
) -> dict[str, Any]:
    """The module's result: ``changed``, ``written`` (the files), ``nodes`` (how many), and ``diff`` (the files
    written) when ``diff`` is asked and a file was written.

    ``params``: ``output_dir``, ``nodes`` (``{node: {"site", "topology"}}``) and ``sites``. ``load`` turns a
    node's fact into what its file holds (:func:`json_file.write_node_files`); a fact it cannot read
    (:class:`topology_fact.TopologyFactError`) fails the stage like a file that cannot be written.
    """
    nodes, problem = json_file.node_entries(params["nodes"], params["sites"])
    if problem:
        raise StageError(problem)
    try:
        written = json_file.write_node_files(params["output_dir"], nodes, params["sites"], check_mode, load)
    except (json_file.JsonFileError, topology_fact.TopologyFactError) as exc:
        raise StageError(str(exc)) from None
    result = {"changed": bool(written), "written": written, "nodes": len(nodes)}
    if written and diff:
        result["diff"] = {
            "before": "",
            "after": "".join(path + "\n" for path in written),
            "after_header": "files written",
        }
    return result
