# SPDX-License-Identifier: Apache-2.0
"""benchmarks/jobs.py still runs: a tiny site (30 nodes in three racks, 12-worker jobs, one repeat) as a
process of its own, as people run it. Checked: it exits 0, places every job with the result the planner
gives (the same shapes as the 1,000-node run: one job spread over racks, one that no rack holds), and
prints the baseline and the ratio. Times are printed, never compared (the benchmark is not a timed test).
"""

from __future__ import annotations

import re

SECONDS = r"\d+\.\d{3}"  # a time as the script prints it, never compared


def test_a_tiny_site_prints_each_job_and_the_ratio_to_the_plan(run_benchmark):
    out = run_benchmark("jobs", "--nodes", "30", "--workers", "12", "--repeats", "1")
    assert out.startswith("nodes: 30 in 1 blocks x 3 racks, rails 0-7; busy: ")
    assert "repeats: 1; workers per job: 12" in out
    results = dict(re.findall(rf"^(\S+) +\S+ +{SECONDS} +{SECONDS}  (.+)$", out, re.M))
    assert results == {
        "pair8-block": "fits in b00, rails [0, 1, 2, 3, 4, 5, 6, 7]",
        "pair1-rack": "fits in 2 racks, rails [0]",
        "rail0-block": "fits in b00, rails [0]",
        "gpu-rack": "fits in r000, rails None",
        "pair2-rack": "does not fit: no rack holds 12 workers: the most is rack r000 with 10 (rails [4, 5]); "
        "the site holds 30; with its workers on different rails the site would hold 102",
    }
    assert re.search(rf"^all 5 jobs in one call: {SECONDS} s$", out, re.M)
    assert re.search(rf"^baseline \(plan\.plan of the 5 templates on the same nodes\): {SECONDS} s$", out, re.M)
    ratio = re.search(r"^jobs / baseline: (\d+\.\d{2})$", out, re.M)
    assert ratio and float(ratio.group(1)) > 0
    # the target is for the default size only
    assert re.search(
        rf"^slowest single 12-worker job: {SECONDS} s, not compared: the 2 s target is for 64 workers", out, re.M
    )
