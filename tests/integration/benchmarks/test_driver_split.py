# SPDX-License-Identifier: Apache-2.0
"""benchmarks/driver_split.py still runs: one measured Prepare per setup (after the warm-up) as a process of
its own, as people run it. Checked: it exits 0 (every Prepare and Unprepare of the three driver processes
answered without an error) and prints the median and p95 of each setup and the ratios split/one. Times are
printed, never compared (the benchmark is not a timed test).
"""

from __future__ import annotations

import re

MS = r"\d+\.\d{2} ms"  # a time as the script prints it, never compared
RATIO = r"\d+\.\d{2}x"


def test_one_sample_prints_each_setup_and_the_ratios_to_one_driver(run_benchmark):
    out = run_benchmark("driver_split", "--samples", "1")
    assert out.startswith("Prepare of one claim with 1 GPU + 1 NIC over gRPC, fake API server round trips included")
    assert "(1 samples per setup, after 3 warm-up)" in out
    assert re.search(rf"^  one driver \(baseline\):\n +p50 +{MS} +p95 +{MS}$", out, re.M), out
    for setup in ("one after the other", "both at once"):
        row = rf"^  split pair, {setup} \(.+\):\n +p50 +{MS} +p95 +{MS} +split/one p50 {RATIO}, p95 {RATIO}$"
        assert re.search(row, out, re.M), out
