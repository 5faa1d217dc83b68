# SPDX-License-Identifier: Apache-2.0
"""Config spaces, IOMMU groups, kernel and modules (tests/support/node_side/sysfs_builder/gpudirect.py).

Config spaces are checked by walking their capability lists by hand (offsets
from the PCI Express base specification), not with the builder's own writer.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.node_side import sysfs_builder as sb
from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import (
    LAYOUTS,
    NUMA1,
    pci_functions,
    read,
)

SWITCHED = {
    "name": "gd",
    "numa": NUMA1,
    "hostbridges": [
        {
            "bus": 0,
            "children": [
                {
                    "type": "bridge",
                    "addr": "01.0",
                    "vendor": 0x8086,
                    "device": 0x352A,
                    "children": [
                        {
                            "type": "switch",
                            "vendor": 0x1000,
                            "device": 0xC030,
                            "downstream": [
                                {"acs": 0x1D, "children": [{"vendor": 0x10DE, "device": 0x2330, "class": 0x030200}]},
                                {
                                    "children": [
                                        {
                                            "vendor": 0x15B3,
                                            "device": 0x1021,
                                            "class": 0x020700,
                                            "max_read_request": 4096,
                                            "relaxed_ordering": False,
                                            "iommu_type": "DMA-FQ",
                                        }
                                    ]
                                },
                            ],
                        }
                    ],
                }
            ],
        }
    ],
}
# Root port 0000:00:01.0 -> switch 01:00.0 -> ports 02:00.0 (GPU 03:00.0), 02:01.0 (NIC 04:00.0).
ROOT_PORT, UPSTREAM, GPU_PORT, NIC_PORT, GPU, NIC = (
    "0000:00:01.0",
    "0000:01:00.0",
    "0000:02:00.0",
    "0000:02:01.0",
    "0000:03:00.0",
    "0000:04:00.0",
)


def u16(config: bytes, offset: int) -> int:
    return struct.unpack_from("<H", config, offset)[0]


def extended(config: bytes) -> dict[int, int]:
    """Extended capability ID -> offset, walked from 0x100."""
    found, position = {}, 0x100
    while position:
        header = struct.unpack_from("<I", config, position)[0]
        found[header & 0xFFFF] = position
        position = header >> 20
    return found


def pcie_capability(config: bytes) -> int:
    assert u16(config, 0x06) & 0x10  # Status: capability list
    position = config[0x34]
    while config[position] != 0x10:
        position = config[position + 1]
    return position


@pytest.mark.parametrize("name", [n for n in LAYOUTS if n != "dgx-h100-acs"])
def test_layouts_without_the_keys_keep_64_byte_headers_and_no_iommu_files(trees: dict[str, Path], name: str) -> None:
    root = trees[name]
    for fdir in pci_functions(root).values():
        assert (fdir / "config").stat().st_size == 64
        assert not (fdir / "iommu_group").exists()
    for absent in (
        "sys/kernel/iommu_groups",
        "sys/module",
        "proc/cmdline",
        "proc/modules",
        "proc/sys/kernel/osrelease",
    ):
        assert not (root / absent).exists(), absent


def test_extended_config_spaces(tmp_path: Path) -> None:
    spec = dict(SWITCHED, extended_config=True, iommu={"type": "identity"})
    funcs = pci_functions(sb.build_tree(spec, tmp_path))
    configs = {bdf: (funcs[bdf] / "config").read_bytes() for bdf in funcs}
    assert {len(c) for c in configs.values()} == {4096}
    for bdf, config in configs.items():
        caps = extended(config)
        is_bridge = bdf not in (GPU, NIC)
        assert (0x000D in caps) == is_bridge, bdf  # ACS on bridges only (by default)
        if is_bridge:
            assert u16(config, caps[0x000D] + 6) == (0x1D if bdf == GPU_PORT else 0), bdf
        # The header is the one a 64-byte file has, but for the capability bit and pointer.
        assert u16(config, 0) == int(read(funcs[bdf] / "vendor"), 16)
    # Device Control: Max Read Request in bits 14:12 (128 << n), Relaxed Ordering bit 4.
    gpu_control = u16(configs[GPU], pcie_capability(configs[GPU]) + 8)
    nic_control = u16(configs[NIC], pcie_capability(configs[NIC]) + 8)
    assert (128 << ((gpu_control >> 12) & 7), bool(gpu_control & 0x10)) == (512, True)
    assert (128 << ((nic_control >> 12) & 7), bool(nic_control & 0x10)) == (4096, False)
    # The bridges keep their bus numbers in the header.
    assert configs[UPSTREAM][0x18:0x1B] == bytes([0x01, 0x02, 0x04])
    # Port types in the PCI Express capabilities register.
    types = {bdf: (u16(configs[bdf], pcie_capability(configs[bdf]) + 2) >> 4) & 0xF for bdf in configs}
    assert types == {ROOT_PORT: 4, UPSTREAM: 5, GPU_PORT: 6, NIC_PORT: 6, GPU: 0, NIC: 0}


def test_acs_on_one_function_only(tmp_path: Path) -> None:
    funcs = pci_functions(sb.build_tree(SWITCHED, tmp_path))
    sizes = {bdf: (fdir / "config").stat().st_size for bdf, fdir in funcs.items()}
    assert sizes == {ROOT_PORT: 64, UPSTREAM: 64, GPU_PORT: 4096, NIC_PORT: 64, GPU: 64, NIC: 64}


def test_iommu_groups_one_per_function(tmp_path: Path) -> None:
    root = sb.build_tree(dict(SWITCHED, iommu={"type": "identity"}), tmp_path)
    funcs = pci_functions(root)
    groups = {bdf: (fdir / "iommu_group").resolve() for bdf, fdir in funcs.items()}
    assert len(set(groups.values())) == len(funcs)
    for bdf, group in groups.items():
        assert group.parent == (root / "sys/kernel/iommu_groups").resolve()
        assert read(group / "type") == ("DMA-FQ" if bdf == NIC else "identity")
        assert (group / "devices" / bdf).resolve() == funcs[bdf]


def test_iommu_off_is_an_empty_groups_directory(tmp_path: Path) -> None:
    root = sb.build_tree(dict(SWITCHED, iommu="off"), tmp_path)
    assert list((root / "sys/kernel/iommu_groups").iterdir()) == []
    assert not any((fdir / "iommu_group").exists() for fdir in pci_functions(root).values())


def test_kernel_modules_and_driver_version(tmp_path: Path) -> None:
    spec = dict(
        SWITCHED,
        cmdline="ro iommu=pt",
        kernel_release="5.15.0-1",
        modules=["nvidia_peermem"],
        nvidia_kernel_modules="proprietary",
    )
    root = sb.build_tree(spec, tmp_path)
    assert read(root / "proc/cmdline") == "ro iommu=pt"
    assert read(root / "proc/sys/kernel/osrelease") == "5.15.0-1"
    assert (root / "sys/module/nvidia_peermem").is_dir()
    assert read(root / "proc/modules").split()[0] == "nvidia_peermem"
    version = read(root / "proc/driver/nvidia/version")
    assert version.startswith("NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06")
    empty = sb.build_tree(dict(SWITCHED, modules=[]), tmp_path / "empty")
    assert list((empty / "sys/module").iterdir()) == [] and read(empty / "proc/modules") == ""
    assert "Open Kernel Module" in read(empty / "proc/driver/nvidia/version")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"iommu": "on"}, "iommu: 'off' or a mapping"),
        ({"iommu": {"type": "translated"}}, "iommu.type: one of"),
        ({"modules": "nvidia_peermem"}, "modules: a list"),
        ({"nvidia_kernel_modules": "closed"}, "nvidia_kernel_modules: 'open' or 'proprietary'"),
    ],
)
def test_wrong_keys_are_named(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(sb.LayoutError, match=message):
        sb.build_tree(dict(SWITCHED, **change), tmp_path)


def test_a_read_request_size_that_does_not_exist_is_named(tmp_path: Path) -> None:
    spec = dict(SWITCHED, extended_config=True)
    spec["hostbridges"] = [
        {"bus": 0, "children": [{"vendor": 1, "device": 2, "class": 0x20000, "max_read_request": 300}]}
    ]
    with pytest.raises(sb.LayoutError, match=r"children\[0\]\.max_read_request: one of"):
        sb.build_tree(spec, tmp_path)
