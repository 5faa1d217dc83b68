# SPDX-License-Identifier: Apache-2.0
"""MIG in utilization.json, hand-computed on the DGX H100 fixture (documented H100 80GB geometry: 8 memory
slices; 1g.10gb at 0-6, 1g.10gb+me once, 1g.20gb and 2g.20gb in pairs of slices, 3g.40gb at 0 and 4, 4g.40gb
at 0, 7g.80gb whole).

GPU 0 dynamic with a 1g.10gb at slice 6 and a 3g.40gb at 0-3 allocated leaves slices 4, 5 and 7 free: what can
still be made is two 1g.10gb (4, 5), one +me (NVML's once per GPU), one 1g.20gb or one 2g.20gb (4-5), no
3g (4-7 has 6 taken), no 4g, no 7g; 5 of 8 slices allocated.
"""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import utilization as util
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import utilization_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import summary
from ansible_collections.aligned.dra.tests.support.sites import mig_slices
from ansible_collections.aligned.dra.tests.support.sites import mig_usage_site as site

GIB = 1 << 30
DYNAMIC = {"mode": "dynamic", "gpus": {"indices": [0, 1]}}
TEAMS = {"ml": "team-ml", "vision": "team-vision"}


@pytest.fixture(scope="module")
def topo():
    return site.topology()


@pytest.fixture(scope="module")
def names(topo):
    return site.gpu_names(topo)


def dynamic_report(topo, names, claims=None):
    g0 = names[0]
    claims = claims or [
        site.claim("ml", "a", "node-a", [f"{g0}-mig-1g-10gb-6"]),
        site.claim("ml", "b", "node-a", [f"{g0}-mig-3g-40gb-0"]),
    ]
    return util.utilization(site.slices("node-a", DYNAMIC, topo), claims, None, TEAMS, {"node-a": topo}, site="s")


def test_dynamic_counts_what_can_still_be_made_not_the_overlapping_placements(topo, names):
    mig = dynamic_report(topo, names)["mig"]
    first, second = mig["gpus"]
    assert first["counters_source"] == "counter set"
    assert (first["gpu"], first["mode"], first["memory_slices"], first["slices_source"]) == (
        names[0],
        "dynamic",
        8,
        "counter set",
    )
    counts = {p: (r["published"], r["allocated"], r["idle"]) for p, r in first["profiles"].items()}
    assert counts == {
        "1g.10gb": (3, 1, 2),
        "1g.10gb+me": (1, 0, 1),
        "1g.20gb": (1, 0, 1),
        "2g.20gb": (1, 0, 1),
        "3g.40gb": (1, 1, 0),
        "4g.40gb": (0, 0, 0),
        "7g.80gb": (0, 0, 0),
    }
    # the devices as published: every placement, overlapping (7 + 7 + 4 + 3 + 2 + 1 + 1)
    assert sum(r["placements"] for r in first["profiles"].values()) == 25
    assert (first["memory_slices_allocated"], first["memory_slices_free"]) == (5, 3)
    assert first["gpu_equivalents"] == {"allocated": 0.625, "idle": 0.375, "unpartitioned": 0.0}
    # the untouched GPU: each profile alone as many as fit, capped by NVML's count
    assert {p: r["idle"] for p, r in second["profiles"].items()} == {
        "1g.10gb": 7,
        "1g.10gb+me": 1,
        "1g.20gb": 4,
        "2g.20gb": 3,
        "3g.40gb": 2,
        "4g.40gb": 1,
        "7g.80gb": 1,
    }
    totals = mig["totals"]
    assert totals["gpus"] == 2 and totals["modes"] == {"dynamic": 2} and totals["idle_are_alternatives"]
    assert totals["gpu_equivalents"] == {"gpus": 2, "allocated": 0.625, "idle": 1.375, "unpartitioned": 0.0}
    assert totals["by_profile"]["1g.10gb"] == {"published": 10, "allocated": 1, "idle": 9}
    assert mig["nodes"] == {"node-a": totals}


def test_instances_and_teams_carry_gpu_equivalents_beside_the_counts(topo, names):
    mig = dynamic_report(topo, names)["mig"]
    rows = {i["device"]: i for i in mig["instances"]}
    small = rows[f"{names[0]}-mig-1g-10gb-6"]
    assert (small["profile"], small["start"], small["size"], small["gpu_equivalents"]) == ("1g.10gb", 6, 1, 0.125)
    assert small["claims"] == ["ml/a"] and small["teams"] == ["team-ml"] and small["memory_bytes"] == 10 * GIB
    assert mig["teams"] == {
        "team-ml": {
            "instances": 2,
            "whole_gpus": 0,
            "by_profile": {"1g.10gb": 1, "3g.40gb": 1},
            "gpu_equivalents": 0.625,
            "memory_bytes": 50 * GIB,
            "gpu_equivalents_is_lower_bound": False,
        }
    }


def test_a_dynamic_gpu_allocated_whole_leaves_nothing_to_make(topo, names):
    whole = [site.claim("vision", "w", "node-a", [names[0]])]
    mig = dynamic_report(topo, names, whole)["mig"]
    first = mig["gpus"][0]
    assert first["whole_allocated"] and first["gpu_equivalents"] == {
        "allocated": 1.0,
        "idle": 0.0,
        "unpartitioned": 0.0,
    }
    assert all(r["idle"] == 0 == r["allocated"] for r in first["profiles"].values())
    (row,) = mig["instances"]
    assert row["whole_gpu"] and row["gpu_equivalents"] == 1.0 and row["profile"] is None
    assert mig["teams"]["team-vision"]["whole_gpus"] == 1 and mig["teams"]["team-vision"]["gpu_equivalents"] == 1.0
    assert mig["totals"]["whole_allocated"] == 1


def test_static_counts_instances_and_the_slices_no_instance_takes(topo, names):
    settings = {
        "mode": "static",
        "layout": "small",
        "mig_configs": {"small": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 3}}]},
        "gpus": {"indices": [0]},
    }
    held = [site.claim("vision", "v", "node-b", [f"{names[0]}-mig-1g-10gb-{start}"]) for start in (6,)]
    report = util.utilization(site.slices("node-b", settings, topo), held, None, TEAMS, {"node-b": topo})
    (gpu,) = report["mig"]["gpus"]
    assert gpu["mode"] == "static" and gpu["slices_source"] == "documented" and gpu["memory_slices"] == 8
    assert gpu["profiles"] == {"1g.10gb": {"published": 3, "allocated": 1, "idle": 2, "size": 1}}
    assert gpu["gpu_equivalents"] == {"allocated": 0.125, "idle": 0.25, "unpartitioned": 0.625}
    assert report["mig"]["totals"]["modes"] == {"static": 1} and not report["mig"]["totals"]["idle_are_alternatives"]


def test_a_static_gpu_of_unknown_size_has_no_gpu_equivalents_and_its_team_a_lower_bound(topo, names):
    settings = {"mode": "static", "layout": "half", "mig_configs": site.HALF, "gpus": {"indices": [0]}}
    pool = site.slices("node-b", settings, topo)
    held = [site.claim("vision", "v", "node-b", [f"{names[0]}-mig-3g-40gb-0"])]
    # no probe: the device ID the MIG devices carry gives the documented geometry
    known = util.utilization(pool, held, None, TEAMS, {})["mig"]
    assert known["gpus"][0]["slices_source"] == "documented"
    assert known["gpus"][0]["gpu_equivalents"] == {"allocated": 0.5, "idle": 0.5, "unpartitioned": 0.0}
    for item in pool:
        for device in item["spec"].get("devices") or []:
            device["attributes"].pop("dra.aligned.dev/deviceID", None)
    unknown = util.utilization(pool, held, None, TEAMS, {})["mig"]
    assert unknown["gpus"][0]["gpu_equivalents"] is None and unknown["gpus"][0]["slices_source"] == "unknown"
    assert unknown["totals"]["gpus_of_unknown_size"] == 1 and unknown["totals"]["gpu_equivalents"]["gpus"] == 0
    team = unknown["teams"]["team-vision"]
    assert team["gpu_equivalents_is_lower_bound"] and team["gpu_equivalents"] == 0.0 and team["instances"] == 1


def test_per_node_and_per_team(topo, names):
    static = {"mode": "static", "layout": "half", "mig_configs": site.HALF, "gpus": {"indices": [0]}}
    pool = site.slices("node-a", DYNAMIC, topo) + site.slices("node-b", static, topo)
    claims = [
        site.claim("ml", "a", "node-a", [f"{names[0]}-mig-1g-10gb-6"]),
        site.claim("vision", "v", "node-b", [f"{names[0]}-mig-3g-40gb-0"]),
        site.claim("vision", "w", "node-b", [f"{names[0]}-mig-3g-40gb-4"]),
    ]
    mig = util.utilization(pool, claims, None, TEAMS, {"node-a": topo, "node-b": topo})["mig"]
    assert set(mig["nodes"]) == {"node-a", "node-b"}
    assert mig["nodes"]["node-b"]["by_profile"] == {"3g.40gb": {"published": 2, "allocated": 2, "idle": 0}}
    assert mig["nodes"]["node-b"]["gpu_equivalents"]["allocated"] == 1.0
    # node-a: GPU 0's 1g at slice 6 leaves one 3g (0-3), GPU 1 two
    assert mig["nodes"]["node-a"]["by_profile"]["3g.40gb"] == {"published": 3, "allocated": 0, "idle": 3}
    assert mig["totals"]["by_profile"]["3g.40gb"] == {"published": 5, "allocated": 2, "idle": 3}
    assert mig["teams"]["team-vision"]["by_profile"] == {"3g.40gb": 2}
    assert mig["teams"]["team-vision"]["gpu_equivalents"] == 1.0
    assert mig["teams"]["team-ml"]["gpu_equivalents"] == 0.125


def test_only_the_collections_mig_devices_are_recognised(topo):
    # NVIDIA's driver's MIG devices carry gpu.nvidia.com attributes, not dra.aligned.dev/kind "mig"
    assert "mig" not in util.utilization(mig_slices.nvidia_mig_slices(), [], None, {}, {})
    # a site without MIG has no mig section
    assert "mig" not in util.utilization(site.slices("node-a", {"mode": "off"}, topo), [], None, {}, {})


def test_device_fractions_cover_every_placement_allocated_or_not(topo, names):
    mig = dynamic_report(topo, names)["mig"]
    fractions = utilization_mig.device_fractions(mig)
    assert fractions[("node-a", f"{names[0]}-mig-3g-40gb-4")] == 0.5
    assert fractions[("node-a", f"{names[1]}-mig-1g-10gb-0")] == 0.125
    assert fractions[("node-a", f"{names[1]}-mig-7g-80gb-0")] == 1.0


def test_used_versus_allocated_per_instance_from_the_usage_window(topo, names):
    mig = dynamic_report(topo, names)["mig"]
    small = f"{names[0]}-mig-1g-10gb-6"
    window = site.usage_window(
        [
            {
                "namespace": "ml",
                "claim": "a",
                "node": "node-a",
                "device": small,
                "uuid": "MIG-a",
                "used": [4 * GIB] * 5 + [2 * GIB] * 5,
                "request": 10 * GIB,
                "sm": [0.1] * 10,
                "sms_busy": [0.3] * 10,
            }
        ]
    )
    used = summary.summarise(window, {"ml": "team-ml"}, {}, mig=utilization_mig.device_fractions(mig))
    (claim,) = used["claims"]
    # weighed by its memory slices: 1 of 8, ten minutes
    assert claim["kind"] == "mig" and claim["gpu_fraction"] == 0.125
    assert claim["gpu_hours"]["allocated"] == pytest.approx(0.125 * 10 / 60, abs=1e-4)
    assert used["totals"]["claims_without_size"] == 0
    utilization_mig.with_usage(mig, used)
    rows = {i["device"]: i for i in mig["instances"]}
    measured = rows[small]["usage"]
    assert measured["status"] == "measured" and measured["memory_allocated_bytes"] == 10 * GIB
    assert measured["memory_used_bytes"]["max"] == 4 * GIB and measured["memory_used_bytes"]["p50"] == 2 * GIB
    assert measured["used_over_allocated"] == {"p95": 0.4, "max": 0.4}
    assert measured["sm_ratio_p95"] == 0.1 and not measured["peak_lower_bound"]  # a share of time
    assert measured["sms_busy_ratio_p95"] == 0.3  # GPM: a share of the instance's SMs
    # the 3g the window never names: not measured, said, never zero
    missing = rows[f"{names[0]}-mig-3g-40gb-0"]["usage"]
    assert missing["status"] == "not measured" and "memory_used_bytes" not in missing
    assert mig["teams"]["team-ml"]["instances_measured"] == 1 == mig["teams"]["team-ml"]["instances_not_measured"]


def test_without_the_slices_a_mig_claim_is_of_unknown_size_not_a_whole_gpu():
    window = site.usage_window(
        [
            {
                "namespace": "ml",
                "claim": "a",
                "node": "node-a",
                "device": "gpu-0000-1a-00-0-mig-1g-10gb-6",
                "uuid": "MIG-a",
                "used": [GIB] * 10,
                "request": 10 * GIB,
            }
        ]
    )
    (claim,) = summary.summarise(window, {}, {})["claims"]
    assert claim["kind"] == "mig" and claim["gpu_fraction"] is None and claim["gpu_hours"] is None


def test_without_the_counter_set_the_memory_slices_decide_and_without_them_idle_is_unknown(topo, names):
    pool = site.slices("node-a", DYNAMIC, topo)
    for item in pool:
        item["spec"].pop("sharedCounters", None)
    held = [site.claim("ml", "b", "node-a", [f"{names[0]}-mig-3g-40gb-0"])]
    slices_only = util.utilization(pool, held, None, TEAMS, {"node-a": topo})["mig"]["gpus"][0]
    assert slices_only["counters_source"] == "memory slices" and slices_only["slices_source"] == "documented"
    assert (
        slices_only["profiles"]["3g.40gb"]["idle"] == 1 and slices_only["profiles"]["1g.10gb"]["idle"] == 3
    )  # 4, 5, 6: none starts at 7
    for item in pool:
        for device in item["spec"].get("devices") or []:
            device["attributes"].pop("dra.aligned.dev/deviceID", None)
    unknown = util.utilization(pool, held, None, TEAMS, {})["mig"]
    first = unknown["gpus"][0]
    assert first["counters_source"] is None and first["gpu_equivalents"] is None
    assert first["profiles"]["3g.40gb"] == {"published": None, "allocated": 1, "idle": None, "placements": 2, "size": 4}
    assert unknown["totals"]["by_profile"]["3g.40gb"]["idle_is_lower_bound"]
