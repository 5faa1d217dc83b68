# SPDX-License-Identifier: Apache-2.0
"""The allocator's rules on hand-written devices: capacity on shared devices, shared counters,
device taints, and matchAttribute/distinctAttribute over list-typed values (KEP-5491).

Claims are planned through :func:`plan.plan`, which runs the allocator claim after claim on
each node, and at the end the allocator is driven directly (its step limit, what an allocation
holds); the expectations are worked out by hand from the rules in :mod:`allocator`.
"""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import allocator
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import CLASSES, device_class, exactly, template

NUMA = "resource.kubernetes.io/numaNode"


# -- capacity, counters and taints --------------------------------------------------------------


def test_capacity_requests_and_shared_devices():
    gpu = {
        "name": "gpu-0",
        "driver": "dra.aligned.dev",
        "pool": "n1",
        "allowMultipleAllocations": True,
        "attributes": {"dra.aligned.dev/kind": {"string": "gpu"}},
        "capacity": {"memory": {"value": "80Gi"}},
    }
    nodes = {"n1": {"devices": [gpu], "links": {}}}
    slice_20 = template("slice", [exactly("gpu", "gpu", capacity={"requests": {"memory": "20Gi"}})])
    too_big = template("too-big", [exactly("gpu", "gpu", capacity={"requests": {"memory": "81Gi"}})])
    result = {t["name"]: t for t in planner.plan("s", nodes, CLASSES, [slice_20, too_big])["templates"]}
    assert result["slice"]["fits_total"] == 4
    assert result["too-big"]["fits_total"] == 0
    # without allowMultipleAllocations the device is taken whole
    gpu["allowMultipleAllocations"] = False
    result = {t["name"]: t for t in planner.plan("s", nodes, CLASSES, [slice_20])["templates"]}
    assert result["slice"]["fits_total"] == 1


def test_request_policies_round_up_fill_defaults_and_refuse_what_breaks_them():
    gpu = {
        "name": "gpu-0",
        "driver": "dra.aligned.dev",
        "pool": "n1",
        "attributes": {"dra.aligned.dev/kind": {"string": "gpu"}},
        "capacity": {"memory": {"value": "80Gi"}, "bandwidth": {"value": "10"}},
    }
    shared = dra.make_shareable(gpu)  # memory 1Gi steps up to 80Gi (default 1Gi), compute 1..100 (default 100)
    nodes = {"n1": {"devices": [shared], "links": {}}}

    def fits(**requests) -> int:
        item = template("t", [exactly("gpu", "gpu", capacity={"requests": requests})])
        return planner.plan("s", nodes, CLASSES, [item])["templates"][0]["fits_total"]

    # compute not requested: its default, all of it; bandwidth has no policy: all of it too
    assert fits(memory="20Gi") == 1
    assert fits(memory="20Gi", compute="25", bandwidth="2") == 4
    assert fits(memory="19500Mi", compute="10", bandwidth="1") == 4  # rounded up to 20Gi: 4, not 4.2
    assert fits(memory="81Gi", compute="10", bandwidth="1") == 0  # above the policy's max
    assert fits(compute="10", bandwidth="1") == 10  # memory's default (1Gi) each; compute 10 x 10 %
    assert fits(memory="20Gi", compute="25", bandwidth="11") == 0  # more than the device has


def test_shared_counters_limit_partitions():
    slices = [
        {
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": "n1",
                "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "40Gi"}}}],
                "devices": [
                    {
                        "name": f"part-{i}",
                        "attributes": {"kind": {"string": "part"}},
                        "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "20Gi"}}}],
                    }
                    for i in range(3)
                ],
            }
        }
    ]
    classes = [device_class("part", 'device.driver == "gpu.example.com"')]
    result = planner.plan("s", planner.nodes_from_slices(slices), classes, [template("p", [exactly("x", "part")])])
    node = result["templates"][0]["nodes"]["n1"]
    assert node["fits"] == 2
    assert node["allocations"][0]["devices"] == {"x": ["gpu.example.com/part-0"]}


def test_device_taints_need_a_toleration():
    devices = [
        {
            "name": f"gpu-{i}",
            "driver": "dra.aligned.dev",
            "attributes": {"dra.aligned.dev/kind": {"string": "gpu"}},
            "taints": [{"key": "maintenance", "value": "yes", "effect": effect}] if effect else [],
        }
        for i, effect in enumerate(["NoSchedule", "NoExecute", "None", None])
    ]
    nodes = {"n1": {"devices": devices, "links": {}}}
    plain = template("plain", [exactly("gpu", "gpu")])
    tolerant = template("tolerant", [exactly("gpu", "gpu", tolerations=[{"key": "maintenance", "operator": "Exists"}])])
    equal_wrong = template(
        "wrong-value",
        [exactly("gpu", "gpu", tolerations=[{"key": "maintenance", "operator": "Equal", "value": "no"}])],
    )
    only_no_schedule = template(
        "no-schedule-only",
        [exactly("gpu", "gpu", tolerations=[{"key": "maintenance", "value": "yes", "effect": "NoSchedule"}])],
    )
    result = {
        t["name"]: t
        for t in planner.plan("s", nodes, CLASSES, [plain, tolerant, equal_wrong, only_no_schedule])["templates"]
    }
    # an effect of None only informs; the two blocking taints need tolerating
    assert result["plain"]["fits_total"] == 2
    assert result["tolerant"]["fits_total"] == 4
    assert result["wrong-value"]["fits_total"] == 2
    assert result["no-schedule-only"]["fits_total"] == 3


# -- list-typed attributes (DRAListTypeAttributes, KEP-5491) ----------------------------------------

CPU_DRIVER = "cpu.example.com"
LIST_CLASSES = CLASSES + [device_class("cpu", f'device.driver == "{CPU_DRIVER}"')]


def numa_device(name: str, driver: str, value: dict, kind: str | None = None) -> dict:
    attributes = {NUMA: value}
    if kind:
        attributes["dra.aligned.dev/kind"] = {"string": kind}
    return {"name": name, "driver": driver, "pool": "n1", "attributes": attributes}


def plan_devices(devices: list, templates: list) -> dict:
    nodes = {"n1": {"devices": devices, "links": {}, "shared_counters": {}}}
    result = planner.plan("test", nodes, LIST_CLASSES, templates)
    return {t["name"]: t["nodes"]["n1"] for t in result["templates"]}


def test_match_attribute_is_a_non_empty_intersection_with_scalars_as_one_element_sets():
    devices = [
        numa_device("gpu-a", "dra.aligned.dev", {"int": 1}, "gpu"),
        numa_device("gpu-b", "dra.aligned.dev", {"int": 3}, "gpu"),
        numa_device("cpu-0", CPU_DRIVER, {"ints": [0, 1]}),
        numa_device("cpu-1", CPU_DRIVER, {"ints": [2, 3]}),
    ]
    pair = template("pair", [exactly("gpu", "gpu"), exactly("cpu", "cpu")], [{"matchAttribute": NUMA}])
    node = plan_devices(devices, [pair])["pair"]
    # {1} meets {0, 1}; {3} meets {2, 3}; {1} and {2, 3} do not meet
    assert node["fits"] == 2
    assert [a["devices"] for a in node["allocations"]] == [
        {"gpu": ["gpu-a"], "cpu": [f"{CPU_DRIVER}/cpu-0"]},
        {"gpu": ["gpu-b"], "cpu": [f"{CPU_DRIVER}/cpu-1"]},
    ]


def test_match_attribute_needs_one_value_common_to_all_devices_not_just_to_each_pair():
    gpu = numa_device("gpu-a", "dra.aligned.dev", {"ints": [0, 1]}, "gpu")
    nic = numa_device("nic-a", "dra.aligned.dev", {"ints": [1, 2]}, "nic")
    triple = template(
        "triple", [exactly("gpu", "gpu"), exactly("nic", "nic"), exactly("cpu", "cpu")], [{"matchAttribute": NUMA}]
    )
    # every pair overlaps, but {0,1} & {1,2} & {2} is empty
    assert plan_devices([gpu, nic, numa_device("cpu-2", CPU_DRIVER, {"int": 2})], [triple])["triple"]["fits"] == 0
    # {0,1} & {1,2} & {1, 5} = {1}
    assert plan_devices([gpu, nic, numa_device("cpu-1", CPU_DRIVER, {"ints": [1, 5]})], [triple])["triple"]["fits"] == 1


def test_match_attribute_backtracks_to_the_intersection_before_a_device():
    # gpu-a narrows {0,1,2} & {0,1} to {0,1}; nic-x ({1}) fails with cpu-0 ({0}) and is taken back,
    # the search must then see {0,1} again and accept nic-y ({0})
    devices = [
        numa_device("cpu-0", CPU_DRIVER, {"ints": [0, 1, 2]}),
        numa_device("gpu-a", "dra.aligned.dev", {"ints": [0, 1]}, "gpu"),
        numa_device("nic-x", "dra.aligned.dev", {"int": 1}, "nic"),
        numa_device("nic-y", "dra.aligned.dev", {"int": 0}, "nic"),
        numa_device("vf-0", "dra.aligned.dev", {"int": 0}, "vf"),
    ]
    quad = template(
        "quad",
        [exactly("cpu", "cpu"), exactly("gpu", "gpu"), exactly("nic", "nic"), exactly("vf", "vf")],
        [{"matchAttribute": NUMA}],
    )
    node = plan_devices(devices, [quad])["quad"]
    assert node["fits"] == 1
    assert node["allocations"][0]["devices"]["nic"] == ["nic-y"]


def test_distinct_attribute_needs_pairwise_disjoint_sets():
    devices = [numa_device(f"cpu-{v}", CPU_DRIVER, value) for v, value in
               (("a", {"ints": [0, 1]}), ("b", {"ints": [1, 2]}), ("c", {"int": 3}), ("d", {"ints": [4]}))]  # fmt: skip
    two = template("two", [exactly("x", "cpu"), exactly("y", "cpu")], [{"distinctAttribute": NUMA}])
    node = plan_devices(devices, [two])["two"]
    # a and b share 1, so the first claim takes a and c, the second b and d
    assert node["fits"] == 2
    assert [a["devices"] for a in node["allocations"]] == [
        {"x": [f"{CPU_DRIVER}/cpu-a"], "y": [f"{CPU_DRIVER}/cpu-c"]},
        {"x": [f"{CPU_DRIVER}/cpu-b"], "y": [f"{CPU_DRIVER}/cpu-d"]},
    ]


def test_values_of_different_types_never_match():
    devices = [
        numa_device("gpu-a", "dra.aligned.dev", {"int": 1}, "gpu"),
        numa_device("cpu-bool", CPU_DRIVER, {"bools": [True]}),
        numa_device("cpu-str", CPU_DRIVER, {"strings": ["1"]}),
    ]
    pair = template("pair", [exactly("gpu", "gpu"), exactly("cpu", "cpu")], [{"matchAttribute": NUMA}])
    assert plan_devices(devices, [pair])["pair"]["fits"] == 0
    devices.append(numa_device("cpu-int", CPU_DRIVER, {"ints": [7, 1]}))
    assert plan_devices(devices, [pair])["pair"]["allocations"][0]["devices"]["cpu"] == [f"{CPU_DRIVER}/cpu-int"]


def test_includes_selects_on_list_and_scalar_attributes():
    devices = [
        numa_device("cpu-0", CPU_DRIVER, {"ints": [0, 1]}),
        numa_device("cpu-1", CPU_DRIVER, {"int": 1}),
        numa_device("cpu-2", CPU_DRIVER, {"ints": [2, 3]}),
    ]
    on_one = 'device.attributes["resource.kubernetes.io"].numaNode.includes(1)'
    request = exactly("cpu", "cpu", count=2, selectors=[{"cel": {"expression": on_one}}])
    node = plan_devices(devices, [template("t", [request])])["t"]
    assert node["allocations"][0]["devices"] == {"cpu": [f"{CPU_DRIVER}/cpu-0", f"{CPU_DRIVER}/cpu-1"]}


# -- the allocator driven directly ----------------------------------------------------------------


def gpu_node(count: int):
    """``(node, requests, constraints, candidates)``: ``count`` GPUs and a template of two GPUs per claim."""
    devices = [
        {"name": f"gpu-{i}", "driver": "dra.aligned.dev", "attributes": {"dra.aligned.dev/kind": {"string": "gpu"}}}
        for i in range(count)
    ]
    compiler = planner.Compiler(CLASSES)
    requests, constraints = compiler.template(template("two", [exactly("gpus", "gpu", count=2)]))
    node = allocator.NodeDevices("n1", {"devices": devices}, dra_cel.referenced_domains(compiler.selectors))
    candidates = [[node.matching(alternative)[0] for alternative in alternatives] for alternatives in requests]
    return node, requests, constraints, candidates


def test_the_search_stops_at_its_step_limit_and_fits_is_then_a_lower_bound():
    node, requests, constraints, candidates = gpu_node(4)
    search = allocator.ClaimAllocator(node, requests, constraints, set(), {}, {}, step_limit=1)
    with pytest.raises(allocator.SearchLimitReached):
        search.run(candidates)
    result = planner.plan_node(node, requests, constraints, step_limit=1)
    assert result["fits"] == 0
    assert result["search_limit"] == "gave up after 1 search steps; fits is a lower bound"
    assert "reason" not in result


def test_held_devices_are_not_offered_to_the_next_claim():
    node, requests, constraints, candidates = gpu_node(4)
    used: set = set()
    chosen = []
    for _claim in range(3):
        search = allocator.ClaimAllocator(node, requests, constraints, used, {}, {}, step_limit=100)
        found = search.run(candidates)
        if found is None:
            break
        for alternative, devices in found:
            allocator.hold_devices(alternative, devices, used, {}, {})
        chosen.append([d.label for _alternative, devices in found for d in devices])
    assert chosen == [["gpu-0", "gpu-1"], ["gpu-2", "gpu-3"]]
    assert used == {("dra.aligned.dev", "", f"gpu-{i}") for i in range(4)}
    assert allocator.why_unallocatable(requests, constraints, [[[]]]) == (
        "request gpus: not enough matching devices (0 match)"
    )
