# SPDX-License-Identifier: Apache-2.0
"""Claim status writes in the background: never part of Prepare's or Unprepare's answer.

Prepare queues an *apply* of this driver's ``status.devices`` entries (the
``Ready`` condition, ``networkData``); Unprepare queues a *clear*. The queue
holds at most one job per claim UID: a newer job replaces a waiting one (an
Unprepare's clear replaces a Prepare's apply that has not been written yet),
and a job in flight is followed by the newer one, never overtaken, so the
claim ends as the last call left it. Workers retry a failed write with capped
exponential backoff and jitter (a ``Retry-After`` is honoured); a claim that
is gone (404) or now has another UID (409 on the UID precondition) drops its
job. A write the API server refuses for good (400, 403, 422) is dropped and
counted. At most ``limit`` claims wait; past that the job waiting longest is
dropped and counted. Pending jobs are not kept across a restart.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

LOG = logging.getLogger(__name__)

QUEUE_LIMIT = 1024
BACKOFF_BASE = 0.5  # seconds before the first retry
BACKOFF_CAP = 30.0


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | Any = random) -> float:
    """Capped exponential backoff with jitter: uniform in [d/2, d] where d = min(cap, base * 2**attempt)."""
    ceiling = min(cap, base * (2 ** min(attempt, 30)))
    return rng.uniform(ceiling / 2, ceiling)


@dataclass
class Job:
    kind: str  # "apply" or "clear"
    namespace: str
    name: str
    uid: str
    devices: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0
    due: float = 0.0  # time.monotonic() when it may run
    queued: float = field(default_factory=time.monotonic)


class StatusQueue:
    """Background writer of claim statuses; ``apply``/``clear`` never block on the network."""

    def __init__(
        self,
        kube: Any,
        driver: str,
        pool: str,
        metrics: Any | None = None,
        workers: int = 2,
        limit: int = QUEUE_LIMIT,
        backoff_base: float = BACKOFF_BASE,
        backoff_cap: float = BACKOFF_CAP,
    ) -> None:
        self.kube = kube
        self.driver = driver
        self.pool = pool
        self.metrics = metrics
        self.workers = workers
        self.limit = limit
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.cond = threading.Condition()
        self.jobs: dict[str, Job] = {}  # waiting jobs, one per claim UID
        self.in_flight: dict[str, Job] = {}
        self.threads: list[threading.Thread] = []
        self.stopping = False
        self.written = 0
        self.dropped = 0

    # -- producers ---------------------------------------------------------------

    def apply(self, namespace: str, name: str, uid: str, devices: list[dict[str, Any]]) -> None:
        self._put(Job("apply", namespace, name, uid, devices))

    def clear(self, namespace: str, name: str, uid: str) -> None:
        self._put(Job("clear", namespace, name, uid))

    def _put(self, job: Job) -> None:
        with self.cond:
            if job.uid not in self.jobs and len(self.jobs) >= self.limit:
                oldest = min(self.jobs.values(), key=lambda j: j.queued)
                del self.jobs[oldest.uid]
                self._drop(oldest, f"more than {self.limit} claims wait for a status write")
            self.jobs[job.uid] = job  # replaces a waiting job of the same claim
            self._gauge()
            self.cond.notify()

    # -- state -------------------------------------------------------------------

    def pending(self) -> int:
        with self.cond:
            return len(self.jobs) + len(self.in_flight)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until nothing waits or runs (tests, benchmarks); True when idle."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.jobs or self.in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.05))
            return True

    def _gauge(self) -> None:
        if self.metrics is not None:
            self.metrics.status_queue.set(len(self.jobs) + len(self.in_flight))

    def _drop(self, job: Job, why: str) -> None:
        self.dropped += 1
        LOG.warning("status %s of claim %s/%s (%s) dropped: %s", job.kind, job.namespace, job.name, job.uid, why)
        if self.metrics is not None:
            self.metrics.status_dropped.inc()

    # -- workers -----------------------------------------------------------------

    def start(self) -> None:
        for index in range(self.workers):
            thread = threading.Thread(target=self._work, name=f"claim-status-{index}", daemon=True)
            thread.start()
            self.threads.append(thread)

    def stop(self) -> None:
        """Stop taking jobs; a write in flight finishes within its API timeout (threads are daemons)."""
        with self.cond:
            self.stopping = True
            self.cond.notify_all()

    def _next(self) -> Job | None:
        """The due job of a claim with nothing in flight, earliest first; waits for one."""
        with self.cond:
            while not self.stopping:
                now = time.monotonic()
                ready = [j for j in self.jobs.values() if j.uid not in self.in_flight]
                due = [j for j in ready if j.due <= now]
                if due:
                    job = min(due, key=lambda j: j.due)
                    del self.jobs[job.uid]
                    self.in_flight[job.uid] = job
                    return job
                wait = min((j.due - now for j in ready), default=None)
                self.cond.wait(wait if wait is None else max(wait, 0.001))
            return None

    def _work(self) -> None:
        while True:
            job = self._next()
            if job is None:
                return
            try:
                retry_in = self._run(job)
            except Exception:  # a bug must not end the worker: the job is dropped, the queue goes on
                LOG.exception("status %s of claim %s failed", job.kind, job.uid)
                retry_in = None
            with self.cond:
                del self.in_flight[job.uid]
                if retry_in is not None and job.uid not in self.jobs and not self.stopping:
                    job.due = time.monotonic() + retry_in
                    self.jobs[job.uid] = job  # still the newest word on this claim: try again
                self._gauge()
                self.cond.notify_all()

    def _run(self, job: Job) -> float | None:
        """Write one job; the delay before a retry, or None when done (written or dropped)."""
        from ..kube import ApiError

        try:
            if job.kind == "apply":
                self.kube.apply_claim_status(job.namespace, job.name, job.devices, uid=job.uid)
                outcome = "applied"
            else:
                outcome = self.kube.remove_claim_status(job.namespace, job.name, job.uid, self.driver, self.pool)
        except ApiError as exc:
            if self.metrics is not None:
                self.metrics.errors.labels(operation="claim_status").inc()
            if exc.status in (404, 409) and job.kind == "apply":
                # gone, or the name now belongs to a claim with another UID (the UID precondition)
                LOG.info("claim %s/%s (%s) gone or replaced: status not written", job.namespace, job.name, job.uid)
                return None
            if not exc.transient and exc.status != 409:
                self._drop(job, str(exc))
                return None
            job.attempts += 1
            delay = backoff_delay(job.attempts - 1, self.backoff_base, self.backoff_cap)
            if exc.retry_after is not None:
                delay = max(delay, exc.retry_after)
            LOG.warning(
                "status %s of claim %s/%s failed (attempt %d, next in %.1f s): %s",
                job.kind,
                job.namespace,
                job.name,
                job.attempts,
                delay,
                exc,
            )
            return delay
        self.written += 1
        LOG.debug("claim %s/%s (%s): status %s", job.namespace, job.name, job.uid, outcome)
        return None
