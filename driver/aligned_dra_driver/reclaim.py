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
claims' pods as last read from the API (read only under pressure: between, a
new pod's use is not counted).

NVML missing (no ``nvidia-ml-py``, no ``libnvidia-ml``), a GPU that vanished,
an API that refuses or hangs (each request bounded by the driver's API
timeout, each GPU's step by ``step_budget``): logged, counted in
``aligned_dra_errors{operation="reclaim"}``, retried with capped exponential
backoff; nothing here ever blocks Prepare or Unprepare.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

LOG = logging.getLogger("aligned_dra_driver.reclaim")
BACKOFF_BASE = 1.0  # seconds before the first retry after a failure
BACKOFF_CAP = 60.0
# after an eviction, no other claim of that GPU is evicted while the evicted pods' processes still use it, for
# at most this long (a pod's default terminationGracePeriodSeconds is 30)
HOLD_SECONDS = 45.0
MIB = 1024 * 1024
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


def load_pynvml() -> Any:
    """The real ``pynvml`` (package ``nvidia-ml-py``); ImportError when it is not installed."""
    import pynvml

    return pynvml


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


class Reclaimer:
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
    ) -> None:
        self.claims = claims
        self.kube = kube
        self.metrics = metrics
        self.nvml_loader = nvml_loader
        self.driver_name = driver_name
        self.node_name = node_name
        self.procfs_root = procfs_root
        self.margin = margin
        self.interval = interval
        self.step_budget = step_budget
        self.nvml: Any = None
        self.pods: dict[str, list[tuple[str, str]]] = {}  # claim UID -> its pods (name, uid) as last read
        self.backoff: dict[str, _Backoff] = {}  # "nvml" or a PCI address
        self.holds: dict[str, _Hold] = {}
        self.gauged: set[str] = set()  # the GPUs (device names) aligned_dra_gpu_bytes_above_request has
        self.polls = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the thread -----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="reclaim", daemon=True)
        self._thread.start()
        LOG.info("reclaim on: evicting above-request claims below %.1f%% free GPU memory", self.margin)

    def stop(self, timeout: float = 1.0) -> None:
        """Stop polling; a step waiting on the API is left behind (a daemon thread), never waited for long."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # never ends the thread
                LOG.exception("reclaim: poll failed unexpectedly")
                self.metrics.errors.labels(operation="reclaim").inc()
            self._stop.wait(self._next_wait())

    def _next_wait(self) -> float:
        """The interval, or less when NVML's retry comes sooner."""
        entry = self.backoff.get("nvml")
        if entry is not None and entry.failures:
            return max(0.0, min(self.interval, entry.until - time.monotonic()))
        return self.interval

    # -- failures -------------------------------------------------------------------------------

    def _waiting(self, key: str, now: float) -> bool:
        entry = self.backoff.get(key)
        return entry is not None and now < entry.until

    def _failed(self, key: str, what: str, exc: BaseException) -> None:
        from .status import backoff_delay

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

    def _nvml_ready(self, now: float) -> bool:
        if self.nvml is not None:
            return True
        if self._waiting("nvml", now):
            return False
        try:
            nvml = self.nvml_loader()
            nvml.nvmlInit()
        except Exception as exc:  # ImportError, NVMLError (no libnvidia-ml, no driver), anything
            self._failed("nvml", "NVML is not usable", exc)
            return False
        self.nvml = nvml
        self._succeeded("nvml")
        return True

    # -- one poll -------------------------------------------------------------------------------

    def poll(self) -> list[dict[str, Any]]:
        """One step over every GPU with fractional claims; the reclaims it made."""
        self.polls += 1
        now = time.monotonic()
        if not self._nvml_ready(now):
            return []
        gpus = shared_gpus(dict(self.claims()))
        known = {s.uid for shares in gpus.values() for s in shares}
        for uid in [u for u in self.pods if u not in known]:  # claims unprepared since
            del self.pods[uid]
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
        from .kube import ApiError

        nvml_error = getattr(self.nvml, "NVMLError", None)
        if isinstance(nvml_error, type) and issubclass(type(exc), nvml_error):
            lost = {getattr(self.nvml, n, None) for n in ("NVML_ERROR_NOT_FOUND", "NVML_ERROR_GPU_IS_LOST")}
            if getattr(exc, "value", None) in lost - {None}:
                self._failed(pci, f"GPU {pci} is gone from NVML", exc)
            elif getattr(exc, "value", None) == getattr(self.nvml, "NVML_ERROR_UNINITIALIZED", object()):
                self.nvml = None  # initialized again at the next poll
                self._failed(pci, "NVML lost its initialization", exc)
            else:
                self._failed(pci, f"NVML failed on GPU {pci}", exc)
        elif isinstance(exc, ApiError):
            self._failed(pci, f"the API server failed for GPU {pci}", exc)
        else:
            LOG.debug("reclaim: unexpected failure on GPU %s", pci, exc_info=True)
            self._failed(pci, f"unexpected failure on GPU {pci}", exc)

    def _usage(self, handle: Any) -> dict[str, int]:
        """Bytes used per pod UID on a GPU (processes of no pod and unknown amounts left out)."""
        by_pid: dict[int, int] = {}
        lists = [self.nvml.nvmlDeviceGetComputeRunningProcesses]
        mps = getattr(self.nvml, "nvmlDeviceGetMPSComputeRunningProcesses", None)
        if mps is not None:
            lists.append(mps)
        for read in lists:
            for process in read(handle):
                used = getattr(process, "usedGpuMemory", None)
                if isinstance(used, int) and used >= 0:
                    by_pid[process.pid] = max(by_pid.get(process.pid, 0), used)
        usage: dict[str, int] = {}
        for pid, used in by_pid.items():
            pod = self._pod_of(pid)
            if pod is not None:
                usage[pod] = usage.get(pod, 0) + used
        return usage

    def _pod_of(self, pid: int) -> str | None:
        try:
            with open(os.path.join(self.procfs_root, str(pid), "cgroup"), encoding="utf-8", errors="replace") as f:
                return pod_uid_of_cgroup(f.read())
        except OSError:  # the process ended since NVML listed it
            return None

    def _poll_gpu(self, pci: str, shares: list[Share]) -> dict[str, Any] | None:
        # bytes: what every nvidia-ml-py release takes (later ones turn a str into bytes themselves)
        handle = self.nvml.nvmlDeviceGetHandleByPciBusId(pci.encode("ascii"))
        memory = self.nvml.nvmlDeviceGetMemoryInfo(handle)
        usage = self._usage(handle)
        pressure = memory.free < memory.total * self.margin / 100.0
        held = pressure and self._held(pci, usage)
        deadline = time.monotonic() + self.step_budget
        if pressure and not held:
            for share in shares:
                self.pods[share.uid] = self._claim_pods(share, deadline)

        def use_of(share: Share) -> int:
            return sum(usage.get(pod_uid, 0) for _name, pod_uid in self.pods.get(share.uid, []))

        above = sum(max(0, use_of(s) - s.request) for s in shares if s.request is not None)
        self.metrics.gpu_bytes_above_request.labels(gpu=shares[0].device).set(above)
        self.gauged.add(shares[0].device)
        if not pressure or held:
            return None
        over = [s for s in shares if s.request is not None and use_of(s) > s.request]
        candidates = [Candidate(s, self.pods.get(s.uid, []), use_of(s), self._priority(s, deadline)) for s in over]
        candidates.sort(key=lambda c: (c.priority, -(c.use - (c.share.request or 0)), c.share.uid))
        for candidate in candidates:
            evicted = self._evict(candidate, deadline)
            if evicted:
                return self._reclaimed(candidate, evicted, memory)
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

    def _claim_pods(self, share: Share, deadline: float) -> list[tuple[str, str]]:
        """The claim's pods from ``status.reservedFor``: none when it is gone or its name holds another claim."""
        from .kube import ApiError

        try:
            claim = self.kube.get_claim(share.namespace, share.name, deadline=deadline)
        except ApiError as exc:
            if exc.status == 404:
                return []
            raise
        metadata = claim.get("metadata") if isinstance(claim, dict) else None
        if not isinstance(metadata, dict) or metadata.get("uid") != share.uid:
            return []
        status = claim.get("status") if isinstance(claim.get("status"), dict) else {}
        pods = []
        for ref in status.get("reservedFor") or []:
            if isinstance(ref, dict) and ref.get("resource") == "pods" and not ref.get("apiGroup"):
                if isinstance(ref.get("name"), str) and isinstance(ref.get("uid"), str):
                    pods.append((ref["name"], ref["uid"]))
        return pods

    def _priority(self, share: Share, deadline: float) -> int:
        """The highest ``spec.priority`` of the claim's pods (0 when unset): a claim goes as late as its most
        important pod."""
        from .kube import ApiError

        priorities = []
        for name, _uid in self.pods.get(share.uid, []):
            try:
                pod = self.kube.get_pod(share.namespace, name, deadline=deadline)
            except ApiError as exc:
                if exc.status == 404:
                    continue
                raise
            value = (pod.get("spec") or {}).get("priority") if isinstance(pod, dict) else None
            priorities.append(value if isinstance(value, int) and not isinstance(value, bool) else 0)
        return max(priorities, default=0)

    def _evict(self, candidate: Candidate, deadline: float) -> list[tuple[str, str]]:
        """Evict the claim's pods; those evicted (empty when a PodDisruptionBudget refused them all)."""
        evicted = []
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
        return evicted

    def _reclaimed(self, candidate: Candidate, evicted: list[tuple[str, str]], memory: Any) -> dict[str, Any]:
        share = candidate.share
        request = share.request or 0
        message = (
            f"GPU {share.device} ({share.pci}) short of memory ({memory.free // MIB} MiB of {memory.total // MIB} MiB "
            f"free, margin {self.margin:g}%): claim {share.name} uses {candidate.use // MIB} MiB, above its request "
            f"of {request // MIB} MiB; evicted pod(s) {', '.join(name for name, _uid in evicted)}"
        )
        LOG.warning("reclaim: %s/%s: %s", share.namespace, share.name, message)
        self.metrics.reclaims.labels(gpu=share.device).inc()
        self.holds[share.pci] = _Hold({uid for _name, uid in evicted}, time.monotonic() + HOLD_SECONDS)
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
        from .kube import ApiError

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
