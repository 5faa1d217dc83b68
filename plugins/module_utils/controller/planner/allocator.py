# SPDX-License-Identifier: Apache-2.0
"""The allocator: one claim placed on one node's devices, as kube-scheduler would place it.

It simulates kube-scheduler's structured-parameters allocator for one claim on
one node, given what earlier claims already hold there:

- a device is a candidate for a request when every selector of the request's
  DeviceClass and of the request itself evaluates to true (CEL, see
  :mod:`dra_cel`); an evaluation error (missing attribute, non-boolean result,
  a function failing) aborts the allocation, and the planner reports it with
  the node, the device, the request and the expression;
- requests are allocated in order, each from the node's devices in published
  order (per driver and pool, slice after slice and device after device: a
  driver's order is its preference, the GPU's small partitions first; never
  re-sorted by name);
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
  allocations (consumable capacity): then each allocation consumes every
  capacity of the device (:func:`consumption`): its request rounded up by the
  capacity's ``requestPolicy``, or for a capacity it does not request the
  policy's ``default`` (the whole capacity without a policy), as the
  scheduler does; a request that breaks a policy does not fit. A request's
  capacity must fit the device either way.
  Devices that consume shared counters (partitionable devices, KEP-4815) fit
  only while their counter set has enough left, after the claims held before
  and the devices this claim already took (a claim's requests spend the
  counters as they take devices and give them back when the search
  backtracks, :mod:`consumption`): the GPU whole and its partitions, or two
  overlapping partitions, never go to one claim;
- a device taint with effect NoSchedule or NoExecute keeps the device out
  unless the request tolerates it; ``adminAccess`` requests may get devices in
  use and leave them free.

The search backtracks over every choice, like the scheduler's, so a claim that
is reported as not fitting cannot be allocated on that node at all.

Here: the requests and constraints it places (:class:`RequestAlternative`, :class:`DeviceConstraint`;
:class:`plan.Compiler` builds them from templates), a node's devices as it reads them
(:class:`NodeDevices`: selector matches, shared counters, GPU-NIC levels), the search
(:class:`ClaimAllocator`), what an allocation holds (:func:`hold_devices`), and why nothing
fits (:func:`why_unallocatable`).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.consumption import (
    consumption,
    counters_fit,
    parse_quantity,
    request_policy,
    return_counters,
    spend_counters,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import gpudirect
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from fractions import Fraction
    from typing import Any


# -- requests and constraints ------------------------------------------------------------------


class RequestAlternative:
    """One way to satisfy a request: its ``exactly``, or one of its ``firstAvailable`` subrequests."""

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


class DeviceConstraint:
    """A ``matchAttribute`` (kind ``match``) or ``distinctAttribute`` (``distinct``) constraint of a claim."""

    __slots__ = ("kind", "attribute", "requests")

    def __init__(self, kind, attribute, requests):
        self.kind = kind
        self.attribute = attribute
        self.requests = requests  # frozenset of names, or None for all

    def applies(self, alternative: RequestAlternative) -> bool:
        return self.requests is None or alternative.request in self.requests or alternative.name in self.requests


# -- node state ------------------------------------------------------------------------------


class Device:
    """One published device as the allocator reads it: attributes, capacity, counters, taints, PCI join."""

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
        "policies",
        "policy_key",
        "consumption_memo",
        "multi",
        "counters",
        "taints",
        "index",
        "_sets",
        "rail",
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
        self.rail: int | None = None  # a NIC's rail, set by NodeDevices (it knows the node's rule)
        self.capacity = {}
        for name, value in (device.get("capacity") or {}).items():
            domain, ident = dra.split_qualified_name(name, driver)
            self.capacity[f"{domain}/{ident}"] = parse_quantity(value.get("value"))
        self.multi = bool(device.get("allowMultipleAllocations"))
        # {capacity: :func:`consumption.request_policy`} of the capacities with a requestPolicy; policy_key: the policies
        # as written (strings hash fast: the shape signature holds it)
        self.policies = {}
        self.policy_key = ()
        if self.multi:
            for name, value in (device.get("capacity") or {}).items():
                if value.get("requestPolicy"):
                    domain, ident = dra.split_qualified_name(name, driver)
                    self.policies[f"{domain}/{ident}"] = request_policy(value["requestPolicy"])
            self.policy_key = tuple(sorted((n, v[5]) for n, v in self.policies.items()))
        self.consumption_memo: dict[RequestAlternative, dict[str, Fraction] | None] = {}
        # taints that keep the scheduler away (an effect of None only informs)
        self.taints = tuple(t for t in device.get("taints") or () if t.get("effect") in ("NoSchedule", "NoExecute"))
        self.counters = [
            (c.get("counterSet"), {n: parse_quantity(v.get("value")) for n, v in (c.get("counters") or {}).items()})
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


class NodeDevices:
    """One node's devices (in the scheduler's order), links and shared counters; selector matches and
    GPU-NIC levels are memoised per node."""

    def __init__(self, name: str, data: dict[str, Any], domains: set[str]) -> None:
        self.name = name
        # published order within each driver's pool (slice after slice, device after device): a driver's
        # order is its preference, and the scheduler takes the first device that fits (a stable sort)
        ordered = sorted(data.get("devices") or [], key=lambda d: (d.get("driver") or "", d.get("pool") or ""))
        probed = data.get("probed")
        self.devices = [Device(d, domains, i, probed) for i, d in enumerate(ordered)]
        # a device with a pcieRoot and no numaNode: the NUMA node of the other devices on its root
        device_model.infer_root_numa((d.label, d.join) for d in self.devices)
        # each NIC's rail: the published one, else the site's rule for the probed function
        self.rail_notes: list[str] = []
        rule_rails = data.get("rails") or {}
        for device in self.devices:
            device.rail, note = device_model.device_rail(device.driver, device.attributes, device.join, rule_rails)
            if note:
                self.rail_notes.append(f"{device.label} {note}")
        self.rails = sorted({d.rail for d in self.devices if d.rail is not None})
        self.links = data.get("links") or {}
        # the probe's peer-to-peer paths (None in facts before them): a pair through the host bridge is PHB
        self.p2p = data.get("p2p") or None
        self.pair_levels: dict[tuple[int, int], dict[str, Any]] = {}
        self.shared = {k: dict(v) for k, v in (data.get("shared_counters") or {}).items()}
        self.candidates: dict[tuple, tuple[list[Device], list[dict[str, Any]]]] = {}
        self.indexes: dict[tuple[int, str], dict[Any, list[int]]] = {}

    def index(self, pool: list[Device], attribute: str) -> dict[Any, list[int]]:
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

    def matching(self, alternative: RequestAlternative) -> tuple[list[Device], list[dict[str, Any]]]:
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

    def pair(self, accelerator: Device, nic: Device) -> dict[str, Any]:
        """``{"level", "exact", "source"[, "path"]}`` of one accelerator and one NIC (memoised per node)."""
        key = (accelerator.index, nic.index)
        found = self.pair_levels.get(key)
        if found is None:
            found = self.pair_levels[key] = device_model.joined_pair_level(
                accelerator.join, nic.join, self.links, self.p2p
            )
        return found

    def assess(self, devices: list[Device]) -> dict[str, Any]:
        """The GPU-NIC levels of an allocation.

        ``worst_level``: the worst level over all its accelerator-NIC pairs;
        ``aligned_level``: the worst over its accelerators of each one's best
        level to a NIC of the allocation; ``*_exact``: false where the level is
        a bound (the pair is at that level or better); ``level_source``: the
        sources of its pairs' levels (``topology``, ``attributes``,
        ``inferred``, ``bound``, ``unknown``), joined with ``+``;
        ``numa_inferred`` (only where some): the NUMA nodes inferred from other
        devices that decided a level. One pair of unknown level makes the worst
        level unknown (``None``, exact false) unless another is exactly SYS;
        an accelerator with no known pair makes the aligned level unknown
        (:func:`device_model.worst_level`, :func:`device_model.best_level`).
        Without an accelerator-NIC pair both are ``None`` with exact true.
        Levels are those the traffic flows at (a pair whose peer-to-peer path
        goes through the host bridge is PHB); where the node's probe has paths,
        ``paths`` counts the pairs per path (:func:`gpudirect.paths_count`:
        ``unknown`` pairs are unverified, ``rerouted`` ones aligned on paper only).
        """
        accelerators = [d for d in devices if d.join["role"] == "accelerator"]
        nics = [d for d in devices if d.join["role"] == "nic"]
        worst_pairs = []
        best_per_accelerator = []
        found_pairs = []
        sources = set()
        inferred: set[str] = set()
        for accelerator in accelerators:
            row = []
            for nic in nics:
                found = self.pair(accelerator, nic)
                found_pairs.append(found)
                sources.add(found["source"])
                inferred.update(found.get("inferred") or ())
                row.append((found["level"], found["exact"]))
            worst_pairs.extend(row)
            if row:
                best_per_accelerator.append(device_model.best_level(row))
        worst, worst_exact = device_model.worst_level(worst_pairs)
        aligned, aligned_exact = device_model.worst_level(best_per_accelerator)
        found = {
            "worst_level": worst,
            "worst_level_exact": worst_exact,
            "aligned_level": aligned,
            "aligned_level_exact": aligned_exact,
            "level_source": "+".join(s for s in device_model.LEVEL_SOURCES if s in sources) or None,
        }
        if inferred:
            found["numa_inferred"] = sorted(inferred)
        paths = gpudirect.paths_count(found_pairs)
        if paths is not None:
            found["paths"] = paths
        return found

    def levels(self, devices: list[Device]) -> tuple[str | None, str | None]:
        """``(worst, aligned)`` of :meth:`assess`."""
        found = self.assess(devices)
        return found["worst_level"], found["aligned_level"]


# -- the search ------------------------------------------------------------------------------


class SearchLimitReached(Exception):
    """The search took more steps than allowed; what was counted so far is a lower bound."""


class ClaimAllocator:
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
        self.counters_used = counters_used  # {counter set: {counter: Fraction}}, of the claims held before
        self.pending: dict = {}  # the same, of the devices this claim has taken so far (given back on backtrack)
        self.steps = 0
        self.step_limit = step_limit
        self.chosen: list[tuple[RequestAlternative, list[Device]]] = []
        self.taken: set = set()
        self.values: list[dict] = [{} for constraint in constraints]  # per constraint: state

    def run(self, candidates: list[list[list[Device]]]) -> list[tuple[RequestAlternative, list[Device]]] | None:
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
                raise SearchLimitReached()
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

    def _positions(self, alternative: RequestAlternative, pool: list[Device], start: int, last: int):
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

    def _free(self, device: Device, alternative: RequestAlternative) -> bool:
        if device.key in self.taken:
            return False
        if not device.multi and not alternative.admin and device.key in self.used:
            return False
        if device.taints and not all(alternative.tolerates(t) for t in device.taints):
            return False
        for name, amount in alternative.capacity.items():
            qualified = name if "/" in name else f"{device.driver}/{name}"
            have = device.capacity.get(qualified)
            if have is None or amount > have:
                return False
        if device.multi:
            needs = consumption(device, alternative)
            if needs is None:
                return False
            spent = self.consumed.get(device.key, {})
            for name, amount in needs.items():
                if amount > device.capacity[name] - spent.get(name, 0):
                    return False
        # what earlier claims hold, and what this claim's earlier requests took
        return not device.counters or counters_fit(device, self.node.shared, self.counters_used, self.pending)

    def _take(self, device: Device, alternative: RequestAlternative):
        """Apply the constraints for one device and spend its counters; a token to undo, or None when they fail
        (or its counters no longer fit: an ``All`` request takes devices that were each free alone)."""
        spends = bool(device.counters) and not alternative.admin
        if spends and not counters_fit(device, self.node.shared, self.counters_used, self.pending):
            return None
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
        if spends:
            spend_counters(device, self.pending)
        return (device, changes, spends)

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
        for device, changes, spent in reversed(marks):
            self.taken.discard(device.key)
            self._undo_constraints(changes)
            if spent:
                return_counters(device, self.pending)


def hold_devices(alternative: RequestAlternative, devices: list[Device], used, consumed, counters_used) -> None:
    """Record what an allocated request holds, so that the next claim's search sees it (:meth:`ClaimAllocator._free`).

    ``used``, ``consumed`` and ``counters_used`` are the state a :class:`ClaimAllocator` is given.
    """
    for device in devices:
        if alternative.admin:
            continue  # admin access leaves the device to others
        if device.multi:
            spent = consumed.setdefault(device.key, {})
            for name, amount in (consumption(device, alternative) or {}).items():
                spent[name] = spent.get(name, 0) + amount
        else:
            used.add(device.key)
        spend_counters(device, counters_used)


def why_unallocatable(requests, constraints, candidates) -> str:
    """Why no claim could be allocated on a node: the first request short of devices, a constraint's
    attribute that no candidate has, or constraints that no choice meets."""
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
