# SPDX-License-Identifier: Apache-2.0
"""benchmarks/replay_mig.py still runs: a tiny trace (300 pods on 10 nodes of 8 H100, one repeat, 2 draws) as a
process of its own, as people run it. Checked: it exits 0, prints each run of each mode with the GPU pods placed,
the baseline (first fit, nodes by name) with the ratio of one draw and of the range to it, and the range's figures
against the best case the baseline placed. Times are printed, never compared (not a timed test)."""

from __future__ import annotations

import re

SECONDS = r"\d+\.\d{3}"  # a time as the script prints it, never compared


def test_a_tiny_trace_prints_each_run_the_range_and_the_ratios_to_the_baseline(run_benchmark):
    out = run_benchmark("replay_mig", "--pods", "300", "--nodes", "10", "--repeats", "1", "--draws", "2")
    header = re.match(
        r"pods: 300 \((\d+) with GPUs\), nodes: 10, GPUs: 80 \(H100-SXM5-80GB, dynamic, documented\)", out
    )
    assert header, out
    gpu_pods = int(header.group(1))
    for mode in ("saturation", "timeline"):
        rows = dict(
            (label.strip(), int(placed))
            for label, placed in re.findall(rf"^{mode} +(\D+?) +{SECONDS} +(\d+) +\d+$", out, re.M)
        )
        assert sorted(rows) == ["first fit, nodes by name", "first fit, one random draw", "fragmentation-aware"]
        assert all(0 < placed <= gpu_pods for placed in rows.values())
        assert re.search(rf"^baseline \({mode}, first fit, nodes by name, placing only\): {SECONDS} s$", out, re.M)
        assert re.search(rf"^{mode}: one random draw / baseline: \d+\.\d{{3}}$", out, re.M), out
        spread = re.search(
            rf"^{mode}: range, 2 draws: {SECONDS} s, GPU pods placed (\d+) to (\d+) \(median [\d.]+\), "
            rf"best case (\d+); range / baseline: \d+\.\d{{3}}$",
            out,
            re.M,
        )
        assert spread, out
        low, high, best = map(int, spread.groups())
        assert low <= high and best == rows["first fit, nodes by name"]
