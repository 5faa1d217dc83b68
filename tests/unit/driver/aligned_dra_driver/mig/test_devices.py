# SPDX-License-Identifier: Apache-2.0
"""What the driver publishes with --mig (mig/devices.MigScanner, through inventory.scan) on a node of an A100 40GB,
an H100 80GB and an L40S behind the fake NVML."""

from __future__ import annotations

import json

import pytest
from aligned_dra_driver.cli import mig_gpus, parser
from aligned_dra_driver.collection import dra_mig
from aligned_dra_driver.devices.inventory import Options, scan
from aligned_dra_driver.mig import devices as mig_devices

from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

A100, H100, L40S = "0000:18:00.0", "0000:2a:00.0", "0000:3b:00.0"


def gpu(bus: str, model: str) -> dict:
    name = "gpu-" + bus.replace(":", "-").replace(".", "-")
    attributes = {
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:15"},
        "resource.kubernetes.io/pciBusID": {"string": bus},
        "dra.aligned.dev/kind": {"string": "gpu"},
        "dra.aligned.dev/vendorID": {"string": "0x10de"},
        "dra.aligned.dev/model": {"string": model},
        "dra.aligned.dev/uuid": {"string": f"GPU-{bus}"},
    }
    return {"name": name, "attributes": attributes, "capacity": {"memory": {"value": "80Gi"}}}


NIC = {"name": "nic-0000-99-00-0", "attributes": {"dra.aligned.dev/kind": {"string": "nic"}}}


def devices() -> list[dict]:
    return [gpu(A100, "A100"), gpu(H100, "H100"), gpu(L40S, "L40S"), NIC]


def names(published: list[dict]) -> list[str]:
    return [d["name"] for d in published]


def scanner(tmp_path, nvml, mode: str, **kwargs) -> mig_devices.MigScanner:
    return mig_devices.MigScanner(mode, kwargs.pop("gpus", None), str(tmp_path), loader=lambda: nvml, **kwargs)


def test_static_publishes_the_instances_and_leaves_gpus_with_mig_off_whole(tmp_path, scan_nvml):
    scan_nvml.enable_mig(A100)
    scan_nvml.create(A100, "3g.20gb", start=4)
    scan_nvml.create(A100, "4g.20gb", start=0)
    published, sets = scanner(tmp_path, scan_nvml, "static").apply(devices())
    assert names(published) == [
        "gpu-0000-18-00-0-mig-4g-20gb-0",
        "gpu-0000-18-00-0-mig-3g-20gb-4",
        "gpu-0000-2a-00-0",  # MIG mode off: whole
        "gpu-0000-3b-00-0",  # no MIG
        "nic-0000-99-00-0",
    ]
    assert sets == []
    assert all(d["attributes"]["dra.aligned.dev/migUUID"]["string"].startswith("MIG-") for d in published[:2])


def test_dynamic_publishes_a_counter_set_and_every_placement_and_keeps_the_profiles_for_mig_off(tmp_path, scan_nvml):
    scan_nvml.enable_mig(H100)
    mig = scanner(tmp_path, scan_nvml, "dynamic")
    published, sets = mig.apply(devices())
    h100 = [d for d in published if d["name"].startswith("gpu-0000-2a-00-0")]
    assert h100[-1]["name"] == "gpu-0000-2a-00-0" and len(h100) > 20
    assert [s["name"] for s in sets] == ["gpu-0000-2a-00-0-counters"]
    assert "gpu-0000-18-00-0" in names(published)  # Ampere, MIG off, never read: whole
    assert mig.mig_gpus == {"gpu-0000-2a-00-0"}
    # the GPU whole allocated: MIG mode off, NVML lists no profiles; the same devices are published
    handle = (scan_nvml.nvmlInit(), scan_nvml.nvmlDeviceGetHandleByPciBusId(H100))[1]
    assert scan_nvml.nvmlDeviceSetMigMode(handle, 0) == 0
    again, sets_again = mig.apply(devices())
    assert again == published and sets_again == sets
    # and by a driver started afresh, from the state directory
    fresh, _sets = scanner(tmp_path, scan_nvml, "dynamic").apply(devices())
    assert fresh == published
    cached = json.loads((tmp_path / mig_devices.PROFILES_FILE).read_text())
    assert list(cached) == ["GPU-" + scan_nvml.uuid_of(H100).removeprefix("GPU-")]


def test_dynamic_leaves_out_the_placements_a_kept_instance_holds_and_the_gpu_whole(tmp_path, scan_nvml):
    scan_nvml.enable_mig(H100)
    held = {H100: [(4, 4)]}
    published, _sets = scanner(tmp_path, scan_nvml, "dynamic", held=lambda: held).apply(devices())
    h100 = [d for d in published if d["name"].startswith("gpu-0000-2a-00-0")]
    assert "gpu-0000-2a-00-0" not in names(h100)
    for device in h100:
        start = device["attributes"]["dra.aligned.dev/placementStart"]["int"]
        size = device["attributes"]["dra.aligned.dev/placementSize"]["int"]
        assert start + size <= 4
    assert h100 and len(h100) < len(dra_mig.dynamic_devices(gpu(H100, "H100"), _state(scan_nvml, H100))) - 1


def _state(nvml: FakeNvml, bus: str) -> dict:
    from aligned_dra_driver.collection import mig_state

    nvml.nvmlInit()
    return mig_state.read_gpu(nvml, bus)


def test_static_layout_changes_wait_while_a_claim_holds_the_gpu(tmp_path, scan_nvml):
    scan_nvml.enable_mig(A100)
    scan_nvml.create(A100, "7g.40gb", start=0)
    busy = {A100}
    mig = scanner(tmp_path, scan_nvml, "static", busy=lambda pci: pci in busy)
    first, _sets = mig.apply(devices())
    scan_nvml.reset(A100)  # the role's new layout: the 7g goes (MIG mode stays on), a 1g comes
    scan_nvml.create(A100, "1g.5gb", start=6)
    assert mig.apply(devices())[0] == first  # the claim's GPU keeps its published layout
    busy.clear()
    assert "gpu-0000-18-00-0-mig-1g-5gb-6" in names(mig.apply(devices())[0])


def test_gpus_not_selected_stay_whole_and_selected_ones_nvml_never_loaded_for_are_withdrawn(tmp_path, scan_nvml):
    scan_nvml.enable_mig(A100)
    scan_nvml.create(A100, "1g.5gb", start=6)
    published, _sets = scanner(tmp_path, scan_nvml, "static", gpus=[H100]).apply(devices())
    assert names(published) == names(devices())

    def broken():
        raise ImportError("No module named 'pynvml'")

    mig = mig_devices.MigScanner("static", [A100], str(tmp_path), loader=broken)
    assert names(mig.apply(devices())[0]) == names(devices()[1:])  # the A100's state is unknown: not published
    assert mig.unreadable[A100][0] == "nvml" and "No module named 'pynvml'" in mig.unreadable[A100][1]


def test_a_mig_gpu_is_never_made_shareable_and_its_devices_stand_on_the_parents_topology_entry(
    tmp_path, scan_nvml, monkeypatch
):
    scan_nvml.enable_mig(A100)
    scan_nvml.create(A100, "1g.5gb", start=6)
    topo = {"devices": [{"pci_address": A100, "kind": "gpu"}, {"pci_address": H100, "kind": "gpu"}]}
    monkeypatch.setattr("aligned_dra_driver.devices.inventory.topology.probe", lambda *a: topo)
    monkeypatch.setattr(
        "aligned_dra_driver.devices.inventory.dra.devices_from_topology",
        lambda *a, **k: [gpu(A100, "A100"), gpu(H100, "H100")],
    )
    opts = Options(node_name="node-1", fractional_gpus=True, mig="static", sysfs_root=str(tmp_path))
    opts.mig_scanner = scanner(tmp_path, scan_nvml, "static")
    inventory = scan(opts)
    mig_device = inventory.devices[0]
    assert mig_device["name"] == "gpu-0000-18-00-0-mig-1g-5gb-6"
    assert "allowMultipleAllocations" not in mig_device
    assert inventory.by_name[mig_device["name"]]["pci_address"] == A100
    assert inventory.devices[1].get("allowMultipleAllocations") is True  # the H100 whole, not MIG: shared


@pytest.mark.parametrize(
    ("text", "expected"),
    [("all", None), ("ALL", None), ("0000:18:00.0", ["0000:18:00.0"]), ("0000:18:00.0, 0000:2A:00.0", [A100, H100])],
)
def test_mig_gpus_option(text, expected):
    assert mig_gpus(text) == expected
    args = parser().parse_args(["--mig", "dynamic", "--mig-gpus", text])
    assert args.mig == "dynamic" and args.mig_gpus == text


def test_a_bad_mig_gpus_is_refused_by_name():
    with pytest.raises(ValueError, match="'18:00' is no PCI address"):
        mig_gpus("0000:18:00.0,18:00")
