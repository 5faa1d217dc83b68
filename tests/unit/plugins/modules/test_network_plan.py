# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.network_plan: a node whose only change is GPUDirect RDMA is pending (the network stage rolls it),
with the GPUDirect diff; a GPUDirect refusal fails the module naming the setting. Nothing is written."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.modules import network_plan
from ansible_collections.aligned.dra.tests.unit.plugins.module_utils.node.network.gpudirect_node import (
    DOWN_GPU,
    DOWN_NIC,
    build,
    snapshot,
)


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        network_plan.main()
    return json.loads(capsys.readouterr().out)


def args(root, **extra):
    return {"sysfs_root": f"{root}/sys", "procfs_root": f"{root}/proc", "modules_load_dir": f"{root}/ml", **extra}


def test_a_gpudirect_only_change_is_pending_with_its_diff(tmp_path, capsys):
    root = build(tmp_path)
    before = snapshot(root)
    result = run(capsys, args(root, gpudirect={"acs": "disable"}, _ansible_diff=True))
    assert result["changed"] is True and result["pending"] is True and result["disruptive"] is True
    assert result["rdma"]["changed"] is False and result["sriov"] is None
    assert result["gpudirect"]["actions"][0].startswith(f"write {DOWN_GPU} ACS Control @0x14e: 0x001d -> ")
    assert [diff["before_header"] for diff in result["diff"]] == ["gpudirect now"]
    assert result["diff"][0]["before"][f"{DOWN_NIC} ACS Control @0x14e"] == "0x003d"
    assert not result.get("warnings")  # the IOMMU is in passthrough: nothing to warn about
    assert snapshot(root) == before
    kept = run(capsys, args(root, gpudirect={"acs": "keep"}))
    assert kept["changed"] is False and "gpudirect" not in kept


def test_a_gpudirect_refusal_fails_naming_the_setting(tmp_path, capsys):
    root = build(tmp_path, gpu_driver="vfio-pci")
    result = run(capsys, args(root, gpudirect={"acs": "disable"}))
    assert result["failed"] is True
    assert result["msg"].startswith(f"gpudirect.acs: refusing to clear ACS redirect on {DOWN_GPU} (device ")
