# SPDX-License-Identifier: Apache-2.0
"""Reclaim (``--reclaim=evict``): GPU memory a fractional claim uses above its request is taken back.

MPS lets a claim use memory up to its limit; when a GPU runs short, the claims
above their request must go. A thread of its own polls every
``--reclaim-interval`` seconds:

1. the checkpoint's claims, read without any lock: :attr:`Checkpoint.claims`
   is replaced whole under the driver's state lock (``Driver._commit``), so the
   reference read here is one consistent version, copied at once; Prepare and
   Unprepare never wait for this thread;
2. for each GPU with fractional claims (a device entry with a ``share_id``, or
   a ``share``): NVML's total and free memory and the processes using it (the
   compute and the MPS lists, as the real library returns them: other
   containers' processes too), each mapped to its pod through
   ``<procfs-root>/<pid>/cgroup`` (``pod<uid>`` of cgroupfs,
   ``pod<uid_with_underscores>.slice`` of systemd);
3. only when the GPU's free memory is below ``--reclaim-margin`` percent of its
   total: the claims of that GPU from the API (``status.reservedFor``: their
   pods), the pods (``spec.priority``), and one claim evicted per GPU and step:
   lowest pod priority first, then the largest use above request. A claim
   within its request, or whose request is unknown, is never a candidate. An
   eviction refused (429: a PodDisruptionBudget) moves on to the next
   candidate. Each reclaim writes an Event (reason ``Reclaimed``) on the pod
   and on the claim, and counts ``aligned_dra_reclaims_total{gpu}``.

``aligned_dra_gpu_bytes_above_request{gpu}`` is set every poll from the
claims' pods (:class:`~aligned_dra_driver.claims.pods.ClaimPods`: recorded by
Prepare, read again by the usage poll when an unknown pod's process appears,
and under pressure).

NVML is the driver's one :class:`~aligned_dra_driver.usage.watcher.NvmlReader`: with
``--usage=on`` the GPU watcher's thread calls :meth:`Reclaimer.poll` and the
usage poll of the same tick reuses its readings; with ``--usage=off`` the
reclaimer runs a thread and a reader of its own.
An eviction answered 404 or 409 (the pod is gone or going) holds the GPU like
a sent one: the pod's processes are waited for, not evicted again.

NVML missing (no ``nvidia-ml-py``, no ``libnvidia-ml``), a GPU that vanished,
an API that refuses or hangs (each request bounded by the driver's API
timeout, each GPU's step by ``step_budget``): logged, counted in
``aligned_dra_errors{operation="reclaim"}``, retried with capped exponential
backoff; nothing here ever blocks Prepare or Unprepare.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..claims.pods import ClaimPods, pod_uid_of_cgroup, read_claim_pods
from ..polling import PollingThread
from .watcher import BACKOFF_BASE, BACKOFF_CAP, NvmlReader, load_pynvml

LOG = logging.getLogger("aligned_dra_driver.usage.reclaim")
__all__ = ["BACKOFF_BASE", "BACKOFF_CAP", "Reclaimer", "load_pynvml", "pod_uid_of_cgroup", "shared_gpus"]
# after an eviction, no other claim of that GPU is evicted while the evicted pods' processes still use it, for
# at most this long (a pod's default terminationGracePeriodSeconds is 30)
HOLD_SECONDS = 45.0
MIB = 1024 * 1024


@dataclass
class Share:
    """One fractional claim on one GPU, from the checkpoint."""

    uid: str
    namespace: str
    name: str
    device: str  # the published device name: the metrics' gpu label
    pci: str
    request: int | None  # bytes; None: not known (an entry written before requests)


@dataclass
class Candidate:
    share: Share
    pods: list[tuple[str, str]]  # (name, uid), in the claim's namespace
    use: int
    priority: int


@dataclass
class _Backoff:
    failures: int = 0
    until: float = 0.0


@dataclass
class _Hold:
    pods: set[str] = field(default_factory=set)
    until: float = 0.0


def shared_gpus(claims: dict[str, Any]) -> dict[str, list[Share]]:
    """``{pci_address: [Share]}`` for every GPU with fractional claims in a checkpoint snapshot."""
    gpus: dict[str, list[Share]] = {}
    for uid, entry in sorted(claims.items()):
        for device in entry.get("devices") or []:
            if device.get("kind") != "gpu" or (device.get("share_id") is None and "share" not in device):
                continue
            share = device.get("share") if isinstance(device.get("share"), dict) else {}
            request = share.get("request") if isinstance(share.get("request"), dict) else {}
            memory = request.get("memory")
            known = isinstance(memory, int) and not isinstance(memory, bool) and memory >= 0
            gpus.setdefault(device["pci_address"], []).append(
                Share(
                    uid,
                    entry["namespace"],
                    entry["name"],
                    device["device"],
                    device["pci_address"],
                    memory if known else None,
                )
            )
    return gpus


class Reclaimer(PollingThread):
    """The watcher thread; :meth:`poll` is one step (the tests and the benchmark call it directly)."""

    def __init__(
        self,
        claims: Callable[[], dict[str, Any]],
        kube: Any,
        metrics: Any,
        nvml_loader: Callable[[], Any] = load_pynvml,
        *,
        driver_name: str,
        node_name: str,
        procfs_root: str = "/proc",
        margin: float = 5.0,
        interval: float = 2.0,
        step_budget: float = 10.0,
        reader: NvmlReader | None = None,
        claim_pods: ClaimPods | None = None,
    ) -> None:
        super().__init__("reclaim", "reclaim", LOG, "reclaim: poll failed unexpectedly")
        self.claims = claims
        self.kube = kube
        self.metrics = metrics
        # shared with the usage poll (which then begins each tick), else a reader of its own
        self.owns_reader = reader is None
        self.reader = reader or NvmlReader(nvml_loader, procfs_root, metrics, ("reclaim",))
        self.driver_name = driver_name
        self.node_name = node_name
        self.procfs_root = procfs_root
        self.margin = margin
        self.interval = interval
        self.step_budget = step_budget
        self.pods = claim_pods if claim_pods is not None else ClaimPods()  # claim UID -> its pods (name, uid)
        self.backoff: dict[str, _Backoff] = {}  # a PCI address
        self.holds: dict[str, _Hold] = {}
        self.gauged: set[str] = set()  # the GPUs (device names) aligned_dra_gpu_bytes_above_request has
        self.polls = 0

    # -- the thread -----------------------------------------------------------------------------

    def start(self) -> None:
        self.start_thread()
        LOG.info("reclaim on: evicting above-request claims below %.1f%% free GPU memory", self.margin)

    def step(self) -> None:
        self.poll()

    @property
    def nvml(self) -> Any:
        return self.reader.nvml

    @property
    def nvml_loader(self) -> Callable[[], Any]:
        return self.reader.loader

    @nvml_loader.setter
    def nvml_loader(self, loader: Callable[[], Any]) -> None:
        self.reader.loader = loader

    def next_wait(self) -> float:
        """The interval, or less when NVML's retry comes sooner."""
        if self.reader.nvml is None and self.reader.backoff.failures:
            return max(0.0, min(self.interval, self.reader.backoff.until - time.monotonic()))
        return self.interval

    # -- failures -------------------------------------------------------------------------------

    def _waiting(self, key: str, now: float) -> bool:
        entry = self.backoff.get(key)
        return entry is not None and now < entry.until

    def _failed(self, key: str, what: str, exc: BaseException) -> None:
        from ..claims.status import backoff_delay

        entry = self.backoff.setdefault(key, _Backoff())
        delay = backoff_delay(entry.failures, BACKOFF_BASE, BACKOFF_CAP)
        entry.failures += 1
        entry.until = time.monotonic() + delay
        LOG.warning("reclaim: %s (%d in a row; next try in %.1f s): %s", what, entry.failures, delay, exc)
        self.metrics.errors.labels(operation="reclaim").inc()

    def _succeeded(self, key: str) -> None:
        entry = self.backoff.pop(key, None)
        if entry is not None and entry.failures:
            LOG.info("reclaim: %s works again after %d failure(s)", key, entry.failures)

    # -- one poll -------------------------------------------------------------------------------

    def poll(self) -> list[dict[str, Any]]:
        """One step over every GPU with fractional claims; the reclaims it made."""
        self.polls += 1
        now = time.monotonic()
        if self.owns_reader:
            self.reader.begin()
        if not self.reader.ready(now):
            return []
        claims = dict(self.claims())
        gpus = shared_gpus(claims)
        self.pods.keep_only(set(claims))  # claims unprepared since
        for device in self.gauged - {shares[0].device for shares in gpus.values()}:  # no shares left
            self.metrics.gpu_bytes_above_request.remove(device)
            self.gauged.discard(device)
        done: list[dict[str, Any]] = []
        for pci, shares in sorted(gpus.items()):
            if self._waiting(pci, now):
                continue
            try:
                reclaim = self._poll_gpu(pci, shares)
            except Exception as exc:
                self._gpu_failed(pci, exc)
                continue
            self._succeeded(pci)
            if reclaim is not None:
                done.append(reclaim)
        return done

    def _gpu_failed(self, pci: str, exc: Exception) -> None:
        from ..kube import ApiError

        kind = self.reader.lost(exc)  # "uninitialized": initialized again at the next poll
        if kind == "gone":
            self.reader.forget(pci)
            self._failed(pci, f"GPU {pci} is gone from NVML", exc)
        elif kind == "uninitialized":
            self._failed(pci, "NVML lost its initialization", exc)
        elif kind == "nvml":
            self._failed(pci, f"NVML failed on GPU {pci}", exc)
        elif isinstance(exc, ApiError):
            self._failed(pci, f"the API server failed for GPU {pci}", exc)
        else:
            LOG.debug("reclaim: unexpected failure on GPU %s", pci, exc_info=True)
            self._failed(pci, f"unexpected failure on GPU {pci}", exc)

    def _poll_gpu(self, pci: str, shares: list[Share]) -> dict[str, Any] | None:
        memory = self.reader.read(pci)  # this tick's reading: the usage poll of the tick takes the same
        usage = memory.by_pod()
        pressure = memory.free < memory.total * self.margin / 100.0
        held = pressure and self._held(pci, usage)
        deadline = time.monotonic() + self.step_budget
        if pressure and not held:
            for share in shares:
                self.pods.set(share.uid, read_claim_pods(self.kube, share.namespace, share.name, share.uid, deadline))

        def use_of(share: Share) -> int:
            return sum(usage.get(pod_uid, 0) for _name, pod_uid in self.pods.get(share.uid))

        above = sum(max(0, use_of(s) - s.request) for s in shares if s.request is not None)
        self.metrics.gpu_bytes_above_request.labels(gpu=shares[0].device).set(above)
        self.gauged.add(shares[0].device)
        if not pressure or held:
            return None
        over = [s for s in shares if s.request is not None and use_of(s) > s.request]
        candidates = [Candidate(s, self.pods.get(s.uid), use_of(s), self._priority(s, deadline)) for s in over]
        candidates.sort(key=lambda c: (c.priority, -(c.use - (c.share.request or 0)), c.share.uid))
        for candidate in candidates:
            evicted, going = self._evict(candidate, deadline)
            if evicted:
                return self._reclaimed(candidate, evicted, memory, going)
            if going:  # the pods are gone or going already: wait for their processes as after an eviction
                LOG.info(
                    "reclaim: the pods of claim %s/%s are gone or going (404/409): GPU %s waits for their "
                    "processes to end",
                    candidate.share.namespace,
                    candidate.share.name,
                    pci,
                )
                self.holds[pci] = _Hold({uid for _name, uid in going}, time.monotonic() + HOLD_SECONDS)
                return None
        return None

    def _held(self, pci: str, usage: dict[str, int]) -> bool:
        """Whether an eviction on this GPU still waits for its pods' processes to end."""
        hold = self.holds.get(pci)
        if hold is None:
            return False
        if time.monotonic() < hold.until and any(usage.get(uid) for uid in hold.pods):
            return True
        del self.holds[pci]
        return False

    def _priority(self, share: Share, deadline: float) -> int:
        """The highest ``spec.priority`` of the claim's pods (0 when unset): a claim goes as late as its most
        important pod."""
        from ..kube import ApiError

        priorities = []
        for name, _uid in self.pods.get(share.uid):
            try:
                pod = self.kube.get_pod(share.namespace, name, deadline=deadline)
            except ApiError as exc:
                if exc.status == 404:
                    continue
                raise
            value = (pod.get("spec") or {}).get("priority") if isinstance(pod, dict) else None
            priorities.append(value if isinstance(value, int) and not isinstance(value, bool) else 0)
        return max(priorities, default=0)

    def _evict(self, candidate: Candidate, deadline: float) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """Evict the claim's pods; those evicted, and those already gone or going (404, 409)."""
        evicted = []
        going = []
        for name, uid in candidate.pods:
            answer = self.kube.evict_pod(candidate.share.namespace, name, uid=uid, deadline=deadline)
            if answer == "refused":
                LOG.warning(
                    "reclaim: the eviction of pod %s/%s (claim %s) was refused (a PodDisruptionBudget): "
                    "trying the next candidate",
                    candidate.share.namespace,
                    name,
                    candidate.share.name,
                )
            elif answer == "evicted":
                evicted.append((name, uid))
            elif answer == "gone":
                going.append((name, uid))
        return evicted, going

    def _reclaimed(
        self, candidate: Candidate, evicted: list[tuple[str, str]], memory: Any, going: list[tuple[str, str]]
    ) -> dict[str, Any]:
        share = candidate.share
        request = share.request or 0
        message = (
            f"GPU {share.device} ({share.pci}) short of memory ({memory.free // MIB} MiB of {memory.total // MIB} MiB "
            f"free, margin {self.margin:g}%): claim {share.name} uses {candidate.use // MIB} MiB, above its request "
            f"of {request // MIB} MiB; evicted pod(s) {', '.join(name for name, _uid in evicted)}"
        )
        LOG.warning("reclaim: %s/%s: %s", share.namespace, share.name, message)
        self.metrics.reclaims.labels(gpu=share.device).inc()
        held = {uid for _name, uid in evicted + going}
        self.holds[share.pci] = _Hold(held, time.monotonic() + HOLD_SECONDS)
        involved = [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid} for name, uid in evicted]
        involved.append(
            {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "name": share.name, "uid": share.uid}
        )
        for obj in involved:
            self._event(share.namespace, obj, message)
        return {
            "gpu": share.device,
            "claim": share.uid,
            "pods": [uid for _name, uid in evicted],
            "use": candidate.use,
            "request": request,
        }

    def _event(self, namespace: str, involved: dict[str, Any], message: str) -> None:
        from ..kube import ApiError

        body = event_body(namespace, involved, message, self.driver_name, self.node_name)
        try:
            self.kube.create_event(namespace, body, deadline=time.monotonic() + self.step_budget)
        except ApiError as exc:  # the eviction stands; only its record is lost
            LOG.warning("reclaim: the Event on %s %s/%s failed: %s", involved["kind"], namespace, involved["name"], exc)


def event_body(namespace: str, involved: dict[str, Any], message: str, component: str, host: str) -> dict[str, Any]:
    """A core/v1 Event ``Reclaimed`` on ``involved`` (apiVersion, kind, name, uid)."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{involved['name'][:200]}.", "namespace": namespace},
        "involvedObject": {**involved, "namespace": namespace},
        "reason": "Reclaimed",
        "message": message[:1024],
        "type": "Warning",
        "source": {"component": component, "host": host},
        "reportingComponent": component,
        "reportingInstance": host[:128],
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }
