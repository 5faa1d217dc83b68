# SPDX-License-Identifier: Apache-2.0
"""Checks of the rendered Kueue objects, and of the cohort's quotas against the site's capacity.

:func:`validate_objects` checks the objects against Kueue's CRD schemas
(:mod:`kueue_schemas`), strictly, the CRDs' CEL rules (except transition rules,
which only apply to updates) and the rules of Kueue's validating webhook that
the schema does not carry; the manager Configuration by hand
(:func:`validate_configuration`). :func:`capacity_rows` sets each mapped class's
nominal quotas in cohort against the devices of the plan.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import crd_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import mig as kueue_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import schemas as kueue_schemas
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import (
    API_VERSION,
    CONFIG_API_VERSION,
    GATE_CAPACITY,
    GATE_DRA,
    GATE_PARTITIONABLE,
    GATE_QUOTA_CHECK,
    KNOWN_GATES,
    KUEUE_VERSION,
    MAX_CLASSES_PER_MAPPING,
    MAX_MAPPINGS,
    NATIVE_RESOURCES,
    UNIT_CAPACITY,
    UNIT_COUNTER,
    amount,
    amount_out,
    class_name_problem,
    resource_name_problem,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


# -- validation ------------------------------------------------------------------------------


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
    problems = crd_checks.object_problems(kueue_schemas, obj)
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
    """The fields :mod:`kueue` emits, checked as Kueue's configuration_types.go and config validation do."""
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
    enabled = {GATE_DRA: True, GATE_QUOTA_CHECK: True, GATE_CAPACITY: False, GATE_PARTITIONABLE: True}  # v0.19
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
        problems += _mapping_problems(f"resources.deviceClassMappings[{i}]", mapping, enabled, names, owner)
    return problems


def _mapping_problems(
    where: str, mapping: Any, enabled: dict[str, bool], names: set[str], owner: dict[str, str]
) -> list[str]:
    """One deviceClassMappings entry; ``names`` and ``owner`` (class -> name) gather what earlier entries took."""
    if not isinstance(mapping, dict):
        return [f"{where}: must be a mapping"]
    problems = []
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
        problem = class_name_problem(cls)
        if problem:
            problems.append(f"{where}.deviceClassNames[{j}]: {cls!r} {problem}")
        if cls in owner:
            problems.append(f"{where}.deviceClassNames[{j}]: {cls} is already mapped to {owner[cls]}")
        owner.setdefault(cls, name)
    sources = mapping.get("sources") or []
    if not isinstance(sources, list):
        problems.append(f"{where}.sources: must be a list")
        return problems
    for j, source in enumerate(sources):
        problems += _source_problems(f"{where}.sources[{j}]", source, enabled)
    kinds_used = {k for s in sources for k in ("counter", "capacity") if isinstance(s, dict) and s.get(k)}
    if len(kinds_used) > 1:
        problems.append(f"{where}.sources: counter and capacity sources cannot be mixed")
    return problems


def _source_problems(swhere: str, source: Any, enabled: dict[str, bool]) -> list[str]:
    """One of a mapping's ``sources``: a counter or a capacity."""
    kinds = [k for k in ("counter", "capacity") if (source or {}).get(k) is not None]
    unknown = sorted(set(source or {}) - {"counter", "capacity"})
    if unknown or len(kinds) != 1:
        return [f"{swhere}: exactly one of counter or capacity must be set"]
    problems = []
    kind = kinds[0]
    gate = GATE_CAPACITY if kind == "capacity" else "KueueDRAIntegrationPartitionableDevices"
    if not enabled.get(gate):
        problems.append(f"{swhere}.{kind}: {kind} sources require {gate} to be enabled")
    body = source[kind]
    for key in sorted(set(body) - {"name", "driver", "deviceSelector"}):
        problems.append(f"{swhere}.{kind}.{key}: unknown field")
    if kind == "counter" and not dra.is_dns_label(body.get("name")):
        # Kueue: IsDNS1123Label, the name of a counter in the devices' consumesCounters
        problems.append(f"{swhere}.counter.name: {body.get('name')!r} is not a DNS label")
    elif kind == "capacity" and not dra.is_qualified_name(body.get("name")):
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
    return problems


# -- capacity --------------------------------------------------------------------------------


def capacity_rows(
    conf: dict[str, Any],
    plan: dict[str, Any] | None,
    mappings: dict[str, dict[str, Any]],
    amounts: dict[str, dict[str, dict[str, Fraction | None]]],
    mig: dict[str, Any] | None = None,
    counter_problems: list[str] | None = None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """Per mapped class the cohort's nominal quota against the plan's devices, and the over_limit problems.

    ``amounts`` are the teams' ``{team: {class: {"nominal", "borrow", "lend"}}}``. A class counted in GPU
    memory by a counter (MIG) is set against the site's MIG memory (``mig``: ``schedulers/mig.site``); its problems
    go to ``counter_problems`` where given (the teams' own check counts devices only), else with the others.
    """
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
            "nominal": amount_out(nominal, unit),
            "borrow_only": amount_out(borrow_only, unit),
            "factor": factor,
            "status": "unknown",
        }
        if unit == UNIT_COUNTER:
            found = kueue_mig.capacity_row(row, nominal, mig)
            (problems if counter_problems is None else counter_problems).extend(found)
        elif unit == UNIT_CAPACITY:
            row["reason"] = "quotas count capacity; the plan counts devices"
        elif schedulers_mig.device_capacity(mig, cls) is not None:
            # a MIG class in devices: the devices that exist at once (the plan counts every placement)
            row.update(schedulers_mig.device_capacity(mig, cls))
            problems += _device_status(row, nominal, factor, cls, unit)
        elif cls in capacities and (capacities[cls] or {}).get("devices") is not None:
            row["capacity"] = int(capacities[cls]["devices"])
            problems += _device_status(row, nominal, factor, cls, unit)
        rows.append(row)
    return rows, problems


def _device_status(row: dict[str, Any], nominal: Fraction, factor: float, cls: str, unit: str) -> list[str]:
    """A class counted in devices against its capacity (a MIG class's: what the MIG model gives, None unknown)."""
    capacity = row["capacity"]
    if capacity is None:
        return []
    if nominal <= capacity:
        row["status"] = "ok"
    elif nominal <= capacity * Fraction(factor):
        row["status"] = "oversubscribed"
    else:
        row["status"] = "over_limit"
        allowed = "no oversubscription is allowed" if factor == 1.0 else f"the factor is {factor:g}"
        has = f"{capacity} ({row['capacity_is']})" if row.get("capacity_is") else str(capacity)
        return [
            f"DeviceClass {cls}: the ClusterQueues' nominal quotas in cohort add up to {amount_out(nominal, unit)} "
            f"devices, the site has {has} and {allowed} (aligned_dra_teams.oversubscription)"
        ]
    return []
