# SPDX-License-Identifier: Apache-2.0
"""RDMA devices: ``<function>/infiniband/<name>`` with its ports, ``umadN``, ``uverbsN`` and their classes."""

from __future__ import annotations

import os

from .layouts import LayoutError, Spec
from .pci import PciFunction

# Default RDMA device name prefix by vendor (names are prefixN, kernel style).
_RDMA_PREFIX = {0x15B3: "mlx5_", 0x14E4: "bnxt_re", 0x1D0F: "efa_", 0x8086: "irdma"}

_RDMA_NODE_TYPES = {"ca": "1: CA", "rnic": "4: RNIC", "unspecified": "7: unspecified"}


class RdmaWriter:
    """Part of the builder (:class:`~.builder.Builder`): a function's ``rdma:``."""

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
