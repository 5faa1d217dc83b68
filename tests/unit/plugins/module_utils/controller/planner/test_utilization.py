# SPDX-License-Identifier: Apache-2.0
"""Utilization on the recorded ai-lab set (tests/fixtures/utilization/ai-lab), hand-computed expectations."""

from __future__ import annotations

import json
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims_lib
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import utilization as util
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import rail_node

SET = Path(__file__).resolve().parents[5] / "fixtures" / "utilization" / "ai-lab"
TEAMS = {"llm-train": "llm-training", "vision": "vision-research", "observability": "observability"}


def items(name: str) -> list[dict]:
    return yaml.safe_load((SET / name).read_text())["items"]


def classes() -> list[dict]:
    rendered = claims_lib.render({"drivers": ["dra.aligned.dev", "gpu.nvidia.com", "dra.net"]}, "ai-lab", "1.36")
    return [o for o in rendered["objects"] if o["kind"] == "DeviceClass"]


def topologies() -> dict:
    return {"node-a": json.loads((SET / "topologies" / "node-a.json").read_text())}


PLAN = {
    "templates": [
        {"name": "gpu-nic-pair-1", "satisfiable": True, "aligned_level": "PIX"},
        {"name": "gpu-nic-pair-1-fallback", "satisfiable": True, "aligned_level": "NODE"},
        {"name": "broken", "satisfiable": False, "aligned_level": "SYS"},
    ]
}


@pytest.fixture(scope="module")
def report() -> dict:
    return util.utilization(
        items("slices.yaml"), items("claims.yaml"), classes(), TEAMS, topologies(), site="ai-lab", plan=PLAN
    )


@pytest.mark.parametrize("name", ["slices.yaml", "claims.yaml"])
def test_recorded_set_is_valid_for_the_api(name):
    for obj in items(name):
        kubernetes_validate.validate(obj, "1.36.0", strict=True)


def test_totals_and_claims(report):
    # 7 + 4 + 3 devices (the stale generation's extra GPU is ignored); 5 + 3 + 2 allocated
    assert report["totals"] == {"published": 14, "allocated": 10, "idle": 4, "utilization": 0.714}
    assert report["claims"] == {
        "allocated": 7,
        "pending": 1,
        "admin_access_results": 2,
        "results_outside_slices": 0,
    }


def test_per_node(report):
    nodes = report["nodes"]
    assert [(n, r["published"], r["allocated"], r["idle"]) for n, r in nodes.items()] == [
        ("node-a", 7, 5, 2),
        ("node-b", 4, 3, 1),
        ("node-c", 3, 2, 1),
    ]
    assert nodes["node-a"]["classes"]["aligned-vf"] == {"published": 1, "allocated": 0, "idle": 1, "utilization": 0.0}
    assert set(nodes["node-c"]["classes"]) == {"nvidia-gpu", "dranet-nic"}


def test_per_class(report):
    assert {c: (r["published"], r["allocated"], r["idle"]) for c, r in report["classes"].items()} == {
        "aligned-gpu": (6, 5, 1),
        "aligned-nic": (4, 3, 1),
        "aligned-vf": (1, 0, 1),
        "nvidia-gpu": (2, 1, 1),
        "dranet-nic": (1, 1, 0),
    }


def test_per_team(report):
    teams = report["teams"]
    assert sorted(teams) == [util.UNASSIGNED, "llm-training", "vision-research"]
    assert teams["llm-training"] == {
        "claims": 2,
        "namespaces": ["llm-train"],
        "devices": {"aligned-gpu": 2, "aligned-nic": 2},
        "levels": {"PIX": 1, "NODE": 1},
        "bounds": {},
    }
    assert teams["vision-research"]["claims"] == 4
    assert teams["vision-research"]["devices"] == {"aligned-gpu": 4, "aligned-nic": 1}
    assert teams["vision-research"]["levels"] == {"SYS": 1}
    assert teams[util.UNASSIGNED] == {
        "claims": 1,
        "namespaces": ["adhoc"],
        "devices": {"nvidia-gpu": 1, "dranet-nic": 1},
        "levels": {},
        "bounds": {"PHB": 1},  # one pcieRoot: PHB at worst, not known better
    }


def test_shared_devices(report):
    assert report["shared"] == [
        {
            "node": "node-a",
            "device": "gpu-0000-3d-00-0",
            "kind": "gpu",
            "claims": 2,
            "consumers": 2,
            "capacity": {"memory": {"total": str(80 * 2**30), "consumed": str(60 * 2**30), "share": 0.75}},
        },
        {"node": "node-b", "device": "gpu-0000-9b-00-0", "kind": "gpu", "claims": 1, "consumers": 3, "capacity": {}},
    ]


def test_levels_from_topology_and_from_attributes(report):
    by_claim = {a["claim"]: a for a in report["allocations"]}
    pairs = {c: (a["aligned_level"], a["level_source"]) for c, a in by_claim.items() if "aligned_level" in a}
    assert pairs == {
        "llm-train/pair-a": ("PIX", "topology"),
        "llm-train/pair-b": ("NODE", "topology"),
        "vision/pair-fallback": ("SYS", "attributes"),  # root pci0000:15 vs pci0000:97, NUMA 0 vs 1
        "adhoc/nv-net": ("PHB", "bound"),  # same pcieRoot, no address published: PHB at worst
    }
    assert [a["aligned_level_exact"] for c, a in sorted(by_claim.items()) if "aligned_level" in a] == [
        False,
        True,
        True,
        True,
    ]
    assert by_claim["adhoc/nv-net"]["pairs"] == [
        {
            "gpu": "gpu.nvidia.com/gpu-0",
            "nic": "dra.net/eth1",
            "level": "PHB",
            "exact": False,
            "source": "bound",
        }
    ]
    assert by_claim["vision/pair-fallback"]["devices"] == {
        "aligned-gpu": ["gpu-0000-1b-00-0"],
        "aligned-nic": ["nic-0000-9a-00-0"],
    }
    assert "observability/gpu-monitor" not in by_claim  # admin access only
    assert report["alignment"] == {
        "claims_with_gpus_and_nics": 4,
        "levels": {"PIX": 1, "PXB": 0, "PHB": 0, "NODE": 1, "SYS": 1, "unknown": 0},
        "bounds": {"PHB": 1},
        "level_source": ["attributes", "bound", "topology"],
        "promised_level": "NODE",
        "below_promise": ["vision/pair-fallback"],
        "maybe_below_promise": [],
    }


def test_without_topology_or_classes():
    report = util.utilization(items("slices.yaml"), items("claims.yaml"))
    levels = {a["claim"]: a["aligned_level"] for a in report["allocations"] if "aligned_level" in a}
    assert levels["llm-train/pair-a"] == "PHB"  # same pcieRoot: PHB at worst, without the links
    assert levels["llm-train/pair-b"] == "NODE"
    assert sorted(report["classes"]) == ["dra.aligned.dev/gpu", "dra.aligned.dev/nic", "dra.aligned.dev/vf",
                                         "dra.net/nic", "gpu.nvidia.com/gpu"]  # fmt: skip
    assert report["teams"][util.UNASSIGNED]["claims"] == 7
    assert report["alignment"]["promised_level"] is None


def test_a_vf_gets_the_level_of_its_parent_port():
    slices = items("slices.yaml")
    claim = {
        "metadata": {"name": "vf", "namespace": "llm-train"},
        "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "aligned-gpu"}},
                                          {"name": "v", "exactly": {"deviceClassName": "aligned-vf"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "g", "driver": "dra.aligned.dev", "pool": "node-a", "device": "gpu-0000-3d-00-0"},
            {"request": "v", "driver": "dra.aligned.dev", "pool": "node-a", "device": "vf-0000-1a-00-2"}]}}},
    }  # fmt: skip
    report = util.utilization(slices, [claim], topologies=topologies())
    assert report["allocations"][0]["aligned_level"] == "NODE"
    assert report["allocations"][0]["level_source"] == "topology"


def test_results_of_unpublished_devices_are_counted_apart():
    claim = {
        "metadata": {"name": "gone", "namespace": "x"},
        "status": {"allocation": {"devices": {"results": [
            {"request": "g", "driver": "dra.aligned.dev", "pool": "node-z", "device": "gpu-0000-01-00-0"}]}}},
    }  # fmt: skip
    report = util.utilization(items("slices.yaml"), [claim])
    assert report["claims"]["results_outside_slices"] == 1 and report["totals"]["allocated"] == 0
    with pytest.raises(util.UtilizationError, match="no metadata.name"):
        util.utilization([], [{"metadata": {}}])


def p5_claim(name: str, node: str, gpu: str, nic: str) -> dict:
    return {
        "metadata": {"name": name, "namespace": "llm-train"},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": gpu},
            {"request": "efa", "driver": "dra.net", "pool": node, "device": nic}]}}},
    }  # fmt: skip


def test_p5_claims_get_the_gpus_numa_node_from_its_root_and_unknown_ones_may_be_below_the_promise():
    from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import p5_slices

    # gpu-4 (switch 4, NUMA node 1) with an EFA NIC of switch 1 (NUMA node 0); the second node's NICs
    # publish no NUMA node, so nothing tells where gpu-4 is
    slices = p5_slices("p5-0001") + p5_slices("p5-0002", efa_numa=False)
    claims = [
        p5_claim(n, node, "gpu-4", "pci-0000-61-00-0") for n, node in (("cross", "p5-0001"), ("blind", "p5-0002"))
    ]
    plan = {"templates": [{"name": "t", "satisfiable": True, "aligned_level": "PHB", "aligned_level_exact": False}]}
    report = util.utilization(slices, claims, teams=TEAMS, plan=plan)
    by_claim = {a["claim"]: a for a in report["allocations"]}
    cross, blind = by_claim["llm-train/cross"], by_claim["llm-train/blind"]
    assert (cross["aligned_level"], cross["aligned_level_exact"], cross["level_source"]) == ("SYS", True, "inferred")
    assert cross["pairs"][0]["inferred"] == [
        "gpu.nvidia.com/gpu-4: numaNode 1 from dra.net/pci-0000-91-00-0 (same pcieRoot pci0000:04)"
    ]
    assert (blind["worst_level"], blind["worst_level_exact"], blind["level_source"]) == (None, False, "unknown")
    assert (blind["aligned_level"], blind["aligned_level_exact"]) == (None, False)
    assert report["teams"]["llm-training"]["levels"] == {"SYS": 1, "unknown": 1}
    alignment = report["alignment"]
    assert (alignment["levels"]["SYS"], alignment["levels"]["unknown"], alignment["promised_level"]) == (1, 1, "PHB")
    # the SYS claim got less than promised; the unknown one may have
    assert (alignment["below_promise"], alignment["maybe_below_promise"]) == (["llm-train/cross"], ["llm-train/blind"])
    # a satisfiable template of unknown level promises nothing that can be checked
    plan["templates"].append({"name": "u", "satisfiable": True, "aligned_level": None, "aligned_level_exact": False})
    assert util.utilization(slices, claims, plan=plan)["alignment"]["promised_level"] is None


# a GPU and a NIC behind a VMD domain: no pciBusID or pcieRoot can be published, the address is in the names
VMD_NODE = rail_node([("10000:01:00.0", "pci10000:00", 0)], [("10000:02:00.0", "pci10000:00", 0)])


@pytest.mark.parametrize("fixture", ["dgx-h100", "vmd"])
def test_the_driver_split_by_kind_is_measured_as_one_driver(fixture):
    # the GPUs under gpu.aligned.dev, the NICs under dra.aligned.dev: the same classes, levels and counts
    from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
    from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
    from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

    topology = VMD_NODE if fixture == "vmd" else topology_of(fixture)

    def measured(options: dict) -> dict:
        devices = dra.devices_from_topology(topology, options)
        by_driver: dict[str, list] = {}
        for device in devices:
            by_driver.setdefault(dra.driver_of_kind(dra.kind_of_name(device["name"]), options), []).append(device)
        slices = [s for d, found in sorted(by_driver.items()) for s in dra_slices.resource_slices("n1", found, d)]
        gpu = next(d["name"] for d in devices if d["name"].startswith("gpu-"))
        nic = next(d["name"] for d in devices if d["name"].startswith("nic-"))
        claim = {
            "metadata": {"name": "pair", "namespace": "vision"},
            "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "aligned-gpu"}},
                                              {"name": "n", "exactly": {"deviceClassName": "aligned-nic"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "g", "driver": dra.driver_of_kind("gpu", options), "pool": "n1", "device": gpu},
                {"request": "n", "driver": dra.driver_of_kind("nic", options), "pool": "n1", "device": nic}]}}},
        }  # fmt: skip
        rendered = claims_lib.render({}, "s", "1.36", device_options=options)["objects"]
        found = [o for o in rendered if o["kind"] == "DeviceClass"]
        return util.utilization(slices, [claim], found, TEAMS, {"n1": topology}, site="s")

    one, split = measured({}), measured({"split_gpu_driver": "gpu.aligned.dev"})
    assert split != one  # the GPUs' labels say their driver
    assert json.loads(json.dumps(split).replace("gpu.aligned.dev/", "")) == one
    (allocation,) = split["allocations"]
    assert allocation["level_source"] == "topology" and allocation["aligned_level"] is not None
    if fixture == "vmd":
        assert allocation["aligned_level"] == "PIX"
    assert split["classes"]["aligned-gpu"]["allocated"] == 1 and split["classes"]["aligned-nic"]["allocated"] == 1
