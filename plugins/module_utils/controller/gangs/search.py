# SPDX-License-Identifier: Apache-2.0
"""The placement search: each multi-node job of a site placed whole, in one domain, every worker aligned.

:func:`place_checked_jobs` gives ``jobs.json``. The rules:

- **The jobs** are those :func:`jobs.spec.check_jobs` returns, checked once
  by the caller: the jobs module's runner passes those the renderer checked,
  :func:`jobs.place.place_jobs` checks a list as the inventory gives it. The
  search reads them as they are.
- **Each job on its own, all or nothing.** A job is placed on the site as it
  is now: the free devices are those not in ``held`` (this run's
  utilization), else every device (an empty site); never after the other
  jobs. It gets all its workers or none (``workers`` is then empty).
- **A worker is one claim of the job's template**, a ResourceClaimTemplate.
  A template that is not given, or a ResourceClaim (one claim the workers
  would share), does not fit, and the reason says so.
- **A node's capacity** is how many claims of the template fit on it at once
  with the held devices taken, allocated as :func:`plan.plan_node` does (in
  the scheduler's order, one claim after another; counting stops at the
  job's worker count). A node may hold several workers. A host of the
  placement without planner data (not probed, or its probe failed) holds
  none that can be counted: the counts are then lower bounds.
- **Rails.** Where the site has rails (a NIC of a node has one) and the
  template takes NICs, every worker's NICs are on the same rails: a worker's
  rail signature is the sorted list of its NICs' rails, and a job is placed
  with one signature for all its workers (``rails``). A node's capacity per
  signature counts only claims with exactly that signature
  (:mod:`capacity`). A NIC of unknown rail never counts toward a job's
  rails. A template without NICs, or a site without rails: no rail
  constraint, ``rails`` is null. For a template that does not pin its rails
  (no ``aligned.dev/rails``), the rails are the planner's choice
  (``rails_pinned`` false): the scheduler may give the workers NICs on other
  rails.
- **Levels.** ``placement.mode`` ``required``: every worker in one domain of
  the level; ``preferred``: as few domains of the level as hold the workers
  (one where one holds them all); no placement: anywhere on the site
  (``domain`` null). With a placement, a host without a domain at the level
  holds no worker.
- **Choice** among the placements that hold every worker, per rail signature
  and then over them (:mod:`choice`): fewest domains (preferred), fewest
  nodes, the least capacity left over in the chosen domains (best fit: big
  domains stay free for big jobs), then the domains' names and the rails.
  For a preferred job over several domains every set of the fewest domains
  that can be best is compared (domains alike but for their names once)
  while there are at most :data:`choice.MAX_DOMAIN_SETS`; beyond, only
  the biggest domains but the last with each domain that completes them,
  and ``notes`` says what is then not proven (the fewest nodes, unless no
  set could do with fewer; the best fit). Workers go to the chosen domains'
  nodes with the most capacity first (then by name); ``index`` runs in
  domain then node order, consecutive on one node. Names are in natural
  order (``r2`` before ``r10``, :func:`levels.natural_key`), as in the
  report.
- **Numbers.** Per job ``capacity`` gives the figures that decided it, for
  the chosen rails (or, when it does not fit, the rails that come closest:
  the most workers in one domain for a required job, on the site otherwise):
  workers the site holds, per domain of the level (the biggest
  :data:`CAPACITY_DOMAINS`), how many nodes hold how many workers, and the
  hosts that could not be counted. A level is never better than a worker's
  (``worst_level``, ``aligned_level``). ``capacity_exact`` is false where a
  search gave up, not every rail signature was tried, a host of a domain
  that could hold workers has no planner data, or ``held_uncertain`` says
  held devices are shared or claims span nodes; ``notes`` says which (and
  the reason of a job that does not fit ends with the same), and
  ``capacity_bound`` which way: ``lower`` (more may fit: searches that gave
  up, hosts not counted, shared devices counted as held whole), ``upper``
  (fewer may fit: claims spanning nodes, taken off none), ``unknown`` (both).
  ``fits_exact`` is false where ``fits`` rests on such a bound: a job that
  fits on upper bounds, or does not fit on lower ones.

``jobs.json``: ``schema_version`` (1), ``site``, ``kubernetes_version`` (the
minor), ``levels`` (names, widest first), ``level_sources`` (where each level
comes from, :func:`level_sources`; only where the placement has ``sources``,
levels read from the cluster), ``free_devices`` (``utilization``
or ``empty site``), ``warnings`` (held hosts and devices the site does not
have) and ``jobs``, each with ``name``, ``namespace``, ``template``,
``worker_count``, ``placement`` (``level``, ``mode``; both null without one),
``fits``, ``domain`` (``{level, name}`` when every worker is in one domain of
the level, else null), ``domains`` (``[{level, name, workers}]``),
``rails`` (the job's rail signature, null without a rail constraint),
``rails_pinned``, ``worst_level``, ``worst_level_exact``, ``aligned_level``
and ``aligned_level_exact`` (over its workers, never better than one),
``capacity`` (``rails``, ``site``, ``nodes`` ``{"<workers a node holds>":
nodes}``, ``level``, ``hosts_not_planned`` (hosts of the placement that
could hold workers but have no planner data); with a level also
``domains`` ``{name: workers}``, ``domains_left_out``,
``hosts_without_domain``, ``domains_not_planned`` ``{name: hosts}``; null
when the job is refused before counting), ``capacity_exact``,
``capacity_bound``, ``fits_exact``, ``notes``
(texts, the bounds and choices above; empty when there are none),
``workers`` (``[{index, node, devices: {request: [device labels]},
worst_level, worst_level_exact, aligned_level, aligned_level_exact,
rails}]``, ``node`` the inventory host; empty unless it fits) and
``reason`` (null when it fits).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import gc

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import presets
from ansible_collections.aligned.dra.plugins.module_utils.controller.gangs import capacity, choice
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import rails as plan_rails
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.allocator import NodeDevices
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.consumption import PlanError
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    Signature = tuple[int, ...]  # a worker's NICs' rails, sorted

SCHEMA_VERSION = 1
CAPACITY_DOMAINS = 10  # domains listed in a job's capacity (and named in a reason), the biggest first
NOT_PROBED = "no topology (not probed or failed)"


# -- inputs -------------------------------------------------------------------------------------


def _held(
    prepared: list[NodeDevices], held: Mapping[str, Iterable[str]] | None, warnings: list[str]
) -> tuple[dict[str, tuple[set, dict, dict]], dict[str, frozenset]]:
    """The allocator's state of each node's held devices, and the labels held per node."""
    if not held:
        return {}, {}
    by_name = {node.name: node for node in prepared}
    states, labels = {}, {}
    for host in sorted(held):
        node = by_name.get(host)
        if node is None:
            warnings.append(f"held: {host} is not a planned node; its devices are left out")
            continue
        state, unknown = capacity.held_state(node, held[host] or ())
        if unknown:
            warnings.append(f"held.{host}: {', '.join(unknown)} are no devices of the node; left out")
        found = frozenset(held[host] or ()) - set(unknown)
        if found:
            states[host] = state
            labels[host] = found
    return states, labels


def _held_notes(held_uncertain: Mapping[str, int] | None) -> list[tuple[str, str]]:
    """What makes every count a bound, as ``(bound, note)``: held devices counted whole (``lower``: more
    may fit), claims no node's count took off (``upper``: fewer may fit)."""
    found = dict(held_uncertain or {})
    for key in ("shared", "spanning"):
        value = found.setdefault(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise PlanError(f"held_uncertain.{key}: must be a count (got {value!r})")
    shared, spanning = found["shared"], found["spanning"]
    notes = []
    if shared > 0:
        verb = "is" if shared == 1 else "are"
        notes.append(("lower", f"{_count(shared, 'held device')} {verb} shared (counted as held whole: more may fit)"))
    if spanning > 0:
        verb = "holds" if spanning == 1 else "hold"
        notes.append(
            (
                "upper",
                f"{_count(spanning, 'claim')} {verb} devices on several nodes (not taken off any node: fewer may fit)",
            )
        )
    return notes


# -- the site -----------------------------------------------------------------------------------


def place_checked_jobs(
    site: str,
    jobs: list[dict[str, Any]],
    nodes: dict[str, dict[str, Any]],
    classes: list[dict[str, Any]],
    templates: list[dict[str, Any]],
    placement: Mapping[str, Any],
    held: Mapping[str, Iterable[str]] | None = None,
    kubernetes_version: str | None = None,
    driver: str = dra.DRIVER_NAME,
    step_limit: int = planner.DEFAULT_STEP_LIMIT,
    held_uncertain: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """``jobs.json``: every job placed on the site on its own (see the module's docstring for the rules).

    ``jobs``: what :func:`jobs.spec.check_jobs` returns; ``nodes``, ``classes``, ``templates``: what
    :func:`plan.plan` takes; ``placement``: the site's levels, each host's
    domains and node names (``{"levels": [{"name", "label"}], "domains":
    {host: {level: domain}}, "node_names": {...}}``); ``held``: ``{host:
    device labels}`` allocated already (None: an empty site);
    ``held_uncertain``: ``{"shared": n, "spanning": m}`` of
    :func:`held.held_devices` (either above 0: every count is a bound). A
    malformed template raises :class:`PlanError` (a selector that does not
    compile, ``CelError``).
    """
    placement = placement or {}
    paused = gc.isenabled()
    gc.disable()  # many small acyclic objects, as in plan.plan
    try:
        state = _Site(nodes, classes, templates, placement, held, step_limit)
        state.held_notes = _held_notes(held_uncertain)
        return _place_jobs(site, jobs, state, held is not None, kubernetes_version)
    finally:
        if paused:
            gc.enable()


class _Site:
    """What every job of the site reads: nodes, domains, rails and the capacities counted so far."""

    def __init__(
        self,
        nodes: dict[str, dict[str, Any]],
        classes: list[dict[str, Any]],
        templates: list[dict[str, Any]],
        placement: Mapping[str, Any],
        held: Mapping[str, Iterable[str]] | None,
        step_limit: int,
    ) -> None:
        self.templates = {(t.get("metadata") or {}).get("name"): t for t in templates}
        self.compiler = planner.Compiler(classes)
        self.compiled: dict[str, Any] = {}
        self.caps: dict[str, int] = {}
        self.levels = [level["name"] for level in placement.get("levels") or []]
        self.sources = {entry["name"]: entry for entry in level_sources(placement)}
        self.sourced = placement.get("sources") is not None
        self.domains = placement.get("domains") or {}
        self.warnings: list[str] = []
        self.step_limit = step_limit
        self.nodes = nodes
        self.prepared: list[NodeDevices] = []
        self.held = held
        self.held_notes: list[tuple[str, str]] = []  # (bound, note)
        self.not_planned: dict[str | None, dict[str | None, int]] = {}

    def compile(self, name: str, cap: int) -> None:
        if name not in self.compiled:
            self.compiled[name] = self.compiler.template(self.templates[name])
        self.caps[name] = max(self.caps.get(name, 0), cap)

    def prepare(self) -> None:
        domains = dra_cel.referenced_domains(self.compiler.selectors)
        self.prepared = [NodeDevices(name, data, domains) for name, data in sorted(self.nodes.items())]
        self.rails = sorted({rail for node in self.prepared for rail in node.rails})
        shapes = planner.NodeShapes(self.compiler, list(self.compiled.items()))
        states, labels = _held(self.prepared, self.held, self.warnings)
        self.capacities = capacity.Capacities(shapes, states, labels, self.step_limit)
        self.nics = {name: capacity.takes_nics(compiled, self.prepared) for name, compiled in self.compiled.items()}

    def domain(self, host: str, level: str) -> str | None:
        return (self.domains.get(host) or {}).get(level)

    def hosts_not_planned(self, level: str | None) -> dict[str | None, int]:
        """``{domain: hosts}`` of the placement's hosts without planner data that have a domain at ``level``
        (no level: every such host, under None)."""
        if level not in self.not_planned:
            planned = {node.name for node in self.prepared}
            found: dict[str | None, int] = {}
            for host in self.domains:
                if host in planned:
                    continue
                domain = self.domain(host, level) if level is not None else None
                if level is None or domain is not None:
                    found[domain] = found.get(domain, 0) + 1
            self.not_planned[level] = {d: found[d] for d in sorted(found, key=choice.name_key)}
        return self.not_planned[level]


def _place_jobs(
    site: str, jobs: list[dict[str, Any]], state: _Site, measured: bool, kubernetes_version: str | None
) -> dict[str, Any]:
    for job in jobs:
        template = state.templates.get(job["template"])
        if template is not None and template.get("kind", "ResourceClaimTemplate") == "ResourceClaimTemplate":
            state.compile(job["template"], job["workers"])
    state.prepare()
    result = {
        "schema_version": SCHEMA_VERSION,
        "site": site,
        "kubernetes_version": dra_gates.minor_of(kubernetes_version) if kubernetes_version else None,
        "levels": list(state.levels),
        "free_devices": "utilization" if measured else "empty site",
        "jobs": [_place_job(state, job) for job in jobs],
        "warnings": state.warnings,
    }
    if state.sourced:
        # only where levels are read from the cluster: an inventory site's jobs.json stays as it was
        result["level_sources"] = list(state.sources.values())
    return result


def level_sources(placement: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Where each level of ``placement`` comes from, widest first, as ``jobs.json`` says it.

    ``[{"name", "label" (the node label the schedulers read), "source"}]``,
    ``source`` ``inventory`` (``aligned_dra_placement``, written as node label
    ``label``), ``node_label`` (with ``key``: the cluster's own label) or
    ``device_attribute`` (with ``driver`` and ``attribute``, qualified: the
    value the node's devices carry, written as node label ``label``). A level
    the placement's ``sources`` (levels read from the cluster,
    :func:`sources.sourced_placement`) does not name comes from the inventory.
    """
    found = {entry.get("name"): entry for entry in placement.get("sources") or [] if isinstance(entry, dict)}
    out = []
    for level in placement.get("levels") or []:
        spec = found.get(level["name"]) or {}
        source = spec.get("source") or presets.INVENTORY
        entry: dict[str, Any] = {"name": level["name"], "label": level.get("label"), "source": source}
        if source == presets.NODE_LABEL:
            entry["key"] = spec.get("key")
        elif source == presets.DEVICE_ATTRIBUTE:
            entry["driver"] = spec.get("driver")
            entry["attribute"] = presets.qualified(spec.get("driver"), spec.get("attribute"))
        out.append(entry)
    return out


def missing_text(source: Mapping[str, Any] | None) -> str:
    """Why a host has no domain at a level read from the cluster, in parentheses; nothing for the inventory's."""
    kind = (source or {}).get("source")
    if kind == presets.NODE_LABEL and source:
        if source.get("key") == presets.CLIQUE_LABEL:
            return f" ({presets.CLIQUE_LABEL} not set: the NVLink fabric is not ready)"
        return f" (node label {source.get('key')} not set)"
    if kind == presets.DEVICE_ATTRIBUTE and source:
        fabric = ": the NVLink fabric is not ready" if source.get("attribute") in presets.NVLINK_ATTRIBUTES else ""
        return f" (device attribute {source.get('attribute')} not set{fabric})"
    return ""


# -- one job ------------------------------------------------------------------------------------


def _entry(job: dict[str, Any], state: _Site) -> dict[str, Any]:
    template = state.templates.get(job["template"])
    placement = job["placement"] or {}
    return {
        "name": job["name"],
        "namespace": job["namespace"],
        "template": job["template"],
        "worker_count": job["workers"],
        "placement": {"level": placement.get("level"), "mode": placement.get("mode")},
        "fits": False,
        "domain": None,
        "domains": [],
        "rails": None,
        "rails_pinned": bool(template and plan_rails.pinned_to_rails(template)),
        "worst_level": None,
        "worst_level_exact": True,
        "aligned_level": None,
        "aligned_level_exact": True,
        "capacity_exact": True,
        "capacity_bound": None,
        "fits_exact": True,
        "capacity": None,
        "notes": [],
        "workers": [],
        "reason": None,
    }


def _refusal(job: dict[str, Any], state: _Site) -> str | None:
    """Why the job cannot be placed whatever the nodes hold, or None (its level is the site's: checked)."""
    template = state.templates.get(job["template"])
    if template is None:
        return f"template {job['template']} is not among the site's claim templates"
    if template.get("kind", "ResourceClaimTemplate") != "ResourceClaimTemplate":
        return (
            f"template {job['template']} is a {template.get('kind')}, one claim that every worker would share: "
            "a worker needs its own claim (a ResourceClaimTemplate)"
        )
    return None


class _Scope:
    """The hosts that may hold the job's workers, by domain, and each one's capacity per rail signature."""

    def __init__(self, state: _Site, job: dict[str, Any]) -> None:
        name, workers = job["template"], job["workers"]
        level = (job["placement"] or {}).get("level")
        self.level = level
        self.source = state.sources.get(level) if level is not None else None
        self.preferred = (job["placement"] or {}).get("mode") == "preferred"
        self.rails_on = bool(state.rails) and state.nics[name]
        self.groups: dict[str | None, list[str]] = {}
        self.without_domain = 0
        self.per_node: dict[str, capacity.NodeCapacity] = {}
        for node in state.prepared:
            domain = state.domain(node.name, level) if level is not None else None
            if level is not None and domain is None:
                self.without_domain += 1
                continue
            self.groups.setdefault(domain, []).append(node.name)
            cap = state.caps[name]
            self.per_node[node.name] = state.capacities.node(name, state.compiled[name], node, cap, self.rails_on)
        # hosts of a domain that could hold workers whose devices are unknown: every count a lower bound
        self.not_planned = state.hosts_not_planned(level)
        self.workers = workers
        found: set = set()
        for result in self.per_node.values():
            found.update(result.by_rails or ())
        self.signatures: list[Signature | None] = sorted(found) if self.rails_on else [None]

    def capacity(self, host: str, signature: Signature | None) -> int:
        """Workers of the job the host holds with ``signature`` (None: without a rail constraint)."""
        result = self.per_node[host]
        if signature is None:
            # a job bound to rails that no signature fits: nothing
            count = 0 if self.rails_on else result.fits
        else:
            count = (result.by_rails or {}).get(signature, (0, None))[0]
        return min(count, self.workers)

    def allocations(self, host: str, signature: Signature | None) -> list[dict[str, Any]]:
        result = self.per_node[host]
        return result.allocations if signature is None else (result.by_rails or {})[signature][1]

    def option(self, signature: Signature | None) -> tuple[tuple, dict[str, Any]] | None:
        """The best placement with one rail signature (:func:`choice.best`)."""
        caps = {d: {h: self.capacity(h, signature) for h in hosts} for d, hosts in self.groups.items()}
        return choice.best(caps, self.workers, self.preferred, signature)


def _place_job(state: _Site, job: dict[str, Any]) -> dict[str, Any]:
    entry = _entry(job, state)
    entry["reason"] = _refusal(job, state)
    if entry["reason"]:
        return entry
    scope = _Scope(state, job)
    bounds = [("lower", note) for note in _bound_notes(scope)] + state.held_notes
    entry["notes"] = [note for _bound, note in bounds]
    entry["capacity_exact"] = not bounds
    entry["capacity_bound"] = _direction({bound for bound, _note in bounds})
    options = [found for s in scope.signatures if (found := scope.option(s)) is not None]
    if not options:
        signature = _closest(scope)
        entry["capacity"] = _capacity(scope, signature)
        entry["rails"] = list(signature) if signature is not None else None
        entry["reason"] = "; ".join([_reason(scope, job, signature, entry["capacity"]), *entry["notes"]])
        # counts that are at most what they say cannot make a job fit
        entry["fits_exact"] = entry["capacity_bound"] in (None, "upper")
        return entry
    _key, chosen = min(options, key=lambda option: option[0])
    signature = chosen["signature"]
    entry["fits"] = True
    # a placement found on counts that are at least what they say is a real one
    entry["fits_exact"] = entry["capacity_bound"] in (None, "lower")
    entry["rails"] = list(signature) if signature is not None else None
    entry["capacity"] = _capacity(scope, signature)
    if not chosen["exhaustive"]:
        entry["notes"].append(_choice_note(scope.level, len(chosen["domains"]), chosen["fewest_nodes"]))
    _workers(entry, scope, chosen, state)
    return entry


def _workers(entry: dict[str, Any], scope: _Scope, chosen: dict[str, Any], state: _Site) -> None:
    """The job's workers on the chosen nodes, its domains and its levels."""
    level = scope.level
    counts = dict(chosen["picked"])
    if level is None:
        order = sorted(counts, key=choice.name_key)
    else:
        order = sorted(counts, key=lambda h: (choice.name_key(state.domain(h, level)), choice.name_key(h)))
    workers = []
    per_domain: dict[str, int] = {}
    for host in order:
        for allocation in scope.allocations(host, chosen["signature"])[: counts[host]]:
            workers.append({
                "index": len(workers),
                "node": host,
                "devices": {request: list(labels) for request, labels in allocation["devices"].items()},
                "worst_level": allocation["worst_level"],
                "worst_level_exact": allocation["worst_level_exact"],
                "aligned_level": allocation.get("aligned_level"),
                "aligned_level_exact": allocation.get("aligned_level_exact", True),
                "rails": list(allocation.get("rails") or []),
            })  # fmt: skip
        if level is not None:
            domain = state.domain(host, level)
            per_domain[domain] = per_domain.get(domain, 0) + counts[host]
    entry["workers"] = workers
    # never better than a worker; unknown stays unknown
    planner.summarise_levels(entry, workers)
    entry["domains"] = [{"level": level, "name": d, "workers": n} for d, n in per_domain.items()]
    if len(per_domain) == 1:
        entry["domain"] = {"level": level, "name": next(iter(per_domain))}


# -- numbers ------------------------------------------------------------------------------------


def _totals(scope: _Scope, signature: Signature | None) -> dict[str | None, int]:
    return {d: sum(scope.capacity(h, signature) for h in hosts) for d, hosts in scope.groups.items()}


def _closest(scope: _Scope) -> Signature | None:
    """The rail signature that comes closest to the job: the most workers where the job must fit (one domain
    for a required job, the site otherwise), then the other, then the signature."""
    if not scope.rails_on or not scope.signatures:
        return None

    def key(signature: Signature) -> tuple:
        totals = _totals(scope, signature)
        biggest, site = max(totals.values(), default=0), sum(totals.values())
        if scope.level is None or scope.preferred:
            return (-site, -biggest, signature)
        return (-biggest, -site, signature)

    return min(scope.signatures, key=key)


def _capacity(scope: _Scope, signature: Signature | None) -> dict[str, Any]:
    """The figures that decide the job, for one rail signature."""
    totals = _totals(scope, signature)
    per_node: dict[int, int] = {}
    for hosts in scope.groups.values():
        for host in hosts:
            count = scope.capacity(host, signature)
            per_node[count] = per_node.get(count, 0) + 1
    found: dict[str, Any] = {
        "rails": list(signature) if signature is not None else None,
        "site": sum(totals.values()),
        "nodes": {str(count): per_node[count] for count in sorted(per_node, reverse=True)},
        "level": scope.level,
        "hosts_not_planned": sum(scope.not_planned.values()),
    }
    if scope.level is not None:
        ranked = choice.ranked(totals)
        found["domains"] = {d: totals[d] for d in ranked[:CAPACITY_DOMAINS]}
        found["domains_left_out"] = max(0, len(ranked) - CAPACITY_DOMAINS)
        found["hosts_without_domain"] = scope.without_domain
        found["domains_not_planned"] = dict(scope.not_planned)
    return found


def _direction(bounds: set[str]) -> str | None:
    """The counts' bound: None (exact), ``lower`` (more may fit), ``upper`` (fewer may fit), or ``unknown`` (both)."""
    if not bounds:
        return None
    return next(iter(bounds)) if len(bounds) == 1 else "unknown"


def _choice_note(level: str | None, k: int, fewest_nodes: bool) -> str:
    """What a choice among too many sets of domains to compare each does not prove."""
    biggest = f"the biggest {level}" if k == 2 else f"the {k - 1} biggest {level}s"
    among = f"only among {biggest} with one more (too many sets of {k} {level}s to compare each)"
    if fewest_nodes:
        return f"the nodes are the fewest, but the best fit was looked for {among}: another set may leave less over"
    return f"the fewest nodes were looked for {among}: fewer nodes may do"


def _bound_notes(scope: _Scope) -> list[str]:
    """What makes the job's counts lower bounds: searches that gave up, hosts without planner data."""
    notes = []
    inexact = sum(1 for r in scope.per_node.values() if not r.exact)
    if inexact:
        notes.append(
            f"the counts of {_count(inexact, 'host')} are lower bounds (the search gave up, or rails were left untried)"
        )
    missing = sum(scope.not_planned.values())
    if missing:
        verb = "has" if missing == 1 else "have"
        if scope.level is None:
            where = f"{_count(missing, 'host')} of the site {verb}"
        elif len(scope.not_planned) == 1:
            where = f"{_count(missing, 'host')} of {scope.level} {next(iter(scope.not_planned))} {verb}"
        else:
            listed = [f"{d}: {n}" for d, n in list(scope.not_planned.items())[:CAPACITY_DOMAINS]]
            more = len(scope.not_planned) - len(listed)
            listed += [f"{more} more"] if more else []
            domains = _count(len(scope.not_planned), str(scope.level))
            where = f"{_count(missing, 'host')} in {domains} ({', '.join(listed)}) {verb}"
        notes.append(f"{where} {NOT_PROBED}: the counts are lower bounds")
    return notes


def _rails_text(scope: _Scope, signature: Signature | None) -> str:
    if not scope.rails_on:
        return ""
    if signature is None:
        # a search that gave up may have missed one
        exact = all(r.exact for r in scope.per_node.values())
        return f" (no worker {'fits' if exact else 'found'} with all its NICs on known rails)"
    return f" (rails {list(signature)})"


def _reason(scope: _Scope, job: dict[str, Any], signature: Signature | None, figures: dict[str, Any]) -> str:
    """Why the job does not fit, with numbers (the notes on bounds follow it)."""
    workers, level = job["workers"], scope.level
    asked = _count(workers, "worker")
    rails = _rails_text(scope, signature)
    site_total = figures["site"]
    if level is None or scope.preferred:
        text = f"the site holds {site_total} of {asked}{rails}"
    elif not scope.groups:
        text = f"no host has a {level}{missing_text(scope.source)}"
    elif len(scope.groups) == 1:
        (domain,) = scope.groups
        text = f"{level} {domain} holds {site_total} of {asked}{rails}"
    else:
        totals = _totals(scope, signature)
        most = choice.ranked(totals)[0]
        text = f"no {level} holds {asked}: the most is {level} {most} with {totals[most]}{rails}"
        text += f"; the site holds {site_total}"
    notes = []
    if scope.without_domain and scope.groups:
        left_out = "is" if scope.without_domain == 1 else "are"
        notes.append(f"{_hosts(scope.without_domain)} no {level}{missing_text(scope.source)} and {left_out} left out")
    if scope.rails_on:
        unknown = sum(1 for r in scope.per_node.values() if r.unknown_rails)
        if unknown:
            notes.append(f"{_hosts(unknown)} NICs of unknown rail, which never count toward the job's rails")
        anywhere = sum(min(r.fits, workers) for r in scope.per_node.values())
        if anywhere > site_total:
            notes.append(f"with its workers on different rails the site would hold {anywhere}")
    errors = sum(1 for r in scope.per_node.values() if r.errors)
    if errors:
        notes.append(f"a selector of template {job['template']} fails to evaluate on {_count(errors, 'host')}")
    return "; ".join([text, *notes])


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _hosts(number: int) -> str:
    """``1 host has`` / ``3 hosts have``."""
    return f"{_count(number, 'host')} {'has' if number == 1 else 'have'}"
