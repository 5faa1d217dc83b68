# SPDX-License-Identifier: Apache-2.0
"""benchmarks/suite_cpu.py still runs: one small test file at this checkout's HEAD as the baseline, one round,
as a process of its own. Checked: it exits 0, prints a row with both trees' CPU and their ratio and the ratio
of the sums, and removes its baseline worktree. Its input is refused by name before any worktree is made (a
revision that is not a commit, a test path the checkout lacks, no rounds); a path the baseline lacks exits 2
naming it; a file that fails in either tree stops the run with that tree's log, and no ratio. Each tree's
pytest gets its own collection and ansible.cfg, whatever the caller exported. CPU figures are printed, never
compared (the benchmark is not a timed test).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

SMALL_FILE = "tests/unit/support/fuzzing/test_profiles.py"


@pytest.fixture(scope="module")
def suite_cpu():
    """The script as a module, for the parts a process hides (its environment, its refusals' order)."""
    spec = importlib.util.spec_from_file_location("suite_cpu", REPO / "benchmarks" / "suite_cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def worktrees() -> set[str]:
    listing = subprocess.run(
        ["git", "worktree", "list", "--porcelain"], cwd=REPO, capture_output=True, text=True, check=True
    )
    return {line for line in listing.stdout.splitlines() if line.startswith("worktree ")}


def new_suite_cpu_worktrees(before: set[str]) -> set[str]:
    """Worktrees of the benchmark's (its temporary folders are suite-cpu-*) that were not there ``before``
    (another may come and go meanwhile)."""
    return {line for line in worktrees() - before if "suite-cpu-" in line}


def test_one_round_prints_both_trees_cpu_and_the_ratio_then_removes_the_worktree(run_benchmark):
    before = worktrees()
    out = run_benchmark("suite_cpu", "--baseline", "HEAD", "--rounds", "1", SMALL_FILE)
    assert re.search(rf"^\s+1  {re.escape(SMALL_FILE)}\s+\d+\.\d\s+\d+\.\d\s+\d+\.\d\dx$", out, re.M), out
    assert re.search(r"^sum of every round: baseline \d+\.\d s, this tree \d+\.\d s$", out, re.M), out
    assert re.search(r"^this tree / baseline: \d+\.\d\dx \(target: at most 1\.00x\)$", out, re.M), out
    assert not new_suite_cpu_worktrees(before)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--baseline", "no-such-rev", SMALL_FILE], "--baseline 'no-such-rev' is not a commit of this repository"),
        (
            ["--baseline", "HEAD", "tests/unit/no_such.py"],
            "no such test file or folder in this checkout: tests/unit/no_such.py",
        ),
        (["--baseline", "HEAD", "--rounds", "0", SMALL_FILE], "--rounds must be at least 1 (got 0)"),
    ],
    ids=["revision-no-commit", "test-path-missing", "no-rounds"],
)
def test_bad_input_is_refused_by_name_before_any_worktree(suite_cpu, monkeypatch, capsys, arguments, message):
    def no_worktree(*_args):
        raise AssertionError("a worktree was about to be made for input that is refused")

    monkeypatch.setattr(suite_cpu, "add_baseline", no_worktree)
    with pytest.raises(SystemExit) as exit_:
        suite_cpu.main(arguments)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_a_path_the_baseline_lacks_exits_2_naming_it(run_benchmark_process):
    root = subprocess.run(
        ["git", "rev-list", "--max-parents=0", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()[0]
    if subprocess.run(["git", "cat-file", "-e", f"{root}:{SMALL_FILE}"], cwd=REPO, check=False).returncode == 0:
        pytest.skip("a shallow clone: its oldest commit has the file already")
    before = worktrees()
    done = run_benchmark_process("suite_cpu", "--baseline", root, SMALL_FILE)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"not at the baseline {root[:12]}: {SMALL_FILE}" in done.stderr
    assert not new_suite_cpu_worktrees(before)


def test_a_run_that_fails_in_either_tree_stops_it_with_no_ratio_and_no_worktree_left(run_benchmark_process):
    """pytest exits 5 on a folder with no tests (docs/, at HEAD and here): no figure of a failed run is printed."""
    before = worktrees()
    done = run_benchmark_process("suite_cpu", "--baseline", "HEAD", "--rounds", "1", "docs")
    assert done.returncode == 1, done.stdout + done.stderr
    assert re.search(r"^docs failed in (baseline|this tree) \(exit 5\), the end of its log:$", done.stderr, re.M)
    assert "no tests ran" in done.stderr
    assert "CPU of a failed run is not comparable" in done.stderr
    assert "this tree / baseline" not in done.stdout
    assert not new_suite_cpu_worktrees(before)


def test_one_tree_failing_is_named_alone(suite_cpu, tmp_path):
    """The file is in this checkout, not in the other tree (an empty folder): only that tree is named."""
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(RuntimeError) as failure:
        suite_cpu.run_side_by_side({"baseline": empty, "this tree": REPO}, SMALL_FILE, tmp_path)
    assert str(failure.value).startswith(f"{SMALL_FILE} failed in baseline (exit 4), the end of its log:\n")
    assert "this tree (exit" not in str(failure.value)


def test_each_tree_gets_its_own_collection_and_config_whatever_was_exported(suite_cpu, tmp_path):
    exported = {
        "ANSIBLE_COLLECTIONS_PATH": "/elsewhere/collections",
        "ANSIBLE_CONFIG": "/elsewhere/ansible.cfg",
        "PYTHONDONTWRITEBYTECODE": "1",
        "ALIGNED_DRA_TIMINGS": "/elsewhere/pytest-files.json",
        "ALIGNED_DRA_FUZZ_PROFILE": "quick",
        "PATH": "/usr/bin",
    }
    environment = suite_cpu.pytest_environment(tmp_path, exported)
    assert environment["ANSIBLE_COLLECTIONS_PATH"] == str(tmp_path / ".cache" / "collections")
    assert environment["ANSIBLE_CONFIG"] == str(tmp_path / "ansible.cfg")
    assert environment["PYTHONPYCACHEPREFIX"] == str(tmp_path / ".cache" / "pycache")
    assert environment["CONTAINERS_CONF"] == str(REPO / ".cache" / "containers" / "containers.conf")
    assert environment["ALIGNED_DRA_FUZZ_PROFILE"] == "full"
    assert "PYTHONDONTWRITEBYTECODE" not in environment and "ALIGNED_DRA_TIMINGS" not in environment
    assert environment["PATH"] == "/usr/bin"
