# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.gpudirect: the probe's read of a fake tree, check mode with diff, failures naming the field."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.modules import gpudirect
from ansible_collections.aligned.dra.tests.unit.plugins.module_utils.node.network.gpudirect_node import (
    DOWN_GPU,
    DOWN_NIC,
    build,
    snapshot,
)


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        gpudirect.main()
    return json.loads(capsys.readouterr().out)


def args(root, tmp_path, **extra):
    return {
        "sysfs_root": f"{root}/sys",
        "procfs_root": f"{root}/proc",
        "modules_load_dir": str(tmp_path / "modules-load.d"),
        "grub_dir": str(tmp_path / "grub.d"),
        **extra,
    }


def test_check_mode_diff_names_each_register_then_apply_and_idempotent(tmp_path, capsys):
    root = build(tmp_path)
    before = snapshot(root)
    plan = run(capsys, args(root, tmp_path, acs="disable", _ansible_check_mode=True, _ansible_diff=True))
    assert plan["changed"] and plan["disruptive"] and snapshot(root) == before
    assert plan["diff"]["before"] == {
        f"{DOWN_GPU} ACS Control @0x14e": "0x001d",
        f"{DOWN_NIC} ACS Control @0x14e": "0x003d",
    }
    assert set(plan["diff"]["after"].values()) == {"0x0011"}
    assert [item["function"] for item in plan["acs"]] == [DOWN_GPU, DOWN_NIC]
    applied = run(capsys, args(root, tmp_path, acs="disable"))
    assert applied["changed"] and snapshot(root) != before
    again = run(capsys, args(root, tmp_path, acs="disable"))
    assert not again["changed"] and again["actions"] == []


def test_bad_values_are_refused_naming_the_option(tmp_path, capsys):
    root = build(tmp_path)
    result = run(capsys, args(root, tmp_path, acs="off"))
    assert result["failed"] and "acs" in result["msg"]
    result = run(capsys, args(root, tmp_path, iommu="passthrough", iommu_vendor_args=["intel_iommu=on; reboot"]))
    assert result["failed"] and result["msg"].startswith("iommu_vendor_args: 'intel_iommu=on; reboot'")
