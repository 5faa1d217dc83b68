# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.mig in-process on the fake NVML: arguments, check mode with diff, apply and a second run, the
reset through run_command, failures naming the input, and pynvml missing or NVML without a driver."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.modules import mig
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

A100, H100 = "0000:18:00.0", "0000:2a:00.0"
CONFIGS = {
    "version": "v1",
    "mig-configs": {
        "all-1g": [
            {"device-filter": "0x233010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
            {"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}},
        ]
    },
}


@pytest.fixture
def nvml(monkeypatch):
    fake = FakeNvml()
    fake.add_gpu(A100, model="A100-SXM4-40GB")
    fake.add_gpu(H100, model="H100-SXM5-80GB")
    monkeypatch.setattr(mig, "load_pynvml", lambda: fake)
    return fake


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        mig.main()
    return json.loads(capsys.readouterr().out)


def test_check_mode_with_diff_changes_nothing(nvml, capsys):
    args = {"mode": "static", "mig_configs": CONFIGS, "layout": "all-1g", "gpus": {"pci_addresses": [H100]}}
    result = run(capsys, {**args, "_ansible_check_mode": True, "_ansible_diff": True})
    assert result["changed"] and result["diff"]["before"] == {H100: {"instances": [], "mig_mode": "off"}}
    assert len(result["diff"]["after"][H100]["instances"]) == 7
    (gpu,) = result["gpus"]
    assert gpu["mig_mode"]["after"] is True and len(gpu["create"]) == 7
    assert nvml.gpus[H100].mig["current"] == 0 and nvml.instances(H100) == []


def test_apply_then_a_second_run_without_change_and_without_diff(nvml, capsys):
    args = {"mode": "static", "mig_configs": CONFIGS, "layout": "all-1g", "gpus": {"pci_addresses": [H100]}}
    first = run(capsys, args)
    assert first["changed"] and len(nvml.instances(H100)) == 7 and "diff" not in first
    second = run(capsys, {**args, "_ansible_diff": True})
    assert not second["changed"] and "diff" not in second


def test_an_ampere_gpu_is_reset_through_run_command_on_a_drained_node(nvml, capsys, monkeypatch):
    commands = []

    def run_command(self, argv, **kwargs):
        commands.append(argv)
        nvml.reset(argv[-1])
        return 0, "", ""

    monkeypatch.setattr(mig.AnsibleModule, "run_command", run_command)
    args = {"mode": "static", "mig_configs": CONFIGS, "layout": "all-1g", "gpus": {"indices": [0]}, "drained": True}
    result = run(capsys, args)
    assert commands == [["nvidia-smi", "--gpu-reset", "-i", A100]]
    assert result["changed"] and not result["reboot_required"] and len(nvml.instances(A100)) == 7


def test_an_ampere_gpu_on_a_node_not_drained_is_reported_with_a_warning(nvml, capsys, monkeypatch):
    warnings = []
    monkeypatch.setattr(mig.AnsibleModule, "warn", lambda self, message: warnings.append(message))
    result = run(capsys, {"mode": "dynamic", "gpus": {"pci_addresses": [A100]}})
    assert result["reboot_required"] and not result["changed"] and result["gpus"][0]["reboot_required"]
    assert warnings == [
        f"GPU {A100} (NVIDIA A100-SXM4-40GB): its MIG mode needs a GPU reset, and the node is not drained"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"mode": "static", "mig_configs": CONFIGS, "layout": "all-2g"}, "layout: no config 'all-2g' in mig_configs"),
        ({"mode": "static", "layout": "all-1g"}, "mig_configs: the layouts"),
        ({"mode": "static", "mig_configs": {"a": [{"devices": "all"}]}, "layout": "a"}, "mig_configs.a[0].mig-enabled"),
        ({"mode": "off", "gpus": {"pci_addresses": ["0000:ff:00.0"]}}, "gpus.pci_addresses[0]: no GPU 0000:ff:00.0"),
        ({"mode": "off", "reset_command": []}, "reset_command: a non-empty list"),
    ],
)
def test_failures_name_the_input(nvml, capsys, args, message):
    result = run(capsys, args)
    assert result["failed"] and result["msg"].startswith(message) and not result.get("changed")


def test_an_unknown_profile_names_the_gpu_and_the_profile(nvml, capsys):
    nvml.enable_mig(A100)
    configs = {"all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}
    result = run(capsys, {"mode": "static", "mig_configs": configs, "layout": "all-1g.10gb"})
    assert result["failed"] and result["msg"].startswith(
        f"mig_configs.all-1g.10gb[0].mig-devices.1g.10gb: GPU {A100} (NVIDIA A100-SXM4-40GB) has no MIG profile 1g.10gb"
    )


def test_ansible_checks_the_argument_types_first(nvml, capsys):
    result = run(capsys, {"mode": "partitioned"})
    assert result["failed"] and "mode" in result["msg"]


def test_pynvml_missing_fails_clearly(capsys, monkeypatch):
    def missing():
        raise ImportError("No module named 'pynvml'")

    monkeypatch.setattr(mig, "load_pynvml", missing)
    result = run(capsys, {"mode": "off"})
    assert result["failed"] and result["msg"].startswith("nvidia-ml-py (module pynvml) is not installed")


def test_nvml_without_a_driver_fails_clearly(capsys, monkeypatch):
    monkeypatch.setattr(mig, "load_pynvml", lambda: FakeNvml(library=False))
    result = run(capsys, {"mode": "off"})
    assert result["failed"] and "NVML cannot start" in result["msg"] and "NVIDIA GPU driver" in result["msg"]
