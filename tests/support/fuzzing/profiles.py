# SPDX-License-Identifier: Apache-2.0
"""How hard the property tests search: one Hypothesis profile per test tier.

- ``full`` (the default, the full suite): every property runs its own example
  count, as written in its file;
- ``quick`` (``ALIGNED_DRA_FUZZ_PROFILE=quick``, set by ``scripts/test.sh
  quick``): the same properties with a small share of those examples, so the
  edit-test loop stays short; fuzzing at full strength is the full suite's.

``ALIGNED_DRA_FUZZ_SCALE`` multiplies either profile's counts (a deeper search
by hand: ``ALIGNED_DRA_FUZZ_SCALE=10``). A property with an explicit
``max_examples`` takes its count from :func:`examples`; one without it takes
the active Hypothesis profile's ``max_examples`` (registered by
:func:`load_profile`).
"""

from __future__ import annotations

import os

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
    if value <= 0:
        raise ValueError(f"{SCALE_VARIABLE}={raw!r} must be above 0")
    return value


def examples(full: int) -> int:
    """The example count of a property whose full-strength count is ``full``, in the active profile (at least 1)."""
    return examples_for(active_profile(), full)


def load_profile() -> str:
    """Register every profile with Hypothesis, load the active one and return its name."""
    for name in SHARES:
        settings.register_profile(name, max_examples=examples_for(name, DEFAULT_EXAMPLES))
    name = active_profile()
    settings.load_profile(name)
    return name


def examples_for(profile: str, full: int) -> int:
    """``examples(full)`` as profile ``profile`` counts it."""
    return max(1, round(full * SHARES[profile] * scale()))
