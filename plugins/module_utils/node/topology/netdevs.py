# SPDX-License-Identifier: Apache-2.0
"""The probe's network interfaces, by owning PCI function."""

from __future__ import annotations

from .parsers import parse_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .sysfs import Reader

NETDEV_TYPES = {1: "ethernet", 32: "infiniband", 772: "loopback"}


class NetdevProbe:
    """Part of the probe (:class:`prober._Probe`): reads ``class/net``."""

    # Set by the probe's __init__; _owner comes from pci_walk.PciWalk.
    sys: str
    r: Reader
    _owner: Callable[[str], str | None]

    def netdevs(self, physfn: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
        """Network interfaces by owning PCI function.

        A VF's interface has its PF's type and link speed; of the hundreds of
        VF interfaces of a big node only the name is taken from sysfs.
        """
        by_function: dict[str, list[dict[str, Any]]] = {}
        base = self.sys + "/class/net"
        r = self.r
        owned = []
        of_vfs = []
        for name, path in self.r.class_links(base):
            bdf = self._owner(path)
            if bdf is not None:
                is_vf = bdf in physfn
                (of_vfs if is_vf else owned).append((is_vf, name, bdf, path + "/"))
        owned.extend(of_vfs)  # PFs first: VFs take their PF interface's type
        for is_vf, name, bdf, p in owned:
            pf_netdevs = by_function.get(physfn[bdf]) if is_vf else None
            if pf_netdevs:
                # MAC, state and MTU of VF interfaces are netlink properties of
                # the PF (the sriov module reads all VFs in one message).
                netdev = {
                    "name": name,
                    "address": None,
                    "type": pf_netdevs[0]["type"],
                    "operstate": None,
                    "mtu": None,
                    "speed_mbps": None,
                }
            else:
                raw_type = parse_int(r.read(p + "type"))
                speed = None if is_vf else parse_int(r.read(p + "speed"))
                netdev = {
                    "name": name,
                    "address": r.read(p + "address"),
                    "type": NETDEV_TYPES.get(raw_type, raw_type) if raw_type is not None else None,
                    "operstate": r.read(p + "operstate"),
                    "mtu": parse_int(r.read(p + "mtu")),
                    "speed_mbps": speed if speed is not None and speed > 0 else None,
                }
            # In name order already: class links are sorted, and a function's
            # interfaces are all in one of the two lists.
            by_function.setdefault(bdf, []).append(netdev)
        return by_function
