# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.topology_capture: writes a snapshot once, check mode, failures."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.module_utils.node import topology
from ansible_collections.aligned.dra.plugins.module_utils.node.snapshots import archive as snapshot
from ansible_collections.aligned.dra.plugins.modules import topology_capture
from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize

# Fixture trees as scripts/test.sh materializes them before the run (read only).
TREES = Path(__file__).resolve().parents[4] / ".cache" / "sysfs"


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        topology_capture.main()
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def tree():
    """The tree scripts/test.sh materialized in .cache/sysfs before the run; the module only reads it."""
    return materialize("hwloc-32intel64-8ve", TREES)


def args(tree, dest, **extra) -> dict:
    return {"sysfs_root": str(tree / "sys"), "procfs_root": str(tree / "proc"), "dest": str(dest), **extra}


def test_capture_then_nothing_to_do(tree, tmp_path, capsys):
    dest = tmp_path / "node.tar.gz"
    first = run(capsys, args(tree, dest))
    assert first["changed"] is True
    data = dest.read_bytes()
    assert first["size"] == len(data) and first["dest"] == str(dest)
    assert first["counts"]["files"] > 100 and first["left_out"] == []
    mtime = dest.stat().st_mtime_ns
    second = run(capsys, args(tree, dest))
    assert second["changed"] is False and second["sha256"] == first["sha256"]
    assert dest.stat().st_mtime_ns == mtime  # not rewritten
    root, _changed = snapshot.materialize_snapshot(dest, tmp_path / "tree")
    found = topology.probe(os.path.join(root, "sys"), os.path.join(root, "proc"))
    assert found["counts"]["accelerator"] == 8


def test_check_mode_says_what_would_change_and_writes_nothing(tree, tmp_path, capsys):
    dest = tmp_path / "node.tar.gz"
    result = run(capsys, args(tree, dest, _ansible_check_mode=True))
    assert result["changed"] is True and not dest.exists()
    run(capsys, args(tree, dest))
    before = dest.read_bytes()
    result = run(capsys, args(tree, dest, redact_addresses=True, _ansible_check_mode=True))
    assert result["changed"] is True and dest.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node.tar.gz"]  # no temporary file left


def test_a_replaced_file_keeps_its_mode(tree, tmp_path, capsys):
    dest = tmp_path / "node.tar.gz"
    dest.write_bytes(b"old")
    dest.chmod(0o600)
    assert run(capsys, args(tree, dest))["changed"] is True
    assert dest.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("where", "message"),
    [("missing/node.tar.gz", "dest: directory"), ("adir", "dest: "), ("", "dest: ")],
)
def test_bad_dest_fails_naming_it(tree, tmp_path, capsys, where, message):
    (tmp_path / "adir").mkdir()
    result = run(capsys, args(tree, str(tmp_path / where) if where else ""))
    assert result["failed"] is True and result["msg"].startswith(message), result["msg"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir"]


def test_a_root_that_is_not_a_directory_fails(tmp_path, capsys):
    result = run(capsys, {"sysfs_root": str(tmp_path / "nope"), "dest": str(tmp_path / "x.tar.gz")})
    assert result["failed"] is True and result["msg"].startswith("sysfs_root: ")
    assert not (tmp_path / "x.tar.gz").exists()
