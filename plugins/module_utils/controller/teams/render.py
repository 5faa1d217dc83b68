# SPDX-License-Identifier: Apache-2.0
"""Teams of a site: namespaces, device quotas, priority tiers and admin access, engine-neutral.

:func:`team_objects` and :func:`priority_classes` turn a site's checked team
settings (:func:`settings.settings` of inventory ``aligned_dra_teams``,
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

:func:`capacity_check` compares the guaranteed quotas per class with the
site's capacity from the planner (``plan.json`` ``classes``) and reports
oversubscription, which is allowed only up to a factor the site sets. The
site's teams with their engine's objects (Kueue's, KAI Scheduler's) are the
``teams_render`` stage's (``controller/stages/teams_render``).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import copy

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import settings as teams_settings
from ansible_collections.aligned.dra.plugins.module_utils.dra import labels as dra_labels
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TEAM_LABEL = dra_labels.TEAM_LABEL
TIER_LABEL = dra_labels.TIER_LABEL
PRIORITY_ANNOTATION = "aligned.dev/priority-class"
USAGE_ANNOTATION = "aligned.dev/usage"
QUOTA_NAME = "aligned-dra-devices"
MANAGED = dra_labels.MANAGED


# -- objects -----------------------------------------------------------------------------------


def quota_resource(class_name: str) -> str:
    """The ResourceQuota name that counts the devices of one DeviceClass in a namespace."""
    return f"{class_name}.deviceclass.resource.k8s.io/devices"


def _labels(site: str, team: dict[str, Any], tiers: dict[str, Any]) -> dict[str, str]:
    labels = dict(MANAGED)
    labels.update({dra_labels.SITE_LABEL: site, TEAM_LABEL: team["name"], TIER_LABEL: team["tier"]})
    return labels


def priority_classes(conf: dict[str, Any], site: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {
                "name": tier["name"],
                "labels": dict(MANAGED, **{TIER_LABEL: key, dra_labels.SITE_LABEL: site}),
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
            # GPU memory (a MIG counter quota, engine both) is Kueue's alone: a ResourceQuota counts devices
            capped = {cls: n for cls, n in team["quotas"].items() if cls not in queued and not isinstance(n, str)}
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


def capacity_check(
    conf: dict[str, Any], plan: dict[str, Any] | None, mig: dict[str, Any] | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Quotas against capacity per class: ``(rows, problems)``.

    A MIG class (``mig``: the site's MIG, ``schedulers/mig.site`` with its ``classes``) takes its capacity from the
    MIG model instead (:func:`schedulers_mig.device_capacity`: the devices that exist at once, a bound where GPUs
    are dynamic, said in the row's ``bound`` and ``capacity_is``).

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
                continue  # an amount of capacity (Kueue): checked by Kueue's render, not in devices
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
    for cls, row in rows.items():
        found = schedulers_mig.device_capacity(mig, cls)
        if found is not None:
            row.update(found)
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
            has = f"{capacity}" + (f" ({row['capacity_is']})" if row.get("bound") else "")
            problems.append(
                f"DeviceClass {cls}: guaranteed quotas add up to {row['guaranteed']} devices, the site has "
                f"{has} and {allowed} (aligned_dra_teams.oversubscription)"
            )
    return [rows[k] for k in sorted(rows)], problems
