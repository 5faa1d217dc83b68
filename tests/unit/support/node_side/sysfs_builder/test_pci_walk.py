# SPDX-License-Identifier: Apache-2.0
"""Where functions sit: switches, host bridges, domains, VMD and VMBus (tests/support/node_side/sysfs_builder/pci_walk.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import (
    pci_ancestors,
    pci_class,
    pci_functions,
    read,
)

DGX_PAIRS = {
    "0000:1a:00.0": "0000:1d:00.0",
    "0000:2b:00.0": "0000:2e:00.0",
    "0000:3c:00.0": "0000:3f:00.0",
    "0000:4d:00.0": "0000:50:00.0",
    "0000:9a:00.0": "0000:9d:00.0",
    "0000:ab:00.0": "0000:ae:00.0",
    "0000:bc:00.0": "0000:bf:00.0",
    "0000:cd:00.0": "0000:d0:00.0",
}


def test_dgx_has_8_gpus_and_8_ib_nics_paired_under_one_upper_switch(trees: dict[str, Path]) -> None:
    root = trees["dgx-h100"]
    funcs = pci_functions(root)
    gpus = sorted(b for b, d in funcs.items() if pci_class(d) >> 8 == 0x0302)
    nics = sorted(b for b, d in funcs.items() if pci_class(d) >> 8 == 0x0207)
    assert gpus == sorted(DGX_PAIRS)
    assert nics == sorted(DGX_PAIRS.values())
    for gpu in gpus:
        assert read(funcs[gpu] / "vendor") == "0x10de" and read(funcs[gpu] / "device") == "0x2330"
        g_up = pci_ancestors(funcs[gpu], root)
        # root port, upper US, upper DS, lower US, lower DS
        assert len(g_up) == 5
        upper_us = g_up[1]
        assert read(funcs[upper_us] / "device") == "0xc030"
        partners = [n for n in nics if upper_us in pci_ancestors(funcs[n], root)]
        assert partners == [DGX_PAIRS[gpu]]
        n_up = pci_ancestors(funcs[partners[0]], root)
        # They share root port and upper switch, and part below it.
        assert n_up[:2] == g_up[:2] and n_up[2] != g_up[2]
        assert read(funcs[gpu] / "numa_node") == read(funcs[partners[0]] / "numa_node")
    minors = []
    for gpu in gpus:
        info = (root / "proc" / "driver" / "nvidia" / "gpus" / gpu / "information").read_text()
        assert f"Bus Location: \t {gpu}\n" in info
        assert info.startswith("Model: \t\t NVIDIA H100 80GB HBM3\n")
        assert re.search(r"^GPU UUID: \t GPU-[0-9a-f-]{36}$", info, re.M)
        assert info.endswith("GPU Excluded:\t No\n")
        minors.append(int(re.search(r"^Device Minor: \t (\d+)$", info, re.M).group(1)))
    assert minors == list(range(8))
    ib = sorted((root / "sys" / "class" / "infiniband").iterdir())
    assert [d.name for d in ib] == [f"mlx5_{i}" for i in range(10)]
    for i, nic in enumerate(nics):
        assert (funcs[nic] / "infiniband" / f"mlx5_{i}").is_dir()
        port = funcs[nic] / "infiniband" / f"mlx5_{i}" / "ports" / "1"
        assert read(port / "link_layer") == "InfiniBand" and read(port / "state") == "4: ACTIVE"
        assert read(port / "rate") == "400 Gb/sec (4X NDR)"
        (netdev,) = (funcs[nic] / "net").iterdir()
        assert netdev.name.startswith("ibp") and read(netdev / "type") == "32"
        assert (funcs[nic] / "infiniband_mad").is_dir() and (funcs[nic] / "infiniband_verbs").is_dir()
    mgmt = [b for b, d in funcs.items() if read(d / "device") == "0x101d"]
    assert mgmt == ["0000:5a:00.0", "0000:5a:00.1"]
    assert sorted(p.name for p in (funcs[mgmt[0]] / "net").iterdir()) == ["eno1np0"]
    assert read(funcs[mgmt[1]] / "infiniband" / "mlx5_9" / "ports" / "1" / "link_layer") == "Ethernet"
    vga = [b for b, d in funcs.items() if pci_class(d) == 0x030000]
    assert vga == ["0000:03:00.0"]
    assert read(funcs[pci_ancestors(funcs[vga[0]], root)[-1]] / "device") == "0x1150"
    assert sorted(p.name for p in (root / "sys" / "class" / "nvme").iterdir()) == ["nvme0", "nvme1"]


def test_vm_flat_has_no_bridges_and_unknown_numa(trees: dict[str, Path]) -> None:
    root = trees["vm-flat"]
    funcs = pci_functions(root)
    assert all(pci_class(d) >> 8 != 0x0604 for d in funcs.values())
    assert all(read(d / "numa_node") == "-1" for d in funcs.values())
    assert all(d.parent.name == "pci0000:00" for d in funcs.values())
    assert all(read(d / "local_cpulist") == "0-15" for d in funcs.values())
    assert [p.name for p in (root / "sys" / "devices" / "system" / "node").glob("node*")] == ["node0"]
    assert len([d for d in funcs.values() if pci_class(d) >> 8 == 0x0302]) == 2
    # virtio-net: the netdev hangs below virtio0, itself below the PCI function.
    netdev = (root / "sys" / "class" / "net" / "enp0s2").resolve()
    assert netdev.parent.parent.name == "virtio0" and netdev.parent.parent.parent == funcs["0000:00:02.0"]
    assert read(netdev.parent.parent / "device") == "0x0001"
    efa = root / "sys" / "class" / "infiniband" / "rdmap0s3"
    assert efa.resolve().parent.parent == funcs["0000:00:03.0"]
    assert not (funcs["0000:00:03.0"] / "net").exists()


def test_pci_domain_5digit_lives_inside_the_vmd_endpoint(trees: dict[str, Path]) -> None:
    root = trees["pci-domain-5digit"]
    funcs = pci_functions(root)
    five = sorted(b for b in funcs if b.startswith("10000:"))
    assert five == ["10000:e0:06.0", "10000:e0:07.0", "10000:e1:00.0", "10000:e2:00.0"]
    vmd = funcs["0000:00:0e.0"]
    nvme = funcs["10000:e1:00.0"]
    assert nvme.relative_to(root / "sys" / "devices").as_posix() == (
        "pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0"
    )
    assert vmd in nvme.parents
    assert (root / "sys" / "class" / "nvme" / "nvme0").resolve().parent.parent == nvme
    assert os.path.islink(vmd / "firmware_node") and not (vmd / "firmware_node").exists()


def test_hyperv_ndv4_devices_each_in_own_domain_under_vmbus(trees: dict[str, Path]) -> None:
    root = trees["hyperv-ndv4"]
    funcs = pci_functions(root)
    assert len(funcs) == 16
    expected_numa = {
        "0003": 0, "0004": 0, "0103": 0, "0104": 0,
        "0001": 1, "0002": 1, "0101": 1, "0102": 1,
        "000d": 2, "000e": 2, "0107": 2, "0108": 2,
        "000b": 3, "000c": 3, "0105": 3, "0106": 3,
    }  # fmt: skip
    vmbus = (root / "sys" / "devices" / "LNXSYSTM:00" / "LNXSYBUS:00" / "ACPI0004:00" / "VMBUS:00").resolve()
    for bdf, d in funcs.items():
        domain = bdf.split(":")[0]
        assert bdf == f"{domain}:00:00.0"
        assert d.parent.name == f"pci{domain}:00" and d.parent.parent.parent == vmbus
        assert d.parent.parent.name.split("-")[1] == domain  # hv_pci: domain from the GUID
        assert int(read(d / "numa_node")) == expected_numa[domain]
        kind = pci_class(d) >> 8
        assert kind == (0x0302 if domain < "0100" else 0x0207)
