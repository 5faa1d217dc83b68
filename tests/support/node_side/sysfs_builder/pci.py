# SPDX-License-Identifier: Apache-2.0
"""PCI functions: their attribute files, the config header (or space: :mod:`.gpudirect`), the bus and driver links.

:func:`write_function` writes one function from resolved values; the VF
writer (:mod:`.sriov`) uses it too, so a VF's entry differs from any other
function's only where the kernel's does. :class:`PciWriter` is the builder's
part that turns a layout node into those values.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Any

from .layouts import LayoutError, Spec, integer, parse_link
from .numa import format_cpulist, format_cpumask
from .sysfs import TreeWriter, bdf

_BRIDGE_CLASS = 0x060400

# Default kernel driver by vendor when a layout does not say (``driver: null``
# means unbound). Class-based rules in default_driver() take precedence.
_VENDOR_DRIVERS = {
    0x10DE: "nvidia",
    0x15B3: "mlx5_core",
    0x1002: "amdgpu",
    0x14E4: "bnxt_en",
    0x1AF4: "virtio-pci",
    0x1D0F: "efa",
    0x1A03: "ast",
    0x8086: None,
}


@dataclass
class PciFunction:
    """One PCI function written into the tree (returned for callers and tests)."""

    domain: int
    bus: int
    dev: int
    fn: int
    path: str
    vendor: int
    device: int
    pci_class: int
    numa_node: int
    driver: str | None = None
    secondary: int | None = None
    subordinate: int | None = None
    physfn: str | None = None
    netdevs: list[str] = field(default_factory=list)
    rdma: list[str] = field(default_factory=list)
    role: str = "endpoint"
    multifunction: bool = False
    link: tuple[str, str] | None = field(default=None, repr=False)
    max_link: tuple[str, str] | None = field(default=None, repr=False)

    @property
    def bdf(self) -> str:
        return bdf(self.domain, self.bus, self.dev, self.fn)

    @property
    def is_bridge(self) -> bool:
        return self.secondary is not None


@dataclass
class FunctionAttributes:
    """What a function's files show besides :class:`PciFunction`'s fields."""

    subsystem_vendor: int
    subsystem_device: int
    revision: int
    irq: int
    local_cpulist: str
    local_cpus: str
    files: dict[str, Any] = field(default_factory=dict)  # a layout's extra files, written last


def default_driver(vendor: int, device: int, pci_class: int) -> str | None:
    if pci_class >> 8 == 0x0604:
        return "pcieport"
    if pci_class >> 16 == 0x06:
        return None
    if pci_class >> 8 == 0x0108:
        return "nvme"
    if vendor == 0x8086 and device in (0x201D, 0x28C0, 0x467F, 0x4C3D, 0x9A0B):
        return "vmd"
    return _VENDOR_DRIVERS.get(vendor)


def attribute_files(func: PciFunction, attrs: FunctionAttributes) -> dict[str, Any]:
    """The function's attribute files, name -> content."""
    vendor, device, pci_class, driver = func.vendor, func.device, func.pci_class, func.driver
    sub_vendor, sub_device = attrs.subsystem_vendor, attrs.subsystem_device
    modalias = (
        f"pci:v{vendor:08X}d{device:08X}sv{sub_vendor:08X}sd{sub_device:08X}"
        f"bc{pci_class >> 16:02X}sc{(pci_class >> 8) & 0xFF:02X}i{pci_class & 0xFF:02X}"
    )
    uevent = []
    if driver:
        uevent.append(f"DRIVER={driver}")
    uevent += [
        f"PCI_CLASS={pci_class:X}",
        f"PCI_ID={vendor:04X}:{device:04X}",
        f"PCI_SUBSYS_ID={sub_vendor:04X}:{sub_device:04X}",
        f"PCI_SLOT_NAME={func.bdf}",
        f"MODALIAS={modalias}",
    ]
    files: dict[str, Any] = {
        "class": f"0x{pci_class:06x}",
        "vendor": f"0x{vendor:04x}",
        "device": f"0x{device:04x}",
        "subsystem_vendor": f"0x{sub_vendor:04x}",
        "subsystem_device": f"0x{sub_device:04x}",
        "revision": f"0x{attrs.revision:02x}",
        "numa_node": str(func.numa_node),
        "local_cpulist": attrs.local_cpulist,
        "local_cpus": attrs.local_cpus,
        "uevent": "\n".join(uevent),
        "modalias": modalias,
        "irq": str(attrs.irq),
        "enable": "1" if driver else "0",
    }
    if func.link is not None:
        files["current_link_speed"], files["current_link_width"] = func.link
    if func.max_link is not None:
        files["max_link_speed"], files["max_link_width"] = func.max_link
    for name, content in attrs.files.items():
        files[str(name)] = content
    return files


def config_header(func: PciFunction, attrs: FunctionAttributes, vendor: int, device: int, command: int) -> bytes:
    """The first 64 bytes of config space; ``vendor``, ``device`` and ``command`` as the function answers them."""
    header = 0x01 if func.is_bridge else 0x00
    if func.multifunction:
        header |= 0x80
    pci_class = func.pci_class
    config = bytearray(64)
    struct.pack_into(
        "<HHHHBBBBBBBB",
        config,
        0,
        vendor,
        device,
        command,
        0x0010,
        attrs.revision,
        pci_class & 0xFF,
        (pci_class >> 8) & 0xFF,
        pci_class >> 16,
        0,
        0,
        header,
        0,
    )
    if func.is_bridge:
        struct.pack_into("<BBB", config, 0x18, func.bus, func.secondary or 0, 0)
    else:
        struct.pack_into("<HH", config, 0x2C, attrs.subsystem_vendor, attrs.subsystem_device)
    return bytes(config)


def write_function(
    tree: TreeWriter,
    sys_root: str,
    func: PciFunction,
    attrs: FunctionAttributes,
    config: bytes,
    driver_dir: bool = True,
    in_bus_devices: bool = True,
    links: dict[str, Any] | None = None,
) -> None:
    """Write the function's directory, its ``subsystem`` and ``driver`` links and its ``bus/pci`` entries.

    ``driver_dir`` False leaves the ``driver`` link dangling; ``in_bus_devices``
    False keeps the function out of ``bus/pci/devices``; ``links``: extra raw
    relative symlinks in the function's directory.
    """
    path, address, driver = func.path, func.bdf, func.driver
    tree.files(path, attribute_files(func, attrs))
    tree.write_bytes(os.path.join(path, "config"), config)
    pci_root = os.path.join(sys_root, "bus", "pci")
    tree.link(os.path.join(path, "subsystem"), pci_root)
    if driver:
        drv_dir = os.path.join(pci_root, "drivers", str(driver))
        if driver_dir:
            if not os.path.isdir(drv_dir):
                tree.mkdir(drv_dir)
                tree.write(os.path.join(drv_dir, "bind"), "")
                tree.write(os.path.join(drv_dir, "unbind"), "")
            tree.link(os.path.join(drv_dir, address), path)
        tree.link(os.path.join(path, "driver"), drv_dir)
    if in_bus_devices:
        tree.link(os.path.join(pci_root, "devices", address), path)
    for name, target in (links or {}).items():
        tree.raw_link(os.path.join(path, str(name)), str(target))


class PciWriter:
    """Part of the builder (:class:`~.builder.Builder`): one function from its layout node."""

    def _claim_bdf(self, address: str, label: str) -> None:
        if address in self.used_bdfs:
            raise LayoutError(f"{label}: duplicate PCI address {address}")
        self.used_bdfs.add(address)

    def _attributes(self, node: Spec, vendor: int, numa: int, label: str) -> FunctionAttributes:
        sub_vendor = integer(node.get("subsystem_vendor", vendor), f"{label}.subsystem_vendor")
        sub_device = integer(node.get("subsystem_device", 0), f"{label}.subsystem_device")
        revision = integer(node.get("revision", 0), f"{label}.revision")
        cpus = self.cpus_for_node(numa)
        return FunctionAttributes(
            subsystem_vendor=sub_vendor,
            subsystem_device=sub_device,
            revision=revision,
            irq=integer(node.get("irq", 0), f"{label}.irq"),
            local_cpulist=format_cpulist(cpus),
            local_cpus=format_cpumask(cpus, self.nbits),
            files=dict(node.get("files") or {}),
        )

    def _function(
        self,
        node: Spec,
        parent_dir: str,
        domain: int,
        bus: int,
        dev: int,
        fn: int,
        numa: int,
        parent_link: tuple[str, str] | None,
        label: str,
        multifunction: bool,
        secondary: int | None = None,
    ) -> PciFunction:
        is_bridge = secondary is not None
        address = bdf(domain, bus, dev, fn)
        self._claim_bdf(address, label)
        if "vendor" not in node or "device" not in node:
            raise LayoutError(f"{label}: vendor and device are required")
        vendor = integer(node["vendor"], f"{label}.vendor")
        device = integer(node["device"], f"{label}.device")
        if is_bridge:
            pci_class = integer(node.get("class", _BRIDGE_CLASS), f"{label}.class")
        else:
            if "class" not in node:
                raise LayoutError(f"{label}: class is required for an endpoint")
            pci_class = integer(node["class"], f"{label}.class")
        numa = integer(node.get("numa_node", numa), f"{label}.numa_node")
        driver = node["driver"] if "driver" in node else default_driver(vendor, device, pci_class)
        link = parse_link(node["link"], f"{label}.link") if "link" in node else parent_link
        max_link = parse_link(node["max_link"], f"{label}.max_link") if "max_link" in node else link
        func = PciFunction(
            domain=domain,
            bus=bus,
            dev=dev,
            fn=fn,
            path=os.path.join(parent_dir, address),
            vendor=vendor,
            device=device,
            pci_class=pci_class,
            numa_node=numa,
            driver=driver,
            secondary=secondary,
            role=str(node.get("role", "bridge" if is_bridge else "endpoint")),
            multifunction=multifunction,
            link=link,
            max_link=max_link,
        )
        self.functions.append(func)
        attrs = self._attributes(node, vendor, numa, label)
        header = config_header(func, attrs, vendor, device, 0x0406 if driver else 0)
        self._note_iommu_type(node, func, label)
        write_function(
            self.w,
            self.sys,
            func,
            attrs,
            self._config_space(node, func, header, parent_dir, label),
            driver_dir=node.get("driver_dir", True),
            in_bus_devices=node.get("in_bus_devices", True),
            links=node.get("links"),
        )
        if not is_bridge:
            self._children_of_endpoint(func, node, label)
        return func

    def _bridge_files(self, func: PciFunction) -> None:
        assert func.secondary is not None and func.subordinate is not None
        self.w.write(os.path.join(func.path, "secondary_bus_number"), str(func.secondary))
        self.w.write(os.path.join(func.path, "subordinate_bus_number"), str(func.subordinate))
        cfg_path = os.path.join(func.path, "config")
        with open(cfg_path, "r+b") as fh:
            fh.seek(0x1A)
            fh.write(bytes([func.subordinate]))
        self._pci_bus_dir(func.path, func.domain, func.secondary, func.numa_node)

    def _pci_bus_dir(self, parent: str, domain: int, bus: int, numa: int) -> None:
        bus_id = f"{domain:04x}:{bus:02x}"
        d = os.path.join(parent, "pci_bus", bus_id)
        cpus = self.cpus_for_node(numa)
        self.w.files(
            d,
            {
                "cpuaffinity": format_cpumask(cpus, self.nbits),
                "cpulistaffinity": format_cpulist(cpus),
            },
        )
        self.class_link("pci_bus", bus_id, d)
