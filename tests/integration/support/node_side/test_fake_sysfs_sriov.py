# SPDX-License-Identifier: Apache-2.0
"""The fake kernel at work: its watch mode in a thread, its test fault (VF counts above a limit vanish
shortly after) and its standalone copy on Molecule nodes, run by a Python of its own.

Its command line, in-process, is tests/unit/support/node_side/test_fake_sysfs_sriov.py's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.node_side import fake_sysfs_sriov
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout

TESTS = Path(__file__).resolve().parents[3]
NODE_SIDE = TESTS / "support" / "node_side"
LAYOUT = TESTS / "fixtures" / "network" / "sriov-lab.yml"
PF = "sys/bus/pci/devices/0000:01:00.0"


def wait_for(check, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def faulty_tree(tmp_path):
    root = build_tree(load_layout(LAYOUT), tmp_path / "node")
    stop, ready = threading.Event(), threading.Event()
    thread = threading.Thread(
        target=fake_sysfs_sriov.watch,
        args=(str(root / "sys"), 0.01, stop, ready),
        kwargs={"drop_vfs_above": 2, "drop_after": 0.3},
        daemon=True,
    )
    thread.start()
    assert ready.wait(30), "the fake kernel did not start"
    yield root
    stop.set()
    thread.join(5)


def test_counts_above_the_limit_appear_then_vanish(faulty_tree):
    pf = faulty_tree / PF
    (pf / "sriov_numvfs").write_text("4\n")
    assert wait_for((pf / "virtfn3").is_symlink), "the VFs never appeared"
    assert (pf / "sriov_numvfs").read_text().strip() == "4"
    assert wait_for(lambda: (pf / "sriov_numvfs").read_text().strip() == "0"), "the VFs were not dropped"
    assert not (pf / "virtfn0").exists()
    assert not (faulty_tree / "sys/bus/pci/devices/0000:01:01.0").exists()


def test_counts_up_to_the_limit_stay(faulty_tree):
    pf = faulty_tree / PF
    (pf / "sriov_numvfs").write_text("2\n")
    assert wait_for((pf / "virtfn1").is_symlink)
    time.sleep(0.6)
    assert (pf / "sriov_numvfs").read_text().strip() == "2"
    assert (pf / "virtfn1").is_symlink()


def test_a_standalone_copy_needs_only_the_standard_library(tmp_path):
    """What molecule/*/prepare.yml copies to a node: this file and tests/support/node_side/sysfs_builder/*.py beside it."""
    (tmp_path / "sysfs_builder").mkdir()
    for module in (NODE_SIDE / "sysfs_builder").glob("*.py"):
        shutil.copy(module, tmp_path / "sysfs_builder")
    shutil.copy(NODE_SIDE / "fake_sysfs_sriov.py", tmp_path)
    # -I: neither the checkout nor the environment's paths; the script finds its package by itself.
    usage = subprocess.run(
        [sys.executable, "-I", "fake_sysfs_sriov.py", "--help"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert usage.returncode == 0, usage.stderr
    assert "TEST FAKE: the kernel side of SR-IOV" in usage.stdout
    loaded = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            "import runpy, sys; runpy.run_path('fake_sysfs_sriov.py'); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'yaml', 'pytest', 'ansible', 'sysfs_builder'}))",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.strip() == "['sysfs_builder']"
