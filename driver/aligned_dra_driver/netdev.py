# SPDX-License-Identifier: Apache-2.0
"""Network interfaces of PCI functions: found by PCI address, moved and renamed over netlink."""

from __future__ import annotations

import os

from .validation import IFNAME_RE, is_bdf, is_ifname

__all__ = ["IFNAME_RE", "netdevs_of", "restore_name", "valid_bdf"]


def valid_bdf(value: str) -> bool:
    return is_bdf(value)


def netdevs_of(sysfs_root: str, pci_address: str) -> list[str]:
    """Names of the PCI function's interfaces in the network namespace sysfs was mounted in.

    The kernel lists a function's interfaces under ``bus/pci/devices/<bdf>/net/``
    with their current names; an interface moved into another namespace is not
    listed, and one that came back is listed under whatever name it has now.
    """
    if not valid_bdf(pci_address):
        raise ValueError(f"{pci_address!r} is not a PCI address (dddd:bb:dd.f, lowercase)")
    path = os.path.join(sysfs_root, "bus", "pci", "devices", pci_address, "net")
    try:
        return sorted(name for name in os.listdir(path) if is_ifname(name))
    except (FileNotFoundError, NotADirectoryError):
        return []


def restore_name(sysfs_root: str, pci_address: str, original: str, mtu: int | None = None, up: bool = True) -> str:
    """Give a function's interface, back in the host namespace, its original name and MTU.

    Returns what happened: ``absent`` (still in a pod, or gone), ``in-place``
    (already named ``original``), ``renamed``.
    """
    names = netdevs_of(sysfs_root, pci_address)
    if not names:
        return "absent"
    if original in names:
        return "in-place"
    from pyroute2 import IPRoute

    current = names[0]
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=current)
        if not found:
            return "absent"
        index = found[0]
        ipr.link("set", index=index, state="down")
        ipr.link("set", index=index, ifname=original)
        if mtu:
            ipr.link("set", index=index, mtu=mtu)
        if up:
            ipr.link("set", index=index, state="up")
    return "renamed"
