# SPDX-License-Identifier: Apache-2.0
"""Team settings of a site: ``aligned_dra_teams`` read and checked against its rendered claim objects.

:func:`settings` checks the tiers (laid over :data:`DEFAULT_TIERS`), the
extended resource names and oversubscription factors per DeviceClass, the
engine, and every team (namespaces, labels, tier, templates, quotas, borrowing
and lending limits), and returns the checked settings that :mod:`render` and
the schedulers turn into objects. Kueue's part (``kueue``, a team's
``node_group`` and capacity amounts) is checked, in its turn, by
``schedulers.kueue.settings``, which raises its ``KueueError`` (a
``SchedulerError``). :func:`teams_by_namespace` reads only the namespaces of
each team. Any other setting that cannot be used raises :class:`TeamsError`,
whose message names it.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import copy

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs import settings_checks as checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import mig as kai_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import settings as kueue_settings
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"

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
DEFAULT_TIER = "research"  # a team's tier when it names none
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
    "over_quota_weight",
    "kai",
)
SETTINGS_KEYS = ("tiers", "teams", "oversubscription", "extended_resources", "engine", "kueue", "kai")
# the team keys only one engine reads (checked by that engine's module)
KAI_TEAM_KEYS = ("over_quota_weight", "kai")
MAX_PRIORITY = 1000000000  # user-defined PriorityClasses stay at or below one billion


class TeamsError(ValueError):
    """Team settings that cannot be rendered; the message names the setting."""


def _check_keys(where: str, value: Any, known: tuple[str, ...]) -> None:
    """``value`` is a mapping of ``known`` keys only."""
    checks.check_keys(where, value, known, TeamsError)


def _resolve_class(where: str, key: str, classes: dict[str, Any], keys: dict[str, str]) -> str:
    """A class key (``gpu``) or DeviceClass name (``aligned-gpu``) to the DeviceClass name."""
    return checks.resolve_class(where, key, classes, keys, TeamsError)


def class_names(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{name: DeviceClass}`` of the rendered claim objects."""
    return {o["metadata"]["name"]: o for o in objects if o.get("kind") == "DeviceClass"}


def settings(
    raw: dict[str, Any] | None, objects: list[dict[str, Any]], class_keys: dict[str, str] | None = None
) -> dict[str, Any]:
    """The site's team settings, checked against its rendered claim objects.

    ``class_keys`` maps the claims catalogue's class keys (``gpu``) to names
    (``aligned-gpu``), so quotas may use either.
    """
    raw = raw or {}
    _check_keys("aligned_dra_teams", raw, SETTINGS_KEYS)
    classes = class_names(objects)
    keys = {k: v for k, v in (class_keys or {}).items() if v in classes}
    templates = {o["metadata"]["name"] for o in objects if o.get("kind") in ("ResourceClaimTemplate", "ResourceClaim")}

    tiers = _tiers(raw.get("tiers") or {})
    extended = _extended_resources(raw.get("extended_resources") or {}, classes, keys)
    factors = _oversubscription(raw.get("oversubscription") or {}, classes, keys)

    engine = raw.get("engine", schedulers.DEFAULT_ENGINE)
    if engine not in schedulers.ENGINES:
        raise TeamsError(f"aligned_dra_teams.engine must be one of {', '.join(schedulers.ENGINES)} (got {engine!r})")
    kueue = kueue_settings.site_settings(raw.get("kueue"), engine, classes, keys, tiers)
    if not schedulers.uses_kai(engine) and raw.get("kai"):
        raise TeamsError(f"aligned_dra_teams.kai is set but engine is {engine}; set engine: kai")
    site = {
        "tiers": tiers,
        "templates": templates,
        "classes": classes,
        "keys": keys,
        "engine": engine,
        "node_groups": kueue["node_groups"],
        "mig_classes": schedulers_mig.mig_classes(objects),
    }
    teams = _teams(raw.get("teams") or [], site)
    if engine == schedulers.KUEUE:
        kueue_settings.check_extended_resources(teams, extended)
    return {
        "tiers": tiers,
        "teams": teams,
        "extended_resources": extended,
        "oversubscription": factors,
        "engine": engine,
        "kueue": kueue,
        "kai": raw.get("kai") or {},
        # the catalogue's class keys (gpu) and the rendered classes they name
        "keys": keys,
    }


def tier_classes(raw: dict[str, Any] | None) -> dict[str, str]:
    """``{tier: its PriorityClass name}`` of raw ``aligned_dra_teams`` (its ``tiers`` over the defaults)."""
    return {key: tier["name"] for key, tier in _tiers((raw or {}).get("tiers") or {}).items()}


def _tiers(raw_tiers: Any) -> dict[str, dict[str, Any]]:
    """``aligned_dra_teams.tiers`` laid over :data:`DEFAULT_TIERS` (null removes one), each tier checked."""
    tiers = copy.deepcopy(DEFAULT_TIERS)
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
    return tiers


def _extended_resources(raw: Any, classes: dict[str, Any], keys: dict[str, str]) -> dict[str, str]:
    """``{DeviceClass: extended resource name}``: the site's names, and those the classes declare themselves."""
    extended: dict[str, str] = {}
    if not isinstance(raw, dict):
        raise TeamsError("aligned_dra_teams.extended_resources must map DeviceClasses to resource names")
    for key, name in raw.items():
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
    return extended


def _oversubscription(raw: Any, classes: dict[str, Any], keys: dict[str, str]) -> dict[str, float]:
    """``{DeviceClass: factor}`` by which guaranteed quotas may exceed the class's capacity."""
    factors: dict[str, float] = {}
    if not isinstance(raw, dict):
        raise TeamsError("aligned_dra_teams.oversubscription must map DeviceClasses to factors")
    for key, factor in raw.items():
        cls = _resolve_class("aligned_dra_teams.oversubscription", key, classes, keys)
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or factor < 1:
            raise TeamsError(f"aligned_dra_teams.oversubscription.{key} must be a number >= 1 (got {factor!r})")
        factors[cls] = float(factor)
    return factors


def _teams(teams_raw: Any, site: dict[str, Any]) -> list[dict[str, Any]]:
    """``aligned_dra_teams.teams``, each team checked against the site (tiers, templates, classes, engine)."""
    if not isinstance(teams_raw, list):
        raise TeamsError("aligned_dra_teams.teams must be a list")
    teams: list[dict[str, Any]] = []
    seen_teams: set[str] = set()
    seen_ns: dict[str, str] = {}
    for index, team in enumerate(teams_raw):
        name, where, namespaces = _team_name_and_namespaces(index, team, seen_teams, seen_ns)
        tier, labels, admin, wanted = _team_tier_and_access(where, team, site["tiers"], site["templates"])
        quotas, limits = _team_amounts(where, team, site)
        department = team.get("department")
        if department is not None and not dra.is_dns_label(department):
            raise TeamsError(f"{where}.department {department!r} is not a DNS label")
        for key in KAI_TEAM_KEYS:
            if key in team and not schedulers.uses_kai(site["engine"]):
                raise TeamsError(f"{where}.{key} is read by engine kai only (engine is {site['engine']})")
        node_group = kueue_settings.team_node_group(where, team, site["node_groups"])
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
                **{key: team[key] for key in KAI_TEAM_KEYS if key in team},
            }
        )
    return teams


def team_namespaces(team: dict[str, Any]) -> Any:
    """A team's namespaces as given (``aligned_dra_teams.teams[].namespaces``), else its name alone.

    The one place that default lives: the teams stage, utilization and the jobs read a team's namespaces
    through it. Not checked here: the caller says what is wrong with a value that is not a list of names.
    """
    return team.get("namespaces") or [team.get("name")]


def _team_name_and_namespaces(
    index: int, team: Any, seen_teams: set[str], seen_ns: dict[str, str]
) -> tuple[str, str, list[str]]:
    """The team's name, where its settings are (``aligned_dra_teams.teams[name]``) and its namespaces.

    ``seen_teams`` and ``seen_ns`` (namespace: team) collect the teams before it, whose names and
    namespaces it may not take again.
    """
    where = f"aligned_dra_teams.teams[{index}]"
    _check_keys(where, team, TEAM_KEYS)
    name = team.get("name")
    if not dra.is_dns_label(name):
        raise TeamsError(f"{where}.name {name!r} is not a DNS label")
    where = f"aligned_dra_teams.teams[{name}]"
    if name in seen_teams:
        raise TeamsError(f"{where}: two teams are named {name!r}")
    seen_teams.add(name)
    namespaces = team_namespaces(team)
    if not isinstance(namespaces, list):
        raise TeamsError(f"{where}.namespaces must be a list")
    for ns in namespaces:
        if not dra.is_dns_label(ns) or str(ns).startswith("kube-"):
            raise TeamsError(f"{where}.namespaces: {ns!r} is not a DNS label outside kube-*")
        if ns in seen_ns:
            raise TeamsError(f"{where}.namespaces: {ns!r} already belongs to team {seen_ns[ns]!r}")
        seen_ns[ns] = name
    return name, where, namespaces


def _team_tier_and_access(
    where: str, team: dict[str, Any], tiers: dict[str, Any], templates: set[str]
) -> tuple[str, dict[str, str], bool, list[str]]:
    """The team's tier, namespace labels, admin access and the rendered templates it may use."""
    tier = team.get("tier", DEFAULT_TIER)
    if tier not in tiers:
        raise TeamsError(f"{where}.tier {tier!r} is not one of {', '.join(sorted(tiers))}")
    labels = checks.label_map(f"{where}.labels", team.get("labels"), TeamsError)
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
    return tier, labels, admin, wanted


def _team_amounts(
    where: str, team: dict[str, Any], site: dict[str, Any]
) -> tuple[dict[str, int | str], dict[str, dict[str, int | str]]]:
    """The team's quotas, and its borrowing and lending limits (Kueue only, on classes it has a quota for)."""
    engine = site["engine"]
    quotas = _amounts(f"{where}.quotas", team.get("quotas"), site)
    limits = {
        option: _amounts(f"{where}.{option}", team.get(option), site) for option in ("borrowing_limit", "lending_limit")
    }
    for option, amounts in limits.items():
        if amounts and engine == schedulers.RESOURCEQUOTA:
            raise TeamsError(f"{where}.{option} needs engine kueue or both (a ResourceQuota cannot lend or borrow)")
        if amounts and schedulers.uses_kai(engine) and option == "lending_limit":
            # a KAI queue lends all of its quota that it does not use, and reclaims it when it needs it
            raise TeamsError(f"{where}.lending_limit: KAI Scheduler has no lending limit; use engine kueue or both")
        for cls in amounts:
            if cls not in quotas:
                raise TeamsError(f"{where}.{option}: {cls} has no quota in {where}.quotas")
    return quotas, limits


def _amounts(where: str, raw: Any, site: dict[str, Any]) -> dict[str, int | str]:
    """``{DeviceClass: devices}``; a quantity string (GPU memory) only where Kueue counts it."""
    amounts: dict[str, int | str] = {}
    engine = site["engine"]
    if raw is None:
        return amounts
    if not isinstance(raw, dict):
        raise TeamsError(f"{where} must map DeviceClasses to device counts")
    for key, count in raw.items():
        cls = _resolve_class(where, key, site["classes"], site["keys"])
        if isinstance(count, str) and cls in site["mig_classes"]:
            _mig_memory(where, key, count, cls, engine)
        elif isinstance(count, str):
            kueue_settings.check_capacity_amount(where, key, count, engine)
        elif isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= checks.MAX_AMOUNT:
            raise TeamsError(f"{where}.{key} must be a non-negative integer (got {count!r})")
        if cls in amounts:
            raise TeamsError(f"{where}: {key!r} names {cls} a second time")
        amounts[cls] = count
    return amounts


def _mig_memory(where: str, key: str, count: str, cls: str, engine: str) -> None:
    """GPU memory on a MIG class: counted by Kueue's counters (engines kueue and both), refused elsewhere."""
    if schedulers.uses_kai(engine):
        raise TeamsError(kai_mig.quota_refusal(where, key, count, cls))
    if not schedulers.uses_kueue(engine):
        raise TeamsError(
            f"{where}.{key}: {count!r} is GPU memory on the MIG class {cls}, which only Kueue counts (engine kueue "
            "or both: a counter quota); a ResourceQuota counts devices, give a device count or set the engine"
        )
    # the quantity's own checks (a unit, not negative), as for capacity amounts
    kueue_settings.check_capacity_amount(where, key, count, schedulers.KUEUE)


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
        namespaces = team_namespaces(team)
        if not isinstance(namespaces, list) or not all(isinstance(ns, str) for ns in namespaces):
            raise TeamsError(f"{where}.namespaces must be a list of namespace names")
        for ns in namespaces:
            found[ns] = team["name"]
    return found
