# SPDX-License-Identifier: Apache-2.0
"""TEST FAKE: what a write to the fake API server is checked against.

The strict schemas (kubernetes-validate for the served minor, Kueue's CRDs), the
DRA limits and rules the real API server adds beyond the schema, the rules of
other kinds (Secrets, ConfigMaps, PriorityClasses, owners' selectors), the
fields dropped when their feature gate is off, and ``Admission``: every write's
checks, defaults and immutable fields, in the order the server applies them.
"""

from __future__ import annotations

import base64
import binascii
import copy
import ipaddress
import json
import re
import threading
from datetime import UTC, datetime
from typing import Any

import jsonschema
import yaml

from .resources import CRD_GROUPS, ApiError, Resource
from .selector import match_selector_object, selector_problem

# Pod spec fields an update may change (the rest is immutable, as on the real server).
POD_MUTABLE_SPEC = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")

# DRA limits enforced by the real API server beyond the schema.
MAX_DEVICES_PER_SLICE = 128
MAX_DEVICES_PER_SLICE_WITH_EXTRAS = 64  # taints, counters or list attributes (1.35+)
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_STRING = 64
MAX_ID_LENGTH = 32
MAX_STATUS_CONDITIONS = 8
MAX_NETWORK_IPS = 16

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")


def is_dns_label(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(_DNS_LABEL.match(value))


def is_dns_subdomain(value: Any, limit: int = 253) -> bool:
    return isinstance(value, str) and len(value) <= limit and bool(_DNS_SUBDOMAIN.match(value))


def qualified_name_problem(name: str) -> str | None:
    """Check a DRA attribute/capacity name: C identifier <= 32, optional DNS prefix <= 63."""
    prefix, sep, ident = name.rpartition("/")
    if sep and not is_dns_subdomain(prefix, 63):
        return f"{name!r}: the domain must be a DNS subdomain of at most 63 characters"
    if not ident or len(ident) > MAX_ID_LENGTH or not _C_IDENTIFIER.match(ident):
        return f"{name!r}: must be a C identifier of at most {MAX_ID_LENGTH} characters, optionally prefixed"
    return None


def is_extended_resource_name(name: str) -> bool:
    """A pod's extended resource name: ``domain/name`` outside ``kubernetes.io/``, not ``requests.*``,
    and its quota name ``requests.<name>`` a qualified name (prefix a DNS subdomain, name <= 63)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _sep, rest = ("requests." + name).partition("/")
    return (
        "/" not in rest
        and is_dns_subdomain(prefix)
        and bool(re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]", rest))
    )


def _validate_metadata(obj: dict[str, Any], resource: Resource, errors: list[str]) -> None:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not is_dns_subdomain(name):
        errors.append(f"metadata.name: Invalid value {name!r}: must be a DNS subdomain (lowercase, <= 253)")
    for key in ("labels", "annotations"):
        for label, value in (meta.get(key) or {}).items():
            if not isinstance(value, str):
                errors.append(f"metadata.{key}[{label}]: must be a string")
    controllers = [ref for ref in meta.get("ownerReferences") or [] if ref.get("controller")]
    if len(controllers) > 1:
        errors.append("metadata.ownerReferences: Invalid value: only one reference can have Controller set to true")


def _validate_attribute(path: str, value: dict[str, Any], errors: list[str]) -> None:
    kinds = [k for k in ("int", "bool", "string", "version") if k in value]
    if len(kinds) != 1:
        errors.append(f"{path}: exactly one value must be specified (int, bool, string or version), found {kinds}")
        return
    if "string" in kinds and len(value["string"]) > MAX_ATTRIBUTE_STRING:
        errors.append(f"{path}.string: Too long: may not be more than {MAX_ATTRIBUTE_STRING} bytes")
    if "version" in kinds:
        version = value["version"]
        if len(version) > MAX_ATTRIBUTE_STRING or not _SEMVER.match(version):
            errors.append(f"{path}.version: Invalid value {version!r}: must be semantic version")


def validate_resource_slice(obj: dict[str, Any], minor: str, errors: list[str]) -> None:
    spec = obj.get("spec") or {}
    if not is_dns_subdomain(spec.get("driver"), 63):
        errors.append(f"spec.driver: Invalid value {spec.get('driver')!r}: must be a DNS subdomain of <= 63")
    pool = spec.get("pool") or {}
    pool_name = pool.get("name", "")
    if not pool_name or len(pool_name) > 253 or not all(is_dns_subdomain(p) for p in pool_name.split("/")):
        errors.append(f"spec.pool.name: Invalid value {pool_name!r}: must be DNS subdomains separated by '/'")
    if pool.get("generation", 0) < 0:
        errors.append("spec.pool.generation: must be >= 0")
    if pool.get("resourceSliceCount", 0) < 1:
        errors.append("spec.pool.resourceSliceCount: must be >= 1")
    selectors = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(k)]
    if len(selectors) != 1:
        errors.append(
            f"spec: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required, got {selectors}"
        )
    if "nodeName" in spec and not is_dns_subdomain(spec["nodeName"]):
        errors.append(f"spec.nodeName: Invalid value {spec['nodeName']!r}")
    devices = spec.get("devices") or []
    extras = bool(spec.get("sharedCounters")) or any(
        d.get("taints")
        or d.get("consumesCounters")
        or any("list" in str(k).lower() for a in (d.get("attributes") or {}).values() for k in a)
        for d in devices
    )
    limit = MAX_DEVICES_PER_SLICE_WITH_EXTRAS if extras and minor >= "1.35" else MAX_DEVICES_PER_SLICE
    if len(devices) > limit:
        errors.append(f"spec.devices: Too many: {len(devices)}: must have at most {limit} items")
    seen: set[str] = set()
    for index, device in enumerate(devices):
        path = f"spec.devices[{index}]"
        name = device.get("name")
        if not is_dns_label(name):
            errors.append(f"{path}.name: Invalid value {name!r}: must be a DNS label")
        if name in seen:  # the real server names the item, not its name field
            errors.append(f"{path}: Duplicate value: {json.dumps(name)}")
        seen.add(name)
        attributes = device.get("attributes") or {}
        capacity = device.get("capacity") or {}
        if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
            errors.append(
                f"{path}: Too many: {len(attributes) + len(capacity)} attributes and capacities, "
                f"at most {MAX_ATTRIBUTES_AND_CAPACITIES}"
            )
        for attr_name, value in attributes.items():
            problem = qualified_name_problem(attr_name)
            if problem:
                errors.append(f"{path}.attributes: Invalid value {problem}")
            _validate_attribute(f"{path}.attributes[{attr_name}]", value, errors)
        multiple = bool(device.get("allowMultipleAllocations"))
        for cap_name, cap in capacity.items():
            problem = qualified_name_problem(cap_name)
            if problem:
                errors.append(f"{path}.capacity: Invalid value {problem}")
            if not _QUANTITY.match(str(cap.get("value", ""))):
                errors.append(f"{path}.capacity[{cap_name}].value: Invalid value {cap.get('value')!r}: not a quantity")
            if cap.get("requestPolicy") and not multiple:
                errors.append(
                    f"{path}.capacity[{cap_name}].requestPolicy: Forbidden: only allowed when "
                    "allowMultipleAllocations is true"
                )


def validate_counter_shape(obj: dict[str, Any], minor: str, errors: list[str]) -> None:
    """Where a pool's counter sets may be (``DRAPartitionableDevices``), as the served minor says.

    1.34: a device consumes counters of a set in its own slice's ``sharedCounters``. 1.35 and later: a slice
    has ``sharedCounters`` or ``devices``, never both (devices consume the sets of other slices of the pool).
    """
    spec = obj.get("spec") or {}
    if minor >= "1.35":
        if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
            errors.append('spec: Invalid value: "": only one of `sharedCounters` or `devices` is allowed')
        return
    sets = {s.get("name") for s in spec.get("sharedCounters") or []}
    for index, device in enumerate(spec.get("devices") or []):
        for number, consumed in enumerate(device.get("consumesCounters") or []):
            if consumed.get("counterSet") not in sets:
                errors.append(
                    f"spec.devices[{index}].consumesCounters[{number}].counterSet: Invalid value: "
                    f"{json.dumps(consumed.get('counterSet'))}: must reference a counterSet defined in the "
                    "ResourceSlice sharedCounters"
                )


# field.ErrorType's reason in a Status cause, by the words that begin an error's message
_CAUSE_REASONS = (
    ("Duplicate value", "FieldValueDuplicate"),
    ("Invalid value", "FieldValueInvalid"),
    ("Required value", "FieldValueRequired"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("Forbidden", "FieldValueForbidden"),
    ("Too long", "FieldValueTooLong"),
    ("Too many", "FieldValueTooMany"),
    ("Not found", "FieldValueNotFound"),
)


def invalid_details(kind: str, group: str, name: Any, errors: list[str]) -> dict[str, Any]:
    """A 422 Status's ``details``: one cause per error, ``field`` the path before the first ``": "``."""
    causes = []
    for error in errors:
        field, sep, message = error.partition(": ")
        if not sep or " " in field:  # a message that names no field path
            field, message = "", error
        reason = next((r for words, r in _CAUSE_REASONS if message.startswith(words)), "FieldValueInvalid")
        causes.append({"reason": reason, "message": message, "field": field})
    return {"name": name, "group": group, "kind": kind, "causes": causes}


_LABEL_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
TAINT_EFFECTS = ("None", "NoSchedule", "NoExecute")  # "None" from 1.35 (v1 DeviceTaint)


def validate_device_taints(obj: dict[str, Any], minor: str, errors: list[str]) -> None:
    """v1 DeviceTaint rules: key a label name, value a label value, a known effect, at most 16 (1.36 types)."""
    for index, device in enumerate((obj.get("spec") or {}).get("devices") or []):
        taints = device.get("taints") or []
        if len(taints) > 16:
            errors.append(f"spec.devices[{index}].taints: Too many: {len(taints)}: must have at most 16 items")
        for number, taint in enumerate(taints):
            path = f"spec.devices[{index}].taints[{number}]"
            key = str(taint.get("key") or "")
            prefix, sep, name = key.rpartition("/")
            if (sep and not is_dns_subdomain(prefix)) or len(name) > 63 or not _LABEL_NAME_PART.match(name):
                errors.append(f"{path}.key: Invalid value {key!r}: must be a qualified label name")
            value = taint.get("value") or ""
            if value and (len(value) > 63 or not _LABEL_NAME_PART.match(value)):
                errors.append(f"{path}.value: Invalid value {value!r}: must be a label value")
            effects = TAINT_EFFECTS if minor >= "1.35" else TAINT_EFFECTS[1:]
            if taint.get("effect") not in effects:
                errors.append(f"{path}.effect: Unsupported value {taint.get('effect')!r}: supported values {effects}")


def default_taint_times(obj: dict[str, Any]) -> None:
    """The API server sets a taint's timeAdded on create or update when the client did not.

    A metav1.Time is stored in seconds and answered as RFC 3339 UTC with ``Z``,
    whatever offset form the client sent (the Python client sends ``+00:00``).
    """
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for device in (obj.get("spec") or {}).get("devices") or []:
        for taint in device.get("taints") or []:
            sent = taint.get("timeAdded")
            if not sent:
                taint["timeAdded"] = now
                continue
            try:
                parsed = datetime.fromisoformat(str(sent).replace("Z", "+00:00"))
            except ValueError as exc:
                raise ApiError(422, f"timeAdded: Invalid value {sent!r}: not an RFC 3339 time") from exc
            taint["timeAdded"] = parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
CONFIG_MAP_MAX_BYTES = 1024 * 1024


def validate_config_map(obj: dict[str, Any], errors: list[str]) -> None:
    """What the real server checks on a ConfigMap beyond its schema: keys, binaryData's base64, the size."""
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    size = 0
    for field, entries in (("data", data), ("binaryData", binary)):
        for key, value in entries.items():
            if len(key) > 253 or not CONFIG_MAP_KEY.fullmatch(key) or key in (".", ".."):
                errors.append(f"{field}[{key}]: Invalid value: {key!r}: a valid config key must consist of "
                              "alphanumeric characters, '-', '_' or '.'")  # fmt: skip
            if field == "binaryData":
                try:
                    size += len(base64.b64decode(value, validate=True))
                except (binascii.Error, ValueError):
                    errors.append(f"binaryData[{key}]: Invalid value: illegal base64 data")
            else:
                size += len(str(value).encode())
            size += len(key)
    for key in sorted(set(data) & set(binary)):
        errors.append(f"data[{key}]: Invalid value: {key!r}: duplicate of key present in binaryData")
    if size > CONFIG_MAP_MAX_BYTES:
        errors.append(f"[]: Too long: must have at most {CONFIG_MAP_MAX_BYTES} bytes")


def validate_resource_claim_status(obj: dict[str, Any], errors: list[str]) -> None:
    status = obj.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    allocated = {(r.get("driver"), r.get("pool"), r.get("device"), r.get("shareID")) for r in results}
    seen = set()
    for index, entry in enumerate(status.get("devices") or []):
        path = f"status.devices[{index}]"
        key = (entry.get("driver"), entry.get("pool"), entry.get("device"), entry.get("shareID"))
        if key not in allocated:
            errors.append(f"{path}: Invalid value {key}: must be an allocated device in the claim")
        if key in seen:
            errors.append(f"{path}: Duplicate value {key}")
        seen.add(key)
        conditions = entry.get("conditions") or []
        if len(conditions) > MAX_STATUS_CONDITIONS:
            errors.append(f"{path}.conditions: Too many: must have at most {MAX_STATUS_CONDITIONS} items")
        for cond in conditions:
            for field in ("type", "status", "lastTransitionTime", "reason", "message"):
                if field not in cond:
                    errors.append(f"{path}.conditions: Required value: {field}")
        network = entry.get("networkData") or {}
        if len(network.get("interfaceName", "")) > 256:
            errors.append(f"{path}.networkData.interfaceName: Too long: may not be more than 256 bytes")
        if len(network.get("hardwareAddress", "")) > 128:
            errors.append(f"{path}.networkData.hardwareAddress: Too long: may not be more than 128 bytes")
        ips = network.get("ips") or []
        if len(ips) > MAX_NETWORK_IPS:
            errors.append(f"{path}.networkData.ips: Too many: must have at most {MAX_NETWORK_IPS} items")
        for ip in ips:
            try:
                ipaddress.ip_interface(ip)
                if "/" not in ip:
                    raise ValueError(ip)
            except ValueError:
                errors.append(f"{path}.networkData.ips: Invalid value {ip!r}: must be an IP address in CIDR form")
        if len(set(ips)) != len(ips):
            errors.append(f"{path}.networkData.ips: Duplicate value")
    if len(status.get("reservedFor") or []) > 256:
        errors.append("status.reservedFor: Too many: must have at most 256 items")


_VALIDATORS: dict[tuple[str, str, str], Any] = {}
_VALIDATORS_LOCK = threading.Lock()


def _closed(schema: Any) -> Any:
    """An OpenAPI schema of a CRD where objects with ``properties`` refuse other fields (strict field validation)."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: _closed(value) for key, value in schema.items()}
    if "properties" in schema and "additionalProperties" not in schema:
        if not schema.get("x-kubernetes-preserve-unknown-fields"):
            closed["additionalProperties"] = False
    return closed


def crd_schema_error(obj: dict[str, Any]) -> Any:
    """The first error of a scheduler's object against the openAPIV3Schema of its CRD (strict), or None."""
    kind = obj.get("kind", "")
    key = ("crd", obj.get("apiVersion", ""), kind)
    with _VALIDATORS_LOCK:
        validator = _VALIDATORS.get(key)
        if validator is None:
            group, _slash, version = obj.get("apiVersion", "").rpartition("/")
            for path in sorted(CRD_GROUPS[group][0].glob(f"{group}_*.yaml")):
                crd = yaml.safe_load(path.read_text(encoding="utf-8"))
                if crd["spec"]["names"]["kind"] != kind:
                    continue
                for served in crd["spec"]["versions"]:
                    if served["name"] == version and served.get("served"):
                        schema = _closed(served["schema"]["openAPIV3Schema"])
                        # metadata is the server's ObjectMeta, checked by _validate_metadata
                        schema["properties"]["metadata"] = {"type": "object"}
                        validator = jsonschema.validators.Draft202012Validator(schema)
            if validator is None:
                raise ApiError(404, f"no CRD serves {kind} {obj.get('apiVersion')}", "NotFound")
            _VALIDATORS[key] = validator
    return jsonschema.exceptions.best_match(validator.iter_errors(obj))


def schema_error(obj: dict[str, Any], minor: str) -> Any:
    """The first error of ``obj`` against kubernetes-validate's strict schema for ``minor``, or None.

    Same schema files and the same validator class as ``kubernetes_validate.validate``
    (which a test checks), but each compiled validator is kept: loading the schema
    files is most of the 10-50 ms that a call costs.
    """
    key = (minor, obj.get("apiVersion", ""), obj.get("kind", ""))
    with _VALIDATORS_LOCK:
        validator = _VALIDATORS.get(key)
        if validator is None:
            validator = _VALIDATORS[key] = _compile(*key)
    return jsonschema.exceptions.best_match(validator.iter_errors(obj))


def _compile(minor: str, api_version: str, kind: str) -> Any:
    from kubernetes_validate import utils
    from referencing import Registry, Resource

    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema_dir = f"v{minor}.0-local-strict"
    schema = utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group_version}.json", minor)
    definitions = utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", minor)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def drop_disabled_fields(obj: dict[str, Any], gates: dict[str, bool]) -> None:
    """Remove fields whose feature gate is off, as the real API server does on write."""
    if obj.get("kind") == "DeviceClass" and not gates["DRAExtendedResource"]:
        (obj.get("spec") or {}).pop("extendedResourceName", None)
    if obj.get("kind") != "ResourceSlice":
        return
    spec = obj.get("spec") or {}
    if not gates["DRAPartitionableDevices"]:
        spec.pop("sharedCounters", None)
        spec.pop("perDeviceNodeSelection", None)
    for device in spec.get("devices") or []:
        if not gates["DRAConsumableCapacity"]:
            device.pop("allowMultipleAllocations", None)
            for cap in (device.get("capacity") or {}).values():
                cap.pop("requestPolicy", None)
        if not gates["DRAPartitionableDevices"]:
            for key in ("consumesCounters", "nodeName", "nodeSelector", "allNodes"):
                device.pop(key, None)
        if not gates["DRADeviceTaints"]:
            device.pop("taints", None)


# ---------------------------------------------------------------------------
# Admission: the checks, defaults and immutable fields of a write
# ---------------------------------------------------------------------------


class Admission:
    """Validate a write and apply the real server's defaults and immutable fields (mixed into FakeApiServer)."""

    minor: str
    gates: dict[str, bool]

    def _validate(self, resource: Resource, obj: dict[str, Any]) -> None:
        if obj.get("apiVersion") != resource.api_version or obj.get("kind") != resource.kind:
            raise ApiError(
                400,
                f"the body's apiVersion/kind {obj.get('apiVersion')}/{obj.get('kind')} does not match "
                f"{resource.api_version}/{resource.kind}",
            )
        if resource.group in CRD_GROUPS:
            error = crd_schema_error(obj)
        else:
            error = schema_error(obj, self.minor)
        if error is not None:
            where = ".".join(str(p) for p in error.path) or "(root)"
            schema = CRD_GROUPS[resource.group][1] if resource.group in CRD_GROUPS else f"schema {self.minor}"
            raise ApiError(422, f"{resource.kind} {where}: {error.message} ({schema}, strict)")
        errors: list[str] = []
        _validate_metadata(obj, resource, errors)
        if resource.kind == "ResourceSlice":
            validate_resource_slice(obj, self.minor, errors)
            if self.gates["DRAPartitionableDevices"]:  # with the gate off the fields are dropped, never checked
                validate_counter_shape(obj, self.minor, errors)
            if self.gates["DRADeviceTaints"]:  # with the gate off the field is dropped, never validated
                validate_device_taints(obj, self.minor, errors)
        elif resource.kind == "DeviceClass":
            name = (obj.get("spec") or {}).get("extendedResourceName")
            if name is not None and not is_extended_resource_name(name):
                errors.append(
                    f"spec.extendedResourceName: Invalid value: {name!r}: must be a valid extended resource name"
                )
        elif resource.kind == "ResourceClaim":
            validate_resource_claim_status(obj, errors)
        elif resource.kind == "PodDisruptionBudget":
            spec = obj.get("spec") or {}
            if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
                errors.append("spec: Invalid value: minAvailable and maxUnavailable cannot be both set")
            problem = selector_problem(spec.get("selector"), "spec.selector")
            if problem:
                errors.append(problem)
        elif resource.kind == "Secret":
            for key, value in (obj.get("data") or {}).items():
                try:
                    base64.b64decode(value, validate=True)
                except (binascii.Error, ValueError):
                    errors.append(f"data[{key}]: Invalid value: illegal base64 data")
            if obj.get("type") == "kubernetes.io/service-account-token" and not (
                obj["metadata"].get("annotations") or {}
            ).get("kubernetes.io/service-account.name"):
                errors.append(
                    "metadata.annotations[kubernetes.io/service-account.name]: Required value: "
                    "a service-account-token Secret names its ServiceAccount"
                )
        elif resource.kind == "ConfigMap":
            validate_config_map(obj, errors)
        elif resource.kind == "PriorityClass":
            name = obj["metadata"].get("name", "")
            if name.startswith("system-") and name not in ("system-cluster-critical", "system-node-critical"):
                errors.append(
                    f"metadata.name: Invalid value {name!r}: priority class names with 'system-' prefix are reserved"
                )
        elif resource.kind in ("DaemonSet", "ReplicaSet"):
            spec = obj.get("spec") or {}
            problem = selector_problem(spec.get("selector"), "spec.selector")
            if problem:
                errors.append(problem)
            elif not spec.get("selector", {}).get("matchLabels") and not spec.get("selector", {}).get(
                "matchExpressions"
            ):
                errors.append("spec.selector: Invalid value: empty selector is invalid for deployment")
            template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
            if not problem and not match_selector_object(template_labels, spec.get("selector")):
                errors.append(
                    "spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`"
                )
        if errors:
            name = (obj.get("metadata") or {}).get("name")
            details = invalid_details(resource.kind, resource.group, name, errors)
            raise ApiError(422, f'{resource.kind} "{name}" is invalid: ' + "; ".join(errors), details=details)

    def _finish_write(self, resource: Resource, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if resource.kind == "Secret" and isinstance(obj.get("stringData"), dict):
            # the real server folds stringData into data on write and never stores it
            data = obj.setdefault("data", {})
            for key, value in obj.pop("stringData").items():
                data[key] = base64.b64encode(str(value).encode()).decode()
        self._validate(resource, obj)
        drop_disabled_fields(obj, self.gates)
        if resource.kind == "ResourceSlice":
            default_taint_times(obj)
        if resource.kind == "Node":
            # A real server always answers a spec (clients read spec.unschedulable), and never stores
            # unschedulable: false (omitempty).
            spec = obj.setdefault("spec", {})
            if spec.get("unschedulable") is False:
                del spec["unschedulable"]
        if resource.kind == "Pod":
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        if old is not None and resource.kind == "Pod":

            def frozen(spec: dict[str, Any]) -> dict[str, Any]:
                spec = copy.deepcopy(spec or {})
                for field in POD_MUTABLE_SPEC:
                    spec.pop(field, None)
                for key in ("containers", "initContainers"):
                    for container in spec.get(key) or []:
                        container.pop("image", None)
                return spec

            if frozen(old.get("spec")) != frozen(obj.get("spec")):
                name = obj["metadata"]["name"]
                raise ApiError(
                    422,
                    f'Pod "{name}" is invalid: spec: Forbidden: pod updates may not change fields other than '
                    "`spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, "
                    "`spec.tolerations` (only additions to existing tolerations), "
                    "`spec.terminationGracePeriodSeconds`",
                )
        if resource.kind == "Namespace":
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj.setdefault("status", {}).setdefault("phase", "Active")
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        if old is not None:
            immutable = {
                "Secret": ("type",),
                "PriorityClass": ("value",),
                "ClusterRoleBinding": ("roleRef",),
            }.get(resource.kind, ())
            for field in immutable:
                if old.get(field) != obj.get(field):
                    raise ApiError(
                        422,
                        f'{resource.kind} "{obj["metadata"]["name"]}" is invalid: {field}: Invalid value: field is immutable',
                    )
        if old is not None and resource.kind == "ConfigMap" and old.get("immutable"):
            for field in ("data", "binaryData", "immutable"):
                if old.get(field) != obj.get(field):
                    raise ApiError(
                        422,
                        f'ConfigMap "{obj["metadata"]["name"]}" is invalid: {field}: Forbidden: '
                        "field is immutable when `immutable` is set",
                    )
        if old is not None and resource.kind in ("DaemonSet", "ReplicaSet"):
            if (old.get("spec") or {}).get("selector") != (obj.get("spec") or {}).get("selector"):
                raise ApiError(422, f"{resource.kind} spec.selector: Invalid value: field is immutable")
        if old is not None and resource.kind == "ResourceSlice":
            for field in ("driver", "nodeName", "nodeSelector", "allNodes"):
                if old["spec"].get(field) != obj["spec"].get(field):
                    raise ApiError(422, f"ResourceSlice spec.{field}: Invalid value: field is immutable")
            if old["spec"]["pool"]["name"] != obj["spec"]["pool"]["name"]:
                raise ApiError(422, "ResourceSlice spec.pool.name: Invalid value: field is immutable")
        if old is not None and resource.kind == "ResourceClaim" and old.get("spec") != obj.get("spec"):
            raise ApiError(422, "ResourceClaim spec: Invalid value: field is immutable")
