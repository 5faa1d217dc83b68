# SPDX-License-Identifier: Apache-2.0
"""The health table: causes and their taint effects, AER baselines and hold, gone devices, sysfs reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aligned_dra_driver.devices import health, pcihealth
from aligned_dra_driver.devices import inventory as driver_inventory
from aligned_dra_driver.devices.inventory import Inventory

from ansible_collections.aligned.dra.tests.support.node_side import sysfs_builder

BDF = "0000:19:00.0"
NAME = "nic-0000-19-00-0"


def topo(**extra) -> dict:
    base = {
        "pci_address": BDF,
        "driver": "mlx5_core",
        "netdevs": [{"name": "ens1", "operstate": "up"}],
        "rdma_devices": ["mlx5_0"],
    }
    base.update(extra)
    return base


RDMA_UP = {"mlx5_0": {"ports": [{"port": 1, "state": "ACTIVE"}]}}


def inventory(device_topo: dict | None, rdma: dict | None = None) -> Inventory:
    published = {"name": NAME, "attributes": {"dra.aligned.dev/kind": {"string": "nic"}}}
    if device_topo is None:
        return Inventory([], {}, rdma or RDMA_UP, False)
    return Inventory([published], {NAME: device_topo}, RDMA_UP if rdma is None else rdma, False)


@pytest.mark.parametrize(
    ("device", "rdma", "responds", "aer", "cause", "message"),
    [
        (topo(), RDMA_UP, True, "", "", "ok"),
        (None, RDMA_UP, None, "", "gone", "no longer present on the node"),
        (topo(driver=None), RDMA_UP, False, "", "not-responding", f"{BDF}: config space reads all ones"),
        (topo(driver=None), RDMA_UP, None, "", "no-driver", f"{BDF}: no kernel driver bound"),
        (
            topo(),
            {"mlx5_0": {"ports": [{"port": 1, "state": "DOWN"}]}},
            True,
            "",
            "rdma-port-down",
            "mlx5_0 port 1: DOWN",
        ),  # fmt: skip
        (topo(), RDMA_UP, True, "1 fatal AER error(s)", "aer-fatal", f"{BDF}: 1 fatal AER error(s)"),
    ],
)
def test_each_check_names_its_cause(device, rdma, responds, aer, cause, message):
    found_cause, found_message = health.check(device, rdma, responds, aer)
    assert found_cause == cause
    assert found_message.startswith(message)


def test_a_link_is_down_only_when_it_is_up_without_carrier(tmp_path):
    net = tmp_path / "class" / "net" / "ens1"
    net.mkdir(parents=True)
    (net / "flags").write_text("0x1002\n")  # nobody brought it up: not a fault
    assert pcihealth.carrier_lost(str(tmp_path), "ens1") is None
    (net / "flags").write_text("0x1003\n")
    (net / "carrier").write_text("1\n")
    assert pcihealth.carrier_lost(str(tmp_path), "ens1") is False
    monitor = health.HealthMonitor(sysfs_root=str(tmp_path))
    monitor.update(inventory(topo()))
    assert monitor.snapshot()[NAME].healthy
    (net / "carrier").write_text("0\n")
    monitor.update(inventory(topo()))
    entry = monitor.snapshot()[NAME]
    assert (entry.cause, entry.message) == ("link-down", "ens1: link down (up, no carrier)")
    assert pcihealth.carrier_lost(str(tmp_path), "gone0") is None


def test_every_cause_has_an_effect_that_the_api_accepts():
    assert set(health.CAUSES.values()) <= {"NoSchedule", "NoExecute"}
    assert health.CAUSES["gone"] == health.CAUSES["not-responding"] == "NoExecute"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def function_dir(root: Path) -> Path:
    path = root / "bus" / "pci" / "devices" / BDF
    path.mkdir(parents=True, exist_ok=True)
    return path


def aer_text(total: int) -> str:
    return f"Undefined 0\nDLP {total}\nTOTAL_ERR_FATAL {total}\n"


def test_aer_growth_taints_for_the_hold_and_the_start_count_is_the_baseline(tmp_path):
    directory = function_dir(tmp_path)
    (directory / "aer_dev_fatal").write_text(aer_text(3))  # errors from before the start
    clock = Clock()
    monitor = health.HealthMonitor(sysfs_root=str(tmp_path), aer_hold=60, clock=clock)
    monitor.update(inventory(topo()))
    assert monitor.snapshot()[NAME].healthy
    (directory / "aer_dev_fatal").write_text(aer_text(4))
    clock.now += 10
    assert monitor.update(inventory(topo())) is True
    entry = monitor.snapshot()[NAME]
    assert (entry.healthy, entry.cause, entry.cause_since) == (False, "aer-fatal", clock.now)
    assert "4 fatal AER error(s)" in entry.message
    clock.now += 30
    assert monitor.update(inventory(topo())) is False  # same cause: no change for the stream
    clock.now += 31  # 61 s after the rise, with no new error
    assert monitor.update(inventory(topo())) is True
    assert monitor.snapshot()[NAME].healthy


def test_a_config_space_of_all_ones_is_not_responding_unless_suspended(tmp_path):
    directory = function_dir(tmp_path)
    (directory / "config").write_bytes(b"\xb3\x15\x21\x10" + bytes(60))
    assert pcihealth.responds(str(tmp_path), BDF) is True
    (directory / "config").write_bytes(b"\xff" * 64)
    assert pcihealth.responds(str(tmp_path), BDF) is False
    # a VF: vendor and device ID read FFFFh by the SR-IOV specification, the rest of its header answers
    vf_header = b"\xff\xff\xff\xff\x04\x00\x10\x00" + bytes([0, 0, 0x80, 0x02]) + bytes(52)
    (directory / "config").write_bytes(vf_header)
    assert pcihealth.responds(str(tmp_path), BDF) is True
    (directory / "config").write_bytes(b"\xff" * 8)  # a header cut short says nothing
    assert pcihealth.responds(str(tmp_path), BDF) is None
    (directory / "power").mkdir()
    (directory / "power" / "runtime_status").write_text("suspended\n")
    assert pcihealth.responds(str(tmp_path), BDF) is None  # a read would wake it: not read
    assert pcihealth.responds(str(tmp_path), "0000:99:00.0") is None


@pytest.mark.parametrize(
    ("text", "count"),
    [(aer_text(7), 7), ("Undefined 1\nDLP 2\n", 3), ("garbage\n", None), ("", None)],
)
def test_aer_fatal_count(tmp_path, text, count):
    (function_dir(tmp_path) / "aer_dev_fatal").write_text(text)
    assert pcihealth.aer_fatal_count(str(tmp_path), BDF) == count


def test_taints_follow_the_table_and_gone_devices_keep_their_last_form():
    clock = Clock()
    monitor = health.HealthMonitor(clock=clock)
    monitor.update(inventory(topo()))
    assert monitor.tainted_devices(inventory(topo()), "dra.aligned.dev") == inventory(topo()).devices
    down = inventory(topo(), {"mlx5_0": {"ports": [{"port": 1, "state": "DOWN"}]}})
    monitor.update(down)
    (device,) = monitor.tainted_devices(down, "dra.aligned.dev")
    assert device["taints"] == [
        {
            "key": "dra.aligned.dev/unhealthy",
            "value": "rdma-port-down",
            "effect": "NoSchedule",
            "timeAdded": health.rfc3339(clock.now),
        }
    ]
    assert "taints" not in down.devices[0]  # the scan's own devices are never changed
    clock.now += 5
    monitor.update(inventory(None))
    (device,) = monitor.tainted_devices(inventory(None), "other.example.com")
    assert device["name"] == NAME and device["attributes"] == down.devices[0]["attributes"]
    assert device["taints"][0]["key"] == "other.example.com/unhealthy"
    assert device["taints"][0]["value"] == "gone" and device["taints"][0]["effect"] == "NoExecute"
    assert device["taints"][0]["timeAdded"] == health.rfc3339(clock.now)
    assert monitor.unhealthy() == 1
    monitor.update(inventory(topo()))
    assert monitor.tainted_devices(inventory(topo()), "dra.aligned.dev") == inventory(topo()).devices
    assert monitor.unhealthy() == 0


def test_the_metrics_read_the_table():
    from aligned_dra_driver.usage.metrics import Metrics

    monitor = health.HealthMonitor()
    metrics = Metrics()
    metrics.watch_health(monitor, "dra.aligned.dev")
    monitor.update(inventory(topo(driver=None)))
    text = metrics.render().decode()
    assert f'aligned_dra_device_unhealthy{{cause="no-driver",device="{NAME}",effect="NoSchedule"}} 1.0' in text
    assert "aligned_dra_unhealthy_devices 1.0" in text
    monitor.update(inventory(topo()))
    text = metrics.render().decode()
    assert "aligned_dra_device_unhealthy{" not in text and "aligned_dra_unhealthy_devices 0.0" in text


def test_a_gone_device_leaves_the_slice_after_the_grace_unless_a_claim_holds_it():
    clock = Clock()
    monitor = health.HealthMonitor(clock=clock)
    monitor.update(inventory(topo()))
    monitor.update(inventory(None))
    assert [d["name"] for d in monitor.tainted_devices(inventory(None), "dra.aligned.dev")] == [NAME]
    clock.now += health.GONE_GRACE
    assert monitor.tainted_devices(inventory(None), "dra.aligned.dev") == []
    held = monitor.tainted_devices(inventory(None), "dra.aligned.dev", in_use={NAME})
    assert [d["taints"][0]["value"] for d in held] == ["gone"]
    assert not monitor.snapshot()[NAME].healthy  # the health stream still says so


def test_a_device_still_on_the_bus_but_not_published_is_not_gone(tmp_path):
    """RDMA exclusive mode: the pod's NIC leaves the host's scan, its PCI function stays; no eviction."""
    function = tmp_path / "bus" / "pci" / "devices" / BDF
    function.mkdir(parents=True)
    monitor = health.HealthMonitor(sysfs_root=str(tmp_path))
    monitor.update(inventory(topo()))
    monitor.update(inventory(None))
    entry = monitor.snapshot()[NAME]
    assert entry.healthy and entry.cause == ""
    assert "not published by this scan" in entry.message
    held = monitor.tainted_devices(inventory(None), "aligned.dev", in_use={NAME})
    assert [d["name"] for d in held] == [NAME] and "taints" not in held[0]
    assert monitor.tainted_devices(inventory(None), "aligned.dev") == []  # not held: it simply leaves the slice
    function.rmdir()  # now it is off the bus
    monitor.update(inventory(None))
    entry = monitor.snapshot()[NAME]
    assert (entry.cause, entry.healthy) == ("gone", False)
    (held,) = monitor.tainted_devices(inventory(None), "aligned.dev", in_use={NAME})
    assert held["taints"][0]["effect"] == "NoExecute"


def dgx_with_vfs(root: Path, vfs_per_pf: int = 4) -> Path:
    """The DGX H100 layout with ``vfs_per_pf`` VFs on each ConnectX-7 PF, built as the kernel shows it."""
    spec = sysfs_builder.load_layout("dgx-h100")
    sriov = {"totalvfs": 16, "numvfs": vfs_per_pf, "vf_device": 0x101E, "vf_driver": "mlx5_core"}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("vendor") == 0x15B3 and node.get("class") == 0x020700:
                node["sriov"] = sriov
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec["hostbridges"])
    sysfs_builder.build(spec, root)
    return root / "sys"


def test_a_healthy_sriov_node_has_no_tainted_device(tmp_path):
    """VFs read FFFFh IDs on a healthy node: none of them is "not responding"; one whose header is gone is."""
    sys_root = dgx_with_vfs(tmp_path)
    opts = driver_inventory.Options(node_name="dgx", sysfs_root=str(sys_root), procfs_root=str(tmp_path / "proc"))
    scanned = driver_inventory.scan(opts)
    vfs = {d["name"]: t for d, t in ((d, scanned.by_name[d["name"]]) for d in scanned.devices) if t.get("physfn")}
    assert len(vfs) == 8 * 4
    vf_bdf = next(iter(vfs.values()))["pci_address"]
    assert (sys_root / "bus/pci/devices" / vf_bdf / "config").read_bytes()[:4] == b"\xff" * 4  # as on hardware
    monitor = health.HealthMonitor(sysfs_root=str(sys_root))
    monitor.update(scanned)
    tainted = [d["name"] for d in monitor.tainted_devices(scanned, "dra.aligned.dev") if d.get("taints")]
    assert tainted == []

    gone_name, gone = sorted(vfs.items())[5]
    config = sys_root / "bus/pci/devices" / gone["pci_address"] / "config"
    config.write_bytes(b"\xff" * len(config.read_bytes()))
    monitor.update(scanned)
    tainted = {d["name"]: d["taints"] for d in monitor.tainted_devices(scanned, "dra.aligned.dev") if d.get("taints")}
    assert list(tainted) == [gone_name]
    assert tainted[gone_name][0]["effect"] == "NoExecute" and tainted[gone_name][0]["value"] == "not-responding"


def test_a_lost_or_xid_failing_gpu_taints_its_mig_devices_too():
    """NVML's signals and the PCI checks reach a MIG device through its parent GPU's scan entry."""
    bus, whole = "0000:18:00.0", "gpu-0000-18-00-0"
    names = [whole, f"{whole}-mig-1g-5gb-0", f"{whole}-mig-3g-20gb-4"]
    gpu = {"pci_address": bus, "driver": "nvidia", "vendor_id": "0x10de"}
    published = Inventory([{"name": n} for n in names], dict.fromkeys(names, gpu), {}, False)
    now = [1000.0]
    monitor = health.HealthMonitor(aer_hold=600, clock=lambda: now[0])

    def causes(inventory=published):
        monitor.update(inventory)
        return {name: entry.cause for name, entry in monitor.snapshot().items()}

    assert causes() == dict.fromkeys(names, "")
    monitor.gpu_signal(bus, "gpu-lost", "NVML: GPU is lost")
    assert causes() == dict.fromkeys(names, "gpu-lost")
    taint = monitor.taint(monitor.snapshot()[names[1]], "dra.aligned.dev")
    assert (taint["value"], taint["effect"]) == ("gpu-lost", "NoExecute")
    monitor.gpu_signal(bus)
    assert causes() == dict.fromkeys(names, "")
    monitor.gpu_signal(bus, "xid", "XID 79 (fell off the bus)")
    assert causes() == dict.fromkeys(names, "xid")
    assert monitor.snapshot()[names[2]].message == f"{bus}: XID 79 (fell off the bus)"
    now[0] += 600  # an XID taints for the hold, as a fatal AER error does
    assert causes() == dict.fromkeys(names, "")
    monitor.gpu_signal(bus, "xid", "XID 48")
    assert causes(Inventory([], {}, {}, False)) == dict.fromkeys(names, "gone")  # a gone GPU: gone comes first
