# SPDX-License-Identifier: Apache-2.0
"""The probe: one pass over a node's sysfs and procfs, assembled into its topology.

:class:`_Probe` is the state of one probe; what it reads per device kind is
in its parts (``numa``, ``pci_walk``, ``netdevs``, ``rdma``, ``gpus``, and
``gpudirect`` for ACS, the ``p2p`` map and the ``gpudirect`` block), the
GPU x NIC levels in ``levels``.
"""

from __future__ import annotations

import gc
import os

from . import GPU_KINDS, KINDS, SCHEMA_VERSION
from .gpudirect import GpudirectProbe
from .gpus import GpuProbe
from .levels import compute_links
from .netdevs import NetdevProbe
from .numa import NumaProbe
from .pci import PciIds, classify, is_bridge_class
from .pci_walk import PciWalk
from .rdma import RdmaProbe
from .sysfs import Reader

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs 4 ms at import; annotations are strings here anyway
    from typing import Any

    from .pci_walk import _Function


class _Probe(NumaProbe, PciWalk, NetdevProbe, RdmaProbe, GpuProbe, GpudirectProbe):
    """One probe of one tree: the state its parts share, and the assembly of their findings."""

    def __init__(self, sysfs_root: str, procfs_root: str, pci_ids_path: str | None) -> None:
        self.sys = os.path.normpath(sysfs_root)
        self.proc = os.path.normpath(procfs_root)
        self.r = Reader()
        self.functions: dict[str, _Function] = {}
        # What the PCI walk (pci_walk.PciWalk) works out once and shares.
        self._located: dict[str, tuple[str | None, str | None, list[str]]] = {}
        self._identities: dict[str, dict[str, Any]] = {}
        self._listed: set[str] = set()
        self._roots: dict[str, str | None] = {}
        self._vf_identity: dict[str, dict[str, Any]] = {}
        self._vf_paths: dict[str, tuple[str, str]] = {}
        self._cpu_lists: dict[str, tuple[list[int], str]] = {}
        self._configs: dict[str, bytes] = {}  # each function's config bytes, read once (gpudirect.py reads them)
        self._p2p_own: list[dict[str, Any]] = []  # each GPU x physical NIC entry of p2p once (gpudirect.py)
        # What the RDMA part (rdma.RdmaProbe) works out once and shares.
        self._pf_ports: dict[str, list[tuple[dict[str, Any], str]]] = {}
        self._port_states: dict[str, str | None] = {}
        self.pci_ids: PciIds | None = None
        if pci_ids_path:
            try:
                self.pci_ids = PciIds(pci_ids_path)
            except OSError as exc:
                self.r.warn(f"cannot read pci.ids {pci_ids_path}: {exc.strerror or exc}")

    # -- assembly -----------------------------------------------------------

    def run(self) -> dict[str, Any]:
        numa_nodes = self.numa_nodes()
        self.walk_pci()
        physfn = {bdf: f.info["physfn"] for bdf, f in self.functions.items() if f.info.get("physfn")}
        netdevs = self.netdevs(physfn)
        rdma_by_function, rdma_all = self.rdma_devices(physfn)
        drm = self.drm_nodes()

        children: dict[str, list[str]] = {}
        for func in self.functions.values():
            if func.parent is not None:
                children.setdefault(func.parent, []).append(func.bdf)

        bridges = self._bridges(children)
        bridge_roles = {b["pci_address"]: b["role"] for b in bridges}
        switches = self._switches(bridges, children)

        switch_cache: dict[int, list[str]] = {}

        def switches_of(chain: list[str]) -> list[str]:
            found = switch_cache.get(id(chain))
            if found is None:
                found = switch_cache[id(chain)] = [b for b in chain if bridge_roles.get(b) == "switch_upstream"]
            return found

        devices = []
        # VFs of one PF share everything but address, driver, NUMA node and
        # class devices: the PF's first VF is the template of the others.
        vf_templates: dict[tuple[str, int, bool], dict[str, Any]] = {}
        for bdf in sorted(self.functions):
            func = self.functions[bdf]
            info = func.info
            rdma = rdma_by_function.get(bdf, [])
            if info["physfn"] is not None:
                template_key = (info["physfn"], id(func.chain), not rdma)
                template = vf_templates.get(template_key)
                if template is not None:
                    device = template.copy()
                    device["pci_address"] = bdf
                    device["driver"] = info["driver"]
                    device["numa_node"] = info["numa_node"]
                    device["bridges"] = list(func.chain)
                    device["switches"] = list(template["switches"])
                    device["netdevs"] = netdevs.get(bdf, [])
                    device["rdma_devices"] = [e["name"] for e in rdma]
                    devices.append(device)
                    continue
            else:
                template_key = None
            if is_bridge_class(info["class_code"]):
                continue
            kind = classify(info["class_code"], info["vendor_id"], bool(rdma))
            device: dict[str, Any] = {
                "pci_address": bdf,
                "kind": kind,
                "class_id": info["class_id"],
                "vendor_id": info["vendor_id"],
                "device_id": info["device_id"],
                "subsystem_vendor_id": info["subsystem_vendor_id"],
                "subsystem_device_id": info["subsystem_device_id"],
                "vendor_name": None,
                "device_name": None,
                "driver": info["driver"],
                "numa_node": info["numa_node"],
                "numa_node_inferred": None,
                "local_cpulist": info["local_cpulist"],
                "pcie_root": self._pcie_root(func),
                "host_bridge": func.host_bridge,
                "bridges": list(func.chain),
                "switches": list(switches_of(func.chain)),
                "link": info["link"],
                "acs": None,
                "netdevs": netdevs.get(bdf, []),
                "rdma_devices": [e["name"] for e in rdma],
                "sriov": info["sriov"],
                "physfn": info["physfn"],
                "gpu": None,
            }
            if self.pci_ids is not None:
                device["vendor_name"], device["device_name"] = self.pci_ids.names(info["vendor_id"], info["device_id"])
            if kind in GPU_KINDS:
                gpu: dict[str, Any] = {}
                if info["vendor_id"] == "0x10de":
                    gpu.update(self.nvidia_gpu(bdf))
                gpu.update(drm.get(bdf, {}))
                device["gpu"] = gpu or None
            elif template_key is not None:
                vf_templates[template_key] = device
            devices.append(device)

        self._infer_numa(devices, numa_nodes)
        links, nearest = compute_links(devices, self.functions, bridge_roles)
        self._device_warnings(devices, numa_nodes)
        acs = self.acs_states()
        for entry in bridges:
            entry["acs"] = acs.get(entry["pci_address"])
        for device in devices:
            if not device["physfn"]:  # a VF's config is not read: it takes its PF's path
                device["acs"] = acs.get(device["pci_address"])
        p2p = self.p2p_map(devices, acs)
        self.warn_unread()
        gpudirect = self.gpudirect(devices, links, p2p)

        return {
            "schema_version": SCHEMA_VERSION,
            "hostname": self.r.read(self.proc + "/sys/kernel/hostname"),
            "sysfs_root": self.sys,
            "numa_nodes": numa_nodes,
            "devices": devices,
            "bridges": bridges,
            "switches": switches,
            "rdma_devices": rdma_all,
            "links": links,
            "p2p": p2p,
            "nearest_nics": nearest,
            "gpudirect": gpudirect,
            "counts": _counts(devices),
            "warnings": self.r.warnings,
        }

    def _bridges(self, children: dict[str, list[str]]) -> list[dict[str, Any]]:
        bridges = []
        is_bridge = {
            bdf: (is_bridge_class(f.info.get("class_code")) or not f.listed) for bdf, f in self.functions.items()
        }
        roles: dict[str, str] = {}
        # Parents before children: chains are root-first, so sort by depth.
        for bdf in sorted(
            (b for b, flag in is_bridge.items() if flag),
            key=lambda b: len(self.functions[b].chain),
        ):
            func = self.functions[bdf]
            kids = children.get(bdf, [])
            parent_role = roles.get(func.parent) if func.parent else None
            if func.parent is None:
                role = "root_port"
            elif parent_role == "switch_upstream":
                role = "switch_downstream"
            elif kids and all(is_bridge.get(k) for k in kids) and parent_role in ("root_port", "switch_downstream"):
                role = "switch_upstream"
            else:
                role = "pci_bridge"
            roles[bdf] = role
            info = func.info
            bridges.append(
                {
                    "pci_address": bdf,
                    "role": role,
                    "listed": func.listed,
                    "vendor_id": info.get("vendor_id"),
                    "device_id": info.get("device_id"),
                    "host_bridge": func.host_bridge,
                    "parent": func.parent,
                    "numa_node": info.get("numa_node"),
                    "link": info.get("link"),
                    "acs": None,
                }
            )
        bridges.sort(key=lambda b: b["pci_address"])
        return bridges

    @staticmethod
    def _switches(bridges: list[dict[str, Any]], children: dict[str, list[str]]) -> list[dict[str, Any]]:
        switches = []
        for bridge in bridges:
            if bridge["role"] != "switch_upstream":
                continue
            switches.append(
                {
                    "upstream_port": bridge["pci_address"],
                    "downstream_ports": sorted(children.get(bridge["pci_address"], [])),
                    "vendor_id": bridge["vendor_id"],
                    "device_id": bridge["device_id"],
                    "host_bridge": bridge["host_bridge"],
                    "parent": bridge["parent"],
                }
            )
        return switches

    def _infer_numa(self, devices: list[dict[str, Any]], numa_nodes: list[dict[str, Any]]) -> None:
        known_by_host: dict[str | None, set] = {}
        by_bdf = {d["pci_address"]: d for d in devices}
        for func in self.functions.values():
            node = func.info.get("numa_node")
            if node is not None:
                known_by_host.setdefault(func.host_key, set()).add(node)
        node_cpus = [(n["id"], set(n["cpus"])) for n in numa_nodes]
        for device in devices:
            if device["numa_node"] is not None:
                continue
            func = self.functions[device["pci_address"]]
            inferred = None
            pf = by_bdf.get(device["physfn"]) if device["physfn"] else None
            if pf is not None and pf["numa_node"] is not None:
                inferred = (pf["numa_node"], "physfn")
            if inferred is None:
                for bridge in reversed(func.chain):
                    node = self.functions[bridge].info.get("numa_node")
                    if node is not None:
                        inferred = (node, "nearest_ancestor")
                        break
            if inferred is None:
                nodes = known_by_host.get(func.host_key) if func.host_key else None
                if nodes and len(nodes) == 1:
                    inferred = (next(iter(nodes)), "same_root_bus")
            if inferred is None:
                cpus = func.info.get("local_cpus")
                if cpus:
                    matches = [nid for nid, ncpus in node_cpus if set(cpus) <= ncpus]
                    if len(matches) == 1:
                        inferred = (matches[0], "local_cpulist")
            if inferred is None and len(numa_nodes) == 1:
                inferred = (numa_nodes[0]["id"], "single_numa_node")
            if inferred is not None:
                device["numa_node_inferred"] = {
                    "node": inferred[0],
                    "rule": inferred[1],
                }

    def _device_warnings(
        self,
        devices: list[dict[str, Any]],
        numa_nodes: list[dict[str, Any]],
    ) -> None:
        multi_numa = len(numa_nodes) > 1
        for device in devices:
            if device["kind"] in ("other", "nvme") or device["physfn"]:
                continue
            bdf = device["pci_address"]
            if multi_numa and device["numa_node"] is None:
                inferred = device["numa_node_inferred"]
                how = (
                    f"inferred NUMA node {inferred['node']} ({inferred['rule']})"
                    if inferred
                    else "no NUMA node could be inferred"
                )
                self.r.warn(f"{device['kind']} {bdf}: numa_node is -1 on a {len(numa_nodes)}-node system; {how}")
            if device["pcie_root"] is None:
                self.r.warn(
                    "{} {}: no resource.kubernetes.io/pcieRoot (path {}); alignment by PCIe root is impossible".format(
                        device["kind"],
                        bdf,
                        "outside /sys/devices/pci*" if device["host_bridge"] else "unknown",
                    )
                )


def _counts(devices: list[dict[str, Any]]) -> dict[str, int]:
    counts = {kind: 0 for kind in KINDS}
    vfs = 0
    for device in devices:
        counts[device["kind"]] += 1
        if device["physfn"]:
            vfs += 1
    counts["vfs"] = vfs
    return counts


def probe(
    sysfs_root: str = "/sys",
    procfs_root: str = "/proc",
    pci_ids_path: str | None = None,
) -> dict[str, Any]:
    """Probe a node (or a captured sysfs tree) and return its topology."""
    if not os.path.isdir(sysfs_root):
        raise ValueError(f"sysfs_root {sysfs_root} is not a directory")
    prober = _Probe(sysfs_root, procfs_root, pci_ids_path)
    # The probe makes thousands of small objects and no reference cycles;
    # left on, the cyclic collector would walk them about ten times per probe
    # of a node with hundreds of VFs, for nothing (a tenth of the time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return prober.run()
    finally:
        if collecting:
            gc.enable()
        prober.r.close()
