# SPDX-License-Identifier: Apache-2.0
"""Job planner capacity: held devices as the allocator sees them, the rail signatures tried, and the
narrowed search, on hand-written devices (``tests/support/sites/plan_inputs.py``: NIC i of ``rail_node`` is ``nic<i>``,
on rail i under ``NIC_NAME_RULE``)."""

from __future__ import annotations

from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.gangs import capacity
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import place as jobs
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.allocator import NodeDevices
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    CLASSES,
    NIC_NAME_RULE,
    exactly,
    rail_node,
    rail_planner_nodes,
    site_placement,
    template,
)

SHARED_GPU = {
    "name": "gpu-0",
    "driver": "dra.aligned.dev",
    "allowMultipleAllocations": True,
    "attributes": {"dra.aligned.dev/kind": {"string": "gpu"}},
    "capacity": {"memory": {"value": "80Gi"}},
}
PARTITION = {
    "name": "part-0",
    "driver": "dra.aligned.dev",
    "attributes": {"dra.aligned.dev/kind": {"string": "gpu"}},
    "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "20Gi"}}}],
}
PLAIN_GPU = {"name": "gpu-1", "driver": "dra.aligned.dev", "attributes": {"dra.aligned.dev/kind": {"string": "gpu"}}}


def nics_node(count: int) -> tuple[NodeDevices, list]:
    """A node of one GPU and ``count`` NICs on rails 0..count-1, and its compiled ``nic x k`` templates."""
    topology = rail_node(
        [("0000:01:00.0", "pci0000:00", 0)],
        [(f"0000:{i + 16:02x}:00.0", f"pci0000:{i + 16:02x}", 0) for i in range(count)],
    )
    nodes, _problems = rail_planner_nodes({"n": topology}, {"n": dict(NIC_NAME_RULE, count=count)})
    return NodeDevices("n", nodes["n"], set()), nodes


def compiled(*templates):
    compiler = planner.Compiler(CLASSES)
    return [compiler.template(t) for t in templates]


def test_held_devices_are_used_a_shared_one_wholly_and_a_partition_spends_its_counters():
    node = NodeDevices("n", {"devices": [SHARED_GPU, PARTITION, PLAIN_GPU]}, set())
    (used, consumed, counters), unknown = capacity.held_state(node, ["gpu-0", "part-0", "gpu-1", "gpu-9"])
    assert unknown == ["gpu-9"]
    assert used == {("dra.aligned.dev", "", "part-0"), ("dra.aligned.dev", "", "gpu-1")}
    assert consumed == {("dra.aligned.dev", "", "gpu-0"): {"dra.aligned.dev/memory": Fraction(80 * 2**30)}}
    assert counters == {"gpu-0": {"memory": Fraction(20 * 2**30)}}
    # held: a claim of 20Gi no longer fits the shared GPU; unheld, four do
    slice_20 = template("slice", [exactly("gpu", "gpu", capacity={"requests": {"memory": "20Gi"}})])
    ((requests, constraints),) = compiled(slice_20)
    shared_only = NodeDevices("n", {"devices": [SHARED_GPU]}, set())
    held, _unknown = capacity.held_state(shared_only, ["gpu-0"])
    assert planner.plan_node(shared_only, requests, constraints, held=held)["fits"] == 0
    assert planner.plan_node(shared_only, requests, constraints)["fits"] == 4


def test_the_signatures_tried_are_every_multiset_of_the_free_rails_a_claim_can_take():
    node, _nodes = nics_node(3)
    one, two, either = compiled(
        template("one", [exactly("nic", "nic")]),
        template("two", [exactly("nic", "nic", count=2)]),
        template("either", [{"name": "x", "firstAvailable": [
            {"name": "two", "deviceClassName": "nic", "count": 2}, {"name": "none", "deviceClassName": "gpu"}
        ]}]),
    )  # fmt: skip
    assert capacity.candidate_signatures(node, one[0], set()) == [(0,), (1,), (2,)]
    assert capacity.candidate_signatures(node, two[0], set()) == [(0, 1), (0, 2), (1, 2)]
    assert capacity.candidate_signatures(node, either[0], set()) == [(), (0, 1), (0, 2), (1, 2)]
    # a held NIC's rail is not tried
    held_nic = {d.key for d in node.devices if d.rail == 1}
    assert capacity.candidate_signatures(node, two[0], held_nic) == [(0, 2)]


def test_the_narrowed_search_gives_only_claims_of_its_signature():
    node, _nodes = nics_node(3)
    ((requests, constraints),) = compiled(template("two", [exactly("nic", "nic", count=2)]))
    pools: dict = {}
    for wanted in [(0, 2), (1, 2)]:
        search = capacity.RailSearch(node, requests, constraints, set(), {}, {}, 1000, wanted=wanted, pools=pools)
        candidates = [[node.matching(alternative)[0] for alternative in alternatives] for alternatives in requests]
        chosen = search.run(candidates)
        assert capacity.signature_of(d for _alternative, devices in chosen for d in devices) == wanted
    assert capacity.RailSearch(node, requests, constraints, set(), {}, {}, 1000, wanted=(0, 0), pools=pools).run(
        [[node.matching(alternative)[0] for alternative in alternatives] for alternatives in requests]
    ) is None  # fmt: skip


def test_past_the_most_signatures_only_the_unnarrowed_claims_rails_are_tried_and_the_counts_say_so():
    _node, nodes = nics_node(16)
    eight = template("eight", [exactly("nic", "nic", count=8)])
    placement = site_placement([], {"n": {}})
    job = {"name": "j", "workers": 1, "template": "eight"}
    entry = jobs.place_jobs("s", [job], nodes, CLASSES, [eight], placement)["jobs"][0]
    # C(16, 8) signatures are too many: the planner's one claim, NICs 0-7
    assert entry["fits"] is True and entry["rails"] == list(range(8)) and entry["capacity_exact"] is False
    two = dict(job, workers=2)
    entry = jobs.place_jobs("s", [two], nodes, CLASSES, [eight], placement)["jobs"][0]
    assert entry["reason"] == (
        "the site holds 1 of 2 workers (rails [0, 1, 2, 3, 4, 5, 6, 7]); with its workers on different rails the "
        "site would hold 2; the counts of 1 host are lower bounds (the search gave up, or rails were left untried)"
    )


def test_a_template_takes_nics_where_a_request_matches_one():
    node, _nodes = nics_node(1)
    gpu_only, nic_only = compiled(template("g", [exactly("g", "gpu")]), template("n", [exactly("n", "nic")]))
    assert capacity.takes_nics(nic_only, [node]) and not capacity.takes_nics(gpu_only, [node])
    assert capacity.signature_of([]) == ()
