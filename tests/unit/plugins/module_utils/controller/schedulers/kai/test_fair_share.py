# SPDX-License-Identifier: Apache-2.0
"""KAI's fair share: hand-worked divisions, a cross-check against an independent model, the what-if rows."""

from __future__ import annotations

import random

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import fair_share as fs
from ansible_collections.aligned.dra.tests.support.sites.kai_fair_share_reference import (
    reference_fair_shares,
    reference_unassigned,
)

U = -1


def row(name, quota, limit, weight, priority=100, parent=None, team=True):
    found = {"queue": name, "parent": parent, "quota": quota, "limit": limit, "over_quota_weight": weight}
    found["priority"] = priority
    return dict(found, team=name) if team else found


def shares(total, rows, demand):
    top = fs.build(rows, demand)
    left = fs.divide_tree(total, top)
    return {q.name: q.fair_share for q in fs._walk(top)}, left


# Each worked by hand from the rule (kai_fair_share's docstring); names sort in creation order.
HAND_WORKED = [
    pytest.param(
        # two levels: research 2 + 1 over quota, prod 3 + 2; in research the offers 0.5 and 1.5 floor to
        # 0 and 1 and the leftover GPU goes to the equal fraction first by name (a-r-a); in prod p-a's
        # limit 3 and p-b's demand 1 take 4 of 5: one GPU stays unassigned
        8,
        [
            row("a-research", 2, U, 1, team=False),
            row("a-r-a", 1, U, 1, parent="a-research"),
            row("a-r-b", 0, U, 3, parent="a-research"),
            row("b-prod", 3, U, 2, team=False),
            row("b-p-a", 2, 3, 1, parent="b-prod"),
            row("b-p-b", 0, U, 1, parent="b-prod"),
        ],
        {"a-r-a": 4, "a-r-b": 6, "b-p-a": 5, "b-p-b": 1},
        {"a-research": 3, "a-r-a": 2, "a-r-b": 1, "b-prod": 5, "b-p-a": 3, "b-p-b": 1},
        1,
        id="two-levels-limit-leaves-one-unassigned",
    ),
    pytest.param(
        # priority 200 floors 1.5 and 1.5 to 1 and 1; the freed GPU goes to priority 100 before any leftover
        7,
        [row("a", 2, U, 1, 200), row("b", 1, U, 1, 200), row("c", 1, U, 5, 100)],
        {"a": 5, "b": 5, "c": 10},
        {"a": 3, "b": 2, "c": 2},
        0,
        id="floored-gpus-go-to-the-lower-priority",
    ),
    pytest.param(
        8,
        [row("a", 2, U, 1, 200), row("b", 1, U, 1, 200), row("c", 1, U, 5, 100)],
        {"a": 5, "b": 5, "c": 10},
        {"a": 4, "b": 3, "c": 1},
        0,
        id="whole-offers-stay-at-the-higher-priority",
    ),
    pytest.param(
        # quota -1 deserves everything it asks; weight 0 never shares the rest; 1 GPU: offers 1/3 and 2/3,
        # both floored to 0, then the leftover goes to the largest fraction (z)
        8,
        [row("x", U, U, 1), row("y", 4, 6, 1), row("z", 0, U, 2), row("v", 0, U, 0)],
        {"x": 3, "y": 10, "z": 10, "v": 4},
        {"x": 3, "y": 4, "z": 1, "v": 0},
        0,
        id="special-values",
    ),
    pytest.param(
        # quotas above the total are not scaled down: 6 + 3 = 9 of 8, nothing else divided
        8,
        [row("x", 6, U, 1), row("y", 4, U, 1), row("z", 0, U, 1)],
        {"x": 6, "y": 3, "z": 5},
        {"x": 6, "y": 3, "z": 0},
        0,
        id="quotas-over-the-total",
    ),
    pytest.param(
        # 7 over quota, weights 1:4: offers 1.4 and 5.6 floor to 1 and 5; the last GPU to the larger fraction
        11,
        [row("a", 2, U, 1), row("b", 2, U, 4)],
        {"a": 10, "b": 10},
        {"a": 3, "b": 8},
        0,
        id="weights-one-to-four",
    ),
    pytest.param(
        # a queue that asks for nothing takes nothing; the priority-2 pair split 1 over quota: 0.5 and 0.5
        # floor to 0, the leftover pass gives it to the first by name
        5,
        [row("a", 2, U, 2, 2), row("b", 2, U, 2, 2), row("c", 1, U, 2, 1)],
        {"a": 5, "b": 5, "c": 0},
        {"a": 3, "b": 2, "c": 0},
        0,
        id="leftover-tie-broken-by-name",
    ),
    pytest.param(
        # a demand below its offer ends the round early and starts another with the rest: 6 over quota,
        # a takes 1 of its 3 and b, alone in round two, takes all the 5 left
        8,
        [row("a", 1, U, 1), row("b", 1, U, 1)],
        {"a": 2, "b": 9},
        {"a": 2, "b": 6},
        0,
        id="another-round-for-what-was-not-taken",
    ),
    pytest.param(
        # float64 as KAI: the weights 1/13 and 3/13, doubled and summed in name order, add up to
        # 2.0000000000000004, so the offers 1 and 3 come out a hair below and floor to 0 and 2; the GPUs
        # freed go to priority 100 (exact arithmetic would give a 1, b-e 3 each and z nothing)
        13,
        [*(row(n, 0, U, w, 200) for n, w in zip("abcde", (1, 3, 3, 3, 3), strict=True)), row("z", 0, U, 1, 100)],
        dict.fromkeys("abcdez", 10),
        {"a": 0, "b": 2, "c": 2, "d": 2, "e": 2, "z": 5},
        0,
        id="float64-offers-a-hair-below-whole",
    ),
]


@pytest.mark.parametrize(("total", "rows", "demand", "expected", "unassigned"), HAND_WORKED)
def test_hand_worked_divisions(total, rows, demand, expected, unassigned):
    got, left = shares(total, rows, demand)
    assert got == expected
    assert left == unassigned


def _random_tree(rng: random.Random) -> tuple[float, list[dict], dict[str, float]]:
    """A site's queue tree as kai.render gives it, with settings and demands across their ranges."""
    amounts = [U, 0, 0, 1, 2, 3, 4, 6, 0.5, 2.5]
    rows, demand = [], {}
    for p in range(rng.randint(1, 3)):
        parent = f"p{p}"
        rows.append(
            row(
                parent,
                rng.choice(amounts),
                rng.choice([U, U, 4, 10, 20]),
                rng.choice([0, 1, 2, 3]),
                rng.choice([100, 200]),
                team=False,
            )
        )
        for c in range(rng.randint(1, 4)):
            name = f"{parent}-t{c}"
            quota = rng.choice(amounts)
            limit = rng.choice([U, U, 0, 3, 8, 1.5]) if quota == U else rng.choice([U, quota, quota + 2, quota + 5])
            rows.append(
                row(
                    name, quota, limit, rng.choice([0, 1, 1, 2, 3, 0.5]), rng.choice([50, 100, 100, 200]), parent=parent
                )
            )
            demand[name] = rng.choice([0, 1, 2, 3, 5, 8, 13, 0.25, 1.5, 2.75])
    return float(rng.randint(0, 48)), rows, demand


def test_agrees_with_an_independent_model_on_generated_trees():
    rng = random.Random(20261126)
    for case in range(600):
        total, rows, demand = _random_tree(rng)
        reference = [
            {
                "name": r["queue"],
                "parent": r["parent"],
                "quota": r["quota"],
                "limit": r["limit"],
                "weight": r["over_quota_weight"],
                "priority": r["priority"],
                "demand": demand.get(r["queue"], 0),
            }
            for r in rows
        ]
        got, left = shares(total, rows, demand)
        assert got == reference_fair_shares(total, reference), (case, total, rows, demand)
        assert left == reference_unassigned(total, reference), (case, total, rows, demand)


def test_the_what_if_reports_shares_beyond_quota_and_the_reclaim_order():
    rows = [
        row("site", 6, U, 3, 200, team=False),
        row("train", 4, U, 2, 200, parent="site"),
        row("batch", 0, 4, 1, 100, parent="site"),
        row("idle", 2, U, 0, 100, parent="site"),
    ]
    demand = {"train": 8, "batch": 4, "idle": 0}
    result = fs.what_if(rows, demand, 10)
    share = result["fair_share"]
    # site: 6 + 4 over quota = 10; train 4 + 4 (priority 200 first); batch the 2 left
    assert share["site"] == {"gpu": 10, "quota": 6, "demand": 12, "beyond_quota": 4}
    assert share["train"] == {"gpu": 8, "quota": 4, "demand": 8, "beyond_quota": 4, "allocated": 8, "saturation": 1.0}
    assert share["batch"]["gpu"] == 2 and share["batch"]["saturation"] == 2.0
    assert share["idle"]["gpu"] == 0 and share["idle"]["saturation"] is None
    assert result["reclaim_order"] == ["batch"] and result["unassigned"] == 0
    assert result["allocated_from"] == "demand" and "name" in result["tie_break"]
    # with the GPUs in use now: a team holding GPUs with a fair share of 0 is reclaimed first
    now = fs.what_if(rows, demand, 10, {"train": 9, "batch": 1, "idle": 1})
    assert now["allocated_from"] == "utilization"
    assert now["reclaim_order"] == ["idle", "train"]
    unknown = fs.what_if(rows, demand, None)
    assert unknown["fair_share"] is None and unknown["why"] == "the site's GPUs are unknown"
