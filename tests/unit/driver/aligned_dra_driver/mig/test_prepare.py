# SPDX-License-Identifier: Apache-2.0
"""MIG devices in the driver, in process: dynamic Prepare and Unprepare, static devices, the GPU whole, and the
fault lab's MIG cases (a crash at each step of Prepare, unknown instances at start, a new boot), each crash
simulated by stopping at the step and running the start-up restore on a fresh Driver over the same state."""

from __future__ import annotations

import json
import logging

import pytest
from aligned_dra_driver.devices.inventory import Options
from aligned_dra_driver.kubelet import driver as drv
from aligned_dra_driver.mig import prepare as mig_prepare
from aligned_dra_driver.usage.metrics import Metrics

from ansible_collections.aligned.dra.tests.support.fakes import nvml as fake_nvml
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses import driver_doubles as d
from ansible_collections.aligned.dra.tests.support.harnesses.driver_mig import (
    BOOT,
    AsProbed,
    Crash,
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

caps_minor = fake_nvml.nvml_mig.caps_minor


def test_prepare_creates_the_instance_and_gives_its_caps_nodes(node, nvml):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("1g.10gb", 1))
    answer = driver.prepare([ref])[ref[1]]
    assert "error" not in answer, answer
    assert instances(nvml) == [("1g.10gb", 1, [0])]
    (made,) = nvml.instances(h.GPU_BDF)
    entry = driver.checkpoint.claims[ref[1]]
    assert entry["devices"][0]["mig"] == {
        "mode": "dynamic",
        "profile": "1g.10gb",
        "profile_id": made["profile_id"],
        "placement": {"start": 1, "size": 1},
        "gpu_instance": made["id"],
        "compute_instance": 0,
        "uuid": made["uuid"][0],
    }
    edits = entry["cdi_spec"]["devices"][0]["containerEdits"]
    paths = [n["path"] for n in edits["deviceNodes"]]
    assert paths[:2] == ["/dev/nvidia0", "/dev/nvidiactl"]
    caps = [n for n in edits["deviceNodes"] if n["path"].startswith("/dev/nvidia-caps/")]
    gi_minor, ci_minor = caps_minor(0, made["id"]), caps_minor(0, made["id"], 0)
    assert caps == [
        {"path": f"/dev/nvidia-caps/nvidia-cap{gi_minor}", "type": "c", "major": 237, "minor": gi_minor},
        {"path": f"/dev/nvidia-caps/nvidia-cap{ci_minor}", "type": "c", "major": 237, "minor": ci_minor},
    ]
    assert f"NVIDIA_VISIBLE_DEVICES={made['uuid'][0]}" in edits["env"]
    data, specs = on_disk(node)
    assert "mig_started" not in data and data["boot_id"] == BOOT
    assert specs == [f"aligned.dev-claim_{ref[1]}.json"]
    assert driver.checkpoint.mig_started == {}


def test_unprepare_destroys_the_instance_and_waits_for_its_process(node, nvml):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("2g.20gb", 0))
    assert "error" not in driver.prepare([ref])[ref[1]]
    nvml.run(h.GPU_BDF, 4242, 1 << 30, gpu_instance=nvml.instances(h.GPU_BDF)[0]["id"])
    error = driver.unprepare([ref])[ref[1]]
    assert "2g.20gb at memory slice 0" in error and "4242" in error and h.GPU_BDF in error
    assert ref[1] in driver.checkpoint.claims and instances(nvml) == [("2g.20gb", 0, [0])]
    assert len(list(node.cdi.iterdir())) == 1  # still prepared: its spec back
    nvml.end(h.GPU_BDF, 4242)
    assert driver.unprepare([ref])[ref[1]] == ""
    assert instances(nvml) == [] and driver.checkpoint.claims == {}
    assert list(node.cdi.iterdir()) == []
    again = claim(kube, "b", mig_name("1g.10gb", 0))
    assert "error" not in driver.prepare([again])[again[1]]
    nvml.remove_gpu(h.GPU_BDF)  # NVML does not find the GPU, but its PCI function is still there: kept
    error = driver.unprepare([again])[again[1]]
    assert "NVML cannot find the GPU" in error and "the claim stays prepared" in error
    assert again[1] in driver.checkpoint.claims
    (node.sys / "bus" / "pci" / "devices" / h.GPU_BDF).unlink()  # gone from the bus: its instance went with it
    assert driver.unprepare([again])[again[1]] == "" and driver.checkpoint.claims == {}


def test_claims_of_one_call_each_get_their_instance_and_a_failing_one_is_rolled_back_alone(node, nvml):
    driver, kube = make(node)
    refs = [claim(kube, "a", mig_name("1g.10gb", 0)), claim(kube, "b", mig_name("3g.40gb", 4))]
    refs.append(claim(kube, "c", mig_name("2g.20gb", 0)))  # slice 0 is taken by a or c, whichever comes first
    answers = driver.prepare(refs)
    assert sum("error" in a for a in answers.values()) == 1
    assert len(instances(nvml)) == 2 and driver.checkpoint.mig_started == {}
    assert set(driver.checkpoint.claims) == {u for u, a in answers.items() if "error" not in a}


def test_a_taken_placement_fails_the_claim_and_leaves_nothing(node, nvml):
    driver, kube = make(node)
    first = claim(kube, "a", mig_name("1g.10gb", 1))
    assert "error" not in driver.prepare([first])[first[1]]
    second = claim(kube, "b", mig_name("2g.20gb", 0))  # slices 0 and 1: slice 1 is taken
    error = driver.prepare([second])[second[1]]["error"]
    assert h.GPU_BDF in error and "2g.20gb at memory slice 0 (size 2)" in error and "taken" in error
    assert instances(nvml) == [("1g.10gb", 1, [0])]
    data, specs = on_disk(node)
    assert set(data["claims"]) == {first[1]} and "mig_started" not in data
    assert specs == [f"aligned.dev-claim_{first[1]}.json"]


def test_a_claim_failing_after_its_instance_is_rolled_back(node, nvml, monkeypatch):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("1g.10gb", 0))
    monkeypatch.setattr(drv.cdi, "spec_problem", lambda spec: "refused for the test")
    assert "refused for the test" in driver.prepare([ref])[ref[1]]["error"]
    assert instances(nvml) == [] and driver.checkpoint.mig_started == {}
    assert "mig_started" not in on_disk(node)[0]


def test_hopper_mig_mode_is_turned_on_and_ampere_is_never_toggled(node, monkeypatch):
    nvml = fake(node, monkeypatch, mig=False)
    driver, kube = make(node)
    assert mig_mode(nvml) == [1, 1]  # a start turns a dynamic Hopper GPU's MIG mode on
    nvml.nvmlDeviceSetMigMode(nvml.nvmlDeviceGetHandleByPciBusId(h.GPU_BDF), 0)
    ref = claim(kube, "a", mig_name("1g.10gb", 0))
    assert "error" not in driver.prepare([ref])[ref[1]]
    assert mig_mode(nvml) == [1, 1] and instances(nvml) == [("1g.10gb", 0, [0])]
    nvml = fake(node, monkeypatch, model="A100-SXM4-40GB", mig=False)
    driver, kube = make(node, kube=kube)
    again = claim(kube, "b", publish(driver, "1g.5gb", 0, 1))
    error = driver.prepare([again])[again[1]]["error"]
    assert f"GPU {h.GPU_BDF} (Ampere) has MIG mode off" in error
    assert mig_mode(nvml) == [0, 0] and instances(nvml) == [] and "mig_started" not in on_disk(node)[0]


def test_the_gpu_whole_runs_with_mig_mode_off(node, nvml, monkeypatch):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("1g.10gb", 0))
    assert "error" not in driver.prepare([ref])[ref[1]]
    whole = claim(kube, "whole", h.GPU)
    error = driver.prepare([whole])[whole[1]]["error"]
    gi = nvml.instances(h.GPU_BDF)[0]["id"]
    assert "needs MIG mode off" in error and f"1g.10gb at memory slice 0 (GPU instance {gi})" in error
    assert driver.unprepare([ref])[ref[1]] == ""
    assert "error" not in driver.prepare([whole])[whole[1]]
    assert mig_mode(nvml) == [0, 0]
    driver, kube = make(node, kube=kube)  # a start keeps the mode while a claim holds the GPU whole
    assert mig_mode(nvml) == [0, 0]
    assert driver.unprepare([whole])[whole[1]] == ""
    rescan(driver)  # the Unprepare committed, the next rescan turns MIG mode back on
    assert mig_mode(nvml) == [1, 1]  # back to MIG: its MIG devices are published again
    nvml = fake(node, monkeypatch, model="A100-SXM4-40GB")
    driver, kube = make(node, kube=kube)
    ampere = claim(kube, "ampere", h.GPU)
    assert "needs a GPU reset" in driver.prepare([ampere])[ampere[1]]["error"]
    assert mig_mode(nvml) == [1, 1]


def test_static_devices_are_found_and_never_destroyed(node, nvml):
    gi = nvml.create(h.GPU_BDF, "3g.40gb", start=4)
    driver, kube = make(node, mode="static")
    name = publish(driver, "3g.40gb", 4, 4, static_uuid=nvml.mig_uuid(h.GPU_BDF, gi))
    ref = claim(kube, "a", name)
    answer = driver.prepare([ref])[ref[1]]
    assert "error" not in answer, answer
    mig = driver.checkpoint.claims[ref[1]]["devices"][0]["mig"]
    assert (mig["mode"], mig["gpu_instance"], mig["uuid"]) == ("static", gi, nvml.mig_uuid(h.GPU_BDF, gi))
    assert driver.unprepare([ref])[ref[1]] == ""
    assert instances(nvml) == [("3g.40gb", 4, [0])]
    missing = claim(kube, "b", mig_name("1g.10gb", 0))
    assert "no MIG instance 1g.10gb at memory slice 0" in driver.prepare([missing])[missing[1]]["error"]


def test_a_gpu_the_driver_does_not_run_as_mig_is_refused(node, nvml):
    opts = Options(**node.options(mig="dynamic", mig_gpus=["0000:99:00.0"], mig_scanner=AsProbed()))
    kube = d.ClaimsInMemory()
    driver = drv.Driver(opts, kube, status_queue=d.StatusRecorder(kube))
    driver.restore()
    driver.rescan()
    ref = claim(kube, "a", publish(driver, "1g.10gb", 0, 1))
    assert "is not run as MIG by this driver" in driver.prepare([ref])[ref[1]]["error"]


def test_without_nvml_the_driver_starts_and_a_mig_claim_fails_saying_so(node, monkeypatch, caplog):
    missing = fake_nvml.FakeNvml(library=False)
    monkeypatch.setattr(mig_prepare, "load_pynvml", lambda: missing)
    with caplog.at_level(logging.ERROR, logger="aligned_dra_driver.mig.prepare"):
        driver, kube = make(node)
    assert any("NVML is not usable" in r.message for r in caplog.records)
    ref = claim(kube, "a", mig_name("1g.10gb", 0))
    error = driver.prepare([ref])[ref[1]]["error"]
    assert "NVML is not usable, MIG devices cannot be prepared" in error and driver.checkpoint.claims == {}


def test_usage_of_a_mig_claim_comes_from_its_mig_handle(node, nvml):
    from aligned_dra_driver.claims.pods import ClaimPods
    from aligned_dra_driver.usage.series import UsageCollector
    from aligned_dra_driver.usage.watcher import GpuReading, NvmlReader, nvidia_gpus

    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("2g.20gb", 0))
    assert "error" not in driver.prepare([ref])[ref[1]]
    assert nvidia_gpus(driver.inventory) == {h.GPU_BDF: h.GPU}  # the MIG devices are read with their parent
    (made,) = nvml.instances(h.GPU_BDF)
    nvml.run(h.GPU_BDF, 4242, 3 << 30, gpu_instance=made["id"])
    reader = NvmlReader(lambda: nvml)
    assert reader.ready()
    migs = reader._migs(nvml.nvmlDeviceGetHandleByPciBusId(h.GPU_BDF))
    assert list(migs) == [made["id"]] and migs[made["id"]].uuid == made["uuid"][0]
    assert migs[made["id"]].used >= 3 << 30 and migs[made["id"]].total >= 20 * 10**9
    pods = ClaimPods()
    pods.set(ref[1], [("pod-a", "0f0f0f0f-0000-0000-0000-000000000001")])
    reading = GpuReading(h.GPU_BDF, "GPU-x", 80 << 30, 77 << 30, 3 << 30, migs=migs)
    watcher = type("Watcher", (), {"available": True, "snapshot": {h.GPU_BDF: reading}})()
    watcher.gpus = lambda: {h.GPU_BDF: h.GPU}
    families = {f.name: f for f in UsageCollector(watcher, lambda: driver.checkpoint.claims, pods).collect()}
    (used,) = families["aligned_dra_claim_gpu_memory_used_bytes"].samples
    assert used.labels["gpu_uuid"] == made["uuid"][0] and used.labels["device"] == mig_name("2g.20gb", 0)
    assert used.value == migs[made["id"]].used
    (limit,) = families["aligned_dra_claim_gpu_memory_limit_bytes"].samples
    assert limit.value == migs[made["id"]].total


# -- the fault lab's MIG cases: stop at a step as a crash would, start a fresh driver on the same state --------


@pytest.mark.parametrize("step", ["started", "mig-mode", "gpu-instance", "compute-instance", "cdi-spec"])
def test_a_crash_between_steps_is_rolled_back_and_prepared_again(node, nvml, step):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("2g.20gb", 0))

    def crash(at, uid):
        if at == step:
            raise Crash(at)

    driver.mig.fault = crash
    with pytest.raises(Crash):
        driver.prepare([ref])
    assert ref[1] in on_disk(node)[0]["mig_started"]
    restarted, _kube = make(node, kube=kube)
    assert instances(nvml) == []
    data, specs = on_disk(node)
    assert "mig_started" not in data and data["claims"] == {} and specs == []
    answer = restarted.prepare([ref])[ref[1]]  # the kubelet's retry
    assert "error" not in answer, answer
    assert instances(nvml) == [("2g.20gb", 0, [0])]


def test_a_crash_after_the_commit_keeps_the_claim_and_finds_its_instance(node, nvml):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("1g.10gb", 0))
    assert "error" not in driver.prepare([ref])[ref[1]]
    spec = driver.checkpoint.claims[ref[1]]["cdi_spec"]
    (node.cdi / f"aligned.dev-claim_{ref[1]}.json").unlink()  # a tmpfs CDI directory emptied
    restarted, _kube = make(node, kube=kube)
    assert instances(nvml) == [("1g.10gb", 0, [0])]
    assert restarted.checkpoint.claims[ref[1]]["cdi_spec"] == spec
    assert json.loads((node.cdi / f"aligned.dev-claim_{ref[1]}.json").read_text()) == spec
    assert restarted.unprepare([ref])[ref[1]] == "" and instances(nvml) == []


def test_an_unprepare_cut_short_after_the_destroy_is_not_made_again_in_the_same_boot(node, nvml, caplog):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("2g.20gb", 0))
    assert "error" not in driver.prepare([ref])[ref[1]]
    driver.mig.unprepare(driver.checkpoint.claims[ref[1]])  # destroyed; the crash came before the checkpoint write
    with caplog.at_level(logging.ERROR, logger="aligned_dra_driver.mig.prepare"):
        restarted, _kube = make(node, kube=kube)
    assert instances(nvml) == [] and ref[1] in restarted.checkpoint.claims
    assert any("is gone in this boot: not made again" in r.message for r in caplog.records)
    assert restarted.unprepare([ref])[ref[1]] == "" and restarted.checkpoint.claims == {}
    assert list(node.cdi.iterdir()) == []


def test_unknown_instances_at_start_idle_destroyed_busy_kept_warned_counted(node, nvml, caplog):
    nvml.create(h.GPU_BDF, "3g.40gb", start=0)
    busy = nvml.create(h.GPU_BDF, "3g.40gb", start=4)
    nvml.run(h.GPU_BDF, 777, 1 << 30, gpu_instance=busy)
    metrics = Metrics()
    with caplog.at_level(logging.WARNING, logger="aligned_dra_driver.mig.prepare"):
        driver, _kube = make(node, metrics=metrics)
    assert instances(nvml) == [("3g.40gb", 4, [0])]
    assert any("3g.40gb at memory slice 4" in r.message and "777" in r.message for r in caplog.records)
    assert mig_prepare.held_placements() == {h.GPU_BDF: [(4, 4)]}
    assert metrics.mig_kept_instances._value.get() == 1
    driver.rescan()  # the process still runs: kept
    assert instances(nvml) == [("3g.40gb", 4, [0])]
    nvml.end(h.GPU_BDF, 777)
    driver.rescan()
    assert instances(nvml) == [] and mig_prepare.held_placements() == {}
    assert metrics.mig_kept_instances._value.get() == 0


def test_a_new_boot_creates_the_prepared_claims_instances_again(node, nvml):
    driver, kube = make(node)
    ref = claim(kube, "a", mig_name("1g.10gb", 1))
    assert "error" not in driver.prepare([ref])[ref[1]]
    old = driver.checkpoint.claims[ref[1]]["devices"][0]["mig"]
    nvml.reset(h.GPU_BDF, reboot=True)  # the instances are gone, the CDI directory (tmpfs) empty
    for path in node.cdi.iterdir():
        path.unlink()
    (node.proc / "sys" / "kernel" / "random" / "boot_id").write_text("99999999-2222-3333-4444-555555555555\n")
    restarted, _kube = make(node, kube=kube)
    (made,) = nvml.instances(h.GPU_BDF)
    assert (made["profile"], made["start"]) == ("1g.10gb", 1)
    entry = restarted.checkpoint.claims[ref[1]]
    assert entry["devices"][0]["mig"] == dict(old, gpu_instance=made["id"], uuid=made["uuid"][0])
    assert made["uuid"][0] != old["uuid"]
    assert f"NVIDIA_VISIBLE_DEVICES={made['uuid'][0]}" in entry["cdi_spec"]["devices"][0]["containerEdits"]["env"]
    assert json.loads((node.cdi / f"aligned.dev-claim_{ref[1]}.json").read_text()) == entry["cdi_spec"]
    assert on_disk(node)[0]["boot_id"].startswith("99999999")
    assert restarted.prepare([ref])[ref[1]] == {"devices": entry["devices"]}


def test_with_mig_off_nothing_changes(node, nvml):
    opts = Options(**node.options())
    kube = d.ClaimsInMemory()
    driver = drv.Driver(opts, kube, status_queue=d.StatusRecorder(kube))
    driver.restore()
    assert driver.mig is None
    assert set(json.loads((node.state / "checkpoint.json").read_text())) == {"version", "driver", "node", "claims"}
