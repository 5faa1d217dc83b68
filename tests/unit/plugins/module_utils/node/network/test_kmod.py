# SPDX-License-Identifier: Apache-2.0
"""Kernel module helpers: rendering, managed files, loading."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.network import kmod


def test_options_content_is_sorted_and_canonical():
    text = kmod.modprobe_options_content({"mlx5-core": {"b": 2, "a": True}, "ib_core": {"netns_mode": 0}})
    assert text.splitlines()[1:] == ["options ib_core netns_mode=0", "options mlx5_core a=1 b=2"]
    assert text.startswith("# Managed by the aligned.dra")


@pytest.mark.parametrize("bad", ["ib core", "x" * 65, "../evil", ""])
def test_bad_module_names_are_refused(bad):
    with pytest.raises(kmod.KmodError, match="modules"):
        kmod.modules_load_content([bad])


def test_bad_parameter_value_is_refused():
    with pytest.raises(kmod.KmodError, match="ib_core netns_mode"):
        kmod.modprobe_options_content({"ib_core": {"netns_mode": "0 evil=1"}})


def test_loaded_and_parameters_from_a_tree(tmp_path):
    params = tmp_path / "module/ib_core/parameters"
    params.mkdir(parents=True)
    (params / "netns_mode").write_text("Y\n")
    assert kmod.is_loaded("ib_core", str(tmp_path))
    assert kmod.is_loaded("ib-core", str(tmp_path))
    assert not kmod.is_loaded("mlx5_ib", str(tmp_path))
    assert kmod.module_parameter("ib_core", "netns_mode", str(tmp_path)) == "Y"
    assert kmod.module_parameter("ib_core", "other", str(tmp_path)) is None


def test_file_change_writes_once_and_removes(tmp_path):
    path = tmp_path / "d" / "x.conf"
    change = kmod.FileChange(str(path), "a\n")
    assert change.changed and change.current is None
    change.apply()
    assert path.read_text() == "a\n"
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert not kmod.FileChange(str(path), "a\n").changed
    gone = kmod.FileChange(str(path), None)
    assert gone.changed
    gone.apply()
    assert not path.exists()
    assert list((tmp_path / "d").iterdir()) == []  # no temporary files left


def test_configured_options_finds_other_files(tmp_path):
    (tmp_path / "10-local.conf").write_text("# ours\noptions ib_core netns_mode=1 other=2\n")
    (tmp_path / "20-other.conf").write_text("options ib_core something=1\n# options ib_core netns_mode=0\n")
    (tmp_path / "aligned-dra-rdma.conf").write_text("options ib_core netns_mode=0\n")
    (tmp_path / "notes.txt").write_text("options ib_core netns_mode=0\n")
    found = kmod.configured_options(str(tmp_path), "ib_core", "netns_mode", skip="aligned-dra-rdma.conf")
    assert found == [str(tmp_path / "10-local.conf")]


def test_load_reports_modprobe_failure():
    kmod.load("ib_core", lambda name: (0, ""))
    with pytest.raises(kmod.KmodError, match="modprobe nope failed \\(1\\): FATAL: Module nope not found"):
        kmod.load("nope", lambda name: (1, "FATAL: Module nope not found"))
