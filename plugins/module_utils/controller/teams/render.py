# SPDX-License-Identifier: Apache-2.0
"""Teams of a site: namespaces, device quotas, priority tiers and admin access.

:func:`render` turns a site's team settings (inventory ``aligned_dra_teams``,
documented in docs/teams.md) and the site's rendered claim objects (from
:mod:`claims`) into the objects that give every team a fair, enforced share:

- a ``Namespace`` per team namespace, labelled with the team, its tier and,
  only when the team asks for it, ``resource.kubernetes.io/admin-access``;
- a ``ResourceQuota`` per namespace on the DRA resource names
  ``<class>.deviceclass.resource.k8s.io/devices`` (and ``requests.<name>`` where
  a class has an extended-resource name);
- a ``PriorityClass`` per tier;
- copies of the claim templates each team may use, in its namespaces, annotated
  with the team's priority class; for teams with admin access, one template per
  DeviceClass that asks for every device with ``adminAccess``.

The settings are read and checked first, by :func:`settings.settings`.
:func:`capacity_check` compares the guaranteed quotas per class with the
site's capacity from the planner (``plan.json`` ``classes``) and reports
oversubscription, which is allowed only up to a factor the site sets.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import copy

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels as placement
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import api as kai_api
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import checks as kai_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import objects as kai
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import api as kueue_api
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import checks as kueue_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import objects as kueue
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import settings as teams_settings
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TEAM_LABEL = kueue_api.TEAM_LABEL
TIER_LABEL = kueue_api.TIER_LABEL
PRIORITY_ANNOTATION = "aligned.dev/priority-class"
QUEUE_ANNOTATION = "aligned.dev/kueue-queue-name"
USAGE_ANNOTATION = "aligned.dev/usage"
QUOTA_NAME = "aligned-dra-devices"
MANAGED = kueue_api.MANAGED


# -- objects -----------------------------------------------------------------------------------


def quota_resource(class_name: str) -> str:
    """The ResourceQuota name that counts the devices of one DeviceClass in a namespace."""
    return f"{class_name}.deviceclass.resource.k8s.io/devices"


def _labels(site: str, team: dict[str, Any], tiers: dict[str, Any]) -> dict[str, str]:
    labels = dict(MANAGED)
    labels.update({kueue_api.SITE_LABEL: site, TEAM_LABEL: team["name"], TIER_LABEL: team["tier"]})
    return labels


def priority_classes(conf: dict[str, Any], site: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {
                "name": tier["name"],
                "labels": dict(MANAGED, **{TIER_LABEL: key, kueue_api.SITE_LABEL: site}),
            },
            "value": tier["value"],
            "preemptionPolicy": tier["preemption_policy"],
            "globalDefault": False,
            "description": str(tier["description"]),
        }
        for key, tier in sorted(conf["tiers"].items())
    ]


def _usage(team: dict[str, Any], tier: dict[str, Any]) -> str:
    return f"team {team['name']}, tier {team['tier']}: pods set priorityClassName: {tier['name']}" + (
        " (preempted by higher tiers, never preempts)" if tier["preemption_policy"] == "Never" else ""
    )


def _admin_template(class_name: str, namespace: str, labels: dict[str, str], usage: str) -> dict[str, Any]:
    return {
        "apiVersion": dra.API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": f"{class_name}-admin-access"[:253],
            "namespace": namespace,
            "labels": labels,
            "annotations": {USAGE_ANNOTATION: "monitoring: every device of the class, with admin access; " + usage},
        },
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "devices",
                            "exactly": {"deviceClassName": class_name, "allocationMode": "All", "adminAccess": True},
                        }
                    ]
                }
            }
        },
    }


def team_objects(
    conf: dict[str, Any], site: str, objects: list[dict[str, Any]], queued: frozenset[str] = frozenset()
) -> list[dict[str, Any]]:
    """Namespaces, quotas and template copies of every team (PriorityClasses not included).

    ``queued``: the classes a KAI queue counts (its GPUs), left out of the ResourceQuotas.
    """
    by_name = {o["metadata"]["name"]: o for o in objects if o.get("kind") in ("ResourceClaimTemplate", "ResourceClaim")}
    classes = sorted(teams_settings.class_names(objects))
    out = []
    for team in conf["teams"]:
        tier = conf["tiers"][team["tier"]]
        labels = _labels(site, team, conf["tiers"])
        usage = _usage(team, tier)
        for ns in team["namespaces"]:
            ns_labels = dict(team["labels"])
            ns_labels.update(labels)
            if team["admin_access"]:
                ns_labels[teams_settings.ADMIN_ACCESS_LABEL] = "true"
            out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": ns_labels}})
            capped = {cls: n for cls, n in team["quotas"].items() if cls not in queued}
            if capped and conf.get("engine", schedulers.DEFAULT_ENGINE) != schedulers.KUEUE:
                hard = {}
                for cls, count in sorted(capped.items()):
                    hard[quota_resource(cls)] = str(count)
                    if cls in conf["extended_resources"]:
                        hard["requests." + conf["extended_resources"][cls]] = str(count)
                out.append(
                    {
                        "apiVersion": "v1",
                        "kind": "ResourceQuota",
                        "metadata": {"name": QUOTA_NAME, "namespace": ns, "labels": dict(labels)},
                        "spec": {"hard": hard},
                    }
                )
            for template in team["templates"]:
                copied = copy.deepcopy(by_name[template])
                meta = copied["metadata"]
                meta["namespace"] = ns
                meta["labels"] = dict(meta.get("labels") or {}, **labels)
                meta["annotations"] = dict(
                    meta.get("annotations") or {}, **{PRIORITY_ANNOTATION: tier["name"], USAGE_ANNOTATION: usage}
                )
                out.append(copied)
            if team["admin_access"]:
                out += [_admin_template(cls, ns, dict(labels), usage) for cls in classes]
    return out


# -- capacity ------------------------------------------------------------------------------------


def capacity_check(conf: dict[str, Any], plan: dict[str, Any] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """Quotas against capacity per class: ``(rows, problems)``.

    A row per class that some team has a quota for: ``capacity`` (devices the
    class selects on the site, from the plan; None when there is no plan),
    ``guaranteed`` (sum over teams of guaranteed tiers of quota x namespaces),
    ``opportunistic``, ``factor`` (allowed oversubscription), ``ratio`` and
    ``status``: ``ok``, ``oversubscribed`` (above capacity, within the factor),
    ``over_limit`` (above capacity x factor: a problem) or ``unknown``.
    """
    capacities = ((plan or {}).get("classes")) or {}
    rows: dict[str, dict[str, Any]] = {}
    for team in conf["teams"]:
        guaranteed = conf["tiers"][team["tier"]]["guaranteed"]
        for cls, count in team["quotas"].items():
            if isinstance(count, str):
                continue  # an amount of capacity (Kueue): checked by kueue.render, not in devices
            total = count * len(team["namespaces"])
            row = rows.setdefault(
                cls,
                {
                    "class": cls,
                    "capacity": (capacities.get(cls) or {}).get("devices") if cls in capacities else None,
                    "guaranteed": 0,
                    "opportunistic": 0,
                    "factor": conf["oversubscription"].get(cls, 1.0),
                    "teams": {},
                },
            )
            row["guaranteed" if guaranteed else "opportunistic"] += total
            row["teams"][team["name"]] = {"quota": total, "guaranteed": guaranteed, "tier": team["tier"]}
    problems = []
    for cls, row in sorted(rows.items()):
        capacity = row["capacity"]
        if capacity is None:
            row["ratio"] = None
            row["status"] = "unknown"
            continue
        row["ratio"] = round(row["guaranteed"] / capacity, 3) if capacity else (None if not row["guaranteed"] else 0)
        if row["guaranteed"] <= capacity:
            row["status"] = "ok"
        elif row["guaranteed"] <= capacity * row["factor"]:
            row["status"] = "oversubscribed"
        else:
            row["status"] = "over_limit"
            allowed = "no oversubscription is allowed" if row["factor"] == 1.0 else f"the factor is {row['factor']:g}"
            problems.append(
                f"DeviceClass {cls}: guaranteed quotas add up to {row['guaranteed']} devices, the site has "
                f"{capacity} and {allowed} (aligned_dra_teams.oversubscription)"
            )
    return [rows[k] for k in sorted(rows)], problems


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
) -> dict[str, Any]:
    """Everything for one site: ``{"objects", "capacity", "problems", "teams", "tiers", "minor", "engine", "kueue",
    "kai"}``.

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
    scheduled = None
    if schedulers.uses_kai(conf["engine"]):
        allocated = None if in_use is None else kai.in_use_gpus(in_use, kai.gpu_classes(conf, claim_objects))
        scheduled = kai.render(conf, site, claim_objects, plan, drivers, placement_levels, allocated)
    queued = frozenset(scheduled["gpu_classes"]) if scheduled else frozenset()
    objects = priority_classes(conf, site) + team_objects(conf, site, claim_objects, queued)
    rows, problems = capacity_check(conf, plan)
    queues = None
    if scheduled is not None:
        _kai_guidance(objects, scheduled)
        objects += scheduled["objects"]
    if schedulers.uses_kueue(conf["engine"]):
        queues = kueue.render(conf, site, claim_objects, plan, feature_gates, minor, in_use, placement_levels)
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
    return {
        "objects": objects,
        "capacity": rows,
        "problems": problems,
        "teams": summary,
        "tiers": conf["tiers"],
        "minor": minor,
        "engine": conf["engine"],
        "kueue": None if queues is None else {k: v for k, v in queues.items() if k not in ("objects", "problems")},
        "kai": None if scheduled is None else {k: v for k, v in scheduled.items() if k != "objects"},
    }


def _kai_guidance(objects: list[dict[str, Any]], scheduled: dict[str, Any]) -> None:
    """Template copies say which KAI queue and scheduler their namespace's workloads name.

    KAI reads ``kai.scheduler/queue`` from the pod or its top owner (Job,
    JobSet...), never from a claim, its template or the namespace, so the copy
    carries it in its usage annotation for people and tools to read.
    """
    teams = {row["team"] for row in scheduled["queues"] if row.get("team")}
    for obj in objects:
        team = (obj["metadata"].get("labels") or {}).get(TEAM_LABEL)
        if obj["kind"] != "ResourceClaimTemplate" or team not in teams:
            continue
        annotations = obj["metadata"].setdefault("annotations", {})
        annotations[USAGE_ANNOTATION] += (
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
        annotations[USAGE_ANNOTATION] += f"; workloads set the label {kueue_api.QUEUE_LABEL}: {queues[namespace]}"


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
