#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""How fast does the bundled DRA driver prepare claims and build its ResourceSlices?

Prints, measured in this process on a fixture node (tests/support/harnesses/driver.py):

- Prepare latency p50/p99 of one claim with 1 GPU + 1 NIC (NicConfig with a
  name, MTU and address), excluding the API round trip: the claim is handed to
  the driver from memory and the status write returns at once, so the figure
  is the driver's own work (config, CDI spec, checkpoint with fdatasync). The
  CDI directory is on a tmpfs (/dev/shm), as /var/run/cdi is on a node; the
  checkpoint is on the disk of /tmp. Each prepare is followed by its unprepare
  (p50/p99 printed too).
- Prepare of 100 such claims in one call: total and per claim.
- The baseline: the bare file writes every Prepare must do (one CDI spec with
  rename, one checkpoint with fsync and rename) in a loop, and the ratio.
- ResourceSlice build time for the 512-VF tree ``sriov-8x64`` (8 GPUs, 8 PFs,
  512 VFs: 528 devices): devices from the probed topology (the shared dra
  module), split at 128 per slice and owned by the Node; baseline: one
  ``json.dumps`` of the result (what sending them costs at least).
- For reference, the same 1 GPU + 1 NIC Prepare over the real gRPC socket of
  the driver process against the strict fake API server (the API round trips
  included).

Targets: p50 <= 5 ms and p99 <= 20 ms per claim without the API; 512 devices
built and split in <= 50 ms. Exits non-zero when a target is missed.
Run: ``.venv/bin/python benchmarks/driver.py [--samples N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "driver"), str(REPO / ".cache" / "collections"), str(REPO / "tests" / "fixtures")]

from aligned_dra_driver.collection import dra, topology  # noqa: E402
from aligned_dra_driver.devices import publisher  # noqa: E402
from aligned_dra_driver.devices.inventory import Options  # noqa: E402
from aligned_dra_driver.fsutil import atomic_write  # noqa: E402
from aligned_dra_driver.kubelet.driver import Driver  # noqa: E402

from ansible_collections.aligned.dra.tests.support.harnesses import driver as h  # noqa: E402

TARGET_P50_MS = 5.0
TARGET_P99_MS = 20.0
TARGET_SLICES_MS = 50.0


class MemoryClaims:
    """Claims served from memory: the driver's API calls cost nothing here."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], dict] = {}

    def add(self, claim: dict) -> dict:
        claim = json.loads(json.dumps(claim))
        claim["metadata"]["uid"] = str(uuid.uuid4())
        self.claims[(claim["metadata"]["namespace"], claim["metadata"]["name"])] = claim
        return claim

    def get_claim(self, namespace: str, name: str, deadline: float | None = None) -> dict:
        return self.claims[(namespace, name)]

    def apply_claim_status(self, namespace: str, name: str, devices: list, uid: str | None = None) -> dict:
        return {}

    def remove_claim_status(self, namespace: str, name: str, uid: str, driver: str, pool: str) -> str:
        # apply_claim_status keeps nothing, so no entry of this driver is ever there.
        return "clean"


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def make_driver(node: h.NodeTree, kube: MemoryClaims) -> Driver:
    opts = Options(
        node_name=h.NODE,
        sysfs_root=str(node.sys),
        procfs_root=str(node.proc),
        dev_root=str(node.dev),
        cdi_dir=str(node.cdi),  # on a tmpfs, as /var/run/cdi is on a node (see main)
        state_dir=str(node.state),
        vendor_cdi_dirs=[str(node.vendor_cdi)],
        netdev_hook="/usr/local/bin/aligned-dra-netdev-hook",
        device_options={"exclude": ["eno*"]},
    )
    driver = Driver(opts, kube)
    driver.restore()
    driver.rescan()
    return driver


def claim_of(kube: MemoryClaims, name: str) -> dict:
    return kube.add(
        h.claim_object(
            name,
            [{"request": "gpu", "device": h.GPU}, {"request": "nic", "device": h.NIC}],
            [h.nic_config(interfaceName="net1", mtu=9000, addresses=["10.0.0.2/24"])],
        )
    )


def ref(claim: dict) -> tuple[str, str, str]:
    meta = claim["metadata"]
    return meta["namespace"], meta["uid"], meta["name"]


def bench_prepare(node: h.NodeTree, samples: int) -> dict[str, float]:
    kube = MemoryClaims()
    driver = make_driver(node, kube)
    prepare, unprepare, floor = [], [], []
    for i in range(samples + 20):
        claim = claim_of(kube, f"c{i}")
        started = time.perf_counter()
        answer = driver.prepare([ref(claim)])
        middle = time.perf_counter()
        driver.unprepare([ref(claim)])
        ended = time.perf_counter()
        assert "error" not in answer[claim["metadata"]["uid"]], answer
        spec = answer[claim["metadata"]["uid"]]
        # baseline, interleaved so that both see the same disk: the writes every Prepare does, nothing else
        floor_started = time.perf_counter()
        atomic_write(str(node.cdi / "floor.json"), json.dumps(spec).encode(), durable=False)
        atomic_write(str(node.state / "floor.json"), json.dumps({"claims": {str(i): spec}}).encode(), mode=0o600)
        floor_ended = time.perf_counter()
        os.unlink(node.cdi / "floor.json")
        if i >= 20:  # warm-up
            prepare.append(middle - started)
            unprepare.append(ended - middle)
            floor.append(floor_ended - floor_started)
    batch = [claim_of(kube, f"b{i}") for i in range(100)]
    started = time.perf_counter()
    answers = driver.prepare([ref(c) for c in batch])
    batch_time = time.perf_counter() - started
    assert all("error" not in a for a in answers.values())
    driver.unprepare([ref(c) for c in batch])
    return {
        "p50": statistics.median(prepare),
        "p99": percentile(prepare, 99),
        "unprepare_p50": statistics.median(unprepare),
        "unprepare_p99": percentile(unprepare, 99),
        "batch": batch_time,
        "floor": statistics.median(floor),
        "floor_p99": percentile(floor, 99),
    }


def bench_slices(samples: int) -> dict[str, float]:
    from materialize import materialize

    cache = REPO / ".cache" / "sysfs"
    if not (cache / "sriov-8x64").exists():
        materialize("sriov-8x64", cache)
    topo = topology.probe(str(cache / "sriov-8x64" / "sys"), str(cache / "sriov-8x64" / "proc"))
    build, dump = [], []
    for _sample in range(samples):
        started = time.perf_counter()
        devices = dra.devices_from_topology(topo)
        slices = publisher.build_slices("node-a", dra.DRIVER_NAME, devices, 1, "0f8e3c5a-0000-4000-8000-000000000000")
        middle = time.perf_counter()
        json.dumps(slices)
        ended = time.perf_counter()
        build.append(middle - started)
        dump.append(ended - middle)
    return {
        "devices": len(devices),
        "slices": len(slices),
        "build": statistics.median(build),
        "dump": statistics.median(dump),
    }


def bench_grpc(node: h.NodeTree, samples: int) -> dict[str, float] | None:
    try:
        from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
    except ImportError:
        return None
    times = []
    with FakeApiServer("1.35") as api:
        api.create(h.node_object())
        with h.DriverProcess(node, api) as process:
            for i in range(samples + 5):
                claim = api.create(
                    h.claim_object(
                        f"g{i}",
                        [{"request": "gpu", "device": h.GPU}, {"request": "nic", "device": h.NIC}],
                        [h.nic_config(interfaceName="net1", mtu=9000, addresses=["10.0.0.2/24"])],
                    )
                )
                started = time.perf_counter()
                process.prepare([h.claim_ref(claim)])
                if i >= 5:  # the first calls build the kubernetes client's models
                    times.append(time.perf_counter() - started)
                process.unprepare([h.claim_ref(claim)])
    return {"p50": statistics.median(times), "p99": percentile(times, 99)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--no-grpc", action="store_true", help="skip the process/gRPC reference figure")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="adb", dir="/tmp"))
    shm = Path(tempfile.mkdtemp(prefix="adb", dir="/dev/shm")) if os.path.isdir("/dev/shm") else root / "cdi-shm"
    try:
        node = h.NodeTree.build(root)
        # the CDI directory of a node (/var/run/cdi) is a tmpfs; the state directory stays on disk
        node.cdi = shm
        result = bench_prepare(node, args.samples)
        slices = bench_slices(max(20, args.samples // 4))
        grpc_figures = None if args.no_grpc else bench_grpc(h.NodeTree.build(root / "g"), max(20, args.samples // 4))
    finally:
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)
    print(f"Prepare, 1 GPU + 1 NIC claim, without the API ({args.samples} samples, checkpoint flushed with fdatasync):")
    print(f"  p50 {ms(result['p50'])}  p99 {ms(result['p99'])}   (targets {TARGET_P50_MS} / {TARGET_P99_MS} ms)")
    print(
        f"  baseline: the bare CDI + checkpoint writes p50 {ms(result['floor'])} p99 {ms(result['floor_p99'])}; "
        f"p50/baseline {result['p50'] / result['floor']:.1f}x, p99/baseline {result['p99'] / result['floor_p99']:.1f}x"
    )
    print(f"  Unprepare p50 {ms(result['unprepare_p50'])}  p99 {ms(result['unprepare_p99'])}")
    print(f"Prepare, 100 claims in one call: {ms(result['batch'])} total, {ms(result['batch'] / 100)} per claim")
    print(f"ResourceSlices for sriov-8x64 ({slices['devices']} devices, {slices['slices']} slices):")
    print(
        f"  build + split {ms(slices['build'])} (target {TARGET_SLICES_MS} ms); "
        f"baseline json.dumps {ms(slices['dump'])}; ratio {slices['build'] / slices['dump']:.1f}x"
    )
    if grpc_figures:
        print("Reference: the same Prepare over the driver's gRPC socket, fake API server round trips included:")
        print(f"  p50 {ms(grpc_figures['p50'])}  p99 {ms(grpc_figures['p99'])}")
    missed = []
    if result["p50"] * 1000 > TARGET_P50_MS:
        missed.append("prepare p50")
    if result["p99"] * 1000 > TARGET_P99_MS:
        missed.append("prepare p99")
    if slices["build"] * 1000 > TARGET_SLICES_MS:
        missed.append("slice build")
    if missed:
        print("targets missed: " + ", ".join(missed))
        return 1
    print("all targets met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
