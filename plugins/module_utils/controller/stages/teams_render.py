# SPDX-License-Identifier: Apache-2.0
"""The ``teams_render`` stage: a site's team objects rendered, checked and summarised in ``teams.json``.

:func:`run` takes the module's parameters and returns its result, in this order:

1. the plan (``plan_file``, its shape checked) and this run's devices in use
   per team (``utilization_file``), each when given and present;
2. the site's claim objects (:func:`burst.render`), then its team objects
   with its engine's (:func:`teams.render`: namespaces, quotas, priorities,
   Kueue's or KAI Scheduler's);
3. every object checked (:func:`teams.validate_all`) and the quotas against the
   site's capacity;
4. the summary written to ``dest`` (only when its content changes; not in check mode).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import json
import os

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs import site as inputs
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import render as teams
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import settings as teams_settings
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.cel import CelError
from ansible_collections.aligned.dra.plugins.module_utils.json_file import JsonFileError, write_json_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def _read_json(params: Mapping[str, Any], option: str) -> tuple[bool, Any]:
    """``(True, content)`` of the JSON file that option names; ``(False, None)`` when not given or absent."""
    path = params[option]
    if not path or not os.path.exists(path):
        return False, None
    try:
        with open(path, encoding="utf-8") as handle:
            return True, json.load(handle)
    except (OSError, ValueError) as exc:
        raise StageError(f"{option}: cannot read {path}: {exc}") from None


def _plan(params: Mapping[str, Any]) -> dict[str, Any] | None:
    found, plan = _read_json(params, "plan_file")
    if found:
        try:
            inputs.check_plan(plan, "plan_file")
        except inputs.InputError as exc:
            raise StageError(str(exc)) from None
    return plan


def _in_use(params: Mapping[str, Any]) -> dict[str, dict[str, int]] | None:
    """Devices per team and class in use now, from this run's utilization.json; None when unknown."""
    found, used = _read_json(params, "utilization_file")
    if not found:
        return None
    path = params["utilization_file"]
    rows = used.get("teams") if isinstance(used, dict) else None
    if not isinstance(rows, dict) or not all(
        isinstance(row, dict)
        and isinstance(row.get("devices"), dict)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in row["devices"].values())
        for row in rows.values()
    ):
        raise StageError(f"utilization_file: {path}: teams must map team names to rows with device counts per class")
    return {team: dict(row["devices"]) for team, row in rows.items()}


def _rendered(params: Mapping[str, Any], plan: dict[str, Any] | None) -> dict[str, Any]:
    """The site's team objects and rows (:func:`teams.render`), every object checked; :class:`StageError` else."""
    try:
        rendered_claims = burst.render(
            params["claims_settings"],
            params["site"],
            params["kubernetes_version"],
            params["feature_gates"],
            rail_rules=params["rail_rules"],
            device_options=params["device_options"],
            fractional_burst=params["fractional_burst"],
        )
        claim_conf = claims.settings(params["claims_settings"])
        class_keys = claim_conf["classes"]
        result = teams.render(
            params["settings"],
            params["site"],
            rendered_claims["objects"],
            params["kubernetes_version"],
            params["feature_gates"],
            plan,
            class_keys,
            _in_use(params),
            params["placement_levels"],
            # the drivers' names as published: the collection's GPUs under its split GPU driver, if any
            claims.published_drivers(claim_conf, params["device_options"]),
        )
        problems = teams.validate_all(result["objects"], result["minor"], params["feature_gates"])
    except (
        teams_settings.TeamsError,
        schedulers.SchedulerError,
        claims.ClaimsError,
        dra.DeviceModelError,
        CelError,
    ) as exc:
        raise StageError(str(exc)) from None
    if problems:
        raise StageError("rendered team objects are not valid: " + " | ".join(problems), problems=problems)
    if result["problems"]:
        raise StageError(
            "quotas exceed the site's capacity: " + " | ".join(result["problems"]), capacity=result["capacity"]
        )
    return result


def run(params: Mapping[str, Any], check_mode: bool, diff: bool) -> dict[str, Any]:
    """The module's result: ``changed``, ``objects``, ``files``, ``capacity``, ``teams``, ``minor``, ``engine``,
    ``kueue``, ``kai``, and ``diff`` of ``dest`` when ``diff`` is asked and the file changes."""
    plan = _plan(params)
    result = _rendered(params, plan)
    summary = {
        "schema_version": 1,
        "site": params["site"],
        "kubernetes_version": result["minor"],
        "capacity_source": "plan.json" if plan is not None else None,
        "tiers": result["tiers"],
        "teams": result["teams"],
        "capacity": result["capacity"],
        "engine": result["engine"],
        "kueue": result["kueue"],
        "kai": result["kai"],
    }
    changed = False
    file_diff: dict[str, Any] = {}
    dest = params["dest"]
    if dest:
        try:
            changed, file_diff = write_json_file(dest, summary, check_mode)
        except JsonFileError as exc:
            raise StageError(str(exc)) from None
    response = {
        "changed": changed,
        "objects": result["objects"],
        "files": [{"name": teams.file_name(o), "object": o} for o in result["objects"]],
        "capacity": result["capacity"],
        "teams": result["teams"],
        "minor": result["minor"],
        "engine": result["engine"],
        "kueue": result["kueue"],
        "kai": result["kai"],
    }
    if diff and file_diff:
        response["diff"] = file_diff
    return response
