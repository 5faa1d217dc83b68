# SPDX-License-Identifier: Apache-2.0
"""The share of SMs busy from NVML's GPM: measured per whole-GPU claim and per MIG device where NVML supports it
(Hopper and newer), exported as its own series beside the per-process share of time, never a made-up 0.

NVML is ``tests/support/fakes/nvml.py`` (its GPM part: ``nvml_gpm.py``)."""

from __future__ import annotations

import ctypes
import logging
import uuid

import pytest
from aligned_dra_driver.claims.pods import ClaimPods
from aligned_dra_driver.usage.metrics import Metrics
from aligned_dra_driver.usage.series import UsageCollector
from aligned_dra_driver.usage.watcher import GpuWatcher, NvmlReader
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.aligned.dra.tests.support.fakes.nvml import GIB, GpuNode, pod_cgroup, share_entry
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

H100, DEV_H = "0000:2a:00.0", "gpu-0000-2a-00-0"
MIG, DEV_M = "0000:3b:00.0", "gpu-0000-3b-00-0"
A100, DEV_A = "0000:18:00.0", "gpu-0000-18-00-0"
BUSY = "aligned_dra_claim_gpu_sms_busy_ratio"
TIME = "aligned_dra_claim_gpu_sm_utilization_ratio"


class Node(GpuNode):
    """An H100 given whole, an H100 in MIG mode with a 3g.40gb and a 1g.10gb, and an A100 (no GPM)."""

    def __init__(self, root) -> None:
        super().__init__(root / "proc")
        self.nvml.add_gpu(H100, model="H100-SXM5-80GB")
        self.nvml.add_gpu(MIG, model="H100-SXM5-80GB")
        self.nvml.add_gpu(A100, model="A100-SXM4-40GB")
        self.nvml.enable_mig(MIG)
        self.big = self.nvml.create(MIG, "3g.40gb", start=0)
        self.small = self.nvml.create(MIG, "1g.10gb", start=6)
        self.metrics = Metrics()
        self.checkpoint: dict[str, dict] = {}
        self.pods = ClaimPods()
        self.reader = NvmlReader(lambda: self.nvml, str(self.procfs), self.metrics, ("usage",))
        self.watcher = GpuWatcher(
            self.reader,
            lambda: self.checkpoint,
            lambda: {H100: DEV_H, MIG: DEV_M, A100: DEV_A},
            self.pods,
            None,
            self.metrics,
            usage_interval=15,
        )
        self.metrics.registry.register(UsageCollector(self.watcher, lambda: self.checkpoint, self.pods))

    def claim(self, name: str, bus: str, device: str, mig: int | None = None, share: bool = False) -> None:
        """A claim of the GPU whole, of a MIG device (``mig``: its GPU instance) or of a share, with one pod."""
        uid, pod_uid = str(uuid.uuid4()), str(uuid.uuid4())
        entry = share_entry(uid, name, bus, h.NODE, 10 if share else None, 40)
        record = entry["devices"][0]
        record["device"] = device
        if not share:
            record.update(share_id=None, mps=False)
        if mig is not None:
            record["mig"] = {"mode": "dynamic", "gpu_instance": mig, "compute_instance": 0}
        self.checkpoint[uid] = entry
        self.pods.set(uid, [(f"{name}-pod", pod_uid)])
        self.process(bus, 1, pod_cgroup(pod_uid), mps_client=share, gpu_instance=mig)

    def series(self, name: str) -> dict[str, float]:
        """``{claim: value}`` of one family on /metrics."""
        text = self.metrics.render().decode()
        return {
            sample.labels["claim"]: sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name
        }

    def help(self, name: str) -> str:
        families = text_string_to_metric_families(self.metrics.render().decode())
        return next(f.documentation for f in families if f.name == name)


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def test_whole_gpu_and_mig_devices_get_the_share_of_sms_busy_from_the_second_poll_on(node):
    node.claim("whole", H100, DEV_H)
    node.claim("big", MIG, f"{DEV_M}-mig-3g-40gb-0", mig=node.big)
    node.claim("small", MIG, f"{DEV_M}-mig-1g-10gb-6", mig=node.small)
    node.watcher.poll_usage()
    assert node.series(BUSY) == {}  # one sample per scope: no interval yet, no figure (never a 0)
    node.nvml.gpm_elapse(H100, 15.0, 0.4)
    node.nvml.gpm_elapse(MIG, 15.0, {node.big: 0.5})
    node.watcher.poll_usage()
    assert node.series(BUSY) == {"whole": 0.4, "big": 0.5, "small": 0.0}  # the 1g sampled idle: a true 0
    node.nvml.gpm_elapse(H100, 15.0, 0.1)
    node.nvml.gpm_elapse(MIG, 15.0, {node.small: 1.0})
    node.watcher.poll_usage()
    assert node.series(BUSY) == {"whole": 0.1, "big": 0.0, "small": 1.0}
    # one sample kept per scope (the GPU whole, each instance), the older ones freed
    assert node.nvml.gpm_samples_held() == 3


def test_the_help_says_share_of_sms_against_share_of_time(node):
    node.watcher.poll_usage()
    assert "share of the SMs" in node.help(BUSY) and "not of time" in node.help(BUSY)
    assert "share of time" in node.help(TIME).lower() and "not of the SMs" in node.help(TIME)


def test_a_share_of_a_gpu_and_a_gpu_before_hopper_have_no_share_of_sms_series(node, caplog):
    node.claim("share", H100, DEV_H, share=True)
    node.claim("ampere", A100, DEV_A)
    with caplog.at_level(logging.INFO, logger="aligned_dra_driver.usage.watcher"):
        for _poll in range(3):
            node.nvml.gpm_elapse(H100, 15.0, 0.5)
            node.watcher.poll_usage()
    assert node.series(BUSY) == {}  # GPM sees the GPU, not the share's processes; the A100 has no GPM
    assert sum("has no NVML GPM" in r.getMessage() for r in caplog.records) == 1  # asked once per GPU
    assert node.series("aligned_dra_claim_gpu_memory_used_bytes").keys() == {"share", "ampere"}


def test_an_nvml_error_gives_no_figure_frees_the_samples_and_the_next_polls_measure_again(node, caplog):
    node.claim("whole", H100, DEV_H)
    node.watcher.poll_usage()
    node.nvml.gpm_elapse(H100, 15.0, 0.3)
    node.nvml.inject("nvmlGpmSampleGet", node.nvml.NVML_ERROR_UNKNOWN, bus_id=H100)
    with caplog.at_level(logging.WARNING, logger="aligned_dra_driver.usage.watcher"):
        node.watcher.poll_usage()
    assert node.series(BUSY) == {} and node.nvml.gpm_samples_held() == 0
    assert any("GPM failed" in r.getMessage() for r in caplog.records)
    # the memory figures of the same poll are not touched by GPM's failure
    assert node.series("aligned_dra_claim_gpu_memory_used_bytes") == {"whole": GIB}
    node.watcher.poll_usage()  # a first sample again
    assert node.series(BUSY) == {}
    node.nvml.gpm_elapse(H100, 15.0, 0.6)
    node.watcher.poll_usage()
    assert node.series(BUSY) == {"whole": 0.6}


def test_an_error_that_is_not_nvmls_turns_gpm_off_for_the_gpu_and_keeps_its_memory_figures(node, caplog, monkeypatch):
    """A library whose GPM types do not match (a TypeError, not an NVMLError): no figure, the GPU's reading stands,
    its samples are freed and GPM is not asked again for it."""
    node.claim("whole", H100, DEV_H)
    node.watcher.poll_usage()
    node.nvml.gpm_elapse(H100, 15.0, 0.3)

    def broken(_request):
        raise TypeError("incompatible types, c_nvmlGpmMetricsGet_t instance instead of LP_c_nvmlGpmMetricsGet_t")

    monkeypatch.setattr(node.nvml, "nvmlGpmMetricsGet", broken)
    with caplog.at_level(logging.WARNING, logger="aligned_dra_driver.usage.watcher"):
        node.watcher.poll_usage()
    assert node.series(BUSY) == {} and node.nvml.gpm_samples_held() == 0
    assert node.series("aligned_dra_claim_gpu_memory_used_bytes") == {"whole": GIB}
    assert any("GPM cannot be used" in r.getMessage() for r in caplog.records)
    monkeypatch.undo()
    node.nvml.gpm_elapse(H100, 15.0, 0.6)
    node.watcher.poll_usage()
    node.watcher.poll_usage()
    assert node.series(BUSY) == {} and node.nvml.gpm_samples_held() == 0  # not asked again


def test_an_instance_gone_has_its_sample_freed(node):
    node.claim("big", MIG, f"{DEV_M}-mig-3g-40gb-0", mig=node.big)
    node.watcher.poll_usage()
    assert node.nvml.gpm_samples_held() == 3  # the whole H100 and both instances sampled
    handle = node.nvml.nvmlDeviceGetHandleByPciBusId(MIG)
    instance = node.nvml.nvmlDeviceGetGpuInstanceById(handle, node.small)
    count, cis = ctypes.c_uint(), (node.nvml.c_nvmlComputeInstance_t * 1)()
    node.nvml.nvmlGpuInstanceGetComputeInstances(instance, 0, cis, ctypes.byref(count))
    node.nvml.nvmlComputeInstanceDestroy(cis[0])
    node.nvml.nvmlGpuInstanceDestroy(instance)
    node.nvml.gpm_elapse(MIG, 15.0, {node.big: 0.2})
    node.nvml.gpm_elapse(H100, 15.0, 0.0)
    node.watcher.poll_usage()
    assert node.series(BUSY) == {"big": 0.2}
    assert node.nvml.gpm_samples_held() == 2
