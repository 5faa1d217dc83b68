#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""Does one driver process keep its open files, threads and memory through 1,000 Prepare/Unprepare cycles?

Starts ONE real driver process (``python -m aligned_dra_driver``, as the
integration tests do: tests/support/harnesses/driver.py) on a fixture node against the
strict fake API server, and runs Prepare then Unprepare of a fresh claim (1 GPU
+ 1 NIC with a NicConfig; v1 and v1beta1 in turn) over its real Unix socket,
1,000 times after a warm-up. It samples the process's open file descriptors
(``/proc/<pid>/fd``), threads and resident memory (``VmRSS``) at the start,
after the warm-up (the named baseline: thread pools, the kubernetes client's
models and connection pool exist by then) and every 100 cycles, and prints the
samples, the growth against the baseline and the bounds:

- open files: +0 after the warm-up;
- threads: +0 after the warm-up;
- RSS: at most +2 MiB after the warm-up (Python's allocator keeps freed arenas,
  so RSS moves by a few hundred KiB either way; keeping one claim's checkpoint
  entry and CDI spec, about 3 KiB, per cycle would pass 2 MiB within 1,000
  cycles).

Exits 1 when a bound is exceeded (or a cycle fails).
Run: ``.venv/bin/python benchmarks/driver_soak.py [--cycles N] [--warm-up N]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "driver"), str(REPO / ".cache" / "collections")]

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer  # noqa: E402
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h  # noqa: E402

BOUND_FDS = 0
BOUND_THREADS = 0
BOUND_RSS_MIB = 2.0
MIB = 2**20


def row(label: str, usage: dict[str, int], baseline: dict[str, int] | None) -> str:
    text = f"  {label:<22} fds {usage['fds']:>4}  threads {usage['threads']:>3}  RSS {usage['rss'] / MIB:7.1f} MiB"
    if baseline:
        text += (
            f"   ({usage['fds'] - baseline['fds']:+d} fds, {usage['threads'] - baseline['threads']:+d} threads, "
            f"{(usage['rss'] - baseline['rss']) / MIB:+.1f} MiB)"
        )
    return text


def thread_names(pid: int) -> dict[str, int]:
    """How many threads of each name (``/proc/<pid>/task/*/comm``, digits dropped) the process has."""
    import os
    import re

    names: dict[str, int] = {}
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/comm") as handle:
                name = re.sub(r"[_-]?[0-9]+$", "", handle.read().strip()) or "?"
        except FileNotFoundError:
            continue
        names[name] = names.get(name, 0) + 1
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=1000)
    parser.add_argument("--warm-up", type=int, default=100)
    args = parser.parse_args()
    root = h.short_tmp()
    samples: list[tuple[str, dict[str, int]]] = []
    times: list[float] = []
    try:
        node = h.NodeTree.build(root)
        with FakeApiServer("1.35") as api:
            api.create(h.node_object())
            with h.DriverProcess(node, api) as process:
                pid = process.proc.pid
                client = h.SoakClient(process, api)
                samples.append(("start", h.process_usage(pid)))
                for index in range(args.warm_up):
                    client.cycle(index)
                # the gRPC servers start worker threads on demand, up to a fixed number (8 for the DRA socket,
                # 2 for registration): concurrent calls make them all, so that the baseline holds the full pools
                client.burst(args.warm_up, 16, process)
                baseline = h.process_usage(pid)
                samples.append((f"after {args.warm_up}+16 warm-up", baseline))
                for index in range(args.cycles):
                    started = time.perf_counter()
                    client.cycle(args.warm_up + 16 + index)
                    times.append(time.perf_counter() - started)
                    if (index + 1) % 100 == 0 and index + 1 < args.cycles:
                        samples.append((f"cycle {index + 1}", h.process_usage(pid)))
                end = h.process_usage(pid)
                names = thread_names(pid)
                samples.append((f"end ({args.cycles} cycles)", end))
                leftovers = sorted(p.name for p in node.cdi.iterdir())
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"One driver process, {args.cycles} Prepare/Unprepare cycles (1 GPU + 1 NIC claim) over its socket,")
    print(
        f"after {args.warm_up} warm-up cycles and a burst of 16 concurrent ones (the baseline); open files, "
        "threads and RSS of the process:"
    )
    for label, usage in samples:
        print(row(label, usage, baseline if label != "start" else None))
    growth = {
        "fds": end["fds"] - baseline["fds"],
        "threads": end["threads"] - baseline["threads"],
        "rss": (end["rss"] - baseline["rss"]) / MIB,
    }
    print(
        f"growth after the warm-up: fds {growth['fds']:+d} (bound +{BOUND_FDS}), threads {growth['threads']:+d} "
        f"(bound +{BOUND_THREADS}), RSS {growth['rss']:+.1f} MiB (bound +{BOUND_RSS_MIB:.0f} MiB); "
        f"RSS end/baseline {end['rss'] / baseline['rss']:.3f}x"
    )
    print(
        f"cycle (create claim, Prepare, Unprepare, delete claim) p50 {statistics.median(times) * 1000:.1f} ms, "
        f"total {sum(times):.1f} s; CDI files left: {len(leftovers)}"
    )
    print("threads at the end: " + ", ".join(f"{name} x{count}" for name, count in sorted(names.items())))
    exceeded = []
    if growth["fds"] > BOUND_FDS:
        exceeded.append("open files")
    if growth["threads"] > BOUND_THREADS:
        exceeded.append("threads")
    if growth["rss"] > BOUND_RSS_MIB:
        exceeded.append("RSS")
    if leftovers:
        exceeded.append("CDI files left behind")
    if exceeded:
        print("bounds exceeded: " + ", ".join(exceeded))
        return 1
    print("all bounds held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
