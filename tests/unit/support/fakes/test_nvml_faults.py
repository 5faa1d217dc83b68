# SPDX-License-Identifier: Apache-2.0
"""tests/support/fakes/nvml_faults.py: an NVML error injected per call, in-process and in a driver process's fake
(bound to the state file)."""

from __future__ import annotations

import json

import pynvml
import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

A100, H100 = "0000:18:00.0", "0000:2a:00.0"


@pytest.fixture
def fake(tmp_path):
    nvml = FakeNvml(procfs=tmp_path / "proc")
    nvml.add_gpu(A100, model="A100-SXM4-40GB")
    nvml.add_gpu(H100, model="H100-SXM5-80GB")
    nvml.enable_mig(H100)
    nvml.nvmlInit()
    return nvml


def code(call, *args):
    try:
        call(*args)
    except Exception as exc:
        assert "NVMLError" in [kind.__name__ for kind in type(exc).__mro__]
        return exc.value
    return 0


def test_an_error_fails_the_next_call_once_then_the_call_answers_again(fake):
    handle = fake.nvmlDeviceGetHandleByPciBusId(H100)
    fake.inject("nvmlDeviceGetMigMode", pynvml.NVML_ERROR_UNKNOWN)
    assert code(fake.nvmlDeviceGetMigMode, handle) == pynvml.NVML_ERROR_UNKNOWN
    assert fake.nvmlDeviceGetMigMode(handle) == [1, 1]
    assert fake.faults == []


def test_times_counts_the_calls_and_none_fails_every_call_until_cleared(fake):
    handle = fake.nvmlDeviceGetHandleByPciBusId(H100)
    fake.inject("nvmlDeviceGetUUID", pynvml.NVML_ERROR_TIMEOUT, times=2)
    assert [code(fake.nvmlDeviceGetUUID, handle) for _try in range(3)] == [pynvml.NVML_ERROR_TIMEOUT] * 2 + [0]
    fake.inject("nvmlDeviceGetUUID", pynvml.NVML_ERROR_GPU_IS_LOST, times=None)
    assert {code(fake.nvmlDeviceGetUUID, handle) for _try in range(5)} == {pynvml.NVML_ERROR_GPU_IS_LOST}
    fake.clear_faults()
    assert fake.nvmlDeviceGetUUID(handle) == fake.uuid_of(H100)


def test_an_error_on_one_gpu_spares_the_others_and_follows_its_handles_and_bus_id(fake):
    fake.inject("nvmlDeviceGetGpuInstances", pynvml.NVML_ERROR_UNKNOWN, times=None, bus_id="00000000:2A:00.0")
    fake.inject("nvmlDeviceGetHandleByPciBusId", pynvml.NVML_ERROR_NO_PERMISSION, bus_id=H100)
    assert code(fake.nvmlDeviceGetHandleByPciBusId, A100) == 0  # another GPU: not this fault
    assert code(fake.nvmlDeviceGetHandleByPciBusId, "0000:2A:00.0") == pynvml.NVML_ERROR_NO_PERMISSION
    entry = nvml_state.read_gpu(fake, H100)  # the reader: the failing call named, nothing taken for "none there"
    assert entry["error"].startswith("nvmlDeviceGetGpuInstances: ") and entry["instances"] is None
    fake.enable_mig(A100)
    assert nvml_state.read_gpu(fake, A100)["error"] is None


def test_only_calls_of_the_fake_and_counts_of_one_or_more_are_taken(fake):
    with pytest.raises(ValueError, match="no NVML call"):
        fake.inject("nvmlDeviceGetNoSuchThing", pynvml.NVML_ERROR_UNKNOWN)
    with pytest.raises(ValueError, match="times"):
        fake.inject("nvmlDeviceGetUUID", pynvml.NVML_ERROR_UNKNOWN, times=0)


def test_a_driver_process_fake_reads_the_faults_from_the_state_file_and_writes_back_what_is_left(tmp_path, fake):
    path = tmp_path / "nvml.json"
    fake.write_state(path)
    test_side, driver_side = FakeNvml.from_state_file(path), FakeNvml.from_state_file(path)
    driver_side.nvmlInit()
    handle = driver_side.nvmlDeviceGetHandleByPciBusId(H100)
    test_side.inject("nvmlDeviceGetMigMode", pynvml.NVML_ERROR_GPU_IS_LOST, times=2, bus_id=H100)
    assert code(driver_side.nvmlDeviceGetMigMode, handle) == pynvml.NVML_ERROR_GPU_IS_LOST
    assert json.loads(path.read_text())["faults"][0]["times"] == 1  # the count, written back for the test side
    assert code(driver_side.nvmlDeviceGetMigMode, handle) == pynvml.NVML_ERROR_GPU_IS_LOST
    assert json.loads(path.read_text())["faults"] == []
    assert driver_side.nvmlDeviceGetMigMode(handle) == [1, 1]
    test_side.inject("nvmlDeviceGetMigMode", pynvml.NVML_ERROR_UNKNOWN, times=None)
    assert code(driver_side.nvmlDeviceGetMigMode, handle) == pynvml.NVML_ERROR_UNKNOWN
    test_side.clear_faults()
    assert driver_side.nvmlDeviceGetMigMode(handle) == [1, 1]
