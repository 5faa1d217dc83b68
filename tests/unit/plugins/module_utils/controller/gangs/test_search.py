# SPDX-License-Identifier: Apache-2.0
"""The job planner on small sites worked out by hand.

Nodes from ``tests/support/sites/plan_inputs.py``: pair i of ``aligned_node`` is GPU ``0000:<i+1>1:00.0`` and NIC
``0000:<i+1>2:00.0`` on root ``pci0000:<i+1>0``; NIC i's interface is ``nic<i>``, so ``NIC_NAME_RULE``
puts it on rail i. Templates are the claims role's (``gpu-nic-pair-1``: a GPU and a NIC on one root;
``gpu-nic-rail-<r>``: a GPU and a NIC of rail r, pinned; ``gpu-only``: one GPU).
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.gangs import choice
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import place as jobs
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import spec as jobs_spec
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.consumption import PlanError
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    NIC_NAME_RULE,
    aligned_node,
    rail_node,
    rail_objects,
    rail_planner_nodes,
    site_placement,
    split_objects,
    template,
)


def gpu(slot: int) -> str:
    return f"gpu-0000-{slot + 1}1-00-0"


def nic(slot: int) -> str:
    return f"nic-0000-{slot + 1}2-00-0"


def place(topologies, rules, racks, job_list, held=None, objects=None, **kwargs):
    """jobs.json of the site; ``racks``: host -> rack (hosts left out have no rack); rails from ``rules``."""
    nodes, _problems = rail_planner_nodes(topologies, rules)
    site_rules = rules or {"x": dict(NIC_NAME_RULE, count=2)}
    classes, templates = split_objects(objects if objects is not None else rail_objects(site_rules))
    placement = site_placement(["rack"], {host: {"rack": rack} for host, rack in racks.items()})
    return jobs.place_jobs("s", job_list, nodes, classes, templates, placement, held=held, **kwargs)


def job(name, workers, template, level="rack", mode="required"):
    found = {"name": name, "workers": workers, "template": template, "namespace": "ml"}
    if mode is not None:
        found["placement"] = {"level": level, "mode": mode}
    return found


def by_name(result):
    return {entry["name"]: entry for entry in result["jobs"]}


def placed(entry):
    return [(w["index"], w["node"]) for w in entry["workers"]]


TWO_RACKS = {"a1": aligned_node(2), "a2": aligned_node(2), "b1": aligned_node(2), "b2": aligned_node(2)}
TWO_RACK_RULES = {host: dict(NIC_NAME_RULE, count=2) for host in TWO_RACKS}
RACK_OF = {"a1": "r1", "a2": "r1", "b1": "r2", "b2": "r2"}


def test_required_keeps_a_job_in_one_rack_and_preferred_spans_the_fewest():
    result = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, [
        job("req", 3, "gpu-nic-rail-0"), job("pref", 3, "gpu-nic-rail-0", mode="preferred"),
        job("two", 2, "gpu-nic-rail-0"),
    ])  # fmt: skip
    found = by_name(result)
    req = found["req"]
    # one pinned rail, one NIC of it per node: each rack holds 2
    assert req["fits"] is False and req["workers"] == [] and req["domain"] is None
    assert req["reason"] == "no rack holds 3 workers: the most is rack r1 with 2 (rails [0]); the site holds 4"
    assert req["capacity"]["domains"] == {"r1": 2, "r2": 2} and req["capacity"]["site"] == 4
    pref = found["pref"]
    assert pref["fits"] is True and pref["reason"] is None and pref["domain"] is None
    assert pref["domains"] == [
        {"level": "rack", "name": "r1", "workers": 2},
        {"level": "rack", "name": "r2", "workers": 1},
    ]
    assert placed(pref) == [(0, "a1"), (1, "a2"), (2, "b1")]
    assert pref["rails"] == [0] and pref["rails_pinned"] is True
    assert all(w["devices"] == {"nic-0": [nic(0)], "gpu-0": [gpu(0)]} and w["rails"] == [0] for w in pref["workers"])
    two = found["two"]
    assert (
        two["fits"] is True
        and two["domain"] == {"level": "rack", "name": "r1"}
        and placed(two) == [(0, "a1"), (1, "a2")]
    )
    assert two["worst_level"] == "PIX" and two["worst_level_exact"] is True


def test_a_preferred_job_that_one_rack_holds_stays_in_it():
    entry = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, [job("p", 2, "gpu-nic-rail-1", mode="preferred")])["jobs"][0]
    assert entry["domain"] == {"level": "rack", "name": "r1"} and placed(entry) == [(0, "a1"), (1, "a2")]


def test_several_workers_per_node_the_biggest_node_first_indexes_in_node_order():
    topologies = {"small": aligned_node(2), "big": aligned_node(4)}
    rules = {"small": dict(NIC_NAME_RULE, count=2), "big": dict(NIC_NAME_RULE, count=4)}
    entry = place(topologies, rules, {"small": "r1", "big": "r1"}, [job("g", 5, "gpu-only")])["jobs"][0]
    # no NIC in the template: no rail constraint, even on a site with rails
    assert entry["fits"] is True and entry["rails"] is None and entry["rails_pinned"] is False
    assert placed(entry) == [(0, "big"), (1, "big"), (2, "big"), (3, "big"), (4, "small")]
    assert [w["devices"]["device"] for w in entry["workers"]] == [[gpu(0)], [gpu(1)], [gpu(2)], [gpu(3)], [gpu(0)]]
    assert entry["capacity"]["nodes"] == {"4": 1, "2": 1} and entry["capacity"]["site"] == 6
    # the level of a worker without a NIC is nothing to summarise
    assert entry["worst_level"] is None and entry["worst_level_exact"] is True
    # counts per node stop at each job's workers, whatever the other jobs of the template ask
    one, five = place(
        topologies, rules, {"small": "r1", "big": "r1"}, [job("g", 1, "gpu-only"), job("g5", 5, "gpu-only")]
    )["jobs"]
    assert one["capacity"]["nodes"] == {"1": 2} and placed(one) == [(0, "big")] and one["capacity"]["site"] == 2
    assert five["capacity"]["nodes"] == {"4": 1, "2": 1}


def test_held_devices_reduce_capacity_and_workers_never_get_them():
    topologies = {"big": aligned_node(4), "small": aligned_node(2)}
    rules = {"small": dict(NIC_NAME_RULE, count=2), "big": dict(NIC_NAME_RULE, count=4)}
    racks = {"small": "r1", "big": "r1"}
    free = place(topologies, rules, racks, [job("g", 5, "gpu-only")])
    assert free["free_devices"] == "empty site" and free["jobs"][0]["fits"] is True
    held = {"big": [gpu(0), gpu(2)], "gone": [gpu(0)], "small": ["nic-9"]}
    result = place(topologies, rules, racks, [job("g", 5, "gpu-only"), job("four", 4, "gpu-only")], held=held)
    assert result["free_devices"] == "utilization"
    assert result["warnings"] == [
        "held: gone is not a planned node; its devices are left out",
        "held.small: nic-9 are no devices of the node; left out",
    ]
    five, four = result["jobs"]
    assert five["fits"] is False and five["reason"] == "rack r1 holds 4 of 5 workers"
    assert four["fits"] is True
    assert [(w["node"], w["devices"]["device"]) for w in four["workers"]] == [
        ("big", [gpu(1)]), ("big", [gpu(3)]), ("small", [gpu(0)]), ("small", [gpu(1)])
    ]  # fmt: skip
    # nothing held: the utilization is known and the site is empty
    assert place(topologies, rules, racks, [job("g", 5, "gpu-only")], held={})["free_devices"] == "utilization"


def test_nics_of_unknown_rail_never_count_and_the_reason_says_how_many_hosts_have_them():
    topologies = {"known": aligned_node(2), "unknown": aligned_node(2)}
    rules = {"known": dict(NIC_NAME_RULE, count=2)}
    result = place(
        topologies, rules, {}, [job("p", 2, "gpu-nic-pair-1", mode=None), job("p1", 1, "gpu-nic-pair-1", mode=None)]
    )
    entry, one = result["jobs"]
    assert entry["fits"] is False and entry["rails"] == [0]
    assert entry["reason"] == (
        "the site holds 1 of 2 workers (rails [0]); 1 host has NICs of unknown rail, which never count toward "
        "the job's rails; with its workers on different rails the site would hold 4"
    )
    assert one["fits"] is True and placed(one) == [(0, "known")] and one["rails"] == [0]
    # a site without any rail: no rail constraint at all
    bare = place(topologies, {}, {}, [job("p", 4, "gpu-nic-pair-1", mode=None)])["jobs"][0]
    assert (
        bare["fits"] is True and bare["rails"] is None and {w["node"] for w in bare["workers"]} == {"known", "unknown"}
    )
    assert [w["rails"] for w in bare["workers"]] == [[None]] * 4


def test_a_request_for_all_nics_never_counts_a_nic_of_unknown_rail():
    objects = rail_objects({"a": dict(NIC_NAME_RULE, count=2)}) + [
        template("all-nics", [{"name": "nics", "exactly": {"deviceClassName": "aligned-nic", "allocationMode": "All"}}])
    ]
    # b's second NIC has no rail under its rule
    rules = {"a": dict(NIC_NAME_RULE, count=2), "b": {"by": "map", "map": {"0000:12:00.0": 0}}}
    topologies = {"a": aligned_node(2), "b": aligned_node(2)}
    entry = place(topologies, rules, {}, [job("all", 2, "all-nics", mode=None)], objects=objects)["jobs"][0]
    assert entry["reason"] == (
        "the site holds 1 of 2 workers (rails [0, 1]); 1 host has NICs of unknown rail, which never count toward "
        "the job's rails; with its workers on different rails the site would hold 2"
    )
    one = place(topologies, rules, {}, [job("all", 1, "all-nics", mode=None)], objects=objects)["jobs"][0]
    assert placed(one) == [(0, "a")] and one["workers"][0]["devices"] == {"nics": [nic(0), nic(1)]}


def test_a_template_pinned_to_a_rail_fits_only_where_the_rail_is():
    topologies = {"two": aligned_node(2), "one": aligned_node(1)}
    rules = {"two": dict(NIC_NAME_RULE, count=2), "one": dict(NIC_NAME_RULE, count=1)}
    racks = {"two": "r1", "one": "r1"}
    missing, fits = place(topologies, rules, racks, [job("x", 2, "gpu-nic-rail-1"), job("y", 1, "gpu-nic-rail-1")])[
        "jobs"
    ]
    assert missing["reason"] == "rack r1 holds 1 of 2 workers (rails [1])"
    assert fits["rails"] == [1] and fits["rails_pinned"] is True and placed(fits) == [(0, "two")]
    assert fits["workers"][0]["devices"] == {"nic-0": [nic(1)], "gpu-0": [gpu(1)]}


def test_mixed_rails_force_one_signature_for_every_worker():
    # a: rails 0 and 1; b: the same NIC addresses on rails 1 and 2
    topologies = {"a": aligned_node(2), "b": aligned_node(2)}
    rules = {"a": dict(NIC_NAME_RULE, count=2), "b": {"by": "map", "map": {"0000:12:00.0": 1, "0000:22:00.0": 2}}}
    result = place(topologies, rules, {}, [
        job("two", 2, "gpu-nic-pair-1", mode=None), job("three", 3, "gpu-nic-pair-1", mode=None),
        job("pairs", 2, "gpu-nic-pair-2", mode=None),
    ])  # fmt: skip
    two, three, pairs = result["jobs"]
    assert two["fits"] is True and two["rails"] == [1]
    assert [(w["node"], w["devices"]["nic-0"], w["rails"]) for w in two["workers"]] == [
        ("a", [nic(1)], [1]), ("b", [nic(0)], [1])
    ]  # fmt: skip
    assert (
        three["reason"]
        == "the site holds 2 of 3 workers (rails [1]); with its workers on different rails the site would hold 4"
    )
    assert pairs["fits"] is False and pairs["rails"] == [0, 1]
    assert (
        pairs["reason"]
        == "the site holds 1 of 2 workers (rails [0, 1]); with its workers on different rails the site would hold 2"
    )


def test_a_host_without_a_domain_holds_no_worker_of_a_placed_job():
    topologies = {"a": aligned_node(2), "b": aligned_node(2), "loose": aligned_node(2)}
    rules = {host: dict(NIC_NAME_RULE, count=2) for host in topologies}
    racks = {"a": "r1", "b": "r1"}
    result = place(topologies, rules, racks, [job("g", 5, "gpu-only"), job("p", 5, "gpu-only", mode="preferred"),
                                              job("any", 5, "gpu-only", mode=None)])  # fmt: skip
    required, preferred, anywhere = result["jobs"]
    assert required["reason"] == "rack r1 holds 4 of 5 workers; 1 host has no rack and is left out"
    assert preferred["reason"] == "the site holds 4 of 5 workers; 1 host has no rack and is left out"
    assert required["capacity"]["hosts_without_domain"] == 1
    assert anywhere["fits"] is True and "loose" in {w["node"] for w in anywhere["workers"]}
    assert anywhere["domain"] is None and anywhere["domains"] == [] and anywhere["capacity"]["level"] is None
    # no host in a rack at all
    nowhere = place(topologies, rules, {}, [job("g", 1, "gpu-only")])["jobs"][0]
    assert nowhere["reason"] == "no host has a rack" and nowhere["capacity"]["hosts_without_domain"] == 3


def test_the_choice_is_fewest_nodes_then_best_fit_then_names():
    one = aligned_node(1)
    rules = {f"n{i}": dict(NIC_NAME_RULE, count=1) for i in range(5)}
    topologies = {f"n{i}": one for i in range(5)}
    # r1 holds 3, r2 holds 2: a 2-worker job takes two nodes either way, and r2 leaves nothing over
    racks = {"n0": "r1", "n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2"}
    entry = place(topologies, rules, racks, [job("j", 2, "gpu-nic-rail-0")])["jobs"][0]
    assert entry["domain"]["name"] == "r2" and placed(entry) == [(0, "n3"), (1, "n4")]
    # equal racks: by name
    racks = {"n0": "r2", "n1": "r2", "n3": "r1", "n4": "r1"}
    entry = place({n: one for n in racks}, rules, racks, [job("j", 2, "gpu-nic-rail-0")])["jobs"][0]
    assert entry["domain"]["name"] == "r1"
    # fewest nodes before best fit and names: r2's first node holds both workers (r2 leaves 2 over),
    # r1 needs both its nodes (and leaves nothing over)
    two = aligned_node(2)
    topologies = {"b1": two, "b2": two, "s1": one, "s2": one}
    rules = {host: dict(NIC_NAME_RULE, count=len(t["links"])) for host, t in topologies.items()}
    racks = {"b1": "r2", "b2": "r2", "s1": "r1", "s2": "r1"}
    required, preferred = place(
        topologies, rules, racks, [job("j", 2, "gpu-only"), job("p", 2, "gpu-only", mode="preferred")]
    )["jobs"]
    assert required["domain"]["name"] == "r2" and placed(required) == [(0, "b1"), (1, "b1")]
    # a preferred job that one rack holds is chosen the same way
    assert preferred["domain"]["name"] == "r2" and placed(preferred) == [(0, "b1"), (1, "b1")]


def test_the_same_input_in_another_order_gives_the_same_jobs_json():
    jobs_list = [job("pref", 3, "gpu-nic-rail-0", mode="preferred"), job("g", 5, "gpu-only")]
    first = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, jobs_list)
    reordered = dict(reversed(list(TWO_RACKS.items())))
    again = place(reordered, TWO_RACK_RULES, dict(reversed(list(RACK_OF.items()))), jobs_list)
    assert first == again


def test_the_top_level_says_what_was_planned():
    result = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, [], kubernetes_version="1.36.2")
    assert result == {"schema_version": 1, "site": "s", "kubernetes_version": "1.36", "levels": ["rack"],
                      "free_devices": "empty site", "jobs": [], "warnings": []}  # fmt: skip


def test_jobs_that_cannot_be_placed_at_all_say_why():
    objects = rail_objects(TWO_RACK_RULES)
    shared = copy.deepcopy(next(o for o in objects if o["metadata"]["name"] == "gpu-only"))
    shared.update(kind="ResourceClaim", metadata={"name": "one-gpu"}, spec=shared["spec"]["spec"])
    result = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, [job("ghost", 1, "nope"), job("shared", 1, "one-gpu")],
                   objects=objects + [shared])  # fmt: skip
    ghost, shared_job = result["jobs"]
    assert ghost["reason"] == "template nope is not among the site's claim templates" and ghost["fits"] is False
    assert shared_job["reason"] == (
        "template one-gpu is a ResourceClaim, one claim that every worker would share: "
        "a worker needs its own claim (a ResourceClaimTemplate)"
    )
    assert all(e["capacity"] is None and e["workers"] == [] and e["notes"] == [] for e in result["jobs"])


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("x", r"^jobs\[0\]: must be a mapping"),
        ({"workers": 1, "template": "t"}, r"^jobs\[0\]\.name: None is not a DNS label"),
        ({"name": "j", "workers": 0, "template": "t"},
         r"^jobs\[0\] \(job j\)\.workers: 0 is not a whole number from 1 to 4096"),
        ({"name": "j", "workers": True, "template": "t"}, r"^jobs\[0\] \(job j\)\.workers"),
        ({"name": "j", "workers": 1}, r"^jobs\[0\] \(job j\)\.template"),
        ({"name": "j", "workers": 1, "template": "t", "placement": {"mode": "required"}},
         r"^jobs\[0\] \(job j\)\.placement\.level: required"),
        (
            {"name": "j", "workers": 1, "template": "t", "placement": {"level": "rack", "mode": "often"}},
            r"^jobs\[0\] \(job j\)\.placement\.mode: 'often' is not one of required, preferred",
        ),
        (
            {"name": "j", "workers": 1, "template": "t", "placement": {"level": "row"}},
            r"^jobs\[0\] \(job j\)\.placement\.level: 'row' is not a level of the site \(levels: rack\)",
        ),
        ({"name": "j", "workers": 1, "template": "t", "replicas": 2}, r"^jobs\[0\]: unknown key 'replicas'"),
    ],
)  # fmt: skip
def test_a_malformed_job_is_refused_naming_it(bad, message):
    with pytest.raises(PlanError, match=message):
        place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, [bad])


def test_the_job_level_is_never_better_than_a_worker():
    # far: its rail-1 NIC on the other socket (SYS to the GPU); a: rail 1 on the GPU's root (PIX)
    far = rail_node(
        [("0000:11:00.0", "pci0000:10", 0)], [("0000:12:00.0", "pci0000:10", 0), ("0000:92:00.0", "pci0000:90", 1)]
    )
    topologies = {"a": aligned_node(2), "far": far}
    rules = {host: dict(NIC_NAME_RULE, count=2) for host in topologies}
    entry = place(topologies, rules, {"a": "r1", "far": "r1"}, [job("j", 2, "gpu-nic-rail-1")])["jobs"][0]
    assert [(w["node"], w["worst_level"]) for w in entry["workers"]] == [("a", "PIX"), ("far", "SYS")]
    assert entry["worst_level"] == "SYS" and entry["worst_level_exact"] is True
    # a worker's one NIC is its GPU's best: the aligned level is the same, and the job's the worst of them
    assert [(w["aligned_level"], w["aligned_level_exact"]) for w in entry["workers"]] == [("PIX", True), ("SYS", True)]
    assert entry["aligned_level"] == "SYS" and entry["aligned_level_exact"] is True


def test_selector_errors_and_searches_that_give_up_are_said():
    objects = rail_objects(TWO_RACK_RULES)
    broken = copy.deepcopy(next(o for o in objects if o["metadata"]["name"] == "gpu-only"))
    broken["metadata"]["name"] = "broken"
    broken["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": 'device.attributes["dra.aligned.dev"].nosuch == 1'}}
    ]
    entry = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, [job("b", 1, "broken")], objects=objects + [broken])["jobs"][0]
    assert entry["reason"] == (
        "no rack holds 1 worker: the most is rack r1 with 0; the site holds 0; "
        "a selector of template broken fails to evaluate on 4 hosts"
    )
    limited = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, [job("p", 3, "gpu-nic-pair-2")], step_limit=2)["jobs"][0]
    assert limited["capacity_exact"] is False and limited["reason"] == (
        "no rack holds 3 workers: the most is rack r1 with 0 (no worker found with all its NICs on known rails); "
        "the site holds 0; the counts of 4 hosts are lower bounds (the search gave up, or rails were left untried)"
    )
    assert limited["notes"] == [
        "the counts of 4 hosts are lower bounds (the search gave up, or rails were left untried)"
    ]
    # searched to the end: no worker fits, and the reason says so
    full = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, [job("p", 3, "gpu-nic-pair-2")])["jobs"][0]
    assert full["capacity_exact"] is True and full["notes"] == []
    assert full["reason"] == ("no rack holds 3 workers: the most is rack r1 with 2 (rails [0, 1]); the site holds 4")


def test_the_capacity_lists_the_biggest_domains_only():
    one = aligned_node(1)
    topologies = {f"n{i:02d}": one for i in range(12)}
    rules = {host: dict(NIC_NAME_RULE, count=1) for host in topologies}
    racks = {host: f"r{i:02d}" for i, host in enumerate(topologies)}
    entry = place(topologies, rules, racks, [job("j", 2, "gpu-only")])["jobs"][0]
    assert entry["reason"] == "no rack holds 2 workers: the most is rack r00 with 1; the site holds 12"
    assert list(entry["capacity"]["domains"]) == [f"r{i:02d}" for i in range(10)]
    assert entry["capacity"]["domains_left_out"] == 2


def test_the_inputs_are_left_as_given():
    nodes, _problems = rail_planner_nodes(TWO_RACKS, TWO_RACK_RULES)
    classes, templates = split_objects(rail_objects(TWO_RACK_RULES))
    placement = site_placement(["rack"], {host: {"rack": rack} for host, rack in RACK_OF.items()})
    jobs_list = [job("pref", 3, "gpu-nic-rail-0", mode="preferred")]
    held = {"a1": {gpu(1)}}
    given = copy.deepcopy((nodes, classes, templates, placement, jobs_list, held))
    jobs.place_jobs("s", jobs_list, nodes, classes, templates, placement, held=held)
    assert (nodes, classes, templates, placement, jobs_list, held) == given


def test_a_host_without_planner_data_makes_the_counts_lower_bounds_and_the_reason_says_where():
    # b2 of rack r2 was never probed (or its probe failed): the placement has it, the planner's nodes do not
    racks = {"a1": "r1", "a2": "r1", "b1": "r2", "b2": "r2"}
    topologies = {host: aligned_node(2) for host in ("a1", "a2", "b1")}
    rules = {host: dict(NIC_NAME_RULE, count=2) for host in racks}
    missing = "1 host of rack r2 has no topology (not probed or failed): the counts are lower bounds"
    result = place(topologies, rules, racks, [
        job("req", 3, "gpu-nic-rail-0"), job("site", 4, "gpu-nic-rail-0", mode=None),
        job("fits", 2, "gpu-nic-rail-0"),
    ])  # fmt: skip
    req, site, fits = result["jobs"]
    assert (
        req["reason"] == f"no rack holds 3 workers: the most is rack r1 with 2 (rails [0]); the site holds 3; {missing}"
    )
    assert req["capacity_exact"] is False and req["notes"] == [missing]
    # more may fit: "does not fit" is not proven
    assert (req["capacity_bound"], req["fits_exact"]) == ("lower", False)
    assert req["capacity"]["hosts_not_planned"] == 1 and req["capacity"]["domains_not_planned"] == {"r2": 1}
    assert site["reason"] == (
        "the site holds 3 of 4 workers (rails [0]); "
        "1 host of the site has no topology (not probed or failed): the counts are lower bounds"
    )
    assert site["capacity"]["hosts_not_planned"] == 1 and "domains_not_planned" not in site["capacity"]
    # a lower bound that suffices: it fits, and the counts still say they are bounds
    assert fits["fits"] is True and fits["reason"] is None and fits["capacity_exact"] is False
    assert fits["notes"] == [missing]
    # a placement found on lower bounds is a real one: the fit is proven
    assert (fits["capacity_bound"], fits["fits_exact"]) == ("lower", True)
    # every host planned: exact, nothing noted
    every = place({h: aligned_node(2) for h in racks}, rules, racks, [job("fits", 2, "gpu-nic-rail-0")])["jobs"][0]
    assert every["capacity_exact"] is True and every["notes"] == [] and every["capacity"]["hosts_not_planned"] == 0
    assert (every["capacity_bound"], every["fits_exact"]) == (None, True)


def test_hosts_without_planner_data_count_only_where_the_job_could_go():
    nodes, _problems = rail_planner_nodes({"a1": aligned_node(2)}, {})
    classes, templates = split_objects(rail_objects({"x": dict(NIC_NAME_RULE, count=2)}))
    # unprobed: a host with no rack, two in r10, one in r2 (named in natural order)
    racks = {"a1": {"rack": "r1"}, "loose": {}, "x1": {"rack": "r10"}, "x2": {"rack": "r10"}, "y1": {"rack": "r2"}}
    placement = site_placement(["rack"], racks)
    required, anywhere = jobs.place_jobs("s", [job("r", 1, "gpu-only"), job("a", 1, "gpu-only", mode=None)],
                                         nodes, classes, templates, placement)["jobs"]  # fmt: skip
    assert required["fits"] is True and required["capacity"]["hosts_not_planned"] == 3
    assert list(required["capacity"]["domains_not_planned"].items()) == [("r2", 1), ("r10", 2)]
    assert required["notes"] == [
        "3 hosts in 2 racks (r2: 1, r10: 2) have no topology (not probed or failed): the counts are lower bounds"
    ]
    assert anywhere["capacity"]["hosts_not_planned"] == 4 and anywhere["capacity_exact"] is False


def test_held_devices_shared_or_on_several_nodes_make_every_count_a_bound():
    shared = "2 held devices are shared (counted as held whole: more may fit)"
    spanning = "1 claim holds devices on several nodes (not taken off any node: fewer may fit)"
    two_jobs = [job("f", 2, "gpu-nic-rail-0"), job("r", 3, "gpu-nic-rail-0")]
    fits, refused = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, two_jobs, held_uncertain={"shared": 2, "spanning": 1})[
        "jobs"
    ]
    assert fits["fits"] is True and fits["capacity_exact"] is False and fits["notes"] == [shared, spanning]
    assert fits["reason"] is None
    # more and fewer may fit: neither answer is proven
    assert (fits["capacity_bound"], fits["fits_exact"]) == ("unknown", False)
    assert refused["capacity_exact"] is False and refused["reason"] == (
        f"no rack holds 3 workers: the most is rack r1 with 2 (rails [0]); the site holds 4; {shared}; {spanning}"
    )
    assert (refused["capacity_bound"], refused["fits_exact"]) == ("unknown", False)
    one = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, [job("f", 2, "gpu-nic-rail-0")], held_uncertain={"shared": 1})
    assert one["jobs"][0]["notes"] == ["1 held device is shared (counted as held whole: more may fit)"]
    assert (one["jobs"][0]["capacity_bound"], one["jobs"][0]["fits_exact"]) == ("lower", True)
    # counts that are at most what they say: a fit is not proven, a refusal is
    fits, refused = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, two_jobs, held_uncertain={"spanning": 1})["jobs"]
    assert (fits["fits"], fits["capacity_bound"], fits["fits_exact"]) == (True, "upper", False)
    assert (refused["fits"], refused["capacity_bound"], refused["fits_exact"]) == (False, "upper", True)
    none = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, [job("f", 2, "gpu-nic-rail-0")],
                 held_uncertain={"shared": 0, "spanning": 0})["jobs"][0]  # fmt: skip
    assert none["capacity_exact"] is True and none["notes"] == []
    with pytest.raises(PlanError, match=r"^held_uncertain\.spanning: must be a count \(got '1'\)"):
        place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, [], held_uncertain={"spanning": "1"})


def test_a_preferred_job_over_several_racks_takes_the_fewest_nodes(monkeypatch):
    # racks A: two nodes of 3 GPUs, B: one of 3, C: two of 1; 8 one-GPU workers: A and B on 3 nodes, A and C on 4
    sizes = {"a1": 3, "a2": 3, "b1": 3, "c1": 1, "c2": 1}
    racks = {"a1": "ra", "a2": "ra", "b1": "rb", "c1": "rc", "c2": "rc"}
    topologies = {host: aligned_node(n) for host, n in sizes.items()}
    entry = place(topologies, {}, racks, [job("p", 8, "gpu-only", mode="preferred")])["jobs"][0]
    assert entry["domains"] == [
        {"level": "rack", "name": "ra", "workers": 6},
        {"level": "rack", "name": "rb", "workers": 2},
    ]
    assert sorted({w["node"] for w in entry["workers"]}) == ["a1", "a2", "b1"] and entry["notes"] == []
    # the biggest rack in no best set: rb and rc (one node of 3 each) on 2 nodes, ra (four of 1) with either on 4
    sizes = {"a1": 1, "a2": 1, "a3": 1, "a4": 1, "b1": 3, "c1": 3}
    racks = {"a1": "ra", "a2": "ra", "a3": "ra", "a4": "ra", "b1": "rb", "c1": "rc"}
    topologies = {host: aligned_node(n) for host, n in sizes.items()}
    entry = place(topologies, {}, racks, [job("p", 6, "gpu-only", mode="preferred")])["jobs"][0]
    assert [d["name"] for d in entry["domains"]] == ["rb", "rc"] and placed(entry)[-1] == (5, "c1")
    # too many sets to compare each: the biggest with one more, and the notes say the node count is not proven
    monkeypatch.setattr(choice, "MAX_DOMAIN_SETS", 1)
    entry = place(topologies, {}, racks, [job("p", 6, "gpu-only", mode="preferred")])["jobs"][0]
    assert [d["name"] for d in entry["domains"]] == ["ra", "rb"] and entry["capacity_exact"] is True
    assert entry["notes"] == [
        "the fewest nodes were looked for only among the biggest rack with one more (too many sets of 2 racks to "
        "compare each): fewer nodes may do"
    ]
    # the nodes proven the fewest (one worker per node), the best fit not
    ones = {f"{rack}{i}": aligned_node(1) for rack, count in (("a", 3), ("b", 2), ("c", 2)) for i in range(count)}
    entry = place(ones, {}, {h: f"r{h[0]}" for h in ones}, [job("p", 4, "gpu-only", mode="preferred")])["jobs"][0]
    assert entry["fits"] is True and entry["notes"] == [
        "the nodes are the fewest, but the best fit was looked for only among the biggest rack with one more (too "
        "many sets of 2 racks to compare each): another set may leave less over"
    ]


def test_the_closest_rails_of_a_job_that_does_not_fit_are_where_it_must_fit():
    # rail 0: three NICs on a1 (rack A holds 3, the site 3); rail 1: two on b1, two on c1 (racks 2, the site 4)
    three = aligned_node(3)
    rules = {"a1": {"by": "map", "map": {f"0000:{i}2:00.0": 0 for i in (1, 2, 3)}},
             "b1": {"by": "map", "map": {"0000:12:00.0": 1, "0000:22:00.0": 1}},
             "c1": {"by": "map", "map": {"0000:12:00.0": 1, "0000:22:00.0": 1}}}  # fmt: skip
    topologies = {"a1": three, "b1": aligned_node(2), "c1": aligned_node(2)}
    racks = {"a1": "A", "b1": "B", "c1": "C"}
    required, preferred, anywhere = place(topologies, rules, racks, [
        job("r", 5, "gpu-nic-pair-1"), job("p", 5, "gpu-nic-pair-1", mode="preferred"),
        job("a", 5, "gpu-nic-pair-1", mode=None),
    ])["jobs"]  # fmt: skip
    # one rack must hold a required job: rail 0's rack A comes closest
    assert required["rails"] == [0] and required["reason"].startswith(
        "no rack holds 5 workers: the most is rack A with 3 (rails [0]); the site holds 3"
    )
    # the site is what matters for the others: rail 1
    for entry in (preferred, anywhere):
        assert entry["rails"] == [1] and entry["capacity"]["site"] == 4
        assert entry["reason"].startswith("the site holds 4 of 5 workers (rails [1])")


def test_names_are_in_natural_order():
    one = aligned_node(1)
    racks = {"n9": "r2", "n10": "r2", "n2": "r10", "n3": "r10"}
    result = place({h: one for h in racks}, {}, racks, [
        job("two", 2, "gpu-only"), job("four", 4, "gpu-only", mode="preferred"), job("three", 3, "gpu-only"),
    ])  # fmt: skip
    two, four, three = result["jobs"]
    # a tie to the names: r2 before r10, n9 before n10
    assert two["domain"]["name"] == "r2" and placed(two) == [(0, "n9"), (1, "n10")]
    assert [d["name"] for d in four["domains"]] == ["r2", "r10"]
    assert placed(four) == [(0, "n9"), (1, "n10"), (2, "n2"), (3, "n3")]
    assert list(three["capacity"]["domains"]) == ["r2", "r10"]
    assert three["reason"] == "no rack holds 3 workers: the most is rack r2 with 2; the site holds 4"


def test_the_jobs_are_those_check_jobs_gives():
    levels = [{"name": "rack", "label": "aligned.dev/rack"}]
    raw = [{"name": "g", "workers": 1, "template": "gpu-only", "placement": {"level": "rack"}}]
    normalised = jobs_spec.check_jobs(raw, levels, "ml")
    given = place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, normalised)
    # the raw list is normalised the same way; the normalised one passes unchanged
    assert given == place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, raw, claims_namespace="ml")
    assert given["jobs"][0]["namespace"] == "ml" and given["jobs"][0]["placement"] == {
        "level": "rack",
        "mode": "required",
    }
    assert place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, raw)["jobs"][0]["namespace"] == "default"
    with pytest.raises(PlanError, match=r"^jobs\[1\]\.name: 'g' is also the name of jobs\[0\]"):
        place(TWO_RACKS, TWO_RACK_RULES, RACK_OF, normalised * 2)
