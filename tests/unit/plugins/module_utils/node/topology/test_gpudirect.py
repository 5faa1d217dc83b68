# SPDX-License-Identifier: Apache-2.0
"""The probe's gpudirect block (plugins/module_utils/node/topology/gpudirect.py): IOMMU, peer memory, readiness."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import gpudirect
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree
from ansible_collections.aligned.dra.tests.unit.plugins.module_utils.node.topology.gpudirect_trees import (
    FAR_NIC,
    GPU,
    GPU_PORT,
    NIC,
    VFS,
    build_and_probe,
    layout,
    probed,
)

READY = {
    "extended_config": True,
    "iommu": {"type": "identity"},
    "cmdline": "BOOT_IMAGE=/vmlinuz ro iommu=pt intel_iommu=on pci=noats quiet iommu.strict=1",
    "kernel_release": "6.8.0-45-generic",
    "modules": ["nvidia", "mlx5_ib"],
}


def test_a_ready_node(tmp_path):
    block = build_and_probe(tmp_path, layout(**READY))["gpudirect"]
    assert block["iommu"] == {
        "mode": "passthrough",
        "groups": {GPU: "identity", NIC: "identity", FAR_NIC: "identity"},  # GPUs and physical NICs only
        "cmdline": ["iommu=pt", "intel_iommu=on", "pci=noats", "iommu.strict=1"],
    }
    assert block["peer_memory"] == {
        "nvidia_peermem": False,
        "dma_buf": True,
        "open_kernel_modules": True,
        "kernel_release": "6.8.0-45-generic",
        "method": "dma_buf",
    }
    assert block["nics"] == {
        NIC: {"max_read_request": 512, "relaxed_ordering": True},
        FAR_NIC: {"max_read_request": 512, "relaxed_ordering": True},
    }
    assert block["vfio"] == []
    assert (block["ready"], block["reasons"]) == (True, [])


def test_iommu_off_and_translated(tmp_path):
    off = build_and_probe(tmp_path / "off", layout(**{**READY, "iommu": "off"}))["gpudirect"]
    assert off["iommu"]["mode"] == "off" and off["iommu"]["groups"] == {}
    assert off["ready"] is True
    translated = build_and_probe(tmp_path / "dma", layout(nic={"iommu_type": "DMA-FQ"}, **READY))["gpudirect"]
    assert translated["iommu"]["mode"] == "translated"
    assert translated["iommu"]["groups"][NIC] == "DMA-FQ"
    assert translated["ready"] is False
    assert translated["reasons"] == [
        f"the IOMMU translates DMA for {NIC}: GPUDirect RDMA needs it off or in passthrough (iommu=pt)"
    ]


def test_an_unknown_iommu_makes_readiness_unknown(tmp_path):
    spec = dict(READY)
    del spec["iommu"], spec["cmdline"]
    block = build_and_probe(tmp_path, layout(**spec))["gpudirect"]
    assert block["iommu"] == {"mode": None, "groups": {}, "cmdline": None}
    assert (block["ready"], block["reasons"]) == (None, ["IOMMU mode unknown"])


def test_the_live_sys_without_iommu_groups_has_no_iommu(tmp_path, monkeypatch):
    """A running kernel built without the IOMMU API has no sys/kernel/iommu_groups: off, not unknown."""
    spec = dict(READY)
    del spec["iommu"]
    root = build_tree(layout(**spec), tmp_path)
    monkeypatch.setattr(gpudirect, "is_live", lambda sysfs_root: sysfs_root == str(root / "sys"))
    block = probed(root)["gpudirect"]
    assert block["iommu"]["mode"] == "off" and block["ready"] is True


def test_a_group_that_cannot_be_read(tmp_path):
    root = build_tree(layout(**READY), tmp_path)
    group = (root / "sys/bus/pci/devices" / GPU / "iommu_group").resolve()
    (group / "type").unlink()
    block = probed(root)["gpudirect"]
    assert block["iommu"]["groups"][GPU] is None and block["iommu"]["mode"] is None
    assert block["reasons"] == [f"IOMMU mode unknown (IOMMU group not readable for {GPU})"]


@pytest.mark.parametrize(
    ("changes", "memory", "reason"),
    [
        (
            {"nvidia_kernel_modules": "proprietary", "modules": ["nvidia_peermem"]},
            {"nvidia_peermem": True, "dma_buf": False, "open_kernel_modules": False, "method": "nvidia_peermem"},
            None,
        ),
        (
            {"nvidia_kernel_modules": "proprietary", "modules": []},
            {"nvidia_peermem": False, "dma_buf": False, "open_kernel_modules": False, "method": "none"},
            "no peer memory: nvidia_peermem is not loaded and DMA-BUF is not possible"
            " (the NVIDIA kernel modules are not the open ones)",
        ),
        (
            {"kernel_release": "5.10.0-28-amd64", "modules": []},
            {"nvidia_peermem": False, "dma_buf": False, "open_kernel_modules": True, "method": "none"},
            "no peer memory: nvidia_peermem is not loaded and DMA-BUF is not possible"
            " (Linux 5.10.0-28-amd64 is older than 5.12)",
        ),
    ],
)
def test_peer_memory(tmp_path, changes, memory, reason):
    block = build_and_probe(tmp_path, layout(**dict(READY, **changes)))["gpudirect"]
    assert {key: block["peer_memory"][key] for key in memory} == memory
    assert block["reasons"] == ([reason] if reason else [])
    assert block["ready"] is (reason is None)


def test_peer_memory_unknown_and_the_kernel_from_proc_version(tmp_path):
    spec = dict(READY)
    del spec["kernel_release"], spec["modules"]
    root = build_tree(layout(**spec), tmp_path)
    block = probed(root)["gpudirect"]
    assert block["peer_memory"] == {
        "nvidia_peermem": None,
        "dma_buf": None,
        "open_kernel_modules": True,
        "kernel_release": None,
        "method": None,
    }
    assert block["reasons"] == ["peer memory unknown: whether nvidia_peermem is loaded, the kernel release"]
    assert block["ready"] is None
    (root / "proc/version").write_text("Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org) #1 SMP\n")
    (root / "proc/modules").write_text("mlx5_ib 16384 0 - Live 0x0\nnvidia_peermem 16384 0 - Live 0x0\n")
    memory = probed(root)["gpudirect"]["peer_memory"]
    assert (memory["kernel_release"], memory["dma_buf"], memory["nvidia_peermem"]) == ("6.1.0-18-amd64", True, True)


def test_acs_on_an_aligned_pair_and_unread_acs(tmp_path):
    redirected = build_and_probe(tmp_path / "r", layout({"acs": 0x1D}, **READY))["gpudirect"]
    assert redirected["ready"] is False
    assert redirected["reasons"] == [
        f"ACS redirects peer-to-peer at {GPU_PORT}: 1 aligned GPU x NIC pair(s) go through the host bridge"
    ]
    unread = build_and_probe(tmp_path / "u", layout(**{**READY, "extended_config": False}))["gpudirect"]
    assert unread["ready"] is None
    assert unread["reasons"] == ["ACS not readable on the paths of 1 aligned GPU x NIC pair(s)"]
    assert unread["nics"][NIC] == {"max_read_request": None, "relaxed_ordering": None}


def test_device_control_and_vfio(tmp_path):
    spec = layout(nic={"max_read_request": 4096, "relaxed_ordering": False, "driver": "vfio-pci"}, **READY)
    block = build_and_probe(tmp_path, spec)["gpudirect"]
    assert block["nics"][NIC] == {"max_read_request": 4096, "relaxed_ordering": False}
    assert block["vfio"] == [NIC, *VFS]  # the VFs are bound to their PF's driver in this layout


def test_a_node_without_an_nvidia_gpu_or_rdma_nic_is_not_ready(tmp_path):
    spec = layout(**READY)
    spec["hostbridges"] = spec["hostbridges"][1:]  # the far NIC only
    block = build_and_probe(tmp_path, spec)["gpudirect"]
    assert block["ready"] is False
    assert block["reasons"][0] == "no NVIDIA GPU on this node"


@pytest.mark.parametrize(
    ("release", "version"),
    [("6.8.0-45-generic", (6, 8)), ("5.12", (5, 12)), ("4.18.0-553.el8_10.x86_64", (4, 18)), ("", None), (None, None)],
)
def test_kernel_version(release, version):
    assert gpudirect.kernel_version(release) == version


def test_iommu_mode_rules():
    assert gpudirect.iommu_mode(False, False, {}) is None
    assert gpudirect.iommu_mode(True, True, {}) == "off"
    assert gpudirect.iommu_mode(True, False, {"a": "identity", "b": "DMA"}) == "translated"
    assert gpudirect.iommu_mode(True, False, {"a": "identity", "b": None}) is None
    assert gpudirect.iommu_mode(True, False, {"a": "blocked"}) is None
    assert gpudirect.iommu_mode(True, False, {}) is None  # groups, but none for a GPU or NIC
