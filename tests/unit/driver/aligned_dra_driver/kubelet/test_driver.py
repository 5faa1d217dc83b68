# SPDX-License-Identifier: Apache-2.0
"""Driver state in-process: the call budget, failing writes, odd allocations, concurrency."""

from __future__ import annotations

import errno
import json
import shutil
import threading
import uuid

import pytest
from aligned_dra_driver.devices.inventory import Options
from aligned_dra_driver.kubelet import driver as drv

from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses import driver_doubles as d


@pytest.fixture
def node():
    root = h.memory_tmp()
    yield h.NodeTree.build(root)
    shutil.rmtree(root, ignore_errors=True)


def make(node, **extra):
    opts = Options(**node.options(**extra))
    kube = d.ClaimsInMemory()
    driver = drv.Driver(opts, kube, status_queue=d.StatusRecorder(kube))
    driver.restore()
    driver.rescan()
    return driver, kube


def test_claims_past_the_call_budget_are_answered_with_an_error(node):
    driver, kube = make(node, call_budget=0.0)
    refs = [kube.add(h.claim_object(f"c{i}", [{"request": "gpu", "device": h.GPU}])) for i in range(3)]
    answers = driver.prepare(refs)
    assert set(answers) == {r[1] for r in refs}
    assert all("not reached" in answers[r[1]]["error"] for r in refs[1:])


def test_a_failing_checkpoint_write_prepares_nothing(node, monkeypatch):
    driver, kube = make(node)
    ref = kube.add(h.claim_object("c", [{"request": "gpu", "device": h.GPU}]))

    def fail(claims=None, returning=None) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(driver.checkpoint, "save", fail)
    answer = driver.prepare([ref])[ref[1]]
    assert "No space left" in answer["error"]
    assert list(node.cdi.iterdir()) == []
    assert driver.checkpoint.claims == {}
    assert kube.statuses == []  # nothing reported Ready


def test_status_entries_carry_conditions_and_network_data(node):
    driver, kube = make(node)
    ref = kube.add(
        h.claim_object(
            "c",
            [{"request": "nic", "device": h.NIC}],
            [h.nic_config(interfaceName="net1", addresses=["10.1.0.2/24", "fd00::2/64"])],
        )
    )
    assert "error" not in driver.prepare([ref])[ref[1]]
    ((_ns, name, devices),) = kube.statuses
    assert name == "c"
    assert devices[0]["networkData"] == {
        "interfaceName": "net1",
        "ips": ["10.1.0.2/24", "fd00::2/64"],
        "hardwareAddress": devices[0]["networkData"]["hardwareAddress"],
    }
    assert devices[0]["conditions"][0]["reason"] == "Prepared"


def test_amd_accelerators_get_render_card_and_kfd_nodes(tmp_path):
    from ansible_collections.aligned.dra.tests.support.node_side import sysfs_builder

    root = tmp_path / "mi300x"
    sysfs_builder.build(sysfs_builder.load_layout("mi300x"), root)
    dev = root / "dev"
    for name in ("dri/renderD128", "dri/card0", "kfd"):
        (dev / name).parent.mkdir(parents=True, exist_ok=True)
        h.make_char_device(dev / name)
    tree = h.NodeTree(root)
    for directory in (tree.cdi, tree.state, tree.vendor_cdi):
        directory.mkdir()
    driver, kube = make(tree)
    gpu = "acc-0000-01-00-0"  # MI300X is a processing accelerator (class 0x12)
    assert gpu in {d["name"] for d in driver.inventory.devices}
    ref = kube.add(h.claim_object("amd", [{"request": "gpu", "device": gpu}]))
    answer = driver.prepare([ref])[ref[1]]
    assert "error" not in answer, answer
    edits = driver.checkpoint.claims[ref[1]]["cdi_spec"]["devices"][0]["containerEdits"]
    assert [n["path"] for n in edits["deviceNodes"]] == ["/dev/dri/renderD128", "/dev/dri/card0", "/dev/kfd"]
    assert not any(e.startswith("NVIDIA_VISIBLE_DEVICES") for e in edits["env"])


def gpu_config(**sharing):
    return [
        {
            "source": "FromClaim",
            "opaque": {
                "driver": h.DRIVER,
                "parameters": {"apiVersion": "dra.aligned.dev/v1alpha1", "kind": "GpuConfig", "sharing": sharing},
            },
        }
    ]


def test_time_slicing_sets_the_time_slice_with_nvidia_smi(node, tmp_path, monkeypatch):
    log = tmp_path / "smi.log"
    stand_in = tmp_path / "nvidia-smi"  # test stand-in: no GPU here
    stand_in.write_text(f'#!/bin/sh\necho "$*" >> "{log}"\n')
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    driver, kube = make(node)
    ref = kube.add(
        h.claim_object(
            "ts", [{"request": "gpu", "device": h.GPU}], gpu_config(strategy="TimeSlicing", timeSlice="Long")
        )
    )
    assert "error" not in driver.prepare([ref])[ref[1]]
    assert log.read_text() == f"compute-policy -i {h.GPU_UUID} --set-timeslice=3\n"
    edits = driver.checkpoint.claims[ref[1]]["cdi_spec"]["devices"][0]["containerEdits"]
    assert "ALIGNED_DRA_GPU_SHARING=TimeSlicing/Long" in edits["env"]


def test_time_slicing_without_nvidia_smi_fails_the_claim(node, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    driver, kube = make(node)
    ref = kube.add(
        h.claim_object(
            "ts", [{"request": "gpu", "device": h.GPU}], gpu_config(strategy="TimeSlicing", timeSlice="Short")
        )
    )
    assert "nvidia-smi" in driver.prepare([ref])[ref[1]]["error"]
    default = kube.add(h.claim_object("td", [{"request": "gpu", "device": h.GPU}], gpu_config(strategy="TimeSlicing")))
    assert "error" not in driver.prepare([default])[default[1]]


def test_an_unwritable_cdi_directory_fails_the_claim_not_the_call(node):
    driver, kube = make(node)
    node.cdi.rmdir()
    node.cdi.write_text("not a directory")
    ref = kube.add(h.claim_object("c", [{"request": "gpu", "device": h.GPU}]))
    other = ("default", "00000000-0000-0000-0000-00000000000a", "unknown")
    kube.claims[("default", "unknown")] = {"metadata": {"uid": other[1]}, "status": {}}
    answers = driver.prepare([ref, other])
    assert "cdi" in answers[ref[1]]["error"]
    assert "not allocated" in answers[other[1]]["error"]
    assert driver.checkpoint.claims == {}


def test_a_malformed_claim_fails_only_itself(node):
    driver, kube = make(node)
    bad = ("default", "00000000-0000-0000-0000-00000000000b", "bad")
    kube.claims[("default", "bad")] = {"metadata": {"uid": bad[1]}, "status": {"allocation": {"devices": "oops"}}}
    good = kube.add(h.claim_object("good", [{"request": "gpu", "device": h.GPU}]))
    answers = driver.prepare([bad, good])
    assert "status.allocation.devices is not an object" in answers[bad[1]]["error"]
    assert "error" not in answers[good[1]]


def test_start_stops_mps_daemons_no_claim_uses(node, tmp_path, monkeypatch):
    log = tmp_path / "mps.log"
    stand_in = tmp_path / "nvidia-cuda-mps-control"  # test stand-in: no GPU here
    stand_in.write_text(f'#!/bin/sh\ncat >> "{log}"\nrm -f "$CUDA_MPS_PIPE_DIRECTORY/control"\n')
    stand_in.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    mps_root = tmp_path / "mps"
    pipe = mps_root / h.GPU_BDF.replace(":", "-") / "pipe"
    pipe.mkdir(parents=True)
    (pipe / "control").write_text("")
    make(node, mps_root=str(mps_root))  # restore() runs on start
    assert log.read_text() == "quit\n"
    assert not (pipe / "control").exists()


def test_unprepare_clears_the_status_after_the_checkpoint(node, monkeypatch):
    driver, kube = make(node)
    first = kube.add(h.claim_object("a", [{"request": "gpu", "device": h.GPU}]))
    second = kube.add(h.claim_object("b", [{"request": "nic", "device": h.NIC}]))
    assert all("error" not in a for a in driver.prepare([first, second]).values())
    saved = []
    real_save = driver.checkpoint.save
    monkeypatch.setattr(
        driver.checkpoint,
        "save",
        lambda claims=None, returning=None: (saved.append(set(claims)), real_save(claims, returning)),
    )
    assert driver.unprepare([first]) == {first[1]: ""}
    assert driver.checkpoint.claims.keys() == {second[1]}
    assert driver.unprepare([second, first]) == {second[1]: "", first[1]: ""}
    # each claim the checkpoint had is cleared once, after the checkpoint lost it
    assert [c[2] for c in kube.cleared] == [first[1], second[1]]
    assert saved == [{second[1]}, set()]


def one_gpu(kube, name="c", **result):
    return kube.add(h.claim_object(name, [{"request": "gpu", "device": h.GPU, **result}]))


def claim_files(node):
    return sorted(p.name for p in node.cdi.iterdir()) + sorted(p.name for p in node.state.iterdir())


@pytest.mark.parametrize(
    ("results", "needle"),
    [
        ([{"request": "gpu", "device": h.GPU}, {"request": "gpu", "device": h.GPU}], "allocated twice"),
        ([{"request": "gpu", "device": h.GPU, "driver": "gpu.example.com"}], "no device of driver dra.aligned.dev"),
        ([{"request": "gpu", "device": h.GPU, "shareID": str(uuid.UUID(int=i))} for i in range(33)], "allows 32"),
    ],
)
def test_odd_allocations_are_refused_without_a_spec(node, results, needle):
    driver, kube = make(node)
    before = claim_files(node)
    ref = kube.add(h.claim_object("odd", results))
    answer = driver.prepare([ref])[ref[1]]
    assert needle in answer["error"]
    assert claim_files(node) == before and driver.checkpoint.claims == {} and kube.statuses == []


def test_the_same_device_under_two_share_ids_is_not_a_duplicate(node):
    driver, kube = make(node, fractional_gpus=True)
    driver.rescan()
    results = [{"request": "gpu", "device": h.GPU, "shareID": str(uuid.UUID(int=i))} for i in (1, 2)]
    ref = kube.add(h.claim_object("shared", results))
    answer = driver.prepare([ref])[ref[1]]
    assert "error" not in answer, answer
    spec = json.loads((node.cdi / f"aligned.dev-claim_{ref[1]}.json").read_text())
    assert len(spec["devices"]) == 2


def test_two_shares_of_a_nic_with_one_name_fail_the_claim(node):
    driver, kube = make(node)
    results = [{"request": r, "device": h.NIC, "shareID": str(uuid.UUID(int=i + 1))} for i, r in enumerate("ab")]
    ref = kube.add(h.claim_object("dup", results, [h.nic_config(interfaceName="same")]))
    assert "both be named 'same'" in driver.prepare([ref])[ref[1]]["error"]
    assert list(node.cdi.iterdir()) == []


def test_a_spec_grows_with_its_results_within_the_stated_bound(node):
    from aligned_dra_driver.claims import cdi

    driver, kube = make(node)

    def nic(index):  # the largest NicConfig the driver takes: 16 addresses, 32 routes
        return h.nic_config(
            requests=[f"r{index}"],
            interfaceName=f"net{index}",
            mtu=9000,
            addresses=[f"10.{index}.{i}.2/24" for i in range(16)],
            routes=[{"destination": f"10.{100 + i}.0.0/16", "gateway": f"10.{index}.0.1"} for i in range(32)],
        )

    sizes = {}
    for count in (1, 4, 16, 32):
        results = [{"request": f"r{i}", "device": h.NIC, "shareID": str(uuid.UUID(int=i + 1))} for i in range(count)]
        claim = h.claim_object("big", results, [nic(i) for i in range(count)])
        claim["metadata"]["uid"] = str(uuid.UUID(int=1000 + count))
        entry, _status = driver._plan("default", claim["metadata"]["uid"], "big", claim)
        sizes[count] = len(json.dumps(entry["cdi_spec"], indent=1, sort_keys=True))
        assert cdi.spec_problem(entry["cdi_spec"]) is None
        assert sizes[count] <= count * cdi.MAX_SPEC_BYTES_PER_DEVICE
    per_device = (sizes[32] - sizes[1]) / 31
    print(f"CDI spec bytes by results: {sizes}, {per_device:.0f} per device")
    assert abs(sizes[16] - (sizes[1] + 15 * per_device)) < 0.05 * sizes[16]  # linear in the results


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"devices": []}, "at least one device"),
        ({"devices": [{"name": "a", "containerEdits": {}}, {"name": "a", "containerEdits": {}}]}, "twice"),
        ({"devices": [{"name": "a b", "containerEdits": {}}]}, "not a CDI device name"),
        ({"devices": [{"name": "a", "containerEdits": {"env": ["NOEQUALS"]}}]}, "NAME=VALUE"),
        ({"devices": [{"name": "a", "containerEdits": {"deviceNodes": [{"path": "dev/x"}]}}]}, "absolute"),
        ({"devices": [{"name": "a", "containerEdits": {"hooks": [{"hookName": "x", "path": "/h"}]}}]}, "hookName"),
        ({"devices": [{"name": "a", "containerEdits": {"env": ["X=" + "y" * 9000]}}]}, "per device"),
    ],
)
def test_specs_a_cdi_consumer_would_refuse_are_caught(spec, needle):
    from aligned_dra_driver.claims import cdi

    assert needle in cdi.spec_problem({"cdiVersion": cdi.CDI_VERSION, "kind": cdi.CDI_KIND, **spec})


def test_a_full_state_disk_during_prepare_leaves_memory_checkpoint_and_cdi_as_they_were(node, monkeypatch):
    driver, kube = make(node)
    kept = one_gpu(kube, "kept")
    assert "error" not in driver.prepare([kept])[kept[1]]
    before = (node.state / "checkpoint.json").read_bytes()

    def full(path, data, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("aligned_dra_driver.claims.checkpoint.atomic_write", full)
    ref = one_gpu(kube, "new")
    answer = driver.prepare([ref])[ref[1]]
    assert "No space left on device" in answer["error"] and "checkpoint" in answer["error"]
    assert set(driver.checkpoint.claims) == {kept[1]}
    assert (node.state / "checkpoint.json").read_bytes() == before
    assert {p.name for p in node.cdi.iterdir()} == {f"aligned.dev-claim_{kept[1]}.json"}
    assert [n for _ns, n, _d in kube.statuses] == ["kept"] and kube.last == {kept[1]: "apply"}


def test_a_full_state_disk_during_unprepare_keeps_the_claim_until_the_checkpoint_is_written(node, monkeypatch):
    driver, kube = make(node)
    ref = one_gpu(kube)
    assert "error" not in driver.prepare([ref])[ref[1]]
    spec = node.cdi / f"aligned.dev-claim_{ref[1]}.json"
    content = spec.read_bytes()
    real_save = drv.Checkpoint.save

    def full(self, claims=None, returning=None):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(drv.Checkpoint, "save", full)
    answer = driver.unprepare([ref])
    assert "No space left on device" in answer[ref[1]] and "stays prepared" in answer[ref[1]]
    assert ref[1] in driver.checkpoint.claims  # in memory, on disk, and its spec back in place
    assert ref[1] in json.loads((node.state / "checkpoint.json").read_text())["claims"]
    assert spec.read_bytes() == content and kube.cleared == []
    monkeypatch.setattr(drv.Checkpoint, "save", real_save)
    assert driver.unprepare([ref]) == {ref[1]: ""}  # the kubelet's retry
    assert driver.checkpoint.claims == {} and not spec.exists() and kube.last[ref[1]] == "clear"


def test_an_unprepare_that_cannot_remove_the_spec_keeps_the_claim(node, monkeypatch):
    driver, kube = make(node)
    ref = one_gpu(kube)
    assert "error" not in driver.prepare([ref])[ref[1]]

    def read_only(cdi_dir, uid, **_names):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr("aligned_dra_driver.claims.cdi.remove_spec", read_only)
    assert "Read-only file system" in driver.unprepare([ref])[ref[1]]
    assert ref[1] in driver.checkpoint.claims


def make_slow(node, **extra):
    driver, _kube = make(node, **extra)
    kube = d.SlowClaims()
    driver.kube = kube
    driver.status = d.StatusRecorder(kube)
    return driver, kube


def test_one_hung_claim_does_not_hold_up_other_calls(node):
    driver, kube = make_slow(node)
    hung = one_gpu(kube, "hung")
    kube.hold["hung"] = threading.Event()
    others = [one_gpu(kube, f"o{i}") for i in range(11)]
    box = {}
    thread = threading.Thread(target=lambda: box.update(driver.prepare([hung], budget=30)))
    thread.start()
    assert kube.waiting.wait(5)
    answers = {}
    calls = [threading.Thread(target=lambda r=r: answers.update(driver.prepare([r]))) for r in others]
    for call in calls:
        call.start()
    for call in calls:
        call.join(10)
    # all eleven answered while the first claim's GET still hangs
    assert thread.is_alive() and len(answers) == 11 and all("error" not in a for a in answers.values())
    assert all(driver.unprepare([r]) == {r[1]: ""} for r in others[:5])
    kube.hold["hung"].set()
    thread.join(10)
    assert "error" not in box[hung[1]]


def test_a_second_call_on_a_busy_claim_waits_at_most_its_budget(node):
    driver, kube = make_slow(node)
    hung = one_gpu(kube, "hung")
    kube.hold["hung"] = threading.Event()
    thread = threading.Thread(target=lambda: driver.prepare([hung], budget=30))
    thread.start()
    assert kube.waiting.wait(5)
    # the prepare holds the claim until released: any budget ends in the same answer, so a short one
    answer = driver.unprepare([hung], budget=0.01)
    assert "did not finish within the budget" in answer[hung[1]]
    kube.hold["hung"].set()
    thread.join(10)
    assert driver.unprepare([hung]) == {hung[1]: ""}
    assert len(driver.claim_locks) == 0  # no lock left behind


def test_unprepare_racing_prepare_of_the_same_claim_ends_in_one_state_and_the_status_agrees(node):
    for round_ in range(20):
        driver, kube = make_slow(node)
        ref = one_gpu(kube, f"race{round_}")
        answers = {}
        barrier = threading.Barrier(2)

        def call(key, fn, ref, barrier, answers):
            barrier.wait()
            answers[key] = fn([ref])[ref[1]]

        threads = [
            threading.Thread(target=call, args=("prepare", driver.prepare, ref, barrier, answers)),
            threading.Thread(target=call, args=("unprepare", driver.unprepare, ref, barrier, answers)),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert "error" not in answers["prepare"] and answers["unprepare"] == ""
        prepared = ref[1] in driver.checkpoint.claims
        spec = (node.cdi / f"aligned.dev-claim_{ref[1]}.json").exists()
        assert prepared == spec
        # the last status operation matches the end state: Ready only on a prepared claim
        assert kube.last.get(ref[1]) == ("apply" if prepared else "clear")
        driver.unprepare([ref])


def test_specs_unseen_at_start_are_never_removed_later(node, monkeypatch):
    from aligned_dra_driver.claims import cdi

    uid = str(uuid.UUID(int=77))
    spec = {
        "cdiVersion": cdi.CDI_VERSION,
        "kind": cdi.CDI_KIND,
        "devices": [{"name": f"{uid}-x", "containerEdits": {}}],
    }
    cdi.write_spec(str(node.cdi), uid, spec)
    real = cdi.claim_specs
    calls = []

    def unlistable_once(cdi_dir, **names):
        calls.append(cdi_dir)
        if len(calls) == 1:
            raise PermissionError(13, "Permission denied")
        return real(cdi_dir, **names)

    monkeypatch.setattr(cdi, "claim_specs", unlistable_once)
    driver, _kube = make(node)  # starts: the checkpoint is missing and no spec could be seen
    driver.retry_restore()  # the directory lists now: the spec of a claim the checkpoint lacks stays
    assert (node.cdi / f"aligned.dev-claim_{uid}.json").exists() and len(calls) == 2


def test_a_full_cdi_directory_at_start_is_reported_and_retried(node, monkeypatch):
    from aligned_dra_driver.claims import cdi

    driver, kube = make(node)
    ref = one_gpu(kube)
    assert "error" not in driver.prepare([ref])[ref[1]]
    spec = node.cdi / f"aligned.dev-claim_{ref[1]}.json"
    spec.unlink()  # a reboot emptied /var/run/cdi
    real_write = cdi.write_spec

    def full(*args, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cdi, "write_spec", full)
    again, _kube = make(node)  # starts all the same
    assert set(again.restore_pending) == {ref[1]} and "No space left" in again.restore_pending[ref[1]]
    assert set(again.checkpoint.claims) == {ref[1]}  # nothing forgotten
    again.kube = kube
    assert "CDI spec cannot be written" in again.prepare([ref])[ref[1]]["error"]
    monkeypatch.setattr(cdi, "write_spec", real_write)
    assert again.retry_restore()["rewritten"] == [ref[1]] and spec.exists() and again.restore_pending == {}


# -- thin provisioning: a fractional GPU's request and limit -------------------------------------

GIB = 2**30


@pytest.fixture
def mps_started(monkeypatch, tmp_path):
    """The GPUs whose MPS daemon Prepare started (replaced: no nvidia-cuda-mps-control here)."""
    from aligned_dra_driver.sharing import fractional as sharing

    started = []

    def ensure(mps_root, pci_address, uuid_):
        started.append(pci_address)
        return str(tmp_path)

    monkeypatch.setattr(sharing, "ensure_mps_daemon", ensure)
    return started


def one_share(kube, name, memory="10Gi", compute="25", **sharing):
    result = {"request": "gpu", "device": h.GPU, "shareID": str(uuid.uuid4())}
    if memory or compute:
        result["consumedCapacity"] = {k: v for k, v in (("memory", memory), ("compute", compute)) if v}
    return kube.add(h.claim_object(name, [result], gpu_config(**sharing) if sharing else None))


def limits(**values):
    return {"strategy": "MPS", "mps": {"limits": values}}


def test_a_limit_within_room_is_enforced_recorded_and_reported(node, mps_started):
    driver, kube = make(node, fractional_gpus=True)
    ref = one_share(kube, "thin", **limits(memory="40Gi", compute=80))
    assert "error" not in driver.prepare([ref])[ref[1]]
    share = {"request": {"memory": 10 * GIB, "compute": 25}, "limit": {"memory": 40 * GIB, "compute": 80}}
    (device,) = driver.checkpoint.claims[ref[1]]["devices"]
    assert device["share"] == share and device["mps"] is True
    env = driver.checkpoint.claims[ref[1]]["cdi_spec"]["devices"][0]["containerEdits"]["env"]
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=80" in env
    assert f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={h.GPU_UUID}=40960M" in env
    ((_ns, _name, devices),) = kube.statuses
    assert devices[0]["data"] == share
    again, _kube = make(node, fractional_gpus=True)  # a restart reads the share back
    assert again.checkpoint.claims[ref[1]]["devices"][0]["share"] == share


def test_without_limits_the_limit_is_the_request_from_consumed_capacity_or_the_gpu_config(node, mps_started):
    driver, kube = make(node, fractional_gpus=True)
    granted = one_share(kube, "granted")
    configured = one_share(
        kube, "configured", memory=None, compute=None, strategy="MPS", mps={"activeThreadPercentage": 30}
    )
    answers = driver.prepare([granted, configured])
    assert all("error" not in a for a in answers.values())
    claims = driver.checkpoint.claims
    assert claims[granted[1]]["devices"][0]["share"] == {
        "request": {"memory": 10 * GIB, "compute": 25},
        "limit": {"memory": 10 * GIB, "compute": 25},
    }
    assert claims[configured[1]]["devices"][0]["share"] == {"request": {"compute": 30}, "limit": {"compute": 30}}
    env = claims[configured[1]]["cdi_spec"]["devices"][0]["containerEdits"]["env"]
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30" in env and not any("PINNED" in e for e in env)


@pytest.mark.parametrize(
    ("sharing", "needle"),
    [
        (limits(memory="96Gi"), "sharing.mps.limits.memory 96Gi (request 10Gi) is above the GPU's memory 80Gi"),
        (limits(memory="8Gi"), "sharing.mps.limits.memory 8Gi is below the request 10Gi"),
        (limits(compute=20), "sharing.mps.limits.compute 20% is below the request 25%"),
        (limits(compute=101), "sharing.mps.limits.compute: 101 must be an integer percent in 1..100"),
    ],
)
def test_a_refused_limit_fails_its_claim_only(node, mps_started, sharing, needle):
    driver, kube = make(node, fractional_gpus=True)
    bad = one_share(kube, "greedy", **sharing)
    good = one_share(kube, "modest", **limits(memory="20Gi"))
    answers = driver.prepare([bad, good])
    error = answers[bad[1]]["error"]
    assert error.startswith(f"claim default/greedy ({bad[1]}): ") and needle in error
    if "must be" not in needle:  # the configuration's own check names the config entry instead
        assert f"results[0] (request 'gpu', device {h.GPU})" in error
    assert "error" not in answers[good[1]]
    assert set(driver.checkpoint.claims) == {good[1]}
    assert len(mps_started) == 1  # the refused share started nothing
    assert [name for _ns, name, _devices in kube.statuses] == ["modest"]


def test_limits_on_a_whole_gpu_are_refused_and_whole_gpus_are_unchanged(node, mps_started):
    driver, kube = make(node)
    whole = kube.add(h.claim_object("whole", [{"request": "gpu", "device": h.GPU}], gpu_config(**limits(compute=50))))
    error = driver.prepare([whole])[whole[1]]["error"]
    assert error.startswith(f"claim default/whole ({whole[1]}): results[0] (request 'gpu', device {h.GPU}): ")
    assert "sharing.mps.limits is set, but this GPU is not shared" in error
    plain = one_gpu(kube, "plain")
    assert "error" not in driver.prepare([plain])[plain[1]]
    (device,) = driver.checkpoint.claims[plain[1]]["devices"]
    assert "share" not in device and "mps" not in device
    assert "data" not in kube.statuses[-1][2][0]
    assert mps_started == []


def test_a_gpu_without_published_memory_takes_the_memory_limit_unchecked_and_says_so(node, mps_started, caplog):
    driver, kube = make(node, fractional_gpus=True)
    for device in driver.inventory.devices:
        device.get("capacity", {}).pop("memory", None)  # a model name that states no memory size
    ref = one_share(kube, "unknown", memory=None, **limits(memory="500Gi"))
    assert "error" not in driver.prepare([ref])[ref[1]]
    assert driver.checkpoint.claims[ref[1]]["devices"][0]["share"] == {
        "request": {"compute": 25},
        "limit": {"memory": 500 * GIB, "compute": 25},
    }
    assert any("the GPU's memory is not known" in m and "default/unknown" in m for m in caplog.messages)
