# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.claims_render: result shape, per-minor messages, refused settings."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.modules import claims_render


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        claims_render.main()
    return json.loads(capsys.readouterr().out)


def test_renders_files_and_says_what_is_left_out(capsys):
    result = run(capsys, {"site": "s", "kubernetes_version": "v1.35.2", "settings": {"required": ["gpu-nic-pair-1"]}})
    assert result["changed"] is False and result["minor"] == "1.35"
    assert [f["name"] for f in result["files"]][:3] == [
        "deviceclass-aligned-gpu.yaml",
        "deviceclass-aligned-nic.yaml",
        "deviceclass-aligned-vf.yaml",
    ]
    assert [item["name"] for item in result["left_out"]] == ["fractional-gpu"]
    assert result["required"] == ["gpu-nic-pair-1"]


def test_gate_on_renders_the_template(capsys):
    result = run(capsys, {"site": "s", "kubernetes_version": "1.35", "feature_gates": {"DRAConsumableCapacity": True}})
    assert result["left_out"] == []
    assert "claimtemplate-fractional-gpu.yaml" in [f["name"] for f in result["files"]]


def test_invalid_objects_fail_with_the_problem(capsys):
    settings = {"selectors": {"gpu": ['device.attributes["dra.aligned.dev"].colour == "red"']}}
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "settings": settings})
    assert result["failed"] is True
    assert "DeviceClass aligned-gpu" in result["msg"] and "colour" in result["msg"]


def test_bad_settings_fail(capsys):
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "settings": {"drivers": ["x.io"]}})
    assert result["failed"] is True and "aligned_dra_claims.drivers" in result["msg"]


@pytest.mark.parametrize("version", ["latest", "1.33"])
def test_a_bad_kubernetes_version_names_the_option(capsys, version):
    result = run(capsys, {"site": "s", "kubernetes_version": version})
    assert result["failed"] is True and result["msg"].startswith(f"kubernetes_version: {version!r}")


def test_a_selector_that_is_no_string_names_the_setting(capsys):
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "settings": {"selectors": {"gpu": [5]}}})
    assert result["failed"] is True
    assert result["msg"] == "aligned_dra_claims.selectors.gpu must be a list of CEL strings for a known class"


def test_invalid_rendered_objects_name_the_settings(capsys):
    settings = {"selectors": {"gpu": ['device.attributes["dra.aligned.dev"].colour == "red"']}}
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "settings": settings})
    assert result["failed"] is True and result["msg"].startswith("settings: rendered objects are not valid: ")


def test_tolerations_are_rendered_or_refused_by_the_minor(capsys):
    toleration = {"key": "dra.aligned.dev/unhealthy", "operator": "Exists", "effect": "NoSchedule"}
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "tolerations": [toleration]})
    template = next(f["object"] for f in result["files"] if f["name"] == "claimtemplate-gpu-only.yaml")
    assert template["spec"]["spec"]["devices"]["requests"][0]["exactly"]["tolerations"] == [toleration]
    refused = run(capsys, {"site": "s", "kubernetes_version": "1.35", "tolerations": [toleration]})
    assert refused["failed"] is True
    assert "DRADeviceTaints, which is off on Kubernetes 1.35" in refused["msg"]


def test_rail_rules_render_the_rail_templates_and_say_the_rails(capsys):
    rules = {"gpu-a01": {"by": "netdev_name", "pattern": r"^nic(\d+)$", "count": 2}}
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "rail_rules": rules})
    assert result["rails"] == [0, 1]
    names = [f["name"] for f in result["files"]]
    for name in ("gpu-nic-rail-0", "gpu-nic-rail-1", "gpu-nic-rails-2-0"):
        assert f"claimtemplate-{name}.yaml" in names
    assert [item["name"] for item in result["left_out"]] == ["gpu-nic-rails-4-*", "gpu-nic-rails-8-*"]
    plain = run(capsys, {"site": "s", "kubernetes_version": "1.36"})
    assert plain["rails"] is None and not [n for n in (f["name"] for f in plain["files"]) if "rail" in n]


def test_a_malformed_rail_rule_names_the_host_and_the_field(capsys):
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "rail_rules": {"gpu-a01": {"by": "rows"}}})
    assert result["failed"] is True and result["msg"].startswith("gpu-a01: aligned_dra_rails.by: one of pci_order")


def test_device_options_split_the_gpu_class_and_a_bad_split_names_the_option(capsys):
    result = run(
        capsys, {"site": "s", "kubernetes_version": "1.36", "device_options": {"split_gpu_driver": "gpu.x.io"}}
    )
    classes = {f["object"]["metadata"]["name"]: f["object"] for f in result["files"] if f["name"].startswith("device")}
    assert classes["aligned-gpu"]["spec"]["selectors"][0]["cel"]["expression"].startswith(
        'device.driver == "gpu.x.io" && device.attributes["dra.aligned.dev"].kind'
    )
    assert classes["aligned-nic"]["spec"]["selectors"][0]["cel"]["expression"].startswith(
        'device.driver == "dra.aligned.dev"'
    )
    failed = run(capsys, {"site": "s", "kubernetes_version": "1.36", "device_options": {"split_gpu_driver": "nic.x"}})
    assert failed["failed"] and failed["msg"] == (
        "device_options.split_gpu_driver 'nic.x': the name must contain 'gpu': "
        "KAI Scheduler counts the devices of drivers whose name does"
    )


def test_a_burstable_template_is_rendered_validated_or_left_out(capsys):
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "fractional_burst": {"memory": 2.0}})
    names = [f["name"] for f in result["files"]]
    assert (
        names.index("claimtemplate-fractional-gpu-burst.yaml") == names.index("claimtemplate-fractional-gpu.yaml") + 1
    )
    result = run(capsys, {"site": "s", "kubernetes_version": "1.35", "fractional_burst": {"memory": 2.0}})
    assert [item["name"] for item in result["left_out"]] == ["fractional-gpu", "fractional-gpu-burst"]
    result = run(capsys, {"site": "s", "kubernetes_version": "1.36", "fractional_burst": {"memory": 0.5}})
    assert result["failed"] is True and result["msg"].startswith("aligned_dra_fractional_burst.memory: 0.5 is below 1")


def test_mig_hosts_get_the_mig_objects_and_the_gate_warning(capsys):
    from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

    args = {"site": "s", "kubernetes_version": "1.35", "mig": {"h1": {"mode": "dynamic"}}}
    result = run(capsys, dict(args, topologies={"h1": topology_of("dgx-h100")}, topology_dir="/nonexistent"))
    names = [f["name"] for f in result["files"]]
    assert "deviceclass-mig.aligned.dev.yaml" in names and "claimtemplate-mig-3g-40gb-nic.yaml" in names
    # the task's warnings (Ansible prints them)
    (warning,) = result["warnings"]
    assert "h1: aligned_dra_mig: mode dynamic publishes partitionable devices (DRAPartitionableDevices)" in str(warning)
