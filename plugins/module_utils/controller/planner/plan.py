# SPDX-License-Identifier: Apache-2.0
"""Allocation planner: how many claims of each template fit on each node.

The planner places one claim at a time on one node the way kube-scheduler's
structured-parameters allocator does (:mod:`allocator`, which describes the
rules), and repeats it until the next claim no longer fits, so "fits" is the
number of claims of a template that the node can hold at once, allocated in
the scheduler's order. Between claims, allocations are kept (greedy, in the
scheduler's order); a different order could sometimes fit more.

Here: the planner's nodes (from probed topologies or ResourceSlices) and the
accounting of the nodes left out, DeviceClasses and templates compiled into
the allocator's requests (:class:`Compiler`), the count per node
(:func:`plan_node`), nodes of one shape planned once, and the site's plan and
its summary.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import gc
from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import gpu_counts
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import rails as plan_rails
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import thin as plan_thin
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.allocator import (
    ClaimAllocator,
    DeviceConstraint,
    NodeDevices,
    RequestAlternative,
    SearchLimitReached,
    hold_devices,
    parse_quantity,
    why_unallocatable,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.consumption import PlanError
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import LEVELS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

SCHEMA_VERSION = 1
MAX_CLAIMS_PER_NODE = 1024
DEFAULT_STEP_LIMIT = 200000
SUMMARY_WARNINGS = 20


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


def _attribute(device: dict[str, Any], name: str) -> Any:
    value = (device.get("attributes") or {}).get(name) or {}
    return next(iter(value.values()), None)


def nodes_from_topologies(
    topologies: dict[str, dict[str, Any]],
    device_options: dict[str, Any] | None = None,
    driver: str = dra.DRIVER_NAME,
    shared: dict[tuple, Any] | None = None,
    rails: dict[str, dict[str, int]] | None = None,
    shareable_gpus: bool = False,
    mig: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Planner nodes from probed topologies, with the devices the driver would publish.

    Each device has the driver name it is published under: ``driver`` (the
    main name), or for the GPU kinds the split GPU driver's name where
    ``device_options`` set ``split_gpu_driver`` (:func:`dra.driver_of_kind`).
    ``shared``: a table kept between calls (a site's nodes converted one at a
    time) so that attribute values the nodes repeat (model, vendor, driver,
    NUMA node...) are held once; without it, within this call. ``rails``:
    node -> {PCI address: rail} under the site's rule (:func:`plan_rails.node_rails`),
    published on the NICs as the driver does. ``shareable_gpus``: the GPUs
    are published shareable (:func:`dra.make_shareable`), as the driver does
    where the site serves consumable capacity (:func:`dra_gates.shares_gpus`).
    ``mig``: node -> its ``aligned_dra_mig``; the GPUs MIG takes there are
    published as the driver publishes them (:func:`mig_model.publish`: a
    dynamic GPU's partitions in the driver's order, then the GPU whole, with
    its counter set in ``shared_counters``; a static layout's instances), never
    shareable, and listed in the node's ``mig`` (:func:`mig_model.node_gpus`).
    """
    shared = {} if shared is None else shared
    rails = rails or {}
    mig = mig or {}
    drivers = {kind: dra.driver_of_kind(kind, device_options) for kind in dra.DEVICE_KINDS}
    drivers = {kind: driver if name == dra.DRIVER_NAME else name for kind, name in drivers.items()}
    nodes = {}
    for node, topology in sorted(topologies.items()):
        devices = []
        published = dra.devices_from_topology(topology, device_options, rails.get(node))
        mig_gpus, counters = [], {}
        if mig_model.mode_of(mig.get(node)) != "off":
            try:
                mig_gpus = mig_model.node_gpus(topology, mig[node])
                published, counters = mig_model.publish(topology, published, mig[node])
            except (mig_model.MigModelError, dra.DeviceModelError) as exc:
                raise PlanError(f"mig.{node}: {exc}") from None
        whole = {gpu["device"] for gpu in mig_gpus}  # a GPU run as MIG is never shared
        for device in published:
            if (
                shareable_gpus
                and device["name"] not in whole
                and _attribute(device, dra.DRIVER_NAME + "/kind") == "gpu"
            ):
                device = dra.make_shareable(device)  # the driver's test, on its own kind attribute
            entry = dict(device)
            entry["attributes"] = {
                name: _shared_value(value, shared) for name, value in (device.get("attributes") or {}).items()
            }
            entry["driver"] = drivers[dra.kind_of_name(device["name"])]
            entry["pool"] = node
            devices.append(entry)
        nodes[node] = {
            "devices": devices,
            "links": topology.get("links") or {},
            "p2p": topology.get("p2p") or None,  # None in facts before the probe read paths
            "probed": device_model.probed_node(topology),
            "shared_counters": {name: {k: Fraction(v) for k, v in values.items()} for name, values in counters.items()},
            "rails": dict(rails.get(node) or {}),
        }
        if mig_gpus:
            nodes[node]["mig"] = mig_gpus  # the plan's ``mig`` section reads them (planner/mig.py)
    return nodes


def nodes_from_slices(
    slices: list[dict[str, Any]],
    topologies: dict[str, dict[str, Any]] | None = None,
    rails: dict[str, dict[str, int]] | None = None,
    mig: dict[str, Any] | None = None,
) -> dict[str, dict[str, Any]]:
    """Planner nodes from ResourceSlices (any driver); ``topologies`` add the GPU-NIC levels.

    Devices keep the order they are published in (slice after slice, device
    after device), which is the scheduler's. ``mig`` (node -> its
    ``aligned_dra_mig``, with the node's topology) lists the GPUs MIG takes in
    the node's ``mig``, for the plan's ``mig`` section; the devices are the
    slices' as published.

    A published device is joined to its node's probe by any PCI address it
    publishes (:func:`device_model.join_device`); without one, its pair levels
    are bounded from its PCIe root and NUMA node. ``rails`` (node -> {PCI
    address: rail} under the site's rule) give other drivers' joined NICs
    their rail (:func:`device_model.device_rail`).
    """
    rails = rails or {}
    grouped = dra_slices.devices_from_slices(slices)
    counters: dict[str, dict[str, dict[str, Fraction]]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        node = spec.get("nodeName")
        for counter_set in spec.get("sharedCounters") or []:
            values = {name: parse_quantity(v.get("value")) for name, v in (counter_set.get("counters") or {}).items()}
            counters.setdefault(node, {})[counter_set.get("name")] = values
    topologies = topologies or {}
    nodes = {
        node: {
            "devices": devices,
            "links": (topologies.get(node) or {}).get("links") or {},
            "p2p": (topologies.get(node) or {}).get("p2p") or None,
            "probed": device_model.probed_node(topologies.get(node)),
            "shared_counters": counters.get(node, {}),
            "rails": dict(rails.get(node) or {}),
        }
        for node, devices in sorted(grouped.items())
    }
    for node, settings in sorted((mig or {}).items()):
        if node in nodes and topologies.get(node) and mig_model.mode_of(settings) != "off":
            try:
                nodes[node]["mig"] = mig_model.node_gpus(topologies[node], settings)
            except (mig_model.MigModelError, dra.DeviceModelError) as exc:
                raise PlanError(f"mig.{node}: {exc}") from None
    return nodes


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


# -- classes and templates ----------------------------------------------------------------


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

    def template(self, item: dict[str, Any]) -> tuple[list[list[RequestAlternative]], list[DeviceConstraint]]:
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
                    DeviceConstraint("match", constraint["matchAttribute"], frozenset(names) if names else None)
                )
            elif constraint.get("distinctAttribute"):
                constraints.append(
                    DeviceConstraint("distinct", constraint["distinctAttribute"], frozenset(names) if names else None)
                )
        return requests, constraints

    def _alternative(self, template: str, name: str, request: str, spec: dict[str, Any]) -> RequestAlternative:
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
            qname: parse_quantity(value)
            for qname, value in ((spec.get("capacity") or {}).get("requests") or {}).items()
        }
        return RequestAlternative(
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


# -- planning --------------------------------------------------------------------------------


def plan_node(
    node: NodeDevices,
    requests: list[list[RequestAlternative]],
    constraints: list[DeviceConstraint],
    step_limit: int = DEFAULT_STEP_LIMIT,
    max_claims: int = MAX_CLAIMS_PER_NODE,
    per_rail: bool = True,
    held: tuple[set, dict, dict] | None = None,
    search: Callable[..., ClaimAllocator] = ClaimAllocator,
) -> dict[str, Any]:
    """Claims of one template that fit on one node at once.

    ``per_rail``: give ``fits_per_rail`` (the template is pinned to rails:
    :func:`plan_rails.pinned_to_rails`); else it is ``None``. ``held``:
    ``(used, consumed, counters_used)`` of devices allocated before the first
    claim (the allocator's state, copied here). ``search``: builds the
    allocator of each claim, with :class:`ClaimAllocator`'s arguments (the
    job planner's narrows it to claims on given rails).
    """
    result: dict[str, Any] = {
        "fits": 0,
        "worst_level": None,
        "worst_level_exact": True,
        "aligned_level": None,
        "aligned_level_exact": True,
        "allocations": [],
        "fits_per_rail": plan_rails.fits_per_rail([], node.rails) if per_rail else None,
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
    used: set = set(held[0]) if held else set()
    consumed: dict = {key: dict(spent) for key, spent in held[1].items()} if held else {}
    counters_used: dict = {key: dict(spent) for key, spent in held[2].items()} if held else {}
    while result["fits"] < max_claims:
        allocator = search(node, requests, constraints, used, consumed, counters_used, step_limit)
        try:
            chosen = allocator.run(candidates)
        except SearchLimitReached:
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
            hold_devices(alternative, devices, used, consumed, counters_used)
            all_devices.extend(devices)
        allocation.update(node.assess(all_devices))
        allocation["rails"] = plan_rails.allocation_rails(all_devices)
        result["allocations"].append(allocation)
        result["fits"] += 1
        if not all_devices:
            break
        if all(alternative.admin for alternative, _devices in chosen):
            result["admin_access"] = "with admin access a claim takes nothing away: one more always fits"
            break
    if result["fits"] >= max_claims > 1:
        result["capped"] = f"stopped counting at {max_claims} claims"
    summarise_levels(result, result["allocations"])
    paths = [allocation["paths"] for allocation in result["allocations"] if "paths" in allocation]
    if paths:  # the node's probe read peer-to-peer paths: its allocations' pairs per path (gpudirect.paths_count)
        result["paths"] = {key: sum(p[key] for p in paths) for key in paths[0]}
    if per_rail:
        result["fits_per_rail"] = plan_rails.fits_per_rail(result["allocations"], node.rails)
    if result["fits"] == 0 and "search_limit" not in result:
        result["reason"] = why_unallocatable(requests, constraints, candidates)
    return result


def summarise_levels(target: dict[str, Any], parts: list[dict[str, Any]], text: bool = False) -> None:
    """``worst_level``/``aligned_level`` and their ``*_exact`` over allocations or node results.

    Never better than a part: one unknown part (``None``, exact false) makes
    the summary unknown unless another part is exactly SYS; parts with
    nothing to summarise (``None``, exact true: no pair, no claim) are left
    out (:func:`device_model.worst_level`). ``text`` adds ``*_text``
    (``SYS``, ``≤ PHB``, ``unknown``, ``none``).
    """
    for key in ("worst_level", "aligned_level"):
        level, exact = device_model.worst_level((p[key], p.get(key + "_exact", True)) for p in parts)
        target[key] = level
        target[key + "_exact"] = exact
        if text:
            target[key + "_text"] = device_model.summary_level_text(level, exact)


class NodeShapes:
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

    def signature(self, node: NodeDevices) -> tuple:
        cached = self.signatures.get(node.name)
        if cached is None:
            devices = tuple(
                (
                    d.label,  # driver and name; the pool is the node's own
                    tuple(d.read(r) for r in self.reads),
                    tuple(d.attributes.get(a) for a in self.attributes),
                    d.bdf,
                    d.rail,  # from the node's rule too, which the attributes do not show
                    # numa_from: a NUMA node inferred or published reads alike, but is said apart
                    (
                        d.join["role"],
                        d.join["physfn"],
                        d.join["reason"],
                        d.join["roots"],
                        d.join["numa"],
                        d.join.get("numa_from"),
                    ),
                    tuple(sorted(d.capacity.items())),
                    d.policy_key,
                    d.multi,
                    tuple((c, tuple(sorted(n.items()))) for c, n in d.counters),
                    tuple(tuple(sorted(t.items())) for t in d.taints),
                )
                for d in node.devices
            )
            bdfs = [a for d in node.devices for a in (d.bdf, d.join["physfn"]) if a]
            # the level traffic flows at and the path (a pair through the host bridge is PHB, an unknown path
            # unverified): two nodes that differ only in ACS are not of one shape
            links = tuple(
                (
                    a,
                    b,
                    device_model.pair_level(node.links, a, b, node.p2p),
                    (device_model.pair_path(node.p2p, a, b) or {}).get("path"),
                )
                for a in bdfs
                if a in node.links
                for b in bdfs
                if b in node.links[a]
            )
            shared = tuple(sorted((k, tuple(sorted(v.items()))) for k, v in node.shared.items()))
            cached = self.signatures[node.name] = (devices, links, shared)
        return cached

    def get(self, index: int, node: NodeDevices) -> dict[str, Any] | None:
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

    def put(self, index: int, node: NodeDevices, result: dict[str, Any]) -> None:
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
    return _class_members(compiler, [NodeDevices(name, data, domains) for name, data in sorted(nodes.items())])


def _class_members(compiler: Compiler, prepared: list[NodeDevices]) -> dict[str, dict[str, list[str]]]:
    found: dict[str, dict[str, list[str]]] = {name: {} for name in compiler.classes}
    for node in prepared:
        node_name = node.name
        for class_name, selectors in compiler.classes.items():
            alternative = RequestAlternative(class_name, class_name, class_name, selectors, "ExactCount", 1, {})
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
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """The plan of a site: every template on every node (see docs/claims.md for the shape).

    ``shape_cache=False`` plans every node on its own even when it looks like
    one already planned (for measurements; the result is the same).
    ``warnings`` (the site's rail problems) go into the plan's ``warnings``,
    before those the planner finds (a published rail the rule disagrees with).
    """
    paused = gc.isenabled()
    gc.disable()  # the planner builds many small acyclic objects; collections would cost half the time
    try:
        result = _plan(site, nodes, classes, templates, required, kubernetes_version, driver, step_limit, shape_cache)
    finally:
        if paused:
            gc.enable()
    result["warnings"] = list(warnings or []) + result["warnings"]
    result["thin"] = plan_thin.thin(result, templates, nodes)  # burstable templates: memory promised / there
    return result


def plan_summary(result: dict[str, Any]) -> dict[str, Any]:
    """The plan without each template's per-node entries (``templates[].nodes``, ``thin[].nodes``,
    ``mig.nodes``), which grow with the site.

    Everything else (counts, levels, reasons, errors, accounting) is kept, but
    ``warnings`` past the first :data:`SUMMARY_WARNINGS`; the whole plan is
    what ``dest`` holds.
    """
    summary = dict(result)
    summary["templates"] = [{k: v for k, v in entry.items() if k != "nodes"} for entry in result["templates"]]
    summary["thin"] = [{k: v for k, v in entry.items() if k != "nodes"} for entry in result.get("thin") or []]
    if result.get("mig"):
        summary["mig"] = {k: v for k, v in result["mig"].items() if k != "nodes"}
    warnings = result.get("warnings") or []
    if len(warnings) > SUMMARY_WARNINGS:
        # they can name every NIC of the site; the whole list is in dest
        more = len(warnings) - SUMMARY_WARNINGS
        summary["warnings"] = warnings[:SUMMARY_WARNINGS] + [f"... and {more} more (the whole plan has them)"]
    return summary


def _plan(site, nodes, classes, templates, required, kubernetes_version, driver, step_limit, shape_cache):
    required_set = set(required or [])
    compiler = Compiler(classes)
    compiled = []
    kinds: dict[str, str] = {}
    pinned: set[str] = set()
    for item in templates:
        name = (item.get("metadata") or {}).get("name")
        if not name:
            raise PlanError("a claim template has no metadata.name")
        compiled.append((name, compiler.template(item)))
        kinds[name] = item.get("kind") or "ResourceClaimTemplate"
        if plan_rails.pinned_to_rails(item):
            pinned.add(name)
    unknown = required_set - {entry[0] for entry in compiled}
    if unknown:
        raise PlanError(f"required templates that are not given: {', '.join(sorted(unknown))}")
    domains = dra_cel.referenced_domains(compiler.selectors)
    prepared = [NodeDevices(name, data, domains) for name, data in sorted(nodes.items())]
    site_rails = sorted({rail for node in prepared for rail in node.rails})
    shapes = NodeShapes(compiler, compiled, shape_cache)
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
                    node,
                    requests,
                    constraints,
                    step_limit,
                    max_claims=1 if shared_claim else MAX_CLAIMS_PER_NODE,
                    per_rail=name in pinned,
                )
                shapes.put(index, node, result)
            entry["errors"].extend(result.pop("errors", []))
            entry["fits_total"] += result["fits"]
            entry["nodes"][node.name] = result
        if shared_claim:
            # where it could be allocated, but only once on the whole site
            entry["nodes_possible"] = sorted(n for n, r in entry["nodes"].items() if r["fits"])
            entry["fits_total"] = min(entry["fits_total"], 1)
        # only where the template pins its rails: elsewhere the rails are the planner's picks, not the
        # scheduler's, and a count per rail would promise what the scheduler may not give
        entry["fits_per_rail"] = (
            plan_rails.site_fits_per_rail(entry["nodes"].values(), site_rails, cap=1 if shared_claim else None)
            if name in pinned
            else None
        )
        summarise_levels(entry, list(entry["nodes"].values()), text=True)
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
        "kubernetes_version": dra_gates.minor_of(kubernetes_version) if kubernetes_version else None,
        "driver": driver,
        "levels": list(LEVELS),
        "nodes": sorted(nodes),
        "templates": report_templates,
        "required_unsatisfied": failed,
        "tainted_devices": tainted_devices(nodes),
        # per node the GPUs published and those KAI Scheduler would count (it counts by driver name)
        "gpu_counts": gpu_counts.node_counts(nodes),
        "rails": site_rails,
        "warnings": [f"{node.name}: {note}" for node in prepared for note in node.rail_notes],
    }
