# SPDX-License-Identifier: Apache-2.0
"""Kueue queues for a site's teams: cohorts, flavors, ClusterQueues, LocalQueues, priorities.

The ``teams`` stage can enforce device quotas with ResourceQuotas, with Kueue
(v0.19.2, API ``kueue.x-k8s.io/v1beta2``) or both (``aligned_dra_teams.engine``).
:func:`render` turns the checked team settings (:func:`teams.settings`) and the
site's claim objects (:mod:`claims`) into:

- one ``Cohort`` for the site (``aligned_dra_teams.kueue.cohort``, default
  ``aligned-<site>``) and one per department, named ``<site cohort>-<department>``,
  whose ``parentName`` is the site cohort. No cohort carries quota or limits of
  its own: every device quota sits in a ClusterQueue;
- one ``ResourceFlavor`` per node group, ``<site>-<group>`` with the group's
  ``nodeLabels`` (Kueue adds them to the pods' node selectors). Without node
  groups the site has one flavor, ``<site>-default``, without labels, and no
  team may name a node group; with node groups every team must name one;
- one ``ClusterQueue`` per team, named like the team, selecting its namespaces
  (``kubernetes.io/metadata.name In [...]``), in its department's cohort or the
  site cohort. One resource group covers every mapped DeviceClass (sorted) and
  lists every flavor of the site, the team's own first (Kueue tries flavors in
  order). On the team's flavor ``nominalQuota`` is its quota *times its namespace
  count*: the ResourceQuota engine grants the quota per namespace, a ClusterQueue
  serves all the team's namespaces at once, so the same settings give the team
  the same total either way. On the other flavors ``nominalQuota`` is 0.
  ``borrowingLimit`` (``borrowing_limit``, a team-wide amount; absent: no limit)
  is set on every flavor, since Kueue limits borrowing per flavor and resource;
  ``lendingLimit`` (``lending_limit``, team-wide, at most the nominal quota) only
  on the team's flavor, the only one with quota to lend. Teams of a tier that is
  not ``guaranteed`` (opportunistic) get ``nominalQuota`` 0 and a
  ``borrowingLimit`` of their quota (times namespaces) on every flavor: they run
  on idle devices only and are the first to be reclaimed; they may not set
  ``borrowing_limit`` or a non-zero ``lending_limit``;
- one ``LocalQueue`` per team namespace, named like the team (workloads set the
  label ``kueue.x-k8s.io/queue-name: <team>``);
- one ``WorkloadPriorityClass`` per tier, with the name and value of the tier's
  ``PriorityClass``.

Preemption follows the tier (:func:`preemption`): a guaranteed tier reclaims its
lent quota with ``reclaimWithinCohort: Any``, because Kueue's ``LowerPriority``
would let a borrower of a higher tier keep a lower tier's *guaranteed* quota for
as long as it runs; ``PreemptLowerPriority`` tiers preempt lower priorities in
their own queue (``withinClusterQueue: LowerPriority``) and, when they borrow,
borrowers of lower tiers in the cohort (``borrowWithinCohort: LowerPriority``
with ``maxPriorityThreshold`` the value of the next lower tier, so workloads of
other priority classes between two tiers are not preempted by borrowers); a
``Never`` tier gets ``Never`` everywhere (a guaranteed ``Never`` tier then gets
its lent quota back only as the borrowers finish). A non-guaranteed tier with
``PreemptLowerPriority`` has ``reclaimWithinCohort: LowerPriority`` (it has no
nominal quota to reclaim; Kueue allows ``borrowWithinCohort`` only with it).

The Kueue manager ``Configuration`` fragment (``configuration``) turns on
``KueueDRAIntegration`` (and ``KueueDRAIntegrationConsumableCapacity`` when a
class is counted by capacity), sets ``resources.quotaCheckStrategy:
IgnoreUndeclared`` (the ClusterQueues cover devices only: CPU and memory of the
same workloads are not held back by them) and maps every DeviceClass any team
has a quota on to one logical resource (``resources.deviceClassMappings``):
``aligned.dev/<class>`` or ``aligned_dra_teams.kueue.resource_names.<class>``.

A class is counted in devices unless every quota and limit on it is a quantity
string (engine ``kueue`` only) *and* a rendered ResourceClaimTemplate requests
capacity from it (the fractional GPU template with consumable capacity): then
the mapping gets a ``capacity`` source (the capacity the template requests,
``memory``; the class's driver; the selector ``device.driver == ... &&
device.allowMultipleAllocations == true``, KEP-2941's mitigation against
charging a share of a device that is allocated whole) and the quota counts GPU
memory. A whole-GPU request on that class is charged what kube-scheduler
allocates to it: the device's request policy default (KEP-2941 Consumable
Capacity, Processing Flow 7). A fractional template on a class counted in
devices is charged one whole device per claim (never less than it uses).

Refused at render time (:class:`KueueError`, naming the setting), each because
Kueue v0.19.2 (commit 8eab6877, ``pkg/dra``) would not admit the workloads or
could not count them (KEP-2941 sections in brackets):

- a team template that is a ``ResourceClaim`` (the shared fractional GPU a site
  renders without consumable capacity): Kueue accounts ResourceClaimTemplates
  only; v0.19.2 charges nothing for a pod's ResourceClaim ("ResourceClaims are not
  supported", Notes/Constraints; Drawbacks);
- a capacity amount (quantity string) on a class without a consumable-capacity
  template, in particular one whose fractional template fell back to the shared
  claim (same reason); amounts mixing device counts and capacity on one class;
- a team template with ``firstAvailable`` (the pairs fallback templates):
  "FirstAvailable device selection is not supported" (Non-Goals; GA criteria);
- ``admin_access`` teams: their templates use ``adminAccess`` and
  ``allocationMode: All``; v0.19.2 refuses both ("AdminAccess is not supported",
  "AllocationMode 'All' is not supported"; Risks and Mitigations 2-3), and
  any other team template with either;
- a team template requesting a DeviceClass that no team has a quota on: Kueue
  marks workloads with unmapped classes inadmissible (Workload Processing Flow 4);
- a capacity source on a class with an extended resource name: extended
  resource requests of a class with sources are inadmissible (Consumable
  Capacity, Path Interactions), and a capacity source where the Kubernetes gate
  ``DRAConsumableCapacity`` is off (Design Details, feature gates);
- a DeviceClass name that is not a qualified name of at most 63 characters, a
  logical name that is invalid, native (``cpu``, ``memory``...) or in
  ``kubernetes.io``, two classes on one logical name (quotas are per class;
  Kueue would add them up), more than 16 mappings (Device Class Mapping
  Uniqueness; ``pkg/config/validation.go``);
- lending above the nominal quota, limits on classes without a mapping, node
  groups without labels or with more than 8 (a ResourceFlavor's limit).

Not refused, noted in ``notes``: device taint tolerations in templates (Kueue
does not consider taints when it matches devices, Non-Goals); Kueue's CEL check of
template selectors against ResourceSlices happens at admission, not here;
Topology Aware Scheduling is not used (it does not work with DRA).

:func:`validate_objects` checks the objects against Kueue's CRD schemas
(:mod:`kueue_schemas`), strictly, the CRDs' CEL rules (except transition rules,
which only apply to updates) and the rules of Kueue's validating webhook that
the schema does not carry; the Configuration by hand. :func:`what_if` models
admission and preemption in a cohort for a list of workloads.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import copy
import functools
import re
from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import kueue_schemas
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

API_GROUP = "kueue.x-k8s.io"
API_VERSION = API_GROUP + "/v1beta2"
CONFIG_API_VERSION = "config.kueue.x-k8s.io/v1beta2"
KUEUE_VERSION = kueue_schemas.KUEUE_VERSION
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
TEAM_LABEL = "aligned.dev/team"
TIER_LABEL = "aligned.dev/tier"
SITE_LABEL = "aligned.dev/site"
MANAGED = {"app.kubernetes.io/managed-by": "aligned.dra"}
RESOURCE_PREFIX = "aligned.dev/"
GATE_DRA = "KueueDRAIntegration"
GATE_CAPACITY = "KueueDRAIntegrationConsumableCapacity"
GATE_QUOTA_CHECK = "QuotaCheckStrategy"
KNOWN_GATES = (
    GATE_DRA,
    GATE_CAPACITY,
    GATE_QUOTA_CHECK,
    "KueueDRAIntegrationExtendedResource",
    "KueueDRAIntegrationPartitionableDevices",
    "KueueDRARejectWorkloadsWhenDRADisabled",
)
MAX_MAPPINGS = 16  # deviceClassMappings
MAX_CLASSES_PER_MAPPING = 8
MAX_NODE_LABELS = 8  # ResourceFlavor.spec.nodeLabels
INT32 = (-(2**31), 2**31 - 1)
NATIVE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "storage", "pods")
UNIT_DEVICES = "devices"
UNIT_CAPACITY = "capacity"

_DRIVER_RE = re.compile(r"device\.driver\s*==\s*[\"']([^\"']+)[\"']")
_QUALIFIED_PART_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


class KueueError(ValueError):
    """Team settings Kueue cannot serve; the message names the setting."""


# -- amounts ------------------------------------------------------------------------------


def amount(value: Any) -> Fraction:
    """A device count (int) or capacity (Kubernetes quantity string) as an exact number."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an amount")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, Fraction):
        return value
    if isinstance(value, str):
        return dra_cel.parse_quantity(value)
    raise ValueError(f"{value!r} is not an amount (an integer or a Kubernetes quantity string)")


_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def quantity_text(value: Fraction) -> str:
    """The shortest exact quantity string of ``value`` (binary suffixes first: memory)."""
    if value.denominator == 1:
        number = value.numerator
        if number == 0:
            return "0"
        for suffix, factor in _BINARY_SUFFIXES:
            if number % factor == 0:
                return f"{number // factor}{suffix}"
        return str(number)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    raise ValueError(f"{value} has no exact quantity string")


def _out(value: Fraction | None, unit: str) -> int | str | None:
    """An amount as it appears in objects and rows: an int (devices) or a quantity string (capacity)."""
    if value is None:
        return None
    if unit == UNIT_DEVICES and value.denominator == 1:
        return int(value)
    return quantity_text(value)


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


# -- names ---------------------------------------------------------------------------------


def resource_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a deviceClassMappings name (Kueue: a label key), or None."""
    if not isinstance(name, str) or not name:
        return "must be a non-empty string"
    if len(name) > 253:
        return "must be at most 253 characters"
    prefix, sep, part = name.rpartition("/")
    if sep and not dra.is_dns_subdomain(prefix):
        return "the prefix before / must be a DNS subdomain"
    if not dra.is_dns_label(part):
        # Kueue's Configuration: an optional DNS subdomain prefix, then a DNS label
        return "the name after the prefix must be a DNS label (at most 63 lower-case letters, digits and '-')"
    if prefix in ("kubernetes.io", "k8s.io") or prefix.endswith((".kubernetes.io", ".k8s.io")):
        return "the kubernetes.io and k8s.io prefixes are reserved for Kubernetes' own resources"
    if not sep and (name in NATIVE_RESOURCES or name.startswith(("hugepages-", "requests."))):
        return "is a resource of the pods themselves, which Kueue counts from their requests"
    return None


def site_cohort(conf: dict[str, Any], site: str) -> str:
    return ((conf.get("kueue") or {}).get("cohort")) or f"aligned-{site}"


def _check_name(where: str, name: str, what: str) -> str:
    if not dra.is_dns_subdomain(name):
        raise KueueError(f"{where}: {what} {name!r} is not a DNS subdomain")
    return name


def _labels(site: str, **extra: str) -> dict[str, str]:
    labels = dict(MANAGED)
    labels[SITE_LABEL] = site
    labels.update(extra)
    return labels


# -- preemption ----------------------------------------------------------------------------


def preemption(tiers: dict[str, dict[str, Any]], tier_key: str) -> dict[str, Any]:
    """The ClusterQueue ``preemption`` of a team of ``tier_key`` (see the module docstring)."""
    tier = tiers[tier_key]
    if tier["preemption_policy"] == "Never":
        return {
            "reclaimWithinCohort": "Never",
            "withinClusterQueue": "Never",
            "borrowWithinCohort": {"policy": "Never"},
        }
    lower = [t["value"] for t in tiers.values() if t["value"] < tier["value"]]
    borrow: dict[str, Any] = {"policy": "Never"}
    if lower:
        borrow = {"policy": "LowerPriority", "maxPriorityThreshold": max(lower)}
    return {
        "reclaimWithinCohort": "Any" if tier["guaranteed"] else "LowerPriority",
        "withinClusterQueue": "LowerPriority",
        "borrowWithinCohort": borrow,
    }


# -- render --------------------------------------------------------------------------------


def _where_amount(conf: dict[str, Any], cls: str, option: str = "quotas") -> str:
    for team in conf["teams"]:
        if cls in (team.get(option) or {}):
            return f"aligned_dra_teams.teams[{team['name']}].{option}.{cls}"
    return f"aligned_dra_teams.teams[].{option}.{cls}"


def _mappings(
    conf: dict[str, Any],
    claim_objects: list[dict[str, Any]],
    minor: str | None,
    feature_gates: dict[str, bool] | None,
    notes: list[str],
) -> dict[str, dict[str, Any]]:
    """``{DeviceClass: {"resource", "unit", "capacity", "driver"}}`` for every class with a quota."""
    classes = {o["metadata"]["name"]: o for o in claim_objects if o.get("kind") == "DeviceClass"}
    by_capacity = capacity_classes(claim_objects)
    shared = shared_claims(claim_objects)
    overrides = dict((conf.get("kueue") or {}).get("resource_names") or {})
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
    mappings: dict[str, dict[str, Any]] = {}
    for cls in sorted(units):
        kinds = units[cls]
        where = _where_amount(conf, cls)
        if kinds == {UNIT_DEVICES, UNIT_CAPACITY}:
            raise KueueError(
                f"{first_set[(cls, UNIT_CAPACITY)]}: a capacity amount, while {first_set[(cls, UNIT_DEVICES)]} "
                f"is a device count; Kueue counts DeviceClass {cls} in one unit, give all of them one way"
            )
        unit = UNIT_CAPACITY if kinds == {UNIT_CAPACITY} else UNIT_DEVICES
        entry: dict[str, Any] = {"unit": unit, "capacity": None, "driver": None}
        if unit == UNIT_CAPACITY:
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
            if minor and not dra.gate_enabled("DRAConsumableCapacity", minor, feature_gates):
                raise KueueError(
                    f"{where}: Kueue counts capacity only with the Kubernetes feature gate DRAConsumableCapacity, "
                    f"which is off on Kubernetes {minor}"
                )
            if (classes[cls].get("spec") or {}).get("extendedResourceName") or cls in (
                conf.get("extended_resources") or {}
            ):
                raise KueueError(
                    f"{where}: DeviceClass {cls} has an extended resource name, and Kueue marks extended-resource "
                    "requests of a class counted by capacity inadmissible; give a device count or drop the name"
                )
            driver = _class_driver(classes[cls])
            if not driver:
                raise KueueError(f"{where}: the driver of DeviceClass {cls} cannot be read from its selectors")
            entry.update(capacity=by_capacity[cls]["capacity"], driver=driver)
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
        problem = resource_name_problem(cls)
        if problem or len(cls) > 63:
            raise KueueError(
                f"{where}: Kueue's deviceClassMappings take DeviceClass names that are label keys "
                f"(at most 63 characters); {cls!r} {problem or 'is longer'}"
            )
        name = overrides.get(cls, RESOURCE_PREFIX + cls)
        setting = f"aligned_dra_teams.kueue.resource_names.{cls}" if cls in overrides else where
        problem = resource_name_problem(name)
        if problem:
            raise KueueError(f"{setting}: {name!r} is not a Kueue resource name: {problem}")
        entry["resource"] = name
        mappings[cls] = entry
    for cls in overrides:
        if cls not in classes:
            raise KueueError(f"aligned_dra_teams.kueue.resource_names.{cls}: not a DeviceClass rendered for this site")
    owners: dict[str, str] = {}
    for cls, entry in mappings.items():
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
    return mappings


def _flavors(conf: dict[str, Any], site: str) -> dict[str | None, dict[str, Any]]:
    """``{node group or None: {"name", "node_labels"}}``."""
    groups = (conf.get("kueue") or {}).get("node_groups") or {}
    if not groups:
        name = _check_name("aligned_dra_teams.kueue", f"{site}-default", "the default ResourceFlavor name")
        return {None: {"name": name, "node_labels": {}}}
    out: dict[str | None, dict[str, Any]] = {}
    for group in sorted(groups):
        where = f"aligned_dra_teams.kueue.node_groups.{group}"
        labels = (groups[group] or {}).get("node_labels") or {}
        if not labels:
            raise KueueError(f"{where}.node_labels: a node group needs at least one node label")
        if len(labels) > MAX_NODE_LABELS:
            raise KueueError(f"{where}.node_labels: {len(labels)} labels, a ResourceFlavor takes {MAX_NODE_LABELS}")
        out[group] = {"name": _check_name(where, f"{site}-{group}", "the ResourceFlavor name"), "node_labels": labels}
    return out


def _team_amounts(
    conf: dict[str, Any], team: dict[str, Any], mappings: dict[str, dict[str, Any]]
) -> dict[str, dict[str, Fraction | None]]:
    """Per mapped class: ``nominal``, ``borrow`` (None: no limit) and ``lend`` (None: everything)."""
    where = f"aligned_dra_teams.teams[{team['name']}]"
    guaranteed = conf["tiers"][team["tier"]]["guaranteed"]
    count = len(team["namespaces"])
    quotas = team.get("quotas") or {}
    borrowing = team.get("borrowing_limit") or {}
    lending = team.get("lending_limit") or {}
    out = {}
    for cls in mappings:
        quota = amount(quotas.get(cls, 0)) * count
        if guaranteed:
            nominal = quota
            borrow = amount(borrowing[cls]) if cls in borrowing else None
        else:
            if cls in borrowing:
                raise KueueError(
                    f"{where}.borrowing_limit.{cls}: tier {team['tier']} is not guaranteed, its quota "
                    f"({_out(quota, mappings[cls]['unit'])}) is already its borrowing limit; drop the entry"
                )
            nominal, borrow = Fraction(0), quota
        lend = amount(lending[cls]) if cls in lending else None
        if lend is not None and lend > nominal:
            unit = mappings[cls]["unit"]
            raise KueueError(
                f"{where}.lending_limit.{cls}: {_out(lend, unit)} is above the team's nominal quota "
                f"{_out(nominal, unit)}"
                + (
                    f" ({_out(amount(quotas.get(cls, 0)), unit)} per namespace x {count} namespaces)"
                    if guaranteed
                    else f" (tier {team['tier']} is not guaranteed: no nominal quota to lend)"
                )
            )
        out[cls] = {"nominal": nominal, "borrow": borrow, "lend": lend}
    return out


def _check_templates(
    conf: dict[str, Any], claim_objects: list[dict[str, Any]], mappings: dict[str, dict[str, Any]]
) -> None:
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
                    if cls and cls not in mappings:
                        raise KueueError(
                            f"{where}.templates: {name} requests DeviceClass {cls}, on which no team has a quota; "
                            "Kueue does not admit workloads whose classes are not in its deviceClassMappings: "
                            f"give some team a quota on {cls}"
                        )


def _capacity_rows(
    conf: dict[str, Any],
    plan: dict[str, Any] | None,
    mappings: dict[str, dict[str, Any]],
    amounts: dict[str, dict[str, dict[str, Fraction | None]]],
) -> tuple[list[dict[str, Any]], list[str]]:
    capacities = ((plan or {}).get("classes")) or {}
    rows, problems = [], []
    for cls, entry in mappings.items():
        unit = entry["unit"]
        nominal = sum((amounts[t["name"]][cls]["nominal"] for t in conf["teams"]), Fraction(0))
        borrow_only = sum(
            (
                amounts[t["name"]][cls]["borrow"] or Fraction(0)
                for t in conf["teams"]
                if not conf["tiers"][t["tier"]]["guaranteed"]
            ),
            Fraction(0),
        )
        factor = float((conf.get("oversubscription") or {}).get(cls, 1.0))
        row: dict[str, Any] = {
            "class": cls,
            "resource": entry["resource"],
            "unit": unit,
            "capacity": None,
            "nominal": _out(nominal, unit),
            "borrow_only": _out(borrow_only, unit),
            "factor": factor,
            "status": "unknown",
        }
        if unit == UNIT_CAPACITY:
            row["reason"] = "quotas count capacity; the plan counts devices"
        elif cls in capacities and (capacities[cls] or {}).get("devices") is not None:
            capacity = int(capacities[cls]["devices"])
            row["capacity"] = capacity
            if nominal <= capacity:
                row["status"] = "ok"
            elif nominal <= capacity * Fraction(factor):
                row["status"] = "oversubscribed"
            else:
                row["status"] = "over_limit"
                allowed = "no oversubscription is allowed" if factor == 1.0 else f"the factor is {factor:g}"
                problems.append(
                    f"DeviceClass {cls}: the ClusterQueues' nominal quotas in cohort add up to {_out(nominal, unit)} "
                    f"devices, the site has {capacity} and {allowed} (aligned_dra_teams.oversubscription)"
                )
        rows.append(row)
    return rows, problems


def render(
    conf: dict[str, Any],
    site: str,
    claim_objects: list[dict[str, Any]],
    plan: dict[str, Any] | None = None,
    feature_gates: dict[str, bool] | None = None,
    minor: str | None = None,
    in_use: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Kueue objects and configuration for one site (see the module docstring).

    Returns ``{"objects", "configuration", "mappings", "teams", "capacity",
    "problems", "notes", "what_if"}``:

    - ``objects``: WorkloadPriorityClasses, Cohorts, ResourceFlavors,
      ClusterQueues, LocalQueues (in that order);
    - ``configuration``: the Kueue manager Configuration fragment;
    - ``mappings``: ``{DeviceClass: {"resource", "unit" ("devices" or
      "capacity"), "capacity", "driver"}}``;
    - ``teams``: per team ``{"name", "cluster_queue", "local_queue", "cohort",
      "flavor", "tier", "nominal": {class: n}, "borrowable": {class: n or None
      (no limit)}, "lendable": {class: n}}`` and, with ``in_use`` (``{team:
      {class: in use now}}``), ``"idle": {class: n}``: what is idle now and
      could be lent, ``min(lendable, nominal - in use)``, at least 0 (None
      where the use is not known in the class's unit). Amounts are ints
      (devices) or quantity strings (capacity);
    - ``capacity``: per mapped class the cohort's nominal quota against the
      plan's devices (``status`` ok, oversubscribed, over_limit, unknown);
    - ``problems``: capacity problems (over_limit), as teams.capacity_check;
    - ``notes``: what works but differently than with ResourceQuotas;
    - ``what_if``: :func:`what_if` of ``aligned_dra_teams.kueue.what_if`` when set.

    Settings Kueue cannot serve raise :class:`KueueError`.
    """
    if conf.get("engine", "kueue") == "resourcequota":
        return {
            "objects": [],
            "configuration": None,
            "mappings": {},
            "teams": [],
            "capacity": [],
            "problems": [],
            "notes": [],
            "what_if": None,
        }
    if minor is not None:
        minor = dra.minor_of(minor)
    notes: list[str] = []
    mappings = _mappings(conf, claim_objects, minor, feature_gates, notes)
    _check_templates(conf, claim_objects, mappings)
    flavors = _flavors(conf, site)
    cohort = _check_name("aligned_dra_teams.kueue.cohort", site_cohort(conf, site), "the cohort name")
    tiers = conf["tiers"]
    for key, tier in tiers.items():
        if not INT32[0] <= tier["value"] <= INT32[1]:
            raise KueueError(f"aligned_dra_teams.tiers.{key}.value must fit a 32-bit integer for Kueue")

    objects: list[dict[str, Any]] = []
    for key, tier in sorted(tiers.items()):
        objects.append(
            {
                "apiVersion": API_VERSION,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": tier["name"], "labels": _labels(site, **{TIER_LABEL: key})},
                "value": tier["value"],
                "description": str(tier["description"])[:2048],
            }
        )
    objects.append({"apiVersion": API_VERSION, "kind": "Cohort", "metadata": {"name": cohort, "labels": _labels(site)}})
    departments = sorted({t["department"] for t in conf["teams"] if t.get("department")})
    department_cohorts = {}
    for department in departments:
        where = f"aligned_dra_teams.teams[].department {department!r}"
        if not dra.is_dns_label(department):
            raise KueueError(f"{where} is not a DNS label")
        name = _check_name(where, f"{cohort}-{department}", "the department cohort name")
        if name == cohort or name in department_cohorts.values():
            raise KueueError(f"{where}: cohort name {name!r} is used twice")
        department_cohorts[department] = name
        objects.append(
            {
                "apiVersion": API_VERSION,
                "kind": "Cohort",
                "metadata": {"name": name, "labels": _labels(site, **{"aligned.dev/department": department})},
                "spec": {"parentName": cohort},
            }
        )
    for flavor in flavors.values():
        spec: dict[str, Any] = {}
        if flavor["node_labels"]:
            spec["nodeLabels"] = dict(flavor["node_labels"])
        objects.append(
            {
                "apiVersion": API_VERSION,
                "kind": "ResourceFlavor",
                "metadata": {"name": flavor["name"], "labels": _labels(site)},
                "spec": spec,
            }
        )

    queues, local_queues, rows = [], [], []
    amounts: dict[str, dict[str, dict[str, Fraction | None]]] = {}
    resources = sorted(mappings, key=lambda c: mappings[c]["resource"])
    for team in conf["teams"]:
        where = f"aligned_dra_teams.teams[{team['name']}]"
        group = team.get("node_group")
        if None in flavors and group is not None:
            raise KueueError(f"{where}.node_group {group!r}: the site has no node groups (aligned_dra_teams.kueue)")
        if None not in flavors and group not in flavors:
            raise KueueError(
                f"{where}.node_group: the site has node groups ({', '.join(sorted(g for g in flavors if g))}); "
                "name the team's"
            )
        own = flavors[group]["name"]
        order = [own] + sorted(f["name"] for f in flavors.values() if f["name"] != own)
        team_amounts = amounts[team["name"]] = _team_amounts(conf, team, mappings)
        labels = _labels(site, **{TEAM_LABEL: team["name"], TIER_LABEL: team["tier"]})
        team_cohort = department_cohorts.get(team.get("department") or "", cohort)
        spec = {
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": sorted(team["namespaces"])}
                ]
            },
            "cohortName": team_cohort,
            "preemption": preemption(tiers, team["tier"]),
        }
        if resources:
            group_flavors = []
            for flavor in order:
                quotas = []
                for cls in resources:
                    unit = mappings[cls]["unit"]
                    values = team_amounts[cls]
                    item: dict[str, Any] = {
                        "name": mappings[cls]["resource"],
                        "nominalQuota": _out(values["nominal"] if flavor == own else Fraction(0), unit),
                    }
                    if values["borrow"] is not None:
                        item["borrowingLimit"] = _out(values["borrow"], unit)
                    if flavor == own and values["lend"] is not None:
                        item["lendingLimit"] = _out(values["lend"], unit)
                    quotas.append(item)
                group_flavors.append({"name": flavor, "resources": quotas})
            spec["resourceGroups"] = [
                {"coveredResources": [mappings[c]["resource"] for c in resources], "flavors": group_flavors}
            ]
        queues.append(
            {
                "apiVersion": API_VERSION,
                "kind": "ClusterQueue",
                "metadata": {"name": _check_name(where, team["name"], "the ClusterQueue name"), "labels": labels},
                "spec": spec,
            }
        )
        for namespace in team["namespaces"]:
            local_queues.append(
                {
                    "apiVersion": API_VERSION,
                    "kind": "LocalQueue",
                    "metadata": {"name": team["name"], "namespace": namespace, "labels": dict(labels)},
                    "spec": {"clusterQueue": team["name"]},
                }
            )
        row: dict[str, Any] = {
            "name": team["name"],
            "cluster_queue": team["name"],
            "local_queue": team["name"],
            "cohort": team_cohort,
            "flavor": own,
            "tier": team["tier"],
            "nominal": {},
            "borrowable": {},
            "lendable": {},
        }
        for cls in resources:
            unit = mappings[cls]["unit"]
            values = team_amounts[cls]
            row["nominal"][cls] = _out(values["nominal"], unit)
            row["borrowable"][cls] = _out(values["borrow"], unit)
            lendable = values["nominal"] if values["lend"] is None else values["lend"]
            row["lendable"][cls] = _out(lendable, unit)
        if in_use is not None:
            row["idle"] = _idle(in_use.get(team["name"]) or {}, team_amounts, mappings)
        rows.append(row)
    objects += queues + local_queues

    capacity, problems = _capacity_rows(conf, plan, mappings, amounts)
    if any(
        (r.get("exactly") or {}).get("tolerations") or any(s.get("tolerations") for s in r.get("firstAvailable") or [])
        for o in claim_objects
        if o.get("kind") == "ResourceClaimTemplate"
        for r in _requests(o)
    ):
        notes.append("templates tolerate device taints; Kueue does not consider taints when it counts devices")
    configuration = _configuration(mappings)
    result = {
        "objects": objects,
        "configuration": configuration,
        "mappings": mappings,
        "teams": rows,
        "capacity": capacity,
        "problems": problems,
        "notes": notes,
        "what_if": None,
    }
    demands = (conf.get("kueue") or {}).get("what_if") or []
    if demands:
        devices = {cls: (v or {}).get("devices") for cls, v in (((plan or {}).get("classes")) or {}).items()}
        result["what_if"] = what_if(result, devices, demands, "aligned_dra_teams.kueue.what_if")
    return result


def _idle(
    used: dict[str, Any], team_amounts: dict[str, dict[str, Fraction | None]], mappings: dict[str, dict[str, Any]]
) -> dict[str, int | str | None]:
    idle: dict[str, int | str | None] = {}
    for cls, values in team_amounts.items():
        unit = mappings[cls]["unit"]
        value = used.get(cls, 0)
        if unit == UNIT_CAPACITY and not isinstance(value, str) and value != 0:
            idle[cls] = None  # devices in use say nothing about the memory in use
            continue
        try:
            current = amount(value)
        except ValueError:
            idle[cls] = None
            continue
        nominal = values["nominal"] or Fraction(0)
        lendable = nominal if values["lend"] is None else values["lend"]
        idle[cls] = _out(max(Fraction(0), min(lendable, nominal - current)), unit)
    return idle


def _configuration(mappings: dict[str, dict[str, Any]]) -> dict[str, Any]:
    gates = {GATE_DRA: True, GATE_QUOTA_CHECK: True}
    entries = []
    for cls, entry in sorted(mappings.items(), key=lambda item: item[1]["resource"]):
        mapping: dict[str, Any] = {"name": entry["resource"], "deviceClassNames": [cls]}
        if entry["unit"] == UNIT_CAPACITY:
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


# -- validation ------------------------------------------------------------------------------


def _closed(node: Any) -> Any:
    """The schema with ``additionalProperties: false`` where it lists properties and says nothing else."""
    if isinstance(node, list):
        return [_closed(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _closed(child) for name, child in value.items()}
        elif key == "default" or key == "enum":
            out[key] = value
        else:
            out[key] = _closed(value)
    if (
        "properties" in node
        and "additionalProperties" not in node
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.lru_cache(maxsize=16)
def _validator(kind: str) -> Any:
    import jsonschema  # controller-only; kubernetes-validate (requirements.txt) depends on it

    checker = jsonschema.FormatChecker(formats=())

    @checker.checks("int32")
    def _int32(value: Any) -> bool:
        return not isinstance(value, int) or INT32[0] <= value <= INT32[1]

    @checker.checks("int64")
    def _int64(value: Any) -> bool:
        return not isinstance(value, int) or -(2**63) <= value < 2**63

    return jsonschema.Draft7Validator(_closed(kueue_schemas.schema(kind)), format_checker=checker)


def _path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(object)"


def _defaulted(schema: dict[str, Any], value: Any) -> Any:
    """``value`` with the schema's defaults applied, as the API server does before CEL rules run."""
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        out = dict(value)
        for name, child in schema["properties"].items():
            if name not in out and "default" in child:
                out[name] = copy.deepcopy(child["default"])
            if name in out:
                out[name] = _defaulted(child, out[name])
        return out
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        return {k: _defaulted(schema["additionalProperties"], v) for k, v in value.items()}
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_defaulted(schema["items"], item) for item in value]
    return value


@functools.lru_cache(maxsize=64)
def _rule(expression: str) -> Any:
    from cel_expr_python import cel

    env = cel.NewEnv(variables={"self": cel.Type.DYN})
    return env, env.compile(expression)


def _cel_problems(schema: dict[str, Any], value: Any, path: str) -> list[str]:
    problems = []
    for rule in schema.get("x-kubernetes-validations") or []:
        expression = rule.get("rule") or ""
        if re.search(r"\boldSelf\b", expression):
            continue  # transition rules only apply to updates
        try:
            env, program = _rule(expression)
            result = program.eval(env.Activation({"self": value})).value()
            if not isinstance(result, bool):  # an error value (e.g. an int64 overflow), not a verdict
                raise ValueError(f"the rule gave {result!r}, not true or false")
            ok = result
        except Exception as exc:  # a rule that cannot run here is reported, not skipped
            problems.append(f"{path}: CEL rule {expression!r} could not be evaluated: {exc}")
            continue
        if not ok:
            problems.append(f"{path}: {rule.get('message') or 'failed rule ' + expression}")
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        for name, child in schema["properties"].items():
            if name in value:
                problems += _cel_problems(child, value[name], f"{path}.{name}" if path else name)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            problems += _cel_problems(schema["items"], item, f"{path}[{index}]")
    return problems


def _qualified_key(key: Any) -> bool:
    """A label or annotation key: ``[DNS subdomain/]name``, the name at most 63 characters."""
    if not isinstance(key, str):
        return False
    prefix, sep, name = key.rpartition("/")
    return (not sep or dra.is_dns_subdomain(prefix)) and len(name) <= 63 and bool(_QUALIFIED_PART_RE.fullmatch(name))


def _metadata_problems(obj: dict[str, Any], kind: str) -> list[str]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return ["metadata: must be a mapping"]
    problems = []
    for key in sorted(set(meta) - {"name", "namespace", "labels", "annotations"}):
        problems.append(f"metadata.{key}: unknown field (rendered objects set name, namespace, labels, annotations)")
    if not dra.is_dns_subdomain(meta.get("name")):
        problems.append(f"metadata.name: {meta.get('name')!r} is not a DNS subdomain")
    namespaced = kueue_schemas.SCOPES[kind] == "Namespaced"
    if namespaced and not dra.is_dns_label(meta.get("namespace")):
        problems.append(f"metadata.namespace: {kind} is namespaced; {meta.get('namespace')!r} is not a namespace name")
    if not namespaced and "namespace" in meta:
        problems.append(f"metadata.namespace: {kind} is cluster-scoped")
    for field in ("labels", "annotations"):
        values = meta.get(field) or {}
        if not isinstance(values, dict):
            problems.append(f"metadata.{field}: must be a mapping")
            continue
        for key, value in values.items():
            if not _qualified_key(key):
                problems.append(f"metadata.{field}: {key!r} is not a qualified name")
            if not isinstance(value, str) or (
                field == "labels"
                and value
                and not re.fullmatch(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", value)
            ):
                problems.append(f"metadata.{field}.{key}: {value!r} is not a valid value")
    return problems


def _quantity_problem(value: Any) -> tuple[Fraction | None, str | None]:
    try:
        return amount(value), None
    except ValueError as exc:
        return None, str(exc)


def _webhook_problems(obj: dict[str, Any]) -> list[str]:
    """Kueue's validating webhook rules for quotas and selectors that the CRD schema does not carry."""
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    problems = []
    if kind not in ("ClusterQueue", "Cohort") or not isinstance(spec, dict):
        return problems
    has_parent = bool(spec.get("cohortName") if kind == "ClusterQueue" else spec.get("parentName"))
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for i, group in enumerate(spec.get("resourceGroups") or []):
        base = f"spec.resourceGroups[{i}]"
        covered = list(group.get("coveredResources") or [])
        for j, name in enumerate(covered):
            problem = resource_name_problem(name) if "/" in str(name) or str(name) not in NATIVE_RESOURCES else None
            if problem:
                problems.append(f"{base}.coveredResources[{j}]: {name!r} {problem}")
            if name in seen_resources:
                problems.append(f"{base}.coveredResources[{j}]: {name!r} is covered twice")
            seen_resources.add(name)
        for j, flavor in enumerate(group.get("flavors") or []):
            fbase = f"{base}.flavors[{j}]"
            if flavor.get("name") in seen_flavors:
                problems.append(f"{fbase}.name: {flavor.get('name')!r} is listed twice")
            seen_flavors.add(flavor.get("name"))
            for k, item in enumerate(flavor.get("resources") or []):
                rbase = f"{fbase}.resources[{k}]"
                if k < len(covered) and item.get("name") != covered[k]:
                    problems.append(f"{rbase}.name: {item.get('name')!r} must match coveredResources[{k}]")
                values = {}
                for field in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if field not in item:
                        continue
                    parsed, problem = _quantity_problem(item[field])
                    if problem:
                        problems.append(f"{rbase}.{field}: {problem}")
                        continue
                    values[field] = parsed
                    if parsed < 0:
                        problems.append(f"{rbase}.{field}: {item[field]!r} must be non-negative")
                    if field != "nominalQuota" and not has_parent:
                        parent = "cohortName" if kind == "ClusterQueue" else "parentName"
                        problems.append(f"{rbase}.{field}: must be unset without spec.{parent}")
                if (
                    kind == "ClusterQueue"
                    and "lendingLimit" in values
                    and "nominalQuota" in values
                    and values["lendingLimit"] > values["nominalQuota"]
                ):
                    problems.append(f"{rbase}.lendingLimit: must be less than or equal to the nominalQuota")
    selector = spec.get("namespaceSelector") or {}
    for i, expression in enumerate(selector.get("matchExpressions") or [] if isinstance(selector, dict) else []):
        operator, values = expression.get("operator"), expression.get("values") or []
        where = f"spec.namespaceSelector.matchExpressions[{i}]"
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            problems.append(f"{where}.operator: {operator!r} is not In, NotIn, Exists or DoesNotExist")
        elif operator in ("In", "NotIn") and not values:
            problems.append(f"{where}.values: must be non-empty for {operator}")
        elif operator in ("Exists", "DoesNotExist") and values:
            problems.append(f"{where}.values: must be empty for {operator}")
    return problems


def validate_object(obj: dict[str, Any]) -> list[str]:
    """Every problem of one Kueue object (or the manager Configuration); empty when it may be applied."""
    kind = obj.get("kind")
    label = f"{kind} {(obj.get('metadata') or {}).get('name')}"
    if kind == "Configuration":
        return [f"Configuration: {p}" for p in validate_configuration(obj)]
    if obj.get("apiVersion") != API_VERSION or kind not in kueue_schemas.SCOPES:
        return [f"{label}: no embedded schema for {obj.get('apiVersion')} {kind} (Kueue {KUEUE_VERSION})"]
    schema = kueue_schemas.schema(kind)
    problems = []
    for error in sorted(_validator(kind).iter_errors(obj), key=lambda e: list(map(str, e.absolute_path))):
        if error.validator == "additionalProperties" and error.validator_value is False:
            known = sorted(error.schema.get("properties") or {})
            extra = sorted(set(error.instance) - set(known))
            for name in extra:
                where = _path(list(error.absolute_path) + [name])
                problems.append(f"{where}: unknown field (known: {', '.join(known)})")
            continue
        problems.append(f"{_path(error.absolute_path)}: {error.message}")
    problems += _metadata_problems(obj, kind)
    if not problems:  # CEL rules assume the structure is right
        problems += _cel_problems(schema, _defaulted(schema, obj), "")
    problems += _webhook_problems(obj)
    return [f"{label}: {p}" for p in problems]


def validate_objects(objects: list[dict[str, Any]]) -> list[str]:
    """:func:`validate_object` of each; empty when all may be applied."""
    problems = []
    for obj in objects:
        problems += validate_object(obj)
    return problems


CONFIGURATION_FIELDS = (
    "apiVersion",
    "kind",
    "namespace",
    "manageJobsWithoutQueueName",
    "managedJobsNamespaceSelector",
    "internalCertManagement",
    "waitForPodsReady",
    "clientConnection",
    "integrations",
    "multiKueue",
    "fairSharing",
    "admissionFairSharing",
    "resources",
    "featureGates",
    "objectRetentionPolicies",
    "visibilityServer",
    "webhook",
    "leaderElection",
    "metrics",
    "health",
    "pprofBindAddress",
    "controller",
    "tls",
)
RESOURCES_FIELDS = ("quotaCheckStrategy", "excludeResourcePrefixes", "transformations", "deviceClassMappings")


def validate_configuration(cfg: dict[str, Any]) -> list[str]:
    """The fields this module emits, checked as Kueue's configuration_types.go and config validation do."""
    problems = []
    if cfg.get("apiVersion") != CONFIG_API_VERSION or cfg.get("kind") != "Configuration":
        problems.append(f"apiVersion/kind must be {CONFIG_API_VERSION} Configuration")
    for key in sorted(set(cfg) - set(CONFIGURATION_FIELDS)):
        problems.append(f"{key}: unknown field")
    gates = cfg.get("featureGates") or {}
    if not isinstance(gates, dict) or not all(isinstance(v, bool) for v in gates.values()):
        problems.append("featureGates: must map gate names to true or false")
        gates = {}
    for gate in sorted(set(gates) - set(KNOWN_GATES)):
        problems.append(f"featureGates.{gate}: not a gate this module knows for Kueue {KUEUE_VERSION}")
    enabled = {GATE_DRA: True, GATE_QUOTA_CHECK: True, GATE_CAPACITY: False}  # v0.19 defaults
    enabled.update(gates)
    resources = cfg.get("resources") or {}
    if not isinstance(resources, dict):
        return problems + ["resources: must be a mapping"]
    for key in sorted(set(resources) - set(RESOURCES_FIELDS)):
        problems.append(f"resources.{key}: unknown field")
    strategy = resources.get("quotaCheckStrategy")
    if strategy is not None and strategy not in ("IgnoreUndeclared", "BlockUndeclared"):
        problems.append(f"resources.quotaCheckStrategy: {strategy!r} is not IgnoreUndeclared or BlockUndeclared")
    if strategy == "IgnoreUndeclared" and resources.get("excludeResourcePrefixes"):
        problems.append("resources.quotaCheckStrategy: IgnoreUndeclared does not go with excludeResourcePrefixes")
    mappings = resources.get("deviceClassMappings") or []
    if not isinstance(mappings, list):
        return problems + ["resources.deviceClassMappings: must be a list"]
    if mappings and not enabled.get(GATE_DRA):
        problems.append(f"resources.deviceClassMappings: needs feature gate {GATE_DRA}")
    if len(mappings) > MAX_MAPPINGS:
        problems.append(f"resources.deviceClassMappings: {len(mappings)} mappings, at most {MAX_MAPPINGS}")
    names: set[str] = set()
    owner: dict[str, str] = {}
    for i, mapping in enumerate(mappings):
        where = f"resources.deviceClassMappings[{i}]"
        if not isinstance(mapping, dict):
            problems.append(f"{where}: must be a mapping")
            continue
        for key in sorted(set(mapping) - {"name", "deviceClassNames", "sources"}):
            problems.append(f"{where}.{key}: unknown field")
        name = mapping.get("name")
        problem = resource_name_problem(name)
        if problem:
            problems.append(f"{where}.name: {name!r} {problem}")
        if name in names:
            problems.append(f"{where}.name: {name!r} is used twice")
        names.add(name)
        classes = mapping.get("deviceClassNames") or []
        if not isinstance(classes, list) or not classes:
            problems.append(f"{where}.deviceClassNames: at least one DeviceClass is required")
            classes = []
        if len(classes) > MAX_CLASSES_PER_MAPPING:
            problems.append(f"{where}.deviceClassNames: {len(classes)} classes, at most {MAX_CLASSES_PER_MAPPING}")
        for j, cls in enumerate(classes):
            problem = resource_name_problem(cls)
            if problem:
                problems.append(f"{where}.deviceClassNames[{j}]: {cls!r} {problem}")
            if cls in owner:
                problems.append(f"{where}.deviceClassNames[{j}]: {cls} is already mapped to {owner[cls]}")
            owner.setdefault(cls, name)
        sources = mapping.get("sources") or []
        if not isinstance(sources, list):
            problems.append(f"{where}.sources: must be a list")
            continue
        for j, source in enumerate(sources):
            swhere = f"{where}.sources[{j}]"
            kinds = [k for k in ("counter", "capacity") if (source or {}).get(k) is not None]
            unknown = sorted(set(source or {}) - {"counter", "capacity"})
            if unknown or len(kinds) != 1:
                problems.append(f"{swhere}: exactly one of counter or capacity must be set")
                continue
            kind = kinds[0]
            gate = GATE_CAPACITY if kind == "capacity" else "KueueDRAIntegrationPartitionableDevices"
            if kind == "capacity" and not enabled.get(gate):
                problems.append(f"{swhere}.capacity: capacity sources require {gate} to be enabled")
            body = source[kind]
            for key in sorted(set(body) - {"name", "driver", "deviceSelector"}):
                problems.append(f"{swhere}.{kind}.{key}: unknown field")
            if not dra.is_qualified_name(body.get("name")):
                problems.append(f"{swhere}.{kind}.name: {body.get('name')!r} is not a qualified name")
            driver = body.get("driver")
            if not dra.is_dns_subdomain(driver) or len(driver) > 63:
                problems.append(f"{swhere}.{kind}.driver: {driver!r} is not a DNS subdomain of at most 63 characters")
            expression = ((body.get("deviceSelector") or {}).get("cel") or {}).get("expression")
            if not isinstance(expression, str) or not expression:
                problems.append(f"{swhere}.{kind}.deviceSelector.cel.expression: required")
            else:
                for problem in dra_cel.check_expression(expression):
                    problems.append(f"{swhere}.{kind}.deviceSelector.cel.expression: {problem}")
        kinds_used = {k for s in sources for k in ("counter", "capacity") if isinstance(s, dict) and s.get(k)}
        if len(kinds_used) > 1:
            problems.append(f"{where}.sources: counter and capacity sources cannot be mixed")
    return problems


# -- what if -------------------------------------------------------------------------------


class _Queue:
    __slots__ = ("name", "team", "tier", "root", "flavors", "quota", "preemption")

    def __init__(self, obj: dict[str, Any], roots: dict[str, str]) -> None:
        spec = obj["spec"]
        labels = obj["metadata"].get("labels") or {}
        self.name = obj["metadata"]["name"]
        self.team = labels.get(TEAM_LABEL, self.name)
        self.tier = labels.get(TIER_LABEL)
        cohort = spec.get("cohortName")
        self.root = roots.get(cohort, cohort) if cohort else None
        self.flavors: list[str] = []
        self.quota: dict[tuple[str, str], dict[str, Fraction | None]] = {}
        for group in spec.get("resourceGroups") or []:
            for flavor in group["flavors"]:
                if flavor["name"] not in self.flavors:
                    self.flavors.append(flavor["name"])
                for item in flavor["resources"]:
                    self.quota[(flavor["name"], item["name"])] = {
                        "nominal": amount(item["nominalQuota"]),
                        "borrow": amount(item["borrowingLimit"]) if "borrowingLimit" in item else None,
                        "lend": amount(item["lendingLimit"]) if "lendingLimit" in item else None,
                    }
        defaults = {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never", "borrowWithinCohort": {}}
        self.preemption = dict(defaults, **(spec.get("preemption") or {}))

    def lendable(self, fr: tuple[str, str]) -> Fraction:
        quota = self.quota.get(fr)
        if not quota:
            return Fraction(0)
        return quota["nominal"] if quota["lend"] is None else min(quota["lend"], quota["nominal"])

    def guaranteed(self, fr: tuple[str, str]) -> Fraction:
        quota = self.quota.get(fr)
        return quota["nominal"] - self.lendable(fr) if quota else Fraction(0)


class _Model:
    """Admitted workloads and the quota arithmetic of Kueue's classic admission (see :func:`what_if`)."""

    def __init__(self, queues: dict[str, _Queue]) -> None:
        self.queues = queues
        self.admitted: list[dict[str, Any]] = []
        self.sequence = 0

    def usage(self, queue: str, fr: tuple[str, str], removed: frozenset = frozenset(), extra: Fraction = 0) -> Fraction:
        used = sum(
            (w["amount"] for w in self.admitted if w["queue"] == queue and w["fr"] == fr and w["id"] not in removed),
            Fraction(0),
        )
        return used + extra

    def borrowing(self, queue: str, fr: tuple[str, str], removed: frozenset = frozenset()) -> bool:
        return self.usage(queue, fr, removed) > self.queues[queue].quota.get(fr, {}).get("nominal", Fraction(0))

    def fits(
        self, queue: str, fr: tuple[str, str], need: Fraction, removed: frozenset = frozenset(), borrow: bool = True
    ) -> bool:
        cq = self.queues[queue]
        quota = cq.quota.get(fr)
        if quota is None:
            return False
        mine = self.usage(queue, fr, removed, need)
        limit = quota["nominal"]
        if borrow and cq.root is not None:
            limit = None if quota["borrow"] is None else quota["nominal"] + quota["borrow"]
        if limit is not None and mine > limit:
            return False
        if cq.root is None:
            return mine <= quota["nominal"]
        members = [q for q in self.queues.values() if q.root == cq.root]
        pool = sum((q.lendable(fr) for q in members), Fraction(0))
        used = Fraction(0)
        for q in members:
            usage = mine if q.name == queue else self.usage(q.name, fr, removed)
            used += max(Fraction(0), usage - q.guaranteed(fr))
        return used <= pool

    def admit(self, workload: dict[str, Any], fr: tuple[str, str]) -> None:
        self.sequence += 1
        workload.update(fr=fr, admitted_at=self.sequence)
        self.admitted.append(workload)

    def candidates(self, workload: dict[str, Any], fr: tuple[str, str], within_nominal: bool) -> list[dict[str, Any]]:
        cq = self.queues[workload["queue"]]
        policy = cq.preemption
        borrow = policy.get("borrowWithinCohort") or {}
        found = []
        for other in self.admitted:
            if other["fr"] != fr:
                continue
            if other["queue"] == cq.name:
                rule = policy.get("withinClusterQueue")
                lower = other["priority"] < workload["priority"]
                newer = other["priority"] == workload["priority"] and other["index"] > workload["index"]
                if (rule == "LowerPriority" and lower) or (rule == "LowerOrNewerEqualPriority" and (lower or newer)):
                    found.append(dict(other, reason="within cluster queue"))
                continue
            if cq.root is None or self.queues[other["queue"]].root != cq.root or not self.borrowing(other["queue"], fr):
                continue
            if within_nominal:
                rule = policy.get("reclaimWithinCohort")
                if rule == "Any" or (rule == "LowerPriority" and other["priority"] < workload["priority"]):
                    found.append(dict(other, reason="reclaim within cohort"))
            elif borrow.get("policy") == "LowerPriority" and other["priority"] < workload["priority"]:
                threshold = borrow.get("maxPriorityThreshold")
                if threshold is None or other["priority"] <= threshold:
                    found.append(dict(other, reason="borrow within cohort"))
        found.sort(key=lambda w: (w["queue"] == cq.name, w["priority"], -w["admitted_at"]))
        return found

    def targets(self, workload: dict[str, Any], fr: tuple[str, str]) -> list[dict[str, Any]] | None:
        queue = workload["queue"]
        need = workload["amount"]
        nominal = self.queues[queue].quota[fr]["nominal"]
        within_nominal = self.usage(queue, fr) + need <= nominal
        candidates = self.candidates(workload, fr, within_nominal)
        if not candidates:
            return None
        borrow_policy = (self.queues[queue].preemption.get("borrowWithinCohort") or {}).get("policy")
        attempts = []
        if all(c["queue"] == queue for c in candidates):
            attempts.append((candidates, True))
        else:
            if borrow_policy == "LowerPriority" and not within_nominal:
                attempts.append((candidates, True))
            if within_nominal:
                attempts.append((candidates, False))
            attempts.append(([c for c in candidates if c["queue"] == queue], True))
        for pool, borrow in attempts:
            chosen: list[dict[str, Any]] = []
            removed: frozenset = frozenset()
            for candidate in pool:
                if candidate["queue"] != queue and not self.borrowing(candidate["queue"], fr, removed):
                    continue  # its queue no longer borrows: not a candidate any more
                chosen.append(candidate)
                removed = removed | {candidate["id"]}
                if self.fits(queue, fr, need, removed, borrow):
                    for target in list(reversed(chosen)):  # keep only the targets it needs
                        rest = removed - {target["id"]}
                        if self.fits(queue, fr, need, rest, borrow):
                            chosen.remove(target)
                            removed = rest
                    return chosen
        return None


def _model_input(rendered_or_conf: dict[str, Any]) -> dict[str, Any]:
    if "objects" in rendered_or_conf and "mappings" in rendered_or_conf:
        return rendered_or_conf
    conf = rendered_or_conf
    names = sorted({cls for team in conf.get("teams") or [] for cls in (team.get("quotas") or {})})
    stubs = [
        {
            "apiVersion": dra.API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": cls},
            "spec": {"selectors": [{"cel": {"expression": 'device.driver == "what.if"'}}]},
        }
        for cls in names
    ]
    bare = dict(conf, kueue=dict(conf.get("kueue") or {}, what_if=[]), engine="kueue")
    return render(bare, "what-if", stubs)


def what_if(
    rendered_or_conf: dict[str, Any],
    capacity: dict[str, Any] | None = None,
    demands: list[dict[str, Any]] | tuple = (),
    field: str = "what_if",
) -> dict[str, Any]:
    """A model of Kueue's admission and preemption for a list of workloads; not Kueue itself.

    ``field`` names the workloads in messages (the inventory setting they came from).

    ``rendered_or_conf`` is what :func:`render` returned (its ClusterQueues,
    Cohorts and WorkloadPriorityClasses are read) or checked team settings
    (rendered first against stub DeviceClasses: device counts only).
    ``demands`` are workloads ``{"team", "name", "class", "devices" (an int,
    or a quantity string on a class counted by capacity), "tier" (default:
    the team's), "running" (already admitted)}``. ``capacity`` (``{class:
    devices}`` or ``{class: {flavor: devices}}``) is what the hardware has:
    Kueue admits by quota only, so it is used to report what was admitted
    beyond it (pods that would wait for devices), not to admit less.

    Modelled (Kueue v0.19.2 classic preemption, docs concepts/preemption and
    cluster_queue): running workloads are admitted first, in the order given;
    pending ones in priority order, then in the order given (FIFO), again
    after every admission, until none can be admitted; a workload fits when
    its queue's usage stays within nominal quota + borrowingLimit and the
    cohort's usage above each queue's reserved part (nominal - lendingLimit)
    stays within the sum of what the queues lend; flavors are tried in the
    queue's order, the first that fits without preemption is taken, else the
    first where preemption makes room (the default flavorFungibility);
    preemption candidates are the lower-priority workloads of the own queue
    (``withinClusterQueue``), and workloads of other queues in the cohort that
    borrow: any (``reclaimWithinCohort: Any``) or lower priority ones
    (``LowerPriority``) when the workload fits in its nominal quota, lower
    priority ones up to ``maxPriorityThreshold`` (``borrowWithinCohort``) when it
    must borrow; candidates are ordered borrowing queues first, lowest priority
    first, most recently admitted first, taken greedily by Kueue's heuristics
    (own queue only; borrowing allowed; within nominal quota; own queue) and
    then minimised in reverse order; a queue that stops borrowing stops
    being a candidate; preempted workloads are pending again.

    Not modelled: fair sharing and admission fair sharing, cohort-level quotas
    and the borrowing distance in cohort trees (the tree is one pool), flavor
    fungibility other than the default, partial admission, topology-aware
    scheduling, waitForPodsReady and requeue back-off, several pod sets or
    resources per workload, StrictFIFO, where pods land on nodes, and time.

    Returns ``{"teams": {team: {"by_nominal", "by_borrowing", "pending" ({class:
    amount}), "admitted", "pending_workloads" (names), "preempted" ([{"name",
    "class", "devices", "by", "reason"}])}}, "preemptions" (all, in order),
    "over_capacity": {class or class@flavor: {"capacity", "admitted", "over"}}}``: only classes (in devices)
    where more was admitted than the hardware has.
    """
    rendered = _model_input(rendered_or_conf)
    objects = rendered["objects"]
    parents = {
        o["metadata"]["name"]: (o.get("spec") or {}).get("parentName") for o in objects if o.get("kind") == "Cohort"
    }
    roots = {}
    for name in parents:
        root, seen = name, set()
        while parents.get(root) and root not in seen:
            seen.add(root)
            root = parents[root]
        roots[name] = root
    queues = {o["metadata"]["name"]: _Queue(o, roots) for o in objects if o.get("kind") == "ClusterQueue"}
    by_team = {q.team: q for q in queues.values()}
    tier_values = {
        (o["metadata"].get("labels") or {}).get(TIER_LABEL, o["metadata"]["name"]): o["value"]
        for o in objects
        if o.get("kind") == "WorkloadPriorityClass"
    }
    mappings = rendered["mappings"]
    model = _Model(queues)
    workloads = []
    for index, demand in enumerate(demands):
        where = f"{field}[{index}]"
        if not isinstance(demand, dict):
            raise KueueError(f"{where} must be a mapping")
        team = demand.get("team")
        if team not in by_team:
            raise KueueError(f"{where}.team {team!r} is not a team of this site ({', '.join(sorted(by_team))})")
        cls = demand.get("class")
        if cls not in mappings:
            raise KueueError(
                f"{where}.class {cls!r} has no Kueue quota on this site (classes: {', '.join(sorted(mappings))})"
            )
        unit = mappings[cls]["unit"]
        raw = demand.get("devices", 1)
        if unit == UNIT_DEVICES and (isinstance(raw, bool) or not isinstance(raw, int)):
            raise KueueError(f"{where}.devices must be an integer for {cls} (counted in devices)")
        try:
            need = amount(raw)
        except ValueError as exc:
            raise KueueError(f"{where}.devices: {exc}") from None
        if need <= 0:
            raise KueueError(f"{where}.devices must be positive")
        queue = by_team[team]
        tier = demand.get("tier") or queue.tier
        if tier not in tier_values:
            raise KueueError(f"{where}.tier {tier!r} is not one of {', '.join(sorted(tier_values))}")
        workloads.append(
            {
                "id": index,
                "index": index,
                "name": str(demand.get("name") or f"{team}-{index}"),
                "team": team,
                "queue": queue.name,
                "class": cls,
                "resource": mappings[cls]["resource"],
                "amount": need,
                "priority": tier_values[tier],
                "running": bool(demand.get("running")),
            }
        )

    for workload in workloads:
        if not workload["running"]:
            continue
        queue = queues[workload["queue"]]
        frs = [(f, workload["resource"]) for f in queue.flavors]
        if not frs:
            raise KueueError(f"{field}: team {workload['team']} has no queue for {workload['class']}")
        fr = next((fr for fr in frs if model.fits(queue.name, fr, workload["amount"])), None)
        if fr is None:
            # Kueue never has this state: a running workload was admitted within the queues' limits
            raise KueueError(
                f"{field}[{workload['index']}]: running workload {workload['name']} of team {workload['team']} "
                f"does not fit its queue's nominal quota and borrowing limit, nor what the cohort lends, "
                "with the running workloads before it; it cannot be running under these queues"
            )
        model.admit(workload, fr)

    events: list[dict[str, Any]] = []
    pending = [w for w in workloads if not w["running"]]
    rounds = 0
    while pending and rounds < 20 * (len(workloads) + 1):
        rounds += 1
        pending.sort(key=lambda w: (-w["priority"], w["index"]))
        progressed = False
        for workload in pending:
            queue = queues[workload["queue"]]
            frs = [(f, workload["resource"]) for f in queue.flavors if (f, workload["resource"]) in queue.quota]
            fr = next((fr for fr in frs if model.fits(queue.name, fr, workload["amount"])), None)
            victims: list[dict[str, Any]] = []
            if fr is None:
                for candidate_fr in frs:
                    found = model.targets(workload, candidate_fr)
                    if found:
                        fr, victims = candidate_fr, found
                        break
            if fr is None:
                continue
            for victim in victims:
                model.admitted = [w for w in model.admitted if w["id"] != victim["id"]]
                original = next(w for w in workloads if w["id"] == victim["id"])
                pending.append(original)
                unit = mappings[original["class"]]["unit"]
                events.append(
                    {
                        "name": original["name"],
                        "team": original["team"],
                        "class": original["class"],
                        "devices": _out(original["amount"], unit),
                        "by": f"{workload['team']}/{workload['name']}",
                        "reason": victim["reason"],
                    }
                )
            pending.remove(workload)
            model.admit(workload, fr)
            progressed = True
            break
        if not progressed:
            break

    teams_out: dict[str, dict[str, Any]] = {}
    for team, queue in sorted(by_team.items()):
        row: dict[str, Any] = {
            "by_nominal": {},
            "by_borrowing": {},
            "pending": {},
            "admitted": [],
            "pending_workloads": [],
            "preempted": [e for e in events if e["team"] == team],
        }
        for cls, entry in mappings.items():
            unit = entry["unit"]
            nominal_part, borrowed = Fraction(0), Fraction(0)
            for fr, quota in queue.quota.items():
                if fr[1] != entry["resource"]:
                    continue
                used = model.usage(queue.name, fr)
                nominal_part += min(used, quota["nominal"])
                borrowed += max(Fraction(0), used - quota["nominal"])
            waiting = sum((w["amount"] for w in pending if w["team"] == team and w["class"] == cls), Fraction(0))
            row["by_nominal"][cls] = _out(nominal_part, unit)
            row["by_borrowing"][cls] = _out(borrowed, unit)
            row["pending"][cls] = _out(waiting, unit)
        row["admitted"] = [
            w["name"] for w in sorted(model.admitted, key=lambda w: w["admitted_at"]) if w["team"] == team
        ]
        row["pending_workloads"] = [w["name"] for w in sorted(pending, key=lambda w: w["index"]) if w["team"] == team]
        teams_out[team] = row

    over: dict[str, dict[str, Any]] = {}
    for cls, have in (capacity or {}).items():
        # the capacity is in devices: a class counted in GPU memory cannot be compared with it
        if cls not in mappings or have is None or mappings[cls]["unit"] != UNIT_DEVICES:
            continue
        unit = mappings[cls]["unit"]
        per_flavor = have if isinstance(have, dict) else {None: have}
        for flavor, devices in per_flavor.items():
            admitted = sum(
                (w["amount"] for w in model.admitted if w["class"] == cls and (flavor is None or w["fr"][0] == flavor)),
                Fraction(0),
            )
            limit = amount(devices)
            if admitted <= limit:
                continue  # only what the hardware cannot hold
            key = cls if flavor is None else f"{cls}@{flavor}"
            over[key] = {
                "capacity": _out(limit, unit),
                "admitted": _out(admitted, unit),
                "over": _out(max(Fraction(0), admitted - limit), unit),
            }
    return {"teams": teams_out, "preemptions": events, "over_capacity": over}
