# SPDX-License-Identifier: Apache-2.0
"""benchmarks/suite_cpu.py still runs: one small test file at this checkout's HEAD as the baseline, one round,
as a process of its own. Checked: it exits 0, prints a row with both trees' CPU and their ratio and the ratio
of the sums, and removes its baseline worktree; a revision that is not a commit, and a test path the checkout
lacks, are refused, naming them, before any worktree is made; a run that fails in either tree stops it, naming
the logs, with no ratio printed. CPU figures are printed, never compared (the benchmark is not a timed test).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

SMALL_FILE = "tests/unit/support/fuzzing/test_profiles.py"


def worktrees() -> set[str]:
    """The repository's worktrees now (compared before and after a run: any other may exist)."""
    listing = subprocess.run(
        ["git", "worktree", "list", "--porcelain"], cwd=REPO, capture_output=True, text=True, check=True
    )
    return {line for line in listing.stdout.splitlines() if line.startswith("worktree ")}


def test_one_round_prints_both_trees_cpu_and_the_ratio_then_removes_the_worktree(run_benchmark):
    before = worktrees()
    out = run_benchmark("suite_cpu", "--baseline", "HEAD", "--rounds", "1", SMALL_FILE)
    assert re.search(rf"^\s+1  {re.escape(SMALL_FILE)}\s+\d+\.\d\s+\d+\.\d\s+\d+\.\d\dx$", out, re.M), out
    assert re.search(r"^sum of every round: baseline \d+\.\d s, this tree \d+\.\d s$", out, re.M), out
    assert re.search(r"^this tree / baseline: \d+\.\d\dx \(target: at most 1\.00x\)$", out, re.M), out
    assert worktrees() == before


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (("--baseline", "no-such-rev", SMALL_FILE), "--baseline 'no-such-rev' is not a commit of this repository"),
        (
            ("--baseline", "HEAD", "tests/unit/no_such.py"),
            "no such test file or folder in this checkout: tests/unit/no_such.py",
        ),
    ],
    ids=["revision-no-commit", "test-path-missing"],
)
def test_bad_input_is_refused_by_name_before_any_worktree(run_benchmark_process, arguments, message):
    before = worktrees()
    done = run_benchmark_process("suite_cpu", *arguments)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr
    assert worktrees() == before


def test_a_run_that_fails_in_either_tree_stops_it_with_no_ratio_and_no_worktree_left(run_benchmark_process):
    """pytest exits 5 on a folder with no tests (docs/, at HEAD and here): no figure of a failed run is printed."""
    before = worktrees()
    done = run_benchmark_process("suite_cpu", "--baseline", "HEAD", "--rounds", "1", "docs")
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(
        r"^docs failed in (baseline|this tree) \(log: .+\), (baseline|this tree) \(log: .+\): CPU of a failed run is not comparable$",
        done.stderr,
        re.M,
    ), done.stderr
    assert "this tree / baseline" not in done.stdout
    assert worktrees() == before
