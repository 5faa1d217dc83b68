# SPDX-License-Identifier: Apache-2.0
"""scripts/test.sh: the full suite's stages (what .ci/run runs), the quick tier, and the docs that list them."""

from __future__ import annotations

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


def test_the_unit_stage_runs_pytest_as_the_full_suite_does():
    """Same xdist setting (one worker per core, whole files per worker) for tests/unit as the pytest stage."""
    text = SCRIPT.read_text()
    body = text.split("stage_unit() {", 1)[1].split("\n}\n", 1)[0]
    assert "tests/unit" in body and "pytest_parallel" in body
    pytest_body = text.split("stage_pytest() {", 1)[1].split("\n}\n", 1)[0]
    assert "pytest_parallel" in pytest_body


@pytest.mark.parametrize("doc", ["README.md", "docs/development.md"])
def test_docs_name_the_quick_tier_beside_the_full_suite(doc):
    text = (REPO / doc).read_text()
    assert "./scripts/test.sh quick" in text
    assert "./scripts/test.sh" in text.split("./scripts/test.sh quick", 1)[0]  # the full suite comes first
