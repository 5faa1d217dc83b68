# SPDX-License-Identifier: Apache-2.0
"""Network interfaces of PCI functions: found by PCI address, read, renamed and put back over netlink."""

from __future__ import annotations

import logging
import os
from typing import Any

from ..validation import IFNAME_RE, is_bdf, is_ifname
from . import addresses as layer3

__all__ = ["IFNAME_RE", "netdevs_of", "read_host", "restore_name", "valid_bdf"]

LOG = logging.getLogger(__name__)
IFF_UP = 0x1


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


def read_host(ifname: str) -> dict[str, Any] | None:
    """The link's state in the driver's namespace (the host's): ``{"up", "addresses", "routes"}``.

    None when no link has that name (a test tree's NIC, or one gone since sysfs listed it).
    Addresses and routes as :mod:`aligned_dra_driver.network.addresses` reads them.
    """
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=ifname)
        if not found:
            return None
        (link,) = ipr.get_links(found[0])
        records: dict[str, Any] = dict(layer3.read(ipr, found[0]))
        records["up"] = bool(link["flags"] & IFF_UP)
    return records


def restore_name(
    sysfs_root: str,
    pci_address: str,
    original: str,
    mtu: int | None = None,
    up: bool | None = True,
    records: dict[str, Any] | None = None,
) -> str:
    """Give a function's interface, back in the host namespace, its name, MTU, state, addresses and routes.

    ``up``: the state it had (None: unknown, an entry written before the state was
    recorded: a renamed interface comes up, one in place is left as it is).
    ``records``: its addresses and routes as recorded at Prepare; the ones missing are
    added (a NIC back from a pod has none: the kernel flushed them), a route another
    interface holds since is left and logged. Raises
    :class:`~aligned_dra_driver.network.addresses.Layer3Error` naming the interface and
    the address or route the kernel refused.

    Returns what happened: ``absent`` (still in a pod, or gone), ``in-place``
    (already named ``original``), ``renamed``.
    """
    names = netdevs_of(sysfs_root, pci_address)
    if not names:
        return "absent"
    from pyroute2 import IPRoute

    current = original if original in names else names[0]
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=current)
        if not found:
            return "absent"
        index = found[0]
        (link,) = ipr.get_links(index)
        outcome = "in-place"
        if current != original:
            ipr.link("set", index=index, state="down")
            ipr.link("set", index=index, ifname=original)
            outcome = "renamed"
            if up is None:
                up = True  # what restore_name always did with a renamed interface
        if mtu and link.get_attr("IFLA_MTU") != mtu:
            ipr.link("set", index=index, mtu=mtu)
        if up is not None:
            is_up = bool(link["flags"] & IFF_UP) and outcome == "in-place"
            if up != is_up:
                ipr.link("set", index=index, state="up" if up else "down")
        if records and (records.get("addresses") or records.get("routes")):
            failed, left_out = layer3.put_back(ipr, index, original, records)
            for said in left_out:
                LOG.warning("%s: %s", pci_address, said)
            if failed:
                raise layer3.Layer3Error("; ".join(failed))
    return outcome
