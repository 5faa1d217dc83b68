# SPDX-License-Identifier: Apache-2.0
"""scripts/test.sh run: the full suite's stages (what .ci/run runs), the quick tier, its arguments, the
figures of its summary, and a run's summary with each stage's CPU, the machine's and the slowest files.

The script's text (the unit stage, the docs that list the tiers) is tests/unit/test_test_script.py's.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "test.sh"
FULL_SUITE = ["ruff", "changelog", "sanity", "lint", "pytest", "molecule"]


def run_script(*args: str) -> subprocess.CompletedProcess:
    # --list and --help answer before the machine is prepared: no bootstrap, no tests run
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, check=False, timeout=60)


def test_the_full_suite_is_what_ci_runs():
    assert "exec ./scripts/test.sh\n" in (REPO / ".ci" / "run").read_text()
    listed = run_script("--list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == FULL_SUITE


def test_quick_tier_is_ruff_and_the_unit_tests():
    listed = run_script("quick", "--list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.split() == ["ruff", "unit"]
    # the unit tests alone are a stage of their own, outside the full suite (pytest runs them)
    assert run_script("unit", "--list").stdout.split() == ["unit"]
    assert run_script("ruff", "pytest", "--list").stdout.split() == ["ruff", "pytest"]


def test_help_names_the_quick_tier():
    usage = run_script("--help")
    assert usage.returncode == 0
    assert "scripts/test.sh quick" in usage.stdout
    assert "unit" in usage.stdout


def test_unknown_stage_names_the_stages_and_tiers():
    bad = run_script("quik")
    assert bad.returncode == 2
    assert "unknown stage 'quik'" in bad.stderr and "quick" in bad.stderr


def test_a_wrong_fuzzing_profile_stops_the_script_before_anything_runs():
    bad = subprocess.run(
        [str(SCRIPT), "quick"], capture_output=True, text=True, check=False, timeout=60,
        env={**os.environ, "ALIGNED_DRA_FUZZ_PROFILE": "fast"},
    )  # fmt: skip
    assert bad.returncode == 2 and bad.stdout == ""
    assert "ALIGNED_DRA_FUZZ_PROFILE='fast' is no fuzzing profile (profiles: full quick)" in bad.stderr


def _function(name: str) -> str:
    """One shell function of scripts/test.sh, as written there."""
    text = SCRIPT.read_text()
    return f"{name}() {{" + text.split(f"\n{name}() {{", 1)[1].split("\n}\n", 1)[0] + "\n}\n"


def test_a_failed_run_stops_every_process_of_a_background_lane():
    """A lane whose work runs two levels down (Molecule, then ansible-playbook): after stop_background no
    process of it holds the script's stdout open any more, so reading it ends (it would hang otherwise)."""
    lane = "( bash -c 'sleep 600 & echo up >&2; wait'; true ) &"  # three levels: no exec shortcut
    script = (
        _function("descendants")
        + _function("stop_background")
        + f"background_pids=(); {lane}\nbackground_pids+=($!); read -r go; stop_background; wait || true\n"
    )
    process = subprocess.Popen(
        ["bash", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stderr.readline() == b"up\n"  # the grandchild is running
    try:
        out, _err = process.communicate(b"go\n", timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        subprocess.run(["pkill", "-f", "sleep 600"], check=False)
        pytest.fail("a process of the lane outlived stop_background")
    assert process.returncode == 0 and out == b""


def test_a_stages_cpu_is_every_field_of_times_added_up(tmp_path):
    times = tmp_path / "stage.times"
    times.write_text("0m1.500s 0m0.500s\n1m2.000s 0m3.000s\n")  # the shell's user and system, its children's
    note = subprocess.run(
        ["bash", "-c", _function("cpu_note") + 'cpu_note "$1"', "-", str(times)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert note.stdout == "  (CPU 67 s)"
    missing = subprocess.run(
        ["bash", "-c", _function("cpu_note") + 'cpu_note "$1"', "-", str(tmp_path / "none")],
        capture_output=True,
        check=False,
    )
    assert missing.returncode == 0 and missing.stdout == b""  # a stage that wrote no figure gets none


def test_the_machines_cpu_is_read_in_seconds_and_only_grows():
    # read until the counters move (they tick 100 times a second), then once more
    script = _function("machine_cpu") + 'first="$(machine_cpu)"; while [[ "$(machine_cpu)" == "$first" ]]; do :; done'
    read = ["bash", "-c", script + '; echo "$first"; machine_cpu']
    first, second = (
        line.split() for line in subprocess.run(read, capture_output=True, text=True, check=True).stdout.splitlines()
    )
    before, after = [float(value) for value in first], [float(value) for value in second]
    busy, idle, containers = before
    assert busy > 0 and idle >= 0 and containers >= 0
    assert all(b >= a for a, b in zip(before, after, strict=True))  # counters since boot never go back
    assert after[0] + after[1] > busy + idle  # the clock moved: busy or idle time grew


def test_a_unit_run_prints_each_stages_cpu_the_machines_and_the_slowest_files():
    """The quick tier's stage on one small file: its summary as the full suite's, the slowest files included."""
    this = "tests/unit/test_test_script.py"
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ALIGNED_DRA_FUZZ_")}
    run = subprocess.run(
        [str(SCRIPT), "unit", "--", this, "-p", "no:cacheprovider"],
        capture_output=True, text=True, check=False, timeout=600, env=environ,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    summary = run.stdout.split("==> summary", 1)[1]
    assert re.search(r"unit\s+passed\s+[\d.]+s  \(CPU \d+ s\)", summary), summary
    # the quick tier's fuzzing profile, in pytest's header and in the summary
    assert "\nfuzzing profile: quick (5 % of each property's examples)\n" in run.stdout.split("==> summary")[0]
    assert "\n    fuzzing profile: quick (5 % of each property's examples), stage unit\n" in summary
    assert re.search(
        r"CPU after bootstrap: \d+ s busy, \d+ s idle \(\d+ % busy\), of it \d+ s in podman containers", summary
    )
    table = summary.split("pytest, the ten slowest files (seconds and CPU", 1)[1]
    assert re.search(r"\n\s+[\d.]+s  CPU\s+[\d.]+s  " + re.escape(this) + "\n", table), summary
    assert re.search(r"all 1 files \(summed over workers\)", table), summary
