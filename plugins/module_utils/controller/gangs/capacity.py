# SPDX-License-Identifier: Apache-2.0
"""The placement search, capacity: how many workers of a claim template each node holds, and on which rails.

A worker is one claim of the job's template. A node's capacity is what
:func:`plan.plan_node` counts: claims placed one after another in the
scheduler's order, with the devices of ``held`` (allocated already) taken
before the first. Counting stops at ``cap`` (the most workers a job of the
template asks for).

Per rail signature (the sorted rails of a worker's NICs, :func:`signature_of`)
the count is the same, with each claim's search narrowed to claims whose
signature is exactly that one (:class:`RailSearch`: the NICs of other or
unknown rails are no candidates, and a complete allocation of another
signature is searched past). The signatures tried on a node are every
multiset of the node's free NICs' rails whose size a claim of the template
can take (:func:`candidate_signatures`); past :data:`MAX_SIGNATURES` only the
unnarrowed claims' signatures are tried, and the counts say they are not
exact.

Nodes that look the same to the template (:class:`plan.NodeShapes`) and hold the
same devices are counted once.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.allocator import (
    ClaimAllocator,
    spend_counters,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

    from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.allocator import (
        Device,
        DeviceConstraint,
        NodeDevices,
        RequestAlternative,
    )

    Requests = list[list[RequestAlternative]]

# signatures tried per node and template before falling back to those the unnarrowed claims take
MAX_SIGNATURES = 256
NIC_ROLE = "nic"


def signature_of(devices: Iterable[Device]) -> tuple[int, ...] | None:
    """The sorted rails of the NICs among ``devices``; None when one NIC's rail is unknown."""
    rails = [d.rail for d in devices if d.join["role"] == NIC_ROLE]
    if None in rails:
        return None
    return tuple(sorted(rails))  # type: ignore[type-var]


def held_state(node: NodeDevices, labels: Iterable[str]) -> tuple[tuple[set, dict, dict], list[str]]:
    """The allocator's ``(used, consumed, counters_used)`` with the devices ``labels`` held, and the labels
    that are no device of the node.

    A held device that allows multiple allocations counts as fully consumed (how
    much of it is held is not known); a partition consumes its counters.
    """
    wanted = set(labels)
    used: set = set()
    consumed: dict = {}
    counters_used: dict = {}
    for device in node.devices:
        if device.label not in wanted:
            continue
        wanted.discard(device.label)
        if device.multi:
            consumed[device.key] = dict(device.capacity)
        else:
            used.add(device.key)
        spend_counters(device, counters_used)
    return (used, consumed, counters_used), sorted(wanted)


class RailSearch(ClaimAllocator):
    """One claim whose NICs are on exactly the rails ``wanted`` (a sorted tuple, a rail as often as it
    has NICs there).

    The NICs of other rails (and of unknown rail) are no candidates of
    ``ExactCount`` requests; an ``All`` request keeps its candidates (it takes
    every one), and its claim is refused unless they are on ``wanted``.
    ``pools`` keeps the narrowed candidate lists for the node's lifetime (the
    node indexes lists by identity).
    """

    def __init__(self, node, requests, constraints, used, consumed, counters_used, step_limit, *, wanted, pools):
        super().__init__(node, requests, constraints, used, consumed, counters_used, step_limit)
        self.wanted = wanted
        self.allowed = frozenset(wanted)
        self.pools = pools

    def run(self, candidates):
        narrowed = [
            [pool if alternative.mode == "All" else self._narrow(pool) for alternative, pool in zip(alternatives, row)]
            for alternatives, row in zip(self.requests, candidates)
        ]
        return super().run(narrowed)

    def _narrow(self, pool: list[Device]) -> list[Device]:
        key = (id(pool), self.allowed)
        found = self.pools.get(key)
        if found is None:
            found = [d for d in pool if d.join["role"] != NIC_ROLE or d.rail in self.allowed]
            self.pools[key] = (pool, found)  # the pool too: its identity is the key
            return found
        return found[1]

    def _request(self, index: int) -> bool:
        if index == len(self.requests):
            return signature_of(d for _alternative, devices in self.chosen for d in devices) == self.wanted
        return super()._request(index)


def _free(device: Device, used: set) -> bool:
    return device.multi or device.key not in used


def candidate_signatures(node: NodeDevices, requests: Requests, used: set) -> list[tuple[int, ...]] | None:
    """Every rail signature a claim of the template could have on the node, from its free NICs of known
    rail and the NIC counts its requests can take; None past :data:`MAX_SIGNATURES`."""
    counts = {0}
    available: dict[int, set] = {}
    for alternatives in requests:
        row: set[int] = set()
        for alternative in alternatives:
            pool = node.matching(alternative)[0]
            nics = [d for d in pool if d.join["role"] == NIC_ROLE]
            known = [d for d in nics if d.rail is not None and _free(d, used)]
            for device in known:
                available.setdefault(device.rail, set()).add(device.key)  # type: ignore[arg-type]
            if alternative.mode == "All":
                if all(d.rail is not None for d in nics):
                    row.add(len(nics))
                continue
            others = len(pool) - len(nics)
            row.update(range(max(0, alternative.count - others), min(alternative.count, len(known)) + 1))
        counts = {a + b for a in counts for b in row}
    rails = sorted(available)
    found: list[tuple[int, ...]] = []

    def extend(position: int, left: int, prefix: tuple[int, ...]) -> bool:
        if left == 0:
            found.append(prefix)
            return len(found) <= MAX_SIGNATURES
        if position == len(rails):
            return True
        rail = rails[position]
        for times in range(min(left, len(available[rail])), -1, -1):
            if not extend(position + 1, left - times, prefix + (rail,) * times):
                return False
        return True

    for size in sorted(counts):
        if not extend(0, size, ()):
            return None
    return sorted(set(found))


@dataclass
class NodeCapacity:
    """The workers of one template one node holds: unnarrowed (``fits``, ``allocations``) and per rail
    signature (``by_rails``: signature -> ``(fits, allocations)``, only those with at least one)."""

    fits: int = 0
    allocations: list[dict[str, Any]] = field(default_factory=list)
    by_rails: dict[tuple[int, ...], tuple[int, list[dict[str, Any]]]] | None = None
    exact: bool = True  # false: a search gave up, or not every signature was tried
    errors: bool = False  # a selector fails to evaluate on a device of the node
    unknown_rails: bool = False  # a NIC the template could take has no known rail


class Capacities:
    """Capacities of the site's nodes per template, computed once per node shape and held devices."""

    def __init__(
        self,
        shapes: planner.NodeShapes,
        held: dict[str, tuple[set, dict, dict]],
        held_labels: dict[str, frozenset],
        step_limit: int,
    ) -> None:
        self.shapes = shapes
        self.held = held
        self.held_labels = held_labels
        self.step_limit = step_limit
        self.results: dict[tuple, NodeCapacity] = {}
        self.pools: dict[str, dict] = {}

    def _key(self, template: str, cap: int, node: NodeDevices) -> tuple:
        shape = self.shapes.signature(node) if self.shapes.enabled else node.name
        return (template, cap, shape, self.held_labels.get(node.name, frozenset()))

    def node(
        self,
        template: str,
        compiled: tuple[Requests, list[DeviceConstraint]],
        node: NodeDevices,
        cap: int,
        rails: bool,
    ) -> NodeCapacity:
        """The node's capacity for ``template`` (counted up to ``cap``); ``rails``: per signature too."""
        key = self._key(template, cap, node)
        found = self.results.get(key)
        if found is None:
            found = self.results[key] = self._unnarrowed(compiled, node, cap)
        if rails and found.by_rails is None and not found.errors:
            self._per_signature(found, compiled, node, cap)
        return found

    def _unnarrowed(self, compiled: tuple[Requests, list[DeviceConstraint]], node: NodeDevices, cap: int):
        requests, constraints = compiled
        held = self.held.get(node.name)
        result = planner.plan_node(
            node, requests, constraints, self.step_limit, max_claims=cap, per_rail=False, held=held
        )
        found = NodeCapacity(fits=result["fits"], allocations=result["allocations"])
        found.errors = bool(result.get("errors"))
        found.exact = "search_limit" not in result
        if found.errors:
            found.fits, found.allocations = 0, []
        if result.get("admin_access") or (found.allocations and not any(found.allocations[0]["devices"].values())):
            # a claim that takes nothing away: every worker fits
            found.fits = cap
            found.allocations = found.allocations[:1] * cap
        used = held[0] if held else set()
        found.unknown_rails = any(
            d.join["role"] == NIC_ROLE and d.rail is None and _free(d, used)
            for alternatives in requests
            for alternative in alternatives
            for d in node.matching(alternative)[0]
        )
        return found

    def _per_signature(self, found: NodeCapacity, compiled, node: NodeDevices, cap: int) -> None:
        requests, constraints = compiled
        held = self.held.get(node.name)
        signatures = candidate_signatures(node, requests, held[0] if held else set())
        if signatures is None:
            found.exact = False
            known = {signature_of_allocation(a) for a in found.allocations}
            signatures = sorted(s for s in known if s is not None)
        pools = self.pools.setdefault(node.name, {})
        found.by_rails = {}
        for wanted in signatures:
            search = partial(RailSearch, wanted=wanted, pools=pools)
            result = planner.plan_node(
                node, requests, constraints, self.step_limit, max_claims=cap, per_rail=False, held=held, search=search
            )
            if "search_limit" in result:
                found.exact = False
            if result["fits"]:
                allocations = result["allocations"]
                if result.get("admin_access") or not any(allocations[0]["devices"].values()):
                    allocations = allocations[:1] * cap
                found.by_rails[wanted] = (len(allocations), allocations)


def signature_of_allocation(allocation: dict[str, Any]) -> tuple[int, ...] | None:
    """:func:`signature_of` of an allocation the planner reports (its ``rails``)."""
    rails = allocation.get("rails") or []
    if None in rails:
        return None
    return tuple(sorted(rails))


def takes_nics(compiled: tuple[Requests, list[DeviceConstraint]], nodes: Iterable[NodeDevices]) -> bool:
    """Whether a claim of the template can take a NIC on one of the nodes (one of its requests matches one)."""
    requests, _constraints = compiled
    return any(
        d.join["role"] == NIC_ROLE
        for node in nodes
        for alternatives in requests
        for alternative in alternatives
        for d in node.matching(alternative)[0]
    )
