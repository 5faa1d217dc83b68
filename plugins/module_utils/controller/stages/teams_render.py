# SPDX-License-Identifier: Apache-2.0
"""The ``teams_render`` stage: a site's team objects rendered, checked and summarised in ``teams.json``.

:func:`run` takes the module's parameters and returns its result, in this order:

1. the plan (``plan_file``, its shape checked) and this run's devices in use
   per team (``utilization_file``), each when given and present; where hosts
   run MIG (``mig``: host -> ``aligned_dra_mig``), their probed topologies
   (``topologies``, ``topology_files`` or ``<topology_dir>/<host>.json``, read
   as the claims stage reads them) and the site's MIG (:mod:`schedulers.mig`);
2. the site's claim objects (:func:`burst.render`), then its team objects
   with its engine's (:func:`render`: namespaces, quotas, priorities,
   Kueue's or KAI Scheduler's);
3. every object checked (:func:`validate_all`) and the quotas against the
   site's capacity;
4. the summary written to ``dest`` (only when its content changes; not in check mode).

:func:`render` is the site's teams with their engine's objects: the team
model's (:mod:`teams.render`: namespaces, quotas, priorities, template
copies) and, by ``aligned_dra_teams.engine``, Kueue's (:mod:`kueue.objects`) or
KAI Scheduler's (:mod:`kai.objects`); the validation stage renders with it too.
:func:`validate_all` checks the objects, :func:`file_name` names their files.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import json
import os

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels as placement
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs import site as inputs
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import shared as schedulers_shared
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import api as kai_api
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import checks as kai_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import objects as kai
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import api as kueue_api
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import checks as kueue_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import objects as kueue
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, write_dest
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages.claims_render import mig_topologies
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import render as teams_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import settings as teams_settings
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
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
        "kubernetes_version": {"type": "str", "required": True},
        "feature_gates": {"type": "dict", "default": {}},
        "claims_settings": {"type": "dict", "default": {}},
        "rail_rules": {"type": "dict", "default": {}},
        "device_options": {"type": "dict", "default": {}},
        "fractional_burst": {"type": "dict", "default": {}},
        "settings": {"type": "dict", "default": {}},
        "placement_levels": {"type": "raw", "default": []},
        "plan_file": {"type": "path"},
        "utilization_file": {"type": "path"},
        "dest": {"type": "path"},
        "mig": {"type": "dict", "default": {}},
        "topologies": {"type": "dict"},
        "topology_files": {"type": "dict"},
        "topology_dir": {"type": "path"},
    },
}

QUEUE_ANNOTATION = "aligned.dev/kueue-queue-name"


def render(
    raw_settings: dict[str, Any] | None,
    site: str,
    claim_objects: list[dict[str, Any]],
    kubernetes_version: str,
    feature_gates: dict[str, bool] | None = None,
    plan: dict[str, Any] | None = None,
    class_keys: dict[str, str] | None = None,
    in_use: dict[str, dict[str, int]] | None = None,
    placement_levels: list[dict[str, str]] | None = None,
    drivers: dict[str, str] | None = None,
    mig: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything for one site: ``{"objects", "capacity", "problems", "teams", "tiers", "minor", "engine", "kueue",
    "kai"}``, and ``"mig"``, ``"shared"`` (the GPUs given whole or as partitions and who holds which part:
    :func:`schedulers_shared.check`) and ``"warnings"`` where hosts run MIG.

    ``mig``: the site's MIG (:func:`schedulers_mig.site`, with ``published`` per host): Kueue may count quotas on
    MIG devices in GPU memory, KAI is told what it would miscount; None without MIG, and nothing changes.

    With engine ``kueue`` or ``both``, ``kueue`` holds what :func:`kueue.render`
    returns besides its objects (the manager configuration, the queues per
    team); ``in_use`` (devices per team and class in use now) adds what each
    team has idle and could lend; ``placement_levels`` (the site's
    ``aligned_dra_placement_levels``) add a Kueue Topology that every flavor names.

    ``problems`` holds the capacity problems; invalid objects raise nothing here,
    :func:`validate_all` checks them.
    """
    # every object carries the site as a label value, and Kueue's names start with it
    problem = placement.label_value_problem(site)
    if problem:
        raise teams_settings.TeamsError(f"site: {problem}")
    conf = teams_settings.settings(raw_settings, claim_objects, class_keys)
    minor = dra_gates.minor_of(kubernetes_version)
    if any(t["admin_access"] for t in conf["teams"]) and not dra_gates.gate_enabled(
        "DRAAdminAccess", minor, feature_gates
    ):
        raise teams_settings.TeamsError(
            f"admin_access needs the DRAAdminAccess feature gate, which is off on Kubernetes {minor}"
        )
    if mig is not None:
        mig = dict(mig, classes=schedulers_mig.mig_classes(claim_objects))
    scheduled = None
    if schedulers.uses_kai(conf["engine"]):
        allocated = None if in_use is None else kai.in_use_gpus(in_use, kai.gpu_classes(conf, claim_objects))
        scheduled = kai.render(conf, site, claim_objects, plan, drivers, placement_levels, allocated, mig)
    queued = frozenset(scheduled["gpu_classes"]) if scheduled else frozenset()
    objects = teams_model.priority_classes(conf, site) + teams_model.team_objects(conf, site, claim_objects, queued)
    rows, problems = teams_model.capacity_check(conf, plan, mig)
    # whole-GPU and MIG quotas together on the GPUs both take (a dynamic GPU is given whole or as partitions)
    shared, shared_problems = schedulers_shared.check(conf, claim_objects, plan, mig)
    problems = problems + shared_problems
    queues = None
    if scheduled is not None:
        _kai_guidance(objects, scheduled)
        objects += scheduled["objects"]
    if schedulers.uses_kueue(conf["engine"]):
        queues = kueue.render(conf, site, claim_objects, plan, feature_gates, minor, in_use, placement_levels, mig)
        # queues["problems"] is the same check on the same numbers (guaranteed quota x namespaces against
        # the plan's devices; classes counted in memory are unknown to both): capacity_check reports it once
        _queue_guidance(objects, queues["objects"])
        objects += queues["objects"]
    summary = [
        {
            "name": t["name"],
            "namespaces": t["namespaces"],
            "tier": t["tier"],
            "priority_class": conf["tiers"][t["tier"]]["name"],
            "guaranteed": conf["tiers"][t["tier"]]["guaranteed"],
            "templates": t["templates"],
            "quotas": t["quotas"],
            "admin_access": t["admin_access"],
        }
        for t in conf["teams"]
    ]
    result = {
        "objects": objects,
        "capacity": rows,
        "problems": problems + ([] if queues is None else queues["counter_problems"]),
        "teams": summary,
        "tiers": conf["tiers"],
        "minor": minor,
        "engine": conf["engine"],
        "kueue": None
        if queues is None
        else {k: v for k, v in queues.items() if k not in ("objects", "problems", "counter_problems")},
        "kai": None if scheduled is None else {k: v for k, v in scheduled.items() if k != "objects"},
    }
    if mig is not None:
        result["mig"] = {k: v for k, v in mig.items() if k not in ("settings", "sets")}
        result["mig"]["sets"] = schedulers_mig.public(mig.get("sets"))
        result["shared"] = shared
        notes = (result["kueue"] or {}).get("notes", []) + (result["kai"] or {}).get("notes", [])
        result["warnings"] = [n for n in notes if n.startswith(schedulers_mig.WARNING_PREFIX)]
    return result


def _kai_guidance(objects: list[dict[str, Any]], scheduled: dict[str, Any]) -> None:
    """Template copies say which KAI queue and scheduler their namespace's workloads name.

    KAI reads ``kai.scheduler/queue`` from the pod or its top owner (Job,
    JobSet...), never from a claim, its template or the namespace, so the copy
    carries it in its usage annotation for people and tools to read.
    """
    teams = {row["team"] for row in scheduled["queues"] if row.get("team")}
    for obj in objects:
        team = (obj["metadata"].get("labels") or {}).get(teams_model.TEAM_LABEL)
        if obj["kind"] != "ResourceClaimTemplate" or team not in teams:
            continue
        annotations = obj["metadata"].setdefault("annotations", {})
        annotations[teams_model.USAGE_ANNOTATION] += (
            f"; workloads set the label {kai_api.QUEUE_LABEL}: {team} (on the pod or its top owner)"
            f" and pods schedulerName: {scheduled['scheduler_name']}"
        )


def _queue_guidance(objects: list[dict[str, Any]], queue_objects: list[dict[str, Any]]) -> None:
    """Template copies say which LocalQueue their namespace's workloads name.

    Kueue reads ``kueue.x-k8s.io/queue-name`` from the workload (Job, JobSet,
    pod), never from a claim or its template, so the copy carries it as an
    annotation for people and tools to read, not as a label Kueue would act on.
    """
    queues = {o["metadata"]["namespace"]: o["metadata"]["name"] for o in queue_objects if o["kind"] == "LocalQueue"}
    for obj in objects:
        namespace = obj["metadata"].get("namespace")
        if obj["kind"] != "ResourceClaimTemplate" or namespace not in queues:
            continue
        annotations = obj["metadata"].setdefault("annotations", {})
        annotations[QUEUE_ANNOTATION] = queues[namespace]
        annotations[teams_model.USAGE_ANNOTATION] += (
            f"; workloads set the label {kueue_api.QUEUE_LABEL}: {queues[namespace]}"
        )


def validate_all(objects: list[dict[str, Any]], minor: str, feature_gates: dict[str, bool] | None = None) -> list[str]:
    """Schema (strict, per minor), gates and DRA limits of every object; empty when all may be applied.

    Kueue's objects are checked against Kueue's own CRD schemas (:func:`kueue_checks.validate_objects`),
    KAI Scheduler's against KAI's (:func:`kai_checks.validate_objects`).
    """

    def group(obj: dict[str, Any]) -> str:
        return str(obj.get("apiVersion", "")).rpartition("/")[0]

    queues = [o for o in objects if group(o) == kueue_api.API_GROUP]
    scheduled = [o for o in objects if group(o) in kai_api.API_GROUPS]
    others = [o for o in objects if group(o) != kueue_api.API_GROUP and group(o) not in kai_api.API_GROUPS]
    return (
        claims.validate_all(others, minor, feature_gates)
        + (kueue_checks.validate_objects(queues) if queues else [])
        + (kai_checks.validate_objects(scheduled) if scheduled else [])
    )


def file_name(obj: dict[str, Any]) -> str:
    """Stable file name in ``<site>/teams/``."""
    kind = {
        "Namespace": "namespace",
        "ResourceQuota": "quota",
        "PriorityClass": "priorityclass",
        "ResourceClaimTemplate": "claimtemplate",
        "ResourceClaim": "claim",
        "WorkloadPriorityClass": "kueue-priorityclass",
        "Cohort": "kueue-cohort",
        "ResourceFlavor": "kueue-flavor",
        "Topology": "kai-topology" if obj.get("apiVersion") == kai_api.TOPOLOGY_API_VERSION else "kueue-topology",
        "ClusterQueue": "kueue-clusterqueue",
        "LocalQueue": "kueue-localqueue",
        "Queue": "kai-queue",
        "ValidatingAdmissionPolicy": "admissionpolicy",
        "ValidatingAdmissionPolicyBinding": "admissionpolicybinding",
    }.get(obj["kind"], obj["kind"].lower())
    namespace = obj["metadata"].get("namespace")
    return f"{kind}-{namespace + '-' if namespace else ''}{obj['metadata']['name']}.yaml"


# -- the module's run ----------------------------------------------------------------------------


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
    """The site's team objects and rows (:func:`render`), every object checked; :class:`StageError` else."""
    topologies = mig_topologies(params)
    try:
        mig = schedulers_mig.site(params.get("mig"), topologies)
        if mig is not None:
            mig["published"] = schedulers_mig.published_per_gpu(topologies, params.get("mig"))
        rendered_claims = burst.render(
            params["claims_settings"],
            params["site"],
            params["kubernetes_version"],
            params["feature_gates"],
            rail_rules=params["rail_rules"],
            device_options=params["device_options"],
            fractional_burst=params["fractional_burst"],
            mig=params.get("mig") or {},
            topologies=topologies,
        )
        claim_conf = claims.settings(params["claims_settings"])
        class_keys = claim_conf["classes"]
        result = render(
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
            mig,
        )
        problems = validate_all(result["objects"], result["minor"], params["feature_gates"])
    except (
        teams_settings.TeamsError,
        schedulers.SchedulerError,
        claims.ClaimsError,
        dra.DeviceModelError,
        CelError,
        schedulers_mig.MigTeamsError,
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
    ``kueue``, ``kai``, and ``diff`` of ``dest`` when ``diff`` is asked and the file changes; where hosts run
    MIG also ``mig``, ``shared`` and, where the scheduler counts MIG differently than asked, ``warnings``."""
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
    if "mig" in result:  # only where hosts run MIG: a site without keeps its teams.json as it was
        summary["mig"] = result["mig"]
        summary["shared"] = result["shared"]
    changed, file_diff = write_dest(params["dest"], summary, check_mode)
    response = {
        "changed": changed,
        "objects": result["objects"],
        "files": [{"name": file_name(o), "object": o} for o in result["objects"]],
        "capacity": result["capacity"],
        "teams": result["teams"],
        "minor": result["minor"],
        "engine": result["engine"],
        "kueue": result["kueue"],
        "kai": result["kai"],
    }
    if "mig" in result:
        response["mig"] = result["mig"]
        response["shared"] = result["shared"]
    if result.get("warnings"):
        response["warnings"] = result["warnings"]
    if diff and file_diff:
        response["diff"] = file_diff
    return response
