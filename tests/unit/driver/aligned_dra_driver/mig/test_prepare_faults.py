# SPDX-License-Identifier: Apache-2.0
"""The fault lab's NVML cases, in process: Prepare, Unprepare and the start-up check fail closed on NVML.

An NVML error (injected per call in the strict fake, tests/support/fakes/nvml_faults.py) never reads as "no
instance": Unprepare fails and keeps the claim until a retry gets through, a roll back keeps its started record
until a rescan finishes it, and the start-up sweep destroys nothing it could not read. A MIG mode change NVML
refuses (a process holds the GPU) names the process, leaves the mode as it was, and is tried again at each
rescan until the GPU is idle. After each case nothing is leaked (no instance without a claim, no started record)
and no committed claim's instance is lost.
"""

from __future__ import annotations

import logging

import pytest
from aligned_dra_driver.kubelet import driver as drv

from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses.driver_mig import (
    claim,
    fake,
    instances,
    make,
    mig_mode,
    mig_name,
    on_disk,
    process,
    rescan,
)

LOGGERS = ("aligned_dra_driver.mig.prepare", "aligned_dra_driver.mig.restore", "aligned_dra_driver.mig.mode")


def nothing_leaked(node, driver, nvml, claims: dict[str, tuple[str, int]]) -> None:
    """Every instance belongs to a committed claim (``{uid: (profile, start)}``), and no started record is left."""
    data, specs = on_disk(node)
    assert "mig_started" not in data and driver.checkpoint.mig_started == {}
    assert set(data["claims"]) == set(claims)
    assert sorted((p, s) for p, s, _cis in instances(nvml)) == sorted(claims.values())
    assert specs == sorted(f"aligned.dev-claim_{uid}.json" for uid in claims)


@pytest.mark.parametrize(
    "call",
    [
        "nvmlDeviceGetHandleByPciBusId",
        "nvmlDeviceGetGpuInstanceProfileInfo",
        "nvmlDeviceGetGpuInstances",
        "nvmlGpuInstanceGetInfo",
        "nvmlGpuInstanceGetComputeInstanceProfileInfo",
        "nvmlGpuInstanceGetComputeInstances",
        "nvmlComputeInstanceDestroy",
        "nvmlGpuInstanceDestroy",
    ],
)
def test_an_nvml_error_in_unprepare_keeps_the_claim_until_a_retry_gets_through(node, nvml, call):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("2g.20gb", 0))
    assert "error" not in driver.prepare([ref])[ref[1]]
    nvml.inject(call, nvml.NVML_ERROR_UNKNOWN)
    error = driver.unprepare([ref])[ref[1]]
    assert f"GPU {h.GPU_BDF}: MIG 2g.20gb at memory slice 0" in error and "the claim stays prepared" in error
    assert ref[1] in driver.checkpoint.claims and ref[1] in on_disk(node)[0]["claims"]
    assert [(p, s) for p, s, _cis in instances(nvml)] == [("2g.20gb", 0)]  # never success while it exists
    assert len(list(node.cdi.iterdir())) == 1  # still prepared: its spec back
    assert driver.unprepare([ref])[ref[1]] == ""  # the kubelet's retry
    nothing_leaked(node, driver, nvml, {})


def test_only_a_gpu_nvml_has_lost_counts_its_instance_gone(node, nvml, caplog):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("1g.10gb", 1))
    assert "error" not in driver.prepare([ref])[ref[1]]
    nvml.inject("nvmlDeviceGetGpuInstances", nvml.NVML_ERROR_NOT_FOUND)  # NOT_FOUND of a list call: an error
    assert "NVML failed" in driver.unprepare([ref])[ref[1]] and ref[1] in driver.checkpoint.claims
    nvml.inject("nvmlDeviceGetGpuInstances", nvml.NVML_ERROR_GPU_IS_LOST)
    with caplog.at_level(logging.WARNING, logger="aligned_dra_driver.mig.prepare"):
        assert driver.unprepare([ref])[ref[1]] == ""
    assert any(f"GPU {h.GPU_BDF} is gone" in r.message for r in caplog.records)
    assert driver.checkpoint.claims == {}


def test_an_nvml_error_mid_prepare_is_rolled_back_and_a_failed_roll_back_is_finished_at_the_next_rescan(node, nvml):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("3g.40gb", 4))
    nvml.inject("nvmlGpuInstanceCreateComputeInstance", nvml.NVML_ERROR_UNKNOWN)
    error = driver.prepare([ref])[ref[1]]["error"]
    assert f"GPU {h.GPU_BDF}: MIG 3g.40gb at memory slice 4: NVML failed (Unknown Error)" in error
    nothing_leaked(node, driver, nvml, {})  # rolled back before the answer
    # reading the new GPU instance fails, and so does its roll back's listing
    nvml.inject("nvmlGpuInstanceGetComputeInstanceProfileInfo", nvml.NVML_ERROR_UNKNOWN, times=2)
    assert "NVML failed" in driver.prepare([ref])[ref[1]]["error"]
    assert nvml.faults == []
    assert [(p, s) for p, s, _cis in instances(nvml)] == [("3g.40gb", 4)]
    started = on_disk(node)[0]["mig_started"][ref[1]]  # kept: the instance may exist, so the record stays
    assert [(r["profile"], r["placement"]["start"]) for r in started] == [("3g.40gb", 4)]
    rescan(driver)  # the next scan finishes the roll back
    nothing_leaked(node, driver, nvml, {})
    answer = driver.prepare([ref])[ref[1]]  # the kubelet's retry
    assert "error" not in answer, answer
    nothing_leaked(node, driver, nvml, {ref[1]: ("3g.40gb", 4)})


def test_an_nvml_error_mid_scan_and_at_start_loses_no_claim_and_destroys_nothing_unread(node, nvml, caplog):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("2g.20gb", 0))
    assert "error" not in driver.prepare([ref])[ref[1]]
    nvml.create(h.GPU_BDF, "3g.40gb", start=4)  # no claim holds it: the start-up sweep destroys it, once read
    nvml.inject("nvmlDeviceGetGpuInstances", nvml.NVML_ERROR_UNKNOWN, times=None)
    rescan(driver)
    assert ref[1] in driver.checkpoint.claims and len(instances(nvml)) == 2
    with caplog.at_level(logging.ERROR, logger=LOGGERS[1]):
        restarted, _kube = make(node, kube=kube)  # a start while NVML fails to list the instances
    assert any("checking the instances of GPU" in r.message for r in caplog.records)
    assert ref[1] in restarted.checkpoint.claims and len(instances(nvml)) == 2  # nothing read as "not there"
    rescan(restarted)
    assert len(instances(nvml)) == 2
    nvml.clear_faults()
    rescan(restarted)  # read again: the unknown idle instance goes, the claim's stays
    nothing_leaked(node, restarted, nvml, {ref[1]: ("2g.20gb", 0)})
    assert restarted.unprepare([ref])[ref[1]] == ""
    nothing_leaked(node, restarted, nvml, {})


def test_a_mode_change_refused_names_the_process_and_is_retried_at_each_rescan(node, monkeypatch, caplog):
    nvml = fake(node, monkeypatch, mig=False)
    process(node, 4242, "dcgm-exporter")
    nvml.run(h.GPU_BDF, 4242, 1 << 30)  # on the GPU whole at start: NVML keeps its mode (status IN_USE)
    refused = f"GPU {h.GPU_BDF}: MIG mode stays off: process 4242 (dcgm-exporter) holds the GPU"
    with caplog.at_level(logging.INFO, logger=LOGGERS[0]):
        driver, kube = make(node)
        rescan(driver)
        rescan(driver)
    assert [r.levelname for r in caplog.records if refused in r.message] == ["WARNING"]  # once, not per scan
    assert mig_mode(nvml) == [0, 0]  # nothing left pending for a later reset
    ref = claim(kube, "a", mig_name("1g.10gb", 0))
    assert refused in driver.prepare([ref])[ref[1]]["error"]  # never a partition while MIG mode is off
    nothing_leaked(node, driver, nvml, {})
    nvml.end(h.GPU_BDF, 4242)
    with caplog.at_level(logging.INFO, logger=LOGGERS[0]):
        rescan(driver)
    assert mig_mode(nvml) == [1, 1]
    assert any("MIG mode back on" in r.message for r in caplog.records)
    assert "error" not in driver.prepare([ref])[ref[1]]
    nothing_leaked(node, driver, nvml, {ref[1]: ("1g.10gb", 0)})


def test_the_gpu_whole_is_never_given_while_mig_mode_stays_on(node, nvml):
    driver, kube = make(node)
    process(node, 5151, "nv-hostengine", device_open=True)  # an NVML client: no compute process, the file open
    nvml.inject("nvmlDeviceSetMigMode", nvml.NVML_ERROR_IN_USE)
    whole = claim(kube, "whole", h.GPU)
    error = driver.prepare([whole])[whole[1]]["error"]
    assert f"GPU {h.GPU_BDF}: MIG mode stays on: process 5151 (nv-hostengine) holds the GPU" in error
    assert "the GPU whole is not given while MIG mode is on" in error
    assert mig_mode(nvml) == [1, 1] and driver.checkpoint.claims == {}
    assert "error" not in driver.prepare([whole])[whole[1]]  # idle now: turned off and read back
    assert mig_mode(nvml) == [0, 0]
    rescan(driver)  # a claim holds the GPU whole: MIG mode is not turned back on behind it
    assert mig_mode(nvml) == [0, 0]
    assert driver.unprepare([whole])[whole[1]] == ""
    rescan(driver)  # the Unprepare is committed: MIG mode back on
    assert mig_mode(nvml) == [1, 1]


def test_a_gpu_whole_whose_claim_failed_goes_back_to_mig_mode_at_the_next_rescan(node, nvml, monkeypatch):
    driver, kube = make(node)
    whole = claim(kube, "whole", h.GPU)
    monkeypatch.setattr(drv.cdi, "spec_problem", lambda spec: "refused for the test")  # fails after MIG mode off
    assert "refused for the test" in driver.prepare([whole])[whole[1]]["error"]
    assert driver.checkpoint.claims == {} and mig_mode(nvml) == [0, 0]
    rescan(driver)
    assert mig_mode(nvml) == [1, 1]
