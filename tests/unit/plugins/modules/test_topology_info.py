# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.topology_info: argument handling and result shape."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import rails
from ansible_collections.aligned.dra.plugins.modules import topology_info


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        topology_info.main()
    return json.loads(capsys.readouterr().out)


def make_tree(root):
    """The smallest sysfs a probe accepts: one NUMA node, one NIC."""
    node = root / "sys/devices/system/node/node0"
    node.mkdir(parents=True)
    (node / "cpulist").write_text("0-3\n")
    (node / "distance").write_text("10\n")
    dev = root / "sys/devices/pci0000:00/0000:00:03.0"
    dev.mkdir(parents=True)
    for name, value in {
        "class": "0x020000",
        "vendor": "0x8086",
        "device": "0x1521",
        "numa_node": "0",
        "local_cpulist": "0-3",
    }.items():
        (dev / name).write_text(value + "\n")
    bus = root / "sys/bus/pci/devices"
    bus.mkdir(parents=True)
    (bus / "0000:00:03.0").symlink_to("../../../devices/pci0000:00/0000:00:03.0")
    (root / "proc").mkdir()
    return root


def test_probe_of_a_tree(tmp_path, capsys):
    root = make_tree(tmp_path)
    result = run(capsys, {"sysfs_root": str(root / "sys"), "procfs_root": str(root / "proc")})
    assert result["changed"] is False
    topology = result["topology"]
    assert [d["pci_address"] for d in topology["devices"]] == ["0000:00:03.0"]
    device = topology["devices"][0]
    assert (device["kind"], device["vendor_id"], device["pcie_root"]) == ("nic", "0x8086", "pci0000:00")
    assert device["vendor_name"] is None or isinstance(device["vendor_name"], str)


def test_check_mode_probes_too(tmp_path, capsys):
    root = make_tree(tmp_path)
    result = run(
        capsys,
        {"sysfs_root": str(root / "sys"), "procfs_root": str(root / "proc"), "_ansible_check_mode": True},
    )
    assert result["changed"] is False
    assert len(result["topology"]["devices"]) == 1


def test_pci_ids_names_devices(tmp_path, capsys):
    root = make_tree(tmp_path)
    ids = tmp_path / "pci.ids"
    ids.write_text(
        "# comment\n8086  Intel Corporation\n\t1520  I350 Ethernet Controller Virtual Function\n"
        "\t1521  I350 Gigabit Network Connection\n\t\t8086 0001  Ethernet Server Adapter I350-T4\n"
        "10de  NVIDIA Corporation\n"
    )
    result = run(
        capsys,
        {"sysfs_root": str(root / "sys"), "procfs_root": str(root / "proc"), "pci_ids_path": str(ids)},
    )
    device = result["topology"]["devices"][0]
    assert device["vendor_name"] == "Intel Corporation"
    assert device["device_name"] == "I350 Gigabit Network Connection"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"sysfs_root": "/nonexistent/sys"}, "sysfs_root"),
        ({"procfs_root": "/nonexistent/proc"}, "procfs_root"),
        ({"pci_ids_path": "/nonexistent/pci.ids"}, "pci_ids_path"),
    ],
)
def test_bad_input_names_the_field(tmp_path, capsys, args, field):
    root = make_tree(tmp_path)
    full = {"sysfs_root": str(root / "sys"), "procfs_root": str(root / "proc")}
    full.update(args)
    result = run(capsys, full)
    assert result["failed"] is True
    assert result["msg"].startswith(field + ":")


def test_unknown_option_is_refused(tmp_path, capsys):
    result = run(capsys, {"sysfs": "/sys"})
    assert result["failed"] is True
    assert "sysfs" in result["msg"]


def test_a_captured_tree_leaves_the_addresses_unknown(tmp_path, capsys):
    root = make_tree(tmp_path)
    result = run(capsys, {"sysfs_root": str(root / "sys"), "procfs_root": str(root / "proc")})
    assert result["topology"]["netdev_addresses"] is None


def test_the_live_node_gives_the_rdma_nics_interface_addresses(tmp_path):
    # The RDMA NIC's interface is this machine's loopback: read for real, in this network namespace.
    topology = {
        "devices": [
            {"pci_address": "0000:1d:00.0", "kind": "rdma", "netdevs": [{"name": "lo"}, {"name": "nosuch0"}]},
            {"pci_address": "0000:1d:00.2", "kind": "rdma", "physfn": "0000:1d:00.0", "netdevs": [{"name": "vf0"}]},
            {"pci_address": "0000:60:00.0", "kind": "nic", "netdevs": [{"name": "eth9"}]},
        ]
    }
    assert topology_info.netdev_addresses(topology, "/sys") == {"lo": ["127.0.0.1/8"], "nosuch0": []}
    (tmp_path / "sys").symlink_to("/sys")
    assert topology_info.netdev_addresses(topology, str(tmp_path / "sys")) == {"lo": ["127.0.0.1/8"], "nosuch0": []}
    assert topology_info.netdev_addresses(topology, str(tmp_path)) is None


# -- the driver's record of the NICs it saw on the host ----------------------------------------


@pytest.fixture
def rails_node(tmp_path, monkeypatch):
    """Two RoCE NICs (driver_rails_node), probed as if the tree were this machine's /sys; nic A in a pod."""
    from ansible_collections.aligned.dra.tests.support.harnesses import driver_rails_node as r

    tree = r.build(tmp_path / "node")
    monkeypatch.setattr(topology_info, "LIVE_SYSFS", str(tree.sys.resolve()))
    r.to_pod(tree, r.NIC_A, "aldnic0", "mlx5_0")  # exclusive mode: a plain NIC without an interface
    return tree, r


def probe_live(capsys, tree, record) -> dict:
    args = {"sysfs_root": str(tree.sys), "procfs_root": str(tree.proc), "rails_record": str(record)}
    return run(capsys, args)


def test_the_drivers_record_reads_a_nic_in_a_pod_as_the_driver_saw_it(rails_node, tmp_path, capsys, monkeypatch):
    tree, r = rails_node
    record = tmp_path / "rails-nics.json"
    nics = {
        r.NIC_A: {"rdma": True, "netdevs": ["aldnic0"], "addresses": {"aldnic0": ["192.168.128.5/21"]}},
        r.NIC_B: {"rdma": True, "netdevs": ["aldnic1"]},
    }
    record.write_text(json.dumps({"version": 1, "node": "node-a", "nics": nics}))
    topology = probe_live(capsys, tree, record)["topology"]
    devices = {d["pci_address"]: d for d in topology["devices"]}
    assert devices[r.NIC_A]["kind"] == "rdma"
    assert devices[r.NIC_A]["netdevs"] == [{"name": "aldnic0"}]
    assert devices[r.NIC_A]["out_of_view"] == {"kind": "nic", "netdevs": []}
    assert [bdf for bdf, d in devices.items() if "out_of_view" in d] == [r.NIC_A]
    assert topology["netdev_addresses"]["aldnic0"] == ["192.168.128.5/21"]
    rule = rails.check_rule({"by": "pci_order", "count": 2})
    result = rails.assign(topology, rule)
    assert (result["rails"], result["problems"]) == ({r.NIC_A: 0, r.VF_A: 0, r.NIC_B: 1}, [])
    # a captured tree is not this machine's: the record is not read for it
    monkeypatch.setattr(topology_info, "LIVE_SYSFS", "/sys")
    captured = probe_live(capsys, tree, record)["topology"]
    assert [d for d in captured["devices"] if d["pci_address"] == r.NIC_A][0]["kind"] == "nic"


@pytest.mark.parametrize("content", ["{", json.dumps({"version": 7}), "directory"])
def test_a_damaged_record_is_a_warning_and_the_nics_are_read_as_they_are(rails_node, tmp_path, capsys, content):
    tree, r = rails_node
    record = tmp_path / "rails-nics.json"
    if content == "directory":
        record.mkdir()
    else:
        record.write_text(content)
    result = probe_live(capsys, tree, record)
    assert not result.get("failed")
    topology = result["topology"]
    assert [d["kind"] for d in topology["devices"] if d["pci_address"] == r.NIC_A] == ["nic"]
    (warning,) = [w for w in topology["warnings"] if "rails record" in w]
    assert warning.startswith(f"rails record {record} ")
    assert "read as the host sees them" in warning


def test_no_record_is_no_warning(rails_node, tmp_path, capsys):
    tree, r = rails_node
    topology = probe_live(capsys, tree, tmp_path / "absent.json")["topology"]
    assert not [w for w in topology["warnings"] if "rails record" in w]
    assert rails.assign(topology, rails.check_rule({"by": "pci_order"}))["rails"] == {r.NIC_B: 0}


# -- each NVIDIA GPU's MIG state (node/probe/gpu_mig; its own tests beside it) ------------------


@pytest.mark.parametrize("mig", [True, False])
def test_the_live_nodes_nvidia_gpus_have_a_mig_entry_unless_mig_is_off(capsys, monkeypatch, mig):
    from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize
    from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

    tree = materialize("dgx-h100", Path(__file__).resolve().parents[4] / ".cache" / "sysfs")
    monkeypatch.setattr(topology_info, "LIVE_SYSFS", str((tree / "sys").resolve()))
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(library=False))  # nvidia-ml-py, on a node without a driver
    args = {"sysfs_root": str(tree / "sys"), "procfs_root": str(tree / "proc"), "mig": mig}
    devices = run(capsys, args)["topology"]["devices"]
    entries = [d["mig"] for d in devices if "mig" in d]
    expected = (
        [{"readable": False, "reason": "nvmlInit: NVML Shared Library Not Found (NVML error 12)"}] * 8 if mig else []
    )
    assert entries == expected
