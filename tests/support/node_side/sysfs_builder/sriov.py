# SPDX-License-Identifier: Apache-2.0
"""SR-IOV: a PF's capability files, its VFs' routing IDs and the one VF writer.

:func:`write_vf` creates a VF's sysfs entries the way the kernel's
``pci_iov_add_virtfn`` shows them: the function's directory as a sibling of
its PF (attribute files, a config header whose Vendor and Device IDs read
FFFFh, ``uevent``, ``subsystem``, ``driver`` and ``bus/pci`` links), its
``physfn`` link, its network interface and the PF's ``virtfnN`` link. Two
callers, one writer: the builder for a layout's ``numvfs``
(:class:`SriovWriter`, which then adds a VF's RDMA device, :mod:`.rdma`) and
``tests/support/node_side/fake_sysfs_sriov.py`` for a write of ``sriov_numvfs``.

The fake kernel runs on Molecule nodes with the node's Python: this package
imports only the standard library (PyYAML only when a layout file is loaded)
and keeps to Python 3.9.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .layouts import LayoutError, Spec, integer
from .netdevs import NetdevEntry, write_netdev
from .pci import FunctionAttributes, PciFunction, config_header, write_function
from .sysfs import TreeWriter, bdf


@dataclass
class VirtualFunction:
    """One VF to write: its function, the attribute values it answers with, its interface if any."""

    index: int  # N of the PF's virtfnN
    pf_path: str
    function: PciFunction
    attributes: FunctionAttributes
    netdev: NetdevEntry | None = None


def routing_ids(pf: PciFunction, offset: int, stride: int, count: int) -> list[tuple[int, int, int]]:
    """(bus, device, function) of VFs 0..count-1: routing ID = PF's + offset + stride * N."""
    pf_rid = (pf.bus << 8) | (pf.dev << 3) | pf.fn
    rids = []
    for i in range(count):
        rid = pf_rid + offset + stride * i
        vf_bus, devfn = rid >> 8, rid & 0xFF
        rids.append((vf_bus, devfn >> 3, devfn & 7))
    return rids


def vf_netdev_name(pf_netdev: str, index: int) -> str:
    """A VF's interface is named after its PF's (``enp1s0f0np0v3``)."""
    return f"{pf_netdev}v{index}"


def write_vf(tree: TreeWriter, sys_root: str, vf: VirtualFunction) -> None:
    """Create VF ``vf.index`` of the PF at ``vf.pf_path`` in the tree under ``sys_root``."""
    func = vf.function
    # A VF's Vendor and Device ID read FFFFh (SR-IOV); of its Command register only Bus Master Enable
    # applies (memory space is the PF's VF MSE, INTx does not exist). Status, revision and class answer.
    config = config_header(func, vf.attributes, 0xFFFF, 0xFFFF, 0x0004 if func.driver else 0)
    write_function(tree, sys_root, func, vf.attributes, config)
    tree.link(os.path.join(func.path, "physfn"), vf.pf_path)
    if vf.netdev is not None:
        write_netdev(tree, sys_root, vf.netdev)
    tree.link(os.path.join(vf.pf_path, f"virtfn{vf.index}"), func.path)


class SriovWriter:
    """Part of the builder (:class:`~.builder.Builder`): a function's ``sriov:`` and its VFs."""

    def _plan_vfs(self, pf: PciFunction, node: Spec, label: str) -> int | None:
        sriov = node.get("sriov")
        if not sriov:
            return None
        what = f"{label}.sriov"
        total = integer(sriov.get("totalvfs", 0), f"{what}.totalvfs")
        num = integer(sriov.get("numvfs", 0), f"{what}.numvfs")
        offset = integer(sriov.get("offset", 1), f"{what}.offset")
        stride = integer(sriov.get("stride", 1), f"{what}.stride")
        if num > total:
            raise LayoutError(f"{what}: numvfs {num} > totalvfs {total}")
        vf_device = integer(sriov.get("vf_device", pf.device), f"{what}.vf_device")
        self.w.files(
            pf.path,
            {
                "sriov_totalvfs": total,
                "sriov_numvfs": num,
                "sriov_offset": offset,
                "sriov_stride": stride,
                "sriov_vf_device": f"{vf_device:x}",
                "sriov_drivers_autoprobe": integer(sriov.get("autoprobe", 1), f"{what}.autoprobe"),
            },
        )
        rids = routing_ids(pf, offset, stride, num)
        last_bus = max([pf.bus] + [vf_bus for vf_bus, _dev, _fn in rids])
        if num:
            self.vf_jobs.append((pf, sriov, rids, what))
        return last_bus if last_bus > pf.bus else None

    def _write_vfs(self, pf: PciFunction, sriov: Spec, rids: list[tuple[int, int, int]], what: str) -> None:
        pf_node = self._pf_nodes[pf.bdf]
        # The PF's Subsystem IDs and revision: the VF's attributes answer with them.
        ids = {
            "subsystem_vendor": pf_node.get("subsystem_vendor", pf.vendor),
            "subsystem_device": pf_node.get("subsystem_device", 0),
            "revision": pf_node.get("revision", 0),
        }
        vf_device = integer(sriov.get("vf_device", pf.device), f"{what}.vf_device")
        for i, (bus, dev, fn) in enumerate(rids):
            label = f"{what}.vf[{i}]"
            address = bdf(pf.domain, bus, dev, fn)
            self._claim_bdf(address, label)
            func = PciFunction(
                domain=pf.domain,
                bus=bus,
                dev=dev,
                fn=fn,
                path=os.path.join(os.path.dirname(pf.path), address),
                vendor=pf.vendor,
                device=vf_device,
                pci_class=integer(sriov.get("vf_class", pf.pci_class), f"{label}.class"),
                numa_node=pf.numa_node,
                driver=sriov.get("vf_driver", pf.driver),
                physfn=pf.bdf,
                role="vf",
                multifunction=True,
                link=pf.link,
                max_link=pf.max_link if pf.max_link is not None else pf.link,
            )
            self.functions.append(func)
            attrs = self._attributes(ids, pf.vendor, pf.numa_node, label)
            vf = VirtualFunction(i, pf.path, func, attrs)
            if sriov.get("vf_netdev", True) and pf.netdevs:
                vf.netdev = self._netdev_entry(func, self._vf_netdev_spec(pf, i), None, 0, f"{label}.netdevs[0]")
            write_vf(self.w, self.sys, vf)
            if sriov.get("vf_rdma", True) and pf.rdma:
                rd = self._pf_rdma_specs[pf.bdf]
                vf_rdma = {
                    "name": "auto",
                    "link_layer": rd.get("link_layer", "InfiniBand"),
                    "rate": rd.get("rate", "400 Gb/sec (4X NDR)"),
                    "hca_type": rd.get("vf_hca_type", rd.get("hca_type")),
                }
                self._rdma(func, vf_rdma, list(func.netdevs), f"{label}.rdma")

    def _vf_netdev_spec(self, pf: PciFunction, index: int) -> Spec:
        """A VF's interface: its PF's first one's type, MTU, speed and state."""
        pf_dev = self._pf_netdev_specs[pf.bdf]
        return {
            "name": vf_netdev_name(pf.netdevs[0], index),
            "type": pf_dev.get("type", "eth"),
            "mtu": pf_dev.get("mtu", 1500),
            "speed": pf_dev.get("speed", -1),
            "operstate": pf_dev.get("operstate", "up"),
        }
