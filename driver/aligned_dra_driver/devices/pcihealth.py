# SPDX-License-Identifier: Apache-2.0
"""Health signals of one PCI function that the topology probe does not carry.

Two reads per published function and scan, both cheap and side-effect free:

- ``config``: the function's 64-byte configuration header. A function that no
  longer answers (a GPU that "fell off the bus", a link that went away under a
  surprise removal the kernel has not finished) reads as all ones, the whole
  header. Vendor and device ID alone do not tell: an SR-IOV VF's read 0xffff by
  the specification (the kernel gives its IDs in ``vendor``/``device``), while
  its command, status, revision and class registers answer. A function that
  is runtime-suspended is not read, since a config read would wake it.
- ``aer_dev_fatal``: the kernel's count of fatal uncorrectable AER errors the
  function reported (``TOTAL_ERR_FATAL``; kernels 4.19+, AER-capable
  functions only).
- ``class/net/<netdev>/flags`` and ``carrier``: a link is down when its
  interface is administratively up and has no carrier. An interface nobody
  brought up (a NIC the host leaves to the pods) is not a fault.

Every read that fails answers ``None`` (unknown), never unhealthy.
"""

from __future__ import annotations

import os

HEADER_BYTES = 64  # the type 0/1 header: readable by anyone, and a gone function reads it all as ones


def _function_dir(sysfs_root: str, pci_address: str) -> str:
    return os.path.join(sysfs_root, "bus", "pci", "devices", pci_address)


def present(sysfs_root: str, pci_address: str) -> bool:
    """Whether the function is still on the PCI bus (its sysfs directory exists)."""
    return os.path.isdir(_function_dir(sysfs_root, pci_address))


def responds(sysfs_root: str, pci_address: str) -> bool | None:
    """False when the function's whole configuration header reads as all ones; None when unknown."""
    base = _function_dir(sysfs_root, pci_address)
    try:
        with open(os.path.join(base, "power", "runtime_status")) as handle:
            if handle.read().strip() == "suspended":
                return None
    except OSError:
        pass  # no runtime PM attributes: read the config space
    try:
        with open(os.path.join(base, "config"), "rb") as handle:
            head = handle.read(HEADER_BYTES)
    except OSError:
        return None
    if len(head) < HEADER_BYTES:
        return None
    return head.count(0xFF) != len(head)


def aer_fatal_count(sysfs_root: str, pci_address: str) -> int | None:
    """``TOTAL_ERR_FATAL`` of ``aer_dev_fatal`` (the sum of its counters when that line is missing)."""
    try:
        with open(os.path.join(_function_dir(sysfs_root, pci_address), "aer_dev_fatal")) as handle:
            text = handle.read()
    except OSError:
        return None
    total = 0
    seen = False
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            continue
        if parts[0] == "TOTAL_ERR_FATAL":
            return int(parts[1])
        total += int(parts[1])
        seen = True
    return total if seen else None


IFF_UP = 0x1


def carrier_lost(sysfs_root: str, netdev: str) -> bool | None:
    """True when the interface is up (IFF_UP) without carrier; None when down by choice or unreadable."""
    base = os.path.join(sysfs_root, "class", "net", netdev)
    try:
        with open(os.path.join(base, "flags")) as handle:
            flags = int(handle.read().strip(), 16)
        if not flags & IFF_UP:
            return None
        with open(os.path.join(base, "carrier")) as handle:
            return handle.read().strip() == "0"
    except (OSError, ValueError):  # carrier of an interface that is down reads EINVAL
        return None
