#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""How fast is the topology probe, next to hwloc's lstopo on the same trees?

For each tree (real snapshots and synthetic layouts, materialised by
tests/fixtures/materialize.py) this prints:

- the median time of the "syscall floor": only the reads no probe can avoid
  (links, uevent, numa_node, RDMA port state) in a bare loop, i.e. what this
  machine's system calls cost;
- the median in-process time of ``topology.probe()`` (warm page cache) and its
  ratio to the floor;
- the median whole-process time of a fresh Python that imports the library,
  probes and writes JSON to /dev/null;
- the median time of ``lstopo --of xml`` with ``HWLOC_FSROOT`` on the same tree
  (the baseline; Debian package ``hwloc``), and the ratio process/lstopo.

Then the cost of reading the extended config space (ACS, Device Control):
the DGX-H100-like tree with every config space 4096 bytes (``dgx-h100-acs``)
against the same tree with 64-byte config headers (``dgx-h100``, what a probe
without root or a capture of one reads), in-process medians measured in the
same run, interleaved, and their ratio. The 64-byte tree is what every
probe read before the probe read ACS (a snapshot of today's nodes), so the
ratio is the price of the extended reads on one probe; the fixed cost the
ACS, p2p and gpudirect parts add to every probe is in both figures (compare
the ``dgx-h100`` row with an earlier run's for it).

Targets (from the project's issues): in-process probe of the
8-GPU/8-NIC/512-VF tree <= 20 ms median; whole-process probe no slower than
lstopo on the same tree; the 4 KiB tree at most 1.5x the 64-byte one.
Run: ``.venv/bin/python benchmarks/probe.py``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "plugins" / "module_utils" / "node"))
sys.path.insert(0, str(REPO / "tests" / "fixtures"))

import topology  # noqa: E402
from materialize import materialize  # noqa: E402

TREES = [
    "hwloc-32intel64-8ve",
    "hwloc-32em64t-mic",
    "hwloc-fakepcilocalities",
    "ghw-nvidia-p100",
    "dgx-h100",
    "mi300x",
    "sriov-8x64",
]
TARGET_TREE = "sriov-8x64"
TARGET_MS = 20.0
# The same DGX-H100-like tree with 4096-byte and with 64-byte config spaces.
EXTENDED_TREE, HEADER_TREE = "dgx-h100-acs", "dgx-h100"
TARGET_EXTENDED_RATIO = 1.5

# The whole-process probe: a fresh interpreter (isolated mode, no site
# packages: the library needs only the standard library, as on a node) that
# imports the library, probes and prints the topology as JSON.
PROCESS_CODE = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); import topology; "
    "sys.stdout.write(json.dumps(topology.probe(sys.argv[2], sys.argv[3])))"
)


def median_ms(func, repeat: int, *args) -> float:
    samples = []
    for _sample in range(repeat):
        start = time.perf_counter()
        func(*args)
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def lstopo_ms(root: Path, repeat: int) -> float | None:
    lstopo = shutil.which("lstopo-no-graphics") or shutil.which("lstopo")
    if lstopo is None:
        return None
    # The x86 backend would mix this machine's CPUID into the captured tree.
    env = dict(os.environ, HWLOC_FSROOT=str(root), HWLOC_COMPONENTS="-x86")
    command = [lstopo, "--of", "xml", "-"]
    check = subprocess.run(command, env=env, capture_output=True, check=False)
    if check.returncode != 0:
        return None
    return median_ms(run_quietly, repeat, command, env)


def run_quietly(command: list[str], env: dict[str, str] | None = None) -> None:
    subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


def syscall_floor(sysfs: str) -> None:
    """The reads no probe can avoid, in the tightest loop: per PCI function
    its bus link, uevent and numa_node; per network interface and RDMA
    character device its class link; per RDMA device its class link and port 1
    state. Nothing is parsed or kept. Like the probe, it reads relative to
    directory descriptors (the bus and class directories, each function's
    parent directory), which spares the kernel most of every path walk."""
    bus = sysfs + "/bus/pci/devices"
    opened = []
    try:
        bus_fd = os.open(bus, os.O_RDONLY | os.O_DIRECTORY)
        opened.append(bus_fd)
        parents: dict[str, int] = {}
        for bdf in os.listdir(bus):
            target = os.readlink(bdf, dir_fd=bus_fd)
            parent = os.path.normpath(os.path.join(bus, target, ".."))
            parent_fd = parents.get(parent)
            if parent_fd is None:
                parent_fd = parents[parent] = os.open(parent, os.O_RDONLY | os.O_DIRECTORY)
                opened.append(parent_fd)
            _slurp(bdf + "/uevent", parent_fd)
            _slurp(bdf + "/numa_node", parent_fd)
        for cls, files in (
            ("net", ()),
            ("infiniband", ("ports/1/state",)),
            ("infiniband_verbs", ()),
            ("infiniband_mad", ()),
        ):
            base = sysfs + "/class/" + cls
            if not os.path.isdir(base):
                continue
            class_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
            opened.append(class_fd)
            for name in os.listdir(base):
                try:
                    os.readlink(name, dir_fd=class_fd)
                except OSError:
                    continue
                for file in files:
                    _slurp(name + "/" + file, class_fd)
    finally:
        for fd in opened:
            os.close(fd)


def _slurp(path: str, dir_fd: int) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def extended_config_ratio(cache: Path, repeat: int) -> tuple[float, float]:
    """Medians (ms) of the probe of the 4 KiB tree and of the 64-byte one, samples interleaved."""
    roots = [materialize(name, cache) for name in (EXTENDED_TREE, HEADER_TREE)]
    pairs = [(str(root / "sys"), str(root / "proc")) for root in roots]
    for sysfs, procfs in pairs:
        topology.probe(sysfs, procfs)  # warms the page cache
    samples: list[list[float]] = [[], []]
    for _sample in range(repeat):
        for index, (sysfs, procfs) in enumerate(pairs):
            start = time.perf_counter()
            topology.probe(sysfs, procfs)
            samples[index].append((time.perf_counter() - start) * 1000)
    return statistics.median(samples[0]), statistics.median(samples[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="samples per measurement (median reported)")
    parser.add_argument("--trees", nargs="*", default=TREES)
    parser.add_argument("--cache", default=str(REPO / ".cache" / "sysfs"), help="where trees are materialised")
    args = parser.parse_args()

    lib = str(REPO / "plugins" / "module_utils" / "node")
    print(
        f"{'tree':26} {'devices':>7} {'floor':>8} {'in-process':>11} {'/floor':>7} "
        f"{'process':>9} {'lstopo':>9} {'process/lstopo':>15}"
    )
    failures = []
    for name in args.trees:
        root = materialize(name, Path(args.cache))
        sysfs, procfs = str(root / "sys"), str(root / "proc")
        devices = len(topology.probe(sysfs, procfs)["devices"])  # warms the page cache
        floor = median_ms(syscall_floor, args.repeat, sysfs)
        in_process = median_ms(topology.probe, args.repeat, sysfs, procfs)
        command = [sys.executable, "-I", "-S", "-c", PROCESS_CODE, lib, sysfs, procfs]
        process = median_ms(run_quietly, max(5, args.repeat // 3), command)
        baseline = lstopo_ms(root, max(5, args.repeat // 3))
        ratio = f"{process / baseline:14.2f}x" if baseline else f"{'n/a':>15}"
        shown = f"{baseline:7.1f}ms" if baseline else f"{'n/a':>9}"
        print(
            f"{name:26} {devices:7d} {floor:6.2f}ms {in_process:9.2f}ms {in_process / floor:6.2f}x "
            f"{process:7.1f}ms {shown} {ratio}"
        )
        if name == TARGET_TREE and in_process > TARGET_MS:
            failures.append(f"{name}: in-process median {in_process:.2f} ms > {TARGET_MS} ms")
        if name == TARGET_TREE and baseline and process > baseline:
            failures.append(f"{name}: whole-process {process:.1f} ms slower than lstopo {baseline:.1f} ms")
    print("lstopo: 'n/a' where hwloc is not installed or cannot read the tree.")
    extended, header = extended_config_ratio(Path(args.cache), max(args.repeat, 30))
    ratio = extended / header
    print(
        f"config space: {EXTENDED_TREE} (4096 bytes) {extended:.2f}ms, {HEADER_TREE} (64 bytes) {header:.2f}ms,"
        f" ratio {ratio:.2f}x (target <= {TARGET_EXTENDED_RATIO}x)"
    )
    if ratio > TARGET_EXTENDED_RATIO:
        failures.append(f"{EXTENDED_TREE}: {ratio:.2f}x the probe of {HEADER_TREE} > {TARGET_EXTENDED_RATIO}x")
    for failure in failures:
        print("TARGET MISSED:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
