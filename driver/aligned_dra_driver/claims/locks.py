# SPDX-License-Identifier: Apache-2.0
"""Per-claim locks: Prepare and Unprepare calls on the same claim UID take turns, other claims never wait."""

from __future__ import annotations

import threading
from typing import Any


class ClaimLocks:
    """One lock per claim UID, made on demand and forgotten when nobody holds or waits for it."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, list[Any]] = {}  # uid -> [lock, users]

    def acquire(self, uid: str, timeout: float) -> bool:
        with self._guard:
            slot = self._locks.setdefault(uid, [threading.Lock(), 0])
            slot[1] += 1
        if slot[0].acquire(timeout=max(timeout, 0.0)):
            return True
        self._forget(uid, slot)
        return False

    def release(self, uid: str) -> None:
        with self._guard:
            slot = self._locks[uid]
        slot[0].release()
        self._forget(uid, slot)

    def _forget(self, uid: str, slot: list[Any]) -> None:
        with self._guard:
            slot[1] -= 1
            if slot[1] == 0:
                del self._locks[uid]

    def __len__(self) -> int:
        with self._guard:
            return len(self._locks)
