# SPDX-License-Identifier: Apache-2.0
"""playbooks/capture.yml through ansible-playbook: capture, fetch, re-capture, plan offline.

The "nodes" are fixture trees on this machine (ansible_connection: local,
aligned_dra_sysfs_root pointing at each tree).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node import topology
from ansible_collections.aligned.dra.plugins.module_utils.node.snapshots import archive as snapshot
from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    environment,
    recap,
    run_playbook,
    tree_vars,
    write_inventory,
)

pytestmark = pytest.mark.slow

NODES = {"dgx1": "dgx-h100", "ve1": "hwloc-32intel64-8ve"}


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    out = tmp_path_factory.mktemp("capture-play-trees")
    return {host: materialize(name, out) for host, name in NODES.items()}


def inventory(directory: Path, trees: dict[str, Path]) -> Path:
    variables = {
        "aligned_dra_site": "west",
        "aligned_dra_output_dir": str(directory.parent / "output"),
        "aligned_dra_kubernetes_version": "1.36",
        "aligned_dra_claims": {"templates": {"pairs": {"counts": [1]}}},
    }
    return write_inventory(directory / "hosts.yml", {host: tree_vars(root) for host, root in trees.items()}, variables)


def play(hosts: Path, name: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    result = run_playbook(hosts, PLAYBOOKS / name, *args, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def comparable(root: Path) -> dict:
    found = topology.probe(str(root / "sys"), str(root / "proc"))
    found.pop("sysfs_root")
    found["warnings"] = [w.replace(str(root), "<root>") for w in found["warnings"]]
    return found


def test_capture_fetches_identical_snapshots_and_what_if_plans_on_them(trees, tmp_path, request):
    hosts = inventory(tmp_path / "inventory", trees)
    # the nodes' temporary directory; short, since ansible-core puts its RPC server's Unix socket
    # (at most 107 bytes of path) under TMPDIR, and tmp_path is long under xdist
    scratch = Path(tempfile.mkdtemp(prefix="capture-node-"))
    request.addfinalizer(lambda: shutil.rmtree(scratch, ignore_errors=True))
    env = environment(TMPDIR=str(scratch))

    first = play(hosts, "capture.yml", env=env)
    assert recap(first.stdout) == {"changed": 3, "failed": 0}  # the directory and two snapshots
    snapshots = tmp_path / "inventory" / "snapshots"
    assert sorted(p.name for p in snapshots.iterdir()) == ["dgx1.tar.gz", "ve1.tar.gz"]
    assert list(scratch.iterdir()) == []  # nothing left on the nodes
    for host, root in trees.items():
        unpacked, _changed = snapshot.materialize_snapshot(snapshots / f"{host}.tar.gz", tmp_path / "check" / host)
        assert comparable(Path(unpacked)) == comparable(root), host

    stamps = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in snapshots.iterdir()}
    again = play(hosts, "capture.yml", env=env)
    assert recap(again.stdout) == {"changed": 0, "failed": 0}
    assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in snapshots.iterdir()} == stamps
    check = play(hosts, "capture.yml", "--check", env=env)
    assert recap(check.stdout) == {"changed": 0, "failed": 0}
    assert list(scratch.iterdir()) == []

    dest = tmp_path / "what-if.json"
    extra = {
        "aligned_dra_what_if_site": "west",
        "aligned_dra_what_if_snapshots": str(snapshots),
        "aligned_dra_what_if_cache_dir": str(tmp_path / "cache"),
        "aligned_dra_what_if_dest": str(dest),
    }
    what_if = play(hosts, "what_if.yml", "-e", json.dumps(extra), env=env)
    plan = json.loads(dest.read_text())
    pair = next(t for t in plan["templates"] if t["name"] == "gpu-nic-pair-1")
    assert f"gpu-nic-pair-1: {pair['fits_total']} claims fit, worst level {pair['worst_level_text']}" in what_if.stdout
    assert sorted(pair["nodes"]) == ["dgx1", "ve1"]
    assert pair["nodes"]["dgx1"]["fits"] == 8
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["dgx1", "ve1"]


def test_check_mode_reports_a_snapshot_that_would_change(trees, tmp_path):
    hosts = inventory(tmp_path / "inventory", {"ve1": trees["ve1"]})
    env = environment()
    play(hosts, "capture.yml", env=env)
    redacted = play(hosts, "capture.yml", "--check", "-e", "aligned_dra_capture_redact_addresses=true", env=env)
    assert recap(redacted.stdout) == {"changed": 1, "failed": 0}
    assert "would be written" in redacted.stdout
