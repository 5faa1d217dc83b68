# SPDX-License-Identifier: Apache-2.0
"""Prepare, Unprepare and the rescan retries fail closed where they meet each other or a GPU that changed.

A Prepare committed while a rescan checks the GPU keeps its instance; the GPU whole goes back to MIG mode only
once its Unprepare is committed, and never under another whole claim; a static GPU whole is never given while
MIG mode is on; a start without NVML does its check once NVML loads; a handle taken before a MIG mode change
never reads as "no instance"; a kept instance is counted once however often a failing Prepare meets it. The
races are made deterministic by running the other call at the point where it would interleave.
"""

from __future__ import annotations

import json

from aligned_dra_driver.mig import prepare as mig_prepare
from aligned_dra_driver.usage.metrics import Metrics

from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses.driver_mig import (
    BOOT,
    after_the_first_lock,
    claim,
    fake,
    instances,
    make,
    mig_mode,
    mig_name,
    on_disk,
    publish,
    rescan,
)


def before_the_first_lock(driver, monkeypatch, call) -> list[bool]:
    """``call()`` runs when the GPU's lock is next asked for, before it is taken (once); True once it ran."""
    real, ran = driver.mig.lock, []

    def lock(pci):
        if not ran:
            ran.append(True)
            call()
        return real(pci)

    monkeypatch.setattr(driver.mig, "lock", lock)
    return ran


def test_the_rescan_retry_keeps_the_instance_of_a_prepare_committed_before_it_takes_the_gpu_lock(
    node, nvml, monkeypatch
):
    nvml.inject("nvmlDeviceGetGpuInstances", nvml.NVML_ERROR_UNKNOWN, times=None)
    driver, kube = make(node)  # the start cannot list the GPU's instances: each rescan checks them
    assert driver.mig.unswept == {h.GPU_BDF}
    nvml.clear_faults()
    ref = claim(kube, "a", mig_name("2g.20gb", 0))
    answers = []
    ran = before_the_first_lock(driver, monkeypatch, lambda: answers.append(driver.prepare([ref])[ref[1]]))
    driver.mig.sweep()  # made and committed (its started record dropped) just before the retry holds the lock
    assert ran and "error" not in answers[0], answers
    assert driver.mig.unswept == set()
    assert ref[1] in driver.checkpoint.claims and driver.checkpoint.mig_started == {}
    assert [(p, s) for p, s, _cis in instances(nvml)] == [("2g.20gb", 0)]  # held by the claim: never destroyed


def test_a_static_gpu_whole_is_never_given_while_mig_mode_is_on_or_unreadable(node, monkeypatch):
    nvml = fake(node, monkeypatch, mig=False)  # published whole: MIG mode off
    driver, kube = make(node, mode="static")
    nvml.nvmlInit()
    nvml.nvmlDeviceSetMigMode(nvml.nvmlDeviceGetHandleByPciBusId(h.GPU_BDF), 1)  # Hopper, idle: on at once
    whole = claim(kube, "whole", h.GPU)
    error = driver.prepare([whole])[whole[1]]["error"]
    assert f"GPU {h.GPU_BDF} has MIG mode on (--mig=static): the GPU whole is not given while it is" in error
    assert driver.checkpoint.claims == {} and mig_mode(nvml) == [1, 1]  # static: the mode is never changed
    nvml.nvmlDeviceSetMigMode(nvml.nvmlDeviceGetHandleByPciBusId(h.GPU_BDF), 0)
    nvml.inject("nvmlDeviceGetMigMode", nvml.NVML_ERROR_UNKNOWN)
    error = driver.prepare([whole])[whole[1]]["error"]
    assert f"GPU {h.GPU_BDF} as a whole: NVML failed (Unknown Error)" in error and driver.checkpoint.claims == {}
    assert "error" not in driver.prepare([whole])[whole[1]]  # MIG mode off, read: given
    assert whole[1] in driver.checkpoint.claims


def test_a_start_without_nvml_does_its_check_at_the_first_rescan_that_loads_it(node, nvml):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("1g.10gb", 1))
    assert "error" not in driver.prepare([ref])[ref[1]]
    nvml.reset(h.GPU_BDF, reboot=True)  # a reboot: the instances are gone, the CDI directory (tmpfs) empty
    for path in node.cdi.iterdir():
        path.unlink()
    (node.proc / "sys" / "kernel" / "random" / "boot_id").write_text("99999999-2222-3333-4444-555555555555\n")
    nvml.library = False  # the NVIDIA driver is not loaded yet when the driver starts
    restarted, _kube = make(node, kube=kube)
    nvml.library = True
    leftover = nvml.create(h.GPU_BDF, "3g.40gb", start=4)  # made by hand since the boot: no claim holds it
    assert restarted.mig.restore_pending and on_disk(node)[0]["boot_id"] == BOOT
    rescan(restarted)  # NVML loads: the start-up check is done now
    assert not restarted.mig.restore_pending
    assert [(p, s) for p, s, _cis in instances(nvml)] == [("1g.10gb", 1)]  # made again; the leftover destroyed
    assert leftover not in [i["id"] for i in nvml.instances(h.GPU_BDF)]
    entry = restarted.checkpoint.claims[ref[1]]
    (made,) = nvml.instances(h.GPU_BDF)
    assert entry["devices"][0]["mig"]["uuid"] == made["uuid"][0]
    assert on_disk(node)[0]["boot_id"].startswith("99999999")
    assert on_disk(node)[1] == [f"aligned.dev-claim_{ref[1]}.json"]  # its spec written, with the new MIG UUID
    assert restarted.prepare([ref])[ref[1]] == {"devices": entry["devices"]}
    assert restarted.unprepare([ref])[ref[1]] == "" and instances(nvml) == []


def test_the_gpu_whole_goes_back_to_mig_mode_only_once_its_unprepare_is_committed(node, nvml, monkeypatch):
    driver, kube = make(node)
    whole = claim(kube, "whole", h.GPU)
    assert "error" not in driver.prepare([whole])[whole[1]] and mig_mode(nvml) == [0, 0]

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(driver.checkpoint, "save", disk_full)
        assert "the claim stays prepared" in driver.unprepare([whole])[whole[1]]
        assert mig_mode(nvml) == [0, 0]  # still prepared: MIG mode stays off under it
    rescan(driver)
    assert mig_mode(nvml) == [0, 0] and whole[1] in driver.checkpoint.claims
    other = claim(kube, "other", h.GPU)  # allocated whole again while the kubelet unprepares the first
    answers = []
    ran = before_the_first_lock(driver, monkeypatch, lambda: answers.append(driver.prepare([other])[other[1]]))
    assert driver.unprepare([whole])[whole[1]] == ""
    if not ran:  # the Unprepare took no GPU lock: the other claim comes right after it
        ran.append(True)
        answers.append(driver.prepare([other])[other[1]])
    assert "error" not in answers[0], answers
    rescan(driver)
    assert mig_mode(nvml) == [0, 0] and set(driver.checkpoint.claims) == {other[1]}  # never MIG under a whole
    assert driver.unprepare([other])[other[1]] == ""
    rescan(driver)
    assert mig_mode(nvml) == [1, 1]


def test_a_handle_taken_before_a_mig_mode_change_never_reads_as_no_instance(node, nvml, monkeypatch):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("2g.20gb", 0))
    assert "error" not in driver.prepare([ref])[ref[1]]
    lib = driver.mig.lib()
    real = lib.handle

    def then_relaid(pci):
        taken = real(pci)
        monkeypatch.setattr(lib, "handle", real)  # once
        # mig-parted lays the GPU out again: every instance goes, MIG mode off and on, the same instance again
        nvml.reset(h.GPU_BDF)
        nvml.nvmlDeviceSetMigMode(nvml.nvmlDeviceGetHandleByPciBusId(h.GPU_BDF), 0)
        nvml.nvmlDeviceSetMigMode(nvml.nvmlDeviceGetHandleByPciBusId(h.GPU_BDF), 1)
        nvml.create(h.GPU_BDF, "2g.20gb", start=0)
        return taken  # taken before the change: NVML answers INVALID_ARGUMENT to it now

    monkeypatch.setattr(lib, "handle", then_relaid)
    error = driver.unprepare([ref])[ref[1]]
    assert f"GPU {h.GPU_BDF}: MIG 2g.20gb at memory slice 0: NVML failed" in error, error
    assert "the claim stays prepared" in error and ref[1] in driver.checkpoint.claims
    assert [(p, s) for p, s, _cis in instances(nvml)] == [("2g.20gb", 0)]  # never success while it exists
    assert driver.unprepare([ref])[ref[1]] == ""  # the kubelet's retry: a handle of now finds and destroys it
    assert instances(nvml) == [] and driver.checkpoint.claims == {}


def test_a_kept_instance_is_counted_once_however_often_a_failing_prepare_meets_it(node, nvml):
    metrics = Metrics()
    driver, kube = make(node, metrics=metrics)
    ref = claim(kube, "a", mig_name("1g.10gb", 0))

    def process_then_crash(step, uid):
        if step == "compute-instance":
            nvml.run(h.GPU_BDF, 4242, 1 << 30, gpu_instance=nvml.instances(h.GPU_BDF)[0]["id"])
            raise mig_prepare.PrepareError("failed for the test")

    driver.mig.fault = process_then_crash
    assert "failed for the test" in driver.prepare([ref])[ref[1]]["error"]  # rolled back: kept, a process on it
    driver.mig.fault = None
    for _retry in range(3):  # the kubelet retries: its slices are taken by the kept instance, rolled back again
        assert "its memory slices are taken" in driver.prepare([ref])[ref[1]]["error"]
    assert metrics.mig_kept_instances._value.get() == 1
    assert mig_prepare.held_placements() == {h.GPU_BDF: [(0, 1)]}
    nvml.end(h.GPU_BDF, 4242)
    rescan(driver)  # its process ended: destroyed, no longer counted
    assert instances(nvml) == [] and metrics.mig_kept_instances._value.get() == 0
    assert "error" not in driver.prepare([ref])[ref[1]]


def test_a_claim_nvml_cannot_make_again_after_a_reboot_is_retried_and_refused_until_it_is(node, nvml):
    """After a reboot NVML fails to make a committed claim's instance: its Prepare answers an error (never the
    stale spec), the checkpoint keeps the old boot (a restart still makes it again), and a rescan makes it."""
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("1g.10gb", 1))
    assert "error" not in driver.prepare([ref])[ref[1]]
    nvml.reset(h.GPU_BDF, reboot=True)
    for path in node.cdi.iterdir():
        path.unlink()
    (node.proc / "sys" / "kernel" / "random" / "boot_id").write_text("99999999-2222-3333-4444-555555555555\n")
    nvml.inject("nvmlDeviceCreateGpuInstanceWithPlacement", nvml.NVML_ERROR_UNKNOWN, times=3)
    restarted, _kube = make(node, kube=kube)  # the start and its first rescan fail
    assert instances(nvml) == [] and set(restarted.mig.unrefreshed) == {ref[1]}
    assert on_disk(node)[0]["boot_id"] == BOOT  # the old boot kept
    answer = restarted.prepare([ref])[ref[1]]  # the third injected error
    assert "not found or made again since the reboot" in answer["error"] and "Unknown" in answer["error"], answer
    again, _kube = make(node, kube=kube)  # a restart meanwhile: still a new boot, the instance made now
    assert again.mig.unrefreshed == {} and [(p, s) for p, s, _cis in instances(nvml)] == [("1g.10gb", 1)]
    assert on_disk(node)[0]["boot_id"].startswith("99999999")
    entry = again.checkpoint.claims[ref[1]]
    assert again.prepare([ref])[ref[1]] == {"devices": entry["devices"]}


def test_a_rescan_makes_a_claims_instance_again_and_rewrites_its_spec(node, nvml):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("1g.10gb", 1))
    assert "error" not in driver.prepare([ref])[ref[1]]
    nvml.reset(h.GPU_BDF, reboot=True)
    (node.proc / "sys" / "kernel" / "random" / "boot_id").write_text("99999999-2222-3333-4444-555555555555\n")
    nvml.inject("nvmlDeviceCreateGpuInstanceWithPlacement", nvml.NVML_ERROR_UNKNOWN, times=2)
    restarted, _kube = make(node, kube=kube)  # the start and its first rescan fail
    assert set(restarted.mig.unrefreshed) == {ref[1]}
    rescan(restarted)
    assert restarted.mig.unrefreshed == {}
    (made,) = nvml.instances(h.GPU_BDF)
    entry = restarted.checkpoint.claims[ref[1]]
    assert entry["devices"][0]["mig"]["uuid"] == made["uuid"][0]
    spec = json.loads((node.cdi / f"aligned.dev-claim_{ref[1]}.json").read_text())
    assert spec == entry["cdi_spec"] and f"NVIDIA_VISIBLE_DEVICES={made['uuid'][0]}" in str(spec)
    assert on_disk(node)[0]["boot_id"].startswith("99999999")


def test_a_full_disk_when_the_made_instance_is_recorded_keeps_the_claim_refused_and_the_old_boot(
    node, nvml, monkeypatch
):
    """The instance is made again but the checkpoint cannot be written: Prepare still refuses (naming the write),
    the old boot ID stays, and the next Prepare finds the instance NVML has and records it."""
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("1g.10gb", 1))
    assert "error" not in driver.prepare([ref])[ref[1]]
    nvml.reset(h.GPU_BDF, reboot=True)
    (node.proc / "sys" / "kernel" / "random" / "boot_id").write_text("99999999-2222-3333-4444-555555555555\n")
    nvml.inject("nvmlDeviceCreateGpuInstanceWithPlacement", nvml.NVML_ERROR_UNKNOWN, times=2)
    restarted, _kube = make(node, kube=kube)  # the start and its first rescan fail
    assert set(restarted.mig.unrefreshed) == {ref[1]}

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(restarted.checkpoint, "save", disk_full)
        answer = restarted.prepare([ref])[ref[1]]
    assert "writing the checkpoint" in answer["error"] and "No space left" in answer["error"], answer
    assert [(p, s) for p, s, _cis in instances(nvml)] == [("1g.10gb", 1)]  # made, once
    assert on_disk(node)[0]["boot_id"] == BOOT and restarted.checkpoint.boot_id == BOOT
    entry_answer = restarted.prepare([ref])[ref[1]]
    assert "error" not in entry_answer and restarted.mig.unrefreshed == {}
    (made,) = nvml.instances(h.GPU_BDF)
    assert restarted.checkpoint.claims[ref[1]]["devices"][0]["mig"]["uuid"] == made["uuid"][0]
    assert on_disk(node)[0]["boot_id"].startswith("99999999")


def test_a_rescan_between_the_unprepare_of_the_gpu_whole_and_its_commit_leaves_mig_mode_to_the_next(
    node, nvml, monkeypatch
):
    driver, kube = make(node)
    whole = claim(kube, "whole", h.GPU)
    assert "error" not in driver.prepare([whole])[whole[1]] and mig_mode(nvml) == [0, 0]
    commit = driver._commit

    def rescan_first(**kwargs):
        monkeypatch.setattr(driver, "_commit", commit)  # once
        rescan(driver)  # the claim is still committed: MIG mode stays off under it
        assert mig_mode(nvml) == [0, 0]
        return commit(**kwargs)

    monkeypatch.setattr(driver, "_commit", rescan_first)
    assert driver.unprepare([whole])[whole[1]] == "" and driver.checkpoint.claims == {}
    rescan(driver)  # the first rescan after the commit
    assert mig_mode(nvml) == [1, 1]


def fail_with_a_process_on_it(nvml, start):
    """A fault hook: the claim's instance gets a process, then its Prepare fails (its roll back keeps it)."""

    def fault(step, _uid):
        if step == "compute-instance":
            gi = next(i["id"] for i in nvml.instances(h.GPU_BDF) if i["start"] == start)
            nvml.run(h.GPU_BDF, 4242, 1 << 30, gpu_instance=gi)
            raise mig_prepare.PrepareError("failed for the test")

    return fault


def test_an_instance_a_roll_back_keeps_while_a_rescan_checks_the_kept_ones_stays_kept(node, nvml, monkeypatch):
    busy = nvml.create(h.GPU_BDF, "3g.40gb", start=4)
    nvml.run(h.GPU_BDF, 777, 1 << 30, gpu_instance=busy)
    metrics = Metrics()
    driver, kube = make(node, metrics=metrics)  # kept at start: a process runs on it
    assert mig_prepare.held_placements() == {h.GPU_BDF: [(4, 4)]}
    ref = claim(kube, "a", mig_name("1g.10gb", 0))
    driver.mig.fault = fail_with_a_process_on_it(nvml, 0)
    answers = []
    ran = after_the_first_lock(driver, monkeypatch, lambda: answers.append(driver.prepare([ref])[ref[1]]))
    driver.mig.sweep()  # checks the kept instance; right after, the claim fails and its roll back keeps its own
    assert ran and "failed for the test" in answers[0]["error"], answers
    assert sorted(mig_prepare.held_placements()[h.GPU_BDF]) == [(0, 1), (4, 4)]  # neither published
    assert metrics.mig_kept_instances._value.get() == 2
    nvml.end(h.GPU_BDF, 777)
    nvml.end(h.GPU_BDF, 4242)
    rescan(driver)  # both processes ended: both destroyed
    assert instances(nvml) == [] and mig_prepare.held_placements() == {}
    assert metrics.mig_kept_instances._value.get() == 0


def test_an_instance_a_roll_back_keeps_while_a_rescan_sweeps_its_gpu_stays_kept(node, nvml, monkeypatch):
    nvml.inject("nvmlDeviceGetGpuInstances", nvml.NVML_ERROR_UNKNOWN, times=None)
    driver, kube = make(node)  # the start cannot list the GPU's instances: each rescan sweeps it
    nvml.clear_faults()
    ref = claim(kube, "a", mig_name("1g.10gb", 0))
    driver.mig.fault = fail_with_a_process_on_it(nvml, 0)
    save = driver.mig._save_started

    def sweep_first(uid, records):
        if not records:  # the roll back kept the instance; its started record is dropped now
            monkeypatch.setattr(driver.mig, "_save_started", save)
            driver.mig.sweep()  # the started record still names the placement
        return save(uid, records)

    monkeypatch.setattr(driver.mig, "_save_started", sweep_first)
    assert "failed for the test" in driver.prepare([ref])[ref[1]]["error"]
    assert driver.mig.unswept == set() and driver.checkpoint.mig_started == {}
    assert mig_prepare.held_placements() == {h.GPU_BDF: [(0, 1)]}  # kept, not published
    nvml.end(h.GPU_BDF, 4242)
    rescan(driver)
    assert instances(nvml) == [] and mig_prepare.held_placements() == {}


def test_a_static_claim_whose_instance_is_gone_at_start_is_refused_until_the_layout_makes_it(node, nvml):
    """The driver starts after a reboot before the boot unit made the layout: the claim's Prepare answers why
    (never the old instance's UUID), the old boot is kept, and the instance made since is recorded."""
    gi = nvml.create(h.GPU_BDF, "3g.40gb", start=4)
    driver, kube = make(node, mode="static")
    old = nvml.mig_uuid(h.GPU_BDF, gi)
    ref = claim(kube, "a", publish(driver, "3g.40gb", 4, 4, static_uuid=old))
    assert "error" not in driver.prepare([ref])[ref[1]]
    nvml.reset(h.GPU_BDF, reboot=True)  # MIG mode stays on, no instance yet
    (node.proc / "sys" / "kernel" / "random" / "boot_id").write_text("99999999-2222-3333-4444-555555555555\n")
    restarted, _kube = make(node, mode="static", kube=kube)
    assert set(restarted.mig.unrefreshed) == {ref[1]} and on_disk(node)[0]["boot_id"] == BOOT
    error = restarted.prepare([ref])[ref[1]]["error"]
    assert "since the reboot" in error and f"GPU {h.GPU_BDF} has no static MIG instance 3g.40gb" in error, error
    nvml.create(h.GPU_BDF, "3g.40gb", start=4, compute=False)  # the boot unit half-way: no compute instance yet
    rescan(restarted)
    assert "error" in restarted.prepare([ref])[ref[1]] and instances(nvml) == [("3g.40gb", 4, [])]
    nvml.create_compute(h.GPU_BDF, gi)
    answer = restarted.prepare([ref])[ref[1]]
    made = nvml.mig_uuid(h.GPU_BDF, gi)
    assert made != old and answer == {"devices": restarted.checkpoint.claims[ref[1]]["devices"]}
    assert answer["devices"][0]["mig"]["uuid"] == made and restarted.mig.unrefreshed == {}
    spec = json.loads((node.cdi / f"aligned.dev-claim_{ref[1]}.json").read_text())
    assert f"NVIDIA_VISIBLE_DEVICES={made}" in str(spec) and old not in str(spec)
    assert on_disk(node)[0]["boot_id"].startswith("99999999")
    assert restarted.unprepare([ref])[ref[1]] == "" and instances(nvml) == [("3g.40gb", 4, [0])]  # never destroyed
