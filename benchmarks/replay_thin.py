#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""How fast is thin provisioning replayed on measured use?

10,000 pods, each with 1,440 samples of its GPU memory use (one a minute for
the day it lives: 14.4 million samples), are replayed in timeline mode on 800
nodes of 8 GPUs of 80 GiB, with the ``thin`` rules (request: the trace's,
limit: the pod's largest sample, margin 5 %, evicted pods dropped): the pods
placed by request, the walk over every step, the evictions. Pods: 80 % a
share of one GPU (0.1 to 0.5), 15 % one GPU, 5 % two, four or eight; created
at a whole minute of the first day, priorities 0, 100 or 1000. Their use
follows 240 usage profiles (per share: a level of 50 to 90 % of the request
with noise, and up to three bursts of 10 to 60 minutes to 1.1 to 2 times the
request), each pod one of them. Everything is generated in memory, seeded:
every run replays the same pods and samples. The usage file is not read (a
CSV of 14.4 million lines takes longer to read than to replay).

Printed: the median wall time of the thin walk over the repeats, its
evictions and GPUs; the same walk under ``fractional`` (request: the peak
use, no eviction); and the baseline, measured in the same run on the same
pods and nodes: the timeline replay of the engine under ``fractional`` (by
the trace's requests, no usage), with the ratio thin / baseline.

Target (from the project's issue): the thin walk under 10 s on the
development machine. Single-threaded. Run: ``.venv/bin/python
benchmarks/replay_thin.py``; ``--pods`` and ``--samples`` make it smaller (the
smoke test, tests/integration/benchmarks/test_replay_thin.py, runs a tiny
one); the target is for the defaults.
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

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import engine, thin_walk  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.nodes import NodeSpec  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import Pod  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.usage import Usage  # noqa: E402

TARGET_SECONDS = 10.0
PODS = 10_000
SAMPLES = 1_440
NODES = 800
STEP = 60  # seconds between samples
GPU_MEMORY = 80 * 2**30
SEED = 1440
SHARES = (100, 200, 250, 300, 400, 500)
PROFILES_PER_SHARE = 40


def profiles(rng: random.Random, samples: int) -> dict[int, list[array]]:
    """Per share (milli), usage profiles in bytes: a level below the request with noise, and a few bursts above it."""
    out: dict[int, list[array]] = {}
    for share in SHARES:
        request = share * GPU_MEMORY // 1000
        out[share] = []
        for _profile in range(PROFILES_PER_SHARE):
            level = rng.uniform(0.5, 0.9) * request
            values = [int(level * rng.uniform(0.95, 1.05)) for _sample in range(samples)]
            for _burst in range(rng.randrange(4)):
                start, length = rng.randrange(samples), rng.randrange(10, 61)
                height = int(request * rng.uniform(1.1, 2.0))
                values[start : start + length] = [height] * len(values[start : start + length])
            out[share].append(array("q", values))
    return out


def generate(count: int, samples: int) -> tuple[list[Pod], Usage]:
    """The pods and their use (see the module's docstring)."""
    rng = random.Random(SEED)
    shapes = profiles(rng, samples)
    whole = [array("q", [int(GPU_MEMORY * f) for f in (0.6, 0.7, 0.8)]) * (samples // 3 + 1)]
    pods, series = [], {}
    for index in range(count):
        draw = rng.random()
        if draw < 0.80:
            num_gpu, milli = 1, rng.choice(SHARES)
            values = rng.choice(shapes[milli])
        else:
            num_gpu, milli = (1, 1000) if draw < 0.95 else (rng.choice((2, 4, 8)), 1000)
            values = whole[0][:samples]
        created = rng.randrange(samples) * STEP
        name = f"pod-{index:05d}"
        pod = Pod(name, index + 2, 0, 0, num_gpu, milli, None, created, created + samples * STEP)
        pod.priority = rng.choice((0, 100, 1000))
        pods.append(pod)
        series[name] = (range(created, created + samples * STEP, STEP), values[:samples])
    return pods, Usage(series)


def timed(repeats: int, run) -> tuple[float, object]:
    """The median wall time of ``run()`` over the repeats, and its last answer."""
    times, answer = [], None
    for _repeat in range(repeats):
        start = time.perf_counter()
        answer = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), answer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pods", type=int, default=PODS, help=f"pods (default {PODS})")
    parser.add_argument("--samples", type=int, default=SAMPLES, help=f"samples per pod (default {SAMPLES})")
    args = parser.parse_args()
    if args.repeats < 1 or args.pods < 1 or args.samples < 3:
        parser.error("--repeats and --pods must be at least 1, --samples at least 3")
    pods, usage = generate(args.pods, args.samples)
    specs = [NodeSpec(f"node-{i:04d}", None, None, 8, None) for i in range(max(1, NODES * args.pods // PODS))]
    print(
        f"pods: {len(pods)}, samples: {usage.samples}, nodes: {len(specs)}, GPUs: {8 * len(specs)} of 80 GiB, "
        f"order: pack, repeats: {args.repeats}"
    )
    thin = thin_walk.Rules("thin")

    def fresh() -> Usage:
        return Usage(usage.series)  # no peaks kept from an earlier run: each run reads every sample

    seconds, walked = timed(args.repeats, lambda: thin_walk.walk(pods, specs, "pack", False, fresh(), GPU_MEMORY, thin))
    print(
        f"thin (request, limit max, margin 5 %, drop): {seconds:.3f} s, {len(walked.evictions)} evictions, "
        f"{walked.placed} pods placed, {max(walked.busy)} GPUs at the peak"
    )
    peak = thin_walk.Rules("fractional")
    at_peak, fractional = timed(
        args.repeats, lambda: thin_walk.walk(pods, specs, "pack", False, fresh(), GPU_MEMORY, peak)
    )
    print(
        f"fractional (request: peak use): {at_peak:.3f} s, {len(fractional.evictions)} evictions, "
        f"{fractional.placed} pods placed, {max(fractional.busy)} GPUs at the peak"
    )
    base, outcome = timed(args.repeats, lambda: engine.timeline(pods, specs, "fractional", "pack", False))
    print(
        f"baseline (engine timeline, fractional, trace requests, no usage): {base:.3f} s, {len(outcome.placed)} pods placed"
    )
    print(f"thin / baseline: {seconds / base:.1f}")
    if (args.pods, args.samples) != (PODS, SAMPLES):
        verdict = f"not compared: the {TARGET_SECONDS:.0f} s target is for {PODS} pods x {SAMPLES} samples"
    else:
        verdict = f"{'meets' if seconds <= TARGET_SECONDS else 'MISSES'} the {TARGET_SECONDS:.0f} s target"
    print(f"thin walk: {seconds:.3f} s, {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
