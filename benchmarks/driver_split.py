#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""What does running the driver split by kind cost a Prepare?

Prints, measured in this process on fixture nodes (tests/support/harnesses/driver.py) with the strict fake
API server, the latency of NodePrepareResources for one claim with 1 GPU + 1 NIC over the real
gRPC sockets (the claim GET, the CDI spec, the checkpoint with fdatasync; the status write is in
the background):

- the baseline: one driver (``dra.aligned.dev``, every kind) prepares the claim in one call;
- the split pair (``gpu.aligned.dev --kinds=gpu,accelerator`` and ``dra.aligned.dev
  --kinds=nic,vf``), each preparing its device of the claim: one after the other, as the kubelet
  does (its DRA manager calls the plugins of a claim's drivers in turn, in a loop over the
  drivers, and gives up at the first error), and both at once, the least a kubelet that called
  them concurrently would wait.

Medians, p95 and the ratios split/one. Both setups run side by side, one sample of each in turn
with fresh claims, each on a node tree and API server of its own (the baseline's driver and the
pair's NIC plugin have the same name). Each Prepare is followed by its Unprepare (not timed).
Times are printed, never compared against a target.
Run: ``.venv/bin/python benchmarks/driver_split.py [--samples N]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "driver"), str(REPO / ".cache" / "collections")]

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer  # noqa: E402
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h  # noqa: E402

GPU_DRIVER = "gpu.aligned.dev"
NIC_DRIVER = h.DRIVER
WARM_UP = 3  # the first calls of a process build the kubernetes client's models


def plugin(node: h.NodeTree, api: FakeApiServer, name: str, kinds: str) -> h.DriverProcess:
    """A driver process under ``name`` publishing ``kinds``, with its own state directory and sockets."""
    extra = [f"--driver-name={name}", f"--kinds={kinds}", f"--state-dir={node.root / name}"]
    process = h.DriverProcess(node, api, extra=extra)
    process.reg_socket = node.kubelet / "plugins_registry" / f"{name}-reg.sock"
    process.dra_socket = node.kubelet / "plugins" / name / "dra.sock"
    process.log = node.root / f"{name}.log"
    return process


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))]


def claim(api: FakeApiServer, name: str, gpu_driver: str) -> dict[str, str]:
    """A fresh allocated claim: the GPU of ``gpu_driver``, the NIC of the default driver with a NicConfig."""
    results = [{"request": "gpu", "device": h.GPU, "driver": gpu_driver}, {"request": "nic", "device": h.NIC}]
    return h.claim_ref(api.create(h.claim_object(name, results, [h.nic_config(interfaceName="net1", mtu=9000)])))


def prepared(process: h.DriverProcess, ref: dict[str, str], devices: int) -> None:
    answer = process.prepare([ref]).claims[ref["uid"]]
    if answer.error or len(answer.devices) != devices:
        raise RuntimeError(f"Prepare of {ref['name']} by {process.dra_socket.parent.name} failed: {answer.error}")


def unprepared(process: h.DriverProcess, ref: dict[str, str]) -> None:
    error = process.unprepare([ref]).claims[ref["uid"]].error
    if error:
        raise RuntimeError(f"Unprepare of {ref['name']} by {process.dra_socket.parent.name} failed: {error}")


def measure(samples: int, root: Path) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"one": [], "sequential": [], "concurrent": []}
    one_node, split_node = h.NodeTree.build(root / "one"), h.NodeTree.build(root / "split")
    with FakeApiServer("1.35") as one_api, FakeApiServer("1.35") as split_api, ThreadPoolExecutor(2) as pool:
        for api in (one_api, split_api):
            api.create(h.node_object())
        one = plugin(one_node, one_api, NIC_DRIVER, "gpu,accelerator,nic,vf")
        gpu = plugin(split_node, split_api, GPU_DRIVER, "gpu,accelerator")
        nic = plugin(split_node, split_api, NIC_DRIVER, "nic,vf")
        processes = [one, gpu, nic]
        try:
            for process in processes:
                process.start(wait=False)
            for process in processes:
                process.wait_ready()
            for index in range(WARM_UP + samples):
                ref = claim(one_api, f"one-{index}", NIC_DRIVER)
                started = time.perf_counter()
                prepared(one, ref, 2)
                elapsed = {"one": time.perf_counter() - started}
                unprepared(one, ref)

                ref = claim(split_api, f"seq-{index}", GPU_DRIVER)
                started = time.perf_counter()
                prepared(gpu, ref, 1)
                prepared(nic, ref, 1)
                elapsed["sequential"] = time.perf_counter() - started
                unprepared(gpu, ref)
                unprepared(nic, ref)

                ref = claim(split_api, f"con-{index}", GPU_DRIVER)
                started = time.perf_counter()
                calls = [pool.submit(prepared, gpu, ref, 1), pool.submit(prepared, nic, ref, 1)]
                for call in calls:
                    call.result()
                elapsed["concurrent"] = time.perf_counter() - started
                unprepared(gpu, ref)
                unprepared(nic, ref)
                if index >= WARM_UP:
                    for key, value in elapsed.items():
                        times[key].append(value)
        finally:
            for process in processes:
                process.stop()
    return times


def ms(seconds: float) -> str:
    return f"{seconds * 1000:7.2f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100, help="Prepares measured per setup (after 3 warm-up)")
    args = parser.parse_args()
    if args.samples < 1:
        parser.error("--samples must be at least 1")
    root = h.short_tmp()  # Unix socket paths must stay short
    try:
        times = measure(args.samples, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    figures = {key: (statistics.median(values), percentile(values, 95)) for key, values in times.items()}
    base_p50, base_p95 = figures["one"]
    print(
        f"Prepare of one claim with 1 GPU + 1 NIC over gRPC, fake API server round trips included "
        f"({args.samples} samples per setup, after {WARM_UP} warm-up):"
    )
    labels = {
        "one": "one driver (baseline)",
        "sequential": "split pair, one after the other (as the kubelet calls them)",
        "concurrent": "split pair, both at once (the least a concurrent caller waits)",
    }
    for key, label in labels.items():
        p50, p95 = figures[key]
        ratio = "" if key == "one" else f"   split/one p50 {p50 / base_p50:.2f}x, p95 {p95 / base_p95:.2f}x"
        print(f"  {label}:\n    p50 {ms(p50)}  p95 {ms(p95)}{ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
