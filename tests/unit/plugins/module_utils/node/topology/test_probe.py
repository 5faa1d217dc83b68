# SPDX-License-Identifier: Apache-2.0
"""probe() on synthetic trees from the fixture builder, and on broken trees.

The level matrices below are written by hand from the layouts in
tests/fixtures/layouts/ (which switch, host bridge and NUMA node each device
sits on), not copied from the probe's output.
"""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node import topology as topology_module
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import probe
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree


def run(root: Path) -> dict:
    return probe(str(root / "sys"), str(root / "proc"))


def device(topology: dict, bdf: str) -> dict:
    return next(d for d in topology["devices"] if d["pci_address"] == bdf)


def matrix(topology: dict, gpus: list[str], nics: list[str]) -> list[str]:
    return [" ".join(topology["links"][g][n] for n in nics) for g in gpus]


# -- synthetic layouts: hand-computed levels ---------------------------------

DGX_GPUS = [f"0000:{b}:00.0" for b in ("1a", "2b", "3c", "4d", "9a", "ab", "bc", "cd")]
DGX_NICS = [f"0000:{b}:00.0" for b in ("1d", "2e", "3f", "50", "9d", "ae", "bf", "d0")]
DGX_MGMT = ["0000:5a:00.0", "0000:5a:00.1"]


def test_dgx_h100_levels(layouts):
    topology = layouts("dgx-h100")
    # Each GPU and its ConnectX-7 hang under two lower switches below one upper
    # switch (PXB); other NICs of the socket are on other host bridges (NODE);
    # the other socket is SYS. The management NIC sits on socket 0.
    p, n, s = "PXB", "NODE", "SYS"
    socket0 = [" ".join([p if i == j else n for j in range(4)] + [n, n] + [s] * 4) for i in range(4)]
    socket1 = [" ".join([s] * 4 + [s, s] + [p if i == j else n for j in range(4)]) for i in range(4)]
    assert matrix(topology, DGX_GPUS, DGX_NICS[:4] + DGX_MGMT + DGX_NICS[4:]) == socket0 + socket1
    for gpu, nic in zip(DGX_GPUS, DGX_NICS, strict=True):
        assert topology["nearest_nics"][gpu] == {"level": "PXB", "nics": [nic]}
        assert len(device(topology, gpu)["switches"]) == 2
    assert len(topology["switches"]) == 8 * 3


def test_dgx_h100_details(layouts):
    topology = layouts("dgx-h100")
    assert topology["counts"] == {"gpu": 8, "accelerator": 0, "nic": 0, "rdma": 10, "nvme": 2, "other": 1, "vfs": 0}
    gpu = device(topology, "0000:9a:00.0")
    assert gpu["gpu"]["minor"] == 4
    assert gpu["gpu"]["model"] == "NVIDIA H100 80GB HBM3"
    assert gpu["gpu"]["uuid"].startswith("GPU-")
    assert gpu["numa_node"] == 1
    assert gpu["pcie_root"] == "pci0000:95"
    nic = device(topology, "0000:9d:00.0")
    assert nic["rdma_devices"] == ["mlx5_4"]
    assert [(x["name"], x["type"]) for x in nic["netdevs"]] == [("ibp157s0", "infiniband")]
    mgmt = device(topology, "0000:5a:00.1")
    assert mgmt["netdevs"][0]["type"] == "ethernet"
    rdma = {r["name"]: r for r in topology["rdma_devices"]}
    assert rdma["mlx5_9"]["ports"][0]["link_layer"] == "Ethernet"
    assert rdma["mlx5_4"]["ports"][0]["link_layer"] == "InfiniBand"
    assert rdma["mlx5_4"]["pci_address"] == "0000:9d:00.0"
    assert any(c.startswith("uverbs") for c in rdma["mlx5_4"]["char_devices"])
    bmc = next(d for d in topology["devices"] if d["vendor_id"] == "0x1a03")
    assert bmc["kind"] == "other"
    # 64-byte config headers: the one warning is the ACS that cannot be read on the
    # GPU x NIC paths below a common switch (each GPU, its NIC and the switch ports between).
    (warning,) = topology["warnings"]
    assert warning.startswith("ACS not readable (config space shorter than 4096 bytes")
    on_path = ["0000:96:00.0", "0000:97:00.0", "0000:97:01.0", "0000:98:00.0", "0000:99:00.0", "0000:9a:00.0"]
    assert ", ".join(on_path + ["0000:9b:00.0", "0000:9c:00.0", "0000:9d:00.0"]) in warning  # sorted
    for bdf in on_path:
        assert bdf in warning
    assert "0000:95:01.0" not in warning and "0000:5a:00.0" not in warning  # above the common switch; no pair


def test_mi300x_one_root_complex_per_pair(layouts):
    topology = layouts("mi300x")
    gpus = [f"0000:{b}1:00.0" for b in ("0", "2", "4", "6", "8", "a", "c", "e")]
    nics = [f"0000:{b}2:00.0" for b in ("0", "2", "4", "6", "8", "a", "c", "e")]
    # GPU and NIC on two root ports of one host bridge: PHB. Four host bridges per NUMA node.
    expected = []
    for i in range(8):
        expected.append(" ".join("PHB" if i == j else ("NODE" if i // 4 == j // 4 else "SYS") for j in range(8)))
    assert matrix(topology, gpus, nics) == expected
    assert device(topology, gpus[3])["kind"] == "accelerator"
    assert device(topology, gpus[3])["gpu"] == {"card": "card3", "render_node": "renderD131"}


def test_sriov_8x64_vfs(layouts):
    topology = layouts("sriov-8x64")
    counts = topology["counts"]
    assert (counts["gpu"], counts["vfs"]) == (8, 512)
    pfs = [d for d in topology["devices"] if d["sriov"]]
    assert len(pfs) == 8
    for pf in pfs:
        assert (pf["sriov"]["totalvfs"], pf["sriov"]["numvfs"], len(pf["sriov"]["vfs"])) == (127, 64, 64)
        for vf_bdf in pf["sriov"]["vfs"]:
            vf = device(topology, vf_bdf)
            assert vf["physfn"] == pf["pci_address"]
            assert vf["kind"] == "rdma"
            assert len(vf["netdevs"]) == 1 and len(vf["rdma_devices"]) == 1
            assert vf["pcie_root"] == pf["pcie_root"]
            assert vf["numa_node"] == pf["numa_node"] and vf["link"] is None
            # A VF's interface: its name and the PF's type; MAC, state and MTU belong to netlink.
            (netdev,) = vf["netdevs"]
            assert netdev["name"] != pf["netdevs"][0]["name"]
            assert netdev["type"] == pf["netdevs"][0]["type"]
            assert (netdev["address"], netdev["operstate"], netdev["mtu"]) == (None, None, None)
            for gpu, row in topology["links"].items():
                assert row[vf_bdf] == row[pf["pci_address"]], (gpu, vf_bdf)
    rdma = {r["name"]: r for r in topology["rdma_devices"]}
    pf_port = rdma[pfs[0]["rdma_devices"][0]]["ports"][0]
    vf_rdma = rdma[device(topology, pfs[0]["sriov"]["vfs"][0])["rdma_devices"][0]]
    assert vf_rdma["ports"][0]["link_layer"] == pf_port["link_layer"]
    assert vf_rdma["ports"][0]["state"] == "ACTIVE"
    assert vf_rdma["node_guid"] is None and vf_rdma["char_devices"]
    # nearest_nics lists physical NICs only.
    for best in topology["nearest_nics"].values():
        assert best["level"] == "PIX" and len(best["nics"]) == 1
        assert device(topology, best["nics"][0])["physfn"] is None


def test_vm_with_flat_bus_and_unknown_numa(layouts):
    topology = layouts("vm-flat")
    assert topology["bridges"] == []
    for d in topology["devices"]:
        assert d["numa_node"] is None
        assert d["numa_node_inferred"] == {"node": 0, "rule": "local_cpulist"}
        assert d["bridges"] == [] and d["pcie_root"] == "pci0000:00"
    assert set(topology["links"]["0000:00:04.0"].values()) == {"PHB"}


def test_five_digit_domain_has_no_pcie_root(layouts):
    topology = layouts("pci-domain-5digit")
    nvmes = [d for d in topology["devices"] if d["kind"] == "nvme"]
    assert [d["pci_address"] for d in nvmes] == ["10000:e1:00.0", "10000:e2:00.0"]
    for d in nvmes:
        assert d["pcie_root"] is None
        assert d["host_bridge"] == "pci10000:e0"
        assert d["numa_node"] == 0
    assert device(topology, "0000:18:00.0")["pcie_root"] == "pci0000:17"
    assert topology["links"] == {"0000:18:00.0": {"0000:39:00.0": "NODE"}}


def test_hyperv_vmbus_devices_have_no_pcie_root(layouts):
    topology = layouts("hyperv-ndv4")
    gpus = [d["pci_address"] for d in topology["devices"] if d["kind"] == "gpu"]
    nics = [d["pci_address"] for d in topology["devices"] if d["kind"] == "rdma"]
    assert len(gpus) == len(nics) == 8
    assert all(d["pcie_root"] is None for d in topology["devices"])
    # Each device is its own host bridge; locality comes from NUMA only.
    numa = {d["pci_address"]: d["numa_node"] for d in topology["devices"]}
    for g in gpus:
        for n in nics:
            assert topology["links"][g][n] == ("NODE" if numa[g] == numa[n] else "SYS")
    assert sum("pcieRoot" in w for w in topology["warnings"]) == 16


# -- edge cases on small and broken trees ------------------------------------

SMALL = {
    "name": "small",
    "numa": {"nodes": [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "4-7"}]},
    "hostbridges": [
        {
            "domain": 0,
            "bus": 0,
            "numa_node": 0,
            "children": [
                {
                    "type": "bridge",
                    "addr": "01.0",
                    "vendor": 0x8086,
                    "device": 0x2030,
                    "children": [
                        {
                            "addr": "00.0",
                            "vendor": 0x15B3,
                            "device": 0x1017,
                            "class": 0x020000,
                            "netdevs": [{"name": "ens1f0", "type": "eth"}],
                            "rdma": {"name": "mlx5_0", "ports": 2},
                            "sriov": {"totalvfs": 8, "numvfs": 2, "vf_device": 0x1018},
                        }
                    ],
                },
                {
                    "type": "bridge",
                    "addr": "02.0",
                    "vendor": 0x8086,
                    "device": 0x2031,
                    "children": [{"addr": "00.0", "vendor": 0x10DE, "device": 0x2330, "class": 0x030200}],
                },
            ],
        }
    ],
}


@pytest.fixture
def small(tmp_path) -> Path:
    build_tree(SMALL, tmp_path)
    return tmp_path


def pci_dir(root: Path, bdf: str) -> Path:
    return (root / "sys/bus/pci/devices" / bdf).resolve()


def test_small_tree_baseline(small):
    topology = run(small)
    assert topology["warnings"] == []
    nic = device(topology, "0000:01:00.0")
    assert nic["kind"] == "rdma"
    assert len(nic["sriov"]["vfs"]) == 2
    mlx = next(r for r in topology["rdma_devices"] if r["name"] == "mlx5_0")
    assert [p["port"] for p in mlx["ports"]] == [1, 2]
    assert sorted(c for c in mlx["char_devices"] if c.startswith("umad")) == ["umad0", "umad1"]
    assert topology["links"]["0000:02:00.0"]["0000:01:00.0"] == "PHB"


def test_dangling_pci_link_is_skipped_with_a_warning(small):
    shutil.rmtree(pci_dir(small, "0000:02:00.0"))
    topology = run(small)
    assert "0000:02:00.0" not in [d["pci_address"] for d in topology["devices"]]
    assert any("0000:02:00.0" in w and "dangling" in w for w in topology["warnings"])
    assert topology["links"] == {}


def test_unreadable_attribute_becomes_null_with_a_warning(small):
    numa = pci_dir(small, "0000:02:00.0") / "numa_node"
    numa.unlink()
    numa.mkdir()  # reading a directory fails even for root
    topology = run(small)
    gpu = device(topology, "0000:02:00.0")
    assert gpu["numa_node"] is None
    assert gpu["numa_node_inferred"] == {"node": 0, "rule": "nearest_ancestor"}
    assert any(str(numa) in w and "cannot read" in w for w in topology["warnings"])


def test_vf_takes_its_pf_numa_node_when_unknown(small):
    vf = device(run(small), "0000:01:00.0")["sriov"]["vfs"][0]
    (pci_dir(small, vf) / "numa_node").write_text("-1\n")
    topology = run(small)
    assert device(topology, vf)["numa_node"] is None
    assert device(topology, vf)["numa_node_inferred"] == {"node": 0, "rule": "physfn"}


def test_vfs_are_found_from_offset_and_stride_or_from_virtfn_links(small):
    pf = pci_dir(small, "0000:01:00.0")
    vfs = device(run(small), "0000:01:00.0")["sriov"]["vfs"]
    assert len(vfs) == 2
    # Without offset and stride the virtfn links decide; a missing one is reported.
    (pf / "sriov_offset").unlink()
    assert device(run(small), "0000:01:00.0")["sriov"]["vfs"] == vfs
    os.unlink(pf / "virtfn1")
    topology = run(small)
    assert device(topology, "0000:01:00.0")["sriov"]["vfs"] == vfs[:1]
    assert any("virtfn1 is missing" in w for w in topology["warnings"])


def test_a_vf_missing_from_the_bus_listing_falls_back_to_virtfn_links(small):
    vfs = device(run(small), "0000:01:00.0")["sriov"]["vfs"]
    os.unlink(small / "sys/bus/pci/devices" / vfs[1])
    topology = run(small)
    # The virtfn link still names it; the VF itself is not listed, so not probed.
    assert device(topology, "0000:01:00.0")["sriov"]["vfs"] == vfs
    assert vfs[1] not in [d["pci_address"] for d in topology["devices"]]


def test_dangling_class_links_and_missing_directories(small):
    (small / "sys/class/infiniband/ghost0").symlink_to("../../devices/nowhere/infiniband/ghost0")
    (small / "sys/class/net/ghost0").symlink_to("../../devices/nowhere/net/ghost0")
    shutil.rmtree(small / "sys/devices/system/node")
    shutil.rmtree(small / "sys/class/drm", ignore_errors=True)
    topology = run(small)
    assert topology["numa_nodes"] == []
    assert any("ghost0" in w for w in topology["warnings"])
    assert "ghost0" not in [r["name"] for r in topology["rdma_devices"]]
    assert "ghost0" not in [n["name"] for d in topology["devices"] for n in d["netdevs"]]
    assert device(topology, "0000:01:00.0")["rdma_devices"] == ["mlx5_0"]


def test_missing_sysfs_root_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="sysfs_root"):
        probe(str(tmp_path / "nope"), str(tmp_path))


def test_empty_sysfs_root_gives_an_empty_topology_with_warnings(tmp_path):
    topology = probe(str(tmp_path), str(tmp_path))
    assert topology["devices"] == [] and topology["links"] == {}
    assert any("bus/pci/devices" in w for w in topology["warnings"])


def test_each_vf_reports_its_own_driver(small):
    vfs = device(run(small), "0000:01:00.0")["sriov"]["vfs"]
    link = pci_dir(small, vfs[1]) / "driver"
    link.unlink()
    link.symlink_to("../../../../bus/pci/drivers/vfio-pci")  # dangling is fine: the name counts
    (pci_dir(small, vfs[1]) / "uevent").write_text("DRIVER=vfio-pci\n")
    topology = run(small)
    assert device(topology, vfs[0])["driver"] != "vfio-pci"
    assert device(topology, vfs[1])["driver"] == "vfio-pci"
    assert device(topology, vfs[1])["vendor_id"] == device(topology, vfs[0])["vendor_id"]


def test_vfs_of_one_pf_are_separate_devices(small):
    vfs = device(run(small), "0000:01:00.0")["sriov"]["vfs"]
    (pci_dir(small, vfs[1]) / "numa_node").write_text("1\n")
    topology = run(small)
    first, second = device(topology, vfs[0]), device(topology, vfs[1])
    assert (first["numa_node"], second["numa_node"]) == (0, 1)
    assert [n["name"] for n in first["netdevs"]] == ["ens1f0v0"]
    assert [n["name"] for n in second["netdevs"]] == ["ens1f0v1"]
    assert (first["rdma_devices"], second["rdma_devices"]) == (["mlx5_1"], ["mlx5_2"])
    # Built from one template, but nothing is shared between them.
    first["bridges"].append("changed")
    first["switches"].append("changed")
    assert "changed" not in second["bridges"] + second["switches"]
    assert second["bridges"] == device(topology, "0000:01:00.0")["bridges"]


def test_a_vf_without_rdma_device_is_a_nic_beside_rdma_siblings(small):
    vfs = device(run(small), "0000:01:00.0")["sriov"]["vfs"]
    os.unlink(small / "sys/class/infiniband/mlx5_1")
    topology = run(small)
    assert (device(topology, vfs[0])["kind"], device(topology, vfs[1])["kind"]) == ("nic", "rdma")
    assert device(topology, vfs[0])["rdma_devices"] == []


def test_probe_closes_every_descriptor_it_opens(small):
    before = sorted(os.listdir("/proc/self/fd"))
    run(small)
    assert sorted(os.listdir("/proc/self/fd")) == before


def rdma(topology: dict, name: str) -> dict:
    return next(r for r in topology["rdma_devices"] if r["name"] == name)


def test_a_vf_reports_its_own_port_state_and_only_the_ports_it_has(small):
    vfs = device(run(small), "0000:01:00.0")["sriov"]["vfs"]
    # The builder gives the dual-port PF's VFs one port each (ConnectX-3 can do that).
    (pci_dir(small, vfs[1]) / "infiniband/mlx5_2/ports/1/state").write_text("1: DOWN\n")
    topology = run(small)
    pf, first, second = rdma(topology, "mlx5_0"), rdma(topology, "mlx5_1"), rdma(topology, "mlx5_2")
    assert [p["port"] for p in pf["ports"]] == [1, 2]
    assert [p["port"] for p in first["ports"]] == [1] == [p["port"] for p in second["ports"]]
    assert (first["ports"][0]["state"], second["ports"][0]["state"]) == ("ACTIVE", "DOWN")
    # The physical link is the PF port's; nothing is shared with it.
    assert second["ports"][0]["link_layer"] == pf["ports"][0]["link_layer"]
    assert second["ports"][0]["rate_gbps"] == pf["ports"][0]["rate_gbps"]
    assert pf["ports"][0]["state"] == "ACTIVE"
    assert (first["char_devices"], second["char_devices"]) == (["uverbs1", "umad2"], ["uverbs2", "umad3"])
    assert first["node_guid"] is None and pf["node_guid"]


def test_a_vf_rdma_device_that_is_gone_is_skipped_with_a_warning(small):
    vfs = device(run(small), "0000:01:00.0")["sriov"]["vfs"]
    shutil.rmtree(pci_dir(small, vfs[0]) / "infiniband/mlx5_1")
    topology = run(small)
    assert [r["name"] for r in topology["rdma_devices"]] == ["mlx5_0", "mlx5_2"]
    assert any("mlx5_1" in w and "dangling" in w for w in topology["warnings"])
    assert device(topology, vfs[0])["rdma_devices"] == [] and device(topology, vfs[0])["kind"] == "nic"


def test_two_rdma_devices_of_one_vf_each_get_their_own_char_devices(small):
    vfs = device(run(small), "0000:01:00.0")["sriov"]["vfs"]
    vf = pci_dir(small, vfs[1])
    # A second RDMA device on the VF, with its own umad that names it.
    shutil.copytree(vf / "infiniband/mlx5_2", vf / "infiniband/mlx5_9", symlinks=True)
    (vf / "infiniband/mlx5_9/ports/1/state").write_text("2: INIT\n")
    shutil.copytree(vf / "infiniband_mad/umad3", vf / "infiniband_mad/umad7", symlinks=True)
    (vf / "infiniband_mad/umad7/ibdev").write_text("mlx5_9\n")
    rel = os.path.relpath(vf, small / "sys/class/infiniband")
    (small / "sys/class/infiniband/mlx5_9").symlink_to(f"{rel}/infiniband/mlx5_9")
    (small / "sys/class/infiniband_mad/umad7").symlink_to(f"{rel}/infiniband_mad/umad7")
    topology = run(small)
    assert device(topology, vfs[1])["rdma_devices"] == ["mlx5_2", "mlx5_9"]
    assert rdma(topology, "mlx5_2")["char_devices"] == ["uverbs2", "umad3"]
    assert rdma(topology, "mlx5_9")["char_devices"] == ["umad7"]
    assert [p["state"] for p in rdma(topology, "mlx5_9")["ports"]] == ["INIT"]
    assert [r["name"] for r in topology["rdma_devices"]] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_9"]


def test_probe_leaves_the_garbage_collector_as_it_found_it(small, monkeypatch):
    assert gc.isenabled()
    run(small)
    assert gc.isenabled()
    gc.disable()
    try:
        run(small)
        assert not gc.isenabled()
    finally:
        gc.enable()

    def broken(self):
        assert not gc.isenabled()  # off while probing
        raise RuntimeError("probe failed")

    monkeypatch.setattr(topology_module._Probe, "run", broken)
    with pytest.raises(RuntimeError):
        run(small)
    assert gc.isenabled()
