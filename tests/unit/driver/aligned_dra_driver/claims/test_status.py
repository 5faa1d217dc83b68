# SPDX-License-Identifier: Apache-2.0
"""The background claim status queue: coalescing, order per claim, retries, drops, bounds."""

from __future__ import annotations

import random
import threading
import time

import pytest
from aligned_dra_driver.claims.status import StatusQueue, backoff_delay
from aligned_dra_driver.kube import ApiError

UID_A = "00000000-0000-0000-0000-00000000000a"
UID_B = "00000000-0000-0000-0000-00000000000b"
READY = [{"driver": "dra.aligned.dev", "pool": "node-a", "device": "gpu-0000-18-00-0"}]


class Api:
    """Test double of Kube's two status calls: records them, fails on demand, can block one claim."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []  # (kind, uid) in the order they happened
        self.failures: dict[str, list[Exception]] = {}  # uid -> errors to raise first
        self.block: dict[str, threading.Event] = {}  # uid -> released when set
        self.entered = threading.Event()
        self.lock = threading.Lock()

    def _hit(self, kind: str, uid: str) -> None:
        if uid in self.block:
            self.entered.set()
            self.block[uid].wait(10)
        with self.lock:
            errors = self.failures.get(uid) or []
            if errors:
                raise errors.pop(0)
            self.calls.append((kind, uid))

    def apply_claim_status(self, namespace, name, devices, uid=None):
        self._hit("apply", uid)
        return {}

    def remove_claim_status(self, namespace, name, uid, driver, pool):
        self._hit("clear", uid)
        return "cleared"


@pytest.fixture
def api():
    return Api()


def queue(api, **kw):
    q = StatusQueue(api, "dra.aligned.dev", "node-a", backoff_base=0.01, backoff_cap=0.05, **kw)
    q.start()
    return q


def test_backoff_is_capped_exponential_with_jitter():
    rng = random.Random(1)
    for attempt in range(12):
        ceiling = min(30.0, 0.5 * 2**attempt)
        delays = [backoff_delay(attempt, 0.5, 30.0, rng) for _sample in range(50)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays)
        assert len(set(delays)) > 1  # jitter: not all the same
    assert backoff_delay(1000, 0.5, 30.0, rng) <= 30.0


def test_writes_happen_in_the_background_and_in_order_per_claim(api):
    q = queue(api)
    q.apply("default", "a", UID_A, READY)
    q.clear("default", "a", UID_A)  # replaces the waiting apply, or follows it if it already runs
    q.apply("default", "b", UID_B, READY)
    assert q.wait_idle(5)
    ours = [kind for kind, uid in api.calls if uid == UID_A]
    assert ours[-1] == "clear" and ours in (["clear"], ["apply", "clear"])
    assert ("apply", UID_B) in api.calls
    q.stop()


def test_a_clear_queued_while_the_apply_runs_comes_after_it(api):
    api.block[UID_A] = threading.Event()
    q = queue(api)
    q.apply("default", "a", UID_A, READY)
    assert api.entered.wait(5)  # the apply is in flight
    q.clear("default", "a", UID_A)
    q.apply("default", "b", UID_B, READY)  # another claim is not held up by the blocked one
    deadline = time.monotonic() + 5
    while ("apply", UID_B) not in api.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ("apply", UID_B) in api.calls and not any(uid == UID_A for _k, uid in api.calls)
    api.block[UID_A].set()
    assert q.wait_idle(5)
    assert [kind for kind, uid in api.calls if uid == UID_A] == ["apply", "clear"]
    q.stop()


@pytest.mark.parametrize(
    "error",
    [ApiError(0, "API server unreachable: ConnectionResetError"), ApiError(503, "503 unavailable"), ApiError(500, "x")],
)
def test_transient_failures_are_retried_until_written(api, error):
    api.failures[UID_A] = [error, error, error]
    q = queue(api)
    q.apply("default", "a", UID_A, READY)
    assert q.wait_idle(5)
    assert api.calls == [("apply", UID_A)] and q.written == 1 and q.dropped == 0
    q.stop()


def test_retry_after_is_honoured(api):
    api.failures[UID_A] = [ApiError(429, "429 slow down", retry_after=30.0)]
    q = queue(api)
    q.apply("default", "a", UID_A, READY)
    deadline = time.monotonic() + 5
    while not getattr(q.jobs.get(UID_A), "attempts", 0) and time.monotonic() < deadline:
        time.sleep(0.01)  # until it is back in the queue after the first failure
    with q.cond:
        job = q.jobs[UID_A]
        assert job.attempts == 1 and job.due - time.monotonic() > 25  # not the 0.05 s backoff cap
    assert api.calls == []
    q.stop()


@pytest.mark.parametrize(("status", "dropped"), [(404, 0), (409, 0), (422, 1), (403, 1)])
def test_a_gone_replaced_or_refused_claim_drops_its_apply(api, status, dropped):
    api.failures[UID_A] = [ApiError(status, f"{status} no")]
    q = queue(api)
    q.apply("default", "a", UID_A, READY)
    assert q.wait_idle(5)
    assert api.calls == [] and q.dropped == dropped and q.pending() == 0
    q.stop()


def test_a_failing_claim_never_holds_up_the_others(api):
    api.failures[UID_A] = [ApiError(503, "503")] * 1000
    q = queue(api)
    q.apply("default", "a", UID_A, READY)
    q.apply("default", "b", UID_B, READY)
    deadline = time.monotonic() + 5
    while ("apply", UID_B) not in api.calls and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ("apply", UID_B) in api.calls
    q.clear("default", "a", UID_A)  # the claim is unprepared: its apply is replaced, never written
    api.failures[UID_A] = []
    assert q.wait_idle(5)
    assert [kind for kind, uid in api.calls if uid == UID_A] == ["clear"]
    q.stop()


def test_the_queue_is_bounded_and_drops_the_longest_waiting(api):
    q = StatusQueue(api, "dra.aligned.dev", "node-a", limit=3)  # not started: nothing is written
    uids = [f"00000000-0000-0000-0000-00000000000{i}" for i in range(5)]
    for uid in uids:
        q.apply("default", "c", uid, READY)
    assert list(q.jobs) == uids[2:] and q.dropped == 2
    q.apply("default", "c", uids[4], READY)  # the same claim again coalesces: nothing dropped
    assert len(q.jobs) == 3 and q.dropped == 2


def test_stop_ends_the_workers(api):
    q = queue(api)
    q.stop()
    for thread in q.threads:
        thread.join(5)
        assert not thread.is_alive()
