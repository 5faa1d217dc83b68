#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""How fast is the used-versus-allocated summary of a site's window, once fetched?

A synthetic window of 1,000 claims over 7 days at 60 s (10,080 grid points
each, about 10 M used-memory samples, as many info samples, request and limit
series, SM series on half of the claims and DCGM's utilization of every GPU):
500 whole-GPU claims on their own GPUs and 500 shares, two on each of 250
more GPUs. One claim in 100 comes and goes (allocated for a seeded random
part of the window), the others hold their GPU throughout; each is idle for
four hours somewhere, and one in 97 is never scraped (unknown). The
generator is seeded: every run summarises the same window.

Printed: the median wall time of the summary (usage.summary.summarise: every
claim walked, the percentiles, the teams, templates and the chart's
timeline) over the repeats, and the samples it read.

Baseline, measured in the same run on the same window: one pass that only
adds up every used-memory value (the least any summary of them pays). The
ratio summary / baseline is printed.

Target (from the project's issue): under 10 s for 1,000 claims x 7 days at
60 s. Run: ``.venv/bin/python benchmarks/usage_summary.py``; ``--claims``
and ``--days`` make it smaller (the smoke test,
tests/integration/benchmarks/test_usage_summary.py, runs a tiny one); the
target is for the defaults.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from array import array
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".cache" / "collections"))

from ansible_collections.aligned.dra.plugins.module_utils.controller import usage  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import summary  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.series import (  # noqa: E402
    Series,
    UsageData,
)

TARGET_SECONDS = 10.0
CLAIMS = 1000
DAYS = 7.0
STEP = 60.0
SEED = 54
GIB = float(2**30)
GPU_MEMORY = 80 * GIB
TEAMS = 8


def _claim_series(index: int, points: int, rng: random.Random) -> tuple[list[Series], int]:
    """One claim's series: info, used, request, limit and (every other claim) SM; the used samples made."""
    whole = index % 2 == 0
    gpu = index if whole else CLAIMS + index // 4
    labels = {
        "namespace": f"team-{index % TEAMS}",
        "claim": f"claim-{index:05d}",
        "pod": f"pod-{index:05d}",
        "device": f"gpu-{gpu % 8}",
        "gpu_uuid": f"GPU-{gpu:08d}",
    }
    # 99 claims in 100 hold their GPU the whole window (about 10 M used samples); the others come and go
    first, last = (0, points - 1) if index % 100 else sorted(rng.sample(range(points), 2))
    span = array("l", range(first, last + 1))
    request = GPU_MEMORY if whole else 20 * GIB
    info = Series(usage.CLAIM_INFO, dict(labels, pool=f"node-{gpu // 8}"), span, array("d", [1.0]) * len(span))
    out = [
        info,
        Series(usage.CLAIM_REQUEST, labels, span, array("d", [request]) * len(span)),
        Series(usage.CLAIM_LIMIT, labels, span, array("d", [request * (1 if whole else 2)]) * len(span)),
    ]
    if index % 97 == 0:  # never scraped: unknown
        return out, 0
    idle_from = rng.randrange(first, last + 1)
    base = rng.uniform(0.05, 0.9) * request
    used = array(
        "d", [0.0 if idle_from <= p < idle_from + 240 else base * (1 + 0.2 * ((p * 7) % 11) / 11) for p in span]
    )
    out.append(Series(usage.CLAIM_USED, labels, span, used))
    if index % 2:
        out.append(Series(usage.CLAIM_SM, labels, span, array("d", [0.01 if v == 0 else 0.4 for v in used])))
    return out, len(span)


def window(claims: int, days: float) -> tuple[UsageData, int]:
    rng = random.Random(SEED)
    points = int(days * 86400 / STEP)  # each point stands for the step ending at it
    series: dict[str, list[Series]] = {name: [] for name in usage.METRICS}
    samples = 0
    gpus = set()
    for index in range(claims):
        made, count = _claim_series(index, points, rng)
        samples += count
        for one in made:
            series[one.metric].append(one)
            gpus.add(one.labels["gpu_uuid"])
    everywhere = array("l", range(points))
    for uuid in sorted(gpus):
        series[usage.GPU_TOTAL].append(
            Series(usage.GPU_TOTAL, {"gpu_uuid": uuid}, everywhere, array("d", [GPU_MEMORY]) * points)
        )
        util = array("d", [float((p * 13) % 100) for p in range(points)])
        series[usage.DCGM_UTIL].append(Series(usage.DCGM_UTIL, {"UUID": uuid}, everywhere, util))
    end = 1_800_000_000.0
    return UsageData(end - (points - 1) * STEP, end, STEP, series, "synthetic"), samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--claims", type=int, default=CLAIMS)
    parser.add_argument("--days", type=float, default=DAYS)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data, samples = window(args.claims, args.days)
    namespaces = {f"team-{i}": f"team-{i}" for i in range(TEAMS)}
    print(f"claims: {args.claims}, points: {data.steps}, used samples: {samples}, repeats: {args.repeats}")
    times = []
    result = None
    for _repeat in range(args.repeats):
        began = time.perf_counter()
        result = summary.summarise(data, namespaces, {})
        times.append(time.perf_counter() - began)
    assert result is not None
    began = time.perf_counter()
    added = sum(sum(one.values) for one in data.series[usage.CLAIM_USED])
    baseline = time.perf_counter() - began
    median = statistics.median(times)
    totals = result["totals"]
    print(f"summary: {median:.3f} s, {totals['claims']} claims, {totals['claims_unknown']} unknown")
    print(f"GPU-hours allocated {totals['gpu_hours']['allocated']:.1f}, idle {totals['gpu_hours']['idle']:.1f}")
    print(f"baseline (one pass adding every used-memory value): {baseline:.3f} s, sum {added:.3e}")
    print(f"summary / baseline: {median / baseline:.3f}")
    verdict = "within" if median < TARGET_SECONDS else "over"
    scale = "" if (args.claims, args.days) == (CLAIMS, DAYS) else f", not compared: the target is for {CLAIMS} claims"
    print(f"slowest run: {max(times):.3f} s, {verdict} the {TARGET_SECONDS:.0f} s target{scale}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
