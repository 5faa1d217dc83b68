# SPDX-License-Identifier: Apache-2.0
"""The fair share KAI Scheduler v0.17.0 would give each queue of a site, for a GPU demand per team.

KAI's proportion plugin divides a resource among sibling queues, top level
first, then each queue's share among its children, down to the leaves (KAI
documents the idea in docs-fairness.md; this follows the rule of its
resource division at v0.17.0, for one resource, with no usage history):

1. **Deserved.** Each queue gets ``min(quota, requestable)``, where quota -1
   is everything being divided and ``requestable`` is the queue's demand capped
   by its limit (-1: no cap). A parent's demand is the sum of its children's,
   their limits not applied. When the quotas take everything (or more: KAI
   does not scale them down), nothing else is divided.
2. **Over quota**, by priority, highest first, in rounds: each queue that
   still wants GPUs is offered the round's amount x its weight / the weights
   of those that still want some. It takes what it still wants if that fits
   the offer, otherwise the whole GPUs of the offer (the fraction left is
   noted). Another round runs while someone took less than offered and GPUs
   remain. A queue of weight 0 gets nothing here.
3. **Leftovers**: GPUs still left go one at a time, priorities highest first,
   to the queues with the largest noted fractions, once each.

Whatever a level leaves unassigned stays unassigned (it goes neither up nor
to another parent). The arithmetic is IEEE double as KAI's (float64), in the
same order of operations, so an offer that is whole in exact arithmetic but
a hair below in float64 is floored as KAI floors it. Two choices where KAI's
order is not defined by the settings: queues with equal leftover fractions,
which KAI orders by creation time and then name, are ordered by name here;
and KAI sums the weights of a round in Go map order, which is random: where
that changes the last bit of the sum and an offer is whole, KAI itself may
divide differently from one scheduling cycle to the next. Here the order is
by name (docs/teams.md shows such a case).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

UNLIMITED = -1.0
K_VALUE = 1.0  # KAI's proportion plugin default kValue; without usage history it cancels out


@dataclass
class Queue:
    """One queue's GPU settings and, once divided, its fair share."""

    name: str
    quota: float
    limit: float
    weight: float
    priority: int
    request: float = 0.0
    children: list[Queue] = field(default_factory=list)
    fair_share: float = 0.0

    def requestable(self) -> float:
        return self.request if self.limit == UNLIMITED else min(self.limit, self.request)

    def still_wants(self) -> float:
        requestable = self.requestable()
        return 0.0 if requestable < self.fair_share else requestable - self.fair_share

    def satisfied(self) -> bool:
        return self.request <= self.fair_share or (self.limit != UNLIMITED and self.limit <= self.fair_share)


def _deserved(total: float, queues: list[Queue]) -> float:
    remaining = total
    for queue in queues:
        deserved = total if queue.quota == UNLIMITED else queue.quota
        amount = min(deserved, queue.requestable())
        queue.fair_share += amount
        remaining -= amount
    return remaining


def _share_weights(queues: list[Queue]) -> tuple[dict[str, float], float]:
    """The weight of each unsatisfied queue as KAI computes it (no usage: twice the normalised weight)."""
    total = sum(q.weight for q in queues if q.still_wants() > 0)
    if total == 0:
        return {}, 0.0
    weights, weight_sum = {}, 0.0
    for queue in queues:
        if queue.satisfied():
            continue
        normalised = queue.weight / total
        weights[queue.name] = max(0.0, normalised + K_VALUE * (normalised - 0.0))
        weight_sum += weights[queue.name]
    return weights, weight_sum


def _rounds(remaining: float, group: list[Queue], fractions: dict[str, tuple[float, Queue]]) -> float:
    """Over-quota rounds of one priority; notes each floored queue's fraction in ``fractions``."""
    while True:
        another = False
        offered = remaining
        weights, weight_sum = _share_weights(group)
        if weight_sum == 0:
            break
        for queue in group:
            if remaining == 0:
                break
            if queue.satisfied() or queue.weight == 0:
                continue
            wanted = queue.still_wants()
            offer = offered * (weights[queue.name] / weight_sum)
            if wanted <= offer:
                given = wanted
                fractions.pop(queue.name, None)
            else:
                given = math.floor(offer) if math.floor(offer) > 0 else 0.0
                if offer - given > 0:
                    fractions[queue.name] = (offer - given, queue)
            if given == 0:
                continue
            queue.fair_share += given
            remaining -= given
            another = another or wanted < offer
        if not another or remaining == 0:
            break
    return remaining


def divide(total: float, queues: list[Queue]) -> float:
    """Divide ``total`` GPUs among sibling ``queues`` (their ``fair_share`` grows); returns what is left."""
    queues = sorted(queues, key=lambda q: q.name)
    remaining = _deserved(total, queues)
    if remaining <= 0:
        return 0.0
    priorities = sorted({q.priority for q in queues}, reverse=True)
    fractions: dict[int, dict[str, tuple[float, Queue]]] = {}
    for priority in priorities:
        fractions[priority] = {}
        remaining = _rounds(remaining, [q for q in queues if q.priority == priority], fractions[priority])
    for priority in priorities:
        if remaining <= 0:
            break
        for _fraction, queue in sorted(fractions[priority].values(), key=lambda e: (-e[0], e[1].name)):
            if remaining == 0:
                break
            given = min(1.0, remaining)
            queue.fair_share += given
            remaining -= given
    return remaining


def _request(queue: Queue) -> float:
    if queue.children:
        queue.request = float(sum(_request(child) for child in sorted(queue.children, key=lambda q: q.name)))
    return queue.request


def divide_tree(total: float, top: list[Queue]) -> float:
    """Divide ``total`` among the top-level queues, then each share among its children; what stays unassigned."""
    for queue in top:
        _request(queue)
    unassigned = divide(total, top)
    for queue in top:
        if queue.children:
            unassigned += divide_tree(queue.fair_share, queue.children)
    return unassigned


def build(rows: list[dict[str, Any]], demand: dict[str, float]) -> list[Queue]:
    """The queue tree of ``rows`` (``kai.render``'s ``queues``), leaves asking ``demand[team]`` GPUs."""
    made = {
        row["queue"]: Queue(
            name=row["queue"],
            quota=float(row["quota"]),
            limit=float(row["limit"]),
            weight=float(row["over_quota_weight"]),
            priority=int(row["priority"]),
            request=float(demand.get(row.get("team") or "", 0)),
        )
        for row in rows
    }
    top = []
    for row in rows:
        parent = row.get("parent")
        (made[parent].children if parent in made else top).append(made[row["queue"]])
    return top


def _walk(queues: list[Queue]) -> list[Queue]:
    out = []
    for queue in queues:
        out += [queue, *_walk(queue.children)]
    return out


def _saturation(allocated: float, fair_share: float) -> float | None:
    """KAI's reclaim order key, allocated / fair share; None when the fair share is 0 (infinite if allocated)."""
    return None if fair_share == 0 else round(allocated / fair_share, 4)


def what_if(
    rows: list[dict[str, Any]],
    demand: dict[str, float],
    gpus: int | None,
    allocated: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The division of the site's ``gpus`` for a ``demand`` per team, as ``teams.json`` ``kai.what_if``.

    ``fair_share``: per queue (teams and parents) ``gpu`` (its fair share),
    ``quota``, ``demand``, ``beyond_quota`` (fair share above the quota) and,
    for teams, ``allocated`` (in use now when ``allocated`` is given, else its
    demand, as if it ran all of it) and ``saturation`` (allocated / fair share,
    None when the fair share is 0). ``reclaim_order``: the teams above their
    fair share, those a reclaim takes from first (KAI's saturation ratio,
    highest first; a team with fair share 0 and GPUs in use first of all).
    ``notes``: the fair shares adding up to more than ``gpus`` (quotas above
    the total, which KAI does not scale down). ``gpus`` None (no plan):
    nothing divided, ``fair_share`` None.
    """
    base: dict[str, Any] = {
        "gpus": gpus,
        "demand": dict(sorted(demand.items())),
        "allocated_from": "utilization" if allocated is not None else "demand",
        "tie_break": "name (KAI orders equal leftover fractions by queue creation time, then name)",
    }
    if gpus is None:
        return dict(
            base, fair_share=None, unassigned=None, reclaim_order=None, notes=[], why="the site's GPUs are unknown"
        )
    top = build(rows, demand)
    unassigned = divide_tree(float(gpus), top)
    teams = {row["queue"]: row["team"] for row in rows if row.get("team")}
    shares: dict[str, dict[str, Any]] = {}
    over = []
    for queue in _walk(top):
        entry: dict[str, Any] = {
            "gpu": _number(queue.fair_share),
            "quota": _number(queue.quota),
            "demand": _number(queue.request),
            "beyond_quota": _number(max(0.0, queue.fair_share - queue.quota)) if queue.quota != UNLIMITED else 0,
        }
        if queue.name in teams:
            used = float((allocated if allocated is not None else demand).get(teams[queue.name], 0))
            entry["allocated"] = _number(used)
            entry["saturation"] = _saturation(used, queue.fair_share)
            if used > queue.fair_share:
                over.append((math.inf if entry["saturation"] is None else entry["saturation"], queue.name))
        shares[queue.name] = entry
    order = [name for _ratio, name in sorted(over, key=lambda item: (-item[0], item[1]))]
    promised = sum(queue.fair_share for queue in top)
    notes = []
    if promised > gpus:
        notes.append(
            f"the fair shares add up to {_number(promised)} GPUs of the {gpus} KAI counts: the quotas take more "
            "than there is, and KAI does not scale them down"
        )
    return dict(base, fair_share=shares, unassigned=_number(unassigned), reclaim_order=order, notes=notes)


def _number(value: float) -> float | int:
    """Whole numbers as ints (GPUs), others rounded for reading."""
    return int(value) if float(value).is_integer() else round(value, 4)
