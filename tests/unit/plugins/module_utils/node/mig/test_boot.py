# SPDX-License-Identifier: Apache-2.0
"""node/mig/boot.py: a static node's layout applied at boot (the strict NVML fake, in this process): after a
reboot (instances gone, MIG mode as it was) the instances the rollout made are made again, at the same
placements; a second run changes nothing; no GPU is reset at boot; NVML that does not start yet (the NVIDIA
module still loading) is waited for, boundedly, on an injected clock; a GPU that fails, whatever raised, is
named in the journal's error lines and the exit status, and the other GPUs are still made; a bad state file is
refused; the rollout's layout hold (mig.hold) makes nothing at its reboot and goes, is kept within its own boot,
and goes with a warning where it cannot be read.

The unit's own command (``python -m`` with the fake ``pynvml`` on its path) is
tests/integration/plugins/module_utils/node/mig/test_boot.py's."""

from __future__ import annotations

import io
import json

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.mig import apply, boot
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

A100, H100 = "0000:18:00.0", "0000:2a:00.0"
BALANCED = {
    "all-balanced": [
        {"device-filter": ["0x233010DE"], "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
        {"device-filter": ["0x20B010DE"], "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
    ],
}  # fmt: skip


def shape(nvml, bus):
    return sorted((i["profile"], i["start"], i["size"], i["cis"]) for i in nvml.instances(bus))


def no_reset(argv):
    raise AssertionError(f"a GPU reset was asked for: {argv}")


@pytest.fixture
def node(tmp_path):
    """An A100 and an H100 with the balanced layout made by the rollout (the module's apply), and the state
    file the role writes; ``(nvml, state path, the instances made)``."""
    nvml = FakeNvml()
    nvml.add_gpu(A100, model="A100-SXM4-40GB")
    nvml.add_gpu(H100, model="H100-SXM5-80GB")
    nvml.enable_mig(A100)  # MIG mode on since an earlier rollout
    nvml.enable_mig(H100)
    params = {"mode": "static", "mig_configs": BALANCED, "layout": "all-balanced", "procfs_root": str(tmp_path)}
    apply.run(nvml, {**params, "drained": True}, False, no_reset)
    made = {bus: shape(nvml, bus) for bus in (A100, H100)}
    assert all(made.values())
    path = tmp_path / "mig.json"
    path.write_text(json.dumps({**params, "gpus": [A100, H100]}))
    return nvml, path, made


def reboot(nvml):
    for bus in (A100, H100):
        nvml.reset(bus, reboot=True)
        assert nvml.instances(bus) == []


def boot_run(nvml, path, capsys):
    rc = boot.main([str(path)], nvml=nvml)
    out, err = capsys.readouterr()
    *lines, summary = out.splitlines()
    return rc, lines, json.loads(summary), err


def test_after_a_reboot_the_layouts_instances_are_made_again_and_a_second_run_changes_nothing(node, capsys):
    nvml, path, made = node
    reboot(nvml)
    rc, lines, summary, err = boot_run(nvml, path, capsys)
    assert (rc, err) == (0, "")
    assert {bus: shape(nvml, bus) for bus in (A100, H100)} == made  # the same profiles at the same placements
    assert summary == {"layout": "all-balanced", "changed": [A100, H100], "failed": []}
    assert lines[0].startswith(f"aligned-dra-mig: GPU {A100}: created ")
    assert "3g.20gb at memory slice 4 (size 4)" in lines[0]
    assert nvml.init_count == 0  # NVML shut down after each GPU
    rc, lines, summary, err = boot_run(nvml, path, capsys)
    assert (rc, err, summary["changed"]) == (0, "", [])
    assert lines == [f"aligned-dra-mig: GPU {bus}: as the layout says, nothing to do" for bus in (A100, H100)]
    assert {bus: shape(nvml, bus) for bus in (A100, H100)} == made


def test_instances_left_from_before_are_kept_or_replaced_as_the_layout_says(node, capsys):
    nvml, path, made = node
    reboot(nvml)
    nvml.create(H100, "7g.80gb")  # not the layout's: something made it before the unit ran
    rc, lines, summary, err = boot_run(nvml, path, capsys)
    assert (rc, err) == (0, "")
    assert shape(nvml, H100) == made[H100]
    assert lines[1].startswith(f"aligned-dra-mig: GPU {H100}: destroyed 7g.80gb at memory slice 0 (size 8); created ")


def test_an_ampere_gpu_whose_mig_mode_is_not_the_layouts_is_never_reset_and_the_others_are_made(node, capsys):
    nvml, path, made = node
    reboot(nvml)
    nvml.nvmlInit()
    try:  # someone turned its MIG mode off: pending on Ampere, applied by the next reboot
        nvml.nvmlDeviceSetMigMode(nvml.nvmlDeviceGetHandleByPciBusId(A100), 0)
    finally:
        nvml.nvmlShutdown()
    nvml.reset(A100, reboot=True)
    rc, lines, summary, err = boot_run(nvml, path, capsys)
    assert rc == 1
    assert summary == {"layout": "all-balanced", "changed": [H100], "failed": [A100]}
    assert err == (
        f"<3>aligned-dra-mig: GPU {A100} (NVIDIA A100-SXM4-40GB): its MIG mode is off, the layout wants it on: that "
        "needs a GPU reset, never done at boot; left as it is (run the MIG rollout, docs/mig.md)\n"
    )
    assert shape(nvml, A100) == [] and shape(nvml, H100) == made[H100]
    nvml.nvmlInit()
    try:
        assert tuple(nvml.nvmlDeviceGetMigMode(nvml.nvmlDeviceGetHandleByPciBusId(A100))) == (0, 0)
    finally:
        nvml.nvmlShutdown()


def test_a_hopper_gpu_whose_mig_mode_is_off_gets_it_on_and_its_instances(node, capsys):
    nvml, path, made = node
    reboot(nvml)
    nvml.nvmlInit()
    try:
        nvml.nvmlDeviceSetMigMode(nvml.nvmlDeviceGetHandleByPciBusId(H100), 0)  # idle Hopper: off at once
    finally:
        nvml.nvmlShutdown()
    rc, lines, summary, err = boot_run(nvml, path, capsys)
    assert (rc, err) == (0, "")
    assert shape(nvml, H100) == made[H100]
    assert lines[1].startswith(f"aligned-dra-mig: GPU {H100}: MIG mode on; created ")


def test_a_gpu_that_is_gone_or_fails_in_nvml_is_named_and_the_others_are_made(node, capsys):
    nvml, path, made = node
    reboot(nvml)
    nvml.remove_gpu(H100)
    rc, _lines, summary, err = boot_run(nvml, path, capsys)
    assert (rc, summary["failed"], summary["changed"]) == (1, [H100], [A100])
    assert err.startswith(f"<3>aligned-dra-mig: gpus.pci_addresses[0]: no GPU {H100} on this node (its GPUs: ")
    assert shape(nvml, A100) == made[A100]
    # an NVML error creating an instance: that GPU fails, nothing is reported as done
    nvml.reset(A100, reboot=True)
    nvml.inject("nvmlDeviceCreateGpuInstanceWithPlacement", nvml.NVML_ERROR_UNKNOWN, bus_id=A100)
    rc, _lines, summary, err = boot_run(nvml, path, capsys)
    assert (rc, summary["failed"], summary["changed"]) == (1, [A100, H100], [])
    assert err.splitlines()[0].startswith(f"<3>aligned-dra-mig: GPU {A100} (NVIDIA A100-SXM4-40GB): creating ")
    assert "nvmlDeviceCreateGpuInstanceWithPlacement" in err.splitlines()[0]
    # the next boot (no error now) makes it
    nvml.reset(A100, reboot=True)
    rc, _lines, summary, _err = boot_run(nvml, path, capsys)
    assert summary["changed"] == [A100] and shape(nvml, A100) == made[A100]


def test_an_nvml_error_listing_a_gpus_compute_instances_fails_that_gpu_only(node, capsys):
    """The H100 is lost while its instance left from before is destroyed (NVML's list of its compute instances):
    its error line names it and the call, the A100 is still made (the error was raised raw, and stopped every
    GPU)."""
    nvml, path, made = node
    reboot(nvml)
    nvml.create(H100, "7g.80gb")  # not the layout's: destroyed first
    by_id = nvml.nvmlDeviceGetGpuInstanceById

    def lost_while_destroying(handle, gpu_instance):
        nvml.inject("nvmlGpuInstanceGetComputeInstances", nvml.NVML_ERROR_GPU_IS_LOST, times=None, bus_id=H100)
        return by_id(handle, gpu_instance)

    nvml.nvmlDeviceGetGpuInstanceById = lost_while_destroying
    path.write_text(json.dumps({**json.loads(path.read_text()), "gpus": [H100, A100]}))  # the failing GPU first
    rc, lines, summary, err = boot_run(nvml, path, capsys)
    assert (rc, summary["failed"], summary["changed"]) == (1, [H100], [A100])
    assert err.startswith(f"<3>aligned-dra-mig: GPU {H100} (NVIDIA H100 80GB HBM3): destroying instance 7g.80gb ")
    assert err.endswith(": nvmlGpuInstanceGetComputeInstances: GPU is lost (NVML error 15)\n"), err
    assert lines == [lines[0]] and lines[0].startswith(f"aligned-dra-mig: GPU {A100}: created ")
    assert shape(nvml, A100) == made[A100]


def test_whatever_one_gpus_apply_raises_is_that_gpus_error_and_the_others_are_made(node, capsys, monkeypatch):
    """An error no layer turned into its own (a raw NVMLError of a call the library does not wrap, a binding's
    error) fails its GPU, named with the code, and the next GPU is still made."""
    nvml, path, made = node
    reboot(nvml)
    real_run = apply.run

    def unwrapped_error_on_the_a100(nvml_, params, check_mode, runner):
        if params["gpus"] == {"pci_addresses": [A100]}:
            raise nvml.NVMLError(nvml.NVML_ERROR_UNKNOWN)
        return real_run(nvml_, params, check_mode, runner)

    monkeypatch.setattr(apply, "run", unwrapped_error_on_the_a100)
    rc, lines, summary, err = boot_run(nvml, path, capsys)
    assert (rc, summary["failed"], summary["changed"]) == (1, [A100], [H100])
    assert err == f"<3>aligned-dra-mig: GPU {A100}: Unknown Error (NVML error 999)\n"
    assert shape(nvml, H100) == made[H100] and shape(nvml, A100) == []


def test_an_nvml_shutdown_error_after_the_wait_still_makes_every_gpu(node, capsys):
    """nvmlShutdown may answer an error (NVML_ERROR_UNKNOWN): NVML started, so the GPUs are made."""
    _nvml, path, made = node

    class ShutdownFailsOnce(FakeNvml):
        failed = False

        def nvmlShutdown(self):
            super().nvmlShutdown()
            if not self.failed:
                self.failed = True
                raise self.NVMLError(self.NVML_ERROR_UNKNOWN)

    nvml = ShutdownFailsOnce()  # the same node after a reboot
    for bus, model in ((A100, "A100-SXM4-40GB"), (H100, "H100-SXM5-80GB")):
        nvml.add_gpu(bus, model=model)
        nvml.enable_mig(bus)
    rc, _lines, summary, err = boot_run(nvml, path, capsys)
    assert (rc, err, summary["changed"]) == (0, "", [A100, H100]) and nvml.failed
    assert {bus: shape(nvml, bus) for bus in (A100, H100)} == made


# -- the rollout's layout hold ------------------------------------------------------------------------------


def boot_id(procfs, value="5d2e3c1a-0b7e-4c55-9a4e-2f1d0c9b8a71"):
    """``procfs``'s boot ID, as the kernel gives it (a newline at the end)."""
    path = procfs / "sys" / "kernel" / "random" / "boot_id"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value + "\n")
    return value


def held_run(nvml, path):
    """The unit's run, NVML's wait on a clock of its own (a hold not honoured waits for nothing)."""
    clock = Clock()
    return boot.main([str(path)], nvml=nvml, clock=clock, sleep=clock.sleep)


def test_the_rollouts_reboot_makes_no_instances_removes_the_hold_and_the_next_boot_makes_the_layout(
    node, tmp_path, capsys
):
    nvml, path, made = node
    hold = tmp_path / "mig.hold"
    hold.write_text(json.dumps({"boot_id": "0f1e2d3c-before-the-reboot"}))
    boot_id(tmp_path)
    reboot(nvml)
    nvml.library = False  # NVML is never asked
    assert held_run(nvml, path) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out == (
        f"aligned-dra-mig: the MIG rollout rebooted the node for a layout change ({hold}, boot "
        "0f1e2d3c-before-the-reboot): no instances made at this boot, the rollout makes the new layout\n"
    )
    assert not hold.exists() and all(shape(nvml, bus) == [] for bus in (A100, H100))
    # a later boot: the layout of the state (the last verified one) again
    nvml.library = True
    rc, _lines, summary, err = boot_run(nvml, path, capsys)
    assert (rc, err, summary["changed"]) == (0, "", [A100, H100])
    assert {bus: shape(nvml, bus) for bus in (A100, H100)} == made


def test_the_hold_of_this_boot_makes_nothing_and_is_kept_for_the_reboot(node, tmp_path, capsys):
    nvml, path, made = node
    hold = tmp_path / "mig.hold"
    hold.write_text(json.dumps({"boot_id": boot_id(tmp_path) + "\n"}))  # as the role read it, stripped or not
    reboot(nvml)
    nvml.library = False
    assert held_run(nvml, path) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out == (
        f"aligned-dra-mig: the MIG rollout is changing the layout in this boot ({hold}): no instances made, the "
        "hold is kept for its reboot\n"
    )
    assert hold.exists() and all(shape(nvml, bus) == [] for bus in (A100, H100))


@pytest.mark.parametrize(
    ("content", "this_boot", "why"),
    [
        ("", "b0", "the hold cannot be read (Expecting value"),
        ('{"boot_id": ', "b0", "the hold cannot be read (Expecting value"),
        ('["0f1e2d3c"]', "b0", "the hold cannot be read (boot_id: a boot ID, not None)"),
        ('{"boot_id": "  "}', "b0", "the hold cannot be read (boot_id: a boot ID, not '  ')"),
        ('{"boot_id": 7}', "b0", "the hold cannot be read (boot_id: a boot ID, not 7)"),
        ('{"boot_id": "0f1e2d3c"}', None, "this boot's ID cannot be read ([Errno 2] No such file or directory"),
        ('{"boot_id": "0f1e2d3c"}', "", "this boot's ID cannot be read (empty)"),
    ],
)
def test_a_hold_that_cannot_be_read_is_taken_as_the_reboots_and_removed(
    node, tmp_path, capsys, content, this_boot, why
):
    """Kept, a damaged hold would hold every later boot: it holds this one, with a warning, and goes."""
    nvml, path, _made = node
    hold = tmp_path / "mig.hold"
    hold.write_text(content)
    if this_boot is not None:  # None: procfs has no boot_id
        boot_id(tmp_path, value=this_boot)
    reboot(nvml)
    nvml.library = False
    assert held_run(nvml, path) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"<4>aligned-dra-mig: the MIG rollout's layout hold {hold}: {why}"), err
    assert err.endswith(
        ": taken as the hold of the rollout's reboot for a layout change: no instances made at this boot, the "
        "rollout makes the new layout\n"
    )
    assert not hold.exists() and all(shape(nvml, bus) == [] for bus in (A100, H100))


def test_a_hold_that_cannot_be_removed_fails_the_unit(node, tmp_path, capsys):
    nvml, path, _made = node
    hold = tmp_path / "mig.hold"
    hold.mkdir()  # neither read nor removed as a file
    reboot(nvml)
    nvml.library = False
    assert held_run(nvml, path) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith(f"<4>aligned-dra-mig: the MIG rollout's layout hold {hold}: the hold cannot be read")
    assert lines[1].startswith(f"<3>aligned-dra-mig: cannot remove the layout hold {hold}: ")
    assert lines[1].endswith("; the next boot makes no layout")
    assert hold.is_dir() and all(shape(nvml, bus) == [] for bus in (A100, H100))


class Clock:
    """Time for :func:`boot.wait_for_nvml`: ``sleep`` moves it on (no test sleeps) and runs ``at`` callbacks."""

    def __init__(self):
        self.now, self.slept, self.at = 1000.0, [], {}

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds
        for when in [w for w in self.at if w <= self.now - 1000.0]:
            self.at.pop(when)()


class DriverNotLoaded(FakeNvml):
    """The real nvmlInit's answer before the NVIDIA module is loaded: NVML_ERROR_DRIVER_NOT_LOADED (9)."""

    loaded = False

    def nvmlInit(self):
        if not self.loaded:
            raise self.NVMLError(9)
        super().nvmlInit()


def test_nvml_that_never_starts_is_waited_for_then_fails_every_gpu(node, capsys):
    nvml, path, _made = node
    nvml.library = False
    clock = Clock()
    rc = boot.main([str(path)], nvml=nvml, clock=clock, sleep=clock.sleep)
    out, err = capsys.readouterr()
    assert (rc, json.loads(out.splitlines()[-1])["failed"]) == (1, [A100, H100])
    assert clock.now - 1000.0 == boot.NVML_WAIT and max(clock.slept) == boot.RETRY_INTERVAL  # bounded
    lines = err.splitlines()
    assert (
        lines[0]
        == "aligned-dra-mig: NVML does not start yet (NVML Shared Library Not Found): waiting for the NVIDIA driver"
    )
    assert lines[1] == "<3>aligned-dra-mig: NVML still does not start after 120 s: NVML Shared Library Not Found"
    assert lines[2].startswith(f"<3>aligned-dra-mig: GPU {A100}: NVML cannot start (")


def test_a_driver_loaded_while_the_unit_waits_gets_its_layout(node, tmp_path, capsys):
    _nvml, path, made = node
    nvml = DriverNotLoaded()  # the same node after a reboot, its module not loaded yet
    nvml.add_gpu(A100, model="A100-SXM4-40GB")
    nvml.add_gpu(H100, model="H100-SXM5-80GB")
    nvml.enable_mig(A100)
    nvml.enable_mig(H100)
    clock = Clock()
    clock.at[7] = lambda: setattr(nvml, "loaded", True)  # udev loads the module 7 s in
    rc = boot.main([str(path)], nvml=nvml, clock=clock, sleep=clock.sleep)
    out, err = capsys.readouterr()
    assert (rc, json.loads(out.splitlines()[-1])["changed"]) == (0, [A100, H100]), err
    assert {bus: shape(nvml, bus) for bus in (A100, H100)} == made and nvml.init_count == 0
    assert clock.slept == [2.0] * 4
    assert err == "aligned-dra-mig: NVML does not start yet (Unknown Error (9)): waiting for the NVIDIA driver\n"


def test_an_nvml_error_that_waiting_does_not_mend_is_not_waited_for():
    class NoPermission(FakeNvml):
        def nvmlInit(self):  # NVML_ERROR_NO_PERMISSION: NVML may not talk to the driver
            raise self.NVMLError(self.NVML_ERROR_NO_PERMISSION)

    clock, err = Clock(), io.StringIO()
    assert boot.wait_for_nvml(NoPermission(), err, clock, clock.sleep) is False
    assert clock.slept == [] and err.getvalue() == ""  # each GPU's apply names the error
    started = FakeNvml()
    assert boot.wait_for_nvml(started, err, clock, clock.sleep) is True
    assert clock.slept == [] and started.init_count == 0  # shut down again: each GPU's apply starts its own


def test_a_gpu_the_layout_has_no_entry_for_is_left_as_it_is(node, capsys):
    nvml, path, made = node
    state = json.loads(path.read_text())
    state["mig_configs"]["all-balanced"] = state["mig_configs"]["all-balanced"][:1]  # the H100's entry only
    path.write_text(json.dumps(state))
    reboot(nvml)
    rc, lines, summary, err = boot_run(nvml, path, capsys)
    assert (rc, err, summary["changed"]) == (0, "", [H100])
    assert lines[0] == f"aligned-dra-mig: GPU {A100}: layout all-balanced has no entry for it: left as it is"
    assert shape(nvml, A100) == [] and shape(nvml, H100) == made[H100]


def test_no_gpu_to_configure_needs_no_nvml(tmp_path, capsys):
    path = tmp_path / "mig.json"
    path.write_text(json.dumps({"mode": "static", "layout": "x", "mig_configs": {"x": []}, "gpus": []}))
    assert boot.main([str(path)], nvml=object()) == 0
    assert capsys.readouterr().out == "aligned-dra-mig: no GPU to configure\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[]", "the state must be a JSON object"),
        ("{", "Expecting property name"),
        ('{"mode": "dynamic"}', "mode: only a static layout is applied at boot, not 'dynamic'"),
        ('{"mode": "static", "layout": "y", "mig_configs": {"x": []}}', "layout: the name of a config"),
        ('{"mode": "static", "layout": "x", "mig_configs": {"x": []}, "gpus": "all"}', "gpus: a list of PCI"),
        ('{"mode": "static", "layout": "x", "mig_configs": {"x": []}, "gpus": [], "procfs_root": ""}', "procfs_root"),
    ],
)
def test_a_bad_state_file_is_refused_before_nvml(tmp_path, capsys, content, message):
    path = tmp_path / "mig.json"
    path.write_text(content)
    assert boot.main([str(path)], nvml=object()) == 2
    err = capsys.readouterr().err
    assert err.startswith("<3>aligned-dra-mig: cannot read the state file: ") and message in err


def test_a_missing_state_file_or_command_line(tmp_path, capsys):
    assert boot.main([str(tmp_path / "none.json")], nvml=object()) == 2
    assert "cannot read the state file" in capsys.readouterr().err
    assert boot.main([], nvml=object()) == 2
    assert capsys.readouterr().err.startswith("<3>usage: ")


def test_without_nvidia_ml_py_no_gpu_is_configured(node, capsys, monkeypatch):
    _nvml, path, _made = node

    def missing():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(boot, "load_pynvml", missing)
    assert boot.main([str(path)]) == 1
    assert "nvidia-ml-py (module pynvml) does not load: No module named 'pynvml'" in capsys.readouterr().err
