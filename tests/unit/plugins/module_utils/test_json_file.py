# SPDX-License-Identifier: Apache-2.0
"""write_json_file: written once, unchanged afterwards, nothing in check mode.
read_json_dir: every node file by name, errors that name the file."""

from __future__ import annotations

import json

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.json_file import read_json_dir, write_json_file


def test_writes_creates_directories_and_reports_a_diff(tmp_path):
    dest = tmp_path / "site" / "plan.json"
    changed, diff = write_json_file(str(dest), {"b": 1, "a": [2]}, check_mode=False)
    assert changed
    assert json.loads(dest.read_text()) == {"a": [2], "b": 1}
    assert dest.read_text().index('"a"') < dest.read_text().index('"b"')  # sorted keys
    assert diff["before"] == "" and diff["after"] == dest.read_text()
    assert diff["before_header"] == diff["after_header"] == str(dest)
    assert not (tmp_path / "site" / "plan.json.tmp").exists()


def test_same_content_is_no_change(tmp_path):
    dest = tmp_path / "plan.json"
    write_json_file(str(dest), {"a": 1}, check_mode=False)
    before = dest.stat().st_mtime_ns
    assert write_json_file(str(dest), {"a": 1}, check_mode=False) == (False, {})
    assert dest.stat().st_mtime_ns == before


def test_check_mode_reports_the_change_and_writes_nothing(tmp_path):
    dest = tmp_path / "plan.json"
    write_json_file(str(dest), {"a": 1}, check_mode=False)
    old = dest.read_text()
    changed, diff = write_json_file(str(dest), {"a": 2}, check_mode=True)
    assert changed and diff["before"] == old and '"a": 2' in diff["after"]
    assert dest.read_text() == old
    changed, diff = write_json_file(str(tmp_path / "new" / "x.json"), [], check_mode=True)
    assert changed and not (tmp_path / "new").exists()


def test_read_json_dir_keys_files_by_node_name(tmp_path):
    (tmp_path / "gpu-01.json").write_text('{"gpus": 8}')
    (tmp_path / "cpu-01.json").write_text('{"gpus": 0}')
    (tmp_path / "summary.yml").write_text("not json")  # other files are not node facts
    assert read_json_dir(str(tmp_path)) == {"cpu-01": {"gpus": 0}, "gpu-01": {"gpus": 8}}


def test_read_json_dir_takes_glob_characters_in_the_directory_literally(tmp_path):
    odd = tmp_path / "site[1]"
    odd.mkdir()
    (odd / "n.json").write_text("{}")
    assert read_json_dir(str(odd)) == {"n": {}}


def test_read_json_dir_names_the_broken_file(tmp_path):
    (tmp_path / "good.json").write_text("{}")
    (tmp_path / "bad.json").write_text("{truncated")
    with pytest.raises(ValueError, match="cannot read .*bad.json"):
        read_json_dir(str(tmp_path))


def test_read_json_dir_refuses_a_file_or_a_missing_path(tmp_path):
    (tmp_path / "f").write_text("")
    for path in (tmp_path / "f", tmp_path / "missing"):
        with pytest.raises(ValueError, match="is not a directory"):
            read_json_dir(str(path))
