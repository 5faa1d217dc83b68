# SPDX-License-Identifier: Apache-2.0
"""PCI identity: addresses, the kind of a function from its class code, names from pci.ids."""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

# Vendors whose VGA/"other display" functions are real GPUs; a BMC's VGA
# (ASPEED, Matrox) is a display controller but not something to allocate.
GPU_DISPLAY_VENDORS = frozenset(("0x10de", "0x1002", "0x8086"))

PCI_IDS_PATHS = (
    "/usr/share/hwdata/pci.ids",
    "/usr/share/misc/pci.ids",
    "/usr/share/pci.ids",
)

_BDF_RE = re.compile(r"^([0-9a-f]{4,}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
_HOST_BRIDGE_RE = re.compile(r"^pci([0-9a-f]{4,}):([0-9a-f]{2})$")
# What Kubernetes accepts as a pcieRoot: a host bridge in a 4-hex-digit domain.
_K8S_PCIE_ROOT_RE = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
_K8S_BDF_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def vf_addresses(pf: str, numvfs: int, offset: int | None, stride: int | None) -> list[str] | None:
    """Addresses of VFs 0..numvfs-1 of PF ``pf`` (SR-IOV routing IDs), or None."""
    match = _BDF_RE.match(pf)
    if match is None or offset is None or stride is None or offset < 1:
        return None
    domain, bus, dev, fn = match.group(1), int(match.group(2), 16), int(match.group(3), 16), int(match.group(4))
    first = (bus << 8) + (dev << 3) + fn + offset
    addresses = []
    for index in range(numvfs):
        rid = first + index * stride
        if rid > 0xFFFF:
            return None
        addresses.append(f"{domain}:{rid >> 8:02x}:{(rid >> 3) & 0x1F:02x}.{rid & 7}")
    return addresses


def pci_function_key(bdf: str) -> tuple[str, str]:
    """Split ``dddd:bb:dd.f`` into (``dddd:bb:dd``, ``f``)."""
    device, _dot, function = bdf.rpartition(".")
    return device, function


def kubernetes_pcie_root(bdf: str, resolved: str | None, sysfs_root: str) -> str | None:
    """The value Kubernetes publishes as ``resource.kubernetes.io/pcieRoot``.

    ``resolved`` is the absolute target of ``<sysfs_root>/bus/pci/devices/<bdf>``.
    Returns ``None`` wherever Kubernetes publishes no attribute: a domain of
    more than four hex digits (VMD), a path that does not start with
    ``/sys/devices/pci`` (Hyper-V VMBUS, some VMs) or that does not end in the
    bdf.
    """
    if resolved is None or not _K8S_BDF_RE.match(bdf):
        return None
    prefix = sysfs_root.rstrip("/") + "/devices/"
    if not resolved.startswith(prefix):
        return None
    parts = resolved[len(prefix) :].split("/")
    if len(parts) < 2 or parts[-1] != bdf:
        return None
    if not _K8S_PCIE_ROOT_RE.match(parts[0]):
        return None
    return parts[0]


def classify(class_code: int | None, vendor_id: str | None, has_rdma: bool) -> str:
    """Map a PCI class code to one of :data:`KINDS`."""
    if class_code is None:
        return "other"
    base = class_code >> 16
    sub = (class_code >> 8) & 0xFF
    if base == 0x03:
        if sub == 0x02 or vendor_id in GPU_DISPLAY_VENDORS:
            return "gpu"
        return "other"
    if base == 0x12 or (base == 0x0B and sub == 0x40):
        return "accelerator"
    if base == 0x02 or (base == 0x0C and sub == 0x06):
        return "rdma" if has_rdma else "nic"
    if base == 0x01 and sub == 0x08:
        return "nvme"
    return "other"


def is_bridge_class(class_code: int | None) -> bool:
    # PCI-to-PCI (0x0604) and semi-transparent PCI-to-PCI (0x0609) bridges.
    return class_code is not None and (class_code >> 8) in (0x0604, 0x0609)


# --------------------------------------------------------------------------
# pci.ids names
# --------------------------------------------------------------------------


_PCI_IDS_CACHE: dict[tuple[str, float], dict[str, Any]] = {}


def find_pci_ids(candidates: Iterable[str] = PCI_IDS_PATHS) -> str | None:
    for path in candidates:
        if os.path.isfile(path):
            return path
    return None


class PciIds:
    """Look-ups in a pci.ids file without parsing all of it.

    The file is about 1.5 MB; scanning only the sections of the vendors a node
    actually has keeps a probe in the millisecond range.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        stamp = (path, os.stat(path).st_mtime)
        cached = _PCI_IDS_CACHE.get(stamp)
        if cached is None:
            with open(path, encoding="utf-8", errors="replace") as handle:
                cached = {"text": "\n" + handle.read(), "vendors": {}}
            _PCI_IDS_CACHE.clear()
            _PCI_IDS_CACHE[stamp] = cached
        self._text: str = cached["text"]
        self._vendors: dict[str, tuple[str | None, dict[str, str]]] = cached["vendors"]

    def _vendor(self, vendor: str) -> tuple[str | None, dict[str, str]]:
        entry = self._vendors.get(vendor)
        if entry is not None:
            return entry
        text = self._text
        start = text.find(f"\n{vendor}  ")
        if start < 0:
            entry = (None, {})
        else:
            line_end = text.find("\n", start + 1)
            name = text[start + 7 : line_end].strip()
            devices: dict[str, str] = {}
            pos = line_end
            while pos >= 0 and pos + 1 < len(text):
                nxt = text.find("\n", pos + 1)
                line = text[pos + 1 : nxt if nxt >= 0 else len(text)]
                if line.startswith(("\t\t", "#")) or not line:
                    pos = nxt
                    continue
                if not line.startswith("\t"):
                    break
                devices[line[1:5]] = line[5:].strip()
                pos = nxt
            entry = (name, devices)
        self._vendors[vendor] = entry
        return entry

    def names(self, vendor_id: str | None, device_id: str | None) -> tuple[str | None, str | None]:
        if not vendor_id:
            return None, None
        vendor_name, devices = self._vendor(vendor_id[2:])
        device_name = devices.get(device_id[2:]) if device_id else None
        return vendor_name, device_name
