# SPDX-License-Identifier: Apache-2.0
"""ResourceSlices: a node's devices cut into slices, read back, and checked against the v1 limits.

:func:`resource_slices` cuts what :func:`model.devices_from_topology` returns into
the slices of one pool named after the node (the driver publishes exactly
these), :func:`devices_from_slices` groups the devices of complete pools per node
again (the planner's input), and :func:`validate_device` and
:func:`validate_slice` apply the ``resource.k8s.io/v1`` limits of
:data:`model.LIMITS`.

The code runs on nodes (Python >= 3.9) and imports nothing from Ansible.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.dra.model import (
    API_VERSION,
    DRIVER_NAME,
    LIMITS,
    LIST_VALUE_FIELDS,
    SCALAR_VALUE_FIELDS,
    DeviceModelError,
    is_dns_label,
    is_dns_subdomain,
    is_qualified_name,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def _slice_name(node_name: str, driver: str, index: int) -> str:
    base = f"{node_name}-{driver.replace('.', '-')}"
    suffix = f"-{index}"
    return base[: LIMITS["dns_subdomain_max_length"] - len(suffix)].rstrip("-.") + suffix


def resource_slices(
    node_name: str,
    devices: list[dict[str, Any]],
    driver: str = DRIVER_NAME,
    generation: int = 1,
    max_devices: int | None = None,
) -> list[dict[str, Any]]:
    """Cut ``devices`` into ResourceSlice dicts of one pool named after the node.

    Every slice has ``pool.generation`` and ``pool.resourceSliceCount`` set so a
    reader knows when it has seen the whole pool. A node without devices still
    gets one empty slice (the pool exists, with nothing in it).
    """
    if not is_dns_subdomain(node_name):
        raise DeviceModelError(f"node_name {node_name!r} is not a DNS subdomain")
    if not is_dns_subdomain(driver) or len(driver) > LIMITS["driver_name_max_length"]:
        raise DeviceModelError(f"driver {driver!r} is not a DNS subdomain of at most 63 characters")
    if not isinstance(generation, int) or generation < 0:
        raise DeviceModelError(f"generation {generation!r} must be a non-negative integer")
    limit = max_devices or slice_device_limit(devices)
    if limit < 1 or limit > LIMITS["slice_max_devices"]:
        raise DeviceModelError(f"max_devices {max_devices!r} must lie in 1..{LIMITS['slice_max_devices']}")
    chunks = [devices[i : i + limit] for i in range(0, len(devices), limit)] or [[]]
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {"name": _slice_name(node_name, driver, index)},
            "spec": {
                "driver": driver,
                "nodeName": node_name,
                "pool": {"name": node_name, "generation": generation, "resourceSliceCount": len(chunks)},
                "devices": chunk,
            },
        }
        for index, chunk in enumerate(chunks)
    ]


COUNTER_SETS_PER_SLICE = 8  # ResourceSliceMaxCounterSets (1.35 and later: in slices without devices)


def _slice(node_name: str, driver: str, index: int, generation: int, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": _slice_name(node_name, driver, index)},
        "spec": dict(
            {"driver": driver, "nodeName": node_name, "pool": {"name": node_name, "generation": generation}}, **spec
        ),
    }


def partitioned_slices(
    node_name: str,
    devices: list[dict[str, Any]],
    counter_sets: list[dict[str, Any]],
    minor: str,
    driver: str = DRIVER_NAME,
    generation: int = 1,
) -> list[dict[str, Any]]:
    """The pool of a node with partitionable devices (``DRAPartitionableDevices``), in the shape ``minor`` takes.

    1.35 and later: the counter sets in slices of their own (no devices, at most 8 sets each), the devices that
    consume counters in slices of at most 64, a set's devices kept together in published order; 1.34: each
    set in one slice with the devices that consume it. Devices that consume no counter go in slices of their
    own as :func:`resource_slices` cuts them.
    """
    base = resource_slices(node_name, devices, driver, generation)  # names and limits checked there
    by_set: dict[str, list[dict[str, Any]]] = {s["name"]: [] for s in counter_sets}
    plain = []
    for device in devices:
        sets = [c.get("counterSet") for c in device.get("consumesCounters") or []]
        if not sets:
            plain.append(device)
        elif len(set(sets)) != 1 or sets[0] not in by_set:
            raise DeviceModelError(f"device {device.get('name')!r} consumes counters of unknown or several sets")
        else:
            by_set[sets[0]].append(device)
    limit = LIMITS["slice_max_devices_with_counters"]
    for name, members in by_set.items():
        if len(members) > limit:
            raise DeviceModelError(f"counter set {name!r}: {len(members)} devices, at most {limit} in one slice")
    specs: list[dict[str, Any]] = []
    if minor == "1.34":
        specs += [{"sharedCounters": [s], "devices": by_set[s["name"]]} for s in counter_sets]
    else:
        for i in range(0, len(counter_sets), COUNTER_SETS_PER_SLICE):
            specs.append({"sharedCounters": counter_sets[i : i + COUNTER_SETS_PER_SLICE]})
        chunk: list[dict[str, Any]] = []
        for members in by_set.values():
            if chunk and len(chunk) + len(members) > limit:
                specs.append({"devices": chunk})
                chunk = []
            chunk = chunk + members
        if chunk:
            specs.append({"devices": chunk})
    if plain:
        specs += [{"devices": s["spec"]["devices"]} for s in resource_slices(node_name, plain, driver, generation)]
    slices = [_slice(node_name, driver, i, generation, spec) for i, spec in enumerate(specs)] or base
    for item in slices:
        item["spec"]["pool"]["resourceSliceCount"] = len(slices)
    return slices


def devices_from_slices(slices: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Group the devices of ResourceSlices per node, keeping only complete pools.

    Returns ``{node_name: [device, ...]}``; every device gets ``driver`` and
    ``pool`` keys added (copies, the input is not changed). For each
    (driver, pool) only the slices of the highest generation count, as the
    scheduler does. Slices without ``nodeName`` are skipped.
    """
    newest: dict[tuple[str, str], int] = {}
    kept = []
    for item in slices:
        spec = item.get("spec") or {}
        node = spec.get("nodeName")
        pool = spec.get("pool") or {}
        if not node:
            continue
        key = (spec.get("driver") or "", pool.get("name") or node)
        generation = int(pool.get("generation") or 0)
        if generation > newest.get(key, -1):
            newest[key] = generation
        kept.append((key, generation, node, spec))
    result: dict[str, list[dict[str, Any]]] = {}
    for key, generation, node, spec in kept:
        if generation != newest[key]:
            continue
        for device in spec.get("devices") or []:
            entry = dict(device)
            entry["driver"] = key[0]
            entry["pool"] = key[1]
            result.setdefault(node, []).append(entry)
    return result


# -- validation against the limits ---------------------------------------------


def validate_device(device: dict[str, Any]) -> list[str]:
    """Problems of one Device dict against the v1 rules; empty when valid."""
    problems = []
    name = device.get("name")
    where = f"device {name!r}"
    if not is_dns_label(name):
        problems.append(f"{where}: name is not a DNS label")
    attrs = device.get("attributes") or {}
    capacity = device.get("capacity") or {}
    total = len(attrs) + len(capacity)
    if total > LIMITS["device_max_attributes_and_capacities"]:
        problems.append(
            f"{where}: {total} attributes and capacities, limit {LIMITS['device_max_attributes_and_capacities']}"
        )
    values = 0
    for key, value in attrs.items():
        if not is_qualified_name(key):
            problems.append(f"{where}: attribute name {key!r} is not a qualified name")
        if (
            not isinstance(value, dict)
            or len(value) != 1
            or next(iter(value)) not in SCALAR_VALUE_FIELDS + tuple(LIST_VALUE_FIELDS)
        ):
            problems.append(
                f"{where}: attribute {key!r} must have exactly one of string, int, bool, version"
                " (or, with DRAListTypeAttributes, strings, ints, bools, versions)"
            )
            continue
        ((field, raw),) = value.items()
        if field in LIST_VALUE_FIELDS:
            if not isinstance(raw, list) or not raw:
                problems.append(f"{where}: attribute {key!r}: {field} must be a non-empty list")
                continue
            vtype, items = LIST_VALUE_FIELDS[field], raw
        else:
            vtype, items = field, [raw]
        values += len(items)
        for item in items:
            if vtype in ("string", "version") and (
                not isinstance(item, str) or len(item) > LIMITS["device_attribute_max_value_length"]
            ):
                problems.append(f"{where}: attribute {key!r} must hold strings of at most 64 characters")
            if vtype == "int" and (not isinstance(item, int) or isinstance(item, bool)):
                problems.append(f"{where}: attribute {key!r} must hold integers")
            if vtype == "bool" and not isinstance(item, bool):
                problems.append(f"{where}: attribute {key!r} must hold booleans")
    if values > LIMITS["device_max_attribute_values"]:
        problems.append(
            f"{where}: {values} attribute values (list elements counted one by one), "
            f"limit {LIMITS['device_max_attribute_values']}"
        )
    for key, value in capacity.items():
        if not is_qualified_name(key):
            problems.append(f"{where}: capacity name {key!r} is not a qualified name")
        if not isinstance(value, dict) or "value" not in value:
            problems.append(f"{where}: capacity {key!r} needs a value")
    return problems


def _has_list_attribute(device: dict[str, Any]) -> bool:
    return any(
        isinstance(value, dict) and any(field in LIST_VALUE_FIELDS for field in value)
        for value in (device.get("attributes") or {}).values()
    )


def slice_device_limit(devices: list[dict[str, Any]]) -> int:
    """Devices one ResourceSlice may hold: 64 once a device uses taints, counters or list-typed
    attributes (the API's "advanced features"), else 128."""
    advanced = any(d.get("consumesCounters") or d.get("taints") or _has_list_attribute(d) for d in devices)
    return LIMITS["slice_max_devices_with_counters" if advanced else "slice_max_devices"]


def validate_slice(item: dict[str, Any]) -> list[str]:
    """Problems of a ResourceSlice dict against the v1 limits; empty when valid."""
    spec = item.get("spec") or {}
    devices = spec.get("devices") or []
    problems = []
    limit = slice_device_limit(devices)
    if len(devices) > limit:
        problems.append(
            f"ResourceSlice {item.get('metadata', {}).get('name')!r}: {len(devices)} devices, limit {limit}"
        )
    seen = set()
    for device in devices:
        if device.get("name") in seen:
            problems.append(f"device name {device.get('name')!r} appears twice")
        seen.add(device.get("name"))
        problems.extend(validate_device(device))
    return problems
