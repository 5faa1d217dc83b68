# SPDX-License-Identifier: Apache-2.0
"""TEST DOUBLES for the bundled DRA driver run in process (tests only, never shipped): what stands for its Kube
and its status queue when a test builds ``aligned_dra_driver.kubelet.driver.Driver`` itself.

    from ansible_collections.aligned.dra.tests.support.harnesses import driver_doubles as d
    kube = d.ClaimsInMemory()
    driver = Driver(Options(**node.options()), kube, status_queue=d.StatusRecorder(kube))
    ref = kube.add(h.claim_object("c", [{"request": "gpu", "device": h.GPU}]))
"""

from __future__ import annotations

import copy
import threading
import time
import uuid
from typing import Any

from ansible_collections.aligned.dra.tests.support.harnesses.driver import DRIVER, NODE


class ClaimsInMemory:
    """Test double of the driver's Kube for an in-process Driver: claims from a dict, status writes recorded."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], dict[str, Any]] = {}
        self.statuses: list[tuple[str, str, list[Any]]] = []
        self.cleared: list[tuple[str, str, str, str, str]] = []
        self.fail_clearing: Exception | None = None
        self.last: dict[str, str] = {}  # uid -> the last status operation queued

    def add(self, claim: dict[str, Any]) -> tuple[str, str, str]:
        claim = copy.deepcopy(claim)
        claim["metadata"]["uid"] = str(uuid.uuid4())
        self.claims[("default", claim["metadata"]["name"])] = claim
        return "default", claim["metadata"]["uid"], claim["metadata"]["name"]

    def get_claim(self, namespace: str, name: str, deadline: float | None = None) -> dict[str, Any]:
        return self.claims[(namespace, name)]

    def apply_claim_status(self, namespace: str, name: str, devices: list[Any], uid: str | None = None) -> dict:
        self.statuses.append((namespace, name, devices))
        return {}

    def remove_claim_status(self, namespace: str, name: str, uid: str, driver: str, pool: str) -> str:
        if self.fail_clearing:
            raise self.fail_clearing
        self.cleared.append((namespace, name, uid, driver, pool))
        return "cleared"


class SlowClaims(ClaimsInMemory):
    """Claims whose GET blocks until released, or until the caller's deadline (then a timeout, as Kube does).

    ``hold[name]``: the Event that releases the GET of claim ``name``; ``waiting`` is set once a held GET waits.
    """

    def __init__(self) -> None:
        super().__init__()
        self.hold: dict[str, threading.Event] = {}
        self.waiting = threading.Event()

    def get_claim(self, namespace: str, name: str, deadline: float | None = None) -> dict[str, Any]:
        from aligned_dra_driver.kube import ApiError

        event = self.hold.get(name)
        if event is not None:
            assert deadline is not None, "every claim GET carries the call's deadline"
            self.waiting.set()
            if not event.wait(max(deadline - time.monotonic(), 0)):
                raise ApiError(0, "API server unreachable: ReadTimeoutError: read timed out")
        return super().get_claim(namespace, name, deadline)


class StatusRecorder:
    """Test double of the driver's status queue: apply and clear go straight to the claims double, in order."""

    def __init__(self, kube: ClaimsInMemory) -> None:
        self.kube = kube

    def apply(self, namespace: str, name: str, uid: str, devices: list[Any]) -> None:
        self.kube.apply_claim_status(namespace, name, devices, uid=uid)
        self.kube.last[uid] = "apply"

    def clear(self, namespace: str, name: str, uid: str) -> None:
        self.kube.remove_claim_status(namespace, name, uid, DRIVER, NODE)
        self.kube.last[uid] = "clear"
