# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.rdma: arguments, check mode with diff, failures naming the field."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.modules import rdma


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        rdma.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def tree(tmp_path):
    params = tmp_path / "sys/module/ib_core/parameters"
    params.mkdir(parents=True)
    (params / "netns_mode").write_text("Y\n")
    return tmp_path


def args(tree, **extra):
    return {
        "sysfs_root": str(tree / "sys"),
        "modprobe_dir": str(tree / "etc/modprobe.d"),
        "modules_load_dir": str(tree / "etc/modules-load.d"),
        **extra,
    }


def test_check_mode_diff_and_nothing_written(tree, capsys):
    result = run(capsys, args(tree, netns_mode="exclusive", _ansible_check_mode=True, _ansible_diff=True))
    assert result["changed"] and result["reboot_required"]
    path = str(tree / "etc/modprobe.d/aligned-dra-rdma.conf")
    assert result["diff"]["before"] == {path: None, "netns_mode": "shared"}
    assert "options ib_core netns_mode=0" in result["diff"]["after"][path]
    assert not (tree / "etc").exists()


def test_apply_then_idempotent(tree, capsys):
    first = run(capsys, args(tree, netns_mode="shared", modules=["ib_core"]))
    assert first["changed"] and not first["reboot_required"]
    assert (tree / "etc/modules-load.d/aligned-dra-rdma.conf").read_text().endswith("ib_core\n")
    second = run(capsys, args(tree, netns_mode="shared", modules=["ib_core"]))
    assert not second["changed"]


def test_bad_module_name(tree, capsys):
    result = run(capsys, args(tree, modules=["ib core"]))
    assert result["failed"] and result["msg"].startswith("modules: 'ib core'")
    assert not (tree / "etc").exists()


def test_bad_mode_is_refused_by_the_argument_spec(tree, capsys):
    result = run(capsys, args(tree, netns_mode="private"))
    assert result["failed"] and "netns_mode" in result["msg"]


@pytest.mark.parametrize("option", ["modprobe_dir", "modules_load_dir"])
def test_a_file_where_a_directory_belongs_is_named_and_nothing_is_written(tree, capsys, option):
    (tree / "afile").write_text("x\n")
    result = run(capsys, args(tree, netns_mode="exclusive", modules=["ib_core"], **{option: str(tree / "afile")}))
    assert result["failed"] and not result.get("changed")
    assert result["msg"] == f"{option}: {tree / 'afile'} is not a directory"
    assert not (tree / "etc").exists()


def test_missing_sysfs_root_is_refused(tree, capsys):
    result = run(capsys, args(tree, netns_mode="shared", sysfs_root=str(tree / "nope")))
    assert result["failed"] and result["msg"] == f"sysfs_root: {tree / 'nope'} is not a directory"
    assert not (tree / "etc").exists()
