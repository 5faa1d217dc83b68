#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""How fast is the replay's ``mig`` policy on a big site, and what do the random tie-breaks cost?

A synthetic trace of 8,000 pods is replayed on 1,200 nodes of 8 H100 SXM5 in dynamic MIG (9,600 GPUs, the
documented geometry, as the controller reads a site without NVML). Pods: 10 % CPU-only, 50 % a share of one GPU
(50 to 800 milli; a third of them with a ``gpu_memory`` of 4 to 40 GiB), 30 % one GPU, 10 % two, four or eight;
creation times spread over 10^6 s, lifetimes exponential (mean 1.5 * 10^6 s), 5 % never deleted. The generator
is seeded: every run replays the same trace.

Placing only (the trace read and the site built once, outside the timings), per mode (saturation, timeline):
the median wall time over the repeats of first fit with the nodes in name order, of the fragmentation-aware
order, and of one first-fit replay with random tie-breaks among nodes (one draw); then the figure the result
carries, ``mig.first_fit_range`` with ``--draws`` draws (default 10, the module's default), timed once.

Baseline, measured in the same run on the same pods and site: first fit with the nodes in name order, the
replay the policy ran before the draws. Printed: the ratio of one draw to it (what drawing a node costs per
pod) and of the whole range to it (what the default draws add to a ``mig`` replay).

Run: ``.venv/bin/python benchmarks/replay_mig.py``. ``--pods``, ``--nodes``, ``--repeats`` and ``--draws`` make it
smaller (the smoke test, tests/integration/benchmarks/test_replay_mig.py, runs a tiny one). The replay is
single-threaded. Times are figures of this machine, not limits: nothing here is a timed test.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".cache" / "collections"))

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import mig as mig_engine  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import mig_draws  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import trace as replay_trace  # noqa: E402

PODS = 8000
NODES = 1200
GPUS_PER_NODE = 8
H100 = "0x2330"
SEED = 72
LIFETIME = 1_500_000
SHARES = (50, 100, 150, 200, 250, 300, 400, 500, 600, 800)


def write_pods(path: Path, count: int) -> None:
    rng = random.Random(SEED)
    rows = ["name,submit,end,gpus,gpu_memory"]
    for index in range(count):
        draw = rng.random()
        memory = ""
        if draw < 0.10:
            gpus = "0"
        elif draw < 0.60:
            gpus = f"{rng.choice(SHARES) / 1000:g}"
            if rng.random() < 1 / 3:
                memory = f"{rng.choice((4, 8, 12, 16, 20, 30, 40))}Gi"
        elif draw < 0.90:
            gpus = "1"
        else:
            gpus = str(rng.choice((2, 2, 2, 4, 8)))
        created = rng.randrange(1_000_000)
        end = "" if rng.random() < 0.05 else str(created + int(rng.expovariate(1 / LIFETIME)))
        rows.append(f"pod-{index:05d},{created},{end},{gpus},{memory}")
    path.write_text("\n".join(rows) + "\n")


def site_nodes(count: int) -> list[tuple[str, list[dict]]]:
    devices = [
        {"kind": "gpu", "vendor_id": "0x10de", "device_id": H100, "pci_address": f"0000:{0x18 + i:02x}:00.0"}
        for i in range(GPUS_PER_NODE)
    ]
    gpus = mig_model.node_gpus({"devices": devices}, {"mode": "dynamic"})
    return [(f"node-{index:04d}", gpus) for index in range(count)]


def _timed(repeats: int, run) -> tuple[float, object]:
    times, outcome = [], None
    for _repeat in range(repeats):
        start = time.perf_counter()
        outcome = run()
        times.append(time.perf_counter() - start)
    return statistics.median(times), outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pods", type=int, default=PODS, help=f"pods of the trace (default {PODS})")
    parser.add_argument("--nodes", type=int, default=NODES, help=f"nodes of 8 H100 (default {NODES})")
    parser.add_argument("--draws", type=int, default=mig_draws.DEFAULT_DRAWS, help="draws of the range (default 10)")
    args = parser.parse_args()
    if args.repeats < 1 or args.pods < 1 or args.nodes < 1 or args.draws < 1:
        parser.error("--repeats, --pods, --nodes and --draws must be at least 1")
    with tempfile.TemporaryDirectory() as scratch:
        trace = Path(scratch, "pods.csv")
        write_pods(trace, args.pods)
        pods = list(replay_trace.read_trace(str(trace), "csv"))
    site = mig_engine.Site(site_nodes(args.nodes))
    gpu_pods = {pod.name for pod in pods if pod.gpu}
    print(
        f"pods: {len(pods)} ({len(gpu_pods)} with GPUs), nodes: {args.nodes}, GPUs: {len(site.gpus)} "
        f"(H100-SXM5-80GB, dynamic, documented), repeats: {args.repeats}, draws: {args.draws}"
    )
    print(f"{'mode':<11} {'run':<28} {'median s':>9} {'GPU pods placed':>16} {'GPUs at peak':>13}")
    for mode in ("saturation", "timeline"):
        runs = {
            "first fit, nodes by name": (mig_engine.FIRST_FIT, None),
            "fragmentation-aware": (mig_engine.FRAGMENTATION_AWARE, None),
            "first fit, one random draw": (mig_engine.FIRST_FIT, SEED),
        }
        medians = {}
        for label, (order, seed) in runs.items():

            def run(order=order, seed=seed, mode=mode):
                rng = None if seed is None else random.Random(seed)
                return mig_engine.replay(pods, site, order, mode, {}, rng=rng, detail=seed is None)

            medians[label], outcome = _timed(args.repeats, run)
            placed = sum(1 for name in outcome.placed if name in gpu_pods)
            peak = mig_draws.gpus_needed(outcome)["peak"]
            print(f"{mode:<11} {label:<28} {medians[label]:>9.3f} {placed:>16} {peak:>13}")
        base = medians["first fit, nodes by name"]
        baseline = mig_engine.replay(pods, site, mig_engine.FIRST_FIT, mode, {})
        best = {
            "gpu_pods_placed": sum(1 for name in baseline.placed if name in gpu_pods),
            "gpus_needed": mig_draws.gpus_needed(baseline),
        }
        start = time.perf_counter()
        spread = mig_draws.first_fit_range(pods, site, mode, {}, 0, args.draws, best)
        whole = time.perf_counter() - start
        placed = spread["gpu_pods_placed"]
        print(f"baseline ({mode}, first fit, nodes by name, placing only): {base:.3f} s")
        print(f"{mode}: one random draw / baseline: {medians['first fit, one random draw'] / base:.3f}")
        print(
            f"{mode}: range, {args.draws} draws: {whole:.3f} s, GPU pods placed {placed['min']} to {placed['max']} "
            f"(median {placed['median']:g}), best case {best['gpu_pods_placed']}; range / baseline: {whole / base:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
