# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.site_report: check mode, diff, idempotence and refusals."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.modules import site_report
from ansible_collections.aligned.dra.tests.support.sites.report_sites import plan_for, topology_of, write_site


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        site_report.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def output(tmp_path):
    write_site(tmp_path, "west", {"dgx": topology_of("dgx-h100"), "vm": topology_of("vm-flat")})
    return tmp_path


def test_writes_pages_then_changes_nothing(output, capsys):
    first = run(capsys, {"output_dir": str(output)})
    assert first["changed"] is True
    assert sorted(first["files"]) == [str(output / "index.html"), str(output / "west" / "report.html")]
    assert first["index"] == str(output / "index.html")
    assert first["sites"]["west"]["nodes"] == 2 and first["sites"]["west"]["gpus"] == 10
    assert (output / "west" / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert oct((output / "index.html").stat().st_mode & 0o777) == "0o644"
    second = run(capsys, {"output_dir": str(output)})
    assert second["changed"] is False and second["files"] == []


def test_check_mode_writes_nothing_and_diff_names_the_pages(output, capsys):
    result = run(capsys, {"output_dir": str(output), "_ansible_check_mode": True, "_ansible_diff": True})
    assert result["changed"] is True
    assert not (output / "index.html").exists() and not (output / "west" / "report.html").exists()
    assert "west/report.html: absent" in result["diff"]["before"]
    assert "west/report.html: " in result["diff"]["after"] and "bytes" in result["diff"]["after"]


def test_check_mode_on_a_first_run_reports_the_change_and_creates_nothing(tmp_path, capsys):
    output = tmp_path / "output"  # the earlier stages, in check mode, wrote nothing
    result = run(capsys, {"output_dir": str(output), "_ansible_check_mode": True})
    assert result["changed"] is True and "not written yet" in result["msg"]
    assert not output.exists()
    # Outside check mode the same input is an error that names the directory.
    failed = run(capsys, {"output_dir": str(output)})
    assert failed["failed"] is True and failed["msg"] == f"output_dir: {output} is not a directory"


def test_a_new_plan_changes_the_site_page_only(output, capsys):
    run(capsys, {"output_dir": str(output)})
    nodes = {"dgx": topology_of("dgx-h100"), "vm": topology_of("vm-flat")}
    (output / "west" / "plan.json").write_text(json.dumps(plan_for("west", nodes)))
    result = run(capsys, {"output_dir": str(output), "_ansible_diff": True})
    assert result["changed"] is True and result["sites"]["west"]["plan"] is True
    assert str(output / "west" / "report.html") in result["files"]
    assert "gpu-nic-pair-1" in (output / "west" / "report.html").read_text()


def test_bad_input_fails_with_the_file_and_writes_nothing(output, capsys):
    (output / "west" / "plan.json").write_text('{"schema_version": 1}')
    result = run(capsys, {"output_dir": str(output)})
    assert result["failed"] is True
    assert "plan.json: 'templates' must be a list" in result["msg"]
    assert not (output / "index.html").exists()


def test_missing_output_dir_is_refused(tmp_path, capsys):
    result = run(capsys, {"output_dir": str(tmp_path / "nope")})
    assert result["failed"] is True and "output_dir:" in result["msg"] and "is not a directory" in result["msg"]


def test_unknown_warn_level_is_refused(output, capsys):
    result = run(capsys, {"output_dir": str(output), "warn_levels": ["FAR"]})
    assert result["failed"] is True and "warn_levels" in result["msg"]


def test_a_node_file_of_the_wrong_shape_fails_on_output_dir(output, capsys):
    (output / "west" / "nodes" / "vm.json").write_text('{"devices": 5}')
    result = run(capsys, {"output_dir": str(output)})
    assert result["failed"] is True and not result.get("changed")
    assert result["msg"].startswith("output_dir: site west: node file west/nodes/vm.json is not a topology")
    assert not (output / "index.html").exists()


def test_missing_index_names_output_dir(tmp_path, capsys):
    result = run(capsys, {"output_dir": str(tmp_path)})
    assert result["failed"] is True and result["msg"].startswith("output_dir: ")


def test_a_site_without_its_directory_gets_one(tmp_path, capsys):
    (tmp_path / "index.json").write_text(json.dumps({"sites": [{"site": "east", "node_files": []}]}))
    result = run(capsys, {"output_dir": str(tmp_path)})
    assert result["changed"] is True and "failed" not in result
    assert (tmp_path / "east" / "report.html").read_text().startswith("<!DOCTYPE html>")
