# SPDX-License-Identifier: Apache-2.0
"""benchmarks/replay.py still runs: a tiny trace (300 pods on 20 nodes, one repeat) as a process of its
own, as people run it. Checked: it exits 0, prints the pods placed and the GPU share of each mode and
policy, and the baseline of each mode with its ratio; the baseline (every node read for every pod)
places as many pods as the engine's fractional replay, so the two measure the same work. Times are
printed, never compared (the benchmark is not a timed test).
"""

from __future__ import annotations

import re

SECONDS = r"\d+\.\d{3}"  # a time as the script prints it, never compared


def test_a_tiny_trace_prints_each_replay_and_the_ratio_to_the_baseline(run_benchmark):
    out = run_benchmark("replay", "--pods", "300", "--nodes", "20", "--repeats", "1")
    header = re.match(r"pods: 300 \((\d+) with GPUs\), nodes: 20, GPUs: (\d+), order: pack, repeats: 1\n", out)
    assert header, out
    # NODE_SHAPES' shares of 20 nodes: 8 x 8 GPUs, 4 x 8, 3 x 4, 3 x 2, 2 without
    assert int(header.group(2)) == 8 * 8 + 4 * 8 + 3 * 4 + 3 * 2
    rows = re.findall(rf"^(saturation|timeline) +(whole|fractional) +{SECONDS} +(\d+) +(\d\.\d{{3}})$", out, re.M)
    placed = {(mode, policy): int(count) for mode, policy, count, _share in rows}
    assert sorted(placed) == sorted((m, p) for m in ("saturation", "timeline") for p in ("whole", "fractional"))
    assert all(0 < count <= 300 for count in placed.values())
    assert all(0 < float(share) <= 1 for *_key, share in rows)
    for mode in ("saturation", "timeline"):
        baseline = re.search(
            rf"^baseline \({mode}, fractional, every node per pod, placing only\): {SECONDS} s, (\d+) pods placed$",
            out,
            re.M,
        )
        assert baseline and int(baseline.group(1)) == placed[mode, "fractional"], out
        ratio = re.search(rf"^{mode}: replay / baseline: (\d+\.\d{{3}})$", out, re.M)
        assert ratio and float(ratio.group(1)) > 0, out
    assert re.search(rf"^slowest run: {SECONDS} s, not compared: the 10 s target is for 8000 pods", out, re.M)
