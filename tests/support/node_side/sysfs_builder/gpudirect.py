# SPDX-License-Identifier: Apache-2.0
"""What decides GPUDirect RDMA: extended config spaces (ACS, Device Control), IOMMU groups, kernel and modules.

Every key here is optional and off by default, so a layout that names none of
them builds the tree it always did (64-byte ``config`` headers, no IOMMU
files, no kernel command line). Layout keys:

- top level ``extended_config: true``: every function (VFs excepted, whose
  config stays a 64-byte header) gets a 4096-byte config space with a
  capability list: the PCI Express capability (its Device Control register)
  and, at 0x100, an AER extended capability; bridges also get the ACS
  extended capability, its control 0 (nothing redirected) unless said;
- per function or bridge (switch ports take the switch's keys, ``upstream:``
  and ``downstream:`` entries override): ``extended_config: true|false``,
  ``acs: <control>`` (implies the 4096 bytes; the ACS capability with that
  control value; ``acs: false`` leaves the capability out),
  ``max_read_request: 128..4096`` and ``relaxed_ordering: true|false``
  (Device Control), ``iommu_type: identity|DMA|DMA-FQ|...`` (the group type of
  that function, over the layout's);
- ``iommu: off`` (an empty ``sys/kernel/iommu_groups``: the kernel has no
  IOMMU) or ``iommu: {type: identity|DMA|DMA-FQ}``: one group per PCI function
  (VFs included), ``sys/kernel/iommu_groups/<n>/{type,devices/<bdf>}`` and each
  function's ``iommu_group`` link;
- ``cmdline: "..."``: ``/proc/cmdline``;
- ``kernel_release: "6.8.0-45-generic"``: ``/proc/sys/kernel/osrelease``;
- ``modules: [nvidia_peermem, ...]``: ``sys/module/<name>/`` and
  ``/proc/modules`` (``modules: []`` writes both, empty);
- ``nvidia_kernel_modules: open|proprietary`` (default ``open``): which
  NVIDIA kernel modules ``/proc/driver/nvidia/version`` names.
"""

from __future__ import annotations

import os
import struct
from typing import Any

from .layouts import LayoutError, Spec, integer
from .pci import PciFunction

EXTENDED_CONFIG_SIZE = 4096
PCIE_CAP = 0x40
AER_CAP = 0x100
ACS_CAP = 0x148
# ACS Capability register: Source Validation, Translation Blocking, Request and
# Completion Redirect, Upstream Forwarding, Egress Control, Direct Translated P2P.
ACS_CAPABILITIES = 0x007F
_PORT_TYPES = {"endpoint": 0x0, "root_port": 0x4, "upstream": 0x5, "downstream": 0x6, "bridge": 0x7}
_READ_REQUEST_CODES = {128 << code: code for code in range(6)}
IOMMU_TYPES = ("identity", "DMA", "DMA-FQ", "blocked", "unmanaged")


def _port_type(func: PciFunction, root_port: bool) -> int:
    if not func.is_bridge:
        return _PORT_TYPES["endpoint"]
    if root_port:
        return _PORT_TYPES["root_port"]
    return _PORT_TYPES.get(func.role, _PORT_TYPES["bridge"])


def device_control_value(max_read_request: int, relaxed_ordering: bool) -> int:
    """A Device Control register: correctable..unsupported reporting on, 256-byte payload, the two given."""
    code = _READ_REQUEST_CODES[max_read_request]
    return (code << 12) | (0x1 << 5) | (0x10 if relaxed_ordering else 0) | 0x000F


def extended_config(header: bytes, port_type: int, device_control: int, acs_control: int | None, acs: bool) -> bytes:
    """A 4096-byte config space: ``header``, the PCI Express capability at 0x40, AER at 0x100, ACS after it."""
    config = bytearray(EXTENDED_CONFIG_SIZE)
    config[: len(header)] = header
    struct.pack_into("<H", config, 0x06, struct.unpack_from("<H", config, 0x06)[0] | 0x0010)  # capability list
    config[0x34] = PCIE_CAP
    # PCI Express capability (version 2): ID, next, capabilities, Device Capabilities, Device Control.
    struct.pack_into("<BBHIH", config, PCIE_CAP, 0x10, 0x00, 0x0002 | (port_type << 4), 0x00008FC1, device_control)
    next_after_aer = ACS_CAP if acs else 0
    struct.pack_into("<I", config, AER_CAP, 0x0001 | (0x2 << 16) | (next_after_aer << 20))
    if acs:
        struct.pack_into("<IHH", config, ACS_CAP, 0x000D | (0x1 << 16), ACS_CAPABILITIES, acs_control or 0)
    return bytes(config)


class GpudirectWriter:
    """Part of the builder (:class:`~.builder.Builder`): config spaces, IOMMU groups, cmdline, modules."""

    def _config_space(self, node: Spec, func: PciFunction, header: bytes, parent_dir: str, label: str) -> bytes:
        """``header``, or the 4096-byte config space the layout asks for this function."""
        wanted = node.get("extended_config", self.spec.get("extended_config", False))
        if "acs" in node and node["acs"] is not False:
            wanted = True
        if not wanted:
            return header
        acs_value = node.get("acs")
        if acs_value is False:
            acs, control = False, None
        elif acs_value is None:
            acs, control = func.is_bridge, 0
        else:
            acs, control = True, integer(acs_value, f"{label}.acs")
        mrrs = integer(node.get("max_read_request", 512), f"{label}.max_read_request")
        if mrrs not in _READ_REQUEST_CODES:
            raise LayoutError(f"{label}.max_read_request: one of {sorted(_READ_REQUEST_CODES)}, got {mrrs}")
        control_register = device_control_value(mrrs, bool(node.get("relaxed_ordering", True)))
        root_port = os.path.basename(parent_dir).startswith("pci")
        return extended_config(header, _port_type(func, root_port), control_register, control, acs)

    def _note_iommu_type(self, node: Spec, func: PciFunction, label: str) -> None:
        if "iommu_type" in node:
            kind = str(node["iommu_type"])
            if kind not in IOMMU_TYPES:
                raise LayoutError(f"{label}.iommu_type: one of {list(IOMMU_TYPES)}, got {kind!r}")
            self.iommu_types[func.bdf] = kind

    def write_gpudirect(self) -> None:
        """The layout's ``iommu``, ``cmdline``, ``kernel_release`` and ``modules`` (nothing when absent)."""
        spec = self.spec
        if "iommu" in spec:
            self._iommu_groups(spec["iommu"])
        if "cmdline" in spec:
            self.w.write(os.path.join(self.proc, "cmdline"), str(spec["cmdline"]))
        if "kernel_release" in spec:
            self.w.mkdir(os.path.join(self.proc, "sys", "kernel"))
            self.w.write(os.path.join(self.proc, "sys", "kernel", "osrelease"), str(spec["kernel_release"]))
        if "modules" in spec:
            self._modules(spec["modules"])

    def _iommu_groups(self, iommu: Any) -> None:
        groups = os.path.join(self.sys, "kernel", "iommu_groups")
        self.w.mkdir(groups)
        if iommu in ("off", False, None):
            return
        if not isinstance(iommu, dict):
            raise LayoutError(f"iommu: 'off' or a mapping with a type, got {iommu!r}")
        default = str(iommu.get("type", "identity"))
        if default not in IOMMU_TYPES:
            raise LayoutError(f"iommu.type: one of {list(IOMMU_TYPES)}, got {default!r}")
        for number, func in enumerate(self.functions):
            group = os.path.join(groups, str(number))
            self.w.mkdir(os.path.join(group, "devices"))
            self.w.write(os.path.join(group, "type"), self.iommu_types.get(func.bdf, default))
            self.w.link(os.path.join(group, "devices", func.bdf), func.path)
            self.w.link(os.path.join(func.path, "iommu_group"), group)

    def _modules(self, modules: Any) -> None:
        if not isinstance(modules, list):
            raise LayoutError(f"modules: a list of module names, got {modules!r}")
        self.w.mkdir(os.path.join(self.sys, "module"))
        lines = []
        for name in modules:
            self.w.files(os.path.join(self.sys, "module", str(name)), {"initstate": "live", "refcnt": "0"})
            lines.append(f"{name} 16384 0 - Live 0x0000000000000000\n")
        self.w.write_bytes(os.path.join(self.proc, "modules"), "".join(lines).encode("ascii"))
