#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""What does measuring GPU use (``--usage=on``) cost: per poll, in Prepare's latency, and on /metrics?

Measured in this process on a node of 8 GPUs (80 GiB each) with 64 fractional claims (8 per GPU, more with
``--claims-per-gpu``), each claim's pod running 4 processes (MPS clients of 1 GiB each, each sampled for SM
utilization); each GPU also runs its MPS server and a host process, as NVML lists them. NVML is the strict
fake of ``tests/support/fakes/nvml.py``, the pods' cgroups files in a temporary directory, the claims' pods
recorded as Prepare records them (no API request in any poll measured here):

- the baseline: one reclaim poll alone (``--reclaim=evict`` with usage off: every shared GPU's memory and
  processes read, each process mapped to its pod, no pressure);
- one usage poll (every GPU read, the snapshot the scrapes use), on readings of its own;
- one tick with both on: the reclaim step and the usage poll sharing the tick's readings (one NVML poll);
- one scrape of /metrics with usage on (the series made from the snapshot), and its size, against the
  same page with usage off;
- Prepare and Unprepare of a 1-GPU claim in the driver (fixture node, in-memory API), with the watcher's
  thread polling every 0.05 s beside it and without it.

The GPUs are L40S by default (before Hopper: NVML's GPM is asked once per GPU, then never again);
``--model H100-SXM5-80GB`` measures with GPM's share of SMs busy sampled on every GPU at every usage poll
(allocate, sample, the metric between this poll's sample and the last one, free the older): the fake's GPM
clock is moved a second forward on every GPU before each timed usage poll and tick, inside the timed step
(a few dictionary updates of the fake).

Medians, p95 and the ratios to each baseline measured in the same run. Times are printed, never compared
against a target (the aim: a usage poll under 5 ms, Prepare unchanged).
Run: ``.venv/bin/python benchmarks/driver_usage.py [--samples N] [--claims-per-gpu N] [--model NAME]``.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "driver"), str(REPO / ".cache" / "collections")]

from aligned_dra_driver.claims.pods import ClaimPods  # noqa: E402
from aligned_dra_driver.devices.inventory import Options  # noqa: E402
from aligned_dra_driver.kubelet import driver as drv  # noqa: E402
from aligned_dra_driver.usage.metrics import Metrics  # noqa: E402
from aligned_dra_driver.usage.reclaim import Reclaimer  # noqa: E402
from aligned_dra_driver.usage.series import UsageCollector  # noqa: E402
from aligned_dra_driver.usage.watcher import GpuWatcher, NvmlReader  # noqa: E402

from ansible_collections.aligned.dra.tests.support.fakes.nvml import (  # noqa: E402
    GIB,
    HOST_CGROUP,
    GpuNode,
    pod_cgroup,
    share_entry,
)
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h  # noqa: E402
from ansible_collections.aligned.dra.tests.support.harnesses import driver_doubles as d  # noqa: E402

GPUS = 8
PROCESSES = 4
WARM_UP = 3


class Node(GpuNode):
    def __init__(self, root: Path, claims_per_gpu: int, model: str = "L40S") -> None:
        super().__init__(root)
        self.model = model
        self.checkpoint: dict[str, dict] = {}
        self.pods = ClaimPods()
        self.gpus: dict[str, str] = {}
        for index in range(GPUS):
            bus = f"0000:{0x18 + index:02x}:00.0"
            self.gpus[bus] = "gpu-" + bus.replace(":", "-").replace(".", "-")
            self.nvml.add_gpu(bus, 80 * GIB, model=model)  # what GpuNode.add_gpu adds, of the model asked
            self.process(bus, 0.3, pod_cgroup(str(uuid.uuid4()), "besteffort", container="ab" * 32), False)
            self.process(bus, 0.2, HOST_CGROUP, mps_client=False)
            for share in range(claims_per_gpu):
                uid, pod_uid = str(uuid.uuid4()), str(uuid.uuid4())
                name = f"c{index}-{share}"
                self.checkpoint[uid] = share_entry(uid, name, bus, h.NODE, request_gib=8, limit_gib=8, compute=12)
                self.pods.set(uid, [(f"{name}-pod", pod_uid)])
                for _process in range(PROCESSES):
                    pid = self.process(bus, 80 / (claims_per_gpu * PROCESSES + 4), pod_cgroup(pod_uid))
                    self.nvml.sample(bus, pid, 20)

    def elapse(self) -> None:
        """A second of GPM time on every GPU (GPUs with GPM only), as passes between two polls."""
        if self.model != "L40S":
            for bus in self.gpus:
                self.nvml.gpm_elapse(bus, 1.0, 0.5)


class Claims:
    """The claims as the API holds them, for the first poll's one read of each GPU's claims (the MPS server's
    pod is no claim's: after that read it is not asked about again); warm-up only."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def get_claim(self, namespace: str, name: str, deadline: float | None = None) -> dict:
        uid = next(u for u, e in self.node.checkpoint.items() if e["name"] == name)
        reserved = [{"resource": "pods", "name": n, "uid": p} for n, p in self.node.pods.get(uid)]
        return {"metadata": {"name": name, "namespace": namespace, "uid": uid}, "status": {"reservedFor": reserved}}


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))]


def timed(step, samples: int) -> list[float]:
    for _warm in range(WARM_UP):
        step()
    times = []
    for _sample in range(samples):
        started = time.perf_counter()
        step()
        times.append(time.perf_counter() - started)
    return times


def reclaimer(node: Node, metrics: Metrics, reader: NvmlReader | None) -> Reclaimer:
    return Reclaimer(
        lambda: node.checkpoint,
        None,  # no pressure: the API is never asked
        metrics,
        lambda: node.nvml,
        driver_name=h.DRIVER,
        node_name=h.NODE,
        procfs_root=str(node.procfs),
        reader=reader,
        claim_pods=node.pods,
    )


def watcher(node: Node, metrics: Metrics, with_reclaim: bool, interval: float = 15.0) -> GpuWatcher:
    reader = NvmlReader(lambda: node.nvml, str(node.procfs), metrics, ("usage",))
    found = GpuWatcher(
        reader,
        lambda: node.checkpoint,
        lambda: node.gpus,
        node.pods,
        Claims(node),
        metrics,
        usage_interval=interval,
        reclaimer=reclaimer(node, metrics, reader) if with_reclaim else None,
    )
    metrics.registry.register(UsageCollector(found, lambda: node.checkpoint, node.pods))
    return found


def prepare_latency(node: Node, samples: int, beside: GpuWatcher | None) -> list[float]:
    """Seconds per Prepare of a fresh 1-GPU claim (each followed by its Unprepare, not timed)."""
    root = h.short_tmp()
    try:
        tree = h.NodeTree.build(root)
        claims = d.ClaimsInMemory()
        driver = drv.Driver(Options(**tree.options(), durable_checkpoint=False), claims)
        driver.restore()
        driver.rescan()
        if beside is not None:
            beside.start()
        times = []
        for sample in range(samples + WARM_UP):
            ref = claims.add(h.claim_object(f"p{sample}", [{"request": "gpu", "device": h.GPU}]))
            started = time.perf_counter()
            answer = driver.prepare([ref])[ref[1]]
            if sample >= WARM_UP:
                times.append(time.perf_counter() - started)
            assert "error" not in answer, answer
            driver.unprepare([ref])
        return times
    finally:
        if beside is not None:
            beside.stop(timeout=5.0)
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200, help="samples per figure (after 3 warm-up)")
    parser.add_argument("--claims-per-gpu", type=int, default=8, help="fractional claims per GPU (8: 64 claims)")
    parser.add_argument("--model", default="L40S", help="the GPUs' model (H100-SXM5-80GB: with GPM)")
    args = parser.parse_args()
    logging.getLogger("aligned_dra_driver").setLevel(logging.ERROR)
    root = Path(tempfile.mkdtemp(prefix="usage-bench-"))
    try:
        node = Node(root, args.claims_per_gpu, args.model)
        off_metrics = Metrics()
        alone = reclaimer(node, off_metrics, None)
        baseline = timed(alone.poll, args.samples)
        metrics = Metrics()
        usage = watcher(node, metrics, with_reclaim=False)
        polls = timed(lambda: (node.elapse(), usage.poll_usage()), args.samples)
        both = watcher(node, Metrics(), with_reclaim=True)
        ticks = timed(
            lambda: (node.elapse(), both.reader.begin(), both.reclaimer.poll(), both._poll_usage()), args.samples
        )
        page_off = off_metrics.render()
        scrapes = timed(metrics.render, args.samples)
        page_on = metrics.render()
        series_on = sum(1 for line in page_on.decode().splitlines() if line and not line.startswith("#"))
        series_off = sum(1 for line in page_off.decode().splitlines() if line and not line.startswith("#"))
        without = prepare_latency(node, args.samples, None)
        beside = prepare_latency(node, args.samples, watcher(node, Metrics(), with_reclaim=True, interval=0.05))
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def ms(seconds: float) -> str:
        return f"{seconds * 1000:.2f} ms"

    def line(label: str, values: list[float], base: list[float] | None, base_name: str = "baseline") -> None:
        p50, p95 = statistics.median(values), percentile(values, 95)
        ratio = ""
        if base is not None:
            ratio = f"  /{base_name} p50 {p50 / statistics.median(base):.2f}x, p95 {p95 / percentile(base, 95):.2f}x"
        print(f"  {label}:\n    p50 {ms(p50)}  p95 {ms(p95)}{ratio}")

    claims = GPUS * args.claims_per_gpu
    print(
        f"GPU use on {GPUS} GPUs with {claims} fractional claims x {PROCESSES} processes "
        f"({claims * PROCESSES} pod processes; fake NVML, pods as Prepare recorded them)"
    )
    print(f"({args.samples} samples per figure after {WARM_UP} warm-up)")
    line("reclaim poll alone, no pressure (baseline)", baseline, None)
    line("usage poll", polls, baseline)
    line("tick with reclaim and usage on (one NVML poll)", ticks, baseline)
    line("scrape of /metrics with usage on", scrapes, None)
    print(
        f"  scrape size per node: {len(page_on)} bytes, {series_on} samples with usage on; "
        f"{len(page_off)} bytes, {series_off} samples with usage off ({len(page_on) / len(page_off):.2f}x)"
    )
    line("Prepare, usage off (Prepare baseline)", without, None)
    line("Prepare, the watcher polling every 0.05 s beside it", beside, without, "Prepare baseline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
