# SPDX-License-Identifier: Apache-2.0
"""Job planner: each multi-node job of a site placed whole, in one domain, every worker aligned.

:func:`place_jobs` gives ``jobs.json``. The rules:

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
  job's worker count). A node may hold several workers.
- **Rails.** Where the site has rails (a NIC of a node has one) and the
  template takes NICs, every worker's NICs are on the same rails: a worker's
  rail signature is the sorted list of its NICs' rails, and a job is placed
  with one signature for all its workers (``rails``). A node's capacity per
  signature counts only claims with exactly that signature
  (:mod:`jobs_capacity`). A NIC of unknown rail never counts toward a job's
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
- **Choice** among the placements that hold every worker, in order: fewest
  domains (preferred), fewest nodes, the least capacity left over in the
  chosen domains (best fit: big domains stay free for big jobs), then the
  domains' names and the rails. A preferred placement over several domains
  takes the biggest domains but the last, and the smallest domain that
  completes it. Workers go to the chosen domains' nodes with the most
  capacity first (then by name); ``index`` runs in domain then node-name
  order, consecutive on one node.
- **Numbers.** Per job ``capacity`` gives the figures that decided it, for
  the chosen rails (or, when it does not fit, the rails that come closest):
  workers the site holds, per domain of the level (the biggest
  :data:`CAPACITY_DOMAINS`), and how many nodes hold how many workers. A
  level is never better than a worker's (``worst_level``); ``capacity_exact``
  is false where a search gave up or not every rail signature was tried
  (then a count is a lower bound).

``jobs.json``: ``schema_version`` (1), ``site``, ``kubernetes_version`` (the
minor), ``levels`` (names, widest first), ``free_devices`` (``utilization``
or ``empty site``), ``warnings`` (held hosts and devices the site does not
have) and ``jobs``, each with ``name``, ``namespace``, ``template``,
``worker_count``, ``placement`` (``level``, ``mode``; both null without one),
``fits``, ``domain`` (``{level, name}`` when every worker is in one domain of
the level, else null), ``domains`` (``[{level, name, workers}]``),
``rails`` (the job's rail signature, null without a rail constraint),
``rails_pinned``, ``worst_level`` and ``worst_level_exact`` (over its
workers), ``capacity`` (``rails``, ``site``, ``nodes`` ``{"<workers a node
holds>": nodes}``, ``level``; with a level also ``domains`` ``{name:
workers}``, ``domains_left_out``, ``hosts_without_domain``; null when the job
is refused before counting), ``capacity_exact``, ``workers``
(``[{index, node, devices: {request: [device labels]}, worst_level,
worst_level_exact, rails}]``, ``node`` the inventory host; empty unless it
fits) and ``reason`` (null when it fits).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import gc

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import jobs_capacity as capacity
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import rails as plan_rails
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.allocator import NodeDevices, PlanError
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    Signature = tuple[int, ...]  # a worker's NICs' rails, sorted

SCHEMA_VERSION = 1
CAPACITY_DOMAINS = 10  # domains listed in a job's capacity, the biggest first
MAX_WORKERS = 4096
MODES = ("required", "preferred")


# -- inputs -------------------------------------------------------------------------------------


def _checked_job(index: int, job: Any) -> dict[str, Any]:
    """The fields the planner reads; a job it cannot read raises :class:`PlanError` naming it."""
    where = f"jobs[{index}]"
    if not isinstance(job, dict):
        raise PlanError(f"{where}: must be a mapping (got {type(job).__name__})")
    name = job.get("name")
    if not isinstance(name, str) or not name:
        raise PlanError(f"{where}.name: must be a non-empty string (got {name!r})")
    where = f"jobs[{index}] ({name})"
    workers = job.get("workers")
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise PlanError(f"{where}.workers: must be a whole number from 1 to {MAX_WORKERS} (got {workers!r})")
    template = job.get("template")
    if not isinstance(template, str) or not template:
        raise PlanError(f"{where}.template: must be a non-empty string (got {template!r})")
    placement = job.get("placement")
    level = mode = None
    if placement is not None:
        if not isinstance(placement, dict) or not isinstance(placement.get("level"), str):
            raise PlanError(f"{where}.placement: must be a mapping with a level (got {placement!r})")
        level = placement["level"]
        mode = placement.get("mode") or "required"
        if mode not in MODES:
            raise PlanError(f"{where}.placement.mode: must be one of {', '.join(MODES)} (got {mode!r})")
    return {
        "name": name,
        "namespace": job.get("namespace"),
        "template": template,
        "workers": workers,
        "level": level,
        "mode": mode,
    }


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


# -- the site -----------------------------------------------------------------------------------


def place_jobs(
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
) -> dict[str, Any]:
    """``jobs.json``: every job placed on the site on its own (see the module's docstring for the rules).

    ``nodes``, ``classes``, ``templates``: what :func:`plan.plan` takes;
    ``placement``: the site's levels, each host's domains and node names
    (``{"levels": [{"name", "label"}], "domains": {host: {level: domain}},
    "node_names": {...}}``); ``held``: ``{host: device labels}`` allocated
    already (None: an empty site). A malformed job or template raises
    :class:`PlanError` (a selector that does not compile, ``CelError``).
    """
    checked = [_checked_job(index, job) for index, job in enumerate(jobs)]
    placement = placement or {}
    paused = gc.isenabled()
    gc.disable()  # many small acyclic objects, as in plan.plan
    try:
        return _place_jobs(site, checked, nodes, classes, templates, placement, held, kubernetes_version, step_limit)
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
        self.domains = placement.get("domains") or {}
        self.warnings: list[str] = []
        self.step_limit = step_limit
        self.nodes = nodes
        self.prepared: list[NodeDevices] = []
        self.held = held

    def compile(self, name: str, cap: int) -> None:
        if name not in self.compiled:
            self.compiled[name] = self.compiler.template(self.templates[name])
        self.caps[name] = max(self.caps.get(name, 0), cap)

    def prepare(self) -> None:
        domains = dra_cel.referenced_domains(self.compiler.selectors)
        self.prepared = [NodeDevices(name, data, domains) for name, data in sorted(self.nodes.items())]
        self.rails = sorted({rail for node in self.prepared for rail in node.rails})
        shapes = planner._Shapes(self.compiler, list(self.compiled.items()))
        states, labels = _held(self.prepared, self.held, self.warnings)
        self.capacities = capacity.Capacities(shapes, states, labels, self.step_limit)
        self.nics = {name: capacity.takes_nics(compiled, self.prepared) for name, compiled in self.compiled.items()}

    def domain(self, host: str, level: str) -> str | None:
        return (self.domains.get(host) or {}).get(level)


def _place_jobs(
    site: str,
    jobs: list[dict[str, Any]],
    nodes: dict[str, dict[str, Any]],
    classes: list[dict[str, Any]],
    templates: list[dict[str, Any]],
    placement: Mapping[str, Any],
    held: Mapping[str, Iterable[str]] | None,
    kubernetes_version: str | None,
    step_limit: int,
) -> dict[str, Any]:
    state = _Site(nodes, classes, templates, placement, held, step_limit)
    for job in jobs:
        template = state.templates.get(job["template"])
        if template is not None and template.get("kind", "ResourceClaimTemplate") == "ResourceClaimTemplate":
            state.compile(job["template"], job["workers"])
    state.prepare()
    return {
        "schema_version": SCHEMA_VERSION,
        "site": site,
        "kubernetes_version": dra_gates.minor_of(kubernetes_version) if kubernetes_version else None,
        "levels": list(state.levels),
        "free_devices": "utilization" if held is not None else "empty site",
        "jobs": [_place_job(state, job) for job in jobs],
        "warnings": state.warnings,
    }


# -- one job ------------------------------------------------------------------------------------


def _entry(job: dict[str, Any], state: _Site) -> dict[str, Any]:
    template = state.templates.get(job["template"])
    return {
        "name": job["name"],
        "namespace": job["namespace"],
        "template": job["template"],
        "worker_count": job["workers"],
        "placement": {"level": job["level"], "mode": job["mode"]},
        "fits": False,
        "domain": None,
        "domains": [],
        "rails": None,
        "rails_pinned": bool(template and plan_rails.pinned_to_rails(template)),
        "worst_level": None,
        "worst_level_exact": True,
        "capacity_exact": True,
        "capacity": None,
        "workers": [],
        "reason": None,
    }


def _refusal(job: dict[str, Any], state: _Site) -> str | None:
    """Why the job cannot be placed whatever the nodes hold, or None."""
    template = state.templates.get(job["template"])
    if template is None:
        return f"template {job['template']} is not among the site's claim templates"
    if template.get("kind", "ResourceClaimTemplate") != "ResourceClaimTemplate":
        return (
            f"template {job['template']} is a {template.get('kind')}, one claim that every worker would share: "
            "a worker needs its own claim (a ResourceClaimTemplate)"
        )
    if job["level"] is not None and job["level"] not in state.levels:
        return (
            f"placement level {job['level']} is not a level of the site (levels: {', '.join(state.levels) or 'none'})"
        )
    return None


class _Scope:
    """The hosts that may hold the job's workers, by domain, and each one's capacity per rail signature."""

    def __init__(self, state: _Site, job: dict[str, Any]) -> None:
        name, workers, level = job["template"], job["workers"], job["level"]
        self.level = level
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


def _option(scope: _Scope, signature: Signature | None, preferred: bool) -> tuple[tuple, dict[str, Any]] | None:
    """The best placement with one rail signature, as ``(sort key, choice)``; None when none holds the job."""
    workers = scope.workers
    totals = {}
    caps = {}
    for domain, hosts in scope.groups.items():
        caps[domain] = {host: scope.capacity(host, signature) for host in hosts}
        totals[domain] = sum(caps[domain].values())
    ranked = sorted(totals, key=lambda d: (-totals[d], d or ""))
    # one domain that holds every worker, whichever the mode
    candidates = [[d] for d in ranked if totals[d] >= workers]
    if not candidates and preferred and sum(totals.values()) >= workers:
        # the fewest domains: the biggest first; the last one the smallest that completes them
        chosen, held_so_far = [], 0
        for domain in ranked:
            if held_so_far + totals[domain] >= workers:
                rest = [d for d in ranked if d not in chosen and held_so_far + totals[d] >= workers]
                chosen.append(min(rest, key=lambda d: (totals[d], d or "")))
                break
            chosen.append(domain)
            held_so_far += totals[domain]
        candidates = [chosen]
    best = None
    for domains in candidates:
        pool = sorted(((c, h) for d in domains for h, c in caps[d].items() if c), key=lambda p: (-p[0], p[1]))
        picked, left = [], workers
        for count, host in pool:
            if left == 0:
                break
            picked.append((host, min(count, left)))
            left -= min(count, left)
        leftover = sum(totals[d] for d in domains) - workers
        key = (len(domains), len(picked), leftover, sorted(d or "" for d in domains), signature or ())
        if best is None or key < best[0]:
            best = (key, {"domains": domains, "picked": picked, "signature": signature})
    return best


def _place_job(state: _Site, job: dict[str, Any]) -> dict[str, Any]:
    entry = _entry(job, state)
    entry["reason"] = _refusal(job, state)
    if entry["reason"]:
        return entry
    scope = _Scope(state, job)
    entry["capacity_exact"] = all(r.exact for r in scope.per_node.values())
    preferred = job["mode"] == "preferred"
    options = [found for s in scope.signatures if (found := _option(scope, s, preferred)) is not None]
    if not options:
        signature = _closest(scope)
        entry["capacity"] = _capacity(scope, signature)
        entry["rails"] = list(signature) if signature is not None else None
        entry["reason"] = _reason(scope, job, signature, entry["capacity"])
        return entry
    _key, choice = min(options, key=lambda option: option[0])
    signature = choice["signature"]
    entry["fits"] = True
    entry["rails"] = list(signature) if signature is not None else None
    entry["capacity"] = _capacity(scope, signature)
    _workers(entry, scope, choice, state)
    return entry


def _workers(entry: dict[str, Any], scope: _Scope, choice: dict[str, Any], state: _Site) -> None:
    """The job's workers on the chosen nodes, its domains and its worst level."""
    level = scope.level
    counts = dict(choice["picked"])
    order = sorted(counts, key=lambda h: ((state.domain(h, level) or "") if level else "", h))
    workers = []
    per_domain: dict[str, int] = {}
    for host in order:
        for allocation in scope.allocations(host, choice["signature"])[: counts[host]]:
            workers.append({
                "index": len(workers),
                "node": host,
                "devices": {request: list(labels) for request, labels in allocation["devices"].items()},
                "worst_level": allocation["worst_level"],
                "worst_level_exact": allocation["worst_level_exact"],
                "rails": list(allocation.get("rails") or []),
            })  # fmt: skip
        if level is not None:
            domain = state.domain(host, level)
            per_domain[domain] = per_domain.get(domain, 0) + counts[host]
    entry["workers"] = workers
    entry["worst_level"], entry["worst_level_exact"] = device_model.worst_level(
        (w["worst_level"], w["worst_level_exact"]) for w in workers
    )
    entry["domains"] = [{"level": level, "name": d, "workers": n} for d, n in sorted(per_domain.items())]
    if len(per_domain) == 1:
        entry["domain"] = {"level": level, "name": next(iter(per_domain))}


# -- numbers ------------------------------------------------------------------------------------


def _totals(scope: _Scope, signature: Signature | None) -> dict[str | None, int]:
    return {d: sum(scope.capacity(h, signature) for h in hosts) for d, hosts in scope.groups.items()}


def _closest(scope: _Scope) -> Signature | None:
    """The rail signature that comes closest to the job: the most workers in one domain, then on the site."""
    if not scope.rails_on or not scope.signatures:
        return None

    def key(signature: Signature) -> tuple:
        totals = _totals(scope, signature)
        return (-max(totals.values(), default=0), -sum(totals.values()), signature)

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
    }
    if scope.level is not None:
        ranked = sorted(totals, key=lambda d: (-totals[d], d))
        found["domains"] = {d: totals[d] for d in ranked[:CAPACITY_DOMAINS]}
        found["domains_left_out"] = max(0, len(ranked) - CAPACITY_DOMAINS)
        found["hosts_without_domain"] = scope.without_domain
    return found


def _rails_text(scope: _Scope, signature: Signature | None) -> str:
    if not scope.rails_on:
        return ""
    if signature is None:
        return " (no worker fits with all its NICs on known rails)"
    return f" (rails {list(signature)})"


def _reason(scope: _Scope, job: dict[str, Any], signature: Signature | None, figures: dict[str, Any]) -> str:
    """Why the job does not fit, with numbers."""
    workers, level = job["workers"], job["level"]
    asked = _count(workers, "worker")
    rails = _rails_text(scope, signature)
    site_total = figures["site"]
    if level is None or job["mode"] == "preferred":
        text = f"the site holds {site_total} of {asked}{rails}"
    elif not scope.groups:
        text = f"no host has a {level}"
    elif len(scope.groups) == 1:
        (domain,) = scope.groups
        text = f"{level} {domain} holds {site_total} of {asked}{rails}"
    else:
        totals = _totals(scope, signature)
        most = min(totals, key=lambda d: (-totals[d], d))
        text = f"no {level} holds {asked}: the most is {level} {most} with {totals[most]}{rails}"
        text += f"; the site holds {site_total}"
    notes = []
    if scope.without_domain and scope.groups:
        left_out = "is" if scope.without_domain == 1 else "are"
        notes.append(f"{_hosts(scope.without_domain)} no {level} and {left_out} left out")
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
    inexact = sum(1 for r in scope.per_node.values() if not r.exact)
    if inexact:
        notes.append(
            f"the counts of {_count(inexact, 'host')} are lower bounds (the search gave up, or rails were left untried)"
        )
    return "; ".join([text, *notes])


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _hosts(number: int) -> str:
    """``1 host has`` / ``3 hosts have``."""
    return f"{_count(number, 'host')} {'has' if number == 1 else 'have'}"
