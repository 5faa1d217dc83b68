# SPDX-License-Identifier: Apache-2.0
"""Used versus allocated, computed by hand on a window of ten one-minute steps.

- ``whole-a`` (team-a): a whole GPU, 10 GiB used and SM 0.5 for five steps, then no process for five; GPM's
  share of its SMs busy 0.2 for three steps and 0.4 for two;
- ``share-b`` (no team): a quarter of a GPU (20 GiB request), two pods: 15 GiB + 10 GiB for five steps
  (5 GiB above its request, SM 0.3), then 15 GiB at SM 0.02 (below the 5 % threshold) for five;
- ``silent-c`` (team-a): allocated the whole window, never measured: unknown, never idle;
- ``dcgm-e`` (team-a): a whole GPU, 1 GiB used, no SM of its own; DCGM's utilization of the GPU 3 % for
  five steps (idle by that bound), 40 % for five;
- a NIC's info series (no GPU UUID): not a GPU, not counted.
"""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller import usage
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import advice, summary
from ansible_collections.aligned.dra.tests.support.sites import usage_window

GIB = float(2**30)
TOTAL = 80 * GIB
STEPS = 10
MINUTE_H = 60 / 3600


def window():
    return usage_window.window(nic=True)


@pytest.fixture(scope="module")
def result():
    return summary.summarise(window(), {"ns-a": "team-a"}, {("ns-b", "share-b"): "fractional-gpu"})


def by_claim(result):
    return {c["claim"]: c for c in result["claims"]}


def test_a_whole_gpu_with_no_process_is_idle_and_its_sm_is_its_own(result):
    a = by_claim(result)["whole-a"]
    assert a["kind"] == "whole" and a["gpu_fraction"] == 1.0 and a["team"] == "team-a"
    assert a["hours"] == pytest.approx(
        {"allocated": 10 * MINUTE_H, "active": 5 * MINUTE_H, "idle": 5 * MINUTE_H, "unknown": 0.0}, abs=1e-4
    )
    assert a["idle_by"]["no_process_hours"] == pytest.approx(5 * MINUTE_H, abs=1e-4)
    assert a["memory_used_bytes"] == {
        "mean": round(5 * GIB),
        "p50": 0.0,
        "p95": 10 * GIB,
        "max": 10 * GIB,
        "points": 10,
    }
    assert a["sm_ratio"] == {"mean": 0.5, "p95": 0.5, "max": 0.5, "points": 5}
    # GPM's share of SMs busy beside NVML's share of time, each its own figure
    assert a["sms_busy_ratio"] == {"mean": 0.28, "p95": 0.4, "max": 0.4, "points": 5}
    assert a["above_request"] is None and a["node"] == "node-1" and a["template"] == summary.UNKNOWN_TEMPLATE


def test_a_share_sums_its_pods_and_counts_low_sm_as_idle_and_use_above_request(result):
    b = by_claim(result)["share-b"]
    assert b["kind"] == "share" and b["gpu_fraction"] == 0.25 and b["team"] == summary.UNASSIGNED
    assert b["pods"] == ["pb1", "pb2"] and b["template"] == "fractional-gpu"
    assert b["hours"]["idle"] == pytest.approx(5 * MINUTE_H, abs=1e-4)
    assert b["idle_by"]["below_threshold_hours"] == pytest.approx(5 * MINUTE_H, abs=1e-4)
    assert b["gpu_hours"]["allocated"] == pytest.approx(0.25 * 10 * MINUTE_H, abs=1e-4)
    assert b["memory_used_bytes"]["max"] == 25 * GIB and b["memory_used_bytes"]["p50"] == 15 * GIB
    assert b["above_request"] == {"hours": pytest.approx(5 * MINUTE_H, abs=1e-4), "max_bytes": 5 * GIB}
    assert b["request_bytes"] == 20 * GIB and b["limit_bytes"] == 40 * GIB


def test_a_claim_without_samples_is_unknown_never_idle(result):
    c = by_claim(result)["silent-c"]
    assert c["status"] == "unknown" and c["memory_used_bytes"] is None
    assert c["hours"]["unknown"] == c["hours"]["allocated"] and c["hours"]["idle"] == 0.0
    assert result["teams"]["team-a"]["claims_unknown"] == 1


def test_dcgm_below_the_threshold_bounds_a_claim_without_sm_of_its_own(result):
    e = by_claim(result)["dcgm-e"]
    assert e["activity_source"] == "dcgm" and e["sm_ratio"] is None and e["sms_busy_ratio"] is None
    assert e["idle_by"]["below_threshold_hours"] == pytest.approx(5 * MINUTE_H, abs=1e-4)
    assert e["hours"]["active"] == pytest.approx(5 * MINUTE_H, abs=1e-4) and e["activity_max"] == 0.4


def test_nics_are_not_gpus_and_aggregates_sum_their_claims(result):
    assert len(result["claims"]) == 4
    team = result["teams"]["team-a"]
    claims = [c for c in result["claims"] if c["team"] == "team-a"]
    for key in ("allocated", "active", "idle", "unknown"):
        assert team["gpu_hours"][key] == pytest.approx(sum(c["gpu_hours"][key] for c in claims), abs=1e-3)
    assert team["claims"] == 3 and team["claims_measured"] == 2
    # idle over allocated GPU-hours: a (5) and e (5) of 30 points
    assert team["idle_share"] == pytest.approx(10 / 30, abs=1e-3)
    assert team["unknown_hours_share"] == pytest.approx(10 / 30, abs=1e-3)
    assert team["memory_peak_bytes"] == 10 * GIB
    totals = result["totals"]
    assert totals["claims"] == 4 and totals["gpu_hours"]["allocated"] == pytest.approx(3.25 * 10 * MINUTE_H, abs=1e-3)
    assert result["templates"]["fractional-gpu"]["claims"] == 1
    assert result["series_missing"] == [] and result["window"]["points"] == STEPS
    assert result["nvml_unavailable_hours"] == {"node-1": pytest.approx(2 * MINUTE_H, abs=1e-4)}


def test_the_timeline_holds_the_mean_gpus_of_each_state(result):
    timeline = result["timeline"]
    assert timeline["bucket_seconds"] == 60.0 and timeline["buckets"] == STEPS
    team = timeline["teams"]["team-a"]
    assert team["allocated_gpus"] == [3.0] * STEPS
    assert team["unknown_gpus"] == [1.0] * STEPS
    assert team["idle_gpus"] == [1.0] * 5 + [1.0] * 5  # e idle (DCGM) first, a idle (no process) last
    assert team["active_gpus"] == [1.0] * STEPS
    assert team["memory_used_gpus"][0] == pytest.approx(11 / 80, abs=1e-4)


def test_advice_sizes_the_share_from_its_peak_and_finds_no_candidate_above_half(result):
    found = advice.advise(result)
    (group,) = found["fractional"]
    assert group["advice"]["request"] == "25Gi" and group["advice"]["limit"] == "25Gi"
    assert group["claims_per_gpu"] == {"today": 4, "advised": 3} and group["few_claims"] is True
    assert found["inventory_snippet"] == {
        "aligned_dra_claims": {"templates": {"fractional_gpu": {"memory": "25Gi"}}},
        "aligned_dra_fractional_burst": {"memory": 1.0},
    }
    # dcgm-e used 1 GiB of 80 and at most 40 % of the GPU: a candidate; whole-a reached SM 0.5: not one
    assert [c["claim"] for c in found["whole_gpu_candidates"]] == ["dcgm-e"]
    assert found["whole_gpu_candidates"][0]["compute_known"] is True


def test_a_group_without_measured_claims_gets_no_advice():
    data = window()
    data.series[usage.CLAIM_USED] = [s for s in data.series[usage.CLAIM_USED] if s.labels["claim"] != "share-b"]
    data.series[usage.CLAIM_SM] = []
    found = advice.advise(summary.summarise(data, {}, {}))
    (group,) = found["fractional"]
    assert group["advice"] is None and "no claim" in group["reason"]
    assert found["inventory_snippet"] is None


@pytest.mark.parametrize(
    ("ordered", "rank", "expected"),
    [([], 95, None), ([1.0], 95, 1.0), (list(range(1, 21)), 95, 19), (list(range(1, 21)), 50, 10)],
)
def test_percentiles_are_nearest_rank_values_that_were_seen(ordered, rank, expected):
    assert summary.percentile(ordered, rank) == expected


def test_a_pod_scraped_twice_counts_once_and_a_gpu_nvml_never_read_is_unknown():
    data = window()
    first = next(s for s in data.series[usage.CLAIM_USED] if s.labels["claim"] == "whole-a")
    copy = type(first)(first.metric, dict(first.labels, instance="second-scrape"), first.points, first.values)
    data.series[usage.CLAIM_USED].append(copy)
    # a GPU the driver prepared for silent-c that NVML did not read: an info series without a UUID
    unread = {"namespace": "ns-a", "claim": "silent-c", "pod": "pc", "device": "gpu-0000-3b-00-0", "gpu_uuid": ""}
    data.series[usage.CLAIM_INFO].append(
        type(first)(usage.CLAIM_INFO, dict(unread, pool="node-2"), first.points, first.values)
    )
    result = summary.summarise(data, {"ns-a": "team-a"}, {})
    assert by_claim(result)["whole-a"]["memory_used_bytes"]["max"] == 10 * GIB
    unread_gpu = [c for c in result["claims"] if c["claim"] == "silent-c" and c["gpu_uuid"] is None]
    assert len(unread_gpu) == 1 and unread_gpu[0]["status"] == "unknown" and unread_gpu[0]["node"] == "node-2"
    assert unread_gpu[0]["hours"]["idle"] == 0.0 and unread_gpu[0]["kind"] == "unknown"


def test_a_claim_of_unknown_size_is_drawn_as_one_gpu_unknown_and_the_team_marked():
    data = window()
    # silent-c's request and limit series gone: its size is unknown too (as when the driver never measured it)
    for metric in (usage.CLAIM_REQUEST, usage.CLAIM_LIMIT):
        data.series[metric] = [s for s in data.series[metric] if s.labels["claim"] != "silent-c"]
    result = summary.summarise(data, {"ns-a": "team-a"}, {})
    silent = by_claim(result)["silent-c"]
    assert silent["gpu_fraction"] is None and silent["gpu_hours"] is None and silent["kind"] == "unknown"
    team = result["teams"]["team-a"]
    assert team["claims_without_size"] == 1 and team["hours_without_size"] == pytest.approx(10 * MINUTE_H, abs=1e-4)
    # not in the GPU-hours (2 whole GPUs of 10 points), but in the claim-hours that are unknown
    assert team["gpu_hours"]["allocated"] == pytest.approx(20 * MINUTE_H, abs=1e-4)
    assert team["unknown_hours_share"] == pytest.approx(1 / 3, abs=1e-3)
    timeline = result["timeline"]
    assert timeline["unsized_as_one_gpu"] == ["team-a"]
    assert timeline["teams"]["team-a"]["unknown_gpus"] == [1.0] * STEPS
    assert timeline["teams"]["team-a"]["allocated_gpus"] == [3.0] * STEPS


def test_partial_measures_make_bounds_of_the_advice_and_of_the_used_over_requested_ratio():
    data = window()
    Series = type(data.series[usage.CLAIM_USED][0])
    # share-b's first pod unscraped for the last two steps, its second pod gone: two unknown steps
    data.series[usage.CLAIM_USED] = [
        Series(s.metric, s.labels, s.points[:8], s.values[:8]) if s.labels["pod"] == "pb1" else s
        for s in data.series[usage.CLAIM_USED]
    ]
    # DCGM reported dcgm-e's GPU for the first five steps only
    dcgm = data.series[usage.DCGM_UTIL][0]
    data.series[usage.DCGM_UTIL] = [Series(dcgm.metric, dcgm.labels, dcgm.points[:5], dcgm.values[:5])]
    # a share whose request is unknown uses 70 GiB: not in used over requested (its request is not known)
    loose = {"namespace": "ns-a", "claim": "loose-f", "pod": "pf", "device": "gpu-1", "gpu_uuid": "GPU-f"}
    data.series[usage.CLAIM_USED].append(
        Series(usage.CLAIM_USED, loose, dcgm.points, type(dcgm.values)("d", [70 * GIB] * 10))
    )
    result = summary.summarise(data, {"ns-a": "team-a"}, {("ns-b", "share-b"): "fractional-gpu"})
    share = by_claim(result)["share-b"]
    assert share["hours"]["unknown"] == pytest.approx(2 * MINUTE_H, abs=1e-4)
    assert result["teams"]["(no team)"]["idle_share_is_lower_bound"] is True
    # team-a: whole-a 5 GiB mean of 80, dcgm-e 1 of 80 (silent-c unmeasured); loose-f left out
    assert result["teams"]["team-a"]["memory_used_over_requested"] == pytest.approx(6 / 160, abs=1e-4)
    found = advice.advise(result)
    (group,) = found["fractional"]
    assert group["claims_partly_measured"] == 1 and group["advice"]["peaks_lower_bound"] is True
    (candidate,) = found["whole_gpu_candidates"]
    assert candidate["claim"] == "dcgm-e" and candidate["compute_known"] is False
    assert (candidate["compute_points"], candidate["memory_points"]) == (5, 10)


def test_claims_holding_gpus_without_any_series_are_listed_not_summed(result):
    def claim(namespace, name, devices):
        results = [{"driver": "gpu.aligned.dev", "pool": "node-9", "device": d, "request": "gpu"} for d in devices]
        return {
            "metadata": {"namespace": namespace, "name": name},
            "status": {"allocation": {"devices": {"results": results}}},
        }

    objects = [
        claim("ns-a", "whole-a", ["gpu-0000-18-00-0"]),  # in the window
        claim("ns-z", "ghost", ["gpu-0000-18-00-0", "gpu-0000-2a-00-0", "nic-0000-1d-00-0"]),
        claim("ns-z", "nic-only", ["nic-0000-1d-00-0"]),
        {"metadata": {"namespace": "ns-z", "name": "pending"}},
    ]
    assert summary.not_measured(objects, result) == [
        {"namespace": "ns-z", "claim": "ghost", "gpus": 2, "node": "node-9"}
    ]


def test_the_share_of_sms_busy_is_the_devices_figure_each_pod_repeats_never_a_sum():
    """Two pods of one whole-GPU claim repeat the device's GPM figure: it is counted once, at its largest
    (two scrapes of one pod the same); a claim without the series has none, not a 0."""
    data = usage_window.window()
    a = {"namespace": "ns-a", "claim": "whole-a", "device": "gpu-0", "gpu_uuid": "GPU-a"}
    data.series[usage.CLAIM_SMS_BUSY] = [
        usage_window._series(usage.CLAIM_SMS_BUSY, dict(a, pod="pa"), [0.3] * 4, list(range(4))),
        usage_window._series(usage.CLAIM_SMS_BUSY, dict(a, pod="pa2"), [0.3, 0.3, 0.3, 0.35], list(range(4))),
    ]
    found = by_claim(summary.summarise(data, {"ns-a": "team-a"}, {}))
    assert found["whole-a"]["sms_busy_ratio"] == {"mean": 0.3125, "p95": 0.35, "max": 0.35, "points": 4}
    assert found["share-b"]["sms_busy_ratio"] is None
