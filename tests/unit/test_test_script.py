# SPDX-License-Identifier: Apache-2.0
"""scripts/test.sh as written: the quick tier's unit stage, its summary, and the docs that list the tiers.

Read from the script's text, in this process; what the script does when it runs (its stages, arguments,
figures and summary) is tests/integration/test_test_script.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.fuzzing import profiles

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "test.sh"


def _function(name: str) -> str:
    """The body of one shell function of scripts/test.sh, as written there."""
    return SCRIPT.read_text().split(f"\n{name}() {{", 1)[1].split("\n}\n", 1)[0]


def test_the_unit_stage_runs_pytest_as_the_full_suite_does():
    """Same xdist setting (one worker per core, whole files per worker) for tests/unit as the pytest stage."""
    body = _function("stage_unit")
    assert "tests/unit" in body and "pytest_parallel" in body
    assert "pytest_parallel" in _function("stage_pytest")


def test_the_quick_tiers_summary_names_the_slowest_files_as_the_full_suites_does():
    """The unit stage's pytest writes the figures (pytest_parallel, the pytest stage's too) where the summary
    reads them, and every run's summary prints them: ruff and unit, the quick tier, as much as the full suite."""
    text = SCRIPT.read_text()
    assert "QUICK=(ruff unit)" in text
    assert 'ALIGNED_DRA_TIMINGS="$TIMINGS/pytest-files.json"' in _function("pytest_parallel")
    slowest = _function("print_slowest_pytest_files")
    assert 'file="$TIMINGS/pytest-files.json"' in slowest
    assert 'python tests/support/suite_timing.py "$file" 10' in slowest
    assert "\n    print_slowest_pytest_files\n" in _function("print_summary") + "\n"  # unconditionally, last
    assert text.count("print_summary\n") >= 2  # after a failed stage (record) and after a passing run


def test_the_full_suite_fuzzes_at_full_strength_and_the_quick_tier_with_the_quick_profile():
    """The profiles the script knows are tests/support/fuzzing/profiles.py's; the pytest stage runs full
    whatever the environment says, the unit stage quick unless ALIGNED_DRA_FUZZ_PROFILE names another;
    the pytest run gets the stage's profile, and the summary names it."""
    text = SCRIPT.read_text()
    assert f"FUZZ_PROFILES=({' '.join(profiles.SHARES)})" in text
    assert "\nFUZZ_PROFILE_PYTEST=full\n" in text
    assert '\nFUZZ_PROFILE_UNIT="${ALIGNED_DRA_FUZZ_PROFILE:-quick}"\n' in text
    assert 'pytest_parallel pytest "$FUZZ_PROFILE_PYTEST" ' in _function("stage_pytest")
    assert 'pytest_parallel unit "$FUZZ_PROFILE_UNIT" ' in _function("stage_unit")
    assert 'ALIGNED_DRA_FUZZ_PROFILE="$profile"' in _function("pytest_parallel")
    assert "python tests/support/fuzzing/profiles.py" in _function("print_fuzz_profiles")
    assert "\n    print_fuzz_profiles\n" in _function("print_summary")
    # a wrong name stops the script before the machine is prepared
    assert text.index("is no fuzzing profile") < text.index("\nrun bootstrap bootstrap\n")


@pytest.mark.parametrize("doc", ["README.md", "docs/development.md"])
def test_docs_name_the_quick_tier_beside_the_full_suite(doc):
    text = (REPO / doc).read_text()
    assert "./scripts/test.sh quick" in text
    assert "./scripts/test.sh" in text.split("./scripts/test.sh quick", 1)[0]  # the full suite comes first
