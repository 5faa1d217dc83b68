# SPDX-License-Identifier: Apache-2.0
"""The ``jobs`` stage: a site's jobs rendered, placed on the site and written to ``jobs.json``.

:func:`run` takes the module's parameters and returns its result, in
this order, each check once:

1. the site name (every object carries it as a label) and the placement's
   shape (its ``sources`` too, where each level is read from, when it has
   them) and problems (the ``aligned.dra.placement`` filter's);
2. the jobs rendered (:func:`render.render_jobs`: the jobs checked against
   the levels, the claims' and teams' namespaces and the catalogue, the
   objects validated for the minor);
3. the site's nodes loaded as the planner loads them, joined to the
   placement's hosts (:func:`site_view.planner_site`), this run's
   utilization taken off;
4. those checked jobs placed (:func:`search.place_checked_jobs`) and
   ``jobs.json`` written (only when its content changes; not in check mode).

A failure raises :class:`StageError` with the message the module fails
with.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import presets
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.shared import PlacementError
from ansible_collections.aligned.dra.plugins.module_utils.controller.gangs import search, site_view
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import render as jobs_render
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import held as planner_held
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import inputs as planner_inputs
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.consumption import PlanError
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, write_dest
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.cel import CelError
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import label_value_problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# The module's arguments: its AnsibleModule's, and its action's in the controller's process.
MODULE_SPEC: dict[str, Any] = {
    "argument_spec": {
        "site": {"type": "str", "required": True},
        "kubernetes_version": {"type": "str", "required": True},
        "feature_gates": {"type": "dict", "default": {}},
        "jobs": {"type": "list", "elements": "dict", "default": []},
        "placement": {"type": "dict", "default": {}},
        "objects": {"type": "list", "elements": "dict", "required": True},
        "claims_settings": {"type": "dict", "default": {}},
        "teams_settings": {"type": "dict", "default": {}},
        **planner_inputs.DEVICE_SOURCE_SPEC,
        "nodes_failed": {"type": "dict", "default": {}},
        "rail_rules": {"type": "dict", "default": {}},
        "rail_node_names": {"type": "dict", "default": {}},
        "utilization_file": {"type": "path"},
        "dest": {"type": "path"},
    },
    "mutually_exclusive": planner_inputs.DEVICE_SOURCE_EXCLUSIVE,
}


def _checked_placement(site: str, placement: Mapping[str, Any]) -> None:
    """The site name as a label value, the placement's shape, and no problems the filter found."""
    # every object carries the site as a label: a site that cannot be one is the input's fault, not the renderer's
    problem = label_value_problem(site)
    if problem:
        raise StageError(f"site: {problem}")
    try:
        site_view.check_shape(placement)
    except site_view.PlacementShapeError as exc:
        raise StageError(str(exc)) from None
    problem = _sources_problem(placement.get("sources"))
    if problem:
        raise StageError(f"placement.sources: {problem}")
    if placement.get("problems"):
        raise StageError("placement: " + "; ".join(str(p) for p in placement["problems"]))


def _sources_problem(sources: Any) -> str | None:
    """What is wrong with the placement's ``sources`` (where each level is read from), or None; absent is fine."""
    if sources is None:
        return None
    if not isinstance(sources, list):
        return f"must be a list of level entries (got {type(sources).__name__})"
    needed = {presets.INVENTORY: (), presets.NODE_LABEL: ("key",), presets.DEVICE_ATTRIBUTE: ("driver", "attribute")}
    for index, entry in enumerate(sources):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            return f"[{index}] must be a level entry with a name (as the aligned.dra.placement filter gives it)"
        if entry.get("source") not in needed:
            return f"[{index}] ({entry['name']}): source {entry.get('source')!r} is not one of {', '.join(needed)}"
        for key in needed[entry["source"]]:
            if not isinstance(entry.get(key), str) or not entry[key]:
                return f"[{index}] ({entry['name']}): a {entry['source']} level needs its {key}"
    return None


def _rendered(params: Mapping[str, Any], placement: Mapping[str, Any]) -> dict[str, Any]:
    try:
        return jobs_render.render_jobs(
            params["site"],
            params["jobs"],
            params["kubernetes_version"],
            params["feature_gates"],
            placement.get("levels") or [],
            params["claims_settings"],
            params["teams_settings"],
            jobs_render.template_rails(params["objects"]),
        )
    except (jobs_render.JobsError, PlacementError, dra.DeviceModelError) as exc:
        raise StageError(str(exc)) from None


def _placed(params: Mapping[str, Any], placement: Mapping[str, Any], rendered: dict[str, Any]) -> dict[str, Any]:
    """``jobs.json``: the rendered (checked) jobs placed on the site's nodes with this run's devices held."""
    try:
        measured = planner_held.read_utilization(params["utilization_file"]) if params["utilization_file"] else None
        site = planner_inputs.load_site(params)
        from_slices = params["slices"] is not None or bool(params["slice_files"])
        placement, nodes = site_view.planner_site(placement, site.nodes, from_slices)
        in_use = planner_held.held_devices(measured, placement.get("node_names") or {})
        result = search.place_checked_jobs(
            params["site"],
            rendered["jobs"],
            nodes,
            site.classes,
            site.templates,
            placement,
            held=in_use["held"],
            held_uncertain={"shared": in_use["shared"], "spanning": in_use["spanning"]},
            kubernetes_version=rendered["minor"],
        )
    except (planner_inputs.InputError, planner_held.HeldError) as exc:
        raise StageError(str(exc)) from None
    except (PlanError, dra.DeviceModelError, CelError) as exc:
        raise StageError(f"{params['site']}: {exc}") from None
    result["held_shared"] = in_use["shared"]
    result["held_spanning"] = in_use["spanning"]
    # the rail rules' problems explain the NICs of unknown rail a reason may count
    result["warnings"] = site.warnings + result.get("warnings", [])
    result["domains_of_nodes"] = site_view.domains_of_nodes(placement)
    return result


def run(params: Mapping[str, Any], check_mode: bool, diff: bool) -> dict[str, Any]:
    """The jobs module's result: ``changed``, ``placement`` (``jobs.json``), ``files``, ``left_out``,
    ``minor``, and ``diff`` of ``dest`` when ``diff`` is asked and the file changes."""
    placement = params["placement"]
    _checked_placement(params["site"], placement)
    rendered = _rendered(params, placement)
    result = _placed(params, placement, rendered)
    # one gang mechanism per job: KAI's PodGroup, kube-scheduler's Workload/PodGroup, the Job's own, or none
    result["gangs"] = rendered["gangs"]
    changed, file_diff = write_dest(params["dest"], result, check_mode)
    response = {
        "changed": changed,
        "placement": result,
        "files": rendered["files"],
        "left_out": rendered["left_out"],
        "minor": rendered["minor"],
    }
    if diff and file_diff:
        response["diff"] = file_diff
    return response
