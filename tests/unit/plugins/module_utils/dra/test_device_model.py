# SPDX-License-Identifier: Apache-2.0
"""One device model for the planner, the site summary and the report.

On every fixture tree (the snapshots and synthetic layouts that tests and the
demo inventory use), the report's counts and alignment score are compared with
what the planner itself sees: its nodes (``plan.nodes_from_topologies``) and
its level of a pair (``allocator.NodeDevices.levels``), worked out here independently of
:mod:`device_model`.
"""

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import allocator, plan
from ansible_collections.aligned.dra.plugins.module_utils.controller.report import pages as report
from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import LEVEL_RANK, probe
from ansible_collections.aligned.dra.tests.fixtures.materialize import FIXTURES as FIXTURES_DIR
from ansible_collections.aligned.dra.tests.fixtures.materialize import names
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import resource_slice
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

FIXTURES = names()
KIND = dra.DRIVER_NAME + "/kind"


def planner_view(topology: dict) -> dict:
    """Accelerators, physical NICs and each accelerator's best level, as the planner has them."""
    nodes = plan.nodes_from_topologies({"n": topology})
    node = allocator.NodeDevices("n", nodes["n"], {dra.DRIVER_NAME})
    accelerators = [d for d in node.devices if d.attributes.get(KIND) in ("gpu", "accelerator")]
    nics = [d for d in node.devices if d.attributes.get(KIND) == "nic"]
    best = {}
    for acc in accelerators:
        levels = [node.levels([acc, nic])[0] for nic in nics]
        known = [LEVEL_RANK[lv] for lv in levels if lv]
        best[acc.bdf] = list(LEVEL_RANK)[min(known)] if known else None
    return {"accelerators": len(accelerators), "rdma_nics": len(nics), "best": best}


def bucket_of(level: str | None) -> str:
    return {"PIX": "aligned", "PXB": "aligned", "PHB": "host", "NODE": "host", "SYS": "sys", None: "none"}[level]


@pytest.mark.parametrize("fixture", FIXTURES)
def test_report_counts_and_score_equal_the_planners(fixture):
    topology = topology_of(fixture)
    expected = planner_view(topology)
    result = report.site_report(fixture, {"node-1": topology, "node-2": topology_of(fixture)})
    summary = result["summary"]
    assert sum(summary["accelerators"].values()) == 2 * expected["accelerators"]
    assert summary["rdma_nics"] == 2 * expected["rdma_nics"]
    buckets = {b["key"]: b["count"] for b in result["score"]["buckets"]}
    wanted = {key: 0 for key in buckets}
    for level in expected["best"].values():
        wanted[bucket_of(level)] += 2
    assert buckets == wanted
    assert result["score"]["gpus"] == 2 * expected["accelerators"]
    # The page says the same numbers.
    html = result["html"]
    assert f"{device_model.plural(2 * expected['rdma_nics'], 'RDMA NIC')}" in html
    for bucket, count in wanted.items():
        assert (
            re.search(rf'data-bucket="{bucket}">.*?<td class="num">{count}</td>', html) or not expected["accelerators"]
        )


# Fixture trees outside materialize(): the Molecule scenarios' nodes and the utilization set's topology.
EXTRA_LAYOUTS = (FIXTURES_DIR / "site" / "cpu-only.yml", FIXTURES_DIR / "network" / "sriov-lab.yml")
EXTRA_TOPOLOGIES = (FIXTURES_DIR / "utilization" / "ai-lab" / "topologies" / "node-a.json",)


@pytest.fixture(scope="module")
def extra_topologies(tmp_path_factory):
    found = {}
    for layout in EXTRA_LAYOUTS:
        root = tmp_path_factory.mktemp(layout.stem)
        build_tree(load_layout(layout), root)
        found[layout.stem] = probe(str(root / "sys"), str(root / "proc"))
    for path in EXTRA_TOPOLOGIES:
        found[path.stem] = json.loads(path.read_text())
    return found


def test_other_fixture_trees_agree_with_the_planner(extra_topologies):
    assert sorted(extra_topologies) == ["cpu-only", "node-a", "sriov-lab"]
    for name, topology in extra_topologies.items():
        expected = planner_view(topology)
        result = report.site_report(name, {name: topology})
        assert sum(result["summary"]["accelerators"].values()) == expected["accelerators"], name
        assert result["summary"]["rdma_nics"] == expected["rdma_nics"], name
        wanted = {b["key"]: 0 for b in result["score"]["buckets"]}
        for level in expected["best"].values():
            wanted[bucket_of(level)] += 1
        assert {b["key"]: b["count"] for b in result["score"]["buckets"]} == wanted, name


def test_demo_sites_agree_with_the_planner():
    """The demo inventory's two sites, each as one site of several different nodes."""
    for fixtures in (
        ("hwloc-32intel64-8ve", "hwloc-32em64t-mic", "hwloc-fakepcilocalities", "ghw-nvidia-p100"),
        ("dgx-h100", "mi300x", "sriov-8x64", "hyperv-ndv4", "vm-flat", "pci-domain-5digit"),
    ):
        nodes = {f: topology_of(f) for f in fixtures}
        score = report.site_report("demo", nodes)["score"]
        wanted = {b["key"]: 0 for b in score["buckets"]}
        for topology in nodes.values():
            for level in planner_view(topology)["best"].values():
                wanted[bucket_of(level)] += 1
        assert {b["key"]: b["count"] for b in score["buckets"]} == wanted


def test_vector_engines_are_labelled_and_counted_as_ves_not_gpus():
    topology = topology_of("hwloc-32intel64-8ve")
    model = device_model.node_devices(topology)
    assert [a["label"] for a in model["accelerators"]] == [f"VE{i}" for i in range(8)]
    assert {a["model"] for a in model["accelerators"]} == {"NEC SX-Aurora"}
    assert model["counts"]["ve"] == 8 and model["counts"]["gpu"] == 0
    html = report.site_report("ve", {"ve-node01": topology})["html"]
    assert "8 Vector Engines" in html and ">VE0<" in html
    assert not re.search(r">GPU\d", html)


def test_a_connectx_without_netdev_or_rdma_device_is_not_an_rdma_nic():
    topology = topology_of("hwloc-32intel64-8ve")
    bare = [d["pci_address"] for d in topology["devices"] if d["vendor_id"] == "0x15b3"]
    assert bare and all(
        not d["netdevs"] and not d["rdma_devices"] for d in topology["devices"] if d["pci_address"] in bare
    )
    model = device_model.node_devices(topology)
    assert model["rdma_nics"] == []
    # The probe still sees the ConnectX at PIX from the VEs; the planner cannot pair them.
    assert {e["level"] for e in topology["nearest_nics"].values()} == {"PIX"}
    assert {e["level"] for e in model["nearest"].values()} == {None}


def test_plain_nics_count_when_the_driver_publishes_them():
    topology = topology_of("vm-flat")
    assert device_model.node_devices(topology)["counts"]["rdma_nics"] == 1
    assert device_model.node_devices(topology, {"plain_nics": True})["counts"]["rdma_nics"] == 2


def test_summary_keeps_its_keys_and_adds_the_planner_view():
    summary = report.site_report("s", {"a": topology_of("hwloc-32intel64-8ve")})["summary"]
    node = summary["per_node"]["a"]
    assert node["gpus"] == 8 and node["nics"] == 4  # what the probe found, unchanged
    assert node["accelerators"] == {"gpu": 0, "ve": 8, "accelerator": 0} and node["rdma_nics"] == 0
    assert summary["accelerators"]["ve"] == 8 and summary["rdma_nics"] == 0


@pytest.mark.parametrize(("count", "text"), [(0, "0 nodes"), (1, "1 node"), (2, "2 nodes")])
def test_plural(count, text):
    assert device_model.plural(count, "node") == text


@pytest.mark.parametrize("options", [None, {"plain_nics": True}, {"vfs": False, "exclude": ["mlx5_1", "0000:1a:*"]}])
def test_published_kinds_is_the_decision_devices_from_topology_takes(options):
    for fixture in FIXTURES:
        topology = topology_of(fixture)
        names = sorted(dra.device_name(k, bdf) for bdf, k in dra.published_kinds(topology, options).items())
        assert names == [d["name"] for d in dra.devices_from_topology(topology, options)], fixture


def test_summary_markdown_says_what_the_planner_sees_with_plurals():
    from ansible_collections.aligned.dra.plugins.module_utils.controller.topology.summary import (
        site_summary,
        site_summary_markdown,
    )

    text = site_summary_markdown(site_summary("s", {"a": topology_of("hwloc-32intel64-8ve")}))
    assert "1 node, 8 GPUs/accelerators, 4 physical NICs, 0 VFs." in text
    assert "As the planner sees them: 8 Vector Engines; 0 RDMA NICs." in text


# -- published devices of any driver joined to the probe ---------------------------------------
#
# Devices as each driver publishes them (attribute names and value forms from
# its source; docs/devices.md lists them), on the dgx-h100 tree: GPU
# 0000:1a:00.0 (root pci0000:15, NUMA 0) sits beside NIC 0000:1d:00.0 (same
# root), NIC 0000:2e:00.0 is on another root of NUMA node 0, NIC
# 0000:9d:00.0 on NUMA node 1.

GPU_BDF = "0000:1a:00.0"
GPU_ROOT = "pci0000:15"


def slice_of(driver: str, devices: list[dict], node: str = "dgx") -> dict:
    return resource_slice(node, driver, devices)


def s(value: str) -> dict:
    return {"string": value}


def i(value: int) -> dict:
    return {"int": value}


# (driver, published GPU device) per driver and release; the address in the form that driver writes
GPUS = {
    "nvidia": ("gpu.nvidia.com", {"name": "gpu-0", "attributes": {
        "type": s("gpu"), "uuid": s("GPU-1"), "productName": s("NVIDIA H100 80GB HBM3"),
        "resource.kubernetes.io/pciBusID": s(GPU_BDF), "resource.kubernetes.io/pcieRoot": s(GPU_ROOT)}}),
    "nvidia-v25.8": ("gpu.nvidia.com", {"name": "gpu-0", "attributes": {
        "type": s("gpu"), "uuid": s("GPU-1"), "pcieBusID": s("0000:1a:00.0"),
        "resource.kubernetes.io/pcieRoot": s(GPU_ROOT)}}),
    "nvidia-nvml-form": ("gpu.nvidia.com", {"name": "gpu-0", "attributes": {
        "type": s("gpu"), "pcieBusID": s("00000000:1A:00.0")}}),
    "amd": ("gpu.amd.com", {"name": "gpu-1-128", "attributes": {
        "type": s("amdgpu"), "pciAddr": s(GPU_BDF), "cardIndex": i(1),
        "resource.kubernetes.io/pcieRoot": s(GPU_ROOT)}}),
    "amd-partition": ("gpu.amd.com", {"name": "gpu-9-136", "attributes": {
        "type": s("amdgpu-partition"), "parentPciAddr": s(GPU_BDF)}}),
    "intel": ("gpu.intel.com", {"name": "0000-1a-00-0-0x0bd5", "attributes": {
        "model": s("Max 1550"), "pciAddress": s(GPU_BDF), "resource.kubernetes.io/pciBusID": s(GPU_BDF),
        "resource.kubernetes.io/pcieRoot": s(GPU_ROOT), "pciRoot": s("15")}}),
    "intel-deprecated-only": ("gpu.intel.com", {"name": "0000-1a-00-0-0x0bd5", "attributes": {
        "model": s("Max 1550"), "pciAddress": s("1A:00.0")}}),
    "ours": (dra.DRIVER_NAME, {"name": "gpu-0000-1a-00-0", "attributes": {
        "kind": s("gpu"), "resource.kubernetes.io/pciBusID": s(GPU_BDF),
        "resource.kubernetes.io/pcieRoot": s(GPU_ROOT), "resource.kubernetes.io/numaNode": i(0)}}),
}  # fmt: skip


def dranet_nic(bdf: str, root: str, numa: int) -> tuple[str, dict]:
    return "dra.net", {"name": "pci-" + bdf.replace(":", "-").replace(".", "-"), "attributes": {
        "dra.net/ifName": s("ens1"), "dra.net/pciAddress": s(bdf), "dra.net/numaNode": i(numa),
        "dra.net/rdma": {"bool": True}, "resource.kubernetes.io/pcieRoot": s(root)}}  # fmt: skip


def dranet_split_nic(bdf: str) -> tuple[str, dict]:
    domain, bus, rest = bdf.split(":")
    slot, function = rest.split(".")
    return "dra.net", {"name": "ens1", "attributes": {
        "dra.net/pciAddressDomain": s(domain), "dra.net/pciAddressBus": s(bus),
        "dra.net/pciAddressDevice": s(slot), "dra.net/pciAddressFunction": s(function)}}  # fmt: skip


def ours_nic(bdf: str) -> tuple[str, dict]:
    return dra.DRIVER_NAME, {"name": dra.device_name("nic", bdf), "attributes": {
        "kind": s("nic"), "resource.kubernetes.io/pciBusID": s(bdf)}}  # fmt: skip


NICS = {
    "dranet": dranet_nic,
    "dranet-split": lambda bdf, root, numa: dranet_split_nic(bdf),
    "ours": lambda bdf, root, numa: ours_nic(bdf),
}
NIC_PLACES = [("0000:1d:00.0", "pci0000:15", 0), ("0000:2e:00.0", "pci0000:26", 0), ("0000:9d:00.0", "pci0000:95", 1)]


@pytest.fixture(scope="module")
def dgx() -> dict:
    return topology_of("dgx-h100")


def planned_pair(topology: dict | None, gpu: tuple[str, dict], nic: tuple[str, dict]) -> dict:
    """The planner's view of an allocation holding one published GPU and one published NIC."""
    slices = [slice_of(gpu[0], [gpu[1]]), slice_of(nic[0], [nic[1]])]
    nodes = plan.nodes_from_slices(slices, {"dgx": topology} if topology else None)
    node = allocator.NodeDevices("dgx", nodes["dgx"], set())
    return node.assess(node.devices)


@pytest.mark.parametrize("gpu", sorted(GPUS))
@pytest.mark.parametrize("nic", sorted(NICS))
@pytest.mark.parametrize("place", NIC_PLACES, ids=lambda p: p[0])
def test_an_address_in_any_drivers_form_gives_the_probed_level(dgx, gpu, nic, place):
    found = planned_pair(dgx, GPUS[gpu], NICS[nic](*place))
    expected = dgx["links"][GPU_BDF][place[0]]
    assert expected in LEVEL_RANK
    assert found["worst_level"] == found["aligned_level"] == expected
    assert found["worst_level_exact"] and found["aligned_level_exact"]
    assert found["level_source"] == "topology"


def gaudi(root: str | None = GPU_ROOT, numa: int | None = None) -> tuple[str, dict]:
    attributes = {"model": s("Gaudi2"), "serial": s("AN00001"), "healthy": {"bool": True}}
    if root:
        attributes["resource.kubernetes.io/pcieRoot"] = s(root)
        attributes["pciRoot"] = s(root.split(":")[1])
    if numa is not None:
        attributes["resource.kubernetes.io/numaNode"] = i(numa)
    return "gaudi.intel.com", {"name": "0000-1a-00-0-0x1020", "attributes": attributes}


@pytest.mark.parametrize(
    ("place", "level", "exact", "source"),
    [
        (NIC_PLACES[0], "PHB", False, "bound"),  # one root: PHB at worst (the probe says PXB)
        (NIC_PLACES[1], "NODE", True, "attributes"),  # other roots on NUMA node 0 (the root's, from the probe)
        (NIC_PLACES[2], "SYS", True, "attributes"),  # other NUMA nodes
    ],
)
def test_a_root_only_device_gets_a_bound_or_the_level_its_root_decides(dgx, place, level, exact, source):
    found = planned_pair(dgx, gaudi(), dranet_nic(*place))
    assert (found["worst_level"], found["worst_level_exact"], found["level_source"]) == (level, exact, source)
    assert LEVEL_RANK[dgx["links"][GPU_BDF][place[0]]] <= LEVEL_RANK[level]  # a bound never hides a worse level


def test_numa_only_gives_a_node_bound_and_other_numa_nodes_sys():
    nic = dra.DRIVER_NAME, {"name": "nic-x", "attributes": {"kind": s("nic"), "resource.kubernetes.io/numaNode": i(0)}}
    same = planned_pair(None, gaudi(root=None, numa=0), nic)
    assert (same["aligned_level"], same["aligned_level_exact"], same["level_source"]) == ("NODE", False, "bound")
    other = planned_pair(None, gaudi(root=None, numa=1), nic)
    assert (other["aligned_level"], other["aligned_level_exact"]) == ("SYS", True)


def test_nothing_published_is_unknown_with_a_reason(dgx):
    gpu = gaudi(root=None)
    found = planned_pair(dgx, gpu, dranet_split_nic("0000:1d:00.0"))
    assert (found["worst_level"], found["level_source"]) == (None, "unknown")
    joined = [device_model.join_device(d, device_model.flat_attributes(x, d), None) for d, x in (gpu,)]
    pair = device_model.joined_pair_level(joined[0], joined[0] | {"role": "nic"}, {})
    assert pair["level"] is None and "no PCI address" in pair["reason"]


@pytest.mark.parametrize("address", ["0000:77:00.0", "not-an-address"])
def test_an_address_that_is_not_on_the_node_is_unknown_with_a_reason(dgx, address):
    driver, device = GPUS["nvidia"]
    device = {**device, "attributes": {**device["attributes"], "resource.kubernetes.io/pciBusID": s(address)}}
    found = planned_pair(dgx, (driver, device), dranet_nic(*NIC_PLACES[0]))
    assert (found["worst_level"], found["level_source"]) == (None, "unknown")
    probed = device_model.probed_node(dgx)
    joined = device_model.join_device(driver, device_model.flat_attributes(device, driver), probed, "gpu-0")
    assert joined["address"] is None
    assert joined["reason"].startswith("gpu-0: resource.kubernetes.io/pciBusID")
    assert ("not a PCI function of the probed node" if address[0] == "0" else "is not a PCI address") in joined[
        "reason"
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0000:1a:00.0", "0000:1a:00.0"),
        ("0000:1A:00.0", "0000:1a:00.0"),
        ("1a:00.0", "0000:1a:00.0"),
        ("00000000:1A:00.0", "0000:1a:00.0"),  # NVML
        ("10000:01:00.0", "10000:01:00.0"),  # VMD domain
        (" 0000:1a:00.7 ", "0000:1a:00.7"),
        ("0000:1a:00.8", None),
        ("pci0000:15", None),
        (17, None),
    ],
)
def test_pci_addresses_are_normalised(text, expected):
    assert device_model.normalize_pci_address(text) == expected


def test_list_valued_roots_and_numa_nodes_bound_from_any_shared_member():
    gpu = {"role": "accelerator", "roots": device_model._roots(["pci0000:15", "pci0000:26"]), "numa": frozenset({0})}
    nic = {"role": "nic", "roots": device_model._roots("PCI0000:26"), "numa": device_model._numas([[0, 1]])}
    assert device_model.joined_pair_level(gpu, nic, {}) == {"level": "PHB", "exact": False, "source": "bound"}
    nic = {"role": "nic", "roots": frozenset({"pci0000:95"}), "numa": device_model._numas([0, 1])}
    assert device_model.joined_pair_level(gpu, nic, {}) == {"level": "NODE", "exact": False, "source": "bound"}
    nic = {"role": "nic", "roots": frozenset({"pci0000:95"}), "numa": frozenset({1})}
    assert device_model.joined_pair_level(gpu, nic, {}) == {"level": "SYS", "exact": True, "source": "attributes"}


def test_worst_and_best_of_exact_levels_and_bounds():
    assert device_model.worst_level([("PIX", True), ("PHB", False)]) == ("PHB", False)
    assert device_model.worst_level([("NODE", True), ("PHB", False)]) == ("NODE", True)
    assert device_model.worst_level([("NODE", True), ("NODE", False)]) == ("NODE", True)
    assert device_model.worst_level([]) == (None, True)  # nothing to summarise
    assert device_model.worst_level([(None, True), ("PIX", True)]) == ("PIX", True)  # a part without pairs
    assert device_model.best_level([("PXB", True), ("PHB", False)]) == ("PXB", False)  # the bound may be better
    assert device_model.best_level([("PIX", True), ("PHB", False)]) == ("PIX", True)
    assert device_model.best_level([("NODE", True), ("SYS", True)]) == ("NODE", True)
    assert device_model.level_text("NODE", False) == "\u2264 NODE"
    assert device_model.level_text(None) == "unknown"


def test_a_summary_is_never_better_than_an_unknown_part():
    unknown = (None, False)
    assert device_model.worst_level([unknown]) == unknown
    assert device_model.worst_level([("PHB", False), unknown]) == unknown  # not "≤ PHB"
    assert device_model.worst_level([("PIX", True), unknown, ("NODE", True)]) == unknown
    assert device_model.worst_level([("PIX", True), ("BAD", True)]) == unknown  # no level is not "nothing"
    # nothing is worse than SYS: an exact SYS decides the worst, whatever the unknown parts are
    assert device_model.worst_level([unknown, ("SYS", True)]) == ("SYS", True)
    assert device_model.worst_level([unknown, ("SYS", False)]) == unknown
    # the best claims that a pair at least this good exists: an unknown pair cannot make that false, but it
    # could be better, so the best is a bound (unless it is an exact PIX, which nothing beats)
    assert device_model.best_level([("NODE", True), unknown]) == ("NODE", False)
    assert device_model.best_level([("PIX", True), unknown]) == ("PIX", True)
    assert device_model.best_level([unknown, unknown]) == unknown
    assert device_model.best_level([]) == (None, True)
    # an accelerator without any known pair makes the aligned level (the worst of the bests) unknown
    rows = [[("PHB", False), ("NODE", True)], [unknown, unknown]]
    assert device_model.worst_level(device_model.best_level(row) for row in rows) == unknown
    texts = [device_model.summary_level_text(*lv) for lv in [("SYS", True), ("PHB", False), unknown, (None, True)]]
    assert texts == ["SYS", "\u2264 PHB", "unknown", "none"]


def planned(topology: dict | None, devices: list[tuple[str, dict]]) -> dict:
    """The planner's view of an allocation holding every given device (published by their drivers)."""
    slices = [slice_of(driver, [device]) for driver, device in devices]
    nodes = plan.nodes_from_slices(slices, {"dgx": topology} if topology else None)
    node = allocator.NodeDevices("dgx", nodes["dgx"], set())
    return node.assess(node.devices)


@pytest.mark.parametrize("probe", ["none", "links only"])
def test_a_root_without_a_numa_node_takes_it_from_another_device_on_that_root(dgx, probe):
    topology = {"links": dgx["links"]} if probe == "links only" else None  # neither knows the root's NUMA node
    far = dranet_nic(*NIC_PLACES[2])  # pci0000:95, NUMA node 1
    near = dranet_nic(*NIC_PLACES[0])  # the GPU's root pci0000:15, NUMA node 0
    alone = planned(topology, [gaudi(), far])
    assert (alone["worst_level"], alone["worst_level_exact"], alone["level_source"]) == (None, False, "unknown")
    found = planned(topology, [gaudi(), far, near])
    # the far pair is SYS (exact: one root complex is on one NUMA node); the near one PHB at worst
    assert (found["worst_level"], found["worst_level_exact"]) == ("SYS", True)
    assert found["level_source"] == "inferred+bound"
    assert found["numa_inferred"] == [
        "gaudi.intel.com/0000-1a-00-0-0x1020: numaNode 0 from dra.net/pci-0000-1d-00-0 (same pcieRoot pci0000:15)"
    ]
    assert LEVEL_RANK[dgx["links"][GPU_BDF][NIC_PLACES[2][0]]] == LEVEL_RANK["SYS"]  # as the probe says


def test_no_numa_node_is_inferred_from_donors_that_disagree_or_for_a_root_without_one():
    def join(roots, numa=()):
        return {"roots": frozenset(roots), "numa": frozenset(numa), "reason": None, "numa_from": None}

    joins = {
        "gpu": join({"pci0000:15"}),
        "a": join({"pci0000:15"}, {0}),
        "b": join({"pci0000:15"}, {1}),  # disagrees with a: the root gives nothing
        "gpu-2": join({"pci0000:26", "pci0000:37"}),  # one of its roots has no donor
        "c": join({"pci0000:26"}, {0}),
        "gpu-3": join({"pci0000:48", "pci0000:26"}),
        "d": join({"pci0000:48"}, {1}),
        "bad": {**join({"pci0000:26"}), "reason": "bad: no PCI function"},
    }
    device_model.infer_root_numa(joins.items())
    assert [joins[n]["numa"] for n in ("gpu", "gpu-2", "bad")] == [frozenset()] * 3
    assert joins["gpu-3"]["numa"] == frozenset({0, 1})
    assert joins["gpu-3"]["numa_from"] == (
        "gpu-3: numaNode 0 from c (same pcieRoot pci0000:26); numaNode 1 from d (same pcieRoot pci0000:48)"
    )


def test_utilization_reads_other_drivers_pairs_through_the_join(dgx):
    from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import utilization

    gpu_driver, gpu = GPUS["nvidia-v25.8"]
    nic_driver, nic = dranet_nic(*NIC_PLACES[0])
    claim = {
        "metadata": {"name": "pair", "namespace": "t"},
        "status": {"allocation": {"devices": {"results": [
            {"request": "g", "driver": gpu_driver, "pool": "dgx", "device": gpu["name"]},
            {"request": "n", "driver": nic_driver, "pool": "dgx", "device": nic["name"]}]}}},
    }  # fmt: skip
    slices = [slice_of(gpu_driver, [gpu]), slice_of(nic_driver, [nic])]
    measured = utilization.utilization(slices, [claim], topologies={"dgx": dgx})["allocations"][0]
    # where the probe read paths, the pair's path (the fixture's short config files: unverified)
    entry = device_model.pair_path(dgx.get("p2p"), GPU_BDF, "0000:1d:00.0")
    path = {"path": device_model.path_of(entry)} if dgx.get("p2p") else {}
    assert measured["pairs"] == [
        {"gpu": "gpu.nvidia.com/gpu-0", "nic": f"dra.net/{nic['name']}",
         "level": device_model.pair_level(dgx["links"], GPU_BDF, "0000:1d:00.0", dgx.get("p2p")),
         "exact": True, "source": "topology", **path}
    ]  # fmt: skip
    bounded = utilization.utilization(slices, [claim])["allocations"][0]  # no probe: the shared root bounds it
    assert (bounded["aligned_level"], bounded["aligned_level_exact"], bounded["level_source"]) == (
        "PHB",
        False,
        "bound",
    )


def test_probed_node_keeps_only_what_the_join_reads_and_joins_the_same(dgx):
    probed = device_model.probed_node(dgx)
    assert {key for device in probed["devices"].values() for key in device} == {
        "kind", "pcie_root", "numa_node", "numa_node_inferred", "physfn"
    }  # fmt: skip
    whole = {"devices": {d["pci_address"]: d for d in dgx["devices"]}}
    driver, device = GPUS["nvidia"]
    attributes = device_model.flat_attributes(device, driver)
    joined = device_model.join_device(driver, attributes, probed, "gpu-0")
    assert (joined["address"], joined["kind"], joined["numa"]) == ("0000:1a:00.0", "gpu", frozenset({0}))
    assert joined == device_model.join_device(driver, attributes, {**probed, **whole}, "gpu-0")
    # a NUMA node the probe inferred (the kernel said -1) still joins
    inferred = {**dgx, "devices": [
        {**d, "numa_node": None, "numa_node_inferred": {"node": 1, "from": "pcie_root"}}
        if d["pci_address"] == "0000:1a:00.0" else d
        for d in dgx["devices"]
    ]}  # fmt: skip
    slim = device_model.join_device(driver, attributes, device_model.probed_node(inferred), "gpu-0")
    assert slim["numa"] == frozenset({1})


def test_the_collection_drivers_devices_are_told_by_their_kind_whatever_the_driver_name(dgx):
    # run split by kind, the GPUs are published under gpu.aligned.dev, their attributes still under dra.aligned.dev/
    options = {"split_gpu_driver": "gpu.aligned.dev"}
    devices = {d["name"]: d for d in dra.devices_from_topology(dgx, options)}
    probed = device_model.probed_node(dgx)
    for name, kind, role in (("gpu-0000-1a-00-0", "gpu", "accelerator"), ("nic-0000-1d-00-0", "nic", "nic")):
        driver = dra.driver_of_kind(kind, options)
        attributes = device_model.flat_attributes(devices[name], driver)
        assert device_model.collection_device(driver, attributes)
        assert device_model.published_kind(driver, attributes) == kind
        assert device_model.join_device(driver, attributes, probed, name)["role"] == role
    nvidia, gpu = GPUS["nvidia"]
    assert not device_model.collection_device(nvidia, device_model.flat_attributes(gpu, nvidia))
    # a NIC of the collection's driver under another name: its published rail wins over the rule, said apart
    nic = {"dra.aligned.dev/kind": "nic", dra.ATTR_RAIL: 3}
    join = {"role": "nic", "address": "0000:1d:00.0"}
    assert device_model.device_rail("nic.aligned.dev", nic, join, {"0000:1d:00.0": 2})[0] == 3
    assert device_model.device_rail("dra.net", {}, join, {"0000:1d:00.0": 2}) == (2, None)


@pytest.mark.parametrize("split", [None, "gpu.aligned.dev"])
def test_a_mig_device_joins_its_parent_gpus_function_as_an_accelerator(dgx, split):
    """A MIG device (kind ``mig``) carries its parent's pciBusID, pcieRoot and numaNode: it is the parent GPU's
    accelerator for the levels, under the main driver's name or a split GPU driver's."""
    from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig

    options = {"split_gpu_driver": split} if split else None
    gpu = next(d for d in dra.devices_from_topology(dgx, options) if d["name"] == "gpu-0000-1a-00-0")
    state = {"memory_slices": 8, "profiles": [
        {"name": "3g.40gb", "slices": 3, "memory_bytes": 40 << 30, "placements": [{"start": 0, "size": 4}]}]}  # fmt: skip
    mig = dra_mig.dynamic_devices(gpu, state)[0]
    driver = dra.driver_of_kind("gpu", options)
    probed = device_model.probed_node(dgx)
    attributes = device_model.flat_attributes(mig, driver)
    assert device_model.collection_device(driver, attributes)
    assert device_model.published_kind(driver, attributes) == "mig"
    joined = device_model.join_device(driver, attributes, probed, mig["name"])
    parent = device_model.join_device(driver, device_model.flat_attributes(gpu, driver), probed, gpu["name"])
    assert (joined["role"], joined["address"], joined["roots"], joined["numa"]) == (
        "accelerator", "0000:1a:00.0", parent["roots"], parent["numa"])  # fmt: skip
