# SPDX-License-Identifier: Apache-2.0
"""One PCI function's files and its bus/pci/devices link (tests/support/node_side/sysfs_builder/pci.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.node_side import sysfs_builder as sb
from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import (
    BDF_RE,
    LAYOUTS,
    pci_functions,
    read,
)


@pytest.mark.parametrize("name", LAYOUTS)
def test_bus_pci_devices_links_resolve_under_sys_devices(trees: dict[str, Path], name: str) -> None:
    root = trees[name]
    devices_root = (root / "sys" / "devices").resolve()
    links = list((root / "sys" / "bus" / "pci" / "devices").iterdir())
    assert links
    for link in links:
        assert link.is_symlink()
        target = os.readlink(link)
        assert not os.path.isabs(target), target
        assert target.startswith("../../../devices/"), target
        resolved = link.resolve()
        assert resolved.is_dir(), link
        assert resolved.name == link.name
        assert devices_root in resolved.parents
        assert BDF_RE.match(link.name)


@pytest.mark.parametrize("name", LAYOUTS)
def test_function_files_are_kernel_shaped(trees: dict[str, Path], name: str) -> None:
    root = trees[name]
    ncpus = len(sb.parse_cpulist(read(root / "sys" / "devices" / "system" / "cpu" / "possible")))
    for bdf, fdir in pci_functions(root).items():
        cls = read(fdir / "class")
        vendor, device = read(fdir / "vendor"), read(fdir / "device")
        assert re.fullmatch(r"0x[0-9a-f]{6}", cls)
        assert re.fullmatch(r"0x[0-9a-f]{4}", vendor) and re.fullmatch(r"0x[0-9a-f]{4}", device)
        assert re.fullmatch(r"0x[0-9a-f]{4}", read(fdir / "subsystem_vendor"))
        assert re.fullmatch(r"-1|\d+", read(fdir / "numa_node"))
        mask = read(fdir / "local_cpus")
        assert len(mask.split(",")) == (ncpus + 31) // 32
        assert all(re.fullmatch(r"[0-9a-f]{8}", g) for g in mask.split(","))
        mask_cpus = [c for c in range(ncpus) if int(mask.replace(",", ""), 16) >> c & 1]
        assert mask_cpus == sb.parse_cpulist(read(fdir / "local_cpulist"))
        uevent = dict(line.split("=", 1) for line in read(fdir / "uevent").splitlines())
        assert uevent["PCI_SLOT_NAME"] == bdf
        assert uevent["PCI_CLASS"] == f"{int(cls, 16):X}"
        assert uevent["PCI_ID"] == f"{int(vendor, 16):04X}:{int(device, 16):04X}"
        assert uevent["MODALIAS"].startswith(f"pci:v0000{int(vendor, 16):04X}d0000{int(device, 16):04X}sv")
        if (fdir / "driver").is_symlink():
            assert uevent["DRIVER"] == (fdir / "driver").resolve().name
            assert (fdir / "driver").resolve().parent == (root / "sys" / "bus" / "pci" / "drivers").resolve()
        else:
            assert "DRIVER" not in uevent
        assert (fdir / "subsystem").resolve() == (root / "sys" / "bus" / "pci").resolve()
        if (fdir / "current_link_speed").exists():
            assert re.fullmatch(r"\d+\.\d GT/s PCIe", read(fdir / "current_link_speed"))
            assert read(fdir / "current_link_width").isdigit()
        if int(cls, 16) >> 8 == 0x0604:
            sec = int(read(fdir / "secondary_bus_number"))
            sub = int(read(fdir / "subordinate_bus_number"))
            assert sec <= sub
            domain = bdf.rsplit(":", 2)[0]
            assert (fdir / "pci_bus" / f"{domain}:{sec:02x}" / "cpulistaffinity").is_file()
