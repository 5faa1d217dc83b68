# SPDX-License-Identifier: Apache-2.0
"""The boot-time entry point: same library, state file in, JSON line out.

The SR-IOV case runs with the library's plain file writes (as at boot) while
tests/support/node_side/fake_sysfs_sriov.py watches the tree and plays the kernel's part. The entry
point run by ``python -m`` is tests/integration/plugins/module_utils/node/network/test_netconf.py's.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.network import netconf
from ansible_collections.aligned.dra.tests.support.node_side.fake_sysfs_sriov import watch
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout

LAYOUT = Path(__file__).resolve().parents[5] / "fixtures" / "network" / "sriov-lab.yml"


@pytest.fixture
def watched_tree(tmp_path):
    root = build_tree(load_layout(LAYOUT), tmp_path / "node")
    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(target=watch, args=(str(root / "sys"), 0.01, stop, ready), daemon=True)
    thread.start()
    assert ready.wait(30), "the fake kernel did not start"
    yield root
    stop.set()
    thread.join(5)


def test_sriov_state_applied_at_boot_then_nothing_to_do(watched_tree, tmp_path, capsys):
    state = {
        "pfs": [{"pci_address": "0000:01:00.0", "numvfs": 3}, {"netdev": "enp129s0", "numvfs": 2}],
        "sysfs_root": str(watched_tree / "sys"),
        "procfs_root": str(watched_tree / "proc"),
        "driver_state_dir": str(tmp_path / "state"),
        "settle_timeout": 5,
    }
    path = tmp_path / "sriov.json"
    path.write_text(json.dumps(state))
    assert netconf.main(["sriov", str(path)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["changed"] and first["actions"] == ["sriov_numvfs=3", "sriov_numvfs=2"]
    assert (watched_tree / "sys/bus/pci/devices/0000:01:00.0/virtfn2").is_symlink()
    assert netconf.main(["sriov", str(path)]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] is False


def test_refused_change_fails_the_unit(watched_tree, tmp_path, capsys):
    state = {"pfs": [{"pci_address": "0000:01:00.0", "numvfs": 99}], "sysfs_root": str(watched_tree / "sys")}
    path = tmp_path / "sriov.json"
    path.write_text(json.dumps(state))
    assert netconf.main(["sriov", str(path)]) == 1
    assert "pfs[0].numvfs: 99 is above sriov_totalvfs 8" in capsys.readouterr().err


def test_rdma_state_writes_persistent_files(tmp_path, capsys):
    tree = tmp_path / "sys"
    tree.mkdir()
    state = {
        "netns_mode": "exclusive",
        "modules": [],
        "sysfs_root": str(tree),
        "modprobe_dir": str(tmp_path / "modprobe.d"),
        "modules_load_dir": str(tmp_path / "modules-load.d"),
    }
    path = tmp_path / "rdma.json"
    path.write_text(json.dumps(state))
    assert netconf.main(["rdma", str(path), "--check"]) == 0
    assert not (tmp_path / "modprobe.d").exists()
    assert netconf.main(["rdma", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert json.loads(out[1])["actions"] == [f"write {tmp_path}/modprobe.d/aligned-dra-rdma.conf"]
    assert "netns_mode=0" in (tmp_path / "modprobe.d/aligned-dra-rdma.conf").read_text()


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["sriov"], 2, "usage"),
        (["bond", "x.json"], 2, "usage"),
        (["sriov", "/nonexistent.json"], 2, "cannot read the state file"),
    ],
)
def test_bad_command_lines(argv, code, message, capsys):
    assert netconf.main(argv) == code
    assert message in capsys.readouterr().err
