# SPDX-License-Identifier: Apache-2.0
"""The sysfs builder run as a script, by a Python of its own, as the Molecule scenarios build their trees.

Its command line as a function is tests/unit/support/node_side/sysfs_builder/test_builder.py's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[4]


def test_the_package_runs_as_a_script(tmp_path: Path) -> None:
    """As the Molecule scenarios build their trees: ``python tests/support/node_side/sysfs_builder LAYOUT OUTDIR``."""
    layout = TESTS / "fixtures" / "network" / "sriov-lab.yml"
    run = subprocess.run(
        [sys.executable, str(TESTS / "support" / "node_side" / "sysfs_builder"), str(layout), str(tmp_path / "t")],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str((tmp_path / "t").resolve())
    assert (tmp_path / "t" / "sys" / "bus" / "pci" / "devices" / "0000:01:02.1" / "physfn").is_symlink()
