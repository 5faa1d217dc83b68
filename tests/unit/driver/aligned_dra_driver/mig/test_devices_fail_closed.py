# SPDX-License-Identifier: Apache-2.0
"""The MIG scan fails closed (mig/devices.MigScanner): a selected GPU NVML cannot read, or whose state the device
model refuses, keeps what was last published for it or is withdrawn, never published whole in doubt; a warning
each time that changes, ``aligned_dra_mig_unreadable_gpus`` counting it; a scan reads a GPU under the lock
Prepare and Unprepare hold; an Ampere GPU whose MIG mode went off is not published with its cached partitions."""

from __future__ import annotations

import logging
import threading

import pytest
from aligned_dra_driver.collection import dra_mig
from aligned_dra_driver.devices.inventory import Options
from aligned_dra_driver.kubelet.driver import Driver
from aligned_dra_driver.mig import devices as mig_devices
from aligned_dra_driver.usage.metrics import Metrics

A100, H100, L40S = "0000:18:00.0", "0000:2a:00.0", "0000:3b:00.0"
NIC = {"name": "nic-0000-99-00-0", "attributes": {"dra.aligned.dev/kind": {"string": "nic"}}}
A100_NAME, H100_NAME, L40S_NAME = "gpu-0000-18-00-0", "gpu-0000-2a-00-0", "gpu-0000-3b-00-0"


def gpu(bus: str, model: str) -> dict:
    attributes = {
        "resource.kubernetes.io/pciBusID": {"string": bus},
        "dra.aligned.dev/kind": {"string": "gpu"},
        "dra.aligned.dev/vendorID": {"string": "0x10de"},
        "dra.aligned.dev/model": {"string": model},
    }
    return {"name": "gpu-" + bus.replace(":", "-").replace(".", "-"), "attributes": attributes}


def devices() -> list[dict]:
    return [gpu(A100, "A100"), gpu(H100, "H100"), gpu(L40S, "L40S"), NIC]


def names(published: list[dict]) -> list[str]:
    return [d["name"] for d in published]


def scanner(tmp_path, nvml, mode: str, **kwargs) -> mig_devices.MigScanner:
    return mig_devices.MigScanner(mode, None, str(tmp_path), loader=lambda: nvml, **kwargs)


def of(published: list[dict], gpu_name: str) -> list[str]:
    return [n for n in names(published) if n == gpu_name or n.startswith(f"{gpu_name}-mig-")]


def unreadable(metrics: Metrics, cause: str = "nvml") -> float:
    return metrics.registry.get_sample_value("aligned_dra_mig_unreadable_gpus", {"cause": cause})


def said(caplog, text: str) -> int:
    return sum(text in record.getMessage() for record in caplog.records)


def test_a_static_gpu_nvml_cannot_read_keeps_its_devices_until_the_next_good_read(tmp_path, scan_nvml, caplog):
    caplog.set_level(logging.INFO, logger=mig_devices.LOG.name)
    scan_nvml.enable_mig(A100)
    scan_nvml.create(A100, "3g.20gb", start=4)
    metrics = Metrics()
    mig = scanner(tmp_path, scan_nvml, "static", metrics=metrics)
    first, _sets = mig.apply(devices())
    assert of(first, A100_NAME) == [f"{A100_NAME}-mig-3g-20gb-4"]
    scan_nvml.create(A100, "1g.5gb", start=0)  # a change NVML cannot tell while it fails
    scan_nvml.inject("nvmlDeviceGetGpuInstances", scan_nvml.NVML_ERROR_UNKNOWN, times=None, bus_id=A100)
    for _scan in range(3):
        kept, _sets = mig.apply(devices())
        assert kept == first  # never the A100 whole, never half a read
    assert said(caplog, f"GPU {A100} keeps what was last published") == 1  # once per change, not per scan
    assert unreadable(metrics) == 1 and unreadable(metrics, "device-model") == 0
    assert mig.unreadable[A100][1].startswith("NVML cannot read it: nvmlDeviceGetGpuInstances")
    scan_nvml.clear_faults()
    again, _sets = mig.apply(devices())
    assert of(again, A100_NAME) == [f"{A100_NAME}-mig-1g-5gb-0", f"{A100_NAME}-mig-3g-20gb-4"]
    assert unreadable(metrics) == 0 and mig.unreadable == {}
    assert said(caplog, f"GPU {A100} is read again") == 1
    scan_nvml.inject("nvmlDeviceGetMigMode", scan_nvml.NVML_ERROR_GPU_IS_LOST, times=None, bus_id=A100)
    mig.apply(devices())
    assert said(caplog, f"GPU {A100} keeps what was last published") == 2  # a new failure: said again


def test_a_dynamic_gpu_never_read_is_withdrawn_then_published_with_its_counters(tmp_path, scan_nvml, caplog):
    scan_nvml.enable_mig(H100)
    scan_nvml.inject("nvmlDeviceGetGpuInstanceProfileInfo", scan_nvml.NVML_ERROR_UNKNOWN, times=None, bus_id=H100)
    metrics = Metrics()
    mig = scanner(tmp_path, scan_nvml, "dynamic", metrics=metrics)
    published, sets = mig.apply(devices())
    assert of(published, H100_NAME) == [] and sets == []  # not the H100 whole without its counters: nothing
    assert H100_NAME not in mig.mig_gpus and unreadable(metrics) == 1
    assert said(caplog, f"GPU {H100} is withdrawn (never published since the start)") == 1
    scan_nvml.clear_faults()
    published, sets = mig.apply(devices())
    assert of(published, H100_NAME)[-1] == H100_NAME and len(of(published, H100_NAME)) > 20
    assert [s["name"] for s in sets] == [f"{H100_NAME}-counters"] and unreadable(metrics) == 0


def test_nvml_that_stops_working_keeps_every_gpu_as_last_published(tmp_path, scan_nvml):
    scan_nvml.enable_mig(H100)
    mig = scanner(tmp_path, scan_nvml, "dynamic")
    first = mig.apply(devices())
    scan_nvml.failing = True  # every call fails: a driver upgraded under the running process, a GPU fallen off
    assert mig.apply(devices()) == first
    assert set(mig.unreadable) == {A100, H100, L40S}  # the A100 and L40S keep their whole, as last published
    assert mig.mig_gpus == {H100_NAME}


def test_nvml_that_never_loads_withdraws_the_selected_gpus_until_it_loads(tmp_path, scan_nvml):
    loads = {"ok": False}

    def loader():
        if not loads["ok"]:
            raise ImportError("No module named 'pynvml'")
        return scan_nvml

    mig = mig_devices.MigScanner("static", None, str(tmp_path), loader=loader)
    published, _sets = mig.apply(devices())
    assert names(published) == ["nic-0000-99-00-0"]  # every NVIDIA GPU's MIG state is unknown: none published
    loads["ok"] = True
    assert names(mig.apply(devices())[0]) == names(devices())  # MIG mode off everywhere: whole, as without --mig


def test_a_gpu_the_device_model_refuses_is_withdrawn_or_kept_and_named(tmp_path, scan_nvml, caplog, monkeypatch):
    scan_nvml.enable_mig(A100)
    scan_nvml.create(A100, "7g.40gb", start=0)
    metrics = Metrics()
    mig = scanner(tmp_path, scan_nvml, "static", metrics=metrics)
    real = dra_mig.static_devices

    def refused(device, state):
        raise dra_mig.DeviceModelError(f"{device['name']}: MIG device names collide")

    monkeypatch.setattr(dra_mig, "static_devices", refused)
    published, _sets = mig.apply(devices())
    assert of(published, A100_NAME) == [] and unreadable(metrics, "device-model") == 1
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [A100 in r.getMessage() and "names collide" in r.getMessage() for r in errors] == [True]
    monkeypatch.setattr(dra_mig, "static_devices", real)
    good, _sets = mig.apply(devices())
    assert of(good, A100_NAME) == [f"{A100_NAME}-mig-7g-40gb-0"] and unreadable(metrics, "device-model") == 0
    monkeypatch.setattr(dra_mig, "static_devices", refused)
    assert mig.apply(devices())[0] == good


def test_an_ampere_gpu_whose_mig_mode_went_off_is_published_whole_not_with_its_cached_partitions(
    tmp_path, scan_nvml, caplog
):
    scan_nvml.enable_mig(A100)
    scan_nvml.enable_mig(H100)
    mig = scanner(tmp_path, scan_nvml, "dynamic")
    before, _sets = mig.apply(devices())
    assert len(of(before, A100_NAME)) > 10
    scan_nvml.nvmlInit()
    for bus in (A100, H100):
        scan_nvml.nvmlDeviceSetMigMode(scan_nvml.nvmlDeviceGetHandleByPciBusId(bus), 0)
    scan_nvml.reset(A100)  # the Ampere mode change applies at a reset
    published, sets = mig.apply(devices())
    assert of(published, A100_NAME) == [A100_NAME]  # whole, as without MIG: Prepare could not make a partition
    assert A100_NAME not in mig.mig_gpus and [s["name"] for s in sets] == [f"{H100_NAME}-counters"]
    assert of(published, H100_NAME) == of(before, H100_NAME)  # Hopper turns MIG mode on at Prepare: as before
    assert said(caplog, f"GPU {A100} (ampere) has MIG mode off and cannot turn it on without a GPU reset") == 1


def test_the_model_gets_the_live_architecture_and_mig_mode_with_the_cached_profiles(tmp_path, scan_nvml, monkeypatch):
    scan_nvml.enable_mig(A100)
    mig = scanner(tmp_path, scan_nvml, "dynamic")
    seen = []
    real = dra_mig.dynamic_devices
    monkeypatch.setattr(dra_mig, "dynamic_devices", lambda device, state: seen.append(state) or real(device, state))
    published, _sets = mig.apply(devices())
    (state,) = seen
    assert state["architecture"] == "ampere" and state["mig_mode"] == {"current": True, "pending": True}
    assert state["profiles"] and A100_NAME not in of(published, A100_NAME)  # MIG mode on, Ampere: no GPU whole


def test_a_scan_reads_a_gpu_only_after_the_prepare_holding_its_lock_is_done(tmp_path, scan_nvml):
    scan_nvml.enable_mig(A100)
    opts = Options(node_name="node-1", state_dir=str(tmp_path / "state"), cdi_dir=str(tmp_path / "cdi"), mig="static")
    driver = Driver(opts, None, Metrics())
    mig = opts.mig_scanner
    mig.loader = lambda: scan_nvml
    reached = threading.Event()
    real_lock = mig.lock

    def watched(pci):  # the driver's own lock, telling the test when the scan waits for it
        reached.set()
        return real_lock(pci)

    mig.lock = watched
    result: dict = {}
    with driver.mig.lock(A100):  # a Prepare of the A100 in progress
        scan = threading.Thread(target=lambda: result.update(out=mig.apply(devices())))
        scan.start()
        assert reached.wait(10)
        scan_nvml.create(A100, "2g.10gb", start=4)  # what that Prepare makes, before it lets go
        assert "out" not in result
    scan.join(10)
    assert of(result["out"][0], A100_NAME) == [f"{A100_NAME}-mig-2g-10gb-4"]


@pytest.mark.parametrize("mode", ["dynamic", "static"])
@pytest.mark.parametrize("error", ["NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_INVALID_ARGUMENT"])
def test_mig_mode_on_without_a_readable_profile_is_never_published_whole(tmp_path, scan_nvml, caplog, mode, error):
    scan_nvml.enable_mig(A100)  # Ampere too: the GPU whole could never be prepared, and its partition may be live
    scan_nvml.create(A100, "3g.20gb", start=4)
    scan_nvml.inject("nvmlDeviceGetGpuInstanceProfileInfo", getattr(scan_nvml, error), times=None, bus_id=A100)
    mig = scanner(tmp_path, scan_nvml, mode)
    published, sets = mig.apply(devices())
    assert of(published, A100_NAME) == [] and A100_NAME not in mig.mig_gpus  # withdrawn, never the whole
    assert mig.unreadable[A100][0] == "nvml" and "no MIG profile while MIG mode is on" in mig.unreadable[A100][1]
    assert said(caplog, f"GPU {A100} is withdrawn") == 1 and said(caplog, f"GPU {A100} has MIG mode off") == 0
    scan_nvml.clear_faults()
    first, _sets = mig.apply(devices())
    assert A100_NAME in mig.mig_gpus and A100_NAME not in names(first)
    scan_nvml.inject("nvmlDeviceGetGpuInstanceProfileInfo", getattr(scan_nvml, error), times=None, bus_id=A100)
    assert mig.apply(devices())[0] == first  # kept as last published
