# SPDX-License-Identifier: Apache-2.0
"""Partitionable devices in the allocator (KEP-4815): a claim's requests spend shared counters while they
hold a device and give them back on backtrack, and devices are tried in published order, not by name.

The site is an A100 40GB published with NVIDIA's naming and counters, written from NVIDIA's figures
(``tests/support/sites/mig_slices``), in the preference order this collection's driver documents unless a
test says otherwise, planned through the plan stage's ``slices`` option as a user of the module would.
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import allocator, consumption
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import plan as plan_stage
from ansible_collections.aligned.dra.tests.support.sites.mig_slices import (
    H100_80GB,
    gpu_class,
    mig_class,
    nvidia_mig_slices,
    profile_request,
)
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import template

CLASSES = [mig_class(), gpu_class()]
PREFIX = "gpu.nvidia.com/gpu-0-mig-"


def plan_slices(slices: list, templates: list) -> dict:
    """Per template, node n1's result, planned by the plan stage on ``slices``."""
    params = {"site": "s", "objects": CLASSES + templates, "slices": slices, "required": [], "dest": None,
              "return_plan": "full", "fail_on_unsatisfied": False, "kubernetes_version": "1.34"}  # fmt: skip
    result = plan_stage.run(params, check_mode=False, diff=False)
    return {t["name"]: t["nodes"]["n1"] for t in result["plan"]["templates"]}


def short(device: str) -> str:
    """A MIG device's name without the node's prefix and NVIDIA's profile ID (``3g20gb-9-4``: ``3g20gb-4``)."""
    profile, _profile_id, start = device.removeprefix(PREFIX).rsplit("-", 2)
    return f"{profile}-{start}"


def held(node: dict) -> list[list[str]]:
    """Each allocation's devices, request by request, by :func:`short` names."""
    return [[short(d) for r in a["devices"].values() for d in r] for a in node["allocations"]]


def slices_of(label: str) -> set[int]:
    """The memory slices a MIG device label holds (``3g20gb-4``: 4..7), from the fixture's geometry."""
    profile, start = label.rsplit("-", 1)
    size = {"1g5gb": 1, "1g5gb-me": 1, "1g10gb": 2, "2g10gb": 2, "3g20gb": 4, "4g20gb": 4, "7g40gb": 8}[profile]
    return set(range(int(start), int(start) + size))


# -- published order -------------------------------------------------------------------------------


def test_the_drivers_order_places_seven_1g_5gb_on_an_a100_40gb():
    node = plan_slices(nvidia_mig_slices(), [template("any-mig", [profile_request("mig")])])["any-mig"]
    # 1g.5gb first (the smallest profile), its placements from 6 down (they block the fewest larger ones)
    assert node["fits"] == 7
    assert held(node) == [[f"1g5gb-{start}"] for start in (6, 5, 4, 3, 2, 1, 0)]


def test_nvidias_own_order_by_name_places_four():
    """NVIDIA's driver sorts a GPU's devices by name: ``1g10gb`` before ``1g5gb``, which strands the 5 GB
    slices; the planner follows the published order, whatever it is."""
    node = plan_slices(nvidia_mig_slices(order="nvidia"), [template("any-mig", [profile_request("mig")])])
    assert node["any-mig"]["fits"] == 4
    assert held(node["any-mig"]) == [[f"1g10gb-{start}"] for start in (0, 2, 4, 6)]


def test_devices_keep_their_slice_order_per_pool_across_slices():
    """A pool split over two slices: the first slice's devices first, each slice in its own order."""
    slices = nvidia_mig_slices()
    second = copy.deepcopy(slices[0])
    devices = slices[0]["spec"]["devices"]
    second["metadata"]["name"] += "-2"
    slices[0]["spec"]["devices"] = devices[7:]  # every placement but the seven 1g.5gb
    second["spec"]["devices"] = devices[:7]
    second["spec"].pop("sharedCounters")
    for item in (slices[0], second):
        item["spec"]["pool"]["resourceSliceCount"] = 2
    node = plan_slices([slices[0], second], [template("any-mig", [profile_request("mig")])])["any-mig"]
    # the first slice's devices before the second slice's 1g.5gb (by name, or in one slice, after them): the
    # one 1g.5gb+me (its OFA engine is the GPU's only one), then the 1g.10gb that still fit beside it
    assert held(node) == [["1g5gb-me-6"], ["1g10gb-4"], ["1g10gb-2"], ["1g10gb-0"]]


# -- counters within one claim -------------------------------------------------------------------


def test_two_requests_of_one_claim_never_take_the_same_memory_slices():
    pair = template("3g-and-2g", [profile_request("big", "3g.20gb"), profile_request("small", "2g.10gb")])
    node = plan_slices(nvidia_mig_slices(), [pair])["3g-and-2g"]
    assert node["fits"] == 1
    ((big, small),) = held(node)
    assert (big, small) == ("3g20gb-4", "2g10gb-2")
    assert not slices_of(big) & slices_of(small)


@pytest.mark.parametrize(
    ("requests", "fits"),
    [
        # the GPU whole and any partition of it exclude each other
        ([profile_request("part", "1g.5gb"), {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}], 0),
        ([profile_request("a", "7g.40gb"), profile_request("b", "1g.5gb")], 0),
        # two 4-slice partitions fill the GPU once; a third request has nothing left
        ([profile_request("a", "3g.20gb"), profile_request("b", "4g.20gb")], 1),
        ([profile_request("a", "3g.20gb"), profile_request("b", "3g.20gb"), profile_request("c", "1g.5gb")], 0),
        ([profile_request("a", "1g.5gb", count=7)], 1),
        ([profile_request("a", "1g.5gb", count=8)], 0),
    ],
)
def test_a_claims_requests_share_one_counter_set(requests, fits):
    node = plan_slices(nvidia_mig_slices(), [template("t", requests)])["t"]
    assert node["fits"] == fits
    for allocation in held(node):
        taken = [slices_of(label) for label in allocation]
        assert sum(map(len, taken)) == len(set().union(*taken))  # pairwise disjoint


def test_backtracking_gives_the_counters_back():
    """The 3g's first choice (at 4) leaves no room for the 2g pinned at 4; the search must give the 3g's
    slices back before it tries the 3g at 0 (else the 2g would still see them spent)."""
    pinned = template("t", [profile_request("big", "3g.20gb"), profile_request("small", "2g.10gb", start=4)])
    node = plan_slices(nvidia_mig_slices(), [pinned])["t"]
    assert held(node) == [["3g20gb-0", "2g10gb-4"]]


def test_an_all_request_over_overlapping_partitions_does_not_fit():
    """``All`` takes every candidate: the 3g.40gb at 0 and at 4 of two H100s fit at once, every MIG device
    of them does not (each 1g.10gb overlaps a 3g.40gb)."""
    both = template("t", [profile_request("all", "3g.40gb", allocationMode="All")])
    every_mig = {"deviceClassName": "mig.nvidia.com", "allocationMode": "All"}
    overlapping = template("u", [{"name": "all", "exactly": every_mig}])
    result = plan_slices(nvidia_mig_slices(device_id=H100_80GB, gpus=2), [both, overlapping])
    assert result["t"]["fits"] == 1 and len(held(result["t"])[0]) == 4
    assert result["u"]["fits"] == 0


def test_counters_fit_reads_earlier_claims_and_the_claim_being_placed():
    nodes = planner.nodes_from_slices(nvidia_mig_slices())
    node = allocator.NodeDevices("n1", nodes["n1"], set())
    by_name = {short(d.label): d for d in node.devices if d.label.startswith(PREFIX)}
    first, overlapping = by_name["3g20gb-4"], by_name["2g10gb-4"]
    held_before: dict = {}
    consumption.spend_counters(first, held_before)
    assert consumption.counters_fit(overlapping, node.shared) is True
    assert consumption.counters_fit(overlapping, node.shared, held_before) is False
    assert consumption.counters_fit(overlapping, node.shared, {}, held_before) is False
    consumption.return_counters(first, held_before)
    assert consumption.counters_fit(overlapping, node.shared, held_before) is True
    # a counter set the node does not publish fits nothing
    assert consumption.counters_fit(overlapping, {}) is False
