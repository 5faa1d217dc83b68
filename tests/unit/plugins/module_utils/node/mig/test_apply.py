# SPDX-License-Identifier: Apache-2.0
"""node/mig/apply.py: the plan per GPU and its apply through NVML (the strict fake: tests/support/fakes/nvml.py),
check mode, idempotence, refusals, and MIG mode by architecture (Hopper at once, Ampere by a reset or a reboot)."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.mig import apply, layout
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml
from ansible_collections.aligned.dra.tests.support.fakes.nvml_lab import A100, H100, three_gpus

BALANCED = {
    "all-balanced": [
        {"device-filter": ["0x233010DE"], "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
        {"device-filter": ["0x20B010DE"], "devices": "all", "mig-enabled": True,
         "mig-devices": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
    ],
    "all-1g": [
        {"device-filter": "0x233010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
        {"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
    ],
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
}  # fmt: skip


@pytest.fixture
def nvml():
    return three_gpus(init=False)


class Resets:
    """The reset command's runner: records each command, and resets the fake's GPU (rc 0) or fails."""

    def __init__(self, nvml: FakeNvml, rc: int = 0) -> None:
        self.nvml, self.rc, self.argv = nvml, rc, []

    def __call__(self, argv):
        self.argv.append(argv)
        if self.rc == 0:
            self.nvml.reset(argv[-1])
        return self.rc, "", "" if self.rc == 0 else "GPU reset failed: in use by another client"


def run(nvml, check_mode=False, runner=None, **params):
    params.setdefault("mode", "static")
    params.setdefault("mig_configs", BALANCED)
    params.setdefault("procfs_root", "/nonexistent/proc")  # never the host's: its PIDs have other names
    return apply.run(nvml, params, check_mode, runner or Resets(nvml))


def shape(nvml, bus):
    return sorted((i["profile"], i["start"], i["size"], i["cis"]) for i in nvml.instances(bus))


def by_gpu(result):
    return {g["pci_address"]: g for g in result["gpus"]}


def test_check_mode_changes_nothing_and_shows_what_goes_and_what_comes(nvml):
    nvml.enable_mig(A100)
    nvml.create(A100, "7g.40gb")
    result = run(nvml, check_mode=True, layout="all-balanced", gpus={"pci_addresses": [A100]})
    assert result["changed"] and not result["reboot_required"]
    (gpu,) = result["gpus"]
    assert [(d["profile"], d["placement"]) for d in gpu["destroy"]] == [("7g.40gb", {"start": 0, "size": 8})]
    assert sorted((c["profile"], c["placement"]["start"]) for c in gpu["create"]) == [
        ("1g.5gb", 0), ("1g.5gb", 1), ("2g.10gb", 2), ("3g.20gb", 4)
    ]  # fmt: skip
    assert result["diff"]["before"][A100] == {"instances": ["7g.40gb at memory slice 0 (size 8)"]}
    assert "3g.20gb at memory slice 4 (size 4)" in result["diff"]["after"][A100]["instances"]
    assert shape(nvml, A100) == [("7g.40gb", 0, 8, [0])]  # nothing changed


def test_apply_makes_the_layout_and_a_second_run_plans_nothing(nvml):
    nvml.enable_mig(A100)
    nvml.enable_mig(H100)
    first = run(nvml, layout="all-balanced")
    assert first["changed"] and {g["pci_address"] for g in first["gpus"]} == {A100, H100}
    assert shape(nvml, A100) == [
        ("1g.5gb", 0, 1, [0]),
        ("1g.5gb", 1, 1, [0]),
        ("2g.10gb", 2, 2, [0]),
        ("3g.20gb", 4, 4, [0]),
    ]
    assert [i[0] for i in shape(nvml, H100)] == [
        "1g.10gb",
        "1g.10gb",
        "2g.20gb",
        "3g.40gb",
    ]
    assert sorted(i["profile"] for i in by_gpu(first)[A100]["after"]) == ["1g.5gb", "1g.5gb", "2g.10gb", "3g.20gb"]
    second = run(nvml, layout="all-balanced")
    assert not second["changed"] and second["diff"] == {"before": {}, "after": {}}
    assert all(not g["destroy"] and not g["create"] and not g["changed"] for g in second["gpus"])


def test_instances_that_match_are_kept_not_recreated(nvml):
    nvml.enable_mig(A100)
    kept = nvml.create(A100, "3g.20gb", start=4)
    gone = nvml.create(A100, "4g.20gb", start=0)
    uuid = nvml.mig_uuid(A100, kept)
    result = run(nvml, layout="all-balanced", gpus={"pci_addresses": [A100]})
    (gpu,) = result["gpus"]
    assert [d["gpu_instance"] for d in gpu["destroy"]] == [gone]
    assert sorted(c["profile"] for c in gpu["create"]) == ["1g.5gb", "1g.5gb", "2g.10gb"]
    assert nvml.mig_uuid(A100, kept) == uuid  # the same instance, its MIG UUID unchanged


def test_an_instance_with_a_process_is_refused_naming_gpu_instance_and_pid(nvml, tmp_path):
    nvml.enable_mig(A100)
    gi = nvml.create(A100, "7g.40gb")
    nvml.run(A100, 4242, 1 << 30, gpu_instance=gi)
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "comm").write_text("python3\n")
    with pytest.raises(apply.MigError) as caught:
        run(nvml, layout="all-balanced", procfs_root=str(tmp_path))
    message = str(caught.value)
    assert message.startswith(f"GPU {A100} (NVIDIA A100-SXM4-40GB): instance 7g.40gb at memory slice 0 (size 8)")
    assert f"GPU instance {gi}, {nvml.mig_uuid(A100, gi)}" in message and "processes 4242 (python3)" in message
    assert shape(nvml, A100) == [("7g.40gb", 0, 8, [0])] and nvml.instances(H100) == []  # nothing changed anywhere


def test_a_kept_instance_may_run_a_process(nvml):
    nvml.enable_mig(A100)
    gi = nvml.create(A100, "3g.20gb", start=4)
    nvml.run(A100, 4242, 1 << 30, gpu_instance=gi)
    result = run(nvml, layout="all-balanced", gpus={"pci_addresses": [A100]})
    assert result["changed"] and not result["gpus"][0]["destroy"]


def test_hopper_turns_mig_on_without_a_reset_and_places_the_instances(nvml):
    plan = run(nvml, check_mode=True, layout="all-1g", gpus={"device_ids": ["0x2330"]})
    (gpu,) = plan["gpus"]
    assert gpu["mig_mode"] == {"before": {"current": False, "pending": False}, "after": True}
    assert not gpu["reset"] and [c["placement"] for c in gpu["create"]] == [None] * 7  # placed once MIG is on
    assert plan["diff"]["after"][H100]["mig_mode"] == "on"
    runner = Resets(nvml)
    result = run(nvml, runner=runner, layout="all-1g", gpus={"device_ids": ["0x2330"]})
    assert result["changed"] and not result["reboot_required"] and runner.argv == []
    assert [i[:3] for i in shape(nvml, H100)] == [("1g.10gb", s, 1) for s in range(7)]
    assert not run(nvml, layout="all-1g", gpus={"device_ids": ["0x2330"]})["changed"]


def test_hopper_with_a_process_on_the_whole_gpu_waits_for_the_drain_and_is_refused_drained(nvml):
    nvml.run(H100, 77, 1 << 30)
    args = {"layout": "all-1g", "gpus": {"pci_addresses": [H100]}}
    assert run(nvml, check_mode=True, **args)["changed"]  # the role's plan: this node rolls (drained, then applied)
    result = run(nvml, **args)
    assert not result["changed"] and not result["reboot_required"] and nvml.gpus[H100].mig["pending"] == 0
    assert (
        "changes only while the GPU is idle; it runs processes 77, and the node is not drained" in result["warnings"][0]
    )
    with pytest.raises(
        apply.MigError, match=f"GPU {H100} .*: MIG mode changes only while the GPU is idle; it runs processes 77"
    ):
        run(nvml, drained=True, **args)


def test_ampere_on_a_node_not_drained_needs_a_reboot_and_is_left_as_it_is(nvml):
    runner = Resets(nvml)
    result = run(nvml, runner=runner, layout="all-1g", gpus={"pci_addresses": [A100]})
    (gpu,) = result["gpus"]
    assert result["reboot_required"] and gpu["reboot_required"] and not result["changed"]
    assert "not drained" in gpu["blocked"] and runner.argv == []
    mig = nvml.gpus[A100].mig
    assert (mig["current"], mig["pending"], mig["serial"], mig["instances"]) == (0, 0, 0, [])  # left as it was
    assert result["warnings"] == [
        f"GPU {A100} (NVIDIA A100-SXM4-40GB): its MIG mode needs a GPU reset, and the node is not drained"
    ]
    plan = run(nvml, check_mode=True, layout="all-1g", gpus={"pci_addresses": [A100]})
    assert plan["changed"] and plan["reboot_required"]  # the plan shows the change a drained run makes


def test_ampere_on_a_drained_node_is_reset_and_partitioned(nvml):
    runner = Resets(nvml)
    result = run(nvml, runner=runner, layout="all-1g", gpus={"pci_addresses": [A100]}, drained=True)
    assert runner.argv == [["nvidia-smi", "--gpu-reset", "-i", A100]]
    assert result["changed"] and not result["reboot_required"]
    assert [i[:3] for i in shape(nvml, A100)] == [("1g.5gb", s, 1) for s in range(7)]
    assert not run(nvml, runner=runner, layout="all-1g", gpus={"pci_addresses": [A100]}, drained=True)["changed"]
    assert len(runner.argv) == 1


def test_ampere_drained_with_a_process_is_not_reset(nvml):
    nvml.run(A100, 88, 1 << 30)
    runner = Resets(nvml)
    result = run(nvml, runner=runner, layout="all-1g", gpus={"pci_addresses": [A100]}, drained=True)
    assert result["reboot_required"] and runner.argv == [] and "runs processes 88" in result["gpus"][0]["blocked"]


def test_a_failed_reset_leaves_the_pending_mode_for_a_reboot(nvml):
    runner = Resets(nvml, rc=1)
    result = run(nvml, runner=runner, layout="all-1g", gpus={"pci_addresses": [A100]}, drained=True)
    assert result["changed"] and result["reboot_required"] and len(runner.argv) == 1
    assert nvml.gpus[A100].mig["pending"] == 1 and nvml.gpus[A100].mig["current"] == 0
    nvml.reset(A100, reboot=True)
    assert run(nvml, layout="all-1g", gpus={"pci_addresses": [A100]})["changed"]  # instances made after the reboot
    assert len(nvml.instances(A100)) == 7


def test_disabling_destroys_the_instances_first(nvml):
    nvml.enable_mig(H100)
    nvml.create(H100, "3g.40gb", start=0)
    result = run(nvml, layout="all-disabled", gpus={"pci_addresses": [H100]})
    assert result["changed"] and nvml.instances(H100) == [] and nvml.gpus[H100].mig["current"] == 0
    assert result["diff"]["after"][H100] == {"instances": [], "mig_mode": "off"}


def test_custom_reset_command_gets_the_pci_address(nvml):
    runner = Resets(nvml)
    run(
        nvml,
        runner=runner,
        layout="all-1g",
        gpus={"indices": [0]},
        drained=True,
        reset_command=["reset-gpu", "--bus={pci_address}", A100],
    )
    assert runner.argv[0][:2] == ["reset-gpu", f"--bus={A100}"]


def test_dynamic_turns_mig_on_and_leaves_instances_to_the_driver(nvml):
    nvml.enable_mig(A100)
    nvml.create(A100, "1g.5gb", start=6)
    result = run(nvml, mode="dynamic", mig_configs=None)
    gpus = by_gpu(result)
    assert gpus[H100]["mig_mode"]["after"] is True and nvml.gpus[H100].mig["current"] == 1
    assert gpus[A100]["mig_mode"] is None and not gpus[A100]["destroy"] and len(nvml.instances(A100)) == 1


def test_dynamic_leaves_a_hopper_gpu_in_use_as_a_whole_to_the_driver(nvml):
    nvml.run(H100, 99, 1 << 30)
    result = run(nvml, mode="dynamic", mig_configs=None, gpus={"pci_addresses": [H100]})
    assert not result["changed"] and "MIG mode left to the driver" in result["gpus"][0]["blocked"]


def test_mode_off_reports_and_changes_nothing(nvml):
    nvml.enable_mig(A100)
    nvml.create(A100, "7g.40gb")
    result = run(nvml, mode="off", mig_configs=None)
    assert not result["changed"] and by_gpu(result)[A100]["before"][0]["profile"] == "7g.40gb"
    assert nvml.instances(A100)[0]["profile"] == "7g.40gb"


def test_counts_that_do_not_fit_fail_before_anything_changes(nvml):
    nvml.enable_mig(A100)
    configs = {"big": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.20gb": 1, "3g.20gb": 2}}]}
    with pytest.raises(
        layout.LayoutError, match=r"^mig_configs.big\[0\].mig-devices: the counts do not fit GPU 0000:18:00.0"
    ):
        run(nvml, mig_configs=configs, layout="big", gpus={"pci_addresses": [A100]})


def test_a_selected_gpu_without_an_entry_is_left_with_a_warning(nvml):
    configs = {"h100-only": [{"device-filter": "0x233010DE", "devices": "all", "mig-enabled": False}]}
    result = run(nvml, mig_configs=configs, layout="h100-only")
    assert (
        f"GPU {A100} (NVIDIA A100-SXM4-40GB) is selected, but layout h100-only has no entry for it"
        in result["warnings"][0]
    )


def test_nvml_that_cannot_start_fails_clearly():
    with pytest.raises(apply.MigError, match="NVML cannot start .*is the NVIDIA GPU driver loaded"):
        run(FakeNvml(library=False), mode="off")


def test_static_needs_configs_and_a_layout(nvml):
    with pytest.raises(layout.LayoutError, match="^mig_configs: the layouts"):
        run(nvml, mig_configs=None, layout="x")
    with pytest.raises(layout.LayoutError, match="^layout: the name of the config"):
        run(nvml)


def test_a_profile_with_attributes_and_mig_on_without_instances(nvml):
    nvml.enable_mig(H100)
    nvml.create(H100, "7g.80gb")
    configs = {
        "me": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb+me": 1, "1g.20gb": 3}}],
        "all-enabled": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
    }
    args = {"mig_configs": configs, "gpus": {"pci_addresses": [H100]}}
    assert run(nvml, layout="me", **args)["changed"]
    assert sorted(i["profile"] for i in nvml.instances(H100)) == ["1g.10gb+me", "1g.20gb", "1g.20gb", "1g.20gb"]
    assert not run(nvml, layout="me", **args)["changed"]
    result = run(nvml, layout="all-enabled", **args)
    assert result["changed"] and len(result["gpus"][0]["destroy"]) == 4
    assert nvml.instances(H100) == [] and nvml.gpus[H100].mig["current"] == 1


def _comm(procfs, pid, name):
    (procfs / str(pid)).mkdir()
    (procfs / str(pid) / "comm").write_text(name + "\n")
    return str(procfs)


def test_a_destroy_refused_in_use_names_the_process_on_the_gpu(nvml, tmp_path):
    nvml.enable_mig(A100)
    kept = nvml.create(A100, "3g.20gb", start=4)
    gone = nvml.create(A100, "4g.20gb", start=0)
    nvml.run(A100, 4242, 1 << 30, gpu_instance=kept)
    nvml.inject("nvmlGpuInstanceDestroy", nvml.NVML_ERROR_IN_USE, bus_id=A100)
    with pytest.raises(apply.MigError) as caught:
        run(nvml, layout="all-balanced", gpus={"pci_addresses": [A100]}, procfs_root=_comm(tmp_path, 4242, "python3"))
    message = str(caught.value)
    assert f"destroying instance 4g.20gb at memory slice 0 (size 4) (GPU instance {gone})" in message
    assert message.endswith("(NVML error 19): the GPU is held by processes 4242 (python3)"), message


def test_a_mode_change_refused_in_use_without_a_process_names_the_gpu_clients(nvml):
    nvml.enable_mig(H100)
    nvml.inject("nvmlDeviceSetMigMode", nvml.NVML_ERROR_IN_USE, bus_id=H100)
    with pytest.raises(apply.MigError) as caught:
        run(nvml, layout="all-disabled", gpus={"pci_addresses": [H100]}, drained=True)
    message = str(caught.value)
    assert message.startswith(f"GPU {H100} (NVIDIA H100") and "MIG mode off: nvmlDeviceSetMigMode" in message
    assert "NVML lists no compute process on the GPU: a GPU client holds it (DCGM's host engine" in message
    assert "(aligned_dra_mig_gpu_clients)" in message
    handle = (nvml.nvmlInit(), nvml.nvmlDeviceGetHandleByPciBusId(H100))[1]
    assert nvml.nvmlDeviceGetMigMode(handle) == [1, 1]  # left as it was


def test_a_refusal_names_the_gpu_client_with_the_device_file_open_that_nvml_does_not_list(nvml, tmp_path):
    """DCGM's host engine holds the H100's device file without a compute context: NVML lists no process, the
    failure names it (procfs's fd links); a process with another GPU's file open, and this one, are left out."""
    nvml.enable_mig(H100)
    minor = nvml.gpus[H100].minor
    for pid, name, device in ((5151, "nv-hostengine", minor), (6161, "other", minor + 1)):
        (tmp_path / str(pid) / "fd").mkdir(parents=True)
        (tmp_path / str(pid) / "cmdline").write_bytes(f"/usr/bin/{name}\0-n\0".encode())
        (tmp_path / str(pid) / "fd" / "3").symlink_to(f"/dev/nvidia{device}")
    nvml.inject("nvmlDeviceSetMigMode", nvml.NVML_ERROR_IN_USE, bus_id=H100)
    with pytest.raises(apply.MigError) as caught:
        run(nvml, layout="all-disabled", gpus={"pci_addresses": [H100]}, drained=True, procfs_root=str(tmp_path))
    assert str(caught.value).endswith("(NVML error 19): the GPU is held by processes 5151 (nv-hostengine)")


def test_an_activation_status_not_success_names_the_process_that_started(nvml, tmp_path):
    """A process starts on the Hopper GPU between the plan and the mode change: NVML's status is IN_USE, the mode
    stays off, and the failure names the process."""
    set_mode = nvml.nvmlDeviceSetMigMode

    def started_first(handle, mode):
        nvml.run(H100, 4343, 1 << 30)
        return set_mode(handle, mode)

    nvml.nvmlDeviceSetMigMode = started_first
    with pytest.raises(apply.MigError) as caught:
        run(nvml, layout="all-1g", gpus={"pci_addresses": [H100]}, procfs_root=_comm(tmp_path, 4343, "trainer"))
    message = str(caught.value)
    assert "MIG mode on: NVML answered 19 and the mode is still off" in message
    assert message.endswith("the GPU is held by processes 4343 (trainer)"), message
    assert nvml.instances(H100) == []


def test_an_nvml_error_listing_the_compute_instances_to_destroy_names_the_gpu_never_raised_raw(nvml):
    """The GPU is lost between the plan (which listed its compute instances) and the destroy's own listing: a
    MigError naming the GPU, the instance and the call, so a caller's per-GPU handling (boot.py) sees it."""
    nvml.enable_mig(H100)
    gone = nvml.create(H100, "7g.80gb")
    by_id = nvml.nvmlDeviceGetGpuInstanceById

    def lost_while_destroying(handle, gpu_instance):
        nvml.inject("nvmlGpuInstanceGetComputeInstances", nvml.NVML_ERROR_GPU_IS_LOST, times=None, bus_id=H100)
        return by_id(handle, gpu_instance)

    nvml.nvmlDeviceGetGpuInstanceById = lost_while_destroying
    with pytest.raises(apply.MigError) as caught:
        run(nvml, layout="all-balanced", gpus={"pci_addresses": [H100]})
    message = str(caught.value)
    assert message.startswith(
        f"GPU {H100} (NVIDIA H100 80GB HBM3): destroying instance 7g.80gb at memory slice 0 (size 8) "
        f"(GPU instance {gone}): nvmlGpuInstanceGetComputeInstances: "
    )
    assert message.endswith(": GPU is lost (NVML error 15)"), message
    assert [i["profile"] for i in nvml.instances(H100)] == ["7g.80gb"]  # nothing destroyed
