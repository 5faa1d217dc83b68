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

:func:`capacity_check` compares the guaranteed quotas per class with the
site's capacity from the planner (``plan.json`` ``classes``) and reports
oversubscription, which is allowed only up to a factor the site sets.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import copy
import re

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import kueue
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
TEAM_LABEL = "aligned.dev/team"
TIER_LABEL = "aligned.dev/tier"
PRIORITY_ANNOTATION = "aligned.dev/priority-class"
QUEUE_ANNOTATION = "aligned.dev/kueue-queue-name"
USAGE_ANNOTATION = "aligned.dev/usage"
QUOTA_NAME = "aligned-dra-devices"
MANAGED = {"app.kubernetes.io/managed-by": "aligned.dra"}

DEFAULT_TIERS: dict[str, dict[str, Any]] = {
    "production": {
        "name": "aligned-production",
        "value": 100000,
        "preemption_policy": "PreemptLowerPriority",
        "guaranteed": True,
        "description": "Production jobs: guaranteed quota, preempt lower tiers.",
    },
    "research": {
        "name": "aligned-research",
        "value": 10000,
        "preemption_policy": "PreemptLowerPriority",
        "guaranteed": True,
        "description": "Research jobs: guaranteed quota, preempt opportunistic jobs.",
    },
    "opportunistic": {
        "name": "aligned-opportunistic",
        "value": 100,
        "preemption_policy": "Never",
        "guaranteed": False,
        "description": "Opportunistic jobs: idle devices only, preempted by every other tier, never preempt.",
    },
}
TIER_KEYS = ("name", "value", "preemption_policy", "guaranteed", "description")
TEAM_KEYS = (
    "name",
    "namespaces",
    "labels",
    "tier",
    "templates",
    "quotas",
    "admin_access",
    "borrowing_limit",
    "lending_limit",
    "department",
    "node_group",
)
SETTINGS_KEYS = ("tiers", "teams", "oversubscription", "extended_resources", "engine", "kueue")
ENGINES = ("resourcequota", "kueue", "both")
KUEUE_KEYS = ("cohort", "node_groups", "resource_names", "what_if")
NODE_GROUP_KEYS = ("node_labels",)
WHAT_IF_KEYS = ("team", "name", "class", "devices", "tier", "running")
MAX_PRIORITY = 1000000000  # user-defined PriorityClasses stay at or below one billion
MAX_AMOUNT = 2**63 - 1  # quotas are int64 quantities in the API


_LABEL_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def is_label_name(value: object) -> bool:
    """A Kubernetes qualified name (label key, resource name): ``[prefix/]name``."""
    if not isinstance(value, str):
        return False
    prefix, sep, name = value.rpartition("/")
    if sep and not dra.is_dns_subdomain(prefix):
        return False
    return bool(_LABEL_NAME_RE.match(name))


def is_label_value(value: object) -> bool:
    return isinstance(value, str) and (value == "" or bool(_LABEL_NAME_RE.match(value)))


class TeamsError(ValueError):
    """Team settings that cannot be rendered; the message names the setting."""


def _label_map(where: str, raw: Any) -> dict[str, str]:
    """Labels (namespace or node labels) from settings, each name and value checked."""
    labels = raw or {}
    if not isinstance(labels, dict):
        raise TeamsError(f"{where} must map label names to strings")
    for label, value in labels.items():
        if not is_label_name(label):
            raise TeamsError(f"{where}: {label!r} is not a valid label name")
        if not is_label_value(value):
            raise TeamsError(f"{where}.{label}: {value!r} is not a valid label value (quote numbers)")
    return dict(labels)


def _check_keys(where: str, value: Any, known: tuple[str, ...]) -> None:
    if not isinstance(value, dict):
        raise TeamsError(f"{where} must be a mapping")
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise TeamsError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(known)})")


def _class_names(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o.get("kind") == "DeviceClass"}


def _resolve_class(where: str, key: str, classes: dict[str, Any], keys: dict[str, str]) -> str:
    """A class key (``gpu``) or DeviceClass name (``aligned-gpu``) to the DeviceClass name."""
    name = keys.get(key, key)
    if name not in classes:
        raise TeamsError(
            f"{where}: {key!r} is not a DeviceClass of this site (classes: {', '.join(sorted(classes)) or 'none'})"
        )
    return name


def settings(
    raw: dict[str, Any] | None, objects: list[dict[str, Any]], class_keys: dict[str, str] | None = None
) -> dict[str, Any]:
    """The site's team settings, checked against its rendered claim objects.

    ``class_keys`` maps the claims catalogue's class keys (``gpu``) to names
    (``aligned-gpu``), so quotas may use either.
    """
    raw = raw or {}
    _check_keys("aligned_dra_teams", raw, SETTINGS_KEYS)
    classes = _class_names(objects)
    keys = {k: v for k, v in (class_keys or {}).items() if v in classes}
    templates = {o["metadata"]["name"] for o in objects if o.get("kind") in ("ResourceClaimTemplate", "ResourceClaim")}

    tiers = copy.deepcopy(DEFAULT_TIERS)
    raw_tiers = raw.get("tiers") or {}
    if not isinstance(raw_tiers, dict):
        raise TeamsError("aligned_dra_teams.tiers must be a mapping")
    for tier, options in raw_tiers.items():
        where = f"aligned_dra_teams.tiers.{tier}"
        if options is None:  # null removes a default tier
            tiers.pop(tier, None)
            continue
        _check_keys(where, options, TIER_KEYS)
        base = tiers.get(tier) or {
            "name": f"aligned-{tier}",
            "value": 1000,
            "preemption_policy": "PreemptLowerPriority",
            "guaranteed": True,
            "description": f"Tier {tier}.",
        }
        base.update(options)
        tiers[tier] = base
    pc_names = set()
    for tier, options in tiers.items():
        where = f"aligned_dra_teams.tiers.{tier}"
        if not dra.is_dns_subdomain(options["name"]) or str(options["name"]).startswith("system-"):
            raise TeamsError(f"{where}.name {options['name']!r} must be a DNS subdomain not starting with system-")
        if options["name"] in pc_names:
            raise TeamsError(f"{where}.name {options['name']!r} is used by two tiers")
        pc_names.add(options["name"])
        value = options["value"]
        if isinstance(value, bool) or not isinstance(value, int) or not -MAX_PRIORITY <= value <= MAX_PRIORITY:
            raise TeamsError(f"{where}.value must be an integer in -{MAX_PRIORITY}..{MAX_PRIORITY}")
        if options["preemption_policy"] not in ("PreemptLowerPriority", "Never"):
            raise TeamsError(f"{where}.preemption_policy must be PreemptLowerPriority or Never")
        if not isinstance(options["guaranteed"], bool):
            raise TeamsError(f"{where}.guaranteed must be true or false")

    extended: dict[str, str] = {}
    if not isinstance(raw.get("extended_resources") or {}, dict):
        raise TeamsError("aligned_dra_teams.extended_resources must map DeviceClasses to resource names")
    for key, name in (raw.get("extended_resources") or {}).items():
        cls = _resolve_class("aligned_dra_teams.extended_resources", key, classes, keys)
        problem = claims.extended_resource_name_problem(name)
        if problem:
            raise TeamsError(
                f"aligned_dra_teams.extended_resources.{key}: {name!r} is not a domain/name resource: {problem}"
            )
        declared = (classes[cls].get("spec") or {}).get("extendedResourceName")
        if declared and declared != name:
            # Pods ask for the class's own name; a quota on another name would not count them.
            raise TeamsError(
                f"aligned_dra_teams.extended_resources.{key}: {name!r} differs from the extendedResourceName "
                f"{declared!r} of DeviceClass {cls} (aligned_dra_claims.extended_resources); leave it out or use that name"
            )
        extended[cls] = name
    for cls, obj in classes.items():  # a class that declares one itself
        declared = (obj.get("spec") or {}).get("extendedResourceName")
        if declared and cls not in extended:
            extended[cls] = declared

    factors: dict[str, float] = {}
    if not isinstance(raw.get("oversubscription") or {}, dict):
        raise TeamsError("aligned_dra_teams.oversubscription must map DeviceClasses to factors")
    for key, factor in (raw.get("oversubscription") or {}).items():
        cls = _resolve_class("aligned_dra_teams.oversubscription", key, classes, keys)
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor < 1:
            raise TeamsError(f"aligned_dra_teams.oversubscription.{key} must be a number >= 1 (got {factor!r})")
        factors[cls] = float(factor)

    engine = raw.get("engine", "resourcequota")
    if engine not in ENGINES:
        raise TeamsError(f"aligned_dra_teams.engine must be one of {', '.join(ENGINES)} (got {engine!r})")
    kueue = _kueue_settings(raw.get("kueue"), engine, classes, keys, tiers)
    node_groups = kueue["node_groups"]

    teams_raw = raw.get("teams") or []
    if not isinstance(teams_raw, list):
        raise TeamsError("aligned_dra_teams.teams must be a list")
    teams, seen_teams, seen_ns = [], set(), {}
    for index, team in enumerate(teams_raw):
        where = f"aligned_dra_teams.teams[{index}]"
        _check_keys(where, team, TEAM_KEYS)
        name = team.get("name")
        if not dra.is_dns_label(name):
            raise TeamsError(f"{where}.name {name!r} is not a DNS label")
        where = f"aligned_dra_teams.teams[{name}]"
        if name in seen_teams:
            raise TeamsError(f"{where}: two teams are named {name!r}")
        seen_teams.add(name)
        namespaces = team.get("namespaces") or [name]
        if not isinstance(namespaces, list):
            raise TeamsError(f"{where}.namespaces must be a list")
        for ns in namespaces:
            if not dra.is_dns_label(ns) or str(ns).startswith("kube-"):
                raise TeamsError(f"{where}.namespaces: {ns!r} is not a DNS label outside kube-*")
            if ns in seen_ns:
                raise TeamsError(f"{where}.namespaces: {ns!r} already belongs to team {seen_ns[ns]!r}")
            seen_ns[ns] = name
        tier = team.get("tier", "research")
        if tier not in tiers:
            raise TeamsError(f"{where}.tier {tier!r} is not one of {', '.join(sorted(tiers))}")
        labels = _label_map(f"{where}.labels", team.get("labels"))
        if ADMIN_ACCESS_LABEL in labels:
            raise TeamsError(f"{where}.labels: set admin_access: true instead of the {ADMIN_ACCESS_LABEL} label")
        admin = team.get("admin_access", False)
        if not isinstance(admin, bool):
            raise TeamsError(f"{where}.admin_access must be true or false")
        wanted = team.get("templates") or []
        for template in wanted:
            if template not in templates:
                raise TeamsError(
                    f"{where}.templates: {template!r} is not rendered for this site "
                    f"(rendered: {', '.join(sorted(templates))})"
                )
        quotas = _amounts(f"{where}.quotas", team.get("quotas"), classes, keys, engine)
        limits = {
            option: _amounts(f"{where}.{option}", team.get(option), classes, keys, engine)
            for option in ("borrowing_limit", "lending_limit")
        }
        for option, amounts in limits.items():
            if amounts and engine == "resourcequota":
                raise TeamsError(f"{where}.{option} needs engine kueue or both (a ResourceQuota cannot lend or borrow)")
            for cls in amounts:
                if cls not in quotas:
                    raise TeamsError(f"{where}.{option}: {cls} has no quota in {where}.quotas")
        department = team.get("department")
        if department is not None and not dra.is_dns_label(department):
            raise TeamsError(f"{where}.department {department!r} is not a DNS label")
        node_group = team.get("node_group")
        if node_group is not None and (not isinstance(node_group, str) or node_group not in node_groups):
            raise TeamsError(
                f"{where}.node_group {node_group!r} is not one of aligned_dra_teams.kueue.node_groups "
                f"({', '.join(sorted(node_groups)) or 'none set'})"
            )
        teams.append(
            {
                "name": name,
                "namespaces": list(namespaces),
                "labels": dict(labels),
                "tier": tier,
                "templates": list(wanted),
                "quotas": quotas,
                "admin_access": admin,
                "borrowing_limit": limits["borrowing_limit"],
                "lending_limit": limits["lending_limit"],
                "department": department,
                "node_group": node_group,
            }
        )
    if engine == "kueue":
        for team in teams:
            for cls in sorted(set(team["quotas"]) & set(extended)):
                # Pods asking for the extended resource get claims Kueue counts only with its alpha
                # KueueDRAIntegrationExtendedResource gate; without a ResourceQuota they would be uncapped.
                raise TeamsError(
                    f"aligned_dra_teams.teams[{team['name']}].quotas: {cls} has the extended resource name "
                    f"{extended[cls]!r}, whose requests Kueue does not count by default; use engine both, so "
                    "that a ResourceQuota caps them, or leave the extended resource out"
                )
    return {
        "tiers": tiers,
        "teams": teams,
        "extended_resources": extended,
        "oversubscription": factors,
        "engine": engine,
        "kueue": kueue,
    }


def _amounts(where: str, raw: Any, classes: dict[str, Any], keys: dict[str, str], engine: str) -> dict[str, int | str]:
    """``{DeviceClass: devices}``; a quantity string (GPU memory) only where Kueue counts it."""
    amounts: dict[str, int | str] = {}
    if raw is None:
        return amounts
    if not isinstance(raw, dict):
        raise TeamsError(f"{where} must map DeviceClasses to device counts")
    for key, count in raw.items():
        cls = _resolve_class(where, key, classes, keys)
        if isinstance(count, str):
            # consumable capacity: Kueue counts the memory a claim requests, a ResourceQuota only devices
            if engine != "kueue":
                raise TeamsError(
                    f"{where}.{key}: {count!r} is an amount of capacity, which only engine kueue counts "
                    f"(a ResourceQuota counts devices); give a device count or set engine: kueue"
                )
            try:
                value = dra_cel.parse_quantity(count)
                if value < 0:
                    raise ValueError("negative")
            except ValueError:
                raise TeamsError(f"{where}.{key}: {count!r} is not a non-negative Kubernetes quantity") from None
            if count.strip().isdigit():
                # "16" is a quoted device count, which as capacity would be 16 bytes of GPU memory
                raise TeamsError(
                    f"{where}.{key}: {count!r} has no unit; give a device count as a number (16) "
                    "or GPU memory with its unit (80Gi)"
                )
            if value > MAX_AMOUNT:
                raise TeamsError(f"{where}.{key}: {count!r} is larger than Kubernetes quantities go")
        elif isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_AMOUNT:
            raise TeamsError(f"{where}.{key} must be a non-negative integer (got {count!r})")
        if cls in amounts:
            raise TeamsError(f"{where}: {key!r} names {cls} a second time")
        amounts[cls] = count
    return amounts


def _kueue_settings(
    raw: Any, engine: str, classes: dict[str, Any], keys: dict[str, str], tiers: dict[str, Any]
) -> dict[str, Any]:
    """``aligned_dra_teams.kueue``: the cohort, node groups, resource names and the what-if workloads."""
    if raw is None:
        raw = {}
    _check_keys("aligned_dra_teams.kueue", raw, KUEUE_KEYS)
    if raw and engine == "resourcequota":
        raise TeamsError("aligned_dra_teams.kueue is set but engine is resourcequota; set engine: kueue or both")
    cohort = raw.get("cohort")
    if cohort is not None and not dra.is_dns_label(cohort):
        raise TeamsError(f"aligned_dra_teams.kueue.cohort {cohort!r} is not a DNS label")
    node_groups: dict[str, dict[str, Any]] = {}
    raw_groups = {} if raw.get("node_groups") is None else raw["node_groups"]
    if not isinstance(raw_groups, dict):
        raise TeamsError("aligned_dra_teams.kueue.node_groups must map node group names to settings")
    for name, options in raw_groups.items():
        where = f"aligned_dra_teams.kueue.node_groups.{name}"
        if not dra.is_dns_subdomain(name):
            raise TeamsError(f"{where}: {name!r} is not a DNS subdomain (it names a ResourceFlavor)")
        options = options or {}
        _check_keys(where, options, NODE_GROUP_KEYS)
        node_groups[name] = {"node_labels": _label_map(f"{where}.node_labels", options.get("node_labels"))}
    raw_names = {} if raw.get("resource_names") is None else raw["resource_names"]
    if not isinstance(raw_names, dict):
        raise TeamsError("aligned_dra_teams.kueue.resource_names must map DeviceClasses to resource names")
    names: dict[str, str] = {}
    for key, name in raw_names.items():
        cls = _resolve_class("aligned_dra_teams.kueue.resource_names", key, classes, keys)
        if cls in names:
            # Kueue maps a DeviceClass to exactly one logical resource
            raise TeamsError(f"aligned_dra_teams.kueue.resource_names: {key!r} names {cls} a second time")
        if not isinstance(name, str) or not is_label_name(name):
            raise TeamsError(f"aligned_dra_teams.kueue.resource_names.{key}: {name!r} is not a resource name")
        names[cls] = name
    raw_what_if = [] if raw.get("what_if") is None else raw["what_if"]
    if not isinstance(raw_what_if, list) or not all(isinstance(w, dict) for w in raw_what_if):
        raise TeamsError("aligned_dra_teams.kueue.what_if must be a list of workloads (mappings)")
    what_if = []
    for index, workload in enumerate(raw_what_if):
        where = f"aligned_dra_teams.kueue.what_if[{index}]"
        _check_keys(where, workload, WHAT_IF_KEYS)
        workload = dict(workload)
        for key in ("team", "name", "class"):
            if not isinstance(workload.get(key), str) or not workload[key]:
                raise TeamsError(f"{where}.{key} must be a name (got {workload.get(key)!r})")
        if "tier" in workload and (not isinstance(workload["tier"], str) or workload["tier"] not in tiers):
            raise TeamsError(f"{where}.tier {workload['tier']!r} is not one of {', '.join(sorted(tiers))}")
        devices = workload.get("devices", 1)
        if isinstance(devices, bool) or not isinstance(devices, (int, str)):
            raise TeamsError(f"{where}.devices must be a device count or a capacity amount (got {devices!r})")
        # a class key (gpu) or the DeviceClass name
        workload["class"] = _resolve_class(f"{where}.class", workload["class"], classes, keys)
        if not isinstance(workload.get("running", False), bool):
            raise TeamsError(f"{where}.running must be true or false")
        what_if.append(workload)
    return {"cohort": cohort, "node_groups": node_groups, "resource_names": names, "what_if": what_if}


# -- objects -----------------------------------------------------------------------------------


def quota_resource(class_name: str) -> str:
    """The ResourceQuota name that counts the devices of one DeviceClass in a namespace."""
    return f"{class_name}.deviceclass.resource.k8s.io/devices"


def _labels(site: str, team: dict[str, Any], tiers: dict[str, Any]) -> dict[str, str]:
    labels = dict(MANAGED)
    labels.update({"aligned.dev/site": site, TEAM_LABEL: team["name"], TIER_LABEL: team["tier"]})
    return labels


def priority_classes(conf: dict[str, Any], site: str) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": tier["name"], "labels": dict(MANAGED, **{TIER_LABEL: key, "aligned.dev/site": site})},
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


def team_objects(conf: dict[str, Any], site: str, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Namespaces, quotas and template copies of every team (PriorityClasses not included)."""
    by_name = {o["metadata"]["name"]: o for o in objects if o.get("kind") in ("ResourceClaimTemplate", "ResourceClaim")}
    classes = sorted(_class_names(objects))
    out = []
    for team in conf["teams"]:
        tier = conf["tiers"][team["tier"]]
        labels = _labels(site, team, conf["tiers"])
        usage = _usage(team, tier)
        for ns in team["namespaces"]:
            ns_labels = dict(team["labels"])
            ns_labels.update(labels)
            if team["admin_access"]:
                ns_labels[ADMIN_ACCESS_LABEL] = "true"
            out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": ns_labels}})
            if team["quotas"] and conf.get("engine", "resourcequota") != "kueue":
                hard = {}
                for cls, count in sorted(team["quotas"].items()):
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
) -> dict[str, Any]:
    """Everything for one site: ``{"objects", "capacity", "problems", "teams", "tiers", "minor", "engine", "kueue"}``.

    With engine ``kueue`` or ``both``, ``kueue`` holds what :func:`kueue.render`
    returns besides its objects (the manager configuration, the queues per
    team); ``in_use`` (devices per team and class in use now) adds what each
    team has idle and could lend.

    ``problems`` holds the capacity problems; invalid objects raise nothing here,
    :func:`validate_all` checks them.
    """
    conf = settings(raw_settings, claim_objects, class_keys)
    minor = dra.minor_of(kubernetes_version)
    if any(t["admin_access"] for t in conf["teams"]) and not dra.gate_enabled("DRAAdminAccess", minor, feature_gates):
        raise TeamsError(f"admin_access needs the DRAAdminAccess feature gate, which is off on Kubernetes {minor}")
    objects = priority_classes(conf, site) + team_objects(conf, site, claim_objects)
    rows, problems = capacity_check(conf, plan)
    queues = None
    if conf["engine"] != "resourcequota":
        queues = kueue.render(conf, site, claim_objects, plan, feature_gates, minor, in_use)
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
    }


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
        annotations[USAGE_ANNOTATION] += f"; workloads set the label {kueue.QUEUE_LABEL}: {queues[namespace]}"


def validate_all(objects: list[dict[str, Any]], minor: str, feature_gates: dict[str, bool] | None = None) -> list[str]:
    """Schema (strict, per minor), gates and DRA limits of every object; empty when all may be applied.

    Kueue's objects are checked against Kueue's own CRD schemas (:func:`kueue.validate_objects`).
    """
    queues = [o for o in objects if str(o.get("apiVersion", "")).startswith(kueue.API_GROUP + "/")]
    others = [o for o in objects if not str(o.get("apiVersion", "")).startswith(kueue.API_GROUP + "/")]
    return claims.validate_all(others, minor, feature_gates) + (kueue.validate_objects(queues) if queues else [])


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
        "ClusterQueue": "kueue-clusterqueue",
        "LocalQueue": "kueue-localqueue",
    }.get(obj["kind"], obj["kind"].lower())
    namespace = obj["metadata"].get("namespace")
    return f"{kind}-{namespace + '-' if namespace else ''}{obj['metadata']['name']}.yaml"


def teams_by_namespace(raw_or_conf: dict[str, Any] | None) -> dict[str, str]:
    """``{namespace: team}`` from raw settings or checked ones (for utilization)."""
    found = {}
    if not isinstance(raw_or_conf or {}, dict):
        raise TeamsError("aligned_dra_teams must be a mapping")
    teams = (raw_or_conf or {}).get("teams") or []
    if not isinstance(teams, list):
        raise TeamsError("aligned_dra_teams.teams must be a list")
    for index, team in enumerate(teams):
        where = f"aligned_dra_teams.teams[{index}]"
        if not isinstance(team, dict) or not isinstance(team.get("name"), str):
            raise TeamsError(f"{where} must be a mapping with a name")
        namespaces = team.get("namespaces") or [team["name"]]
        if not isinstance(namespaces, list) or not all(isinstance(ns, str) for ns in namespaces):
            raise TeamsError(f"{where}.namespaces must be a list of namespace names")
        for ns in namespaces:
            found[ns] = team["name"]
    return found
