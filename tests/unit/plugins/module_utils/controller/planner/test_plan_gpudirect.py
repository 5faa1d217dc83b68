# SPDX-License-Identifier: Apache-2.0
"""The plan counts what flows (issue 77): a pair whose path goes through the host bridge is PHB in the
allocations' levels and the node's, unverified pairs are counted, and nodes that differ only in ACS are
never one shape."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import CLASSES, exactly, template
from ansible_collections.aligned.dra.tests.unit.plugins.module_utils.controller.topology.gpudirect_sites import (
    dgx_topology,
    without_gpudirect,
)

PAIR = template("pair", [exactly("gpu", "gpu"), exactly("nic", "nic")])


def plan_pairs(topologies: dict, shape_cache: bool = True) -> dict:
    nodes = planner.nodes_from_topologies(topologies)
    return planner.plan("s", nodes, CLASSES, [PAIR], shape_cache=shape_cache)["templates"][0]


def test_the_plans_levels_are_those_traffic_flows_at_and_unverified_pairs_are_counted():
    found = plan_pairs({"dgx": dgx_topology()})["nodes"]["dgx"]
    # the scheduler's order pairs each GPU with the NIC of its switch (A, B, C)
    assert [a["worst_level"] for a in found["allocations"]] == ["PIX", "PHB", "PIX"]
    assert [a["paths"] for a in found["allocations"]] == [
        {"direct": 1, "host_bridge": 0, "unknown": 0, "rerouted": 0},
        {"direct": 0, "host_bridge": 1, "unknown": 0, "rerouted": 1},
        {"direct": 0, "host_bridge": 0, "unknown": 1, "rerouted": 0},
    ]
    assert found["worst_level"] == "PHB"
    assert found["paths"] == {"direct": 1, "host_bridge": 1, "unknown": 1, "rerouted": 1}


def test_older_facts_plan_as_before_and_acs_alone_makes_another_shape():
    old = plan_pairs({"dgx": without_gpudirect(dgx_topology())})["nodes"]["dgx"]
    assert [a["worst_level"] for a in old["allocations"]] == ["PIX"] * 3
    assert all("paths" not in a for a in old["allocations"]) and "paths" not in old
    topologies = {"a-old": without_gpudirect(dgx_topology()), "b-new": dgx_topology()}
    shared = plan_pairs(topologies)
    assert shared == plan_pairs(topologies, shape_cache=False)
    assert (shared["nodes"]["a-old"]["worst_level"], shared["nodes"]["b-new"]["worst_level"]) == ("PIX", "PHB")
