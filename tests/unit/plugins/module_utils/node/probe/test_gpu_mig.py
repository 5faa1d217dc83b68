# SPDX-License-Identifier: Apache-2.0
"""node/probe/gpu_mig.py: each NVIDIA GPU's ``mig`` entry, from the fake NVML given in-process.

The entry is ``nvml_state.read_gpu``'s state less the device's own address, the processes and the
error, or ``{"readable": false, "reason"}`` where NVML cannot be read: the module is missing, NVML does
not start (no GPU driver), or it fails for one GPU (the reason is the reader's error). Other vendors' GPUs and VFs get no entry, and a node without
NVIDIA GPUs never loads the module.
"""

from __future__ import annotations

import sys

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state
from ansible_collections.aligned.dra.plugins.module_utils.node.probe import gpu_mig
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

A100, H100, L40S, GONE = "0000:18:00.0", "0000:2a:00.0", "0000:3b:00.0", "0000:4c:00.0"


def gpu(address: str, vendor: str = "0x10de", kind: str = "gpu", physfn: str | None = None) -> dict:
    return {"pci_address": address, "kind": kind, "vendor_id": vendor, "physfn": physfn}


@pytest.fixture
def nvml(tmp_path) -> FakeNvml:
    """An A100 in MIG mode with a 1g.5gb instance running a process, an H100 with MIG off, an L40S."""
    fake = FakeNvml(procfs=tmp_path / "proc")
    fake.add_gpu(A100, model="A100-SXM4-40GB")
    fake.add_gpu(H100, model="H100-SXM5-80GB")
    fake.add_gpu(L40S, model="L40S")
    fake.enable_mig(A100)
    gi = fake.create(A100, "1g.5gb", start=0)
    fake.run(A100, 4242, 1 << 30, gpu_instance=gi)
    return fake


def entries_of(devices: list[dict]) -> dict:
    return {d["pci_address"]: d["mig"] for d in devices if "mig" in d}


def test_each_nvidia_gpu_gets_its_state_less_its_address_and_processes(nvml):
    devices = [gpu(A100), gpu(H100), gpu(L40S)]
    gpu_mig.add_entries(devices, lambda: nvml)
    entries = entries_of(devices)
    nvml.nvmlInit()
    try:
        states = {address: nvml_state.read_gpu(nvml, address) for address in (A100, H100, L40S)}
    finally:
        nvml.nvmlShutdown()
    # what the entry leaves out is there to leave: the process on the A100's instance
    assert (states[A100]["processes"], states[A100]["instances"][0]["processes"]) == ([4242], [4242])
    for address, state in states.items():
        assert state["error"] is None
        left_out = ("pci_address", "processes", "error")
        expected = {"readable": True, **{k: v for k, v in state.items() if k not in left_out}}
        expected["instances"] = [{k: v for k, v in i.items() if k != "processes"} for i in state["instances"]]
        assert entries[address] == expected
    a100 = entries[A100]
    assert (a100["mig_capable"], a100["mig_mode"]) == (True, {"current": True, "pending": True})
    (instance,) = a100["instances"]
    assert (instance["profile"], instance["placement"]) == ("1g.5gb", {"start": 0, "size": 1})
    assert instance["uuid"].startswith("MIG-")
    assert "processes" not in instance and "processes" not in a100 and "pci_address" not in a100
    assert {p["name"] for p in a100["profiles"]} >= {"1g.5gb", "7g.40gb"}
    h100 = entries[H100]
    assert (h100["mig_capable"], h100["mig_mode"], h100["instances"]) == (
        True,
        {"current": False, "pending": False},
        [],
    )
    assert h100["profiles"] is None  # NVML offers no profile while MIG mode is off
    l40s = entries[L40S]
    assert (l40s["mig_capable"], l40s["mig_mode"]) == (False, None)


def test_nvml_starts_once_for_all_gpus_and_is_shut_down(nvml):
    devices = [gpu(A100), gpu(H100), gpu(L40S)]
    gpu_mig.add_entries(devices, lambda: nvml)
    assert nvml.calls.count("nvmlInit") == 1
    assert nvml.init_count == 0


def test_a_gpu_nvml_does_not_know_says_so_and_the_others_are_read(nvml):
    devices = [gpu(A100), gpu(GONE), gpu(H100)]
    gpu_mig.add_entries(devices, lambda: nvml)
    entries = entries_of(devices)
    assert entries[GONE] == {"readable": False, "reason": "nvmlDeviceGetHandleByPciBusId: Not Found (NVML error 6)"}
    assert entries[A100]["readable"] is True and entries[H100]["readable"] is True


def test_nvml_failing_after_its_start_makes_every_entry_unreadable(nvml):
    nvml.failing = True  # every call after nvmlInit: NVML_ERROR_UNKNOWN (a driver in trouble)
    devices = [gpu(A100), gpu(H100)]
    gpu_mig.add_entries(devices, lambda: nvml)
    reason = "nvmlDeviceGetHandleByPciBusId: Unknown Error (NVML error 999)"
    assert entries_of(devices) == dict.fromkeys((A100, H100), {"readable": False, "reason": reason})
    assert nvml.init_count == 0


def test_no_gpu_driver_is_said_on_every_nvidia_gpu():
    devices = [gpu(A100), gpu(H100)]
    gpu_mig.add_entries(devices, lambda: FakeNvml(library=False))
    reason = "nvmlInit: NVML Shared Library Not Found (NVML error 12)"
    assert entries_of(devices) == dict.fromkeys((A100, H100), {"readable": False, "reason": reason})


def test_no_nvidia_ml_py_is_said_on_every_nvidia_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    devices = [gpu(A100), gpu(H100)]
    gpu_mig.add_entries(devices)
    reason = f"nvidia-ml-py (module pynvml) is not installed for {sys.executable}"
    assert entries_of(devices) == dict.fromkeys((A100, H100), {"readable": False, "reason": reason})


def test_the_default_loader_takes_the_installed_module(monkeypatch, nvml):
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    assert gpu_mig.load_pynvml() is nvml
    devices = [gpu(A100)]
    gpu_mig.add_entries(devices)
    assert devices[0]["mig"]["readable"] is True


def test_other_vendors_gpus_and_vfs_get_no_entry_and_load_nothing():
    def loader():
        raise AssertionError("NVML loaded for a node without NVIDIA GPUs")

    devices = [
        gpu("0000:c1:00.0", vendor="0x1002", kind="accelerator"),  # AMD MI300X
        gpu("0000:03:00.0", vendor="0x1a03", kind="other"),  # a BMC's VGA
        gpu("0000:18:00.4", physfn=A100),  # an NVIDIA GPU's VF
        {"pci_address": "0000:1d:00.0", "kind": "rdma", "vendor_id": "0x15b3", "physfn": None},
    ]
    gpu_mig.add_entries(devices, loader)
    assert entries_of(devices) == {}


def test_an_nvidia_accelerator_is_read_too(nvml):
    devices = [gpu(A100, kind="accelerator"), gpu("0000:c1:00.0", vendor="0x1002")]
    gpu_mig.add_entries(devices, lambda: nvml)
    assert list(entries_of(devices)) == [A100]
