# SPDX-License-Identifier: Apache-2.0
"""Allocation planner: how many claims of each template fit on each node.

The planner simulates what kube-scheduler's structured-parameters allocator
does for one claim at a time on one node, and repeats it until the next claim
no longer fits, so "fits" is the number of claims of a template that the
node can hold at once, allocated in the scheduler's order:

- a device is a candidate for a request when every selector of the request's
  DeviceClass and of the request itself evaluates to true (CEL, see
  :mod:`dra_cel`); an evaluation error (missing attribute, non-boolean result,
  a function failing) aborts the allocation, and the planner reports it with
  the node, the device, the request and the expression;
- requests are allocated in order, each from the node's devices in order
  (sorted by driver, pool and name, as the driver publishes them);
  ``ExactCount`` takes ``count`` devices, ``All`` takes every candidate (and
  fails when there is none or one is in use); ``firstAvailable`` tries its
  alternatives in order;
- ``matchAttribute`` constraints need every device of the named requests
  (all requests when none are named) to carry the attribute, with values
  whose intersection is not empty, ``distinctAttribute`` needs the values to
  be pairwise disjoint; a scalar is a one-element set and a list-typed value
  (DRAListTypeAttributes) the set of its elements, so for scalars this is
  "one value" and "all values differ" (KEP-5491); a device without the
  attribute fails both;
- a device is used by at most one claim, unless it allows multiple
  allocations (consumable capacity): then capacity requests are subtracted
  from what it has left; a request's capacity must fit the device either way.
  Devices that consume shared counters (partitionable devices) fit only while
  their counter set has enough left;
- a device taint with effect NoSchedule or NoExecute keeps the device out
  unless the request tolerates it; ``adminAccess`` requests may get devices in
  use and leave them free.

The search backtracks over every choice, like the scheduler's, so a claim that
is reported as not fitting cannot be allocated on that node at all. Between
claims, allocations are kept (greedy, in the scheduler's order); a different
order could sometimes fit more.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import gc
from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import LEVELS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SCHEMA_VERSION = 1
MAX_CLAIMS_PER_NODE = 1024
DEFAULT_STEP_LIMIT = 200000


class PlanError(ValueError):
    """Input that cannot be planned (a malformed class or template)."""


# -- inputs ---------------------------------------------------------------------------

NODE_STATES = ("failed", "unreachable")


def node_accounting(
    planned: list[str], nodes_failed: dict[str, Any], node_counts: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The plan's ``nodes_failed`` and ``node_counts``: the nodes left out of the plan, and why.

    ``nodes_failed`` is the site summary's (node to ``state``, ``stage``, ``task``,
    ``error``, ``stale_facts``); ``node_counts`` defaults to the ``planned`` nodes
    as ok and the failed ones by state.
    """
    for name, entry in nodes_failed.items():
        if not isinstance(entry, dict) or entry.get("state") not in NODE_STATES or not entry.get("stage"):
            raise PlanError(
                f"nodes_failed.{name}: needs 'state' ({' or '.join(NODE_STATES)}) and 'stage' (got {entry!r})"
            )
    both = sorted(set(planned) & set(nodes_failed))
    if both:
        raise PlanError(f"nodes_failed: {both} are planned too; a failed node is never planned on")
    states = [entry["state"] for entry in nodes_failed.values()]
    counts = {"ok": len(planned), "failed": states.count("failed"), "unreachable": states.count("unreachable")}
    if node_counts is not None:
        wrong = {k: v for k, v in node_counts.items() if k not in counts or not isinstance(v, int) or v < 0}
        missing = [k for k in counts if k not in node_counts]
        if wrong or missing:
            raise PlanError(f"node_counts: needs counts 'ok', 'failed' and 'unreachable' (got {node_counts!r})")
        counts = dict(node_counts)
    return {"nodes_failed": {name: dict(nodes_failed[name]) for name in sorted(nodes_failed)}, "node_counts": counts}


def _shared_value(value: Any, shared: dict[tuple, Any]) -> Any:
    """One object for equal scalar attribute values (``{"string": "nvidia"}``); the planner only reads them."""
    if isinstance(value, dict) and len(value) == 1:
        ((kind, raw),) = value.items()
        if isinstance(raw, (str, int, bool)):
            return shared.setdefault((kind, type(raw), raw), value)
    return value


def nodes_from_topologies(
    topologies: dict[str, dict[str, Any]],
    device_options: dict[str, Any] | None = None,
    driver: str = dra.DRIVER_NAME,
    shared: dict[tuple, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Planner nodes from probed topologies, with the devices the driver would publish.

    ``shared``: a table kept between calls (a site's nodes converted one at a
    time) so that attribute values the nodes repeat (model, vendor, driver,
    NUMA node...) are held once; without it, within this call.
    """
    shared = {} if shared is None else shared
    nodes = {}
    for node, topology in sorted(topologies.items()):
        devices = []
        for device in dra.devices_from_topology(topology, device_options):
            entry = dict(device)
            entry["attributes"] = {
                name: _shared_value(value, shared) for name, value in (device.get("attributes") or {}).items()
            }
            entry["driver"] = driver
            entry["pool"] = node
            devices.append(entry)
        nodes[node] = {
            "devices": devices,
            "links": topology.get("links") or {},
            "probed": device_model.probed_node(topology),
            "shared_counters": {},
        }
    return nodes


def nodes_from_slices(
    slices: list[dict[str, Any]], topologies: dict[str, dict[str, Any]] | None = None
) -> dict[str, dict[str, Any]]:
    """Planner nodes from ResourceSlices (any driver); ``topologies`` add the GPU-NIC levels.

    A published device is joined to its node's probe by any PCI address it
    publishes (:func:`device_model.join_device`); without one, its pair levels
    are bounded from its PCIe root and NUMA node.
    """
    grouped = dra.devices_from_slices(slices)
    counters: dict[str, dict[str, dict[str, Fraction]]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        node = spec.get("nodeName")
        for counter_set in spec.get("sharedCounters") or []:
            values = {name: _quantity(v.get("value")) for name, v in (counter_set.get("counters") or {}).items()}
            counters.setdefault(node, {})[counter_set.get("name")] = values
    topologies = topologies or {}
    return {
        node: {
            "devices": devices,
            "links": (topologies.get(node) or {}).get("links") or {},
            "probed": device_model.probed_node(topologies.get(node)),
            "shared_counters": counters.get(node, {}),
        }
        for node, devices in sorted(grouped.items())
    }


def tainted_devices(nodes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The plan's ``tainted_devices``: every device taint in the plan input, by node and device.

    Only taints with effect NoSchedule or NoExecute keep a device out of the plan;
    the others are listed too (they only inform).
    """
    found = []
    for node, data in sorted(nodes.items()):
        for device in data.get("devices") or []:
            driver = device.get("driver") or dra.DRIVER_NAME
            label = device["name"] if driver == dra.DRIVER_NAME else f"{driver}/{device['name']}"
            for taint in device.get("taints") or []:
                entry = {"node": node, "device": label}
                entry.update({k: taint[k] for k in ("key", "value", "effect", "timeAdded") if taint.get(k)})
                entry["keeps_out"] = taint.get("effect") in ("NoSchedule", "NoExecute")
                found.append(entry)
    return found


def _quantity(text: Any) -> Fraction:
    try:
        return dra_cel.parse_quantity(str(text))
    except ValueError as exc:
        raise PlanError(str(exc)) from None


# -- classes and templates ----------------------------------------------------------------


class _Alternative:
    __slots__ = ("name", "request", "class_name", "selectors", "mode", "count", "capacity", "admin", "tolerations")

    def __init__(self, name, request, class_name, selectors, mode, count, capacity, admin=False, tolerations=()):
        self.name = name  # "req" or "req/sub"
        self.request = request
        self.class_name = class_name
        self.selectors = selectors  # list of dra_cel.Selector
        self.mode = mode
        self.count = count
        self.capacity = capacity  # {qualified capacity name: Fraction}
        self.admin = admin  # adminAccess: devices in use may be handed out, and stay free
        self.tolerations = tolerations  # device taint tolerations

    def tolerates(self, taint: dict[str, Any]) -> bool:
        """Kubernetes' toleration rules, applied to one device taint."""
        for toleration in self.tolerations:
            operator = toleration.get("operator") or "Equal"
            key = toleration.get("key") or ""
            if key and key != taint.get("key"):
                continue
            if not key and operator != "Exists":
                continue
            if operator == "Equal" and (toleration.get("value") or "") != (taint.get("value") or ""):
                continue
            effect = toleration.get("effect") or ""
            if effect and effect != taint.get("effect"):
                continue
            return True
        return False


class _Constraint:
    __slots__ = ("kind", "attribute", "requests")

    def __init__(self, kind, attribute, requests):
        self.kind = kind
        self.attribute = attribute
        self.requests = requests  # frozenset of names, or None for all

    def applies(self, alternative: _Alternative) -> bool:
        return self.requests is None or alternative.request in self.requests or alternative.name in self.requests


class Compiler:
    """Compiles classes and templates once; selectors are shared between templates."""

    def __init__(self, classes: list[dict[str, Any]]) -> None:
        self.selectors: dict[str, dra_cel.Selector] = {}
        self.classes: dict[str, list[dra_cel.Selector]] = {}
        self.problems: list[dict[str, Any]] = []
        for item in classes:
            name = (item.get("metadata") or {}).get("name")
            if not name:
                raise PlanError("a DeviceClass has no metadata.name")
            selectors = (item.get("spec") or {}).get("selectors") or []
            self.classes[name] = [self.selector(_expression(s, f"DeviceClass {name}")) for s in selectors]

    def selector(self, expression: str) -> dra_cel.Selector:
        if expression not in self.selectors:
            self.selectors[expression] = dra_cel.Selector(expression)
        return self.selectors[expression]

    def template(self, item: dict[str, Any]) -> tuple[list[list[_Alternative]], list[_Constraint]]:
        name = (item.get("metadata") or {}).get("name")
        spec = item.get("spec") or {}
        if item.get("kind") == "ResourceClaimTemplate":
            spec = spec.get("spec") or {}
        devices = spec.get("devices") or {}
        requests = []
        for request in devices.get("requests") or []:
            rname = request.get("name")
            if request.get("exactly") and request.get("firstAvailable"):
                raise PlanError(f"template {name}: request {rname} has both exactly and firstAvailable")
            if request.get("firstAvailable"):
                alternatives = [
                    self._alternative(name, f"{rname}/{sub.get('name')}", rname, sub)
                    for sub in request["firstAvailable"]
                ]
            elif request.get("exactly"):
                alternatives = [self._alternative(name, rname, rname, request["exactly"])]
            else:
                raise PlanError(f"template {name}: request {rname} has neither exactly nor firstAvailable")
            requests.append(alternatives)
        if not requests:
            raise PlanError(f"template {name}: no requests")
        constraints = []
        for constraint in devices.get("constraints") or []:
            names = constraint.get("requests") or None
            if constraint.get("matchAttribute"):
                constraints.append(
                    _Constraint("match", constraint["matchAttribute"], frozenset(names) if names else None)
                )
            elif constraint.get("distinctAttribute"):
                constraints.append(
                    _Constraint("distinct", constraint["distinctAttribute"], frozenset(names) if names else None)
                )
        return requests, constraints

    def _alternative(self, template: str, name: str, request: str, spec: dict[str, Any]) -> _Alternative:
        class_name = spec.get("deviceClassName")
        if class_name not in self.classes:
            raise PlanError(f"template {template}: request {name} uses DeviceClass {class_name!r}, which is not given")
        selectors = [
            self.selector(_expression(s, f"template {template} request {name}")) for s in spec.get("selectors") or []
        ]
        mode = spec.get("allocationMode") or "ExactCount"
        if mode not in ("ExactCount", "All"):
            raise PlanError(f"template {template}: request {name} has allocationMode {mode!r}")
        raw = spec.get("count")
        count = (1 if raw is None else int(raw)) if mode == "ExactCount" else 0
        if mode == "ExactCount" and count < 1:
            raise PlanError(f"template {template}: request {name} has count {count}")
        capacity = {
            qname: _quantity(value) for qname, value in ((spec.get("capacity") or {}).get("requests") or {}).items()
        }
        return _Alternative(
            name,
            request,
            class_name,
            self.classes[class_name] + selectors,
            mode,
            count,
            capacity,
            admin=bool(spec.get("adminAccess")),
            tolerations=tuple(spec.get("tolerations") or ()),
        )


def _expression(selector: dict[str, Any], where: str) -> str:
    expression = (selector.get("cel") or {}).get("expression")
    if not isinstance(expression, str):
        raise PlanError(f"{where}: a selector without cel.expression")
    return expression


# -- node state ------------------------------------------------------------------------------


class _Device:
    __slots__ = (
        "key",
        "label",
        "driver",
        "bdf",
        "join",
        "_view",
        "_raw",
        "_domains",
        "attributes",
        "capacity",
        "multi",
        "counters",
        "taints",
        "index",
        "_sets",
    )

    def __init__(
        self, device: dict[str, Any], domains: set[str], index: int, probed: dict[str, Any] | None = None
    ) -> None:
        driver = device.get("driver") or dra.DRIVER_NAME
        self.driver = driver
        self.key = (driver, device.get("pool") or "", device["name"])
        self.label = device["name"] if driver == dra.DRIVER_NAME else f"{driver}/{device['name']}"
        self.index = index
        self._view = None
        self._raw = device
        self._domains = domains
        # list-typed values as tuples: attribute values are memo and shape keys
        self.attributes = {
            name: tuple(value) if isinstance(value, list) else value
            for name, value in device_model.flat_attributes(device, driver).items()
        }
        self._sets: dict[str, frozenset | None] = {}
        self.join = device_model.join_device(driver, self.attributes, probed, self.label)
        # the probed PCI function behind the device, whichever attribute named it
        self.bdf = self.join["address"]
        self.capacity = {}
        for name, value in (device.get("capacity") or {}).items():
            domain, ident = dra.split_qualified_name(name, driver)
            self.capacity[f"{domain}/{ident}"] = _quantity(value.get("value"))
        self.multi = bool(device.get("allowMultipleAllocations"))
        # taints that keep the scheduler away (an effect of None only informs)
        self.taints = tuple(t for t in device.get("taints") or () if t.get("effect") in ("NoSchedule", "NoExecute"))
        self.counters = [
            (c.get("counterSet"), {n: _quantity(v.get("value")) for n, v in (c.get("counters") or {}).items()})
            for c in device.get("consumesCounters") or []
        ]

    def value_set(self, attribute: str) -> frozenset | None:
        """The attribute as the set constraints compare (:func:`dra.attribute_value_set`); None when absent."""
        if attribute not in self._sets:
            found = None
            for name, value in (self._raw.get("attributes") or {}).items():
                domain, ident = dra.split_qualified_name(name, self.driver)
                if f"{domain}/{ident}" == attribute:
                    found = dra.attribute_value_set(value)
                    break
            self._sets[attribute] = found
        return self._sets[attribute]

    @property
    def view(self) -> dict[str, Any]:
        """The CEL view, built on first use (most devices share memoised results)."""
        if self._view is None:
            self._view = dra_cel.cel_device(self._raw, self.driver, self._domains)
        return self._view

    def read(self, read: tuple[str, str, str]) -> Any:
        """The value behind one of a selector's ``reads``, for memo keys."""
        field, domain, ident = read
        if field == "driver":
            return self.driver
        if field == "allowMultipleAllocations":
            return self.multi
        source = self.attributes if field == "attributes" else self.capacity
        return source.get(f"{domain}/{ident}", dra_cel.MISSING)

    def evaluate(self, selector: dra_cel.Selector) -> tuple[bool, str | None]:
        if selector.reads is None:
            return selector.evaluate(self.view)
        key = tuple(self.read(r) for r in selector.reads)
        return selector.evaluate_keyed(key, lambda: self.view)


class _Node:
    def __init__(self, name: str, data: dict[str, Any], domains: set[str]) -> None:
        self.name = name
        ordered = sorted(
            data.get("devices") or [], key=lambda d: (d.get("driver") or "", d.get("pool") or "", d["name"])
        )
        probed = data.get("probed")
        self.devices = [_Device(d, domains, i, probed) for i, d in enumerate(ordered)]
        self.links = data.get("links") or {}
        self.pair_levels: dict[tuple[int, int], dict[str, Any]] = {}
        self.shared = {k: dict(v) for k, v in (data.get("shared_counters") or {}).items()}
        self.candidates: dict[tuple, tuple[list[_Device], list[dict[str, Any]]]] = {}
        self.indexes: dict[tuple[int, str], dict[Any, list[int]]] = {}

    def index(self, pool: list[_Device], attribute: str) -> dict[Any, list[int]]:
        """``{element: [positions in pool]}`` of one attribute's value sets over a candidate list of this node."""
        key = (id(pool), attribute)
        found = self.indexes.get(key)
        if found is None:
            found = {}
            for position, device in enumerate(pool):
                for element in device.value_set(attribute) or ():
                    found.setdefault(element, []).append(position)
            self.indexes[key] = found
        return found

    def matching(self, alternative: _Alternative) -> tuple[list[_Device], list[dict[str, Any]]]:
        """Devices that pass every selector of an alternative, and the evaluation errors."""
        key = tuple(id(s) for s in alternative.selectors)
        if key not in self.candidates:
            found, errors = [], []
            for device in self.devices:
                ok = True
                for selector in alternative.selectors:
                    matched, error = device.evaluate(selector)
                    if error is not None:
                        errors.append({"device": device.label, "expression": selector.expression, "message": error})
                        ok = False
                        break
                    if not matched:
                        ok = False
                        break
                if ok:
                    found.append(device)
            self.candidates[key] = (found, errors)
        return self.candidates[key]

    def pair(self, accelerator: _Device, nic: _Device) -> dict[str, Any]:
        """``{"level", "exact", "source"}`` of one accelerator and one NIC (memoised per node)."""
        key = (accelerator.index, nic.index)
        found = self.pair_levels.get(key)
        if found is None:
            found = self.pair_levels[key] = device_model.joined_pair_level(accelerator.join, nic.join, self.links)
        return found

    def assess(self, devices: list[_Device]) -> dict[str, Any]:
        """The GPU-NIC levels of an allocation.

        ``worst_level``: the worst level over all its accelerator-NIC pairs;
        ``aligned_level``: the worst over its accelerators of each one's best
        level to a NIC of the allocation; ``*_exact``: false where the level is
        a bound (the pair is at that level or better); ``level_source``: the
        sources of its pairs' levels (``topology``, ``attributes``, ``bound``,
        ``unknown``), joined with ``+``. Pairs of unknown level are left out.
        """
        accelerators = [d for d in devices if d.join["role"] == "accelerator"]
        nics = [d for d in devices if d.join["role"] == "nic"]
        worst_pairs = []
        best_per_accelerator = []
        sources = set()
        for accelerator in accelerators:
            row = []
            for nic in nics:
                found = self.pair(accelerator, nic)
                sources.add(found["source"])
                row.append((found["level"], found["exact"]))
            worst_pairs.extend(row)
            if row:
                best_per_accelerator.append(device_model.best_level(row))
        worst, worst_exact = device_model.worst_level(worst_pairs)
        aligned, aligned_exact = device_model.worst_level(best_per_accelerator)
        return {
            "worst_level": worst,
            "worst_level_exact": worst_exact,
            "aligned_level": aligned,
            "aligned_level_exact": aligned_exact,
            "level_source": "+".join(s for s in device_model.LEVEL_SOURCES if s in sources) or None,
        }

    def levels(self, devices: list[_Device]) -> tuple[str | None, str | None]:
        """``(worst, aligned)`` of :meth:`assess`."""
        found = self.assess(devices)
        return found["worst_level"], found["aligned_level"]


class _SearchLimit(Exception):
    pass


class _Allocator:
    """One claim on one node: a backtracking search in the scheduler's order."""

    def __init__(self, node, requests, constraints, used, consumed, counters_used, step_limit):
        self.node = node
        self.requests = requests
        self.constraints = constraints
        # per alternative: the (position, constraint) pairs that apply to it
        self.applicable = {
            id(alt): tuple((i, c) for i, c in enumerate(constraints) if c.applies(alt))
            for alternatives in requests
            for alt in alternatives
        }
        self.matching_constraints = {
            key: tuple(pair for pair in pairs if pair[1].kind == "match") for key, pairs in self.applicable.items()
        }
        self.used = used  # set of device keys held by exclusive allocations
        self.consumed = consumed  # {device key: {capacity: Fraction}} on multi-allocatable devices
        self.counters_used = counters_used  # {counter set: {counter: Fraction}}
        self.steps = 0
        self.step_limit = step_limit
        self.chosen: list[tuple[_Alternative, list[_Device]]] = []
        self.taken: set = set()
        self.values: list[dict] = [{} for constraint in constraints]  # per constraint: state

    def run(self, candidates: list[list[list[_Device]]]) -> list[tuple[_Alternative, list[_Device]]] | None:
        self.candidates = candidates
        return list(self.chosen) if self._request(0) else None

    def _request(self, index: int) -> bool:
        if index == len(self.requests):
            return True
        for alt_index, alternative in enumerate(self.requests[index]):
            pool = self.candidates[index][alt_index]
            if alternative.mode == "All":
                if not pool or any(not self._free(d, alternative) for d in pool):
                    continue
                if self._place_all(index, alternative, pool):
                    return True
                continue
            if self._choose(index, alternative, pool, 0, []):
                return True
        return False

    def _place_all(self, index, alternative, pool) -> bool:
        undo = []
        for device in pool:
            mark = self._take(device, alternative)
            if mark is None:
                self._untake_all(undo)
                return False
            undo.append(mark)
        self.chosen.append((alternative, list(pool)))
        if self._request(index + 1):
            return True
        self.chosen.pop()
        self._untake_all(undo)
        return False

    def _choose(self, index, alternative, pool, start, picked) -> bool:
        need = alternative.count - len(picked)
        if need == 0:
            self.chosen.append((alternative, list(picked)))
            if self._request(index + 1):
                return True
            self.chosen.pop()
            return False
        for position in self._positions(alternative, pool, start, len(pool) - need):
            self.steps += 1
            if self.steps > self.step_limit:
                raise _SearchLimit()
            device = pool[position]
            if not self._free(device, alternative):
                continue
            mark = self._take(device, alternative)
            if mark is None:
                continue
            picked.append(device)
            if need == 1:  # the last device of this request: go straight to the next request
                self.chosen.append((alternative, list(picked)))
                if self._request(index + 1):
                    return True
                self.chosen.pop()
            elif self._choose(index, alternative, pool, position + 1, picked):
                return True
            picked.pop()
            self._untake_all([mark])
        return False

    def _positions(self, alternative: _Alternative, pool: list[_Device], start: int, last: int):
        """Positions worth trying: when a matchAttribute constraint already has its
        common values, only the devices that carry one of them (the others would fail it)."""
        for position, constraint in self.matching_constraints[id(alternative)]:
            state = self.values[position]
            if "value" not in state:
                continue
            by_element = self.node.index(pool, constraint.attribute)
            common = state["value"]
            if len(common) == 1:
                (element,) = common
                return [p for p in by_element.get(element, ()) if start <= p <= last]
            found = {p for element in common for p in by_element.get(element, ()) if start <= p <= last}
            return sorted(found)
        return range(start, last + 1)

    def _free(self, device: _Device, alternative: _Alternative) -> bool:
        if device.key in self.taken:
            return False
        if not device.multi and not alternative.admin and device.key in self.used:
            return False
        if device.taints and not all(alternative.tolerates(t) for t in device.taints):
            return False
        for name, amount in alternative.capacity.items():
            qualified = name if "/" in name else f"{device.driver}/{name}"
            have = device.capacity.get(qualified)
            if have is None:
                return False
            left = have - self.consumed.get(device.key, {}).get(qualified, 0) if device.multi else have
            if amount > left:
                return False
        for counter_set, needs in device.counters:
            pool = self.node.shared.get(counter_set)
            if pool is None:
                return False
            used = self.counters_used.get(counter_set, {})
            for counter, amount in needs.items():
                if amount > pool.get(counter, Fraction(0)) - used.get(counter, 0):
                    return False
        return True

    def _take(self, device: _Device, alternative: _Alternative):
        """Apply the constraints for one device; a token to undo, or None when they fail."""
        changes = []
        for position, constraint in self.applicable[id(alternative)]:
            values = device.value_set(constraint.attribute)
            if values is None:
                self._undo_constraints(changes)
                return None
            state = self.values[position]
            if constraint.kind == "match":
                # the intersection of the devices' sets so far; it only shrinks, so a
                # failed device fails whatever else is added (the constraint is monotonic)
                if "value" in state:
                    common = state["value"] & values
                    if not common:
                        self._undo_constraints(changes)
                        return None
                    changes.append((position, state["value"]))
                    state["value"] = common
                    state["count"] += 1
                else:
                    state["value"] = values
                    state["count"] = 1
                    changes.append((position, None))
            else:
                # pairwise disjoint: each set must miss the union of the earlier ones
                seen = state.setdefault("seen", set())
                if not seen.isdisjoint(values):
                    self._undo_constraints(changes)
                    return None
                seen.update(values)
                changes.append((position, values))
        self.taken.add(device.key)
        return (device, changes)

    def _undo_constraints(self, changes) -> None:
        for position, value in reversed(changes):
            state = self.values[position]
            if self.constraints[position].kind == "match":
                state["count"] -= 1
                if state["count"] == 0:
                    del state["value"], state["count"]
                else:
                    state["value"] = value  # the intersection before this device
            else:
                state["seen"].difference_update(value)

    def _untake_all(self, marks) -> None:
        for device, changes in reversed(marks):
            self.taken.discard(device.key)
            self._undo_constraints(changes)


# -- planning --------------------------------------------------------------------------------


def plan_node(
    node: _Node,
    requests: list[list[_Alternative]],
    constraints: list[_Constraint],
    step_limit: int = DEFAULT_STEP_LIMIT,
    max_claims: int = MAX_CLAIMS_PER_NODE,
) -> dict[str, Any]:
    """Claims of one template that fit on one node at once."""
    result: dict[str, Any] = {
        "fits": 0,
        "worst_level": None,
        "worst_level_exact": True,
        "aligned_level": None,
        "aligned_level_exact": True,
        "allocations": [],
    }
    errors = []
    candidates = []
    for alternatives in requests:
        row = []
        for alternative in alternatives:
            found, problems = node.matching(alternative)
            for problem in problems:
                errors.append(dict(problem, node=node.name, request=alternative.name))
            row.append(found)
        candidates.append(row)
    if errors:
        result["errors"] = errors
        result["reason"] = "a selector fails to evaluate on a device of this node, which aborts every allocation"
        return result
    used: set = set()
    consumed: dict = {}
    counters_used: dict = {}
    while result["fits"] < max_claims:
        allocator = _Allocator(node, requests, constraints, used, consumed, counters_used, step_limit)
        try:
            chosen = allocator.run(candidates)
        except _SearchLimit:
            result["search_limit"] = f"gave up after {step_limit} search steps; fits is a lower bound"
            break
        if chosen is None:
            break
        allocation: dict[str, Any] = {"devices": {}}
        all_devices = []
        for alternative, devices in chosen:
            allocation["devices"][alternative.request] = [d.label for d in devices]
            if alternative.name != alternative.request:
                allocation.setdefault("subrequests", {})[alternative.request] = alternative.name.split("/", 1)[1]
            for device in devices:
                if alternative.admin:
                    continue  # admin access leaves the device to others
                if device.multi:
                    spent = consumed.setdefault(device.key, {})
                    for name, amount in alternative.capacity.items():
                        qualified = name if "/" in name else f"{device.driver}/{name}"
                        spent[qualified] = spent.get(qualified, 0) + amount
                else:
                    used.add(device.key)
                for counter_set, needs in device.counters:
                    spent = counters_used.setdefault(counter_set, {})
                    for counter, amount in needs.items():
                        spent[counter] = spent.get(counter, 0) + amount
            all_devices.extend(devices)
        allocation.update(node.assess(all_devices))
        result["allocations"].append(allocation)
        result["fits"] += 1
        if not all_devices:
            break
        if all(alternative.admin for alternative, _devices in chosen):
            result["admin_access"] = "with admin access a claim takes nothing away: one more always fits"
            break
    if result["fits"] >= max_claims > 1:
        result["capped"] = f"stopped counting at {max_claims} claims"
    _summarise_levels(result, result["allocations"])
    if result["fits"] == 0 and "search_limit" not in result:
        result["reason"] = _why_not(requests, constraints, candidates)
    return result


def _summarise_levels(target: dict[str, Any], parts: list[dict[str, Any]]) -> None:
    """``worst_level``/``aligned_level`` and their ``*_exact`` over allocations or node results."""
    for key in ("worst_level", "aligned_level"):
        level, exact = device_model.worst_level((p[key], p.get(key + "_exact", True)) for p in parts)
        target[key] = level
        target[key + "_exact"] = exact


def _why_not(requests, constraints, candidates) -> str:
    for alternatives, row in zip(requests, candidates):
        if all(
            (len(found) < alt.count if alt.mode == "ExactCount" else not found) for alt, found in zip(alternatives, row)
        ):
            names = ", ".join(a.name for a in alternatives)
            counts = ", ".join(str(len(found)) for found in row)
            return f"request {names}: not enough matching devices ({counts} match)"
    for alternatives, row in zip(requests, candidates):
        for constraint in constraints:
            if all(
                not constraint.applies(alt) or not any(constraint.attribute in d.attributes for d in found)
                for alt, found in zip(alternatives, row)
            ) and any(constraint.applies(alt) for alt in alternatives):
                return (
                    f"request {alternatives[0].request}: none of its matching devices has {constraint.attribute}, "
                    f"which a {'matchAttribute' if constraint.kind == 'match' else 'distinctAttribute'} "
                    "constraint compares"
                )
    if constraints:
        described = "; ".join(
            f"{'matchAttribute' if c.kind == 'match' else 'distinctAttribute'} {c.attribute}"
            + (f" over {', '.join(sorted(c.requests))}" if c.requests else "")
            for c in constraints
        )
        return f"every request has matching devices, but no choice of them meets the constraints ({described})"
    return "the matching devices cannot serve all requests at once"


class _Shapes:
    """Plans of nodes that look the same to a template are computed once.

    Two nodes have one shape when their devices agree, in order, on name and
    driver, on every value a selector reads, on every attribute a
    constraint compares, on capacities, counters and PCI addresses, and on the
    levels between those addresses: then the scheduler's search takes the same
    path on both, so the plan of one is the plan of the other. Big sites are
    made of few node models, so this spares most of the search. When a
    selector reads the device in a way that cannot be told statically, every
    node is planned on its own.
    """

    def __init__(self, compiler: Compiler, compiled: list, enabled: bool = True) -> None:
        reads = set()
        self.enabled = enabled
        for selector in compiler.selectors.values():
            if selector.reads is None:
                self.enabled = False
            else:
                reads.update(selector.reads)
        self.reads = sorted(reads)
        self.attributes = sorted({c.attribute for _n, (_r, constraints) in compiled for c in constraints})
        self.results: dict[tuple, dict[str, Any]] = {}
        self.signatures: dict[str, tuple] = {}

    def signature(self, node: _Node) -> tuple:
        cached = self.signatures.get(node.name)
        if cached is None:
            devices = tuple(
                (
                    d.label,  # driver and name; the pool is the node's own
                    tuple(d.read(r) for r in self.reads),
                    tuple(d.attributes.get(a) for a in self.attributes),
                    d.bdf,
                    (d.join["role"], d.join["physfn"], d.join["reason"], d.join["roots"], d.join["numa"]),
                    tuple(sorted(d.capacity.items())),
                    d.multi,
                    tuple((c, tuple(sorted(n.items()))) for c, n in d.counters),
                    tuple(tuple(sorted(t.items())) for t in d.taints),
                )
                for d in node.devices
            )
            bdfs = [a for d in node.devices for a in (d.bdf, d.join["physfn"]) if a]
            links = tuple((a, b, node.links[a][b]) for a in bdfs if a in node.links for b in bdfs if b in node.links[a])
            shared = tuple(sorted((k, tuple(sorted(v.items()))) for k, v in node.shared.items()))
            cached = self.signatures[node.name] = (devices, links, shared)
        return cached

    def get(self, index: int, node: _Node) -> dict[str, Any] | None:
        if not self.enabled:
            return None
        found = self.results.get((index, self.signature(node)))
        if found is None:
            return None
        # the allocations are shared between nodes of one shape; nothing changes them afterwards
        result = dict(found)
        if "errors" in result:
            result["errors"] = [dict(error, node=node.name) for error in result["errors"]]
        return result

    def put(self, index: int, node: _Node, result: dict[str, Any]) -> None:
        if self.enabled:
            self.results[(index, self.signature(node))] = dict(result)


def class_members(nodes: dict[str, dict[str, Any]], classes: list[dict[str, Any]]) -> dict[str, dict[str, list[str]]]:
    """``{class: {node: [device label, ...]}}``: the devices each DeviceClass selects, per node.

    A device matches when every selector of the class is true; a selector that
    fails to evaluate on a device does not match it. Labels are the planner's
    (``name``, or ``driver/name`` for other drivers).
    """
    compiler = Compiler(classes)
    domains = dra_cel.referenced_domains(compiler.selectors)
    return _class_members(compiler, [_Node(name, data, domains) for name, data in sorted(nodes.items())])


def _class_members(compiler: Compiler, prepared: list[_Node]) -> dict[str, dict[str, list[str]]]:
    found: dict[str, dict[str, list[str]]] = {name: {} for name in compiler.classes}
    for node in prepared:
        node_name = node.name
        for class_name, selectors in compiler.classes.items():
            alternative = _Alternative(class_name, class_name, class_name, selectors, "ExactCount", 1, {})
            found[class_name][node_name] = [d.label for d in node.matching(alternative)[0]]
    return found


def plan(
    site: str,
    nodes: dict[str, dict[str, Any]],
    classes: list[dict[str, Any]],
    templates: list[dict[str, Any]],
    required: list[str] | None = None,
    kubernetes_version: str | None = None,
    driver: str = dra.DRIVER_NAME,
    step_limit: int = DEFAULT_STEP_LIMIT,
    shape_cache: bool = True,
) -> dict[str, Any]:
    """The plan of a site: every template on every node (see docs/claims.md for the shape).

    ``shape_cache=False`` plans every node on its own even when it looks like
    one already planned (for measurements; the result is the same).
    """
    paused = gc.isenabled()
    gc.disable()  # the planner builds many small acyclic objects; collections would cost half the time
    try:
        return _plan(site, nodes, classes, templates, required, kubernetes_version, driver, step_limit, shape_cache)
    finally:
        if paused:
            gc.enable()


def plan_summary(result: dict[str, Any]) -> dict[str, Any]:
    """The plan without each template's per-node entries (``templates[].nodes``), which grow with the site.

    Everything else (counts, levels, reasons, errors, accounting) is kept; the
    whole plan is what ``dest`` holds.
    """
    summary = dict(result)
    summary["templates"] = [{k: v for k, v in entry.items() if k != "nodes"} for entry in result["templates"]]
    return summary


def _plan(site, nodes, classes, templates, required, kubernetes_version, driver, step_limit, shape_cache):
    required_set = set(required or [])
    compiler = Compiler(classes)
    compiled = []
    kinds: dict[str, str] = {}
    for item in templates:
        name = (item.get("metadata") or {}).get("name")
        if not name:
            raise PlanError("a claim template has no metadata.name")
        compiled.append((name, compiler.template(item)))
        kinds[name] = item.get("kind") or "ResourceClaimTemplate"
    unknown = required_set - {entry[0] for entry in compiled}
    if unknown:
        raise PlanError(f"required templates that are not given: {', '.join(sorted(unknown))}")
    domains = dra_cel.referenced_domains(compiler.selectors)
    prepared = [_Node(name, data, domains) for name, data in sorted(nodes.items())]
    shapes = _Shapes(compiler, compiled, shape_cache)
    report_templates = []
    for index, (name, (requests, constraints)) in enumerate(compiled):
        shared_claim = kinds[name] == "ResourceClaim"
        entry: dict[str, Any] = {
            "name": name,
            "kind": kinds[name],
            "required": name in required_set,
            "fits_total": 0,
            "worst_level": None,
            "satisfiable": False,
            "errors": [],
            "nodes": {},
        }
        for node in prepared:
            result = shapes.get(index, node)
            if result is None:
                # a ResourceClaim is one object that pods share: it is allocated once
                result = plan_node(
                    node, requests, constraints, step_limit, max_claims=1 if shared_claim else MAX_CLAIMS_PER_NODE
                )
                shapes.put(index, node, result)
            entry["errors"].extend(result.pop("errors", []))
            entry["fits_total"] += result["fits"]
            entry["nodes"][node.name] = result
        if shared_claim:
            # where it could be allocated, but only once on the whole site
            entry["nodes_possible"] = sorted(n for n, r in entry["nodes"].items() if r["fits"])
            entry["fits_total"] = min(entry["fits_total"], 1)
        _summarise_levels(entry, list(entry["nodes"].values()))
        entry["satisfiable"] = entry["fits_total"] > 0 and not entry["errors"]
        if not entry["satisfiable"]:
            entry["reason"] = (
                "a selector fails to evaluate (see errors), which aborts allocation"
                if entry["errors"]
                else "no node can allocate a claim of this template"
            )
        report_templates.append(entry)
    failed = [t["name"] for t in report_templates if t["required"] and not t["satisfiable"]]
    members = _class_members(compiler, prepared)
    return {
        "classes": {
            name: {"devices": sum(len(v) for v in per_node.values()), "nodes": {n: len(v) for n, v in per_node.items()}}
            for name, per_node in sorted(members.items())
        },
        "schema_version": SCHEMA_VERSION,
        "site": site,
        "kubernetes_version": dra.minor_of(kubernetes_version) if kubernetes_version else None,
        "driver": driver,
        "levels": list(LEVELS),
        "nodes": sorted(nodes),
        "templates": report_templates,
        "required_unsatisfied": failed,
        "tainted_devices": tainted_devices(nodes),
    }
