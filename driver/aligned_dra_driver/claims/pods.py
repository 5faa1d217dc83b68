# SPDX-License-Identifier: Apache-2.0
"""The pods of every prepared claim, as the claims' ``status.reservedFor`` names them.

Prepare reads the claim anyway: the pods it names then are recorded here at no cost. The GPU watcher
(:mod:`aligned_dra_driver.usage.watcher`) reads a GPU's claims again only when a process of a pod no prepared
claim names appears on it (a pod that joined a shared claim since, or a driver restarted), bounded and
backed off; the reclaim watcher reads them under pressure. Kept in memory only: after a restart the
first unknown process reads them again.
"""

from __future__ import annotations

import re
import threading
from typing import Any

Pods = list[tuple[str, str]]  # (name, uid), in the claim's namespace
# cgroupfs: .../kubepods/burstable/pod<uid>/<container>; systemd: .../kubepods-burstable-pod<uid_>.slice/...
_POD_RE = re.compile(
    r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(?:\.slice)?(?=/|$)"
)


def pod_uid_of_cgroup(text: str) -> str | None:
    """The pod UID in the contents of a ``/proc/<pid>/cgroup`` file, or None (not a pod's process)."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1].strip().lower()
        found = _POD_RE.findall(path)
        if found:
            return found[-1].replace("_", "-")
    return None


def reserved_pods(claim: Any) -> Pods:
    """The pods of a claim object's ``status.reservedFor`` (other consumers left out)."""
    status = claim.get("status") if isinstance(claim, dict) else None
    pods: Pods = []
    for ref in (status.get("reservedFor") if isinstance(status, dict) else None) or []:
        if isinstance(ref, dict) and ref.get("resource") == "pods" and not ref.get("apiGroup"):
            if isinstance(ref.get("name"), str) and isinstance(ref.get("uid"), str):
                pods.append((ref["name"], ref["uid"]))
    return pods


def read_claim_pods(kube: Any, namespace: str, name: str, uid: str, deadline: float | None) -> Pods:
    """The claim's pods from the API: none when it is gone or its name holds another claim (ApiError else)."""
    from ..kube import ApiError

    try:
        claim = kube.get_claim(namespace, name, deadline=deadline)
    except ApiError as exc:
        if exc.status == 404:
            return []
        raise
    metadata = claim.get("metadata") if isinstance(claim, dict) else None
    if not isinstance(metadata, dict) or metadata.get("uid") != uid:
        return []
    return reserved_pods(claim)


class ClaimPods:
    """``{claim uid: pods}``; written by Prepare, Unprepare and the watchers, read at every scrape."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, Pods] = {}

    def set(self, uid: str, pods: Pods) -> None:
        with self._lock:
            self._pods[uid] = list(pods)

    def get(self, uid: str) -> Pods:
        with self._lock:
            return list(self._pods.get(uid, []))

    def known(self, uid: str) -> bool:
        with self._lock:
            return uid in self._pods

    def forget(self, uid: str) -> None:
        with self._lock:
            self._pods.pop(uid, None)

    def keep_only(self, uids: set[str]) -> None:
        """Drop the claims no longer prepared."""
        with self._lock:
            for uid in [u for u in self._pods if u not in uids]:
                del self._pods[uid]

    def snapshot(self) -> dict[str, Pods]:
        with self._lock:
            return {uid: list(pods) for uid, pods in self._pods.items()}
