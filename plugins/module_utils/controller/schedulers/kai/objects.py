# SPDX-License-Identifier: Apache-2.0
"""Teams as KAI Scheduler queues (engine ``kai``): what KAI can count, the queues and who may use them.

KAI Scheduler (v0.17.0) decides what a DRA GPU is by name (:mod:`kai_api`):
:func:`check_counting` refuses, before anything is rendered, what KAI would
miscount on the site: a GPU driver whose name lacks ``gpu`` (KAI would count
no GPUs on any node), NICs published by the GPU driver (KAI would count them
as GPUs), a team's template that asks for GPUs through ``firstAvailable``
(not counted) or through a class whose name lacks ``gpu``, a class of other
devices whose name contains ``gpu``, and quotas on either of the last two.

:func:`render` gives the site's queue tree: a parent Queue per site
(``aligned_dra_teams.kai.parent_queue``, ``aligned-<site>`` by default), one
per department under it (``<parent>-<department>``) when teams name one, and
a leaf Queue per team, named like the team (the name its pods give in the
label ``kai.scheduler/queue``). A leaf's GPUs: ``quota`` = the team's
guaranteed GPUs (quota x namespaces summed over the GPU classes; 0 for a tier
that is not guaranteed), ``limit`` = quota + ``borrowing_limit`` when every
GPU class of the team has one, -1 (none) otherwise, and for a tier that is
not guaranteed its quota (it only ever uses idle GPUs), ``overQuotaWeight``
= the team's ``over_quota_weight`` and ``priority`` = its tier's
PriorityClass value. A parent's quota and limit are its children's sums
(limit -1 when a child has none), its weight their sum and its priority
their highest, so the division among parents follows the teams in them.
CPU and memory stay unlimited (-1) unless a team sets ``kai.cpu`` or
``kai.memory``.

KAI reads the queue label from the pod or its top owner as given and checks
no right to use a queue, and a queue caps only the pods KAI schedules: the
site's admission policies (:mod:`kai_admission`) keep each team's namespaces
to the team's queue and their device pods on KAI's scheduler.
With placement levels, a KAI ``Topology`` lists them (widest first,
``kubernetes.io/hostname`` last).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels as placement
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import shared
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import admission as kai_admission
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import fair_share as kai_fair_share
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import mig as kai_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import settings as kai_settings
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai.api import (
    QUEUE_API_VERSION,
    QUEUE_LABEL,
    TOPOLOGY_API_VERSION,
    UNLIMITED,
    KaiError,
    counts_as_gpu,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import labels as dra_labels

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TEAM_LABEL = dra_labels.TEAM_LABEL
TIER_LABEL = dra_labels.TIER_LABEL
DEPARTMENT_LABEL = "aligned.dev/department"
# the claims catalogue's class keys whose classes select GPUs (claims/render.py device_classes)
GPU_CLASS_KEYS = ("gpu", "nvidia-gpu")
NOTES = [
    "KAI counts a fractional GPU claim (a share of a GPU's memory) as one whole GPU against the queue",
    "a workload that names no queue goes to KAI's default queue, which these quotas do not cover",
]


def _labels(site: str, **extra: str) -> dict[str, str]:
    labels = dict(dra_labels.MANAGED)
    labels[dra_labels.SITE_LABEL] = site
    labels.update(extra)
    return labels


# -- what KAI counts -------------------------------------------------------------------------------


def gpu_classes(conf: dict[str, Any], claim_objects: list[dict[str, Any]]) -> list[str]:
    """The rendered DeviceClasses that select GPUs (the catalogue's ``gpu`` and ``nvidia-gpu`` classes)."""
    rendered = {o["metadata"]["name"] for o in claim_objects if o.get("kind") == "DeviceClass"}
    keys = conf.get("keys") or {}
    return sorted({keys[k] for k in GPU_CLASS_KEYS if keys.get(k) in rendered})


def _request_problems(
    template: str, requests: list[dict[str, Any]], gpus: set[str], mig: frozenset[str] = frozenset()
) -> list[str]:
    problems = []
    for request in requests:
        name = request.get("name")
        exactly = request.get("exactly")
        if exactly is not None:
            cls = exactly.get("deviceClassName")
            if cls in mig:
                pass  # kai_mig.counting_problems says what KAI counts of MIG classes
            elif cls in gpus and not counts_as_gpu(cls):
                problems.append(
                    f"template {template}: request {name} asks for GPUs of class {cls}, whose name lacks 'gpu': "
                    "KAI would count none of them"
                )
            elif cls not in gpus and counts_as_gpu(cls):
                problems.append(
                    f"template {template}: request {name} asks for class {cls}, which selects no GPUs but whose "
                    "name contains 'gpu': KAI would count its devices as GPUs"
                )
        for sub in request.get("firstAvailable") or []:
            if sub.get("deviceClassName") in gpus:
                problems.append(
                    f"template {template}: request {name} asks for GPUs through firstAvailable "
                    f"({name}/{sub.get('name')}), which KAI does not count; use an exactly request"
                )
                break
    return problems


def check_counting(
    conf: dict[str, Any],
    claim_objects: list[dict[str, Any]],
    drivers: dict[str, str] | None,
    mig_classes: dict[str, str | None] | None = None,
) -> list[str]:
    """Problems KAI would miscount (see the module docstring); ``drivers``: ``{"gpu", "nic"}`` driver names;
    ``mig_classes``: the site's MIG classes (``schedulers/mig.mig_classes``), checked by :mod:`kai_mig`."""
    mig = frozenset(mig_classes or {})
    problems = []
    drivers = drivers or {}
    gpu_driver, nic_driver = drivers.get("gpu"), drivers.get("nic")
    if gpu_driver is not None and not counts_as_gpu(gpu_driver):
        problems.append(
            f"aligned_dra_claims.gpu_driver {gpu_driver}: the name lacks 'gpu', so KAI counts no GPU on any "
            "node; publish GPUs under a driver whose name contains 'gpu' (the collection's driver: run it split "
            "by kind, aligned_dra_device_options.split_gpu_driver: gpu.aligned.dev)"
        )
    elif gpu_driver is not None and gpu_driver == nic_driver:
        problems.append(
            f"aligned_dra_claims.nic_driver {nic_driver} is the GPU driver: KAI counts every device of the GPU "
            "driver's slices as a GPU, NICs included (the collection's driver: run it split by kind, "
            "aligned_dra_device_options.split_gpu_driver)"
        )
    gpus = set(gpu_classes(conf, claim_objects))
    by_name = {
        o["metadata"]["name"]: o for o in claim_objects if o.get("kind") in ("ResourceClaimTemplate", "ResourceClaim")
    }
    seen: set[str] = set()
    for team in conf["teams"]:
        where = f"aligned_dra_teams.teams[{team['name']}]"
        for template in team["templates"]:
            if template in seen or template not in by_name:
                continue
            seen.add(template)
            claim = by_name[template]
            spec = claim.get("spec") or {}
            spec = (spec.get("spec") or {}) if claim["kind"] == "ResourceClaimTemplate" else spec
            requests = (spec.get("devices") or {}).get("requests")
            problems += [f"{where}.templates: {p}" for p in _request_problems(template, requests or [], gpus, mig)]
        for cls in sorted(team["quotas"]):
            if cls not in mig and (cls in gpus) != counts_as_gpu(cls):
                what = "GPUs, but its name lacks 'gpu'" if cls in gpus else "no GPUs, but its name contains 'gpu'"
                problems.append(f"{where}.quotas.{cls}: the class selects {what}; KAI would count it wrongly")
    return problems + kai_mig.counting_problems(conf, claim_objects, mig_classes or {})


# -- queues ------------------------------------------------------------------------------------------


def _team_gpus(conf: dict[str, Any], team: dict[str, Any], gpus: list[str]) -> dict[str, Any]:
    """``{"quota", "limit"}`` GPUs of a team's leaf queue (see the module docstring)."""
    where = f"aligned_dra_teams.teams[{team['name']}]"
    count = len(team["namespaces"])
    quota = sum(team["quotas"].get(cls, 0) for cls in gpus) * count
    borrowing = team["borrowing_limit"]
    for cls in sorted(set(borrowing) - set(gpus)):
        raise KaiError(f"{where}.borrowing_limit.{cls}: KAI lends and borrows GPUs only; {cls} selects no GPUs")
    if not conf["tiers"][team["tier"]]["guaranteed"]:
        if borrowing:
            raise KaiError(
                f"{where}.borrowing_limit: tier {team['tier']} is not guaranteed, its quota ({quota} GPUs) is "
                "already its limit; drop the entry"
            )
        return {"quota": 0, "limit": quota}
    asked = [cls for cls in gpus if cls in team["quotas"]]
    if asked and all(cls in borrowing for cls in asked):
        return {"quota": quota, "limit": quota + sum(borrowing[cls] for cls in asked)}
    return {"quota": quota, "limit": UNLIMITED}


def _resources(gpu: dict[str, Any], weight: float, amounts: dict[str, Any]) -> dict[str, Any]:
    out = {"gpu": dict(gpu, overQuotaWeight=weight)}
    for resource in kai_settings.TEAM_RESOURCE_KEYS:
        out[resource] = dict(amounts[resource], overQuotaWeight=weight)
    return out


def _queue(name: str, labels: dict[str, str], display: str, parent: str | None, priority: int, resources: dict):
    spec: dict[str, Any] = {"displayName": display, "priority": priority, "resources": resources}
    if parent:
        spec["parentQueue"] = parent
    return {
        "apiVersion": QUEUE_API_VERSION,
        "kind": "Queue",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def _summed(children: list[dict[str, Any]]) -> dict[str, Any]:
    """A parent's resources from its children's: quotas and limits summed (-1 wins), weights summed."""
    out = {}
    for resource in ("gpu", *kai_settings.TEAM_RESOURCE_KEYS):
        values = [c["spec"]["resources"][resource] for c in children]
        quota = UNLIMITED if any(v["quota"] == UNLIMITED for v in values) else sum(v["quota"] for v in values)
        limit = UNLIMITED if any(v["limit"] == UNLIMITED for v in values) else sum(v["limit"] for v in values)
        out[resource] = {"quota": quota, "limit": limit, "overQuotaWeight": sum(v["overQuotaWeight"] for v in values)}
    return out


def _parent(name: str, labels: dict[str, str], display: str, parent: str | None, children: list[dict]) -> dict:
    priority = max(c["spec"]["priority"] for c in children)
    return _queue(name, labels, display, parent, priority, _summed(children))


def queues(conf: dict[str, Any], site: str, kai: dict[str, Any], gpus: list[str]) -> list[dict[str, Any]]:
    """The site's Queues: the site's parent, the departments' and the teams' (in that order)."""
    top = kai["parent_queue"]
    leaves, departments = [], {}
    for team in conf["teams"]:
        where = f"aligned_dra_teams.teams[{team['name']}]"
        extra = kai_settings.team_settings(team)
        tier = conf["tiers"][team["tier"]]
        department = team.get("department")
        parent = top
        if department:
            parent = kai_settings.queue_name(f"{where}.department", f"{top}-{department}")
            departments.setdefault(department, parent)
        name = kai_settings.queue_name(f"{where}.name", team["name"])
        labels = _labels(site, **{TEAM_LABEL: team["name"], TIER_LABEL: team["tier"]})
        resources = _resources(_team_gpus(conf, team, gpus), extra["over_quota_weight"], extra)
        leaves.append(_queue(name, labels, team["name"], parent, tier["value"], resources))
    names = [top, *departments.values(), *(q["metadata"]["name"] for q in leaves)]
    for name in sorted({n for n in names if names.count(n) > 1}):
        raise KaiError(f"aligned_dra_teams: the queue name {name!r} is given twice (a team, department or site)")
    middle = []
    for department, name in sorted(departments.items()):
        children = [q for q in leaves if q["spec"]["parentQueue"] == name]
        labels = _labels(site, **{DEPARTMENT_LABEL: department})
        middle.append(_parent(name, labels, department, top, children))
    if not leaves:
        return []
    first_level = middle + [q for q in leaves if q["spec"]["parentQueue"] == top]
    return [_parent(top, _labels(site), site, None, first_level), *middle, *leaves]


# -- who may use a queue -----------------------------------------------------------------------------


def topology(site: str, placement_levels: list[dict[str, str]] | None) -> dict[str, Any] | None:
    """The site's KAI ``Topology`` (widest level first, ``kubernetes.io/hostname`` last); None without levels."""
    try:
        levels = placement.check_levels(placement_levels)
    except shared.PlacementError as exc:
        raise KaiError(str(exc)) from None
    if not levels:
        return None
    return {
        "apiVersion": TOPOLOGY_API_VERSION,
        "kind": "Topology",
        "metadata": {"name": placement.topology_name(site), "labels": _labels(site)},
        "spec": {"levels": placement.topology_levels(levels)},
    }


# -- the whole site ----------------------------------------------------------------------------------


def _row(queue: dict[str, Any]) -> dict[str, Any]:
    spec = queue["spec"]
    gpu = spec["resources"]["gpu"]
    return {
        "queue": queue["metadata"]["name"],
        "parent": spec.get("parentQueue"),
        "priority": spec["priority"],
        "quota": gpu["quota"],
        "limit": gpu["limit"],
        "over_quota_weight": gpu["overQuotaWeight"],
    }


def render(
    conf: dict[str, Any],
    site: str,
    claim_objects: list[dict[str, Any]],
    plan: dict[str, Any] | None = None,
    drivers: dict[str, str] | None = None,
    placement_levels: list[dict[str, str]] | None = None,
    allocated: dict[str, float] | None = None,
    mig: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """KAI objects for one site: ``{"objects", "scheduler_name", "queue_label", "gpu_classes", "queues",
    "notes", "what_if"}``.

    ``objects``: the Topology (with placement levels), the Queues (parent,
    departments, teams) and the admission policy with its binding. ``queues``:
    a row per Queue (``queue``, ``parent``, ``priority``, GPU ``quota``,
    ``limit``, ``over_quota_weight``; teams also ``team``). ``nodes``: per
    node the GPUs published and those KAI counts, from the plan (None
    without one). ``what_if``:
    :func:`kai_fair_share.what_if` of ``aligned_dra_teams.kai.what_if`` when
    set, with the GPUs each team has in use now (``allocated``, from the
    utilization stage) when known. What KAI would miscount, or settings it cannot serve, raise
    :class:`KaiError` naming them. ``mig``: the site's MIG (``schedulers/mig.site`` with ``classes`` and
    ``published``): what KAI counts of it goes to ``notes`` (:mod:`kai_mig`).
    """
    kai = kai_settings.site_settings(conf.get("kai"), site, conf["teams"])
    mig_classes = (mig or {}).get("classes") or {}
    problems = check_counting(conf, claim_objects, drivers, mig_classes)
    if problems:
        raise KaiError("KAI Scheduler would miscount GPUs: " + " | ".join(problems))
    gpus = gpu_classes(conf, claim_objects)
    queue_objects = queues(conf, site, kai, gpus)
    topology_object = topology(site, placement_levels)
    objects = ([topology_object] if topology_object else []) + queue_objects
    if queue_objects:
        objects += kai_admission.policies(site, kai["scheduler_name"])
    rows = []
    teams = {t["name"] for t in conf["teams"]}
    for queue in queue_objects:
        row = _row(queue)
        if row["queue"] in teams and queue["spec"].get("parentQueue"):
            row["team"] = row["queue"]
        rows.append(row)
    result = {
        "objects": objects,
        "scheduler_name": kai["scheduler_name"],
        "queue_label": QUEUE_LABEL,
        "parent_queue": kai["parent_queue"],
        "gpu_classes": gpus,
        "queues": rows,
        "notes": list(NOTES) + kai_mig.notes(mig, (mig or {}).get("published") or {}, drivers, mig_classes),
        "nodes": _node_gpus(plan),
        "what_if": None,
    }
    if kai["what_if"] is not None:
        result["what_if"] = kai_fair_share.what_if(rows, kai["what_if"], _site_gpus(plan, gpus), allocated)
    return result


def _node_gpus(plan: dict[str, Any] | None) -> list[dict[str, Any]] | None:
    """Per node the GPUs published and those KAI counts (``plan.json`` ``gpu_counts``); None without a plan."""
    counts = (plan or {}).get("gpu_counts")
    if not isinstance(counts, dict):
        return None
    return [
        {"node": node, "published": row.get("published"), "counted_by_kai": row.get("counted_by_kai")}
        for node, row in sorted(counts.items())
    ]


def in_use_gpus(in_use: dict[str, dict[str, int]], gpus: list[str]) -> dict[str, float]:
    """GPUs in use per team (``{team: {class: devices}}`` of the utilization stage, the GPU classes summed)."""
    return {team: float(sum(counts.get(cls, 0) for cls in gpus)) for team, counts in in_use.items()}


def _site_gpus(plan: dict[str, Any] | None, gpus: list[str]) -> int | None:
    """The site's GPUs as KAI counts them (``plan.json`` ``gpu_counts``), else the GPU classes' devices (the
    largest where several overlap, for a plan written before the counts); None unknown."""
    counts = (plan or {}).get("gpu_counts")
    if isinstance(counts, dict) and counts:
        return sum(int(row.get("counted_by_kai") or 0) for row in counts.values())
    classes = (plan or {}).get("classes") or {}
    counts = [(classes.get(cls) or {}).get("devices") for cls in gpus]
    counts = [c for c in counts if isinstance(c, int)]
    return max(counts) if counts else None
