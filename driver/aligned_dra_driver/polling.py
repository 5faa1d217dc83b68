# SPDX-License-Identifier: Apache-2.0
"""The driver's polling threads: a daemon thread that calls one step until stopped.

:class:`PollingThread` is what the GPU watcher (:mod:`aligned_dra_driver.usage.watcher`) and the reclaim watcher
running alone (:mod:`aligned_dra_driver.usage.reclaim`, ``--usage=off``) share: a step that raises is logged and
counted in ``aligned_dra_errors_total{operation=...}`` and never ends the thread, and :meth:`stop` never
waits long for a step stuck on the API (the thread is a daemon).
"""

from __future__ import annotations

import logging
import threading
from typing import Any


class PollingThread:
    """Subclasses give ``step`` (one poll), ``next_wait`` (seconds to the next) and ``metrics``."""

    metrics: Any

    def __init__(self, name: str, operation: str, log: logging.Logger, failure: str) -> None:
        self._name = name  # the thread's name
        self._operation = operation  # the errors counter's label
        self._log = log
        self._failure = failure  # the log line of a step that raised
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def step(self) -> None:
        raise NotImplementedError

    def next_wait(self) -> float:
        raise NotImplementedError

    def start_thread(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 1.0) -> None:
        """Stop polling; a step waiting on the API is left behind (a daemon thread), never waited for long."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception:  # never ends the thread
                self._log.exception(self._failure)
                self.metrics.errors.labels(operation=self._operation).inc()
            self._stop.wait(self.next_wait())
