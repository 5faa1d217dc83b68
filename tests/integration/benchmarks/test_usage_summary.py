# SPDX-License-Identifier: Apache-2.0
"""benchmarks/usage_summary.py still runs: a tiny window (40 claims over a day, one repeat) as a process of
its own, as people run it. Checked: it exits 0, prints the claims, points and samples it made, the summary's
claims and unknown ones (the generator leaves every 97th claim unscraped), the GPU-hours, the baseline and the
ratio. Times are printed, never compared (the benchmark is not a timed test).
"""

from __future__ import annotations

import re

SECONDS = r"\d+\.\d{3}"  # a time as the script prints it, never compared


def test_a_tiny_window_prints_the_summary_the_baseline_and_the_ratio(run_benchmark):
    out = run_benchmark("usage_summary", "--claims", "40", "--days", "1", "--repeats", "1")
    header = re.match(r"claims: 40, points: 1440, used samples: (\d+), repeats: 1\n", out)
    assert header and 0 < int(header.group(1)) <= 40 * 1440, out
    # claim 0 is the one claim in 97 never scraped: unknown, never idle
    assert re.search(rf"^summary: {SECONDS} s, 40 claims, 1 unknown$", out, re.M), out
    hours = re.search(r"^GPU-hours allocated (\d+\.\d), idle (\d+\.\d)$", out, re.M)
    assert hours and 0 < float(hours.group(2)) < float(hours.group(1)), out
    assert re.search(rf"^baseline \(one pass adding every used-memory value\): {SECONDS} s, sum \S+$", out, re.M)
    assert re.search(r"^summary / baseline: \d+\.\d{3}$", out, re.M)
    assert re.search(
        rf"^slowest run: {SECONDS} s, (within|over) the 10 s target, not compared: the target is for 1000 claims$",
        out,
        re.M,
    )
