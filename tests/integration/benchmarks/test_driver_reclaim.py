# SPDX-License-Identifier: Apache-2.0
"""benchmarks/driver_reclaim.py still runs: one sample per figure, the watcher polling every 0.1 s, as a process
of its own, as people run it. Checked: it exits 0 (every poll answered as expected, the eviction of the claim
that grew came and was the right pod's) and prints the median and p95 of each figure and the ratios to the
baseline poll and to the interval. Times are printed, never compared (the benchmark is not a timed test).
"""

from __future__ import annotations

import re

MS = r"\d+\.\d{2} ms"  # a time as the script prints it, never compared
RATIO = r"\d+\.\d{2}x"


def test_one_sample_prints_each_figure_and_the_ratios(run_benchmark):
    out = run_benchmark("driver_reclaim", "--samples", "1", "--interval", "0.1")
    assert out.startswith("Reclaim watcher on 8 GPUs with 64 fractional claims"), out
    assert "(1 polls per figure after 3 warm-up; 1 evictions)" in out
    assert re.search(rf"^  poll, no pressure \(baseline\):\n +p50 +{MS} +p95 +{MS}$", out, re.M), out
    short = rf"^  poll, one GPU short, .+:\n +p50 +{MS} +p95 +{MS} +/baseline p50 {RATIO}, p95 {RATIO}$"
    assert re.search(short, out, re.M), out
    evict = rf"^  pressure to eviction request, polling every 0.1 s:\n +p50 +{MS} +p95 +{MS} +/interval p50 {RATIO}, p95 {RATIO}$"
    assert re.search(evict, out, re.M), out
