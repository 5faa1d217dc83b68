# SPDX-License-Identifier: Apache-2.0
"""The fuzzing profiles (tests/support/fuzzing/profiles.py): each tier's example counts, the checks of the
variables that choose them, the Hypothesis profile this process runs and the line the summaries print."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import settings

from ansible_collections.aligned.dra.tests.support.fuzzing import profiles

SCRIPT = Path(profiles.__file__)


@pytest.fixture
def env(monkeypatch):
    """No profile variable from the caller; the active Hypothesis profile is loaded again afterwards."""
    monkeypatch.delenv(profiles.PROFILE_VARIABLE, raising=False)
    monkeypatch.delenv(profiles.SCALE_VARIABLE, raising=False)
    yield monkeypatch
    monkeypatch.undo()
    profiles.load_profile()


def test_full_is_the_default_and_runs_each_propertys_own_count(env):
    assert profiles.active_profile() == "full"
    assert [profiles.examples(n) for n in (1, 60, 300, 10000)] == [1, 60, 300, 10000]
    env.setenv(profiles.PROFILE_VARIABLE, " full ")
    assert profiles.examples(300) == 300


def test_quick_runs_a_twentieth_and_never_below_the_minimum(env):
    env.setenv(profiles.PROFILE_VARIABLE, "quick")
    assert profiles.active_profile() == "quick"
    assert [profiles.examples(n) for n in (10000, 300, 150, 10)] == [500, 15, 8, 1]  # at least one
    assert profiles.examples(60, minimum=6) == 6  # 3 would be too few for this property
    assert profiles.examples(300, minimum=6) == 15
    assert profiles.examples(4, minimum=6) == 4  # never more than the full suite runs


def test_the_scale_multiplies_either_profile(env):
    env.setenv(profiles.SCALE_VARIABLE, "10")
    assert profiles.scale() == 10
    assert profiles.examples(300) == 3000
    env.setenv(profiles.PROFILE_VARIABLE, "quick")
    assert profiles.examples(300) == 150
    env.setenv(profiles.SCALE_VARIABLE, "0.5")
    assert profiles.examples(300) == 8 and profiles.examples_for("full", 300) == 150


@pytest.mark.parametrize("value", ["fast", "Quick", "full,quick"])
def test_a_wrong_profile_name_is_an_error_that_lists_the_profiles(env, value):
    env.setenv(profiles.PROFILE_VARIABLE, value)
    with pytest.raises(ValueError, match=rf"ALIGNED_DRA_FUZZ_PROFILE='{value}': profiles are full, quick"):
        profiles.examples(300)


@pytest.mark.parametrize("value", ["ten", "0", "-1", "nan", "inf"])
def test_a_scale_that_is_no_positive_number_is_an_error(env, value):
    env.setenv(profiles.SCALE_VARIABLE, value)
    with pytest.raises(ValueError, match=rf"ALIGNED_DRA_FUZZ_SCALE='{value}'"):
        profiles.examples(300)


def test_properties_without_a_count_follow_the_loaded_profile(env):
    env.setenv(profiles.PROFILE_VARIABLE, "quick")
    assert profiles.load_profile() == "quick"
    assert settings().max_examples == 5
    assert settings.get_profile("full").max_examples == 100
    env.setenv(profiles.PROFILE_VARIABLE, "full")
    env.setenv(profiles.SCALE_VARIABLE, "2")
    assert profiles.load_profile() == "full"
    assert settings().max_examples == 200


def test_this_run_loaded_the_profile_its_environment_names():
    """tests/conftest.py loads the profile in every pytest process (xdist's workers included)."""
    assert settings().max_examples == profiles.examples(profiles.DEFAULT_EXAMPLES)
    assert settings.get_current_profile_name() == profiles.active_profile()


def test_the_description_names_the_profile_and_its_share(env):
    assert profiles.describe() == "fuzzing profile: full (100 % of each property's examples)"
    env.setenv(profiles.PROFILE_VARIABLE, "quick")
    assert profiles.describe() == "fuzzing profile: quick (5 % of each property's examples)"
    env.setenv(profiles.SCALE_VARIABLE, "10")
    assert profiles.describe() == "fuzzing profile: quick (50 % of each property's examples)"


def test_run_as_a_script_it_prints_the_description_or_why_not(env):
    env.setenv(profiles.PROFILE_VARIABLE, "quick")
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert (run.returncode, run.stdout) == (0, "fuzzing profile: quick (5 % of each property's examples)\n")
    env.setenv(profiles.PROFILE_VARIABLE, "fast")
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert run.returncode == 2 and run.stdout == ""
    assert "ALIGNED_DRA_FUZZ_PROFILE='fast': profiles are full, quick" in run.stderr


def test_a_full_only_test_is_skipped_outside_the_full_profile_with_the_reason(env):
    assert profiles.full_only("the small trees check it").args == (False,)
    env.setenv(profiles.PROFILE_VARIABLE, "quick")
    mark = profiles.full_only("the small trees check it")
    assert mark.name == "skipif" and mark.args == (True,)
    assert mark.kwargs["reason"] == "full fuzzing profile only (ALIGNED_DRA_FUZZ_PROFILE); the small trees check it"
