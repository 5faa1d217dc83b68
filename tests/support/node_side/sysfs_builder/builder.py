# SPDX-License-Identifier: Apache-2.0
"""The builder: one layout into one tree, each subsystem written by its own module."""

from __future__ import annotations

import argparse
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .gpudirect import GpudirectWriter
from .gpus import GpuWriter
from .layouts import Spec, load_layout
from .netdevs import NetdevWriter
from .numa import NumaWriter
from .nvme import NvmeWriter
from .pci import PciFunction, PciWriter
from .pci_walk import PciWalk
from .rdma import RdmaWriter
from .sriov import SriovWriter
from .sysfs import TreeWriter

# OUI used for deterministic MAC addresses and GUIDs.
_OUI = {
    0x15B3: b"\xb8\x3f\xd2",
    0x14E4: b"\x00\x0a\xf7",
    0x1AF4: b"\x52\x54\x00",
    0x1D0F: b"\x06\x5a\x1c",
    0x8086: b"\x3c\xfd\xfe",
}


@dataclass
class BuildResult:
    root: Path
    functions: list[PciFunction]

    def by_bdf(self) -> dict[str, PciFunction]:
        return {f.bdf: f for f in self.functions}


class Builder(
    NumaWriter, PciWalk, PciWriter, SriovWriter, NetdevWriter, RdmaWriter, GpuWriter, NvmeWriter, GpudirectWriter
):
    """The state one build shares across the subsystems: names, numbers and counters taken so far."""

    def __init__(self, spec: Spec, root: Path) -> None:
        self.spec = spec
        self.name = str(spec.get("name", "layout"))
        self.root = str(root)
        self.sys = os.path.join(self.root, "sys")
        self.proc = os.path.join(self.root, "proc")
        self.w = TreeWriter(self.root)
        self.functions: list[PciFunction] = []
        self.used_buses: dict[tuple[int, int], str] = {}
        self.used_bdfs: set[str] = set()
        self.counters: dict[str, int] = {}
        self.names: dict[str, set[str]] = {"net": {"lo"}, "rdma": set()}
        self.nvidia_minors: set[int] = set()
        self.drm_cards: set[int] = set()
        self.drm_renders: set[int] = set()
        self.nvme_names: set[str] = set()
        self.vf_jobs: list[tuple[PciFunction, Spec, list[tuple[int, int, int]], str]] = []
        self.class_dirs: set[str] = set()
        self.iommu_types: dict[str, str] = {}  # a layout's iommu_type per function address
        # What a PF's VFs copy, by PF address: its layout node, first netdev and RDMA device.
        self._pf_nodes: dict[str, Spec] = {}
        self._pf_netdev_specs: dict[str, Spec] = {}
        self._pf_rdma_specs: dict[str, Spec] = {}
        self._setup_cpus()

    # ---- ids: stable across builds, derived from the layout's name ----------
    def _hash(self, *parts: Any) -> bytes:
        text = "\0".join([self.name, *(str(p) for p in parts)])
        return hashlib.sha256(text.encode()).digest()

    def _next(self, counter: str, used: set[Any] | None = None, start: int = 0) -> int:
        value = self.counters.get(counter, start)
        while used is not None and value in used:
            value += 1
        self.counters[counter] = value + 1
        return value

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

    def class_link(self, cls: str, name: str, target: str) -> None:
        self.w.link(os.path.join(self.sys, "class", cls, name), target)

    # ---- what hangs below an endpoint ------------------------------------
    def _children_of_endpoint(self, func: PciFunction, node: Spec, label: str) -> None:
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

    # ---- extras and the whole ---------------------------------------------
    def write_extra(self) -> None:
        extra = self.spec.get("extra") or {}
        for rel, content in (extra.get("files") or {}).items():
            path = os.path.join(self.root, str(rel))
            self.w.mkdir(os.path.dirname(path))
            self.w.write(path, str(content))
        for rel, target in (extra.get("links") or {}).items():
            self.w.raw_link(os.path.join(self.root, str(rel)), str(target))

    def build(self) -> BuildResult:
        self.w.mkdir(self.sys)
        self.w.mkdir(self.proc)
        self.write_system()
        self.write_virtual()
        self.write_pci()
        self.write_gpudirect()
        self.write_extra()
        return BuildResult(Path(self.root), self.functions)


def build(spec: Spec, root: str | Path) -> BuildResult:
    """Build the tree for ``spec`` under ``root`` and return what was written."""
    root_path = Path(root).resolve()
    if (root_path / "sys").exists() or (root_path / "proc").exists():
        raise FileExistsError(f"{root_path} already contains sys/ or proc/")
    root_path.mkdir(parents=True, exist_ok=True)
    return Builder(spec, root_path).build()


def build_tree(spec: Spec, root: str | Path) -> Path:
    """Write ``root/sys`` and ``root/proc`` for ``spec``; return ``root``."""
    return build(spec, root).root


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
