# SPDX-License-Identifier: Apache-2.0
"""The replay's ``mig`` policy: pods rounded up to the smallest profile, placed by the driver's device order
(first fit) and by a fragmentation-aware order, stranded slices, every placement listed."""

from __future__ import annotations

import json
import random

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import mig as mig_engine
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import result as replay_result

A100_40 = "0x20b0"  # 8 memory slices: 1g.5gb, 1g.10gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb (documented)
H100 = "0x2330"  # 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb
GIB = 1 << 30
DYNAMIC = {"mode": "dynamic"}


def _topology(device_id: str, count: int, plain: int = 0) -> dict:
    devices = [
        {"kind": "gpu", "vendor_id": "0x10de", "device_id": device_id, "pci_address": f"0000:{7 + i:02x}:00.0"}
        for i in range(count)
    ]
    devices += [
        {"kind": "gpu", "vendor_id": "0x10de", "device_id": "0x1db6", "pci_address": f"0000:{0x40 + i:02x}:00.0"}
        for i in range(plain)
    ]
    return {"devices": devices}


def _site(tmp_path, nodes: dict[str, tuple[str, int, int]]) -> str:
    """A plan of ``{node: (device id, MIG-capable GPUs, GPUs without MIG)}`` and each node's probe."""
    (tmp_path / "nodes").mkdir()
    for name, (device_id, count, plain) in nodes.items():
        (tmp_path / "nodes" / f"{name}.json").write_text(json.dumps(_topology(device_id, count, plain)))
    plan = {
        "schema_version": 1,
        "kubernetes_version": "1.36",
        "nodes": sorted(nodes),
        "classes": {"aligned-gpu": {"nodes": {n: c + p for n, (_d, c, p) in nodes.items()}}},
        "templates": [],
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    return str(tmp_path / "plan.json")


def _trace(tmp_path, rows: list[str], header: str = "name,submit,end,gpus,gpu_memory") -> str:
    (tmp_path / "trace.csv").write_text("\n".join([header, *rows]) + "\n")
    return str(tmp_path / "trace.csv")


def _mig(tmp_path, rows, nodes, mig, mode="saturation", **options):
    return replay_result.replay(
        _trace(tmp_path, rows), "csv", "mig", plan=_site(tmp_path, nodes), mode=mode, mig=mig, **options
    )


def _where(order: dict) -> list[tuple]:
    return [(p["pod"], p["node"], p["gpu"], p["profile"], p["start"]) for p in order["placements"]]


def test_a_share_is_rounded_up_to_the_smallest_profile_by_memory_else_by_compute(tmp_path):
    rows = [
        "by-memory,0,,0.1,15Gi",  # 15 GiB: 1g.20gb, whatever its share
        "by-compute,1,,0.25,",  # a quarter of 7 compute slices: 2 slices, 2g.20gb
        "tenth,2,,0.1,",  # 0.7 slice: 1g.10gb
        "half,3,,0.5,",  # 3.5 slices: 4g.40gb
        "big-memory,4,,0.1,30Gi",  # 3g.40gb: fewer memory slices than 4g.40gb
    ]
    run = _mig(tmp_path, rows, {"n1": (H100, 4, 0)}, {"n1": DYNAMIC})
    placed = {p["pod"]: (p["profile"], p["sized_by"]) for p in run["mig"]["orders"]["first_fit"]["placements"]}
    assert placed == {
        "by-memory": ("1g.20gb", "gpu_memory"),
        "by-compute": ("2g.20gb", "compute_share"),
        "tenth": ("1g.10gb", "compute_share"),
        "half": ("4g.40gb", "compute_share"),
        "big-memory": ("3g.40gb", "gpu_memory"),
    }
    assert run["mig"]["orders"]["first_fit"]["sized_by"] == {"compute_share": 3, "gpu_memory": 2}


def test_measured_peak_use_sizes_a_pod_before_its_gpu_memory(tmp_path):
    (tmp_path / "usage.csv").write_text("pod,timestamp,memory_used_bytes\na,0,4294967296\na,5,34359738368\n")
    run = _mig(
        tmp_path,
        ["a,0,10,0.1,5Gi", "b,0,10,0.1,5Gi"],
        {"n1": (H100, 1, 0)},
        {"n1": DYNAMIC},
        mode="timeline",
        usage=str(tmp_path / "usage.csv"),
        gpu_memory="80Gi",
    )
    placed = {p["pod"]: (p["profile"], p["sized_by"]) for p in run["mig"]["orders"]["first_fit"]["placements"]}
    assert placed == {"a": ("3g.40gb", "measured"), "b": ("1g.10gb", "gpu_memory")}  # a's peak: 32 GiB
    assert run["mig"]["sizing"]["measured_pods"] == 1


def test_first_fit_follows_the_drivers_order_so_a_4g_still_fits_after_three_1g(tmp_path):
    rows = ["a,0,,0.1,4Gi", "b,1,,0.1,4Gi", "c,2,,0.1,4Gi", "d,3,,0.1,20Gi"]
    run = _mig(tmp_path, rows, {"n1": (A100_40, 1, 0)}, {"n1": DYNAMIC})
    where = _where(run["mig"]["orders"]["first_fit"])
    assert where == [
        ("a", "n1", "0000:07:00.0", "1g.5gb", 6),
        ("b", "n1", "0000:07:00.0", "1g.5gb", 5),
        ("c", "n1", "0000:07:00.0", "1g.5gb", 4),
        ("d", "n1", "0000:07:00.0", "3g.20gb", 0),  # 20 GiB: the smallest, 3g.20gb, at the only free start
    ]
    first = run["mig"]["orders"]["first_fit"]["placements"][0]
    assert first["device"] == "gpu-0000-07-00-0-mig-1g-5gb-6"
    assert run["pods_placed"] == 4 and run["first_unplaced"] is None and run["gpus_total"] == 1


def test_fragmentation_aware_keeps_a_free_gpu_whole_where_first_fit_strands_it(tmp_path):
    # two H100s on one node; x and y fill GPU 0, z takes a 1g on GPU 1; x and y leave; w (1g) comes, then v
    # needs a GPU whole: first fit put w on GPU 0 (the first in order), fragmentation-aware beside z
    rows = [
        "x,0,30,0.55,",  # 4g.40gb
        "y,1,30,0.4,",  # 3g.40gb
        "z,2,,0.1,",  # 1g.10gb
        "w,40,,0.1,",
        "v,50,,1,",
    ]
    run = _mig(tmp_path, rows, {"n1": (H100, 2, 0)}, {"n1": DYNAMIC}, mode="timeline")
    first, aware = run["mig"]["orders"]["first_fit"], run["mig"]["orders"]["fragmentation_aware"]
    # docs/replay.md's worked example: x and y fill GPU 0, z on GPU 1 at the driver's first 1g placement
    for order in (first, aware):
        assert _where(order)[:3] == [
            ("x", "n1", "0000:07:00.0", "4g.40gb", 0),
            ("y", "n1", "0000:07:00.0", "3g.40gb", 4),
            ("z", "n1", "0000:08:00.0", "1g.10gb", 6),
        ]
    assert ("w", "n1", "0000:07:00.0", "1g.10gb", 6) in _where(first)
    assert ("w", "n1", "0000:08:00.0", "1g.10gb", 5) in _where(aware)
    assert ("v", "n1", "0000:07:00.0", None, 0) in _where(aware)
    assert first["gpu_pods_placed"] == 4 and aware["gpu_pods_placed"] == 5
    assert [p["pod"] for p in first["not_placed"]] == ["v"]
    # stranded: when v found no GPU whole, 7 memory slices free on each GPU
    assert first["stranded"] == {"pod": "v", "time": 50, "slices": 14, "gpus": 2}
    assert aware["stranded"] is None and aware["not_placed"] == []
    assert "no free GPU whole device (14 memory slices free on 2 GPUs)" == first["not_placed"][0]["reason"]
    assert run["first_unplaced"]["name"] == "v" and run["timeline"]["unstarted"] == ["v"]
    assert first["gpus_needed"]["peak"] == 2 and aware["gpus_needed"]["peak"] == 2


def test_fragmentation_aware_takes_a_static_instance_before_cutting_a_dynamic_gpu(tmp_path):
    static = {
        "mode": "static",
        "layout": "small",
        "mig_configs": {"small": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]},
    }
    rows = ["small,0,,0.1,", "whole,1,,1,"]
    run = _mig(tmp_path, rows, {"a": (H100, 1, 0), "b": (H100, 1, 0)}, {"a": DYNAMIC, "b": static})
    first, aware = run["mig"]["orders"]["first_fit"], run["mig"]["orders"]["fragmentation_aware"]
    assert _where(first) == [("small", "a", "0000:07:00.0", "1g.10gb", 6)]
    assert first["not_placed"][0]["pod"] == "whole" and first["pods_not_tried"] == 0
    # a's 7 free slices and b's 7 free 1g instances
    assert first["stranded"] == {"pod": "whole", "time": 1, "slices": 14, "gpus": 2}
    assert _where(aware) == [("small", "b", "0000:07:00.0", "1g.10gb", 0), ("whole", "a", "0000:07:00.0", None, 0)]
    assert aware["profiles"] == {"1g.10gb": 1, "GPU whole": 1}
    assert run["mig"]["gpu_models"] == {"H100-SXM5-80GB (dynamic)": 1, "H100-SXM5-80GB (static)": 1}


def test_a_static_gpu_takes_only_its_instances_and_no_whole_gpu(tmp_path):
    static = {
        "mode": "static",
        "layout": "half",
        "mig_configs": {"half": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}]},
    }
    rows = ["a,0,,0.1,", "b,1,,0.4,", "c,2,,2,"]
    run = _mig(tmp_path, rows, {"n1": (A100_40, 2, 0)}, {"n1": static}, mode="timeline")
    first = run["mig"]["orders"]["first_fit"]
    assert _where(first) == [("b", "n1", "0000:07:00.0", "3g.20gb", 0)]
    reasons = {p["pod"]: p["reason"] for p in first["not_placed"]}
    assert reasons["a"].startswith("no free 1g.5gb device")  # the layout has no 1g instance
    assert reasons["c"] == (
        "a pod of whole GPUs needs the GPU whole, which only dynamic MIG GPUs of Hopper and newer publish"
    )


def test_a_dynamic_a100_takes_no_pod_whole_where_an_h100_does(tmp_path):
    """Ampere changes MIG mode only with a reset: its GPU whole is not published, so whole-GPU pods and shares
    no profile holds go to the H100; on an A100-only site they are not placed, with the reason."""
    rows = ["whole,0,,1,", "small,1,,0.1,"]
    run = _mig(tmp_path, rows, {"a": (A100_40, 1, 0), "h": (H100, 1, 0)}, {"a": DYNAMIC, "h": DYNAMIC})
    first = run["mig"]["orders"]["first_fit"]
    assert _where(first) == [("whole", "h", "0000:07:00.0", None, 0), ("small", "a", "0000:07:00.0", "1g.5gb", 6)]
    assert first["not_placed"] == []
    alone = tmp_path / "alone"
    alone.mkdir()
    rows = ["whole,0,,1,", "big,1,,0.5,45Gi", "small,2,,0.1,"]
    run = _mig(alone, rows, {"a": (A100_40, 2, 0)}, {"a": DYNAMIC}, mode="timeline")
    first = run["mig"]["orders"]["first_fit"]
    reasons = {p["pod"]: p["reason"] for p in first["not_placed"]}
    assert reasons == {
        "whole": "a pod of whole GPUs needs the GPU whole, which only dynamic MIG GPUs of Hopper and newer publish",
        "big": "larger than every profile and every memory of a GPU published whole",
    }
    assert _where(first) == [("small", "a", "0000:07:00.0", "1g.5gb", 6)]
    assert "GPU whole" not in first["profiles"]


def test_whole_gpu_pods_take_dynamic_gpus_whole_on_one_node_and_each_is_listed(tmp_path):
    rows = ["pair,0,,2,", "big,1,,0.5,60Gi", "huge,2,,0.5,90Gi"]
    run = _mig(tmp_path, rows, {"n1": (H100, 3, 0)}, {"n1": DYNAMIC})
    first = run["mig"]["orders"]["first_fit"]
    assert _where(first) == [
        ("pair", "n1", "0000:07:00.0", None, 0),
        ("pair", "n1", "0000:08:00.0", None, 0),
        ("big", "n1", "0000:09:00.0", "7g.80gb", 0),
    ]
    assert all(p["size"] == 8 for p in first["placements"])
    assert [p["pod"] for p in first["not_placed"]] == ["huge"] and run["first_unplaced"]["name"] == "huge"
    assert run["pods_placed"] == 2 and run["shares_of"]["allocated_milli"] == 3000


def test_a_share_larger_than_every_profile_and_the_gpu_is_not_placed_with_the_reason(tmp_path):
    run = _mig(tmp_path, ["huge,0,,0.5,90Gi"], {"n1": (H100, 1, 0)}, {"n1": DYNAMIC})
    first = run["mig"]["orders"]["first_fit"]
    assert first["not_placed"][0]["reason"] == "larger than every profile and every memory of a GPU published whole"
    assert run["first_unplaced"]["needs"].startswith("90 GiB of memory (gpu_memory): nothing on H100-SXM5-80GB")


def test_gpus_without_mig_are_not_used_and_said(tmp_path):
    run = _mig(tmp_path, ["a,0,,0.1,"], {"n1": (H100, 2, 2), "cpu": (H100, 0, 0), "n2": (H100, 0, 4)}, {"n1": DYNAMIC})
    assert run["gpus_total"] == 2 and run["mig"]["gpus"] == 2 and run["mig"]["gpus_without_mig"] == 6
    assert "policy mig: 6 GPU(s) of the site without MIG are not used (MIG GPUs only)" in run["nodes"]["notes"]
    assert run["mig"]["sources"] == {"documented": 2}


def test_mig_needs_settings_and_a_plan(tmp_path):
    with pytest.raises(ReplayError, match="no host of mig has aligned_dra_mig"):
        _mig(tmp_path, ["a,0,,0.1,"], {"n1": (H100, 1, 0)}, {"n1": {"mode": "off"}})
    trace = str(tmp_path / "trace.csv")
    (tmp_path / "nodes.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1000,1,\n")
    with pytest.raises(ReplayError, match="not on an openb node list"):
        replay_result.replay(trace, "csv", "mig", nodes=str(tmp_path / "nodes.csv"), mig={"n1": DYNAMIC})


def _brute(site, sizing, order):
    """Every GPU and device read for the pod: the first in order, or the smallest fragmentation key."""
    found = None
    for gpu in site.gpus:
        target = gpu.kind.target(sizing)
        if target is False:
            continue
        for slot in gpu.kind.slots:
            if slot.profile != target or gpu.state & slot.mask:
                continue
            if order == mig_engine.FIRST_FIT:
                key = (gpu.position, slot.position)
            else:
                after = gpu.state | slot.mask
                before_counts, after_counts = gpu.kind.counts(gpu.state), gpu.kind.counts(after)
                loss = tuple(b - a for b, a in zip(before_counts, after_counts, strict=True))
                key = (loss, gpu.kind.free_slices(after), gpu.position, slot.position)
            if found is None or key < found[0]:
                found = (key, gpu, slot)
    return None if found is None else (found[1], found[2])


@pytest.mark.parametrize("seed", range(6))
def test_the_indexed_search_finds_what_reading_every_gpu_finds(seed):
    rng = random.Random(seed)
    topology = _topology(A100_40, 3)
    static = {
        "mode": "static",
        "layout": "mixed",
        "mig_configs": {"mixed": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 3, "2g.10gb": 2}}]},
    }
    nodes = [(f"n{i}", mig_model.node_gpus(topology, DYNAMIC if i % 3 else static)) for i in range(4)]
    site = mig_engine.Site(nodes)
    held = []
    for step in range(120):
        if held and rng.random() < 0.35:
            gpu, slot = held.pop(rng.randrange(len(held)))
            site.give_back(gpu, slot)
            continue
        sizing = rng.choice([("compute_share", rng.choice([100, 250, 400, 550, 1000])), ("whole", 1)])
        order = rng.choice(mig_engine.ORDERS)
        found, expected = site.find_one(sizing, order), _brute(site, sizing, order)
        assert (found is None) == (expected is None), (step, sizing, order)
        if found is not None:
            assert (found[0].position, found[1].position) == (expected[0].position, expected[1].position)
            site.take(*found)
            held.append(found)
    assert site.gpus_in_use() == len({gpu.position for gpu, _slot in held})
    free = sum(gpu.kind.free_slices(gpu.state) for gpu in site.gpus)
    assert site.free_slices() == (free, sum(1 for g in site.gpus if g.kind.free_slices(g.state)))
