# SPDX-License-Identifier: Apache-2.0
"""The driver process with ``--mig=dynamic``: the fault lab's MIG paths end to end, one test each: a start after a
reboot, and NVML failing (a mode change refused while a process holds the GPU, an error in Unprepare).

Before the start: the checkpoint holds a prepared claim's MIG device (2g.20gb at memory slice 4) made in an
earlier boot, and the checkpoint's ``boot_id`` is that boot's; NVML (tests/support/fakes/nvml.py, the driver's
``pynvml`` through ``fake_nvml.write_module``) has lost that instance with the reboot, and has two instances no
claim holds: 1g.10gb at slice 6, idle, and 3g.40gb at slice 0, which a process runs on. The started driver must
create the claim's instance again and write its CDI spec with the new nvidia-caps minors, destroy the idle
instance, keep the busy one (a warning, ``aligned_dra_mig_kept_instances`` 1) and record the new boot; then a claim
allocated the freed placement is prepared over gRPC (its instance made) and unprepared (destroyed). The
in-process cases (a crash at each step of Prepare, an NVML error at each call) are in
tests/unit/driver/aligned_dra_driver/mig/test_prepare.py and test_prepare_faults.py.
"""

from __future__ import annotations

import json
import shutil

import pytest
from aligned_dra_driver.claims.checkpoint import Checkpoint

from ansible_collections.aligned.dra.tests.support.fakes import nvml as fake_nvml
from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

UID = "0b0e7d5c-1f2a-4c3d-9e8f-0123456789ab"
OLD_BOOT, NEW_BOOT = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"
DEVICE = f"{h.GPU}-mig-2g-20gb-4"
FREED = f"{h.GPU}-mig-1g-10gb-6"  # the idle unknown instance's placement, free again after the start


@pytest.fixture
def setup():
    root = h.short_tmp()
    node = h.NodeTree.build(root)
    env, state = h.gpu_tools(root)
    yield node, env, state
    shutil.rmtree(root, ignore_errors=True)


def prepared_before_the_reboot(node) -> None:
    """The checkpoint of the last boot: one claim with the dynamic MIG device 2g.20gb at slice 4."""
    cdi_name = f"{UID}-{DEVICE}"
    mig = {"mode": "dynamic", "profile": "2g.20gb", "profile_id": 14, "placement": {"start": 4, "size": 2}}
    mig.update(gpu_instance=5, compute_instance=0, uuid="MIG-old")
    device = {"pool": h.NODE, "device": DEVICE, "request_names": ["gpu"], "pci_address": h.GPU_BDF, "kind": "gpu"}
    device.update(cdi_device_ids=[f"aligned.dev/claim={cdi_name}"], share_id=None, mig=mig)
    edits = {"deviceNodes": [{"path": "/dev/nvidia0", "hostPath": str(node.dev / "nvidia0")}], "env": []}
    spec = {
        "cdiVersion": "0.5.0",
        "kind": "aligned.dev/claim",
        "devices": [{"name": cdi_name, "containerEdits": edits}],
    }
    checkpoint = Checkpoint(str(node.state), h.DRIVER, h.NODE)
    checkpoint.boot_id = OLD_BOOT
    checkpoint.save({UID: {"namespace": "default", "name": "mig", "devices": [device], "cdi_spec": spec}})


def test_a_start_after_a_reboot_makes_the_claims_instance_again_and_sweeps_the_unknown(setup):
    node, env, state = setup
    random = node.proc / "sys" / "kernel" / "random"
    random.mkdir(parents=True)
    (random / "boot_id").write_text(NEW_BOOT + "\n")
    nvml = fake_nvml.FakeNvml(procfs=node.proc)
    nvml.add_gpu(h.GPU_BDF, model="H100-SXM5-80GB")
    nvml.enable_mig(h.GPU_BDF)
    nvml.create(h.GPU_BDF, "1g.10gb", start=6)
    busy = nvml.create(h.GPU_BDF, "3g.40gb", start=0)
    nvml.run(h.GPU_BDF, 4242, 1 << 30, gpu_instance=busy)
    nvml.write_state(state)
    prepared_before_the_reboot(node)
    port = h.free_port()
    extra = ["--mig=dynamic", f"--metrics-address=127.0.0.1:{port}"]
    with FakeApiServer("1.36") as api:
        api.create(h.node_object())
        driver = h.DriverProcess(node, api, env=env, extra=extra).start()
        try:
            status, text = h.http_get(f"http://127.0.0.1:{port}/metrics")
            assert status == 200 and h.metric_value(text, "aligned_dra_mig_kept_instances", "") == 1
            fresh = h.claim_ref(api.create(h.claim_object("fresh", [{"request": "gpu", "device": FREED}])))
            answer = driver.prepare([fresh]).claims[fresh["uid"]]
            assert not answer.error, answer.error
            made = fake_nvml.FakeNvml.from_state_file(state).instances(h.GPU_BDF)
            assert ("1g.10gb", 6) in {(i["profile"], i["start"]) for i in made}  # made at Prepare
            assert not driver.unprepare([fresh]).claims[fresh["uid"]].error
        finally:
            assert driver.stop() == 0
    after = fake_nvml.FakeNvml.from_state_file(state)
    assert sorted((i["profile"], i["start"]) for i in after.instances(h.GPU_BDF)) == [("2g.20gb", 4), ("3g.40gb", 0)]
    data = json.loads((node.state / "checkpoint.json").read_text())
    assert data["boot_id"] == NEW_BOOT and "mig_started" not in data
    mig = data["claims"][UID]["devices"][0]["mig"]
    remade = next(i for i in after.instances(h.GPU_BDF) if i["start"] == 4)
    assert (mig["gpu_instance"], mig["uuid"]) == (remade["id"], remade["uuid"][0])
    spec = json.loads((node.cdi / f"aligned.dev-claim_{UID}.json").read_text())
    assert spec == data["claims"][UID]["cdi_spec"]
    minors = [n["minor"] for n in spec["devices"][0]["containerEdits"]["deviceNodes"] if "minor" in n]
    assert minors == [fake_nvml.nvml_mig.caps_minor(0, remade["id"]), fake_nvml.nvml_mig.caps_minor(0, remade["id"], 0)]
    log = driver.log.read_text()
    assert "3g.40gb at memory slice 0 is held by no claim but runs process(es) [4242]" in log


def published_mig(api, profile: str, start: int) -> str | None:
    """The name of the MIG device the driver published for ``profile`` at memory slice ``start``, if any."""
    for item in api.list("resourceslices"):
        for device in item["spec"].get("devices") or []:
            attributes = device.get("attributes") or {}
            if (attributes.get("dra.aligned.dev/profile"), attributes.get("dra.aligned.dev/placementStart")) == (
                {"string": profile},
                {"int": start},
            ):
                return device["name"]
    return None


def test_a_refused_mode_change_is_retried_at_rescan_and_an_nvml_error_in_unprepare_keeps_the_claim(setup):
    """The fault lab's NVML path end to end: a process holds the H100 at start (MIG mode stays off, the process
    named); it ends, and a rescan turns MIG mode on; a MIG claim is prepared, its Unprepare meets an NVML error
    (the claim stays, its instance too), the kubelet's retry releases it, and nothing is left."""
    node, env, state = setup
    nvml = fake_nvml.FakeNvml(procfs=node.proc)
    nvml.add_gpu(h.GPU_BDF, model="H100-SXM5-80GB")
    (node.proc / "4242").mkdir(parents=True)
    (node.proc / "4242" / "comm").write_text("dcgm-exporter\n")
    nvml.run(h.GPU_BDF, 4242, 1 << 30)
    nvml.write_state(state)
    with FakeApiServer("1.36") as api:
        api.create(h.node_object())
        driver = h.DriverProcess(node, api, env=env, extra=["--mig=dynamic"]).start()
        try:
            refused = f"GPU {h.GPU_BDF}: MIG mode stays off: process 4242 (dcgm-exporter) holds the GPU"
            h.wait_until(lambda: refused in driver.log.read_text(), timeout=30, what="the refusal logged")
            nvml = fake_nvml.FakeNvml.from_state_file(state)
            nvml.end(h.GPU_BDF, 4242)
            name = h.wait_until(lambda: published_mig(api, "1g.10gb", 0), timeout=30, what="MIG devices published")
            assert driver.log.read_text().count(refused) == 1  # named once, not at every scan
            ref = h.claim_ref(api.create(h.claim_object("mig", [{"request": "gpu", "device": name}])))
            answer = driver.prepare([ref]).claims[ref["uid"]]
            assert not answer.error, answer.error
            nvml = fake_nvml.FakeNvml.from_state_file(state)  # read again: inject writes the state it holds
            nvml.inject("nvmlComputeInstanceDestroy", nvml.NVML_ERROR_UNKNOWN)
            error = driver.unprepare([ref]).claims[ref["uid"]].error
            assert f"GPU {h.GPU_BDF}: MIG 1g.10gb at memory slice 0" in error and "stays prepared" in error
            data = json.loads((node.state / "checkpoint.json").read_text())
            assert ref["uid"] in data["claims"]
            assert [(i["profile"], i["start"], i["cis"]) for i in nvml.instances(h.GPU_BDF)] == [("1g.10gb", 0, [0])]
            assert not driver.unprepare([ref]).claims[ref["uid"]].error  # the kubelet's retry
        finally:
            assert driver.stop() == 0
    assert fake_nvml.FakeNvml.from_state_file(state).instances(h.GPU_BDF) == []
    data = json.loads((node.state / "checkpoint.json").read_text())
    assert data["claims"] == {} and "mig_started" not in data
    assert list(node.cdi.iterdir()) == []
