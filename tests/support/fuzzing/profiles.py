# SPDX-License-Identifier: Apache-2.0
"""TEST HELPER: how hard the property tests search, one Hypothesis profile per test tier. Never shipped.

- ``full`` (the default, the full suite): every property runs its own example
  count, as written in its file;
- ``quick`` (``ALIGNED_DRA_FUZZ_PROFILE=quick``, set by ``scripts/test.sh
  quick``): the same properties with a small share of those examples, so the
  edit-test loop stays short; fuzzing at full strength is the full suite's.

``ALIGNED_DRA_FUZZ_SCALE`` multiplies either profile's counts (a deeper search
by hand: ``ALIGNED_DRA_FUZZ_SCALE=10``). A property with an explicit
``max_examples`` takes its count from :func:`examples`; one without it takes
the active Hypothesis profile's ``max_examples`` (registered by
:func:`load_profile`, which tests/conftest.py calls in every pytest process).

Run as a script, it prints :func:`describe` (scripts/test.sh's summary).
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any

from hypothesis import settings

PROFILE_VARIABLE = "ALIGNED_DRA_FUZZ_PROFILE"
SCALE_VARIABLE = "ALIGNED_DRA_FUZZ_SCALE"
# The share of a property's own example count that each profile runs.
SHARES = {"full": 1.0, "quick": 0.05}
# Hypothesis' own default, for properties that set no count.
DEFAULT_EXAMPLES = 100


def active_profile() -> str:
    """The profile named by ``ALIGNED_DRA_FUZZ_PROFILE`` (``full`` when unset); a wrong name is an error."""
    name = os.environ.get(PROFILE_VARIABLE, "").strip() or "full"
    if name not in SHARES:
        raise ValueError(f"{PROFILE_VARIABLE}={name!r}: profiles are {', '.join(sorted(SHARES))}")
    return name


def scale() -> float:
    """``ALIGNED_DRA_FUZZ_SCALE`` as a positive number (1 when unset)."""
    raw = os.environ.get(SCALE_VARIABLE, "").strip() or "1"
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{SCALE_VARIABLE}={raw!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{SCALE_VARIABLE}={raw!r} must be a finite number above 0")
    return value


def examples(full: int, minimum: int = 1) -> int:
    """The example count of a property whose full-strength count is ``full``, in the active profile.

    Never below ``minimum`` (nor above ``full`` scaled): a property that must see several outcomes
    (both a failing and a passing example, say) asks for the few it needs."""
    return examples_for(active_profile(), full, minimum)


def examples_for(profile: str, full: int, minimum: int = 1) -> int:
    """``examples(full, minimum)`` as profile ``profile`` counts it."""
    scaled = full * scale()
    return max(1, min(round(scaled), max(minimum, round(scaled * SHARES[profile]))))


def full_only(reason: str) -> Any:
    """A pytest mark that skips a test outside the full profile: a search at a size only the full suite
    affords (a 512-VF node, say), whose property the quick tier checks on smaller inputs (``reason`` names
    them)."""
    import pytest

    quick = active_profile() != "full"
    return pytest.mark.skipif(quick, reason=f"full fuzzing profile only ({PROFILE_VARIABLE}); {reason}")


def load_profile() -> str:
    """Register every profile with Hypothesis, load the active one and return its name."""
    for name in SHARES:
        settings.register_profile(name, max_examples=examples_for(name, DEFAULT_EXAMPLES))
    name = active_profile()
    settings.load_profile(name)
    return name


def describe() -> str:
    """One line on the active profile: ``fuzzing profile: quick (5 % of each property's examples)``."""
    name = active_profile()
    return f"fuzzing profile: {name} ({SHARES[name] * scale() * 100:g} % of each property's examples)"


if __name__ == "__main__":
    try:
        print(describe())
    except ValueError as error:
        print(error, file=sys.stderr)
        sys.exit(2)
