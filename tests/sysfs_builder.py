# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: build fake, kernel-shaped ``/sys`` and ``/proc`` trees from YAML.

This module lives in ``tests/`` and is never shipped with the collection. It
writes a directory tree that looks like what a real Linux kernel exposes under
``/sys`` and ``/proc`` for a machine with PCIe switches, GPUs, RDMA NICs and
SR-IOV virtual functions, so that the topology probe can be pointed at
``ROOT/sys`` (sysfs root) and ``ROOT/proc`` (procfs root). All symlinks are
relative, as the kernel's are, so the tree can be moved or archived.

Usage::

    from sysfs_builder import build_tree, load_layout
    root = build_tree(load_layout("dgx-h100"), tmp_path)   # root/sys, root/proc

    python tests/sysfs_builder.py tests/fixtures/layouts/dgx-h100.yml OUTDIR [--list]

Layout format (YAML mapping; every key optional unless marked)
==============================================================

Integers may be written in hex (``0x10de``). ``addr`` is ``"DD.F"`` in hex
and must be quoted in YAML (``"01.0"``); ``dev:``/``fn:`` work too.

::

    name: dgx-h100                 # used to derive stable ids (UUIDs, GUIDs, MACs)
    description: free text
    cpu:
      vendor: GenuineIntel         # /proc/cpuinfo vendor_id
      model: "Intel(R) Xeon(R) Platinum 8480C"
      threads_per_core: 2          # for core_id / thread_siblings
      possible: "0-223"            # default: 0..max(cpu); sets the cpumask width
    numa:
      node_dir: true               # false: no sys/devices/system/node at all (VMs)
      nodes:                       # REQUIRED (at least one)
        - {id: 0, cpus: "0-55,112-167", memory_kb: 1056000000, package: 0}
      distances: [[10, 21], [21, 10]]   # default: 10 on the diagonal, 21 elsewhere
    nvidia_driver: "570.124.06"    # /proc/driver/nvidia/version
    hostbridges:                   # PCI root complexes, each a pciDDDD:BB directory
      - domain: 0x0000             # 0x10000 and up give 5-hex-digit domains
        bus: 0x15                  # root bus number
        numa_node: 0               # default -1; inherited by everything below
        parent: "LNXSYSTM:00/..."  # optional: path under sys/devices (Hyper-V VMBus)
        link: gen5x16              # optional default link for the functions on the root bus
        files: {name: content}     # optional extra files in the pciDDDD:BB directory
        children: [NODE, ...]
    extra:                         # arbitrary additions, paths relative to ROOT
      files: {"sys/firmware/dmi/id/product_name": "DGXH100"}
      links: {"sys/class/foo/bar": "../../devices/nowhere"}   # may dangle

A ``NODE`` is one of (``type`` selects; default ``endpoint``):

``type: bridge`` (aliases ``rootport``, ``port``): a PCI-PCI bridge
    (class ``0x060400``, driver ``pcieport`` unless ``driver: null``).
    Keys: ``addr``, ``vendor``, ``device``, ``bus`` (secondary bus, default:
    next free one, depth first), ``subordinate`` (reserve buses up to this),
    ``children``, plus every common key below.

``type: switch``: sugar for an upstream port whose secondary bus holds the
    downstream ports. Keys: ``addr``, ``vendor``, ``device``, ``link`` and the
    other common keys (they apply to every port of the switch), ``upstream:
    {overrides}``, ``downstream: [PORT, ...]`` or an integer count. A ``PORT``
    is a bridge mapping (``addr`` defaults to its index, ``children``, any
    override). Switches nest: a downstream port's child may be a switch.

``type: endpoint``: one PCI function, or several with ``functions: [{fn: 0,
    ...}, {fn: 1, ...}]`` (each entry is merged over the parent mapping).
    Keys: ``addr``, ``vendor``, ``device``, ``class`` (REQUIRED), and:

    - ``sriov: {totalvfs, numvfs, offset: 1, stride: 1, vf_device, vf_driver,
      autoprobe: 1, vf_netdev: true, vf_rdma: true}``; VFs are created as
      siblings of the PF with routing ID = PF RID + offset + stride * N (they
      may spill onto following bus numbers, which are then reserved, like the
      kernel's ``pci_iov_bus_range``). VF netdevs are named ``<pf netdev>vN``,
      VF RDMA devices get the next free ``mlx5_N`` style name.
    - ``netdevs: [NAME | {name, type: eth|ib|<int>, address, mtu, speed,
      operstate, dev_port, port, parent}]``. ``name: auto`` gives a systemd
      style name (``ibp29s0``, ``enp27s0f0np0``, ``enP1p0s0``). ``parent:
      virtio0`` puts the netdev under a ``virtio0/`` child device as
      virtio-net does.
    - ``rdma: NAME | {name, node_type, hca_type, fw_ver, node_guid,
      link_layer: InfiniBand|Ethernet|Unknown, rate, state, phys_state, ports:
      N | [{link_layer, rate, state, phys_state, netdev}, ...]}``. One
      ``uverbsN`` per device and one ``umadN`` per port are created.
    - ``gpu: {model, uuid, minor, vbios, irq, excluded}`` (NVIDIA: writes the driver's
      ``/proc/driver/nvidia/gpus/<bdf>/information``) or ``{card, render}``
      (AMD and other DRM drivers: ``drm/cardN`` and ``drm/renderDN``). Implied
      for NVIDIA/AMD display (0x03xxxx) and accelerator (0x12xxxx) classes;
      ``gpu: false`` suppresses it. ``drm: {card, render}`` adds DRM nodes to
      any function (``render: false`` for a BMC VGA).
    - ``nvme: NAME | {name, model, serial, namespaces}`` (implied for class
      0x0108xx; ``nvme: false`` suppresses it).
    - ``hostbridges: [HOSTBRIDGE, ...]``: PCI roots *inside* this function's
      directory (Intel VMD: ``.../0000:00:0e.0/pci10000:e0/10000:e0:06.0``).

Common keys for every function: ``subsystem_vendor``, ``subsystem_device``,
``revision``, ``irq``, ``driver`` (default from a small vendor/class table;
``null`` for unbound; ``driver_dir: false`` leaves the ``driver`` link
dangling), ``numa_node`` (override, ``-1`` allowed), ``link`` (``gen5x16``,
``{speed: "32.0 GT/s PCIe", width: 16}`` or ``null`` for no link files;
default: the link of the port above), ``max_link``, ``in_bus_devices: false``
(keep the function out of ``sys/bus/pci/devices``, as in a real snapshot),
``links: {name: raw relative target}`` (extra symlinks, may dangle, e.g.
``firmware_node``), ``files: {name: content}``.

Each function gets the attribute files a probe reads (``class``, ``vendor``,
``device``, ``subsystem_*``, ``revision``, ``numa_node``, ``local_cpulist``,
``local_cpus``, link speed/width, ``uevent``, ``modalias``, ``irq``,
``enable`` and a 64-byte ``config`` header: bridges carry their bus numbers
there, and a VF's header reads 0xffff as vendor/device, as on real hardware),
plus ``subsystem`` and ``driver`` links. Attributes that probes rarely read
are left out, to keep big trees fast. Unknown top-level keys are ignored, so a
layout can keep YAML anchors under ``x-templates``.

Bus numbers are assigned like the kernel's scan: devices on a bus are visited
in devfn order, each bridge takes the next free bus number for its secondary
bus and its subordinate bus is the last one used below it; buses needed by VFs
on a bus are reserved before the bridges on that bus are numbered.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import struct
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Spec = dict[str, Any]

LAYOUT_DIR = Path(__file__).resolve().parent / "fixtures" / "layouts"

_LINK_SPEEDS = {1: "2.5", 2: "5.0", 3: "8.0", 4: "16.0", 5: "32.0", 6: "64.0"}

_BRIDGE_CLASS = 0x060400

# Default kernel driver by vendor when a layout does not say (``driver: null``
# means unbound). Class-based rules in _default_driver() take precedence.
_VENDOR_DRIVERS = {
    0x10DE: "nvidia",
    0x15B3: "mlx5_core",
    0x1002: "amdgpu",
    0x14E4: "bnxt_en",
    0x1AF4: "virtio-pci",
    0x1D0F: "efa",
    0x1A03: "ast",
    0x8086: None,
}

# Default RDMA device name prefix by vendor (names are prefixN, kernel style).
_RDMA_PREFIX = {0x15B3: "mlx5_", 0x14E4: "bnxt_re", 0x1D0F: "efa_", 0x8086: "irdma"}

# OUI used for deterministic MAC addresses and GUIDs.
_OUI = {
    0x15B3: b"\xb8\x3f\xd2",
    0x14E4: b"\x00\x0a\xf7",
    0x1AF4: b"\x52\x54\x00",
    0x1D0F: b"\x06\x5a\x1c",
    0x8086: b"\x3c\xfd\xfe",
}

_NVIDIA_MODELS = {
    0x2330: "NVIDIA H100 80GB HBM3",
    0x2335: "NVIDIA H200",
    0x20B0: "NVIDIA A100-SXM4-40GB",
    0x20B2: "NVIDIA A100-SXM4-80GB",
    0x20B5: "NVIDIA A100 80GB PCIe",
    0x26B9: "NVIDIA L40S",
    0x15F8: "Tesla P100-PCIE-16GB",
}

_RDMA_NODE_TYPES = {"ca": "1: CA", "rnic": "4: RNIC", "unspecified": "7: unspecified"}
_NETDEV_TYPES = {"eth": 1, "ethernet": 1, "ib": 32, "infiniband": 32, "loopback": 772}


class LayoutError(ValueError):
    """A layout description is inconsistent or incomplete."""


@dataclass
class PciFunction:
    """One PCI function written into the tree (returned for callers and tests)."""

    domain: int
    bus: int
    dev: int
    fn: int
    path: str
    vendor: int
    device: int
    pci_class: int
    numa_node: int
    driver: str | None = None
    secondary: int | None = None
    subordinate: int | None = None
    physfn: str | None = None
    netdevs: list[str] = field(default_factory=list)
    rdma: list[str] = field(default_factory=list)
    role: str = "endpoint"
    multifunction: bool = False
    link: tuple[str, str] | None = field(default=None, repr=False)
    max_link: tuple[str, str] | None = field(default=None, repr=False)

    @property
    def bdf(self) -> str:
        return _bdf(self.domain, self.bus, self.dev, self.fn)

    @property
    def is_bridge(self) -> bool:
        return self.secondary is not None


@dataclass
class BuildResult:
    root: Path
    functions: list[PciFunction]

    def by_bdf(self) -> dict[str, PciFunction]:
        return {f.bdf: f for f in self.functions}


# --------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------


def _bdf(domain: int, bus: int, dev: int, fn: int) -> str:
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn:x}"


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise LayoutError(f"{what}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            pass
    raise LayoutError(f"{what}: expected an integer, got {value!r}")


def parse_cpulist(text: str) -> list[int]:
    """Parse a kernel cpulist (``0-3,8,10-11``) into a sorted list."""
    cpus: set[int] = set()
    text = str(text).strip()
    if not text:
        return []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.update(range(int(lo), int(hi) + 1))
        elif part:
            cpus.add(int(part))
    return sorted(cpus)


def format_cpulist(cpus: list[int]) -> str:
    """Format CPUs the way the kernel's ``%*pbl`` does (``0-55,112-167``)."""
    out: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def format_cpumask(cpus: list[int], nbits: int) -> str:
    """Format CPUs the way the kernel's ``%*pb`` does: 32-bit hex groups, MSB first."""
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    groups = max(1, (nbits + 31) // 32)
    return ",".join(f"{(value >> (32 * g)) & 0xFFFFFFFF:08x}" for g in reversed(range(groups)))


def _link(value: Any, what: str) -> tuple[str, str] | None:
    """Return (speed text, width text) from ``gen5x16`` / mapping / None."""
    if value is None or value == "none":
        return None
    if isinstance(value, str):
        text = value.lower().replace(" ", "")
        if text.startswith("gen") and "x" in text:
            gen, width = text[3:].split("x", 1)
            speed = _LINK_SPEEDS.get(int(gen))
            if speed is None:
                raise LayoutError(f"{what}: unknown PCIe generation in {value!r}")
            return f"{speed} GT/s PCIe", str(int(width))
        raise LayoutError(f"{what}: link must look like 'gen5x16', got {value!r}")
    if isinstance(value, dict):
        if "gen" in value:
            speed = f"{_LINK_SPEEDS[int(value['gen'])]} GT/s PCIe"
        else:
            speed = str(value["speed"])
        return speed, str(int(value.get("width", 16)))
    raise LayoutError(f"{what}: bad link {value!r}")


def _parse_addr(entry: Spec, default_dev: int, what: str) -> tuple[int, int]:
    if "addr" in entry:
        text = str(entry["addr"])
        if "." not in text:
            raise LayoutError(f"{what}: addr must be 'DD.F' (quoted), got {text!r}")
        dev_s, fn_s = text.split(".", 1)
        dev, fn = int(dev_s, 16), int(fn_s, 16)
    else:
        dev = _int(entry.get("dev", default_dev), f"{what}.dev")
        fn = _int(entry.get("fn", 0), f"{what}.fn")
    if not (0 <= dev < 32 and 0 <= fn < 8):
        raise LayoutError(f"{what}: device {dev:#x} function {fn} out of range")
    return dev, fn


class _Writer:
    """Creates files, directories and relative symlinks; keeps a few caches."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._dirs: set[str] = set()

    def mkdir(self, path: str) -> None:
        if path not in self._dirs:
            os.makedirs(path, exist_ok=True)
            self._dirs.add(path)

    def write(self, path: str, text: str) -> None:
        """Write a sysfs attribute: the text plus the kernel's trailing newline."""
        self.write_bytes(path, (text if text.endswith("\n") or text == "" else text + "\n").encode("ascii"))

    @staticmethod
    def write_bytes(path: str, data: bytes) -> None:
        # os.open/os.write: the builder writes ~30k small files for sriov-8x64.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def files(self, directory: str, items: dict[str, Any]) -> None:
        self.mkdir(directory)
        for name, value in items.items():
            self.write(os.path.join(directory, name), str(value))

    def link(self, link_path: str, target: str) -> None:
        """Symlink ``link_path`` to absolute ``target`` with a relative path.

        Like kernfs, the path climbs to the *target's parent* and descends
        again, so a link to an ancestor reads ``../../../0000:82:00.0`` rather
        than ``../..``: its last component always names the target.
        """
        link_dir = os.path.dirname(link_path)
        self.mkdir(link_dir)
        up = os.path.relpath(os.path.dirname(target), link_dir)
        name = os.path.basename(target)
        os.symlink(name if up == "." else f"{up}/{name}", link_path)

    def raw_link(self, link_path: str, rel_target: str) -> None:
        self.mkdir(os.path.dirname(link_path))
        if os.path.isabs(rel_target):
            raise LayoutError(f"symlink targets must be relative: {rel_target!r}")
        os.symlink(rel_target, link_path)


# --------------------------------------------------------------------------
# the builder
# --------------------------------------------------------------------------


class _Builder:
    def __init__(self, spec: Spec, root: Path) -> None:
        self.spec = spec
        self.name = str(spec.get("name", "layout"))
        self.root = str(root)
        self.sys = os.path.join(self.root, "sys")
        self.proc = os.path.join(self.root, "proc")
        self.w = _Writer(self.root)
        self.functions: list[PciFunction] = []
        self.used_buses: dict[tuple[int, int], str] = {}
        self.used_bdfs: set[str] = set()
        self.counters: dict[str, int] = {}
        self.names: dict[str, set[str]] = {"net": {"lo"}, "rdma": set()}
        self.nvidia_minors: set[int] = set()
        self.drm_cards: set[int] = set()
        self.drm_renders: set[int] = set()
        self.nvme_names: set[str] = set()
        self.drivers: set[str] = set()
        self.vf_jobs: list[tuple[PciFunction, Spec, list[tuple[int, int, int]], str]] = []
        self.class_dirs: set[str] = set()
        self._setup_cpus()

    # ---- ids -------------------------------------------------------------
    def _hash(self, *parts: Any) -> bytes:
        text = "\0".join([self.name, *(str(p) for p in parts)])
        return hashlib.sha256(text.encode()).digest()

    def _next(self, counter: str, used: set[Any] | None = None, start: int = 0) -> int:
        value = self.counters.get(counter, start)
        while used is not None and value in used:
            value += 1
        self.counters[counter] = value + 1
        return value

    # ---- CPUs and NUMA ---------------------------------------------------
    def _setup_cpus(self) -> None:
        numa = self.spec.get("numa") or {}
        nodes = numa.get("nodes") or []
        if not nodes:
            raise LayoutError("numa.nodes: at least one node is required")
        self.node_cpus: dict[int, list[int]] = {}
        self.node_mem: dict[int, int] = {}
        self.node_pkg: dict[int, int] = {}
        for i, node in enumerate(nodes):
            nid = _int(node.get("id", i), f"numa.nodes[{i}].id")
            self.node_cpus[nid] = parse_cpulist(str(node.get("cpus", "")))
            self.node_mem[nid] = _int(node.get("memory_kb", 16 * 1024 * 1024), "memory_kb")
            self.node_pkg[nid] = _int(node.get("package", nid), "package")
        self.all_cpus = sorted({c for cpus in self.node_cpus.values() for c in cpus})
        if not self.all_cpus:
            raise LayoutError("numa.nodes: no CPUs")
        cpu = self.spec.get("cpu") or {}
        possible = parse_cpulist(str(cpu.get("possible", f"0-{self.all_cpus[-1]}")))
        self.possible = possible
        self.nbits = possible[-1] + 1
        self.node_ids = sorted(self.node_cpus)
        dist = numa.get("distances")
        n = len(self.node_ids)
        if dist is None:
            dist = [[10 if a == b else 21 for b in range(n)] for a in range(n)]
        if len(dist) != n or any(len(row) != n for row in dist):
            raise LayoutError("numa.distances must be an N x N matrix")
        self.distances = [[int(x) for x in row] for row in dist]

    def cpus_for_node(self, node: int) -> list[int]:
        if node < 0 or node not in self.node_cpus:
            return self.all_cpus
        return self.node_cpus[node]

    def write_system(self) -> None:
        w = self.w
        cpu_spec = self.spec.get("cpu") or {}
        tpc = _int(cpu_spec.get("threads_per_core", 1), "cpu.threads_per_core")
        cpu_root = os.path.join(self.sys, "devices", "system", "cpu")
        allcpus = format_cpulist(self.all_cpus)
        w.files(
            cpu_root,
            {
                "online": allcpus,
                "present": allcpus,
                "possible": format_cpulist(self.possible),
                "offline": "",
                "kernel_max": "8191",
            },
        )
        pkg_cpus: dict[int, list[int]] = {}
        cpu_node: dict[int, int] = {}
        for nid in self.node_ids:
            pkg_cpus.setdefault(self.node_pkg[nid], []).extend(self.node_cpus[nid])
            for c in self.node_cpus[nid]:
                cpu_node[c] = nid
        node_dir = (self.spec.get("numa") or {}).get("node_dir", True)
        cpuinfo: dict[int, str] = {}
        for pkg, cpus in sorted(pkg_cpus.items()):
            cpus.sort()
            ncores = max(1, len(cpus) // max(1, tpc))
            core_of = {c: i % ncores for i, c in enumerate(cpus)}
            for c in cpus:
                core = core_of[c]
                siblings = [x for x in cpus if core_of[x] == core]
                d = os.path.join(cpu_root, f"cpu{c}")
                w.files(
                    os.path.join(d, "topology"),
                    {
                        "physical_package_id": pkg,
                        "die_id": 0,
                        "core_id": core,
                        "thread_siblings_list": format_cpulist(siblings),
                        "thread_siblings": format_cpumask(siblings, self.nbits),
                        "core_siblings_list": format_cpulist(cpus),
                        "core_siblings": format_cpumask(cpus, self.nbits),
                        "package_cpus_list": format_cpulist(cpus),
                    },
                )
                w.write(os.path.join(d, "online"), "1")
                if node_dir:
                    w.link(
                        os.path.join(d, f"node{cpu_node[c]}"),
                        os.path.join(self.sys, "devices", "system", "node", f"node{cpu_node[c]}"),
                    )
                w.link(os.path.join(self.sys, "bus", "cpu", "devices", f"cpu{c}"), d)
                cpuinfo[c] = "\n".join(
                    [
                        f"processor\t: {c}",
                        f"vendor_id\t: {cpu_spec.get('vendor', 'GenuineIntel')}",
                        f"model name\t: {cpu_spec.get('model', 'Synthetic CPU')}",
                        f"physical id\t: {pkg}",
                        f"siblings\t: {len(cpus)}",
                        f"core id\t\t: {core}",
                        f"cpu cores\t: {ncores}",
                        "flags\t\t: fpu sse sse2 ht lm",
                        "",
                    ]
                )
        self.w.mkdir(self.proc)
        w.write(os.path.join(self.proc, "cpuinfo"), "\n".join(cpuinfo[c] for c in sorted(cpuinfo)))
        total = sum(self.node_mem.values())
        w.write(
            os.path.join(self.proc, "meminfo"),
            "".join(
                f"{label:<16}{value:>8} kB\n"
                for label, value in (
                    ("MemTotal:", total),
                    ("MemFree:", total * 9 // 10),
                    ("MemAvailable:", total * 9 // 10),
                )
            ),
        )
        if not node_dir:
            return
        node_root = os.path.join(self.sys, "devices", "system", "node")
        ids = format_cpulist(self.node_ids)
        with_cpu = format_cpulist([n for n in self.node_ids if self.node_cpus[n]])
        w.files(
            node_root,
            {
                "online": ids,
                "possible": ids,
                "has_cpu": with_cpu,
                "has_memory": ids,
                "has_normal_memory": ids,
            },
        )
        for i, nid in enumerate(self.node_ids):
            d = os.path.join(node_root, f"node{nid}")
            mem = self.node_mem[nid]
            meminfo = "".join(
                f"Node {nid} {label:<16}{value:>8} kB\n"
                for label, value in (
                    ("MemTotal:", mem),
                    ("MemFree:", mem * 9 // 10),
                    ("MemUsed:", mem - mem * 9 // 10),
                )
            )
            w.files(
                d,
                {
                    "cpulist": format_cpulist(self.node_cpus[nid]),
                    "cpumap": format_cpumask(self.node_cpus[nid], self.nbits),
                    "distance": " ".join(str(x) for x in self.distances[i]),
                    "meminfo": meminfo,
                },
            )
            for c in self.node_cpus[nid]:
                w.link(os.path.join(d, f"cpu{c}"), os.path.join(cpu_root, f"cpu{c}"))
            w.link(os.path.join(self.sys, "bus", "node", "devices", f"node{nid}"), d)

    # ---- class links -----------------------------------------------------
    def class_link(self, cls: str, name: str, target: str) -> None:
        self.w.link(os.path.join(self.sys, "class", cls, name), target)

    # ---- PCI tree --------------------------------------------------------
    def write_pci(self) -> None:
        self.w.mkdir(os.path.join(self.sys, "bus", "pci", "devices"))
        self.w.mkdir(os.path.join(self.sys, "bus", "pci", "drivers"))
        devices = os.path.join(self.sys, "devices")
        for i, hb in enumerate(self.spec.get("hostbridges") or []):
            self._hostbridge(hb, devices, f"hostbridges[{i}]")
        # VFs are probed after every PF, like the kernel when sriov_numvfs is
        # written at boot: their auto names come after the PFs' ones.
        for pf, sriov, rids, what in self.vf_jobs:
            self._write_vfs(pf, sriov, rids, what)

    def _hostbridge(self, hb: Spec, parent_dir: str, what: str) -> None:
        domain = _int(hb.get("domain", 0), f"{what}.domain")
        bus = _int(hb.get("bus", 0), f"{what}.bus")
        numa = _int(hb.get("numa_node", -1), f"{what}.numa_node")
        if hb.get("parent"):
            parent_dir = os.path.join(self.sys, "devices", str(hb["parent"]).strip("/"))
        name = f"pci{domain:04x}:{bus:02x}"
        hb_dir = os.path.join(parent_dir, name)
        self._claim_bus(domain, bus, f"{what} ({name})")
        self.w.mkdir(hb_dir)
        self.w.write(os.path.join(hb_dir, "uevent"), "")
        if hb.get("files"):
            self.w.files(hb_dir, dict(hb["files"]))
        self._pci_bus_dir(hb_dir, domain, bus, numa)
        link = _link(hb.get("link"), f"{what}.link") if "link" in hb else None
        self._walk_bus(hb.get("children") or [], hb_dir, domain, bus, numa, link, bus + 1, what)

    def _claim_bus(self, domain: int, bus: int, what: str) -> None:
        if bus > 0xFF:
            raise LayoutError(f"{what}: bus number {bus:#x} exceeds 0xff")
        key = (domain, bus)
        if key in self.used_buses:
            raise LayoutError(f"{what}: bus {domain:04x}:{bus:02x} already used by {self.used_buses[key]}")
        self.used_buses[key] = what

    def _pci_bus_dir(self, parent: str, domain: int, bus: int, numa: int) -> None:
        bus_id = f"{domain:04x}:{bus:02x}"
        d = os.path.join(parent, "pci_bus", bus_id)
        cpus = self.cpus_for_node(numa)
        self.w.files(
            d,
            {
                "cpuaffinity": format_cpumask(cpus, self.nbits),
                "cpulistaffinity": format_cpulist(cpus),
            },
        )
        self.class_link("pci_bus", bus_id, d)

    @staticmethod
    def _expand(entries: list[Spec], what: str) -> list[tuple[Spec, int, str]]:
        """Expand switch/functions sugar; returns (node, default dev, label)."""
        out: list[tuple[Spec, int, str]] = []
        for idx, raw in enumerate(entries):
            label = f"{what}.children[{idx}]"
            if not isinstance(raw, dict):
                raise LayoutError(f"{label}: expected a mapping, got {raw!r}")
            kind = raw.get("type", "endpoint")
            if kind == "switch":
                common = {
                    k: v
                    for k, v in raw.items()
                    if k not in ("type", "upstream", "downstream", "children", "addr", "dev", "fn")
                }
                up = dict(common)
                for key in ("addr", "dev", "fn"):
                    if key in raw:
                        up[key] = raw[key]
                up.update(raw.get("upstream") or {})
                up["type"] = "bridge"
                up["role"] = "upstream"
                downstream = raw.get("downstream", 0)
                if isinstance(downstream, int):
                    downstream = [{} for _port in range(downstream)]
                ports = []
                for i, port in enumerate(downstream):
                    p = {k: v for k, v in common.items() if k not in ("bus", "subordinate")}
                    p.setdefault("dev", i)
                    p.update(port or {})
                    p["type"] = "bridge"
                    p["role"] = "downstream"
                    ports.append(p)
                up["children"] = ports
                out.append((up, idx, label))
            elif "functions" in raw:
                base = {k: v for k, v in raw.items() if k != "functions"}
                for fi, func in enumerate(raw["functions"]):
                    merged = dict(base)
                    merged.setdefault("fn", fi)
                    merged.update(func or {})
                    out.append((merged, idx, f"{label}.functions[{fi}]"))
            else:
                out.append((raw, idx, label))
        return out

    def _walk_bus(
        self,
        entries: list[Spec],
        parent_dir: str,
        domain: int,
        bus: int,
        numa: int,
        parent_link: tuple[str, str] | None,
        next_bus: int,
        what: str,
    ) -> int:
        nodes = []
        for node, default_dev, label in self._expand(entries, what):
            dev, fn = _parse_addr(node, default_dev, label)
            nodes.append((dev, fn, node, label))
        nodes.sort(key=lambda item: (item[0], item[1]))
        devs_with_fns: dict[int, int] = {}
        for dev, _fn, _node, _label in nodes:
            devs_with_fns[dev] = devs_with_fns.get(dev, 0) + 1
        # First pass: every endpoint on this bus (and the buses its VFs need).
        pending_bridges = []
        for dev, fn, node, label in nodes:
            kind = node.get("type", "endpoint")
            if kind in ("bridge", "rootport", "port"):
                pending_bridges.append((dev, fn, node, label))
                continue
            if kind != "endpoint":
                raise LayoutError(f"{label}: unknown type {kind!r}")
            func = self._function(
                node,
                parent_dir,
                domain,
                bus,
                dev,
                fn,
                numa,
                parent_link,
                label,
                multifunction=devs_with_fns[dev] > 1,
            )
            last_vf_bus = self._plan_vfs(func, node, label)
            if last_vf_bus is not None and last_vf_bus >= next_bus:
                for extra in range(max(next_bus, bus + 1), last_vf_bus + 1):
                    self._claim_bus(domain, extra, f"{label} (VF bus)")
                next_bus = last_vf_bus + 1
        # Second pass: bridges, depth first, in devfn order.
        for dev, fn, node, label in pending_bridges:
            secondary = _int(node.get("bus", next_bus), f"{label}.bus")
            if secondary < next_bus and "bus" not in node:
                secondary = next_bus
            func = self._function(
                node,
                parent_dir,
                domain,
                bus,
                dev,
                fn,
                numa,
                parent_link,
                label,
                multifunction=devs_with_fns[dev] > 1,
                secondary=secondary,
            )
            self._claim_bus(domain, secondary, label)
            child_link = _link(node["link"], f"{label}.link") if "link" in node else parent_link
            end = self._walk_bus(
                node.get("children") or [],
                func.path,
                domain,
                secondary,
                func.numa_node,
                child_link,
                max(next_bus, secondary + 1),
                label,
            )
            subordinate = max(end - 1, secondary)
            if "subordinate" in node:
                wanted = _int(node["subordinate"], f"{label}.subordinate")
                for extra in range(subordinate + 1, wanted + 1):
                    self._claim_bus(domain, extra, f"{label} (reserved)")
                subordinate = max(subordinate, wanted)
            func.subordinate = subordinate
            self._bridge_files(func)
            next_bus = subordinate + 1
        return next_bus

    # ---- one function ------------------------------------------------------
    @staticmethod
    def _default_driver(vendor: int, device: int, pci_class: int) -> str | None:
        if pci_class >> 8 == 0x0604:
            return "pcieport"
        if pci_class >> 16 == 0x06:
            return None
        if pci_class >> 8 == 0x0108:
            return "nvme"
        if vendor == 0x8086 and device in (0x201D, 0x28C0, 0x467F, 0x4C3D, 0x9A0B):
            return "vmd"
        return _VENDOR_DRIVERS.get(vendor)

    def _function(
        self,
        node: Spec,
        parent_dir: str,
        domain: int,
        bus: int,
        dev: int,
        fn: int,
        numa: int,
        parent_link: tuple[str, str] | None,
        label: str,
        multifunction: bool,
        secondary: int | None = None,
        physfn: PciFunction | None = None,
        vf_index: int | None = None,
    ) -> PciFunction:
        is_bridge = secondary is not None
        bdf = _bdf(domain, bus, dev, fn)
        if bdf in self.used_bdfs:
            raise LayoutError(f"{label}: duplicate PCI address {bdf}")
        self.used_bdfs.add(bdf)
        if "vendor" not in node or "device" not in node:
            raise LayoutError(f"{label}: vendor and device are required")
        vendor = _int(node["vendor"], f"{label}.vendor")
        device = _int(node["device"], f"{label}.device")
        if is_bridge:
            pci_class = _int(node.get("class", _BRIDGE_CLASS), f"{label}.class")
        else:
            if "class" not in node:
                raise LayoutError(f"{label}: class is required for an endpoint")
            pci_class = _int(node["class"], f"{label}.class")
        numa = _int(node.get("numa_node", numa), f"{label}.numa_node")
        if "driver" in node:
            driver = node["driver"]
        else:
            driver = self._default_driver(vendor, device, pci_class)
        link = _link(node["link"], f"{label}.link") if "link" in node else parent_link
        max_link = _link(node["max_link"], f"{label}.max_link") if "max_link" in node else link
        role = str(node.get("role", "bridge" if is_bridge else "endpoint"))
        if physfn is not None:
            role = "vf"
        path = os.path.join(parent_dir, bdf)
        func = PciFunction(
            domain=domain,
            bus=bus,
            dev=dev,
            fn=fn,
            path=path,
            vendor=vendor,
            device=device,
            pci_class=pci_class,
            numa_node=numa,
            driver=driver,
            secondary=secondary,
            physfn=physfn.bdf if physfn is not None else None,
            role=role,
            multifunction=multifunction,
            link=link,
            max_link=max_link,
        )
        self.functions.append(func)
        sub_vendor = _int(node.get("subsystem_vendor", vendor), f"{label}.subsystem_vendor")
        sub_device = _int(node.get("subsystem_device", 0), f"{label}.subsystem_device")
        revision = _int(node.get("revision", 0), f"{label}.revision")
        cpus = self.cpus_for_node(numa)
        modalias = (
            f"pci:v{vendor:08X}d{device:08X}sv{sub_vendor:08X}sd{sub_device:08X}"
            f"bc{pci_class >> 16:02X}sc{(pci_class >> 8) & 0xFF:02X}i{pci_class & 0xFF:02X}"
        )
        uevent = []
        if driver:
            uevent.append(f"DRIVER={driver}")
        uevent += [
            f"PCI_CLASS={pci_class:X}",
            f"PCI_ID={vendor:04X}:{device:04X}",
            f"PCI_SUBSYS_ID={sub_vendor:04X}:{sub_device:04X}",
            f"PCI_SLOT_NAME={bdf}",
            f"MODALIAS={modalias}",
        ]
        files: dict[str, Any] = {
            "class": f"0x{pci_class:06x}",
            "vendor": f"0x{vendor:04x}",
            "device": f"0x{device:04x}",
            "subsystem_vendor": f"0x{sub_vendor:04x}",
            "subsystem_device": f"0x{sub_device:04x}",
            "revision": f"0x{revision:02x}",
            "numa_node": str(numa),
            "local_cpulist": format_cpulist(cpus),
            "local_cpus": format_cpumask(cpus, self.nbits),
            "uevent": "\n".join(uevent),
            "modalias": modalias,
            "irq": str(_int(node.get("irq", 0), f"{label}.irq")),
            "enable": "1" if driver else "0",
        }
        if link is not None:
            files["current_link_speed"], files["current_link_width"] = link
        if max_link is not None:
            files["max_link_speed"], files["max_link_width"] = max_link
        for name, content in (node.get("files") or {}).items():
            files[str(name)] = content
        self.w.files(path, files)
        header = 0x01 if is_bridge else 0x00
        if multifunction:
            header |= 0x80
        # A VF's Vendor and Device ID read FFFFh (SR-IOV); of its Command register only Bus Master Enable
        # applies (memory space is the PF's VF MSE, INTx does not exist). Status, revision and class answer.
        cfg_vendor, cfg_device = (0xFFFF, 0xFFFF) if physfn is not None else (vendor, device)
        command = (0x0004 if physfn is not None else 0x0406) if driver else 0
        config = bytearray(64)
        struct.pack_into(
            "<HHHHBBBBBBBB",
            config,
            0,
            cfg_vendor,
            cfg_device,
            command,
            0x0010,
            revision,
            pci_class & 0xFF,
            (pci_class >> 8) & 0xFF,
            pci_class >> 16,
            0,
            0,
            header,
            0,
        )
        if is_bridge:
            struct.pack_into("<BBB", config, 0x18, bus, secondary or 0, 0)
        else:
            struct.pack_into("<HH", config, 0x2C, sub_vendor, sub_device)
        self.w.write_bytes(os.path.join(path, "config"), bytes(config))
        pci_root = os.path.join(self.sys, "bus", "pci")
        self.w.link(os.path.join(path, "subsystem"), pci_root)
        if driver:
            drv_dir = os.path.join(pci_root, "drivers", str(driver))
            if node.get("driver_dir", True):
                if driver not in self.drivers:
                    self.w.mkdir(drv_dir)
                    self.w.write(os.path.join(drv_dir, "bind"), "")
                    self.w.write(os.path.join(drv_dir, "unbind"), "")
                    self.drivers.add(str(driver))
                self.w.link(os.path.join(drv_dir, bdf), path)
            self.w.link(os.path.join(path, "driver"), drv_dir)
        if node.get("in_bus_devices", True):
            self.w.link(os.path.join(pci_root, "devices", bdf), path)
        for name, target in (node.get("links") or {}).items():
            self.w.raw_link(os.path.join(path, str(name)), str(target))
        if physfn is not None:
            self.w.link(os.path.join(path, "physfn"), physfn.path)
        if not is_bridge:
            self._children_of_endpoint(func, node, label, vf_index)
        return func

    def _bridge_files(self, func: PciFunction) -> None:
        assert func.secondary is not None and func.subordinate is not None
        self.w.write(os.path.join(func.path, "secondary_bus_number"), str(func.secondary))
        self.w.write(os.path.join(func.path, "subordinate_bus_number"), str(func.subordinate))
        cfg_path = os.path.join(func.path, "config")
        with open(cfg_path, "r+b") as fh:
            fh.seek(0x1A)
            fh.write(bytes([func.subordinate]))
        self._pci_bus_dir(func.path, func.domain, func.secondary, func.numa_node)

    # ---- SR-IOV ------------------------------------------------------------
    def _plan_vfs(self, pf: PciFunction, node: Spec, label: str) -> int | None:
        sriov = node.get("sriov")
        if not sriov:
            return None
        what = f"{label}.sriov"
        total = _int(sriov.get("totalvfs", 0), f"{what}.totalvfs")
        num = _int(sriov.get("numvfs", 0), f"{what}.numvfs")
        offset = _int(sriov.get("offset", 1), f"{what}.offset")
        stride = _int(sriov.get("stride", 1), f"{what}.stride")
        if num > total:
            raise LayoutError(f"{what}: numvfs {num} > totalvfs {total}")
        vf_device = _int(sriov.get("vf_device", pf.device), f"{what}.vf_device")
        self.w.files(
            pf.path,
            {
                "sriov_totalvfs": total,
                "sriov_numvfs": num,
                "sriov_offset": offset,
                "sriov_stride": stride,
                "sriov_vf_device": f"{vf_device:x}",
                "sriov_drivers_autoprobe": _int(sriov.get("autoprobe", 1), f"{what}.autoprobe"),
            },
        )
        pf_rid = (pf.bus << 8) | (pf.dev << 3) | pf.fn
        rids = []
        last_bus = pf.bus
        for i in range(num):
            rid = pf_rid + offset + stride * i
            vf_bus, devfn = rid >> 8, rid & 0xFF
            rids.append((vf_bus, devfn >> 3, devfn & 7))
            last_bus = max(last_bus, vf_bus)
        if num:
            self.vf_jobs.append((pf, sriov, rids, what))
        return last_bus if last_bus > pf.bus else None

    def _write_vfs(self, pf: PciFunction, sriov: Spec, rids: list[tuple[int, int, int]], what: str) -> None:
        parent_dir = os.path.dirname(pf.path)
        pf_node = self._pf_nodes[pf.bdf]
        for i, (bus, dev, fn) in enumerate(rids):
            vf_node: Spec = {
                "vendor": pf.vendor,
                "device": _int(sriov.get("vf_device", pf.device), f"{what}.vf_device"),
                "class": sriov.get("vf_class", pf.pci_class),
                "subsystem_vendor": pf_node.get("subsystem_vendor", pf.vendor),
                "subsystem_device": pf_node.get("subsystem_device", 0),
                "revision": pf_node.get("revision", 0),
                "driver": sriov.get("vf_driver", pf.driver),
                "gpu": False,
                "nvme": False,
            }
            if pf.link is None:
                vf_node["link"] = None
            else:
                vf_node["link"] = {"speed": pf.link[0], "width": pf.link[1]}
            if pf.max_link is not None:
                vf_node["max_link"] = {"speed": pf.max_link[0], "width": pf.max_link[1]}
            if sriov.get("vf_netdev", True) and pf.netdevs:
                pf_dev = self._pf_netdev_specs[pf.bdf]
                vf_node["netdevs"] = [
                    {
                        "name": f"{pf.netdevs[0]}v{i}",
                        "type": pf_dev.get("type", "eth"),
                        "mtu": pf_dev.get("mtu", 1500),
                        "speed": pf_dev.get("speed", -1),
                        "operstate": pf_dev.get("operstate", "up"),
                    }
                ]
            if sriov.get("vf_rdma", True) and pf.rdma:
                rd = self._pf_rdma_specs[pf.bdf]
                vf_node["rdma"] = {
                    "name": "auto",
                    "link_layer": rd.get("link_layer", "InfiniBand"),
                    "rate": rd.get("rate", "400 Gb/sec (4X NDR)"),
                    "hca_type": rd.get("vf_hca_type", rd.get("hca_type")),
                }
            vf = self._function(
                vf_node,
                parent_dir,
                pf.domain,
                bus,
                dev,
                fn,
                pf.numa_node,
                None,
                f"{what}.vf[{i}]",
                multifunction=True,
                physfn=pf,
                vf_index=i,
            )
            self.w.link(os.path.join(pf.path, f"virtfn{i}"), vf.path)

    # ---- what hangs below an endpoint ------------------------------------
    _pf_nodes: dict[str, Spec]
    _pf_netdev_specs: dict[str, Spec]
    _pf_rdma_specs: dict[str, Spec]

    def _children_of_endpoint(self, func: PciFunction, node: Spec, label: str, vf_index: int | None) -> None:
        if node.get("sriov"):
            self._pf_nodes[func.bdf] = node
        netdev_specs = [nd if isinstance(nd, dict) else {"name": nd} for nd in node.get("netdevs") or []]
        rdma = node.get("rdma")
        if rdma:
            rd = rdma if isinstance(rdma, dict) else {"name": rdma}
        else:
            rd = None
        net_names = []
        for i, nd in enumerate(netdev_specs):
            net_names.append(self._netdev(func, nd, rd, i, f"{label}.netdevs[{i}]"))
        if netdev_specs and node.get("sriov"):
            self._pf_netdev_specs[func.bdf] = dict(netdev_specs[0])
            self._pf_netdev_specs[func.bdf].setdefault("type", self._net_type(func, netdev_specs[0], rd))
        if rd is not None:
            if node.get("sriov"):
                self._pf_rdma_specs[func.bdf] = rd
            self._rdma(func, rd, net_names, f"{label}.rdma")
        gpu = node.get("gpu")
        base = func.pci_class >> 16
        if gpu is None and base in (0x03, 0x12) and func.vendor in (0x10DE, 0x1002):
            gpu = {}
        if gpu is not False and gpu is not None:
            if func.vendor == 0x10DE or (isinstance(gpu, dict) and "uuid" in gpu):
                self._nvidia(func, gpu if isinstance(gpu, dict) else {}, label)
            else:
                self._drm(func, gpu if isinstance(gpu, dict) else {}, label)
        if node.get("drm"):
            self._drm(func, node["drm"] if isinstance(node["drm"], dict) else {}, label)
        nvme = node.get("nvme")
        if nvme is None and func.pci_class >> 8 == 0x0108:
            nvme = {}
        if nvme is not False and nvme is not None:
            self._nvme(func, nvme if isinstance(nvme, dict) else {"name": nvme}, label)
        for i, hb in enumerate(node.get("hostbridges") or []):
            self._hostbridge(hb, func.path, f"{label}.hostbridges[{i}]")

    def _mac(self, func: PciFunction, salt: Any) -> bytes:
        oui = _OUI.get(func.vendor, b"\x02\x00\x00")
        return oui + self._hash("mac", func.bdf, salt)[:3]

    def _guid(self, func: PciFunction, salt: Any) -> bytes:
        oui = _OUI.get(func.vendor, b"\x02\x00\x00")
        return oui + b"\x03\x00" + self._hash("guid", func.bdf, salt)[:3]

    @staticmethod
    def _fmt_guid(raw: bytes) -> str:
        h = raw.hex()
        return ":".join(h[i : i + 4] for i in range(0, 16, 4))

    def _net_type(self, func: PciFunction, nd: Spec, rd: Spec | None) -> int:
        t = nd.get("type")
        if t is None:
            if rd is not None and str(rd.get("link_layer", "")).lower() == "infiniband":
                return 32
            return 32 if func.pci_class >> 8 == 0x0207 else 1
        if isinstance(t, int):
            return t
        return _NETDEV_TYPES[str(t).lower()]

    def _auto_netdev_name(self, func: PciFunction, ntype: int, port: int) -> str:
        prefix = "ib" if ntype == 32 else "en"
        dom = f"P{func.domain}" if func.domain else ""
        name = f"{prefix}{dom}p{func.bus}s{func.dev}"
        if func.fn or (func.multifunction and func.physfn is None):
            name += f"f{func.fn}"
        if ntype == 1 and func.vendor in (0x15B3, 0x14E4):
            name += f"np{port}"
        return name

    def _netdev(self, func: PciFunction, nd: Spec, rd: Spec | None, index: int, what: str) -> str:
        ntype = self._net_type(func, nd, rd)
        if "dev_port" in nd:
            port = _int(nd["dev_port"], f"{what}.dev_port")
        elif "port" in nd:
            port = _int(nd["port"], f"{what}.port") - 1
        else:
            port = index
        name = str(nd.get("name", "auto"))
        if name == "auto":
            name = self._auto_netdev_name(func, ntype, port)
        if name in self.names["net"]:
            raise LayoutError(f"{what}: duplicate netdev name {name!r}")
        self.names["net"].add(name)
        func.netdevs.append(name)
        owner = func.path
        if nd.get("parent"):
            owner = os.path.join(func.path, str(nd["parent"]))
            if not os.path.isdir(owner):
                self._child_device(owner)
        d = os.path.join(owner, "net", name)
        ifindex = _int(nd.get("ifindex", self._next("ifindex", start=2)), f"{what}.ifindex")
        if ntype == 32:
            guid = self._guid(func, ("port", port + 1))
            address = "00:00:10:49:fe:80:00:00:00:00:00:00:" + ":".join(f"{b:02x}" for b in guid)
            broadcast = "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff"
            mtu_default, addr_len = 4092, 20
        else:
            address = ":".join(f"{b:02x}" for b in self._mac(func, ("port", port)))
            broadcast = "ff:ff:ff:ff:ff:ff"
            mtu_default, addr_len = 1500, 6
        operstate = str(nd.get("operstate", "up"))
        files = {
            "address": nd.get("address", address),
            "addr_len": addr_len,
            "type": ntype,
            "operstate": operstate,
            "carrier": "1" if operstate == "up" else "0",
            "mtu": _int(nd.get("mtu", mtu_default), f"{what}.mtu"),
            "speed": _int(nd.get("speed", -1), f"{what}.speed"),
            "dev_port": port,
            "dev_id": f"0x{port:x}" if ntype == 1 else "0x0",
            "ifindex": ifindex,
            "flags": "0x1003" if operstate == "up" else "0x1002",
        }
        if func.physfn is None:
            files["broadcast"] = broadcast
        if ntype == 1 and func.vendor in (0x15B3, 0x14E4) and func.physfn is None:
            files["phys_port_name"] = f"p{port}"
        self.w.files(d, files)
        self.w.link(os.path.join(d, "device"), owner)
        self.w.link(os.path.join(d, "subsystem"), os.path.join(self.sys, "class", "net"))
        self.class_link("net", name, d)
        return name

    def _child_device(self, owner: str) -> None:
        """A bus device between the PCI function and its netdev (``virtio0``)."""
        if os.path.basename(owner).startswith("virtio"):
            # virtio bus attributes: ``device`` is the virtio device id (1 = net).
            self.w.files(
                owner,
                {
                    "device": "0x0001",
                    "vendor": "0x1af4",
                    "status": "0x0000000f",
                    "modalias": "virtio:d00000001v00001AF4",
                    "uevent": "DRIVER=virtio_net\nVIRTIO_ID=1\nMODALIAS=virtio:d00000001v00001AF4",
                },
            )
            virtio = os.path.join(self.sys, "bus", "virtio")
            self.w.mkdir(os.path.join(virtio, "drivers", "virtio_net"))
            self.w.link(os.path.join(owner, "driver"), os.path.join(virtio, "drivers", "virtio_net"))
            self.w.link(os.path.join(owner, "subsystem"), virtio)
            self.w.link(os.path.join(virtio, "devices", os.path.basename(owner)), owner)
        else:
            self.w.files(owner, {"uevent": ""})

    def _rdma(self, func: PciFunction, rd: Spec, netdevs: list[str], what: str) -> None:
        name = str(rd.get("name", "auto"))
        if name == "auto":
            prefix = _RDMA_PREFIX.get(func.vendor, "rdma")
            used = {
                int(n[len(prefix) :]) for n in self.names["rdma"] if n.startswith(prefix) and n[len(prefix) :].isdigit()
            }
            name = f"{prefix}{self._next('rdma:' + prefix, used)}"
        if name in self.names["rdma"]:
            raise LayoutError(f"{what}: duplicate RDMA device name {name!r}")
        self.names["rdma"].add(name)
        func.rdma.append(name)
        d = os.path.join(func.path, "infiniband", name)
        guid = self._guid(func, ("node",))
        ll_default = rd.get("link_layer", "InfiniBand" if func.pci_class >> 8 == 0x0207 else "Ethernet")
        node_type = rd.get("node_type", "ca")
        node_type = _RDMA_NODE_TYPES.get(str(node_type).lower(), str(node_type))
        self.w.files(
            d,
            {
                "node_guid": rd.get("node_guid", self._fmt_guid(guid)),
                "sys_image_guid": rd.get("node_guid", self._fmt_guid(guid)),
                "node_type": node_type,
                "fw_ver": rd.get("fw_ver", "28.43.1014"),
                "hca_type": rd.get("hca_type") or f"MT{func.device}",
                "board_id": rd.get("board_id", f"SYN_{func.vendor:04x}{func.device:04x}"),
            },
        )
        self.w.link(os.path.join(d, "device"), func.path)
        self.w.link(os.path.join(d, "subsystem"), os.path.join(self.sys, "class", "infiniband"))
        self.class_link("infiniband", name, d)
        ports = rd.get("ports", 1)
        if isinstance(ports, int):
            ports = [{} for _port in range(ports)]
        for i, port in enumerate(ports):
            pnum = i + 1
            ll = str(port.get("link_layer", ll_default))
            pd = os.path.join(d, "ports", str(pnum))
            self.w.files(
                pd,
                {
                    "state": port.get("state", rd.get("state", "4: ACTIVE")),
                    "phys_state": port.get("phys_state", rd.get("phys_state", "5: LinkUp")),
                    "link_layer": ll,
                    "rate": port.get("rate", rd.get("rate", "400 Gb/sec (4X NDR)")),
                    "lid": "0x0" if ll != "InfiniBand" else f"0x{self._next('lid', start=1):x}",
                    "sm_lid": "0x0" if ll != "InfiniBand" else "0x1",
                },
            )
            port_netdev = port.get("netdev")
            if port_netdev is None and i < len(netdevs):
                port_netdev = netdevs[i]
            if port_netdev and ll == "Ethernet":
                self.w.files(os.path.join(pd, "gid_attrs", "ndevs"), {"0": port_netdev})
            umad = self._next("umad")
            ud = os.path.join(func.path, "infiniband_mad", f"umad{umad}")
            self.w.files(
                ud,
                {
                    "ibdev": name,
                    "port": pnum,
                    "dev": f"231:{umad}" if umad < 64 else f"239:{umad - 64}",
                },
            )
            self.w.link(os.path.join(ud, "device"), func.path)
            self._class_dir("infiniband_mad")
            self.class_link("infiniband_mad", f"umad{umad}", ud)
        verbs = self._next("uverbs")
        vd = os.path.join(func.path, "infiniband_verbs", f"uverbs{verbs}")
        self.w.files(
            vd,
            {
                "ibdev": name,
                "abi_version": "1",
                "dev": f"231:{192 + verbs}" if verbs < 32 else f"240:{verbs - 32}",
            },
        )
        self.w.link(os.path.join(vd, "device"), func.path)
        self._class_dir("infiniband_verbs")
        self.class_link("infiniband_verbs", f"uverbs{verbs}", vd)

    def _class_dir(self, cls: str) -> None:
        if cls in self.class_dirs:
            return
        self.class_dirs.add(cls)
        d = os.path.join(self.sys, "class", cls)
        self.w.mkdir(d)
        if cls in ("infiniband_verbs", "infiniband_mad"):
            self.w.write(os.path.join(d, "abi_version"), "6" if cls == "infiniband_verbs" else "5")

    def _nvidia(self, func: PciFunction, gpu: Spec, label: str) -> None:
        if "minor" in gpu:
            minor = _int(gpu["minor"], f"{label}.gpu.minor")
            if minor in self.nvidia_minors:
                raise LayoutError(f"{label}: duplicate NVIDIA minor {minor}")
        else:
            minor = self._next("nvidia_minor", self.nvidia_minors)
        self.nvidia_minors.add(minor)
        uid = gpu.get("uuid") or "GPU-" + str(uuid.UUID(bytes=self._hash("gpu", func.bdf)[:16], version=4))
        model = gpu.get("model") or _NVIDIA_MODELS.get(func.device, "NVIDIA Graphics Device")
        rows = [
            ("Model: \t\t", model),
            ("IRQ:   \t\t", gpu.get("irq", 0)),
            ("GPU UUID: \t", uid),
            ("Video BIOS: \t", gpu.get("vbios", "96.00.99.00.01")),
            ("Bus Type: \t", "PCIe"),
            ("DMA Size: \t", "52 bits"),
            ("DMA Mask: \t", "0xfffffffffffff"),
            ("Bus Location: \t", func.bdf),
            ("Device Minor: \t", minor),
            ("GPU Excluded:\t", "Yes" if gpu.get("excluded") else "No"),
        ]
        d = os.path.join(self.proc, "driver", "nvidia", "gpus", func.bdf)
        self.w.mkdir(d)
        self.w.write(os.path.join(d, "information"), "".join(f"{k} {v}\n" for k, v in rows))
        version = str(self.spec.get("nvidia_driver", "570.124.06"))
        vfile = os.path.join(self.proc, "driver", "nvidia", "version")
        if not os.path.exists(vfile):
            self.w.write(
                vfile,
                f"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  {version}  "
                "Release Build  (synthetic@fixture)\n"
                "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)",
            )

    def _drm(self, func: PciFunction, drm: Spec, label: str) -> None:
        if "card" in drm:
            card = _int(drm["card"], f"{label}.card")
        else:
            card = self._next("drm_card", self.drm_cards)
        if card in self.drm_cards:
            raise LayoutError(f"{label}: duplicate DRM card{card}")
        self.drm_cards.add(card)
        base = os.path.join(func.path, "drm")
        cd = os.path.join(base, f"card{card}")
        self.w.files(cd, {"dev": f"226:{card}", "uevent": f"MAJOR=226\nMINOR={card}\nDEVNAME=dri/card{card}"})
        self.w.link(os.path.join(cd, "device"), func.path)
        self.class_link("drm", f"card{card}", cd)
        render = drm.get("render", True)
        if render is False:
            return
        if render is True:
            minor = self._next("drm_render", self.drm_renders, start=128)
        else:
            minor = _int(render, f"{label}.render")
        if minor in self.drm_renders:
            raise LayoutError(f"{label}: duplicate DRM renderD{minor}")
        self.drm_renders.add(minor)
        rd = os.path.join(base, f"renderD{minor}")
        self.w.files(rd, {"dev": f"226:{minor}", "uevent": f"MAJOR=226\nMINOR={minor}\nDEVNAME=dri/renderD{minor}"})
        self.w.link(os.path.join(rd, "device"), func.path)
        self.class_link("drm", f"renderD{minor}", rd)

    def _nvme(self, func: PciFunction, nvme: Spec, label: str) -> None:
        name = nvme.get("name")
        if name is None or name == "auto":
            idx = self._next("nvme", {int(n[4:]) for n in self.nvme_names})
            name = f"nvme{idx}"
        name = str(name)
        if name in self.nvme_names:
            raise LayoutError(f"{label}: duplicate NVMe controller {name}")
        self.nvme_names.add(name)
        d = os.path.join(func.path, "nvme", name)
        idx = int(name[4:]) if name[4:].isdigit() else 0
        self.w.files(
            d,
            {
                "dev": f"243:{idx}",
                "model": nvme.get("model", "SAMSUNG MZQL23T8HCLS-00A07"),
                "serial": nvme.get("serial", "S6" + self._hash("nvme", func.bdf).hex()[:12].upper()),
                "firmware_rev": nvme.get("firmware_rev", "GDC5602Q"),
                "address": func.bdf,
                "transport": "pcie",
                "state": "live",
            },
        )
        self.w.link(os.path.join(d, "device"), func.path)
        self.class_link("nvme", name, d)
        for ns in range(1, _int(nvme.get("namespaces", 1), f"{label}.namespaces") + 1):
            bd = os.path.join(d, f"{name}n{ns}")
            self.w.files(bd, {"size": nvme.get("size_sectors", 7501476528), "dev": f"259:{ns - 1}"})
            self.w.link(os.path.join(bd, "device"), d)
            self.class_link("block", f"{name}n{ns}", bd)
            self.w.link(os.path.join(self.sys, "block", f"{name}n{ns}"), bd)

    # ---- virtual devices and extras -----------------------------------------
    def write_virtual(self) -> None:
        lo = os.path.join(self.sys, "devices", "virtual", "net", "lo")
        self.w.files(
            lo,
            {
                "address": "00:00:00:00:00:00",
                "broadcast": "00:00:00:00:00:00",
                "addr_len": 6,
                "type": 772,
                "operstate": "unknown",
                "carrier": 1,
                "mtu": 65536,
                "ifindex": 1,
                "iflink": 1,
                "flags": "0x9",
                "tx_queue_len": 1000,
                "dev_port": 0,
                "dev_id": "0x0",
                "ifalias": "",
            },
        )
        self.w.link(os.path.join(lo, "subsystem"), os.path.join(self.sys, "class", "net"))
        self.class_link("net", "lo", lo)

    def write_extra(self) -> None:
        extra = self.spec.get("extra") or {}
        for rel, content in (extra.get("files") or {}).items():
            path = os.path.join(self.root, str(rel))
            self.w.mkdir(os.path.dirname(path))
            self.w.write(path, str(content))
        for rel, target in (extra.get("links") or {}).items():
            self.w.raw_link(os.path.join(self.root, str(rel)), str(target))

    def build(self) -> BuildResult:
        self._pf_nodes = {}
        self._pf_netdev_specs = {}
        self._pf_rdma_specs = {}
        self.w.mkdir(self.sys)
        self.w.mkdir(self.proc)
        self.write_system()
        self.write_virtual()
        self.write_pci()
        self.write_extra()
        return BuildResult(Path(self.root), self.functions)


# --------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------


def build(spec: Spec, root: str | Path) -> BuildResult:
    """Build the tree for ``spec`` under ``root`` and return what was written."""
    root_path = Path(root).resolve()
    if (root_path / "sys").exists() or (root_path / "proc").exists():
        raise FileExistsError(f"{root_path} already contains sys/ or proc/")
    root_path.mkdir(parents=True, exist_ok=True)
    return _Builder(spec, root_path).build()


def build_tree(spec: Spec, root: str | Path) -> Path:
    """Write ``root/sys`` and ``root/proc`` for ``spec``; return ``root``."""
    return build(spec, root).root


def layout_path(name_or_path: str | Path) -> Path:
    """Resolve a layout name (``dgx-h100``) or a path to its YAML file."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yml", ".yaml") or candidate.exists():
        return candidate
    return LAYOUT_DIR / f"{name_or_path}.yml"


def load_layout(name_or_path: str | Path) -> Spec:
    """Load a layout by stem (looked up in ``tests/fixtures/layouts``) or path."""
    path = layout_path(name_or_path)
    with open(path, encoding="utf-8") as fh:
        spec = yaml.safe_load(fh)
    if not isinstance(spec, dict):
        raise LayoutError(f"{path}: a layout must be a YAML mapping")
    spec.setdefault("name", path.stem)
    return spec


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build a fake sysfs/procfs tree (test fixture).")
    parser.add_argument("layout", help="layout YAML file or layout name")
    parser.add_argument("outdir", help="directory to create; gets sys/ and proc/")
    parser.add_argument("--list", action="store_true", help="print the PCI functions built")
    args = parser.parse_args(argv)
    result = build(load_layout(args.layout), args.outdir)
    if args.list:
        for f in result.functions:
            extra = " ".join(f.netdevs + f.rdma)
            print(
                f"{f.bdf}  {f.vendor:04x}:{f.device:04x}  {f.pci_class:06x}  "
                f"numa={f.numa_node}  {f.role}  {extra}".rstrip()
            )
    print(result.root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
