# SPDX-License-Identifier: Apache-2.0
"""Levels never overclaim: a site of AWS p5.48xlarge-like nodes planned from other drivers' ResourceSlices.

NVIDIA's GPU driver publishes each H100 with its pcieRoot and no numaNode;
DRANET publishes the EFA NICs with both (``tests/support/sites/plan_inputs.py`` has the
layout). ``gpu-efa-unaligned`` asks for two GPUs and two NICs with no
constraint, so the scheduler's order pairs GPUs with NICs of other switches,
two of its four allocations across NUMA nodes. A summary (an allocation's,
a node's, the template's) is never better than what it summarises: one
unknown pair makes it unknown, unless an exact SYS (the worst level there is)
decides it.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import p5_objects, p5_slices

NODES = ("p5-0001", "p5-0002")


def plan_p5(efa_numa: dict[str, bool]) -> dict:
    slices = [s for node, numa in efa_numa.items() for s in p5_slices(node, efa_numa=numa)]
    objects = p5_objects()
    classes = [o for o in objects if o["kind"] == "DeviceClass"]
    templates = [o for o in objects if o["metadata"]["name"] == "gpu-efa-unaligned"]
    result = planner.plan("p5", planner.nodes_from_slices(slices), classes, templates, driver="gpu.nvidia.com")
    assert result == planner.plan(  # nodes of one shape share a plan: the same result as planned one by one
        "p5", planner.nodes_from_slices(slices), classes, templates, driver="gpu.nvidia.com", shape_cache=False
    )
    return {t["name"]: t for t in result["templates"]}


def levels(entry: dict, key: str = "worst_level") -> tuple:
    return entry[key], entry[key + "_exact"]


def test_the_gpus_numa_node_comes_from_the_nics_on_its_root_and_the_template_is_sys():
    template = plan_p5({node: True for node in NODES})["gpu-efa-unaligned"]
    assert template["fits_total"] == 8
    for node in NODES:
        result = template["nodes"][node]
        allocations = result["allocations"]
        # gpu-0 and gpu-1 with the first two NICs of switch 0, gpu-2 and gpu-3 with the last two; the GPUs
        # of NUMA node 1 (switches 4 to 7) with the NICs of switch 1, on NUMA node 0
        assert [a["devices"] for a in allocations] == [
            {"gpu": [f"gpu.nvidia.com/gpu-{2 * i}", f"gpu.nvidia.com/gpu-{2 * i + 1}"],
             "efa": [f"dra.net/pci-0000-{bus:02x}-00-0", f"dra.net/pci-0000-{bus + 1:02x}-00-0"]}
            for i, bus in enumerate((0x50, 0x52, 0x61, 0x63))
        ]  # fmt: skip
        assert [levels(a) for a in allocations] == [("NODE", True), ("NODE", True), ("SYS", True), ("SYS", True)]
        # gpu-0 shares its root with its NICs (PHB at worst), gpu-1's best is NODE
        assert [levels(a, "aligned_level") for a in allocations] == [
            ("NODE", True), ("NODE", True), ("SYS", True), ("SYS", True)
        ]  # fmt: skip
        assert [a["level_source"] for a in allocations] == ["inferred+bound"] + ["inferred"] * 3
        assert allocations[2]["numa_inferred"] == [
            "gpu.nvidia.com/gpu-4: numaNode 1 from dra.net/pci-0000-91-00-0 (same pcieRoot pci0000:04)",
            "gpu.nvidia.com/gpu-5: numaNode 1 from dra.net/pci-0000-a1-00-0 (same pcieRoot pci0000:05)",
        ]
        assert levels(result) == levels(result, "aligned_level") == ("SYS", True)
    assert levels(template) == levels(template, "aligned_level") == ("SYS", True)
    assert template["worst_level_text"] == "SYS"


def test_without_any_numa_node_the_levels_are_unknown_never_the_phb_of_the_one_shared_root():
    template = plan_p5({node: False for node in NODES})["gpu-efa-unaligned"]
    for node in NODES:
        result = template["nodes"][node]
        allocations = result["allocations"]
        assert len(allocations) == 4
        # the first allocation has two PHB bounds (gpu-0 beside its NICs) and two unknown pairs (gpu-1)
        assert allocations[0]["level_source"] == "bound+unknown"
        assert [levels(a) for a in allocations] == [(None, False)] * 4
        assert [levels(a, "aligned_level") for a in allocations] == [(None, False)] * 4
        assert levels(result) == levels(result, "aligned_level") == (None, False)
    assert levels(template) == levels(template, "aligned_level") == (None, False)
    assert (template["worst_level_text"], template["aligned_level_text"]) == ("unknown", "unknown")


def test_one_unknown_node_leaves_the_site_unknown_unless_an_exact_sys_decides_it():
    template = plan_p5({NODES[0]: True, NODES[1]: False})["gpu-efa-unaligned"]
    assert levels(template["nodes"][NODES[1]]) == (None, False)
    # nothing is worse than SYS: the unknown node cannot make the site's worst level worse
    assert levels(template) == ("SYS", True)


def test_a_template_without_pairs_has_no_level_and_says_none_not_unknown():
    objects = p5_objects()
    gpu_only = [o for o in objects if o["metadata"]["name"] == "gpu-only"]
    classes = [o for o in objects if o["kind"] == "DeviceClass"]
    result = planner.plan("p5", planner.nodes_from_slices(p5_slices(NODES[0])), classes, gpu_only)
    template = result["templates"][0]
    assert template["fits_total"] == 8
    assert levels(template) == (None, True) and template["worst_level_text"] == "none"


def test_nodes_alike_but_for_where_the_gpus_numa_node_comes_from_are_planned_apart():
    """The shape cache keys on where a NUMA node came from: an inferred one is never copied as published."""
    slices = p5_slices("p5-0001") + p5_slices("p5-0002", gpu_numa=True)
    objects = p5_objects()
    classes = [o for o in objects if o["kind"] == "DeviceClass"]
    templates = [o for o in objects if o["metadata"]["name"] == "gpu-efa-unaligned"]
    cached, uncached = (
        planner.plan("p5", planner.nodes_from_slices(slices), classes, templates, driver="gpu.nvidia.com",
                     shape_cache=cache)
        for cache in (True, False)
    )  # fmt: skip
    assert cached == uncached
    (template,) = cached["templates"]
    inferred, published = (template["nodes"][n]["allocations"] for n in NODES)
    assert [a["level_source"] for a in inferred] == ["inferred+bound"] + ["inferred"] * 3
    assert [a["level_source"] for a in published] == ["attributes+bound"] + ["attributes"] * 3
    assert all("numa_inferred" not in a for a in published)
    assert [levels(a) for a in inferred] == [levels(a) for a in published]  # the same levels, said apart
