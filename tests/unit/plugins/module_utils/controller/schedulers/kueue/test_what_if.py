# SPDX-License-Identifier: Apache-2.0
"""The what-if model of Kueue's admission and preemption in a cohort."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import api as kueue_api
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import objects as kueue
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import what_if as kueue_what_if
from ansible_collections.aligned.dra.tests.support.sites.kueue_teams import (
    CAPACITY_TEAMS,
    GPU,
    NIC,
    claim_objects,
    conf_for,
    queue,
    render,
)


def two_teams(b_lend: int | None = None, b_tier: str = "production") -> dict:
    b = {"name": "b", "tier": b_tier, "quotas": {"gpu": 4}}
    if b_lend is not None:
        b["lending_limit"] = {"gpu": b_lend}
    return render([{"name": "a", "tier": "production", "quotas": {"gpu": 4}}, b])


def w(team: str, name: str, devices: int, running: bool = False, **extra) -> dict:
    return dict({"team": team, "name": name, "class": GPU, "devices": devices, "running": running}, **extra)


def test_what_if_borrows_idle_quota():
    # 8 GPUs: a nominal 4, b nominal 4, b idle. a asks for 3 x 2 = 6: 4 by its nominal quota + 2 borrowed from b
    out = kueue_what_if.what_if(two_teams(), {GPU: 8}, [w("a", "a1", 2), w("a", "a2", 2), w("a", "a3", 2)])
    a = out["teams"]["a"]
    assert (a["by_nominal"][GPU], a["by_borrowing"][GPU], a["pending"][GPU]) == (4, 2, 0)
    assert a["admitted"] == ["a1", "a2", "a3"] and out["preemptions"] == []
    # 6 admitted of 8 GPUs: nothing over the hardware
    assert out["over_capacity"] == {}
    # with 5 GPUs on the site the quotas (4 + 4) promise more than there is: 6 admitted, 1 over
    out = kueue_what_if.what_if(two_teams(), {GPU: 5}, [w("a", "a1", 2), w("a", "a2", 2), w("a", "a3", 2)])
    assert out["over_capacity"] == {GPU: {"capacity": 5, "admitted": 6, "over": 1}}


def test_what_if_refuses_a_running_workload_no_queue_could_have_admitted():
    # a: nominal 4, b lends 4: at most 8 can run for a; a running workload of 9 is not a state Kueue has
    with pytest.raises(kueue_api.KueueError) as err:
        kueue_what_if.what_if(two_teams(), {GPU: 8}, [w("a", "big", 9, running=True)])
    assert "what_if[0]: running workload big of team a does not fit" in str(err.value)


def test_what_if_over_capacity_leaves_out_classes_counted_in_memory():
    rendered = render(CAPACITY_TEAMS[:1])
    cls = next(iter(rendered["mappings"]))
    assert rendered["mappings"][cls]["unit"] == kueue_api.UNIT_CAPACITY
    out = kueue_what_if.what_if(rendered, {cls: 1}, [{"team": "vision", "name": "m", "class": cls, "devices": "20Gi"}])
    assert out["over_capacity"] == {}


def test_what_if_reclaims_lent_quota():
    # a runs 6 (4 nominal + 2 borrowed); b now asks for 4 = its nominal quota. Cohort: 6 + 4 = 10 > 8, so b
    # reclaims (reclaimWithinCohort Any): the candidates are a's workloads (a borrows), the most recently
    # admitted first: a3 (2 GPUs) goes, a is back at 4, 4 + 4 = 8 fits.
    demands = [w("a", "a1", 2, True), w("a", "a2", 2, True), w("a", "a3", 2, True), w("b", "b1", 4)]
    out = kueue_what_if.what_if(two_teams(), {GPU: 8}, demands)
    assert out["preemptions"] == [
        {"name": "a3", "team": "a", "class": GPU, "devices": 2, "by": "b/b1", "reason": "reclaim within cohort"}
    ]
    assert out["teams"]["a"]["by_nominal"][GPU] == 4 and out["teams"]["a"]["by_borrowing"][GPU] == 0
    assert out["teams"]["a"]["pending_workloads"] == ["a3"] and out["teams"]["a"]["pending"][GPU] == 2
    assert out["teams"]["b"]["by_nominal"][GPU] == 4 and out["teams"]["b"]["admitted"] == ["b1"]


def test_what_if_lending_limit_keeps_quota_back():
    # b lends at most 2 of its 4: the cohort pool is a's 4 + b's 2 = 6, so a gets 4 + 2 and a third
    # workload of 2 waits, even though b's other 2 GPUs are idle
    out = kueue_what_if.what_if(
        two_teams(b_lend=2), {GPU: 8}, [w("a", "a1", 2), w("a", "a2", 2), w("a", "a3", 2), w("a", "a4", 2)]
    )
    a = out["teams"]["a"]
    assert (a["by_nominal"][GPU], a["by_borrowing"][GPU]) == (4, 2)
    assert a["pending_workloads"] == ["a4"]
    # b can still use the 2 it keeps back without preempting anyone: its reserved part is outside the pool
    out = kueue_what_if.what_if(
        two_teams(b_lend=2),
        {GPU: 8},
        [w("a", "a1", 2, True), w("a", "a2", 2, True), w("a", "a3", 2, True), w("b", "b1", 2)],
    )
    assert out["preemptions"] == [] and out["teams"]["b"]["by_nominal"][GPU] == 2


def test_what_if_opportunistic_team_borrows_only_and_is_reclaimed():
    # c (opportunistic, quota 3) has no nominal quota: it borrows a's idle GPUs, at most 3
    result = render(
        [
            {"name": "a", "tier": "production", "quotas": {"gpu": 4}},
            {"name": "c", "tier": "opportunistic", "quotas": {"gpu": 3}},
        ]
    )
    out = kueue_what_if.what_if(result, None, [w("c", "c1", 2), w("c", "c2", 2)])
    c = out["teams"]["c"]
    # c1: 2 borrowed; c2 would make 4 > borrowingLimit 3: pending
    assert (c["by_nominal"][GPU], c["by_borrowing"][GPU], c["pending_workloads"]) == (0, 2, ["c2"])
    # a asks for its 4: 2 + 4 = 6 > 4 in the cohort; c borrows, a reclaims c1
    out = kueue_what_if.what_if(result, None, [w("c", "c1", 2, True), w("a", "a1", 4)])
    assert [(e["name"], e["reason"]) for e in out["preemptions"]] == [("c1", "reclaim within cohort")]
    assert out["teams"]["c"]["by_borrowing"][GPU] == 0 and out["teams"]["a"]["by_nominal"][GPU] == 4


def test_what_if_priority_within_the_cluster_queue():
    # a alone (nominal 4, no cohort members to borrow from): an opportunistic-tier workload of a holds 4;
    # a production workload of a asks for 2: withinClusterQueue LowerPriority preempts the lower one
    result = render([{"name": "a", "tier": "production", "quotas": {"gpu": 4}}])
    demands = [w("a", "low", 4, True, tier="opportunistic"), w("a", "high", 2)]
    out = kueue_what_if.what_if(result, None, demands)
    assert out["preemptions"] == [
        {"name": "low", "team": "a", "class": GPU, "devices": 4, "by": "a/high", "reason": "within cluster queue"}
    ]
    assert out["teams"]["a"]["admitted"] == ["high"]
    # pending workloads are admitted in priority order: with nothing running, high goes first, then low
    # does not fit (2 + 4 > 4) and waits
    out = kueue_what_if.what_if(result, None, [w("a", "low", 4, tier="opportunistic"), w("a", "high", 2)])
    assert out["teams"]["a"]["admitted"] == ["high"] and out["teams"]["a"]["pending_workloads"] == ["low"]


def borrow_cohort(threshold: int | None = None) -> dict:
    """p (production, nominal 2), r (research, nominal 4), o (opportunistic, quota 4) share 6 GPUs."""
    result = render(
        [
            {"name": "p", "tier": "production", "quotas": {"gpu": 2}},
            {"name": "r", "tier": "research", "quotas": {"gpu": 4}},
            {"name": "o", "tier": "opportunistic", "quotas": {"gpu": 4}},
        ]
    )
    if threshold is not None:
        queue(result, "p")["spec"]["preemption"]["borrowWithinCohort"]["maxPriorityThreshold"] = threshold
    return result


def test_what_if_borrow_within_cohort_and_its_threshold():
    # o borrows 4 (r idle). p asks for 4: above its nominal 2, so it must borrow; the pool is 2 + 4 = 6,
    # 4 (o) + 4 (p) = 8 > 6. borrowWithinCohort LowerPriority (threshold 10000) lets p preempt o's
    # borrowers of priority 100: o2 (the most recent) goes, 2 + 4 = 6 fits.
    demands = [w("o", "o1", 2, True), w("o", "o2", 2, True), w("p", "p1", 4)]
    out = kueue_what_if.what_if(borrow_cohort(), None, demands)
    assert out["preemptions"] == [
        {"name": "o2", "team": "o", "class": GPU, "devices": 2, "by": "p/p1", "reason": "borrow within cohort"}
    ]
    assert (out["teams"]["p"]["by_nominal"][GPU], out["teams"]["p"]["by_borrowing"][GPU]) == (2, 2)
    # with the threshold below o's priority (50 < 100) no borrower may be preempted: p1 waits
    out = kueue_what_if.what_if(borrow_cohort(threshold=50), None, demands)
    assert out["preemptions"] == [] and out["teams"]["p"]["pending_workloads"] == ["p1"]


def test_what_if_reclaim_needs_the_workload_within_nominal():
    # r (research, nominal 4) runs 6: 4 + 2 borrowed from p's idle 2. p asks for 2 = its nominal quota:
    # reclaim (Any) takes r's most recent workload; the preemption set is minimised to one 2-GPU workload
    demands = [w("r", "r1", 2, True), w("r", "r2", 2, True), w("r", "r3", 2, True), w("p", "p1", 2)]
    out = kueue_what_if.what_if(borrow_cohort(), None, demands)
    assert [(e["name"], e["reason"]) for e in out["preemptions"]] == [("r3", "reclaim within cohort")]
    assert out["teams"]["r"]["by_nominal"][GPU] == 4 and out["teams"]["r"]["by_borrowing"][GPU] == 0


def test_what_if_from_settings_and_bad_demands():
    conf = conf_for([{"name": "a", "tier": "production", "quotas": {"gpu": 4}}])
    out = kueue.what_if_from_settings(conf, {GPU: 2}, [w("a", "a1", 3)])
    # admitted by quota (3 <= 4), over the hardware (3 > 2): its pods would wait for devices
    assert out["teams"]["a"]["admitted"] == ["a1"] and out["over_capacity"][GPU] == {
        "capacity": 2,
        "admitted": 3,
        "over": 1,
    }
    result = render([{"name": "a", "tier": "production", "quotas": {"gpu": 4}}])
    with pytest.raises(kueue_api.KueueError, match=r"what_if\[0\].team 'zz' is not a team"):
        kueue_what_if.what_if(result, None, [w("zz", "x", 1)])
    with pytest.raises(kueue_api.KueueError, match=r"what_if\[0\].class 'aligned-nic' has no Kueue quota"):
        kueue_what_if.what_if(result, None, [dict(w("a", "x", 1), **{"class": NIC})])
    with pytest.raises(kueue_api.KueueError, match=r"what_if\[0\].tier 'gold'"):
        kueue_what_if.what_if(result, None, [w("a", "x", 1, tier="gold")])
    with pytest.raises(kueue_api.KueueError, match=r"what_if\[0\].devices must be an integer"):
        kueue_what_if.what_if(result, None, [w("a", "x", "2Gi")])


def test_render_runs_the_sites_what_if():
    conf = conf_for(
        [{"name": "a", "tier": "production", "quotas": {"gpu": 4}}], kueue_conf={"what_if": [w("a", "a1", 6)]}
    )
    result = kueue.render(conf, "s", claim_objects(), plan={"classes": {GPU: {"devices": 8}}})
    # alone in the cohort, a cannot borrow: 6 > 4 waits
    assert result["what_if"]["teams"]["a"]["pending_workloads"] == ["a1"]
