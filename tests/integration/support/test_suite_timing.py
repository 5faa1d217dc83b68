# SPDX-License-Identifier: Apache-2.0
"""The suite's clock end to end: a real pytest session with an xdist worker, as scripts/test.sh runs the
suite, writes each file's seconds and CPU (the worker's and its reaped children's).

The plugin's hooks on their own, with fake reports, are tests/unit/support/test_suite_timing.py's.
"""

from __future__ import annotations

import os
import subprocess
import sys

from ansible_collections.aligned.dra.tests.support import suite_timing

THIS = "tests/integration/support/test_suite_timing.py"


def test_the_process_cpu_counts_the_children_it_reaped():
    before = suite_timing.process_cpu()
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
    assert suite_timing.process_cpu() - before >= 0.1


def test_a_pytest_run_writes_each_files_cpu_beside_its_seconds(tmp_path):
    """The figures of scripts/test.sh's table, from a session that runs the test above in a worker: its CPU
    is spent in a child the worker reaps, so the file's CPU shows that children count."""
    target = tmp_path / "pytest-files.json"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "1", "-q",
         f"{THIS}::test_the_process_cpu_counts_the_children_it_reaped"],
        cwd=suite_timing.REPO, env={**os.environ, "ALIGNED_DRA_TIMINGS": str(target)},
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert list(suite_timing.read_durations(target)) == [THIS]
    assert suite_timing.read_durations(target)[THIS] > 0
    assert suite_timing.read_durations(suite_timing.cpu_path(target))[THIS] >= 0.1
