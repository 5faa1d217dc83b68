# SPDX-License-Identifier: Apache-2.0
"""Network interfaces: ``<function>/net/<name>``, ``class/net`` and the loopback device.

:func:`netdev_files` and :func:`write_netdev` write one interface from
resolved values (the VF writer, :mod:`.sriov`, uses them too);
:class:`NetdevWriter` is the builder's part that resolves a layout's
``netdevs:`` entries (names, addresses, ifindex).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .layouts import LayoutError, Spec, integer
from .pci import PciFunction
from .sysfs import TreeWriter

_NETDEV_TYPES = {"eth": 1, "ethernet": 1, "ib": 32, "infiniband": 32, "loopback": 772}
_IB_BROADCAST = "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff"


@dataclass
class NetdevEntry:
    """One interface to write: ``owner/net/name`` with these attribute files."""

    owner: str
    name: str
    files: dict[str, Any] = field(default_factory=dict)


def address_length(ntype: int) -> int:
    """Bytes of a hardware address: 20 for IPoIB (ARPHRD_INFINIBAND), 6 otherwise."""
    return 20 if ntype == 32 else 6


def netdev_files(
    func: PciFunction, ntype: int, port: int, address: Any, mtu: int, speed: int, operstate: str, ifindex: int
) -> dict[str, Any]:
    """The attribute files of an interface of ``func`` (a VF's has no broadcast nor phys_port_name)."""
    files: dict[str, Any] = {
        "address": address,
        "addr_len": address_length(ntype),
        "type": ntype,
        "operstate": operstate,
        "carrier": "1" if operstate == "up" else "0",
        "mtu": mtu,
        "speed": speed,
        "dev_port": port,
        "dev_id": f"0x{port:x}" if ntype == 1 else "0x0",
        "ifindex": ifindex,
        "flags": "0x1003" if operstate == "up" else "0x1002",
    }
    if func.physfn is None:
        files["broadcast"] = _IB_BROADCAST if ntype == 32 else "ff:ff:ff:ff:ff:ff"
    if ntype == 1 and func.vendor in (0x15B3, 0x14E4) and func.physfn is None:
        files["phys_port_name"] = f"p{port}"
    return files


def write_netdev(tree: TreeWriter, sys_root: str, entry: NetdevEntry) -> None:
    """The interface's directory, its ``device`` and ``subsystem`` links and its ``class/net`` link."""
    d = os.path.join(entry.owner, "net", entry.name)
    tree.files(d, entry.files)
    tree.link(os.path.join(d, "device"), entry.owner)
    tree.link(os.path.join(d, "subsystem"), os.path.join(sys_root, "class", "net"))
    tree.link(os.path.join(sys_root, "class", "net", entry.name), d)


class NetdevWriter:
    """Part of the builder (:class:`~.builder.Builder`): a function's ``netdevs:`` and ``lo``."""

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
        entry = self._netdev_entry(func, nd, rd, index, what)
        write_netdev(self.w, self.sys, entry)
        return entry.name

    def _netdev_entry(self, func: PciFunction, nd: Spec, rd: Spec | None, index: int, what: str) -> NetdevEntry:
        """Resolve one ``netdevs:`` entry of ``func`` (its name is taken; a ``parent:`` device is written)."""
        ntype = self._net_type(func, nd, rd)
        if "dev_port" in nd:
            port = integer(nd["dev_port"], f"{what}.dev_port")
        elif "port" in nd:
            port = integer(nd["port"], f"{what}.port") - 1
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
        # The counter moves even when the layout gives the ifindex.
        ifindex = integer(nd.get("ifindex", self._next("ifindex", start=2)), f"{what}.ifindex")
        if ntype == 32:
            guid = self._guid(func, ("port", port + 1))
            address = "00:00:10:49:fe:80:00:00:00:00:00:00:" + ":".join(f"{b:02x}" for b in guid)
            mtu_default = 4092
        else:
            address = ":".join(f"{b:02x}" for b in self._mac(func, ("port", port)))
            mtu_default = 1500
        files = netdev_files(
            func,
            ntype,
            port,
            address=nd.get("address", address),
            mtu=integer(nd.get("mtu", mtu_default), f"{what}.mtu"),
            speed=integer(nd.get("speed", -1), f"{what}.speed"),
            operstate=str(nd.get("operstate", "up")),
            ifindex=ifindex,
        )
        return NetdevEntry(owner, name, files)

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
