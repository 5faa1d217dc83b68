# SPDX-License-Identifier: Apache-2.0
"""The polling thread both NVML watchers share: a step that raises is logged and counted and the thread
goes on; stop ends it without waiting for the next interval."""

from __future__ import annotations

import logging
import threading

from aligned_dra_driver.polling import PollingThread
from aligned_dra_driver.usage.metrics import Metrics


class Steps(PollingThread):
    def __init__(self, fail_first: int) -> None:
        super().__init__("test-poll", "usage", logging.getLogger("test.polling"), "the step failed")
        self.metrics = Metrics()
        self.fail_first = fail_first
        self.calls = 0
        self.reached = threading.Event()

    def step(self) -> None:
        self.calls += 1
        if self.calls <= self.fail_first:
            raise RuntimeError(f"step {self.calls} broke")
        self.reached.set()

    def next_wait(self) -> float:
        return 0.0 if self.calls <= self.fail_first else 3600.0  # after the failures: one long wait


def test_a_failing_step_is_logged_counted_and_the_thread_goes_on(caplog):
    poller = Steps(fail_first=2)
    with caplog.at_level(logging.ERROR, logger="test.polling"):
        poller.start_thread()
        assert poller.reached.wait(10), "the thread ended at a failing step"
    assert [r.getMessage() for r in caplog.records] == ["the step failed", "the step failed"]
    assert poller.metrics.errors.labels(operation="usage")._value.get() == 2
    poller.stop(timeout=5.0)  # wakes the hour-long wait at once
    assert not poller._thread.is_alive()
    assert poller.calls == 3
