# SPDX-License-Identifier: Apache-2.0
"""The fake NVML's GPM calls answer as NVML does: support from Hopper on, two samples and the share of SMs busy
between them, per GPU and per GPU instance, and NVML's errors (the calls' names and parameters are pynvml's:
``test_nvml_mig``'s conformance tests cover every call of the fake)."""

from __future__ import annotations

import ctypes

import pynvml
import pytest

from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml, NVMLError
from ansible_collections.aligned.dra.tests.support.fakes.nvml_lab import A100, H100, L40S, three_gpus


@pytest.fixture
def nvml():
    return three_gpus()


def code(call, *args, **kwargs):
    with pytest.raises(NVMLError) as raised:
        call(*args, **kwargs)
    return raised.value.value


def sample(nvml, handle, gpu_instance=None):
    buffer = nvml.nvmlGpmSampleAlloc()
    if gpu_instance is None:
        nvml.nvmlGpmSampleGet(handle, buffer)
    else:
        nvml.nvmlGpmMigSampleGet(handle, gpu_instance, buffer)
    return buffer


def metrics(nvml, first, second, ids=(pynvml.NVML_GPM_METRIC_SM_UTIL,), version=None):
    request = nvml.c_nvmlGpmMetricsGet_t()
    request.version = nvml.NVML_GPM_METRICS_GET_VERSION if version is None else version
    request.numMetrics = len(ids)
    request.sample1, request.sample2 = first, second
    for index, metric in enumerate(ids):
        request.metrics[index].metricId = metric
    nvml.nvmlGpmMetricsGet(request)
    return [(request.metrics[i].nvmlReturn, round(request.metrics[i].value, 6)) for i in range(len(ids))]


def test_support_is_hopper_and_newer_and_sampling_before_it_is_not_supported(nvml):
    h100, a100, l40s = (nvml.nvmlDeviceGetHandleByPciBusId(b) for b in (H100, A100, L40S))
    assert [nvml.nvmlGpmQueryDeviceSupport(h).isSupportedDevice for h in (h100, a100, l40s)] == [1, 0, 0]
    assert nvml.nvmlGpmQueryDeviceSupport(h100).version == pynvml.NVML_GPM_SUPPORT_VERSION
    buffer = nvml.nvmlGpmSampleAlloc()
    for handle in (a100, l40s):
        assert code(nvml.nvmlGpmSampleGet, handle, buffer) == pynvml.NVML_ERROR_NOT_SUPPORTED
        assert code(nvml.nvmlGpmMigSampleGet, handle, 1, buffer) == pynvml.NVML_ERROR_NOT_SUPPORTED


def test_the_share_of_sms_busy_between_two_samples_of_a_gpu(nvml):
    handle = nvml.nvmlDeviceGetHandleByPciBusId(H100)
    first = sample(nvml, handle)
    nvml.gpm_elapse(H100, 10.0, 0.4)
    nvml.gpm_elapse(H100, 30.0, 0.8)
    second = sample(nvml, handle)
    # 10 s at 40 % and 30 s at 80 %: 70 % of the SMs busy on average; other metrics are not measured here
    answer = metrics(nvml, first, second, (pynvml.NVML_GPM_METRIC_SM_UTIL, pynvml.NVML_GPM_METRIC_SM_OCCUPANCY))
    assert answer == [(pynvml.NVML_SUCCESS, 70.0), (pynvml.NVML_ERROR_NOT_SUPPORTED, 0.0)]
    assert nvml.gpm_samples_held() == 2
    nvml.nvmlGpmSampleFree(first)
    nvml.nvmlGpmSampleFree(second)
    assert nvml.gpm_samples_held() == 0
    assert code(nvml.nvmlGpmSampleFree, first) == pynvml.NVML_ERROR_INVALID_ARGUMENT  # freed twice


def test_per_gpu_instance_and_the_gpu_whole_in_mig_mode(nvml):
    nvml.enable_mig(H100)
    big, small = nvml.create(H100, "3g.40gb", start=0), nvml.create(H100, "1g.10gb", start=6)
    handle = nvml.nvmlDeviceGetHandleByPciBusId(H100)
    firsts = [sample(nvml, handle, big), sample(nvml, handle, small), sample(nvml, handle)]
    nvml.gpm_elapse(H100, 20.0, {big: 0.5})
    seconds = [sample(nvml, handle, big), sample(nvml, handle, small), sample(nvml, handle)]
    found = [metrics(nvml, a, b)[0][1] for a, b in zip(firsts, seconds, strict=True)]
    # the 3g's SMs half busy, the 1g's idle; the GPU whole: 60 of 132 SMs at 50 %
    assert found == [50.0, 0.0, round(0.5 * 60 / 132 * 100, 6)]
    # a MIG device's handle samples its instance too
    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, 0)
    assert nvml.nvmlDeviceGetGpuInstanceId(mig) == big
    one = sample(nvml, mig)
    nvml.gpm_elapse(H100, 10.0, {big: 0.25})
    assert metrics(nvml, one, sample(nvml, handle, big)) == [(0, 25.0)]


def test_nvmls_errors(nvml):
    handle = nvml.nvmlDeviceGetHandleByPciBusId(H100)
    buffer = nvml.nvmlGpmSampleAlloc()
    # MIG mode off: no GPU instance to sample; on: an ID of no instance is not found
    assert code(nvml.nvmlGpmMigSampleGet, handle, 1, buffer) == pynvml.NVML_ERROR_NOT_SUPPORTED
    nvml.enable_mig(H100)
    handle = nvml.nvmlDeviceGetHandleByPciBusId(H100)
    assert code(nvml.nvmlGpmMigSampleGet, handle, 3, buffer) == pynvml.NVML_ERROR_NOT_FOUND
    gi = nvml.create(H100, "1g.10gb", start=0)
    mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, 0)
    assert code(nvml.nvmlGpmMigSampleGet, mig, gi, buffer) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert code(nvml.nvmlGpmQueryDeviceSupport, mig) == pynvml.NVML_ERROR_NOT_SUPPORTED
    # a sample never taken, two samples of different scopes, or no time between two samples
    taken = sample(nvml, handle, gi)
    assert code(metrics, nvml, buffer, taken) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert code(metrics, nvml, taken, sample(nvml, handle, gi)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    nvml.gpm_elapse(H100, 1.0, {gi: 1.0})
    assert code(metrics, nvml, taken, sample(nvml, handle)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    later = sample(nvml, handle, gi)
    assert code(metrics, nvml, taken, later, version=2) == pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    assert code(metrics, nvml, taken, later, ids=()) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert metrics(nvml, taken, later, ids=(0,)) == [(pynvml.NVML_ERROR_INVALID_ARGUMENT, 0.0)]
    # an instance destroyed and made again under the same ID is another scope
    instance = nvml.nvmlDeviceGetGpuInstanceById(handle, gi)
    count, cis = ctypes.c_uint(), (nvml.c_nvmlComputeInstance_t * 1)()
    nvml.nvmlGpuInstanceGetComputeInstances(instance, 0, cis, ctypes.byref(count))
    nvml.nvmlComputeInstanceDestroy(cis[0])
    nvml.nvmlGpuInstanceDestroy(instance)
    assert nvml.create(H100, "1g.10gb", start=0) == gi
    nvml.gpm_elapse(H100, 1.0, {gi: 1.0})
    assert code(metrics, nvml, later, sample(nvml, handle, gi)) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    # a freed buffer, a GPU gone, NVML not initialized
    nvml.nvmlGpmSampleFree(buffer)
    assert code(nvml.nvmlGpmSampleGet, handle, buffer) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    other = nvml.nvmlGpmSampleAlloc()
    nvml.remove_gpu(H100)
    assert code(nvml.nvmlGpmSampleGet, handle, other) == pynvml.NVML_ERROR_GPU_IS_LOST
    nvml.nvmlShutdown()
    assert code(nvml.nvmlGpmSampleAlloc) == pynvml.NVML_ERROR_UNINITIALIZED


def test_the_test_side_refuses_what_cannot_be(nvml):
    with pytest.raises(ValueError, match="forward"):
        nvml.gpm_elapse(H100, 0, 0.5)
    with pytest.raises(ValueError, match="no share"):
        nvml.gpm_elapse(H100, 1.0, 1.5)
    nvml.enable_mig(H100)
    with pytest.raises(ValueError, match="MIG mode"):
        nvml.gpm_elapse(H100, 1.0, 0.5)
    with pytest.raises(ValueError, match="no GPU instance 9"):
        nvml.gpm_elapse(H100, 1.0, {9: 0.5})


def test_a_driver_process_fake_reads_the_counters_the_test_wrote(tmp_path, nvml):
    state = tmp_path / "nvml.json"
    nvml.write_state(state)
    driver = FakeNvml.from_state_file(state)
    driver.nvmlInit()
    handle = driver.nvmlDeviceGetHandleByPciBusId(H100)
    first = sample(driver, handle)
    test_side = FakeNvml.from_state_file(state)
    test_side.gpm_elapse(H100, 15.0, 0.2)
    assert metrics(driver, first, sample(driver, handle)) == [(0, 20.0)]
