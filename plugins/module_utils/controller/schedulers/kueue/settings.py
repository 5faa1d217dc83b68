# SPDX-License-Identifier: Apache-2.0
"""The Kueue settings of a site and its teams, read and checked (engines ``kueue`` and ``both``).

``aligned_dra_teams.kueue`` (:func:`site_settings`): ``cohort`` (the site's
Cohort), ``node_groups`` (``{name: {node_labels}}``, a ResourceFlavor each),
``resource_names`` (``{DeviceClass: the logical resource Kueue counts it as}``),
``what_if`` (the workloads the admission what-if admits) and ``version`` (the
site's Kueue, ``0.18`` or ``0.19``, default the embedded schemas' minor: which
feature gates are off by default there, :func:`kueue_minor`). Per team:
``node_group`` (:func:`team_node_group`, one of those node groups) and quotas
or limits given as an amount of capacity (:func:`check_capacity_amount`: GPU
memory, which only Kueue counts). Across the teams, engine ``kueue`` alone
refuses a quota on a class with an extended resource name
(:func:`check_extended_resources`). Every problem raises
:class:`api.KueueError` naming the setting.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs import settings_checks as checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import (
    DEFAULT_KUEUE_MINOR,
    KUEUE_MINORS,
    KueueError,
    kueue_minor,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import is_label_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SITE_KEYS = ("cohort", "node_groups", "resource_names", "what_if", "version")
NODE_GROUP_KEYS = ("node_labels",)
WHAT_IF_KEYS = ("team", "name", "class", "devices", "tier", "running")


def site_settings(
    raw: Any, engine: str, classes: dict[str, Any], keys: dict[str, str], tiers: dict[str, Any]
) -> dict[str, Any]:
    """``aligned_dra_teams.kueue``: the cohort, node groups, resource names and the what-if workloads.

    ``classes`` are the site's DeviceClasses by name, ``keys`` the claims catalogue's class keys
    (``gpu``) to their names, ``tiers`` the checked tiers a what-if workload may name.
    """
    if raw is None:
        raw = {}
    checks.check_keys("aligned_dra_teams.kueue", raw, SITE_KEYS, KueueError)
    if raw and not schedulers.uses_kueue(engine):
        raise KueueError(f"aligned_dra_teams.kueue is set but engine is {engine}; set engine: kueue or both")
    cohort = raw.get("cohort")
    if cohort is not None and not dra.is_dns_label(cohort):
        raise KueueError(f"aligned_dra_teams.kueue.cohort {cohort!r} is not a DNS label")
    return {
        "cohort": cohort,
        "node_groups": _node_groups(raw),
        "resource_names": _resource_names(raw, classes, keys),
        "what_if": _what_if(raw, classes, keys, tiers),
        "minor": _minor(raw.get("version")),
    }


def _minor(version: Any) -> str:
    """``aligned_dra_teams.kueue.version`` as a Kueue minor (``0.19`` unset); refused outside :data:`KUEUE_MINORS`."""
    if version is None:
        return DEFAULT_KUEUE_MINOR
    minor = kueue_minor(version) if isinstance(version, str) else None
    if minor not in KUEUE_MINORS:
        raise KueueError(
            f"aligned_dra_teams.kueue.version {version!r}: give the site's Kueue as a string, one of "
            f"{', '.join(KUEUE_MINORS)} (or a release such as v0.19.2); Kueue counts DRA devices in ClusterQueues "
            "from v0.18 on"
        )
    return minor


def _node_groups(raw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    node_groups: dict[str, dict[str, Any]] = {}
    raw_groups = {} if raw.get("node_groups") is None else raw["node_groups"]
    if not isinstance(raw_groups, dict):
        raise KueueError("aligned_dra_teams.kueue.node_groups must map node group names to settings")
    for name, options in raw_groups.items():
        where = f"aligned_dra_teams.kueue.node_groups.{name}"
        if not dra.is_dns_subdomain(name):
            raise KueueError(f"{where}: {name!r} is not a DNS subdomain (it names a ResourceFlavor)")
        options = options or {}
        checks.check_keys(where, options, NODE_GROUP_KEYS, KueueError)
        node_groups[name] = {
            "node_labels": checks.label_map(f"{where}.node_labels", options.get("node_labels"), KueueError)
        }
    return node_groups


def _resource_names(raw: dict[str, Any], classes: dict[str, Any], keys: dict[str, str]) -> dict[str, str]:
    raw_names = {} if raw.get("resource_names") is None else raw["resource_names"]
    if not isinstance(raw_names, dict):
        raise KueueError("aligned_dra_teams.kueue.resource_names must map DeviceClasses to resource names")
    names: dict[str, str] = {}
    for key, name in raw_names.items():
        cls = checks.resolve_class("aligned_dra_teams.kueue.resource_names", key, classes, keys, KueueError)
        if cls in names:
            # Kueue maps a DeviceClass to exactly one logical resource
            raise KueueError(f"aligned_dra_teams.kueue.resource_names: {key!r} names {cls} a second time")
        if not isinstance(name, str) or not is_label_name(name):
            raise KueueError(f"aligned_dra_teams.kueue.resource_names.{key}: {name!r} is not a resource name")
        names[cls] = name
    return names


def _what_if(
    raw: dict[str, Any], classes: dict[str, Any], keys: dict[str, str], tiers: dict[str, Any]
) -> list[dict[str, Any]]:
    raw_what_if = [] if raw.get("what_if") is None else raw["what_if"]
    if not isinstance(raw_what_if, list) or not all(isinstance(w, dict) for w in raw_what_if):
        raise KueueError("aligned_dra_teams.kueue.what_if must be a list of workloads (mappings)")
    what_if = []
    for index, workload in enumerate(raw_what_if):
        where = f"aligned_dra_teams.kueue.what_if[{index}]"
        checks.check_keys(where, workload, WHAT_IF_KEYS, KueueError)
        workload = dict(workload)
        for key in ("team", "name", "class"):
            if not isinstance(workload.get(key), str) or not workload[key]:
                raise KueueError(f"{where}.{key} must be a name (got {workload.get(key)!r})")
        if "tier" in workload and (not isinstance(workload["tier"], str) or workload["tier"] not in tiers):
            raise KueueError(f"{where}.tier {workload['tier']!r} is not one of {', '.join(sorted(tiers))}")
        devices = workload.get("devices", 1)
        if isinstance(devices, bool) or not isinstance(devices, (int, str)):
            raise KueueError(f"{where}.devices must be a device count or a capacity amount (got {devices!r})")
        # a class key (gpu) or the DeviceClass name
        workload["class"] = checks.resolve_class(f"{where}.class", workload["class"], classes, keys, KueueError)
        if not isinstance(workload.get("running", False), bool):
            raise KueueError(f"{where}.running must be true or false")
        what_if.append(workload)
    return what_if


def team_node_group(where: str, team: dict[str, Any], node_groups: dict[str, Any]) -> str | None:
    """A team's ``node_group``: none, or one of ``aligned_dra_teams.kueue.node_groups``."""
    node_group = team.get("node_group")
    if node_group is not None and (not isinstance(node_group, str) or node_group not in node_groups):
        raise KueueError(
            f"{where}.node_group {node_group!r} is not one of aligned_dra_teams.kueue.node_groups "
            f"({', '.join(sorted(node_groups)) or 'none set'})"
        )
    return node_group


def check_capacity_amount(where: str, key: str, count: str, engine: str) -> None:
    """A quota or limit given as an amount of capacity (``80Gi`` of GPU memory): engine ``kueue`` only.

    ``where`` names the amounts (``aligned_dra_teams.teams[t].quotas``), ``key`` the class as given.
    """
    # consumable capacity: Kueue counts the memory a claim requests, a ResourceQuota only devices
    if engine != schedulers.KUEUE:
        raise KueueError(
            f"{where}.{key}: {count!r} is an amount of capacity, which only engine kueue counts "
            f"(a ResourceQuota counts devices); give a device count or set engine: kueue"
        )
    try:
        value = dra_cel.parse_quantity(count)
        if value < 0:
            raise ValueError("negative")
    except ValueError:
        raise KueueError(f"{where}.{key}: {count!r} is not a non-negative Kubernetes quantity") from None
    if count.strip().isdigit():
        # "16" is a quoted device count, which as capacity would be 16 bytes of GPU memory
        raise KueueError(
            f"{where}.{key}: {count!r} has no unit; give a device count as a number (16) "
            "or GPU memory with its unit (80Gi)"
        )
    if value > checks.MAX_AMOUNT:
        raise KueueError(f"{where}.{key}: {count!r} is larger than Kubernetes quantities go")


def check_extended_resources(teams: list[dict[str, Any]], extended: dict[str, str]) -> None:
    """Engine kueue alone: no quota on a class with an extended resource name (Kueue does not count those).

    ``teams`` are the checked teams, ``extended`` the site's ``{DeviceClass: extended resource name}``.
    """
    for team in teams:
        for cls in sorted(set(team["quotas"]) & set(extended)):
            # Pods asking for the extended resource get claims Kueue counts only with its alpha
            # KueueDRAIntegrationExtendedResource gate; without a ResourceQuota they would be uncapped.
            raise KueueError(
                f"aligned_dra_teams.teams[{team['name']}].quotas: {cls} has the extended resource name "
                f"{extended[cls]!r}, whose requests Kueue does not count by default; use engine both, so "
                "that a ResourceQuota caps them, or leave the extended resource out"
            )
