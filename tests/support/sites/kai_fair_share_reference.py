# SPDX-License-Identifier: Apache-2.0
"""TEST REFERENCE: an independent model of KAI Scheduler v0.17.0's GPU fair-share division. Never shipped.

Models the proportion plugin's resource_division for one resource (GPU), no usage history and kValue = 1.0.
tests/unit/plugins/module_utils/controller/schedulers/kai/test_fair_share.py cross-checks the product's
implementation (plugins/module_utils/controller/schedulers/kai/fair_share.py) against it on generated queue trees;
it was written apart from it, from the rule alone. Everything is IEEE double with no epsilon, as in KAI.

Style: queues are plain dicts. Each sibling level is handled by one pure function, `divide_level`, which returns
new dicts and mutates none of its inputs. Wherever KAI walks a Go map (random order), this model walks names in
sorted order. Leftover ties break by name because creation time is not modelled.
"""

from __future__ import annotations

import math
from typing import Any

UNLIMITED = -1.0
K_VALUE = 1.0

Queue = dict[str, Any]


def requestable(q: Queue) -> float:
    """The request capped by the limit, or the raw request if the limit is -1 (GetRequestableShare)."""
    return q["request"] if q["limit"] == UNLIMITED else min(q["limit"], q["request"])


def still_wanted(q: Queue, share: float) -> float:
    """Requestable minus fair share, or 0 if the share already exceeds requestable (getRemainingRequested)."""
    cap = requestable(q)
    return cap - share if cap >= share else 0.0


def is_satisfied(q: Queue, share: float) -> bool:
    """Request reached, or the limit reached (isQueueSatisfied). Uses the raw request, not requestable."""
    return q["request"] <= share or (q["limit"] != UNLIMITED and q["limit"] <= share)


def round_weights(group: list[Queue], share: dict[str, float]) -> dict[str, float]:
    """Effective weights of the group's unsatisfied queues for one round (calcShareWeights); {} means stop."""
    total_weight = 0.0
    for q in group:
        if still_wanted(q, share[q["name"]]) > 0:
            total_weight += q["weight"]
    if total_weight == 0:
        return {}
    weights: dict[str, float] = {}
    for q in group:
        if not is_satisfied(q, share[q["name"]]):
            norm = q["weight"] / total_weight
            weights[q["name"]] = max(0.0, norm + K_VALUE * (norm - 0.0))
    return weights


def play_round(
    remaining: float, group: list[Queue], share: dict[str, float], leftover: dict[str, float]
) -> tuple[float, bool]:
    """One round of divideUpToFairShare; updates `share` and `leftover` in place.

    Returns (remaining, run_again). run_again is False when the group must stop.
    """
    weights = round_weights(group, share)
    weight_sum = 0.0
    for name in weights:
        weight_sum += weights[name]
    if weight_sum == 0:
        return remaining, False
    pool = remaining
    run_again = False
    for q in group:
        name = q["name"]
        if remaining == 0:
            break
        if is_satisfied(q, share[name]):
            continue
        wanted = still_wanted(q, share[name])
        if q["weight"] == 0:
            continue
        offer = pool * (weights[name] / weight_sum)
        if wanted <= offer:
            grant = wanted
            leftover.pop(name, None)
        else:
            whole = math.floor(offer)
            grant = float(whole) if whole > 0 else 0.0
            if offer - grant > 0:
                leftover[name] = offer - grant
        if grant == 0:
            continue
        share[name] += grant
        remaining -= grant
        run_again = run_again or wanted < offer
    return remaining, run_again and remaining != 0


def hand_out_leftovers(remaining: float, leftover: dict[str, float], share: dict[str, float]) -> float:
    """One unit (or what is left) per floored queue, biggest remainder first, then by name (divideRemainingResource)."""
    for name in sorted(leftover, key=lambda n: (-leftover[n], n)):
        if remaining == 0:
            break
        grant = min(1.0, remaining)
        share[name] += grant
        remaining -= grant
    return remaining


def divide_level(total: float, siblings: list[Queue]) -> tuple[dict[str, float], float]:
    """Divide `total` among one set of siblings (setResourceShare). Returns ({name: fair share}, unassigned)."""
    group_order = sorted(siblings, key=lambda q: q["name"])
    share = {q["name"]: 0.0 for q in group_order}
    remaining = total
    for q in group_order:
        deserved = total if q["quota"] == UNLIMITED else q["quota"]
        grant = min(deserved, requestable(q))
        share[q["name"]] += grant
        remaining -= grant
    if not remaining > 0:
        return share, 0.0
    priorities = sorted({q["priority"] for q in group_order}, reverse=True)
    leftovers: dict[int, dict[str, float]] = {}
    for priority in priorities:
        group = [q for q in group_order if q["priority"] == priority]
        leftovers[priority] = {}
        again = True
        while again:
            remaining, again = play_round(remaining, group, share, leftovers[priority])
    for priority in priorities:
        if remaining <= 0:
            break
        remaining = hand_out_leftovers(remaining, leftovers[priority], share)
    return share, remaining


def _children_of(queues: list[Queue]) -> dict[str | None, list[Queue]]:
    tree: dict[str | None, list[Queue]] = {}
    for q in queues:
        tree.setdefault(q.get("parent"), []).append(q)
    for kids in tree.values():
        kids.sort(key=lambda q: q["name"])
    return tree


def _with_requests(name: str | None, tree: dict[str | None, list[Queue]], out: dict[str, Queue]) -> float:
    """Copy each queue under `name` into `out` with its aggregated request; returns their request sum."""
    level_sum = 0.0
    for q in tree.get(name, []):
        kids = tree.get(q["name"])
        request = _with_requests(q["name"], tree, out) if kids else float(q.get("demand", 0.0))
        numbers = {key: float(q[key]) for key in ("quota", "limit", "weight")}
        out[q["name"]] = {"name": q["name"], "priority": int(q["priority"]), "request": request, **numbers}
        level_sum += request
    return level_sum


def _divide_tree(total: float, queues: list[Queue]) -> tuple[dict[str, float], float]:
    """Top level first, then each queue's fair share is divided among its children. Orphans are dropped."""
    tree = _children_of(queues)
    model: dict[str, Queue] = {}
    _with_requests(None, tree, model)
    shares: dict[str, float] = {}
    unassigned = 0.0
    pending: list[tuple[str | None, float]] = [(None, total)]
    while pending:
        parent, amount = pending.pop(0)
        siblings = [model[q["name"]] for q in tree.get(parent, [])]
        if not siblings:
            continue
        level_shares, left = divide_level(amount, siblings)
        shares.update(level_shares)
        unassigned += left
        pending.extend((name, level_shares[name]) for name in sorted(level_shares))
    return shares, unassigned


def reference_fair_shares(total: float, queues: list[dict]) -> dict[str, float]:
    """Fair share of every queue reachable from the top level (parent None), parents included."""
    return _divide_tree(float(total), queues)[0]


def reference_unassigned(total: float, queues: list[dict]) -> float:
    """Sum over all levels of what each division left unassigned (and KAI drops)."""
    return _divide_tree(float(total), queues)[1]
