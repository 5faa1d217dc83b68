# SPDX-License-Identifier: Apache-2.0
"""Driver state in-process: attribute filters, the call budget, a failing checkpoint write."""

from __future__ import annotations

import copy
import shutil
import uuid

import pytest
from aligned_dra_driver import driver as drv

from ansible_collections.aligned.dra.tests import driver_harness as h


class ClaimsInMemory:
    """Test double of the driver's Kube: claims from a dict, status writes recorded."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], dict] = {}
        self.statuses: list[tuple[str, str, list]] = []
        self.cleared: list[tuple[str, str, str, str, str]] = []
        self.fail_clearing: Exception | None = None

    def add(self, claim: dict) -> tuple[str, str, str]:
        claim = copy.deepcopy(claim)
        claim["metadata"]["uid"] = str(uuid.uuid4())
        self.claims[("default", claim["metadata"]["name"])] = claim
        return "default", claim["metadata"]["uid"], claim["metadata"]["name"]

    def get_claim(self, namespace: str, name: str) -> dict:
        return self.claims[(namespace, name)]

    def apply_claim_status(self, namespace: str, name: str, devices: list) -> dict:
        self.statuses.append((namespace, name, devices))
        return {}

    def remove_claim_status(self, namespace: str, name: str, uid: str, driver: str, pool: str) -> str:
        if self.fail_clearing:
            raise self.fail_clearing
        self.cleared.append((namespace, name, uid, driver, pool))
        return "cleared"


@pytest.fixture
def node():
    root = h.short_tmp()
    yield h.NodeTree.build(root)
    shutil.rmtree(root, ignore_errors=True)


def make(node, **extra):
    opts = drv.Options(
        node_name=h.NODE,
        sysfs_root=str(node.sys),
        procfs_root=str(node.proc),
        dev_root=str(node.dev),
        cdi_dir=str(node.cdi),
        state_dir=str(node.state),
        vendor_cdi_dirs=[str(node.vendor_cdi)],
        device_options={"exclude": ["eno*"]},
        **extra,
    )
    kube = ClaimsInMemory()
    driver = drv.Driver(opts, kube)
    driver.restore()
    driver.rescan()
    return driver, kube


def test_match_rules_filter_published_devices(node):
    driver, _kube = make(node, match=[("dra.aligned.dev/kind", True, "gpu")])
    assert [d["name"] for d in driver.inventory.devices] == [h.GPU]
    driver, _kube = make(node, match=[("dra.aligned.dev/rdmaDevice", False, "mlx5_*")])
    assert [d["name"] for d in driver.inventory.devices] == [h.GPU]


def test_claims_past_the_call_budget_are_answered_with_an_error(node):
    driver, kube = make(node, call_budget=0.0)
    refs = [kube.add(h.claim_object(f"c{i}", [{"request": "gpu", "device": h.GPU}])) for i in range(3)]
    answers = driver.prepare(refs)
    assert set(answers) == {r[1] for r in refs}
    assert all("not reached" in answers[r[1]]["error"] for r in refs[1:])


def test_a_failing_checkpoint_write_prepares_nothing(node, monkeypatch):
    driver, kube = make(node)
    ref = kube.add(h.claim_object("c", [{"request": "gpu", "device": h.GPU}]))

    def fail() -> None:
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
    from ansible_collections.aligned.dra.tests import sysfs_builder

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


def test_cel_selectors_filter_published_devices(node):
    driver, _kube = make(node, selectors=['device.attributes["dra.aligned.dev"].kind == "nic"'])
    assert [d["name"] for d in driver.inventory.devices] == [h.NIC]
    both = [
        'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:17"',
        'device.capacity["dra.aligned.dev"].memory.compareTo(quantity("40Gi")) > 0',
    ]
    driver, _kube = make(node, selectors=both)
    assert [d["name"] for d in driver.inventory.devices] == [h.GPU]  # the NIC has no memory: an error, left out


def test_a_selector_that_does_not_compile_is_named():
    with pytest.raises(ValueError, match="does not compile"):
        drv.compile_selectors(["device.attributes["])


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


def test_unprepare_clears_the_status_after_the_checkpoint_and_an_api_failure_does_not_fail_it(node, monkeypatch):
    driver, kube = make(node)
    first = kube.add(h.claim_object("a", [{"request": "gpu", "device": h.GPU}]))
    second = kube.add(h.claim_object("b", [{"request": "nic", "device": h.NIC}]))
    assert all("error" not in a for a in driver.prepare([first, second]).values())
    saved = []
    real_save = driver.checkpoint.save
    monkeypatch.setattr(driver.checkpoint, "save", lambda: (saved.append(set(driver.checkpoint.claims)), real_save()))
    kube.fail_clearing = ConnectionResetError("connection reset by peer")
    assert driver.unprepare([first]) == {first[1]: ""}
    assert kube.cleared == [] and driver.checkpoint.claims.keys() == {second[1]}
    kube.fail_clearing = None
    assert driver.unprepare([second, first]) == {second[1]: "", first[1]: ""}
    # only the claim the checkpoint still had is cleared, once, and after the checkpoint lost it
    assert kube.cleared == [("default", "b", second[1], h.DRIVER, h.NODE)]
    assert saved == [{second[1]}, set()]
