#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""What does the reclaim watcher (``--reclaim=evict``) cost per poll, and how soon does it act?

Measured in this process on a node of 8 GPUs (80 GiB each) with 64 fractional claims (8 per GPU, each
with one pod whose MPS client uses 6 GiB of its 8 GiB request; each GPU also runs its MPS server and a
host process, as NVML lists them), NVML being the strict fake of ``tests/support/fakes/nvml.py``, the API the
strict fake API server over HTTP, the pods' cgroups (``<procfs>/<pid>/cgroup``, systemd form) files in a
temporary directory:

- the baseline: one poll with no pressure (every GPU's memory and processes read, each process mapped
  to its pod; no API request);
- one poll with one GPU short of memory but no claim above its request (a host process fills it):
  that GPU's 8 claims are read from the API, nothing is evicted;
- pressure to eviction request: the watcher thread polls every ``--interval`` seconds; at a random
  moment one claim's process grows to 34 GiB, 26 above its request (the GPU's free memory drops under the
  5 % margin); the time until the watcher sends that pod's eviction (then the process ends, the pod
  is made again, the next sample takes another claim).

Medians, p95 and the ratios to the baseline (polls) and to the interval (pressure to eviction: the aim
is one interval). The fake API server serves no Events: the reclaims' Event writes fail (404, a warning the
watcher logs and this script silences) after the eviction is timed. Times are printed, never compared
against a target.
Run: ``.venv/bin/python benchmarks/driver_reclaim.py [--samples N] [--interval S]``.
"""

from __future__ import annotations

import argparse
import logging
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "driver"), str(REPO / ".cache" / "collections")]

from aligned_dra_driver.kube import Kube  # noqa: E402
from aligned_dra_driver.usage.metrics import Metrics  # noqa: E402
from aligned_dra_driver.usage.reclaim import Reclaimer  # noqa: E402

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer  # noqa: E402
from ansible_collections.aligned.dra.tests.support.fakes.nvml import GIB, GpuNode, pod_cgroup, share_entry  # noqa: E402
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h  # noqa: E402

GPUS = 8
CLAIMS_PER_GPU = 8
WARM_UP = 3


class TimedKube(Kube):
    """The driver's Kube, noting when each eviction request leaves."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.evictions: list[tuple[float, str]] = []
        self.evicted = threading.Event()

    def evict_pod(self, namespace, name, uid=None, deadline=None):
        self.evictions.append((time.monotonic(), name))
        answer = super().evict_pod(namespace, name, uid=uid, deadline=deadline)
        self.evicted.set()
        return answer


class Node(GpuNode):
    def __init__(self, root: Path, api: FakeApiServer) -> None:
        super().__init__(root)
        self.api = api
        self.checkpoint: dict[str, dict] = {}
        self.claims: list[tuple[str, str, str]] = []  # (claim name, bus ID, pod name)
        self.pids: dict[str, int] = {}  # pod name -> its process
        for index in range(GPUS):
            bus = f"0000:{0x18 + index:02x}:00.0"
            self.add_gpu(bus, 80 * GIB, mps_server_gib=0.3, host_gib=0.2)
            for share in range(CLAIMS_PER_GPU):
                self.claim(f"c{index}-{share}", bus)

    def claim(self, name: str, bus: str) -> None:
        device = "gpu-" + bus.replace(":", "-").replace(".", "-")
        stored = self.api.create(h.claim_object(name, [{"request": "gpu", "device": device}]))
        uid = stored["metadata"]["uid"]
        self.checkpoint[uid] = share_entry(uid, name, bus, h.NODE, request_gib=8, limit_gib=40, compute=12)
        self.claims.append((name, bus, f"{name}-pod"))
        self.place(len(self.claims) - 1)

    def place(self, index: int) -> None:
        """The claim's pod (made again after an eviction) and its process using 6 GiB."""
        name, bus, pod_name = self.claims[index]
        pod_uid = self.api.create(h.pod_object(pod_name, priority=index % 3))["metadata"]["uid"]
        self.api.store[("resourceclaims", "default", name)].setdefault("status", {})["reservedFor"] = [
            {"resource": "pods", "name": pod_name, "uid": pod_uid}
        ]
        self.pids[pod_name] = self.process(bus, 6, pod_cgroup(pod_uid))


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))]


def timed_polls(watcher: Reclaimer, samples: int) -> list[float]:
    for _warm in range(WARM_UP):
        watcher.poll()
    times = []
    for _sample in range(samples):
        started = time.perf_counter()
        done = watcher.poll()
        times.append(time.perf_counter() - started)
        assert done == [], done
    return times


def to_eviction(node: Node, kube: TimedKube, watcher: Reclaimer, samples: int, interval: float) -> list[float]:
    """Seconds from a claim's growth to its pod's eviction request, the watcher thread polling."""
    rng = random.Random(7)
    times = []
    watcher.start()
    try:
        for sample in range(samples):
            index = sample % len(node.claims)
            _name, bus, pod_name = node.claims[index]
            time.sleep(rng.uniform(0, interval))  # a random moment of the poll cycle
            kube.evicted.clear()
            grown = time.monotonic()
            node.nvml.run(bus, node.pids[pod_name], 34 * GIB, True)
            if not kube.evicted.wait(10 * interval + 10):
                raise SystemExit(f"no eviction of {pod_name} within {10 * interval + 10:.0f} s")
            at, evicted = kube.evictions[-1]
            if evicted != pod_name:
                raise SystemExit(f"evicted {evicted}, expected {pod_name}")
            times.append(at - grown)
            node.nvml.end(bus, node.pids.pop(pod_name))  # the pod's containers end
            node.place(index)
    finally:
        watcher.stop()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200, help="samples per figure (after 3 warm-up polls)")
    parser.add_argument("--interval", type=float, default=2.0, help="the watcher's poll interval (seconds)")
    args = parser.parse_args()
    # the fake API server serves no Events: each reclaim's two Event writes fail with a warning (left out here)
    logging.getLogger("aligned_dra_driver").setLevel(logging.ERROR)
    root = Path(tempfile.mkdtemp(prefix="reclaim-bench-"))
    try:
        with FakeApiServer("1.36") as api:
            node = Node(root, api)
            metrics = Metrics()
            kube = TimedKube(api.api_client(), h.DRIVER, timeout=5.0)
            watcher = Reclaimer(
                lambda: node.checkpoint,
                kube,
                metrics,
                lambda: node.nvml,
                driver_name=h.DRIVER,
                node_name=h.NODE,
                procfs_root=str(root),
                interval=args.interval,
                step_budget=5.0,
            )
            baseline = timed_polls(watcher, args.samples)
            filler = node.process(node.claims[0][1], 29.0, "0::/system.slice/training.service", False)
            short = timed_polls(watcher, args.samples)
            node.nvml.end(node.claims[0][1], filler)
            evictions = to_eviction(node, kube, watcher, max(1, min(args.samples, 20)), args.interval)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:.2f} ms"

    print(
        f"Reclaim watcher on {GPUS} GPUs with {GPUS * CLAIMS_PER_GPU} fractional claims "
        "(fake NVML, strict fake API server over HTTP)"
    )
    print(f"({args.samples} polls per figure after {WARM_UP} warm-up; {len(evictions)} evictions)")
    b50, b95 = statistics.median(baseline), percentile(baseline, 95)
    print(f"  poll, no pressure (baseline):\n    p50 {ms(b50)}  p95 {ms(b95)}")
    s50, s95 = statistics.median(short), percentile(short, 95)
    print(
        f"  poll, one GPU short, no claim above its request (8 claims read from the API):\n"
        f"    p50 {ms(s50)}  p95 {ms(s95)}  /baseline p50 {s50 / b50:.2f}x, p95 {s95 / b95:.2f}x"
    )
    e50, e95 = statistics.median(evictions), percentile(evictions, 95)
    print(
        f"  pressure to eviction request, polling every {args.interval:g} s:\n"
        f"    p50 {ms(e50)}  p95 {ms(e95)}  /interval p50 {e50 / args.interval:.2f}x, p95 {e95 / args.interval:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
