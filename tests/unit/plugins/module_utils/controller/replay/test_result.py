# SPDX-License-Identifier: Apache-2.0
"""The replay result: honest shares with their denominator, the fallback of fractional, timeline figures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError, result

FIXTURES = Path(__file__).resolve().parents[5] / "fixtures" / "replay"
PODS = str(FIXTURES / "openb-pods.csv")
NODES = str(FIXTURES / "openb-nodes.csv")


def test_saturation_on_the_openb_fixture_worked_by_hand():
    # pack: pod-01 and pod-02 (500 milli each) go to node-c (1 T4, the fullest), pod-03 (2 GPUs, V100) to
    # node-b, pod-04 (CPU only) to node-c; pod-05 wants a T4 and node-c has nothing left: the stop.
    whole = result.replay(PODS, nodes=NODES, policy="whole")
    assert (whole["pods_placed"], whole["gpu_pods_placed"], whole["pods_not_tried"], whole["gpus_total"]) == (
        4,
        2 + 1,
        5,
        7,
    )
    assert whole["first_unplaced"] == {
        "name": "pod-05",
        "line": 6,
        "created": 40,
        "needs": "1 whole GPU(s), 4000 CPU milli, 8192 MiB, a GPU model among T4",
    }
    assert whole["shares_of"] == {
        "basis": "at saturation",
        "allocated_milli": 4000,
        "requested_milli": 3000,
        "capacity_milli": 7000,
    }
    assert (whole["gpu_allocated_share"], whole["gpu_requested_share"]) == (4000 / 7000, 3000 / 7000)
    fractional = result.replay(PODS, nodes=NODES, policy="fractional")
    assert fractional["shares_of"]["allocated_milli"] == fractional["shares_of"]["requested_milli"] == 3000
    assert fractional["policy_applied"] == "fractional" and fractional["fallback"] is None
    assert "timeline" not in fractional and "teams" not in fractional
    assert fractional["trace"] == {
        "path": PODS,
        "format": "openb",
        "pods": 10,
        "gpu_pods": 8,
        "cpu_pods": 2,
        "gpu_requested_milli": 9300,
        "gpu_memory_mib": None,
        "gpu_spec_not_applied": 0,
    }
    assert fractional["nodes"]["count"] == 4 and fractional["nodes"]["gpu_nodes"] == 3


def test_first_unplaced_is_null_when_every_pod_is_placed(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("name,submit,gpus\na,0,0.5\nb,1,0.5\n")
    out = result.replay(str(trace), "csv", nodes=NODES, policy="fractional")
    assert out["first_unplaced"] is None and out["pods_placed"] == 2 and out["pods_not_tried"] == 0


@pytest.mark.parametrize("start", [0, 1_700_000_000])
def test_timeline_shares_are_time_weighted_over_the_window(tmp_path, start):
    """The window runs from the first pod's creation: a trace of a real clock (1.7e9 s) gives the same shares."""
    trace = tmp_path / "t.csv"
    # one GPU: a 0..10 and c 10..20 take it whole; b (5..30) finds it taken and never starts
    rows = [("a", 0, 10, "1"), ("b", 5, 30, "1"), ("c", 10, 20, "0.5")]
    trace.write_text("name,submit,end,gpus\n" + "".join(f"{n},{start + s},{start + e},{g}\n" for n, s, e, g in rows))
    nodes = tmp_path / "n.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn,1000,1000,1,\n")
    out = result.replay(str(trace), "csv", nodes=str(nodes), policy="whole", mode="timeline")
    assert out["timeline"] == {
        "start": start,
        "end": start + 30,
        "time": [start, start + 10, start + 20],
        "occupied_milli": [1000, 1000, 0],
        "requested_milli": [1000, 500, 0],
        "peak": {"occupied": {"milli": 1000, "at": start}, "requested": {"milli": 1000, "at": start}},
        "unstarted": ["b"],
        "unstarted_gpu_pods": 1,
    }
    assert out["shares_of"] == {
        "basis": "time-weighted mean",
        "allocated_milli_seconds": 20000,
        "requested_milli_seconds": 15000,
        "capacity_milli": 1000,
        "window_seconds": 30,
    }
    assert out["gpu_allocated_share"] == 20000 / 30000 and out["gpu_requested_share"] == 0.5
    assert out["first_unplaced"]["name"] == "b" and out["pods_placed"] == 2


def test_a_trace_of_one_instant_reports_that_instant(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("name,submit,gpus\na,7,0.25\nb,7,1\n")
    out = result.replay(str(trace), "csv", nodes=NODES, policy="fractional", mode="timeline")
    assert out["shares_of"]["basis"] == "at the trace's only instant"
    assert (out["shares_of"]["allocated_milli"], out["gpu_requested_share"]) == (1250, 1250 / 7000)


def test_a_trace_without_pods_says_so(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("name,submit,gpus\n")
    out = result.replay(str(trace), "csv", nodes=NODES, mode="timeline")
    assert out["shares_of"]["basis"] == "no pods" and out["pods_placed"] == 0
    assert (out["gpu_allocated_share"], out["gpu_requested_share"], out["timeline"]["start"]) == (0.0, 0.0, None)


def test_no_gpu_leaves_the_shares_unknown(tmp_path):
    nodes = tmp_path / "n.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\ncpu,64000,1000000,0,\n")
    out = result.replay(PODS, nodes=str(nodes), policy="whole")
    assert out["gpus_total"] == 0 and out["gpu_allocated_share"] is None and out["gpu_requested_share"] is None
    assert out["first_unplaced"]["name"] == "pod-01"


def test_fractional_falls_back_to_whole_where_the_minor_renders_no_share():
    old = result.replay(PODS, plan=str(FIXTURES / "plan-1.35.json"), policy="fractional")
    whole = result.replay(PODS, plan=str(FIXTURES / "plan-1.35.json"), policy="whole")
    assert old["policy"] == "fractional" and old["policy_applied"] == "whole"
    assert "shared ResourceClaim fractional-gpu-shared" in old["fallback"]
    same = ("pods_placed", "gpu_pods_placed", "gpu_allocated_share", "gpu_requested_share", "first_unplaced")
    assert {k: old[k] for k in same} == {k: whole[k] for k in same}
    new = result.replay(PODS, plan=str(FIXTURES / "plan-1.36.json"), policy="fractional")
    assert new["policy_applied"] == "fractional" and new["fallback"] is None
    assert new["pods_placed"] > old["pods_placed"]


def test_a_plan_limits_neither_cpu_nor_models_and_says_so():
    out = result.replay(PODS, plan=str(FIXTURES / "plan-1.36.json"), policy="whole")
    assert out["nodes"]["limits"] == {"cpu": False, "memory": False, "gpu_model": False}
    assert out["trace"]["gpu_spec_not_applied"] == 2 and "fractional_reason" not in out["nodes"]
    assert out["nodes"]["gpu_class"] == "aligned-gpu" and out["gpus_total"] == 6
    # what the first pod left out needed: GPUs only, CPU and memory were not limited
    timeline = result.replay(PODS, plan=str(FIXTURES / "plan-1.36.json"), policy="fractional", mode="timeline")
    assert timeline["first_unplaced"]["needs"] == "4 whole GPU(s)" and timeline["first_unplaced"]["name"] == "pod-08"


def test_teams_of_the_generic_trace():
    out = result.replay(
        str(FIXTURES / "generic.csv"), "csv", plan=str(FIXTURES / "plan-1.36.json"), policy="fractional"
    )
    assert out["teams"] == {
        "llm": {"pods": 3, "pods_placed": 3, "gpu_pods": 2, "gpu_pods_placed": 2},
        "vision": {"pods": 2, "pods_placed": 2, "gpu_pods": 2, "gpu_pods_placed": 2},
    }
    assert out["trace"]["gpu_memory_mib"] == (40 + 10 + 20 + 80) * 1024
    assert set(out["tiers"]) == {"production", "research", "batch"}


def test_teams_and_tiers_count_the_pods_left_out(tmp_path):
    trace = tmp_path / "t.csv"
    # one GPU: a takes it whole, b (same team, another tier) finds nothing; c names no team nor tier
    trace.write_text("name,submit,gpus,team,tier,cpu\na,0,1,vision,prod,\nb,1,0.5,vision,batch,\nc,2,0,,,1\n")
    nodes = tmp_path / "n.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn,4000,1000,1,\n")
    out = result.replay(str(trace), "csv", nodes=str(nodes), policy="fractional", mode="timeline")
    assert out["teams"] == {
        "": {"pods": 1, "pods_placed": 1, "gpu_pods": 0, "gpu_pods_placed": 0},
        "vision": {"pods": 2, "pods_placed": 1, "gpu_pods": 2, "gpu_pods_placed": 1},
    }
    assert out["tiers"] == {
        "": {"pods": 1, "pods_placed": 1, "gpu_pods": 0, "gpu_pods_placed": 0},
        "batch": {"pods": 1, "pods_placed": 0, "gpu_pods": 1, "gpu_pods_placed": 0},
        "prod": {"pods": 1, "pods_placed": 1, "gpu_pods": 1, "gpu_pods_placed": 1},
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"nodes": NODES, "plan": NODES}, "nodes, plan: give exactly one of them"),
        ({}, "nodes, plan: give exactly one of them"),
        ({"nodes": NODES, "policy": "half"}, "policy: 'half' is not one of whole, fractional"),
        ({"nodes": NODES, "order": "random"}, "order: 'random' is not one of pack, spread"),
        ({"nodes": NODES, "mode": "live"}, "mode: 'live' is not one of saturation, timeline"),
    ],
)
def test_wrong_options_are_named(args, message):
    with pytest.raises(ReplayError, match=message):
        result.replay(PODS, **args)


# -- thin: placed by request, limits promised -----------------------------------------------------


def _one_gpu_node(tmp_path):
    nodes = tmp_path / "n.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,64000,1000000,1,V100\n")
    return str(nodes)


def test_thin_places_by_request_and_reports_promised_against_guaranteed(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("name,submit,gpus,gpu_limit\na,0,0.25,0.5\nb,1,0.25,\nc,2,0.5,1\nd,3,0.25,0.5\n")
    nodes = _one_gpu_node(tmp_path)
    runs = {p: result.replay(str(trace), "csv", nodes=nodes, policy=p) for p in ("whole", "fractional", "thin")}
    assert [runs[p]["pods_placed"] for p in ("whole", "fractional", "thin")] == [1, 3, 3]
    assert runs["thin"]["first_unplaced"]["name"] == "d"
    assert "thin" not in runs["whole"] and "thin" not in runs["fractional"]
    assert runs["thin"]["thin"] == {
        "basis": "at saturation",
        "time": None,
        "promised_milli": 1750,
        "guaranteed_milli": 1000,
        "over_request_milli": 750,
        "promised_share": 1.75,
        "guaranteed_share": 1.0,
        "pods_with_limit": 2,
    }
    same = ("pods_placed", "gpu_allocated_share", "gpu_requested_share", "first_unplaced")
    assert {k: runs["thin"][k] for k in same} == {k: runs["fractional"][k] for k in same}


def test_thin_in_timeline_mode_reports_the_peak_of_promised(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("name,submit,end,gpus,gpu_limit\na,0,10,0.25,0.5\nb,5,20,0.5,1\nc,10,,0.25,\n")
    out = result.replay(str(trace), "csv", nodes=_one_gpu_node(tmp_path), policy="thin", mode="timeline")
    thin = out["thin"]
    assert (thin["time"], thin["promised_milli"], thin["guaranteed_milli"]) == (5, 1500, 750)
    assert thin["basis"] == "at the peak of promised" and out["pods_placed"] == 3


def test_thin_falls_back_to_whole_as_fractional_does():
    old = result.replay(PODS, plan=str(FIXTURES / "plan-1.35.json"), policy="thin")
    assert old["policy_applied"] == "whole" and "shared ResourceClaim fractional-gpu-shared" in old["fallback"]
    assert "thin" not in old
    new = result.replay(PODS, plan=str(FIXTURES / "plan-1.36.json"), policy="thin")
    assert new["policy_applied"] == "thin" and new["thin"]["promised_milli"] == new["thin"]["guaranteed_milli"]


# -- on measured use: the options, the GPUs' memory, what the result gains -------------------------------------


def _usage(tmp_path, text: str = "pod,timestamp,memory_used_bytes\npod-01,0,1000\n") -> str:
    path = tmp_path / "usage.csv"
    path.write_text(text)
    return str(path)


def _plan_with_memory(tmp_path, *memory: int) -> str:
    """plan-1.36.json with a burstable template's thin entry giving the memory of its GPUs."""
    plan = json.loads((FIXTURES / "plan-1.36.json").read_text())
    gpus = {f"gpu-{index}": {"claims": 1, "memory": size} for index, size in enumerate(memory)}
    gpus["gpu-9"] = {"claims": 1, "memory": None}  # a GPU that publishes none says nothing
    plan["thin"] = [{"template": "fractional-gpu-burst", "nodes": {"gpu-a": {"claims": 1, "gpus": gpus}}}]
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    return str(path)


def test_measured_use_adds_measured_to_every_policy(tmp_path):
    usage = _usage(tmp_path)
    for policy in ("whole", "fractional", "thin"):
        out = result.replay(PODS, nodes=NODES, policy=policy, mode="timeline", usage=usage, gpu_memory="16Gi")
        assert out["measured"]["rules"]["policy"] == policy and "thin_factors" not in out
        assert out["measured"]["usage"] == {
            "path": usage,
            "pods": 1,
            "samples": 1,
            "samples_outside_life": 0,
            "sm_ratio_samples": 0,
            "pods_not_in_trace": 0,
            "pods_not_in_trace_examples": [],
        }
        assert out["measured"]["pods"] == out["trace"]["gpu_pods"] == 8
    assert "measured" not in result.replay(PODS, nodes=NODES, mode="timeline")
    # a template that renders the default reserve as text says 0 all the same
    assert "measured" not in result.replay(PODS, nodes=NODES, mode="timeline", gpu_reserve="0")


def test_pods_of_the_usage_the_trace_does_not_have_are_skipped_and_said(tmp_path):
    usage = _usage(tmp_path, "pod,timestamp,memory_used_bytes\nnobody,0,1\npod-01,0,1000\ngone/x,5,2\nnobody,9,3\n")
    out = result.replay(PODS, nodes=NODES, policy="thin", mode="timeline", usage=usage, gpu_memory="16Gi")
    found = out["measured"]["usage"]
    assert (found["pods"], found["samples"], found["pods_not_in_trace"]) == (1, 1, 2)
    assert found["pods_not_in_trace_examples"] == ["nobody", "gone/x"]


def test_the_gpus_memory_comes_from_the_option_else_from_the_plan(tmp_path):
    usage = _usage(tmp_path)
    plan = _plan_with_memory(tmp_path, 80 * 2**30, 80 * 2**30)
    found = result.replay(PODS, plan=plan, policy="thin", mode="timeline", usage=usage)["measured"]["gpu_memory"]
    assert found == {"bytes": 80 * 2**30, "source": "plan", "plan_bytes": 80 * 2**30}
    given = result.replay(PODS, plan=plan, mode="timeline", usage=usage, gpu_memory="40Gi")["measured"]
    assert given["gpu_memory"] == {"bytes": 40 * 2**30, "source": "gpu_memory", "plan_bytes": 80 * 2**30}
    mixed = _plan_with_memory(tmp_path, 80 * 2**30, 40 * 2**30)
    with pytest.raises(ReplayError, match=r"^gpu_memory: the plan's GPUs have different memory \(40Gi, 80Gi\)"):
        result.replay(PODS, plan=mixed, mode="timeline", usage=usage)
    assert (
        result.replay(PODS, plan=mixed, mode="timeline", usage=usage, gpu_memory=2**30)["measured"]["gpu_memory"][
            "plan_bytes"
        ]
        is None
    )
    with pytest.raises(ReplayError, match=r"^gpu_memory: required with usage .*: the plan publishes no GPU memory"):
        result.replay(PODS, plan=str(FIXTURES / "plan-1.36.json"), mode="timeline", usage=usage)
    with pytest.raises(ReplayError, match=r"^gpu_memory: required with usage .*: an openb node list gives no GPU"):
        result.replay(PODS, nodes=NODES, mode="timeline", usage=usage)


def test_thin_falling_back_to_whole_walks_whole_gpus_without_factors(tmp_path):
    out = result.replay(
        PODS, plan=str(FIXTURES / "plan-1.35.json"), policy="thin", mode="timeline", usage=_usage(tmp_path),
        gpu_memory="16Gi", burst_factors=[2.0],
    )  # fmt: skip
    assert out["policy_applied"] == "whole" and out["measured"]["rules"]["request"] == "whole GPUs"
    assert "thin_factors" not in out and out["measured"]["evictions"] == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"usage": "u", "mode": "saturation"}, "usage: measured use is replayed in timeline mode, not saturation"),
        ({"thin_limit": "2.0"}, "thin_limit: '2.0' needs usage"),
        ({"burst_factors": [1.5]}, r"burst_factors: \[1.5\] needs usage"),
        ({"gpu_memory": "80Gi"}, "gpu_memory: '80Gi' needs usage"),
        ({"reclaim_margin": 10}, "reclaim_margin: 10 needs usage"),
        ({"on_evict": "requeue"}, "on_evict: 'requeue' needs usage"),
        ({"thin_request": "p95"}, "thin_request: 'p95' needs usage"),
        ({"gpu_reserve": "1Gi"}, "gpu_reserve: '1Gi' needs usage"),
        ({"gpu_reserve": "lots"}, "gpu_reserve: 'lots' needs usage"),
        (
            {"usage": "u", "gpu_reserve": "lots"},
            r"gpu_reserve: 'lots' is not a quantity of memory \(such as 1Gi, or 0\)",
        ),
        ({"usage": "u", "gpu_reserve": True}, "gpu_reserve: True is not a quantity of memory"),
        ({"usage": "u", "gpu_reserve": "-1Mi"}, "gpu_reserve: '-1Mi' is below 0"),
        ({"usage": "u", "gpu_reserve": "17Ti"}, "gpu_reserve: '17Ti' is above 16Ti"),
        (
            {"usage": "u", "gpu_memory": "16Gi", "gpu_reserve": "16Gi"},
            r"gpu_reserve: 16Gi is not below the GPUs' memory \(16Gi, from gpu_memory\)",
        ),
        ({"usage": "u", "thin_request": "p0"}, "thin_request: 'p0' is not request or a percentile"),
        ({"usage": "u", "thin_request": "p101"}, "thin_request: 'p101' is not request or a percentile"),
        ({"usage": "u", "thin_request": "q95"}, "thin_request: 'q95' is not request or a percentile"),
        ({"usage": "u", "thin_request": "p"}, "thin_request: 'p' is not request or a percentile"),
        ({"usage": "u", "thin_limit": "0.5"}, "thin_limit: '0.5' is below 1: a limit is at least the request"),
        ({"usage": "u", "thin_limit": "lots"}, "thin_limit: 'lots' is not a factor of the request"),
        ({"usage": "u", "thin_limit": "inf"}, "thin_limit: 'inf' is not a factor of the request"),
        ({"usage": "u", "thin_limit": True}, "thin_limit: True is not a factor of the request"),
        ({"usage": "u", "reclaim_margin": 0}, r"reclaim_margin: 0 is out of range \(more than 0, less than 100\)"),
        ({"usage": "u", "reclaim_margin": 100}, "reclaim_margin: 100 is out of range"),
        ({"usage": "u", "reclaim_margin": "x"}, "reclaim_margin: 'x' is not a percent"),
        ({"usage": "u", "on_evict": "keep"}, "on_evict: 'keep' is not one of drop, requeue"),
        ({"usage": "u", "burst_factors": "1.5"}, "burst_factors: '1.5' is not a list of factors"),
        ({"usage": "u", "burst_factors": [1.5, 0.5]}, r"burst_factors\[1\]: 0.5 is below 1"),
        ({"usage": "u", "burst_factors": [2, 2.0]}, r"burst_factors\[1\]: 2.0 is in the list already"),
        ({"usage": "u", "burst_factors": ["x"]}, r"burst_factors\[0\]: 'x' is not a factor"),
        ({"usage": "u", "gpu_memory": "lots"}, "gpu_memory: 'lots' is not a quantity of memory"),
        ({"usage": "u", "gpu_memory": "0"}, "gpu_memory: '0' is not above 0"),
        ({"usage": "u", "gpu_memory": "-1Gi"}, "gpu_memory: '-1Gi' is not above 0"),
        ({"usage": "u", "gpu_memory": "17Ti"}, "gpu_memory: '17Ti' is above 16Ti: not one GPU's memory"),
        ({"usage": "u", "gpu_memory": ""}, "gpu_memory: '' is not a quantity of memory"),
        ({"usage": "u", "gpu_memory": False}, "gpu_memory: False is not a quantity of memory"),
        ({"usage": "bad", "gpu_memory": "16Gi"}, "usage: line 3, column memory_used_bytes: 'x' is not a number"),
    ],
)
def test_wrong_options_on_measured_use_are_named(tmp_path, options, message):
    options = dict(options)
    if options.get("usage") == "u":
        options["usage"] = _usage(tmp_path)
    elif options.get("usage") == "bad":
        options["usage"] = _usage(tmp_path, "pod,timestamp,memory_used_bytes\nnobody,0,1\nnobody,1,x\n")
    options.setdefault("mode", "timeline")
    with pytest.raises(ReplayError) as raised:
        result.replay(PODS, nodes=NODES, **options)
    assert re.match(message, str(raised.value)), str(raised.value)


def test_a_percentile_of_one_decimal_is_a_request(tmp_path):
    out = result.replay(
        PODS, nodes=NODES, policy="thin", mode="timeline", usage=_usage(tmp_path), gpu_memory="16Gi",
        thin_request="p99.9", thin_limit=2, reclaim_margin="2.5", gpu_reserve="1.5Gi",
    )  # fmt: skip
    assert out["measured"]["rules"] == {
        "policy": "thin",
        "request": "p99.9",
        "limit": "2 x request",
        "reclaim_margin": 2.5,
        "gpu_reserve_bytes": 3 * 2**29,
        "on_evict": "drop",
    }
