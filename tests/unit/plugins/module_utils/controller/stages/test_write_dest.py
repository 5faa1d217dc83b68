# SPDX-License-Identifier: Apache-2.0
"""stages.write_dest: the JSON file a stage writes to ``dest`` (plan, utilization, replay, jobs, teams)."""

from __future__ import annotations

import json

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, write_dest


def test_written_once_then_unchanged_and_check_mode_writes_nothing(tmp_path):
    dest = tmp_path / "plan.json"
    assert write_dest(None, {"a": 1}, False) == (False, {})
    changed, diff = write_dest(str(dest), {"a": 1}, True)
    assert changed and diff and not dest.exists()
    changed, _diff = write_dest(str(dest), {"a": 1}, False)
    assert changed and json.loads(dest.read_text()) == {"a": 1}
    assert write_dest(str(dest), {"a": 1}, False)[0] is False


def test_a_file_that_cannot_be_written_fails_the_stage_naming_it(tmp_path):
    (tmp_path / "afile").write_text("a file, not a directory\n")
    dest = tmp_path / "afile" / "plan.json"
    with pytest.raises(StageError, match="afile"):
        write_dest(str(dest), {"a": 1}, False)
