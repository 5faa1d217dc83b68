# SPDX-License-Identifier: Apache-2.0
"""Which DeviceClasses Kueue counts, and how: the ``deviceClassMappings`` of a site's teams.

:func:`class_mappings` gives each DeviceClass a team has a quota on its unit
(devices, or capacity), its capacity source and its logical resource name,
refusing the amounts and names Kueue cannot count (:mod:`kueue` lists the
refusals). It reads the site's claim objects for what Kueue can count of them:
templates that request capacity (:func:`capacity_classes`), shared
ResourceClaims it cannot charge (:func:`shared_claims`), requests it would not
admit (:func:`template_refusals`, :func:`check_templates`) and tolerations of
device taints, which it does not consider (:func:`tolerates_device_taints`).
:func:`configuration` writes the mappings into the Kueue manager Configuration.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import re

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import mig as kueue_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import (
    CONFIG_API_VERSION,
    GATE_CAPACITY,
    GATE_DRA,
    GATE_PARTITIONABLE,
    GATE_QUOTA_CHECK,
    KUEUE_VERSION,
    MAX_MAPPINGS,
    RESOURCE_PREFIX,
    UNIT_CAPACITY,
    UNIT_COUNTER,
    UNIT_DEVICES,
    KueueError,
    amount,
    class_name_problem,
    gate_default,
    resource_name_problem,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_DRIVER_RE = re.compile(r"device\.driver\s*==\s*[\"']([^\"']+)[\"']")


# -- claims: what Kueue can count -----------------------------------------------------------


def _requests(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "ResourceClaimTemplate":
        spec = spec.get("spec") or {}
    return list((spec.get("devices") or {}).get("requests") or [])


def _request_classes(request: dict[str, Any]) -> list[str]:
    if request.get("exactly"):
        return [request["exactly"].get("deviceClassName")]
    return [sub.get("deviceClassName") for sub in request.get("firstAvailable") or []]


def capacity_classes(claim_objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{DeviceClass: {"capacity": name, "templates": [...]}}`` for classes a rendered template requests capacity of.

    Only ``exactly`` requests count (Kueue charges capacity for those only); the
    capacity is ``memory`` where the template requests it (the fractional GPU
    template does), else the first key of ``capacity.requests``.
    """
    found: dict[str, dict[str, Any]] = {}
    for obj in claim_objects:
        if obj.get("kind") != "ResourceClaimTemplate":
            continue
        for request in _requests(obj):
            exact = request.get("exactly") or {}
            wanted = (exact.get("capacity") or {}).get("requests") or {}
            if not wanted or not exact.get("deviceClassName"):
                continue
            name = "memory" if "memory" in wanted else sorted(wanted)[0]
            entry = found.setdefault(exact["deviceClassName"], {"capacity": name, "templates": []})
            if obj["metadata"]["name"] not in entry["templates"]:
                entry["templates"].append(obj["metadata"]["name"])
    return found


def shared_claims(claim_objects: list[dict[str, Any]]) -> dict[str, list[str]]:
    """``{DeviceClass: [ResourceClaim names]}``: claims pods share, which Kueue cannot charge."""
    found: dict[str, list[str]] = {}
    for obj in claim_objects:
        if obj.get("kind") != "ResourceClaim":
            continue
        for request in _requests(obj):
            for cls in _request_classes(request):
                if cls:
                    found.setdefault(cls, []).append(obj["metadata"]["name"])
    return found


def template_refusals(obj: dict[str, Any]) -> list[str]:
    """Why Kueue v0.19.2 would not admit a workload using this claim object; empty when it would."""
    name = obj["metadata"]["name"]
    if obj.get("kind") == "ResourceClaim":
        return [
            f"{name} is a ResourceClaim that pods share: Kueue cannot account shared ResourceClaims "
            "(it counts ResourceClaimTemplates only, so the device would be used outside the team's quota)"
        ]
    reasons = []
    for index, request in enumerate(_requests(obj)):
        where = f"{name} request {request.get('name') or index}"
        if request.get("firstAvailable"):
            reasons.append(f"{where} uses firstAvailable, which Kueue {KUEUE_VERSION} refuses")
            continue
        exact = request.get("exactly") or {}
        if exact.get("adminAccess"):
            reasons.append(f"{where} uses adminAccess, which Kueue {KUEUE_VERSION} refuses")
        if exact.get("allocationMode", "ExactCount") != "ExactCount":
            reasons.append(
                f"{where} uses allocationMode {exact.get('allocationMode')}, which Kueue {KUEUE_VERSION} refuses"
            )
    return reasons


def _class_driver(device_class: dict[str, Any]) -> str | None:
    for selector in (device_class.get("spec") or {}).get("selectors") or []:
        match = _DRIVER_RE.search((selector.get("cel") or {}).get("expression") or "")
        if match:
            return match.group(1)
    return None


def tolerates_device_taints(claim_objects: list[dict[str, Any]]) -> bool:
    """Whether a rendered ResourceClaimTemplate tolerates device taints, which Kueue does not consider."""
    return any(
        (r.get("exactly") or {}).get("tolerations") or any(s.get("tolerations") for s in r.get("firstAvailable") or [])
        for o in claim_objects
        if o.get("kind") == "ResourceClaimTemplate"
        for r in _requests(o)
    )


def _template_classes(conf: dict[str, Any], claim_objects: list[dict[str, Any]]) -> set[str]:
    """The DeviceClasses the teams' templates ask for."""
    by_name = {
        o["metadata"]["name"]: o for o in claim_objects if o.get("kind") in ("ResourceClaimTemplate", "ResourceClaim")
    }
    return {
        cls
        for team in conf["teams"]
        for name in team.get("templates") or []
        if name in by_name
        for request in _requests(by_name[name])
        for cls in _request_classes(request)
        if cls
    }


def check_templates(
    conf: dict[str, Any], claim_objects: list[dict[str, Any]], mappings: dict[str, dict[str, Any]]
) -> None:
    """Refuse admin-access teams and team templates Kueue would not admit."""
    # a mapping with a counter source lists every MIG class (kueue/mig.py)
    mapped = set(mappings) | {c for entry in mappings.values() for c in entry.get("classes") or []}
    by_name = {
        o["metadata"]["name"]: o for o in claim_objects if o.get("kind") in ("ResourceClaimTemplate", "ResourceClaim")
    }
    for team in conf["teams"]:
        where = f"aligned_dra_teams.teams[{team['name']}]"
        if team.get("admin_access"):
            raise KueueError(
                f"{where}.admin_access: the admin-access templates ask for every device (allocationMode All) with "
                f"adminAccess, and Kueue {KUEUE_VERSION} refuses workloads with either; run such monitoring "
                "without Kueue (engine resourcequota) or drop admin_access"
            )
        for name in team.get("templates") or []:
            obj = by_name.get(name)
            if obj is None:
                continue  # teams.settings refuses templates that are not rendered
            reasons = template_refusals(obj)
            if reasons:
                raise KueueError(f"{where}.templates: {'; '.join(reasons)}")
            for request in _requests(obj):
                for cls in _request_classes(request):
                    if cls and cls not in mapped:
                        raise KueueError(
                            f"{where}.templates: {name} requests DeviceClass {cls}, on which no team has a quota; "
                            "Kueue does not admit workloads whose classes are not in its deviceClassMappings: "
                            f"give some team a quota on {cls}"
                        )


# -- mappings ------------------------------------------------------------------------------


def _where_amount(conf: dict[str, Any], cls: str, option: str = "quotas") -> str:
    for team in conf["teams"]:
        if cls in (team.get(option) or {}):
            return f"aligned_dra_teams.teams[{team['name']}].{option}.{cls}"
    return f"aligned_dra_teams.teams[].{option}.{cls}"


def class_mappings(
    conf: dict[str, Any],
    claim_objects: list[dict[str, Any]],
    minor: str | None,
    feature_gates: dict[str, bool] | None,
    notes: list[str],
    mig: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """``{DeviceClass: {"resource", "unit", "capacity", "driver"}}`` for every class with a quota; notes to ``notes``.

    ``mig``: the site's MIG (``schedulers/mig.site``; None: its hosts unknown, nothing refused for them); a memory
    amount on the class of every MIG device is counted by the ``memory`` counter (``kueue/mig.py``), the entry then also has ``counter``,
    ``classes`` (every MIG class) and ``selector``.
    """
    classes = {o["metadata"]["name"]: o for o in claim_objects if o.get("kind") == "DeviceClass"}
    # the classes that select MIG devices, read from the rendered classes (also without the site's MIG facts)
    mig_classes = schedulers_mig.mig_classes(claim_objects)
    by_capacity = capacity_classes(claim_objects)
    shared = shared_claims(claim_objects)
    overrides = dict((conf.get("kueue") or {}).get("resource_names") or {})
    units, first_set = _amount_units(conf, classes)
    mappings: dict[str, dict[str, Any]] = {}
    for cls in sorted(units):
        where = _where_amount(conf, cls)
        unit = _unit(cls, units[cls], first_set)
        entry: dict[str, Any] = {"unit": unit, "capacity": None, "driver": None}
        if unit == UNIT_CAPACITY and cls in mig_classes:
            # the site's names and those the classes declare (teams.settings gathers both)
            extended = dict(conf.get("extended_resources") or {})
            used = _template_classes(conf, claim_objects)
            entry = kueue_mig.counter_entry(cls, where, claim_objects, extended, mig, minor, feature_gates, used)
        elif unit == UNIT_CAPACITY:
            entry.update(_capacity_source(conf, cls, where, classes, by_capacity, shared, minor, feature_gates))
        notes.extend(_counting_notes(cls, unit, by_capacity, shared))
        entry["resource"] = _resource_name(cls, where, overrides, entry.pop("default_resource", None))
        notes.extend(kueue_mig.counting_notes(cls, entry, mig))
        mappings[cls] = entry
    _check_resource_names(mappings, overrides, classes)
    return mappings


def _amount_units(
    conf: dict[str, Any], classes: dict[str, dict[str, Any]]
) -> tuple[dict[str, set[str]], dict[tuple[str, str], str]]:
    """Each class's units in the teams' quotas and limits, and the setting that first gave each; checks the amounts."""
    units: dict[str, set[str]] = {}
    first_set: dict[tuple[str, str], str] = {}  # (class, unit) -> the setting that first used it
    for team in conf["teams"]:
        where = f"aligned_dra_teams.teams[{team['name']}]"
        for option in ("quotas", "borrowing_limit", "lending_limit"):
            for cls, value in (team.get(option) or {}).items():
                if cls not in classes:
                    raise KueueError(
                        f"{where}.{option}.{cls}: not a DeviceClass rendered for this site "
                        f"(classes: {', '.join(sorted(classes)) or 'none'})"
                    )
                try:
                    parsed = amount(value)
                except ValueError as exc:
                    raise KueueError(f"{where}.{option}.{cls}: {exc}") from None
                if parsed < 0:
                    raise KueueError(f"{where}.{option}.{cls}: {value!r} is negative")
                if option != "quotas" and cls not in (team.get("quotas") or {}):
                    raise KueueError(f"{where}.{option}.{cls}: the team has no quota on {cls}")
                kinds = units.setdefault(cls, set())
                unit = UNIT_CAPACITY if isinstance(value, str) else UNIT_DEVICES if value != 0 else None
                if unit:
                    kinds.add(unit)
                    first_set.setdefault((cls, unit), f"{where}.{option}.{cls}")
    return units, first_set


def _unit(cls: str, kinds: set[str], first_set: dict[tuple[str, str], str]) -> str:
    """The one unit Kueue counts ``cls`` in."""
    if kinds == {UNIT_DEVICES, UNIT_CAPACITY}:
        raise KueueError(
            f"{first_set[(cls, UNIT_CAPACITY)]}: a capacity amount, while {first_set[(cls, UNIT_DEVICES)]} "
            f"is a device count; Kueue counts DeviceClass {cls} in one unit, give all of them one way"
        )
    return UNIT_CAPACITY if kinds == {UNIT_CAPACITY} else UNIT_DEVICES


def _capacity_source(
    conf: dict[str, Any],
    cls: str,
    where: str,
    classes: dict[str, dict[str, Any]],
    by_capacity: dict[str, dict[str, Any]],
    shared: dict[str, list[str]],
    minor: str | None,
    feature_gates: dict[str, bool] | None,
) -> dict[str, Any]:
    """``{"capacity", "driver"}`` of a class counted by capacity; refused where Kueue cannot count it."""
    if cls not in by_capacity:
        if cls in shared:
            raise KueueError(
                f"{where}: a capacity amount needs a ResourceClaimTemplate that requests capacity of {cls}; "
                f"this site renders the shared ResourceClaim {', '.join(shared[cls])} instead (no consumable "
                "capacity on this minor), and Kueue cannot account shared ResourceClaims; give a device count"
            )
        raise KueueError(
            f"{where}: a capacity amount needs a rendered ResourceClaimTemplate that requests capacity of "
            f"{cls} (the fractional GPU template with consumable capacity); give a device count"
        )
    if minor and not dra_gates.gate_enabled("DRAConsumableCapacity", minor, feature_gates):
        raise KueueError(
            f"{where}: Kueue counts capacity only with the Kubernetes feature gate DRAConsumableCapacity, "
            f"which is off on Kubernetes {minor}"
        )
    if (classes[cls].get("spec") or {}).get("extendedResourceName") or cls in (conf.get("extended_resources") or {}):
        raise KueueError(
            f"{where}: DeviceClass {cls} has an extended resource name, and Kueue marks extended-resource "
            "requests of a class counted by capacity inadmissible; give a device count or drop the name"
        )
    driver = _class_driver(classes[cls])
    if not driver:
        raise KueueError(f"{where}: the driver of DeviceClass {cls} cannot be read from its selectors")
    return {"capacity": by_capacity[cls]["capacity"], "driver": driver}


def _counting_notes(
    cls: str, unit: str, by_capacity: dict[str, dict[str, Any]], shared: dict[str, list[str]]
) -> list[str]:
    """What Kueue counts of ``cls`` differently than the ResourceQuotas would."""
    notes = []
    if cls in shared:
        notes.append(
            f"{cls}: this minor renders the fractional GPU as the shared ResourceClaim "
            f"{', '.join(shared[cls])}, which Kueue cannot account; pods that use it are not counted against "
            "any queue (teams must not list it; engine both keeps a ResourceQuota on the namespace)"
        )
    if unit != UNIT_CAPACITY and cls in by_capacity:
        notes.append(
            f"{cls}: counted in devices, so Kueue charges each claim of {', '.join(by_capacity[cls]['templates'])} "
            "a whole device; give the quotas as capacity amounts (engine kueue) to count GPU memory"
        )
    return notes


def _resource_name(cls: str, where: str, overrides: dict[str, str], default: str | None = None) -> str:
    """The logical resource ``cls`` maps to: ``default`` (``aligned.dev/<class>``, its dots as dashes) or its
    override."""
    problem = class_name_problem(cls)
    if problem or len(cls) > 63:
        raise KueueError(
            f"{where}: Kueue's deviceClassMappings take DeviceClass names that are label keys "
            f"(at most 63 characters); {cls!r} {problem or 'is longer'}"
        )
    # a class named like a domain (mig.aligned.dev) gives a DNS label after the prefix
    name = overrides.get(cls, default or RESOURCE_PREFIX + cls.replace(".", "-"))
    setting = f"aligned_dra_teams.kueue.resource_names.{cls}" if cls in overrides else where
    problem = resource_name_problem(name)
    if problem:
        raise KueueError(f"{setting}: {name!r} is not a Kueue resource name: {problem}")
    return name


def _check_resource_names(
    mappings: dict[str, dict[str, Any]], overrides: dict[str, str], classes: dict[str, dict[str, Any]]
) -> None:
    """Every override names a rendered class, no two classes share a resource, at most MAX_MAPPINGS mappings."""
    for cls in overrides:
        if cls not in classes:
            raise KueueError(f"aligned_dra_teams.kueue.resource_names.{cls}: not a DeviceClass rendered for this site")
    owners: dict[str, str] = {}
    pooled = {c: cls for cls, entry in mappings.items() for c in entry.get("classes") or [] if c != cls}
    for cls, entry in mappings.items():
        if cls in pooled:
            raise KueueError(
                f"aligned_dra_teams.teams[].quotas.{cls}: {cls} is counted in GPU memory with every MIG class on "
                f"the quota of {pooled[cls]}; Kueue counts a class toward one resource per counter, so give it no "
                f"quota of its own"
            )
        if entry["resource"] in owners:
            raise KueueError(
                f"aligned_dra_teams.kueue.resource_names: {owners[entry['resource']]} and {cls} both map to "
                f"{entry['resource']!r}; quotas are per DeviceClass, so each needs a resource of its own"
            )
        owners[entry["resource"]] = cls
    if len(mappings) > MAX_MAPPINGS:
        raise KueueError(
            f"aligned_dra_teams.teams: quotas on {len(mappings)} DeviceClasses; Kueue takes at most {MAX_MAPPINGS} "
            "deviceClassMappings"
        )


def check_gates_exist(mappings: dict[str, dict[str, Any]], kueue_minor: str) -> None:
    """A capacity source needs a gate that Kueue ``kueue_minor`` has (v0.19 on): Kueue does not start with an
    unknown gate."""
    for cls, entry in sorted(mappings.items()):
        if entry["capacity"] and gate_default(GATE_CAPACITY, kueue_minor) is None:
            raise KueueError(
                f"aligned_dra_teams.teams[].quotas.{cls}: an amount of capacity needs {GATE_CAPACITY}, which Kueue "
                f"{kueue_minor} (aligned_dra_teams.kueue.version) does not have (v0.19 on); give device counts"
            )


# -- the manager Configuration --------------------------------------------------------------


def configuration(mappings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The Kueue manager Configuration fragment: the feature gates and one deviceClassMapping per class."""
    gates = {GATE_DRA: True, GATE_QUOTA_CHECK: True}
    entries = []
    for cls, entry in sorted(mappings.items(), key=lambda item: item[1]["resource"]):
        mapping: dict[str, Any] = {"name": entry["resource"], "deviceClassNames": list(entry.get("classes") or [cls])}
        if entry["unit"] == UNIT_COUNTER:
            gates[GATE_PARTITIONABLE] = True
            mapping["sources"] = [kueue_mig.source(entry)]
        elif entry["unit"] == UNIT_CAPACITY:
            gates[GATE_CAPACITY] = True
            expression = f'device.driver == "{entry["driver"]}" && device.allowMultipleAllocations == true'
            mapping["sources"] = [
                {
                    "capacity": {
                        "name": entry["capacity"],
                        "driver": entry["driver"],
                        "deviceSelector": {"cel": {"expression": expression}},
                    }
                }
            ]
        entries.append(mapping)
    resources: dict[str, Any] = {"quotaCheckStrategy": "IgnoreUndeclared"}
    if entries:
        resources["deviceClassMappings"] = entries
    return {"apiVersion": CONFIG_API_VERSION, "kind": "Configuration", "featureGates": gates, "resources": resources}
