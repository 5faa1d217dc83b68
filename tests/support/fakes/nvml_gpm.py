# SPDX-License-Identifier: Apache-2.0
"""FAKE NVML, its GPM part (GPU performance monitoring), for the tests (never shipped): mixed into
``nvml.FakeNvml``.

Test-side API::

    nvml.add_gpu("0000:2a:00.0", model="H100-SXM5-80GB")
    nvml.gpm_elapse("0000:2a:00.0", 15.0, 0.4)          # 15 s pass on the GPU with 40 % of its SMs busy
    nvml.enable_mig("0000:2a:00.0"); gi = nvml.create("0000:2a:00.0", "3g.40gb", start=0)
    nvml.gpm_elapse("0000:2a:00.0", 15.0, {gi: 0.5})     # MIG mode: per GPU instance (those not named: idle)
    nvml.gpm_samples_held()                              # samples allocated and not freed (a leak shows here)

From code under test, as pynvml is called: ``nvmlGpmQueryDeviceSupport(handle).isSupportedDevice``;
``s = nvmlGpmSampleAlloc()``; ``nvmlGpmSampleGet(handle, s)`` or ``nvmlGpmMigSampleGet(handle, gpu_instance_id,
s)``; later a second sample; ``m = c_nvmlGpmMetricsGet_t()`` with ``version = NVML_GPM_METRICS_GET_VERSION``,
``numMetrics``, ``sample1``, ``sample2`` and ``metrics[i].metricId``; ``nvmlGpmMetricsGet(m)`` fills each
``metrics[i].value`` and ``metrics[i].nvmlReturn``; ``nvmlGpmSampleFree(s)``.

As NVML answers (its reference: GPM is "for Hopper or newer fully supported devices"):

- ``nvmlGpmQueryDeviceSupport`` succeeds on every GPU and says ``isSupportedDevice`` 1 on Hopper and newer, 0
  before (the answer tools such as DCGM's and gpud read); a MIG device's handle: NOT_SUPPORTED;
- ``nvmlGpmSampleGet`` and ``nvmlGpmMigSampleGet`` before Hopper: NOT_SUPPORTED. ``nvmlGpmSampleGet`` takes a
  GPU's handle (the whole GPU, in MIG mode too) or a MIG device's (its GPU instance);
  ``nvmlGpmMigSampleGet`` takes a GPU's handle and a GPU instance ID: a MIG device's handle, or a GPU with MIG
  mode off, NOT_SUPPORTED (the fake's choice where NVML's reference says only "nonzero on error"), an ID of no
  instance NOT_FOUND (as ``nvmlDeviceGetGpuInstanceById``); a sample buffer not allocated (or freed):
  INVALID_ARGUMENT; a GPU that fell off the bus: GPU_IS_LOST; a handle from before a MIG mode change:
  INVALID_ARGUMENT (``nvml_mig``);
- ``nvmlGpmMetricsGet``: a ``version`` other than ``NVML_GPM_METRICS_GET_VERSION`` ARGUMENT_VERSION_MISMATCH;
  ``numMetrics`` 0 or above ``NVML_GPM_METRIC_MAX``, a sample not taken, two samples of different GPUs or
  instances (or of an instance destroyed and made again), or a second sample not later than the first:
  INVALID_ARGUMENT (the fake's choices). Per metric, ``NVML_GPM_METRIC_SM_UTIL`` (the share of SMs busy
  between the two samples, 0-100; of the instance's SMs for a GPU instance's samples) answers with
  ``nvmlReturn`` 0; any other metric ID the fake does not measure has ``nvmlReturn`` NOT_SUPPORTED (an ID
  out of range INVALID_ARGUMENT) and no value: never a made-up 0;
- ``nvmlGpmSampleFree`` of a sample not allocated or freed twice: INVALID_ARGUMENT. Samples live in the
  process that allocated them (NVML's memory), never in the state file; the GPU's counters do (a driver
  process reads what the test's ``gpm_elapse`` wrote).

A GPU's SMs in MIG mode: an instance's share counts for its profile's multiprocessors over the GPU's (the
largest profile's), so the GPU's SM_UTIL is the instances' busy SMs over all of them.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
from pathlib import Path
from typing import Any

try:  # the package's sibling (tests import tests.support.fakes.nvml_gpm)
    from . import nvml_models
except ImportError:  # loaded by its path (write_module's pynvml.py): the sibling by its path too
    _spec = importlib.util.spec_from_file_location(
        "aligned_dra_fake_nvml_models", Path(__file__).with_name("nvml_models.py")
    )
    nvml_models = sys.modules.get(_spec.name) or importlib.util.module_from_spec(_spec)
    if _spec.name not in sys.modules:
        sys.modules[_spec.name] = nvml_models
        _spec.loader.exec_module(nvml_models)

MODELS = nvml_models.MODELS
_U = ctypes.c_uint
HOPPER = 9  # NVML_DEVICE_ARCH_HOPPER: GPM from here on
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_GPM_METRIC_GRAPHICS_UTIL = 1
NVML_GPM_METRIC_SM_UTIL = 2
NVML_GPM_METRIC_SM_OCCUPANCY = 3
NVML_GPM_METRIC_MAX = 477  # nvidia-ml-py 13.x's (the conformance test holds it to the installed pynvml)
NVML_GPM_METRICS_GET_VERSION = 1
NVML_GPM_SUPPORT_VERSION = 1


class struct_c_nvmlGpmSample_t(ctypes.Structure):
    pass  # opaque, as pynvml's


c_nvmlGpmSample_t = ctypes.POINTER(struct_c_nvmlGpmSample_t)


class c_metricInfo_t(ctypes.Structure):
    _fields_ = [("shortName", ctypes.c_char_p), ("longName", ctypes.c_char_p), ("unit", ctypes.c_char_p)]


class c_nvmlGpmMetric_t(ctypes.Structure):
    _fields_ = [("metricId", _U), ("nvmlReturn", _U), ("value", ctypes.c_double), ("metricInfo", c_metricInfo_t)]


class c_nvmlGpmMetricsGet_t(ctypes.Structure):
    _fields_ = [
        ("version", _U),
        ("numMetrics", _U),
        ("sample1", c_nvmlGpmSample_t),
        ("sample2", c_nvmlGpmSample_t),
        ("metrics", c_nvmlGpmMetric_t * NVML_GPM_METRIC_MAX),
    ]


class c_nvmlGpmSupport_t(ctypes.Structure):
    _fields_ = [("version", _U), ("isSupportedDevice", _U)]


_METRICS_FIELDS = tuple(name for name, _type in c_nvmlGpmMetricsGet_t._fields_)


class GpmNvml:
    """The GPM calls of ``pynvml`` (mixed into ``FakeNvml``, which gives ``gpus``, ``_device``, ``_handle``,
    ``_key``, ``_changed``, the MIG models and the errors)."""

    # -- the test's side -------------------------------------------------------------------------------

    def gpm_elapse(self, bus_id: str, seconds: float, sms_busy: float | dict[int, float]) -> None:
        """``seconds`` pass on the GPU with ``sms_busy`` of its SMs busy (0-1): a share of the GPU whole, or in
        MIG mode ``{GPU instance ID: share of its SMs}`` (instances not named are idle)."""
        gpu = self._test_gpu(bus_id)
        if seconds <= 0:
            raise ValueError("time moves forward: seconds > 0")
        state = _gpm(gpu)
        elapsed = seconds * 1e6
        if gpu.mig["current"]:
            if not isinstance(sms_busy, dict):
                raise ValueError(f"{bus_id} is in MIG mode: give each GPU instance's share")
            instances = {g["id"]: g for g in gpu.mig["instances"]}
            profiles = {p.id: p for p in self._models()[gpu.model].profiles}
            total = max(p.sms for p in profiles.values())
            whole = 0.0
            for gi_id, share in sms_busy.items():
                if gi_id not in instances or not 0 <= share <= 1:
                    raise ValueError(f"no GPU instance {gi_id} on {bus_id}, or {share} is no share")
                gi = instances[gi_id]
                key = f"gi{gi['serial']}"
                state["busy"][key] = state["busy"].get(key, 0.0) + share * elapsed
                whole += share * profiles[gi["profile"]].sms / total
        else:
            if isinstance(sms_busy, dict) or not 0 <= sms_busy <= 1:
                raise ValueError(f"{sms_busy!r} is no share of the GPU's SMs (MIG mode is off)")
            whole = sms_busy
        state["busy"]["gpu"] = state["busy"].get("gpu", 0.0) + whole * elapsed
        state["clock_us"] += elapsed
        self._changed()

    def gpm_samples_held(self) -> int:
        """GPM sample buffers allocated and not freed."""
        return sum(1 for sample in _samples(self).values() if sample is not None)

    # -- pynvml -------------------------------------------------------------------------------------

    def nvmlGpmQueryDeviceSupport(self, device: Any) -> c_nvmlGpmSupport_t:
        gpu = self._gpu(device)  # a MIG device's handle: NOT_SUPPORTED
        support = c_nvmlGpmSupport_t()
        support.version = NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = int(self._models()[gpu.model].architecture >= HOPPER)
        return support

    def nvmlGpmSampleAlloc(self) -> Any:
        self._initialized()
        samples = _samples(self)
        number = len(samples)
        samples[number] = {}  # allocated, not yet taken
        return self._handle(c_nvmlGpmSample_t, ("gpm-sample", number))

    def nvmlGpmSampleFree(self, gpmSample: Any) -> None:
        self._initialized()
        number = self._sample_number(gpmSample)
        _samples(self)[number] = None

    def nvmlGpmSampleGet(self, device: Any, gpmSample: Any) -> Any:
        gpu, gi, _ci = self._device(device)
        self._supported(gpu)
        self._take(gpmSample, device, gpu, gi)
        return gpmSample

    def nvmlGpmMigSampleGet(self, device: Any, gpuInstanceId: int, gpmSample: Any) -> Any:
        gpu = self._gpu(device)
        self._supported(gpu)
        if not gpu.mig["current"]:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        gi = next((g for g in gpu.mig["instances"] if g["id"] == gpuInstanceId), None)
        if gi is None or isinstance(gpuInstanceId, bool):
            raise self.NVMLError(self.NVML_ERROR_NOT_FOUND)
        self._take(gpmSample, device, gpu, gi)
        return gpmSample

    def nvmlGpmMetricsGet(self, metricsGet: Any) -> Any:
        self._initialized()
        if not isinstance(metricsGet, ctypes.Structure) or tuple(f[0] for f in metricsGet._fields_) != _METRICS_FIELDS:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        if metricsGet.version != NVML_GPM_METRICS_GET_VERSION:
            raise self.NVMLError(NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        if not 0 < metricsGet.numMetrics <= NVML_GPM_METRIC_MAX:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        first, second = (_samples(self)[self._sample_number(s)] for s in (metricsGet.sample1, metricsGet.sample2))
        if not first or not second or first["scope"] != second["scope"] or second["clock_us"] <= first["clock_us"]:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        busy = (second["busy"] - first["busy"]) / (second["clock_us"] - first["clock_us"])
        for index in range(metricsGet.numMetrics):
            metric = metricsGet.metrics[index]
            if metric.metricId == NVML_GPM_METRIC_SM_UTIL:
                metric.value, metric.nvmlReturn = min(100.0, max(0.0, busy * 100.0)), self.NVML_SUCCESS
            elif 0 < metric.metricId < NVML_GPM_METRIC_MAX:
                metric.value, metric.nvmlReturn = 0.0, self.NVML_ERROR_NOT_SUPPORTED
            else:
                metric.value, metric.nvmlReturn = 0.0, self.NVML_ERROR_INVALID_ARGUMENT
        return metricsGet

    # -- inside ---------------------------------------------------------------------------------------

    @staticmethod
    def _models() -> dict[str, Any]:
        return MODELS

    def _supported(self, gpu: Any) -> None:
        if self._models()[gpu.model].architecture < HOPPER:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)

    def _sample_number(self, sample: Any) -> int:
        try:
            key = self._key(sample, c_nvmlGpmSample_t)
        except self.NVMLError:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT) from None
        if key[0] != "gpm-sample" or _samples(self).get(key[1]) is None:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)  # never allocated, or freed
        return key[1]

    def _take(self, sample: Any, device: Any, gpu: Any, gi: dict | None) -> None:
        number = self._sample_number(sample)
        state = _gpm(gpu)
        key = "gpu" if gi is None else f"gi{gi['serial']}"
        bus = self._key(device, self.c_nvmlDevice_t)[1]
        _samples(self)[number] = {
            "scope": (bus, gpu.generation, key),
            "clock_us": state["clock_us"],
            "busy": state["busy"].get(key, 0.0),
        }


def _gpm(gpu: Any) -> dict[str, Any]:
    """The GPU's GPM counters: its clock and, per scope (the GPU, each GPU instance), SM-busy time in µs."""
    if not gpu.gpm:
        gpu.gpm.update(clock_us=1_000_000.0, busy={})
    return gpu.gpm


def _samples(fake: Any) -> dict[int, dict | None]:
    """The process's sample buffers: ``{number: {} (allocated) | the sample taken | None (freed)}``."""
    found = fake.__dict__.get("_gpm_samples")
    if found is None:
        found = fake.__dict__["_gpm_samples"] = {}
    return found


for _name, _value in list(globals().items()):
    if _name.startswith(("NVML_GPM_", "c_nvmlGpm", "NVML_ERROR_ARGUMENT")):
        setattr(GpmNvml, _name, _value)
