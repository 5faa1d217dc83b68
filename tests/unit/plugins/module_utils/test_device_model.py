# SPDX-License-Identifier: Apache-2.0
"""One device model for the planner, the site summary and the report.

On every fixture tree (the snapshots and synthetic layouts that tests and the
demo inventory use), the report's counts and alignment score are compared with
what the planner itself sees: its nodes (``plan.nodes_from_topologies``) and
its level of a pair (``plan._Node.levels``), worked out here independently of
:mod:`device_model`.
"""

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.aligned.dra.plugins.module_utils import device_model, dra, plan, report
from ansible_collections.aligned.dra.plugins.module_utils.topology import LEVEL_RANK, probe
from ansible_collections.aligned.dra.tests.fixtures.materialize import FIXTURES as FIXTURES_DIR
from ansible_collections.aligned.dra.tests.fixtures.materialize import names
from ansible_collections.aligned.dra.tests.report_sites import topology_of
from ansible_collections.aligned.dra.tests.sysfs_builder import build_tree, load_layout

FIXTURES = names()
KIND = dra.DRIVER_NAME + "/kind"


def planner_view(topology: dict) -> dict:
    """Accelerators, physical NICs and each accelerator's best level, as the planner has them."""
    nodes = plan.nodes_from_topologies({"n": topology})
    node = plan._Node("n", nodes["n"], {dra.DRIVER_NAME})
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
    from ansible_collections.aligned.dra.plugins.module_utils.topology import site_summary, site_summary_markdown

    text = site_summary_markdown(site_summary("s", {"a": topology_of("hwloc-32intel64-8ve")}))
    assert "1 node, 8 GPUs/accelerators, 4 physical NICs, 0 VFs." in text
    assert "As the planner sees them: 8 Vector Engines; 0 RDMA NICs." in text
