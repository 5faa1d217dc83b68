# SPDX-License-Identifier: Apache-2.0
"""The command line as a function, and the build time of the biggest layout
(tests/support/node_side/sysfs_builder/builder.py); the package run as a script is
tests/integration/support/node_side/sysfs_builder/test_builder.py's."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.fuzzing import profiles as fuzz_profiles
from ansible_collections.aligned.dra.tests.support.node_side import sysfs_builder as sb
from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import TESTS


def test_cli_builds_a_layout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert sb.main([str(TESTS / "fixtures" / "layouts" / "vm-flat.yml"), str(tmp_path / "t"), "--list"]) == 0
    out = capsys.readouterr().out
    assert "0000:00:04.0  10de:20b5" in out
    assert (tmp_path / "t" / "sys" / "bus" / "pci" / "devices" / "0000:00:05.0").exists()


@fuzz_profiles.full_only("the quick tier reads the tree scripts/test.sh built before the run")
def test_sriov_8x64_build_time(tmp_path: Path, record_property: pytest.RecordProperty) -> None:
    """8 GPU / 8 PF / 512 VF: about 45k files, directories and links.

    Measured on the 2-core development machine: 0.5 s on tmpfs, 1-1.3 s wall
    on an idle ext4 disk; while other jobs hammer the disk, wall time reaches
    8-12 s, nearly all of it kernel time creating files. The bound is on the
    builder's own (user) CPU time; wall and system time are only recorded.
    """
    spec = sb.load_layout("sriov-8x64")
    wall, before = time.perf_counter(), os.times()
    sb.build_tree(spec, tmp_path)
    wall, after = time.perf_counter() - wall, os.times()
    user, system = after.user - before.user, after.system - before.system
    record_property("sriov_8x64_build_wall_seconds", round(wall, 3))
    record_property("sriov_8x64_build_user_seconds", round(user, 3))
    record_property("sriov_8x64_build_system_seconds", round(system, 3))
    assert user < 3, f"building sriov-8x64 used {user:.1f}s of user CPU ({wall:.1f}s wall, {system:.1f}s system)"
