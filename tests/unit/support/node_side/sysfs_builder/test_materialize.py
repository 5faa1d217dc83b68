# SPDX-License-Identifier: Apache-2.0
"""tests/fixtures/materialize.py: idempotent trees of the layouts and the real snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.fixtures import materialize as mat
from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import LAYOUTS, TESTS

TREES = TESTS.parent / ".cache" / "sysfs"


def test_materialize_is_idempotent_and_rebuilds_on_change(tmp_path: Path) -> None:
    first = mat.materialize("vm-flat", tmp_path)
    assert first == tmp_path.resolve() / "vm-flat"
    assert (first / "sys" / "bus" / "pci" / "devices" / "0000:00:04.0").is_symlink()
    stamp = first / ".materialized.json"
    mtime = stamp.stat().st_mtime_ns
    (first / "sentinel").write_text("kept")
    assert mat.materialize("vm-flat", tmp_path) == first
    assert stamp.stat().st_mtime_ns == mtime
    assert (first / "sentinel").exists()
    assert json.loads(stamp.read_text())["sha256"] == mat.source_checksum("vm-flat")
    # A stale stamp (different source) triggers an atomic rebuild.
    stamp.write_text(json.dumps({"sha256": "0" * 64}))
    again = mat.materialize("vm-flat", tmp_path)
    assert again == first and not (again / "sentinel").exists()
    assert json.loads(stamp.read_text())["sha256"] == mat.source_checksum("vm-flat")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vm-flat"]  # no temp dirs left behind


@pytest.mark.parametrize(
    ("name", "probe"),
    [
        ("hwloc-32intel64-8ve", "sys/bus/pci/devices/0000:60:00.0/sriov_totalvfs"),
        ("hwloc-32em64t-mic", "sys/class/infiniband/mlx4_0/ports/1/rate"),
        ("hwloc-fakepcilocalities", "sys/devices/system/node/node3"),
        ("ghw-nvidia-p100", "sys/bus/pci/devices/0000:06:00.0/vendor"),
        ("ghw-westmere-vfs", "sys/bus/pci/devices"),
    ],
)
def test_materialize_snapshots_unwraps_top_dir(name: str, probe: str) -> None:
    # The trees scripts/test.sh materialized before the run (built here when missing or stale): extraction
    # and its stamp are the first test's, on a tree of its own.
    root = mat.materialize(name, TREES)
    assert root == TREES.resolve() / name
    assert (root / "sys").is_dir() and (root / "proc").is_dir()
    assert (root / probe).exists(), probe
    assert json.loads((root / ".materialized.json").read_text())["sha256"] == mat.source_checksum(name)
    assert mat.materialize(name, TREES) == root


def test_materialize_names_cover_snapshots_and_layouts() -> None:
    assert set(mat.names()) == set(mat.SNAPSHOTS) | set(LAYOUTS)
    with pytest.raises(KeyError):
        mat.materialize("no-such-fixture", "/nonexistent")
