# SPDX-License-Identifier: Apache-2.0
"""The runner's publication loop: what the first scan decides before anything is published."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from aligned_dra_driver.cli import Runner


def loop_once(scanned: bool) -> list[str]:
    """Run the publication loop of a runner that is told to stop at once; the calls it made."""
    calls: list[str] = []
    stopping = threading.Event()
    stopping.set()
    runner = SimpleNamespace(
        stopping=stopping,
        wake=threading.Event(),
        publish=lambda: calls.append("publish"),
        sync=lambda: calls.append("sync"),
        _wait_time=lambda: 0.0,
    )
    Runner.publish_loop(runner, scanned)
    return calls


@pytest.mark.parametrize(("scanned", "calls"), [(True, ["publish"]), (False, [])])
def test_a_failed_first_scan_publishes_nothing(scanned, calls):
    # the inventory of a failed scan is empty: publishing it would delete the node's slices
    assert loop_once(scanned) == calls
