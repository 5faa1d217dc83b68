# SPDX-License-Identifier: Apache-2.0
"""write_json_file: written once, unchanged afterwards, nothing in check mode."""

from __future__ import annotations

import json

from ansible_collections.aligned.dra.plugins.module_utils.json_file import write_json_file


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
