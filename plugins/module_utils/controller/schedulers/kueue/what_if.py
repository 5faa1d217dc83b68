# SPDX-License-Identifier: Apache-2.0
"""What if: a model of Kueue's admission and preemption in a cohort for a list of workloads.

:func:`what_if` reads the queues :func:`kueue.render` returns (ClusterQueues,
Cohorts, WorkloadPriorityClasses) and admits the workloads as Kueue's classic
admission and preemption would (its docstring says what is modelled and what
not); ``_Model`` holds the quota arithmetic.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import (
    TEAM_LABEL,
    TIER_LABEL,
    UNIT_DEVICES,
    KueueError,
    amount,
    amount_out,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


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


def what_if(
    rendered: dict[str, Any],
    capacity: dict[str, Any] | None = None,
    demands: list[dict[str, Any]] | tuple = (),
    field: str = "what_if",
) -> dict[str, Any]:
    """A model of Kueue's admission and preemption for a list of workloads; not Kueue itself.

    ``field`` names the workloads in messages (the inventory setting they came from).

    ``rendered`` is what :func:`objects.render` returned (its ClusterQueues,
    Cohorts and WorkloadPriorityClasses are read); :func:`objects.what_if_from_settings`
    renders checked team settings first.
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
    objects = rendered["objects"]
    roots = _cohort_roots(objects)
    queues = {o["metadata"]["name"]: _Queue(o, roots) for o in objects if o.get("kind") == "ClusterQueue"}
    by_team = {q.team: q for q in queues.values()}
    tier_values = {
        (o["metadata"].get("labels") or {}).get(TIER_LABEL, o["metadata"]["name"]): o["value"]
        for o in objects
        if o.get("kind") == "WorkloadPriorityClass"
    }
    mappings = rendered["mappings"]
    model = _Model(queues)
    workloads = [
        _workload(f"{field}[{index}]", index, demand, by_team, mappings, tier_values)
        for index, demand in enumerate(demands)
    ]
    _admit_running(model, workloads, field)
    events, pending = _admit_pending(model, workloads, mappings)
    teams_out = {
        team: _team_outcome(team, queue, model, mappings, pending, events) for team, queue in sorted(by_team.items())
    }
    return {"teams": teams_out, "preemptions": events, "over_capacity": _over_capacity(model, mappings, capacity)}


def _cohort_roots(objects: list[dict[str, Any]]) -> dict[str, str]:
    """``{cohort: the root of its cohort tree}``: the model takes each tree as one pool."""
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
    return roots


def _workload(
    where: str,
    index: int,
    demand: Any,
    by_team: dict[str, _Queue],
    mappings: dict[str, dict[str, Any]],
    tier_values: dict[str, int],
) -> dict[str, Any]:
    """The checked workload of one demand."""
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
    return {
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


def _admit_running(model: _Model, workloads: list[dict[str, Any]], field: str) -> None:
    """Admit the running workloads, in the order given, on the first flavor they fit."""
    for workload in workloads:
        if not workload["running"]:
            continue
        queue = model.queues[workload["queue"]]
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


def _admit_pending(
    model: _Model, workloads: list[dict[str, Any]], mappings: dict[str, dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Admit the pending workloads, again after every admission, until none can be; the preemptions and what waits."""
    events: list[dict[str, Any]] = []
    pending = [w for w in workloads if not w["running"]]
    rounds = 0
    while pending and rounds < 20 * (len(workloads) + 1):
        rounds += 1
        pending.sort(key=lambda w: (-w["priority"], w["index"]))
        if not _admit_next(model, workloads, pending, events, mappings):
            break
    return events, pending


def _admit_next(
    model: _Model,
    workloads: list[dict[str, Any]],
    pending: list[dict[str, Any]],
    events: list[dict[str, Any]],
    mappings: dict[str, dict[str, Any]],
) -> bool:
    """Admit the first of ``pending`` that fits or can preempt; its victims are pending again. False: none can."""
    for workload in pending:
        fr, victims = _placement(model, workload)
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
                    "devices": amount_out(original["amount"], unit),
                    "by": f"{workload['team']}/{workload['name']}",
                    "reason": victim["reason"],
                }
            )
        pending.remove(workload)
        model.admit(workload, fr)
        return True
    return False


def _placement(model: _Model, workload: dict[str, Any]) -> tuple[tuple[str, str] | None, list[dict[str, Any]]]:
    """Where a pending workload is admitted, ``(flavor, resource)``, and the workloads it preempts there.

    The first flavor it fits without preemption, else the first where preemption
    makes room; ``(None, [])`` when there is none.
    """
    queue = model.queues[workload["queue"]]
    frs = [(f, workload["resource"]) for f in queue.flavors if (f, workload["resource"]) in queue.quota]
    fr = next((fr for fr in frs if model.fits(queue.name, fr, workload["amount"])), None)
    if fr is not None:
        return fr, []
    for candidate_fr in frs:
        found = model.targets(workload, candidate_fr)
        if found:
            return candidate_fr, found
    return None, []


def _team_outcome(
    team: str,
    queue: _Queue,
    model: _Model,
    mappings: dict[str, dict[str, Any]],
    pending: list[dict[str, Any]],
    events: list[dict[str, Any]],
) -> dict[str, Any]:
    """One team's row of :func:`what_if`: what it runs by nominal quota and by borrowing, what waits, what went."""
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
        row["by_nominal"][cls] = amount_out(nominal_part, unit)
        row["by_borrowing"][cls] = amount_out(borrowed, unit)
        row["pending"][cls] = amount_out(waiting, unit)
    row["admitted"] = [w["name"] for w in sorted(model.admitted, key=lambda w: w["admitted_at"]) if w["team"] == team]
    row["pending_workloads"] = [w["name"] for w in sorted(pending, key=lambda w: w["index"]) if w["team"] == team]
    return row


def _over_capacity(
    model: _Model, mappings: dict[str, dict[str, Any]], capacity: dict[str, Any] | None
) -> dict[str, dict[str, Any]]:
    """Classes (in devices) where more was admitted than the hardware has."""
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
                "capacity": amount_out(limit, unit),
                "admitted": amount_out(admitted, unit),
                "over": amount_out(max(Fraction(0), admitted - limit), unit),
            }
    return over
