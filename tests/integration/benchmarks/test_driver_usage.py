# SPDX-License-Identifier: Apache-2.0
"""benchmarks/driver_usage.py still runs: two samples per figure, as a process of its own, as people run it.
Checked: it exits 0 (every Prepare answered) and prints the median and p95 of each figure, the ratios to the
baselines measured in the same run, and the scrape size with usage on and off. Times are printed, never
compared (the benchmark is not a timed test).
"""

from __future__ import annotations

import re

MS = r"\d+\.\d{2} ms"  # a time as the script prints it, never compared
RATIO = r"\d+\.\d{2}x"


def test_two_samples_print_each_figure_the_ratios_and_the_scrape_size(run_benchmark):
    out = run_benchmark("driver_usage", "--samples", "2")
    assert out.startswith("GPU use on 8 GPUs with 64 fractional claims x 4 processes (256 pod processes"), out
    assert re.search(rf"^  reclaim poll alone, no pressure \(baseline\):\n +p50 +{MS} +p95 +{MS}$", out, re.M), out
    for label in (r"usage poll", r"tick with reclaim and usage on \(one NVML poll\)"):
        assert re.search(rf"^  {label}:\n +p50 +{MS} +p95 +{MS} +/baseline p50 {RATIO}, p95 {RATIO}$", out, re.M), out
    size = r"^  scrape size per node: \d+ bytes, \d+ samples with usage on; \d+ bytes, \d+ samples with usage off"
    assert re.search(size + rf" \({RATIO}\)$", out, re.M), out
    beside = (
        rf"^  Prepare, the watcher polling .+:\n +p50 +{MS} +p95 +{MS} +/Prepare baseline p50 {RATIO}, p95 {RATIO}$"
    )
    assert re.search(beside, out, re.M), out
