# SPDX-License-Identifier: Apache-2.0
"""Job planner, choice: which domains and nodes take a job, on capacities written by hand
(``{domain: {host: workers it holds}}``)."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.gangs import choice


def test_one_domain_fewest_nodes_then_best_fit_then_natural_names():
    # r10 does it on one node, r2 and r3 on two: r10, whatever the names
    caps = {"r2": {"a": 1, "b": 1}, "r3": {"c": 1, "d": 1}, "r10": {"e": 2}}
    key, found = choice.best(caps, 2, False, None)
    assert found["domains"] == ["r10"] and found["picked"] == [("e", 2)] and key[:3] == (1, 1, 0)
    # equal nodes: the least left over (r3 holds 2, r2 holds 3)
    caps = {"r2": {"a": 2, "b": 1}, "r3": {"c": 1, "d": 1}}
    assert choice.best(caps, 2, False, None)[1]["domains"] == ["r2"]  # r2's first node holds both
    caps = {"r2": {"a": 1, "b": 1, "x": 1}, "r3": {"c": 1, "d": 1}}
    assert choice.best(caps, 2, False, None)[1]["domains"] == ["r3"]
    # a tie to the names: r2 before r10 (plain strings would put r10 first); hosts the same way
    caps = {"r10": {"n1": 1, "n2": 1}, "r2": {"n10": 1, "n9": 1}}
    _key, found = choice.best(caps, 2, False, None)
    assert found["domains"] == ["r2"] and found["picked"] == [("n9", 1), ("n10", 1)]


def test_nothing_holds_the_job():
    caps = {"r1": {"a": 2}, "r2": {"b": 2}}
    assert choice.best(caps, 3, False, None) is None  # required: no domain holds 3
    assert choice.best(caps, 5, True, None) is None  # preferred: not even the site
    assert choice.best({}, 1, True, None) is None


def test_one_domain_that_holds_the_job_beats_fewer_nodes_over_several():
    caps = {"big": {"a": 1, "b": 1, "c": 1, "d": 1}, "x": {"e": 3}, "y": {"f": 3}}
    key, found = choice.best(caps, 4, True, None)
    assert found["domains"] == ["big"] and key[:2] == (1, 4)


def test_a_preferred_job_over_several_domains_takes_the_fewest_nodes_of_every_set():
    # A and C together on four nodes; A and B on three (the smallest completing domain is not the best)
    caps = {"A": {"a1": 3, "a2": 3}, "B": {"b1": 3}, "C": {"c1": 1, "c2": 1}}
    key, found = choice.best(caps, 8, True, None)
    assert found["domains"] == ["A", "B"] and found["picked"] == [("a1", 3), ("a2", 3), ("b1", 2)]
    assert key[:3] == (2, 3, 1) and found["exhaustive"] is True
    # the biggest domain is in no best set: B and C on two nodes, A with either on four
    caps = {"A": {"a1": 1, "a2": 1, "a3": 1, "a4": 1}, "B": {"b1": 3}, "C": {"c1": 3}}
    key, found = choice.best(caps, 6, True, (0,))
    assert found["domains"] == ["B", "C"] and key == (2, 2, 0, [choice.name_key("B"), choice.name_key("C")], (0,))


def test_past_the_limit_only_the_biggest_domains_with_one_more_are_compared(monkeypatch):
    caps = {"A": {"a1": 1, "a2": 1, "a3": 1, "a4": 1}, "B": {"b1": 3}, "C": {"c1": 3}}
    # B and C are the same but for their names: two sets can be best (A with B, B with C); one is compared
    monkeypatch.setattr(choice, "MAX_DOMAIN_SETS", 1)
    key, found = choice.best(caps, 6, True, None)
    # A with B or C, four nodes either way, one left over either way: by name
    assert found["domains"] == ["A", "B"] and key[:3] == (2, 4, 1) and found["exhaustive"] is False
    assert found["picked"] == [("b1", 3), ("a1", 1), ("a2", 1), ("a3", 1)]
    assert found["fewest_nodes"] is False  # B and C would do on two
    monkeypatch.setattr(choice, "MAX_DOMAIN_SETS", 2)
    _key, found = choice.best(caps, 6, True, None)
    assert found["domains"] == ["B", "C"] and found["exhaustive"] is True and found["fewest_nodes"] is True
    # one worker per node: every set needs as many nodes, so the count is proven past the limit too
    monkeypatch.setattr(choice, "MAX_DOMAIN_SETS", 0)
    caps = {"A": {"a1": 1, "a2": 1, "a3": 1}, "B": {"b1": 1, "b2": 1}, "C": {"c1": 1, "c2": 1}}
    key, found = choice.best(caps, 4, True, None)
    assert found["domains"] == ["A", "B"] and key[:3] == (2, 4, 1)
    assert found["exhaustive"] is False and found["fewest_nodes"] is True


def test_domains_without_a_worker_are_never_in_a_set():
    caps = {"A": {"a1": 2}, "B": {"b1": 2}, "empty": {"e1": 0, "e2": 0}}
    _key, found = choice.best(caps, 4, True, None)
    assert found["domains"] == ["A", "B"] and ("e1", 0) not in found["picked"]
    assert choice.ranked({"r10": 2, "r2": 2, "r3": 5}) == ["r3", "r2", "r10"]


def test_domains_alike_but_for_their_names_are_one_choice_so_a_big_site_is_compared_whole():
    # 100 racks of ten one-worker nodes (r20 one node short): C(100, 7) sets, two profiles
    caps = {f"r{i}": {f"n{i}-{j}": 1 for j in range(10)} for i in range(1, 101)}
    del caps["r20"]["n20-9"]
    key, found = choice.best(caps, 64, True, None)
    assert found["exhaustive"] is True and found["fewest_nodes"] is True
    # six left over on any seven full racks; five with r20: the first six by name, and r20
    assert key[:3] == (7, 64, 5) and found["domains"] == ["r1", "r2", "r3", "r4", "r5", "r6", "r20"]
    assert found["picked"][:2] == [("n1-0", 1), ("n1-1", 1)] and len(found["picked"]) == 64
