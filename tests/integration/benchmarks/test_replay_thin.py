# SPDX-License-Identifier: Apache-2.0
"""benchmarks/replay_thin.py still runs: a tiny run (200 pods of 30 samples, one repeat) as a process of its own,
as people run it. Checked: it exits 0, prints the thin walk's evictions and GPUs, the fractional walk (never an
eviction), the baseline with the ratio, and that the target is not compared on a smaller run. Times are printed,
never compared (the benchmark is not a timed test).
"""

from __future__ import annotations

import re

SECONDS = r"\d+\.\d{3}"  # a time as the script prints it, never compared


def test_a_tiny_run_prints_the_walks_and_the_ratio_to_the_baseline(run_benchmark):
    out = run_benchmark("replay_thin", "--pods", "200", "--samples", "30", "--repeats", "1")
    assert re.match(r"pods: 200, samples: 6000, nodes: 16, GPUs: 128 of 80 GiB, order: pack, repeats: 1\n", out), out
    thin = re.search(
        rf"^thin \(request, limit max, margin 5 %, drop\): {SECONDS} s, (\d+) evictions, (\d+) pods placed, "
        r"(\d+) GPUs at the peak$",
        out,
        re.M,
    )
    assert thin and 0 < int(thin.group(2)) <= 200 and 0 < int(thin.group(3)) <= 128, out
    fractional = re.search(
        rf"^fractional \(request: peak use\): {SECONDS} s, 0 evictions, (\d+) pods placed", out, re.M
    )
    assert fractional, out
    assert re.search(
        rf"^baseline \(engine timeline, fractional, trace requests, no usage\): {SECONDS} s, \d+ pods placed$",
        out,
        re.M,
    )
    assert re.search(r"^thin / baseline: \d+\.\d$", out, re.M), out
    assert re.search(
        rf"^thin walk: {SECONDS} s, not compared: the 10 s target is for 10000 pods x 1440 samples$", out, re.M
    )
