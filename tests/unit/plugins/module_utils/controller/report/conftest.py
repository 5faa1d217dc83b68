# SPDX-License-Identifier: Apache-2.0
"""The ``usage`` of a ``utilization.json`` for the report's tests: the hand-computed window of
``usage/test_summary.py`` (ten one-minute steps), summarised and advised as the utilization stage does.

- ``whole-a`` (team-a): a whole GPU, 10 GiB used and SM 0.5 for five steps, then no process for five;
- ``share-b`` (no team, template ``fractional-gpu``): a quarter of a GPU (20 GiB request, 40 GiB limit), two
  pods: 25 GiB for five steps (SM 0.3), then 15 GiB at SM 0.02 (below the 5 % threshold) for five;
- ``silent-c`` (team-a): allocated the whole window, never measured: unknown, never idle;
- ``dcgm-e`` (team-a): a whole GPU, 1 GiB used, no SM of its own; DCGM's utilization 3 % for five steps
  (idle by that bound), 40 % for five.

So team-a holds three whole GPUs at every step, one active, one idle and one unknown.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import advice, summary
from ansible_collections.aligned.dra.tests.support.sites.usage_window import window


@pytest.fixture
def usage() -> dict:
    """``usage`` as the utilization stage writes it, through JSON as the report reads it (a fresh copy)."""
    found = summary.summarise(window(), {"ns-a": "team-a"}, {("ns-b", "share-b"): "fractional-gpu"})
    found["advice"] = advice.advise(found)
    return json.loads(json.dumps(found))
