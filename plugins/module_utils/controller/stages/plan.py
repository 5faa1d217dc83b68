# SPDX-License-Identifier: Apache-2.0
"""The ``plan`` stage: the site's claim templates planned on its nodes and written to ``plan.json``.

:func:`run` takes the module's parameters: the site loaded as the planner
loads it (:func:`planner_inputs.load_site`), planned (:func:`planner.plan`;
where ``mig`` takes GPUs, their ``mig`` section: :func:`planner_mig.section`),
``plan.json`` written (only when its content changes; not in check mode), and
the required templates that cannot be satisfied refused when the module says so.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import inputs as planner_inputs
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import mig as planner_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, write_dest
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.cel import CelError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# The module's arguments: its AnsibleModule's, and its action's in the controller's process.
MODULE_SPEC: dict[str, Any] = {
    "argument_spec": {
        "site": {"type": "str", "required": True},
        "kubernetes_version": {"type": "str"},
        "feature_gates": {"type": "dict", "default": {}},
        "objects": {"type": "list", "elements": "dict", "required": True},
        "required": {"type": "list", "elements": "str", "default": []},
        **planner_inputs.DEVICE_SOURCE_SPEC,
        "dest": {"type": "path"},
        "fail_on_unsatisfied": {"type": "bool", "default": True},
        "nodes_failed": {"type": "dict", "default": {}},
        "node_counts": {"type": "dict"},
        "return_plan": {"type": "str", "choices": ["full", "summary"], "default": "full"},
        "rail_rules": {"type": "dict", "default": {}},
        "rail_rule": {"type": "dict"},
        "rail_node_names": {"type": "dict", "default": {}},
        "rail_addresses": {"type": "dict", "default": {}},
        "mig": {"type": "dict", "default": {}},
    },
    "mutually_exclusive": planner_inputs.DEVICE_SOURCE_EXCLUSIVE,
    # the per-node entries would be nowhere
    "required_if": [("return_plan", "summary", ("dest",))],
}


def _respond(params: Mapping[str, Any], result: dict[str, Any], check_mode: bool, diff: bool) -> dict[str, Any]:
    """Writes the plan to ``dest``, and returns it (or its summary), refusing unsatisfied required templates."""
    changed, file_diff = write_dest(params["dest"], result, check_mode)

    unsatisfied = result["required_unsatisfied"]
    returned = planner.plan_summary(result) if params["return_plan"] == "summary" else result
    response = {"changed": changed, "plan": returned, "unsatisfied": unsatisfied}
    if diff and file_diff:
        response["diff"] = file_diff
    if unsatisfied and params["fail_on_unsatisfied"]:
        reasons = []
        for entry in result["templates"]:
            if entry["name"] in unsatisfied:
                reasons.append(f"{entry['name']}: {entry.get('reason', 'unsatisfiable')}")
        raise StageError(
            "required templates cannot be satisfied on site " + params["site"] + ": " + "; ".join(reasons),
            **response,
        )
    return response


def run(params: Mapping[str, Any], check_mode: bool, diff: bool) -> dict[str, Any]:
    """The module's result: ``changed``, ``plan`` (full or its summary), ``unsatisfied``, and ``diff`` of ``dest``
    when ``diff`` is asked and the file changes."""
    try:
        site = planner_inputs.load_site(params, required=params["required"])
    except planner_inputs.InputError as exc:
        raise StageError(str(exc)) from None
    try:
        result = planner.plan(
            params["site"],
            site.nodes,
            site.classes,
            site.templates,
            required=params["required"],
            kubernetes_version=params["kubernetes_version"],
            warnings=site.warnings,
        )
        section = planner_mig.section(site.nodes, site.classes, site.templates)
    except (planner.PlanError, dra.DeviceModelError, CelError) as exc:
        raise StageError(str(exc)) from None
    if section is not None:  # only where some node has MIG: other sites' plan.json does not change
        result["mig"] = section
    result.update(site.accounted)
    return _respond(params, result, check_mode, diff)
