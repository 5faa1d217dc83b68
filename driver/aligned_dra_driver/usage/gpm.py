# SPDX-License-Identifier: Apache-2.0
"""The share of SMs busy, from NVML's GPM (GPU performance monitoring: Hopper and newer), per GPU and per MIG
GPU instance, between two usage polls.

NVML's per-process SM figure (``nvmlDeviceGetProcessUtilization``'s ``smUtil``) is a share of *time*: the
part of the sample period in which a kernel of the process ran, on one SM or on all of them. GPM's
``NVML_GPM_METRIC_SM_UTIL`` is the share of the SMs that were busy, averaged over the interval between two
samples: what a MIG profile's compute slices are sized with. NVML's flow: ``nvmlGpmQueryDeviceSupport``
(``isSupportedDevice``), ``nvmlGpmSampleAlloc``, ``nvmlGpmSampleGet`` (the GPU) or ``nvmlGpmMigSampleGet`` (a
GPU instance of a GPU in MIG mode) at each poll, ``nvmlGpmMetricsGet`` on the last poll's sample and this
one's, ``nvmlGpmSampleFree`` of the older.

Unknown stays unknown: a GPU NVML does not support (before Hopper, or an nvidia-ml-py without GPM) is asked
once and never again; the first poll of a GPU or instance has no earlier sample and so no figure; an NVML
error drops the scope's samples (the next poll starts again) and gives no figure, never a 0. GPM figures are
optional: nothing here fails a GPU's reading.
"""

from __future__ import annotations

import logging
from typing import Any

LOG = logging.getLogger("aligned_dra_driver.usage.watcher")
# pynvml's values (nvml.h): the metric and the struct version the driver asks for
SM_UTIL = 2  # NVML_GPM_METRIC_SM_UTIL: percentage of SMs that were busy, 0.0 - 100.0
METRICS_GET_VERSION = 1  # NVML_GPM_METRICS_GET_VERSION


class GpmSampler:
    """Per GPU (PCI address) and scope (``None``: the GPU whole; a GPU instance ID), the last poll's sample."""

    def __init__(self) -> None:
        self.supported: dict[str, bool] = {}
        self.samples: dict[tuple[str, int | None], Any] = {}
        self._failing: set[str] = set()

    def forget(self, nvml: Any, pci: str) -> None:
        """A GPU gone, or NVML started again: its samples freed (where NVML still can), support asked again."""
        self.supported.pop(pci, None)
        for key in [k for k in self.samples if k[0] == pci]:
            self._free(nvml, self.samples.pop(key))

    def is_supported(self, nvml: Any, pci: str, handle: Any) -> bool:
        """Whether NVML offers GPM on the GPU: asked once per GPU (NOT_SUPPORTED or isSupportedDevice 0: no)."""
        known = self.supported.get(pci)
        if known is not None:
            return known
        query = getattr(nvml, "nvmlGpmQueryDeviceSupport", None)
        try:
            found = query is not None and bool(query(handle).isSupportedDevice)
        except nvml.NVMLError as exc:
            LOG.info("GPU %s: NVML's GPM support cannot be read (%s): no share-of-SMs series", pci, exc)
            return False  # asked again at the next poll: an error is not an answer
        if not found:
            LOG.info("GPU %s has no NVML GPM (Hopper and newer): claims on it have no share-of-SMs series", pci)
        self.supported[pci] = found
        return found

    def gpu(self, nvml: Any, pci: str, handle: Any) -> float | None:
        """The GPU's share of SMs busy (0-1) since the last poll; None where not known."""
        if not self.is_supported(nvml, pci, handle):
            return None
        return self._step(nvml, pci, None, lambda sample: nvml.nvmlGpmSampleGet(handle, sample))

    def instances(self, nvml: Any, pci: str, handle: Any, gpu_instances: list[int]) -> dict[int, float]:
        """Per GPU instance of a GPU in MIG mode, its share of its SMs busy since the last poll."""
        if not self.is_supported(nvml, pci, handle):
            return {}
        for key in [k for k in self.samples if k[0] == pci and k[1] not in gpu_instances]:
            self._free(nvml, self.samples.pop(key))  # an instance gone, or MIG mode turned off
        found = {}
        for gi in gpu_instances:
            share = self._step(nvml, pci, gi, lambda sample, gi=gi: nvml.nvmlGpmMigSampleGet(handle, gi, sample))
            if share is not None:
                found[gi] = share
        return found

    def _step(self, nvml: Any, pci: str, scope: int | None, take: Any) -> float | None:
        """A new sample of the scope; the share between the last one and it (the last freed, the new kept)."""
        key = (pci, scope)
        if scope is None:  # the GPU whole: its instances' samples are of another mode
            for other in [k for k in self.samples if k[0] == pci and k[1] is not None]:
                self._free(nvml, self.samples.pop(other))
        previous = self.samples.pop(key, None)
        sample = None
        try:
            sample = nvml.nvmlGpmSampleAlloc()
            take(sample)
            share = None if previous is None else self._share(nvml, previous, sample)
        except Exception as exc:
            self._free(nvml, sample)
            self._free(nvml, previous)
            if not isinstance(exc, nvml.NVMLError):
                raise  # not NVML's answer: the caller turns GPM off for the GPU
            if pci not in self._failing:
                self._failing.add(pci)
                LOG.warning("GPU %s: NVML's GPM failed (%s): no share-of-SMs figure until it answers", pci, exc)
            return None
        self._free(nvml, previous)
        self.samples[key] = sample
        if pci in self._failing:
            self._failing.discard(pci)
            LOG.info("GPU %s: NVML's GPM answers again", pci)
        return share

    @staticmethod
    def _share(nvml: Any, first: Any, second: Any) -> float | None:
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = getattr(nvml, "NVML_GPM_METRICS_GET_VERSION", METRICS_GET_VERSION)
        request.numMetrics = 1
        request.sample1, request.sample2 = first, second
        request.metrics[0].metricId = getattr(nvml, "NVML_GPM_METRIC_SM_UTIL", SM_UTIL)
        nvml.nvmlGpmMetricsGet(request)
        metric = request.metrics[0]
        if metric.nvmlReturn != 0:  # this metric not measured: no figure
            return None
        return min(1.0, max(0.0, float(metric.value) / 100.0))

    @staticmethod
    def _free(nvml: Any, sample: Any) -> None:
        if sample is None:
            return
        try:
            nvml.nvmlGpmSampleFree(sample)
        except Exception as exc:  # NVML gone or the buffer already invalid: nothing more to free
            LOG.debug("freeing a GPM sample failed: %s", exc)
