# SPDX-License-Identifier: Apache-2.0
"""GPU use per claim (``--usage=on``, the default where NVML loads): one NVML reader per driver.

:class:`NvmlReader` is the driver's only NVML: initialized by the watcher's first poll (never by Prepare),
retried with capped exponential backoff when it fails, one log line per run of failures. Per GPU it reads
the memory, the processes of the compute and the MPS lists (other containers' processes too), each mapped
to its pod through ``<procfs-root>/<pid>/cgroup`` (cached while NVML lists the PID), and the processes' SM
utilization where NVML samples it (a share of time); on a GPU in MIG mode, each MIG device's memory from NVML on
its MIG handle (:class:`MigReading`, per GPU instance). Readings are kept for one tick: the reclaim watcher and
the usage poll of a tick share them (one poll, not two). Each usage poll adds the share of SMs busy since the
last one where NVML's GPM measures it (Hopper and newer: :mod:`aligned_dra_driver.usage.gpm`), of the GPU
whole or of each MIG device's GPU instance.

:class:`GpuWatcher` is the one thread that polls: every ``--reclaim-interval`` the reclaim step
(:mod:`aligned_dra_driver.usage.reclaim`) and every ``--usage-interval`` the usage snapshot of every NVIDIA GPU
the driver publishes; with the health table (``health``) it tells it the GPUs NVML answers ``GPU_IS_LOST``
for and drains NVML's critical XID events at each usage poll (never waiting). A process of a pod that no prepared claim names makes it read that GPU's claims
(``status.reservedFor``) again: at most :data:`MAX_CLAIM_READS` per poll, backed off per GPU after a
failure, and a pod still unknown after a read is not asked about again while its processes live.

:class:`UsageCollector` turns the last snapshot into series at scrape time, joined with the claims prepared
*now*: an unprepared claim's series are gone at the next scrape, and every label value comes from a
prepared claim or a published GPU.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ..claims.pods import ClaimPods, pod_uid_of_cgroup, read_claim_pods
from ..polling import PollingThread
from .gpm import GpmSampler

LOG = logging.getLogger("aligned_dra_driver.usage.watcher")
BACKOFF_BASE = 1.0  # seconds before the first retry after a failure (jittered to half..full)
BACKOFF_CAP = 60.0
MAX_CLAIM_READS = 32  # claim GETs one usage poll may make to find the pods of unknown processes
# XIDs that are the application's fault, not the GPU's (NVIDIA's device plugin skips the same): no taint
XID_APPLICATION = frozenset({13, 31, 43, 45, 68, 109})
XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError
NVML_ERROR_TIMEOUT = 10
MAX_EVENTS = 64  # events one poll drains


def load_pynvml() -> Any:
    """The real ``pynvml`` (package ``nvidia-ml-py``); ImportError when it is not installed."""
    import pynvml

    return pynvml


@dataclass(frozen=True)
class MigReading:
    """One MIG device (NVML on its MIG handle): its UUID and memory in bytes; ``sms_busy``: the share (0-1) of
    its GPU instance's SMs busy since the last usage poll (NVML's GPM), None where not known."""

    uuid: str
    total: int
    used: int
    sms_busy: float | None = None


@dataclass
class GpuReading:
    """One GPU as NVML showed it in one tick (bytes; ``sm``: 0..1 per PID, only where NVML sampled it)."""

    pci: str
    uuid: str
    total: int
    free: int
    used: int
    processes: dict[int, int] = field(default_factory=dict)  # pid -> bytes (amounts NVML knows)
    pods: dict[int, str | None] = field(default_factory=dict)  # pid -> pod UID, None: no pod's process
    sm: dict[int, float] = field(default_factory=dict)
    migs: dict[int, MigReading] = field(default_factory=dict)  # GPU instance id -> its MIG device
    sms_busy: float | None = None  # the GPU whole (MIG mode off): share of SMs busy since the last usage poll
    mig_mode: bool = False
    handle: Any = field(default=None, repr=False, compare=False)

    def by_pod(self) -> dict[str, int]:
        """Bytes per pod UID (processes of no pod left out)."""
        usage: dict[str, int] = {}
        for pid, used in self.processes.items():
            pod = self.pods.get(pid)
            if pod is not None:
                usage[pod] = usage.get(pod, 0) + used
        return usage


@dataclass
class Backoff:
    failures: int = 0
    until: float = 0.0

    def waiting(self, now: float) -> bool:
        return now < self.until

    def failed(self) -> float:
        from ..claims.status import backoff_delay

        delay = backoff_delay(self.failures, BACKOFF_BASE, BACKOFF_CAP)
        self.failures += 1
        self.until = time.monotonic() + delay
        return delay


class NvmlReader:
    """The driver's NVML, shared by the usage poll and the reclaim watcher."""

    def __init__(
        self,
        loader: Callable[[], Any] = load_pynvml,
        procfs_root: str = "/proc",
        metrics: Any = None,
        operations: tuple[str, ...] = ("usage",),
    ) -> None:
        self.loader = loader
        self.procfs_root = procfs_root
        self.metrics = metrics
        self.operations = operations  # the errors_total labels an NVML failure counts under
        self.nvml: Any = None
        self.backoff = Backoff()
        self.cache: dict[str, GpuReading] = {}  # this tick's readings
        self._pid_pods: dict[int, str | None] = {}
        self._seen: set[int] = set()
        self._uuids: dict[str, str] = {}
        self._sm_since: dict[str, int] = {}
        self._sm_unsupported: set[str] = set()
        self.gpm = GpmSampler()

    def count_error(self) -> None:
        if self.metrics is not None:
            for operation in self.operations:
                self.metrics.errors.labels(operation=operation).inc()

    def ready(self, now: float | None = None) -> bool:
        """NVML initialized (tried now unless backing off); a failure logs once per run of failures."""
        if self.nvml is not None:
            return True
        if self.backoff.waiting(time.monotonic() if now is None else now):
            return False
        try:
            nvml = self.loader()
            nvml.nvmlInit()
        except Exception as exc:  # ImportError, NVMLError (no libnvidia-ml, no driver), anything
            self.failed_init(exc)
            return False
        if self.backoff.failures:
            LOG.info("NVML works again after %d failure(s)", self.backoff.failures)
        self.nvml = nvml
        self.backoff = Backoff()
        self.gpm = GpmSampler()  # samples of an earlier initialization are not this one's
        return True

    def failed_init(self, exc: BaseException) -> None:
        delay = self.backoff.failed()
        level = logging.WARNING if self.backoff.failures == 1 else logging.DEBUG
        LOG.log(
            level,
            "NVML is not usable (%d in a row; next try in %.1f s, tried again with backoff): %s: GPU use is not "
            "measured and nothing is reclaimed until it works",
            self.backoff.failures,
            delay,
            exc,
        )
        self.count_error()

    def lost(self, exc: BaseException) -> str:
        """What an NVML exception of a GPU means: ``gone``, ``uninitialized`` (NVML started again at the next
        poll), ``nvml`` (another NVML error) or ``other`` (not NVML's)."""
        nvml_error = getattr(self.nvml, "NVMLError", None)
        if not (isinstance(nvml_error, type) and issubclass(type(exc), nvml_error)):
            return "other"
        value = getattr(exc, "value", None)
        if value in {getattr(self.nvml, n, None) for n in ("NVML_ERROR_NOT_FOUND", "NVML_ERROR_GPU_IS_LOST")} - {None}:
            return "gone"
        if value == getattr(self.nvml, "NVML_ERROR_UNINITIALIZED", object()):
            self.nvml = None
            return "uninitialized"
        return "nvml"

    def begin(self) -> None:
        """A new tick: readings are taken again; PIDs no GPU listed in the last tick leave the cgroup cache."""
        self.cache = {}
        for pid in [p for p in self._pid_pods if p not in self._seen]:
            del self._pid_pods[pid]
        self._seen = set()

    def read(self, pci: str) -> GpuReading:
        """The GPU's reading of this tick (taken now if not yet); NVML's exceptions pass through."""
        reading = self.cache.get(pci)
        if reading is not None:
            return reading
        nvml = self.nvml
        # bytes: what every nvidia-ml-py release takes (later ones turn a str into bytes themselves)
        handle = nvml.nvmlDeviceGetHandleByPciBusId(pci.encode("ascii"))
        memory = nvml.nvmlDeviceGetMemoryInfo(handle)
        uuid = self._uuids.get(pci)
        if uuid is None:
            raw = nvml.nvmlDeviceGetUUID(handle)
            uuid = self._uuids[pci] = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
        reading = GpuReading(pci, uuid, int(memory.total), int(memory.free), int(memory.used), handle=handle)
        lists = [nvml.nvmlDeviceGetComputeRunningProcesses]
        mps = getattr(nvml, "nvmlDeviceGetMPSComputeRunningProcesses", None)
        if mps is not None:
            lists.append(mps)
        for list_processes in lists:
            for process in list_processes(handle):
                used = getattr(process, "usedGpuMemory", None)
                if isinstance(used, int) and used >= 0:
                    reading.processes[process.pid] = max(reading.processes.get(process.pid, 0), used)
        for pid in reading.processes:
            reading.pods[pid] = self._pod_of(pid)
        reading.sm = self._sm(pci, handle)
        reading.mig_mode, reading.migs = self._mig_state(handle)
        self.cache[pci] = reading
        return reading

    def _migs(self, handle: Any) -> dict[int, MigReading]:
        """The MIG devices of a GPU in MIG mode, per GPU instance id; {} otherwise."""
        return self._mig_state(handle)[1]

    def _mig_state(self, handle: Any) -> tuple[bool, dict[int, MigReading]]:
        """Whether the GPU is in MIG mode, and its MIG devices per GPU instance id ({} outside MIG mode)."""
        nvml = self.nvml
        mode = getattr(nvml, "nvmlDeviceGetMigMode", None)
        try:
            if mode is None or not mode(handle)[0]:
                return False, {}
        except nvml.NVMLError:  # NOT_SUPPORTED: a GPU without MIG
            return False, {}
        migs = {}
        for index in range(int(nvml.nvmlDeviceGetMaxMigDeviceCount(handle))):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
            except nvml.NVMLError:  # NOT_FOUND: no MIG device at this index
                continue
            memory = nvml.nvmlDeviceGetMemoryInfo(mig)
            raw = nvml.nvmlDeviceGetUUID(mig)
            uuid = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
            migs[int(nvml.nvmlDeviceGetGpuInstanceId(mig))] = MigReading(uuid, int(memory.total), int(memory.used))
        return True, migs

    def sample_gpm(self, reading: GpuReading) -> None:
        """The usage poll's GPM figures on the reading: the GPU whole's share of SMs busy (MIG mode off) or each
        MIG device's (its GPU instance's); never raises (no figure instead): an error that is not NVML's turns GPM
        off for the GPU, its memory figures stay."""
        nvml, pci = self.nvml, reading.pci
        if nvml is None or reading.handle is None:
            return
        try:
            if reading.mig_mode:
                shares = self.gpm.instances(nvml, pci, reading.handle, sorted(reading.migs))
                for gi, share in shares.items():
                    reading.migs[gi] = replace(reading.migs[gi], sms_busy=share)
            else:
                reading.sms_busy = self.gpm.gpu(nvml, pci, reading.handle)
        except Exception as exc:  # not NVML's own error (a library without GPM's types): GPM off for the GPU
            LOG.warning("GPU %s: NVML's GPM cannot be used (%s): no share-of-SMs series from it", pci, exc)
            self.gpm.forget(nvml, pci)
            self.gpm.supported[pci] = False
            reading.sms_busy = None
            reading.migs = {gi: replace(m, sms_busy=None) for gi, m in reading.migs.items()}

    def forget(self, pci: str) -> None:
        """A GPU gone: its UUID is read again when it comes back, its GPM samples are dropped."""
        self._uuids.pop(pci, None)
        self._sm_since.pop(pci, None)
        if self.nvml is not None:
            self.gpm.forget(self.nvml, pci)

    def _pod_of(self, pid: int) -> str | None:
        self._seen.add(pid)
        if pid in self._pid_pods:
            return self._pid_pods[pid]
        try:
            path = os.path.join(self.procfs_root, str(pid), "cgroup")
            with open(path, encoding="utf-8", errors="replace") as f:
                pod = pod_uid_of_cgroup(f.read())
        except OSError:  # the process ended since NVML listed it: not cached, it may be read next time
            return None
        self._pid_pods[pid] = pod
        return pod

    def _sm(self, pci: str, handle: Any) -> dict[int, float]:
        """Mean SM utilization per PID over NVML's samples since the last poll; {} where NVML has none."""
        read = getattr(self.nvml, "nvmlDeviceGetProcessUtilization", None)
        if read is None or pci in self._sm_unsupported:
            return {}
        nvml_error = getattr(self.nvml, "NVMLError", Exception)
        try:
            samples = read(handle, self._sm_since.get(pci, 0))
        except nvml_error as exc:
            if getattr(exc, "value", None) == getattr(self.nvml, "NVML_ERROR_NOT_SUPPORTED", object()):
                self._sm_unsupported.add(pci)
                LOG.info("GPU %s gives no per-process utilization: claims on it have no SM series", pci)
            # NVML_ERROR_NOT_FOUND: no sample since the timestamp; anything else: no figure, never a 0
            return {}
        sums: dict[int, list[float]] = {}
        newest = self._sm_since.get(pci, 0)
        for sample in samples:
            sums.setdefault(int(sample.pid), []).append(min(100.0, max(0.0, float(sample.smUtil))))
            newest = max(newest, int(sample.timeStamp))
        self._sm_since[pci] = newest
        return {pid: sum(values) / len(values) / 100.0 for pid, values in sums.items()}


def nvidia_gpus(inventory: Any) -> dict[str, str]:
    """``{pci address: device name}`` of the NVIDIA GPUs in the driver's last scan (what NVML can read); a MIG
    device (``<gpu>-mig-…``) is read with its parent GPU."""
    gpus = {}
    for name, topo in (getattr(inventory, "by_name", None) or {}).items():
        if (
            name.startswith("gpu-")
            and "-mig-" not in name
            and topo.get("vendor_id") == "0x10de"
            and topo.get("pci_address")
        ):
            gpus[topo["pci_address"]] = name
    return gpus


def claims_on(claims: dict[str, Any], pci: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (uid, entry)
        for uid, entry in sorted(claims.items())
        if any(d.get("kind") == "gpu" and d.get("pci_address") == pci for d in entry.get("devices") or [])
    ]


class GpuWatcher(PollingThread):
    """The thread that reads NVML: the reclaim step and the usage snapshot share each tick's readings."""

    def __init__(
        self,
        reader: NvmlReader,
        claims: Callable[[], dict[str, Any]],
        gpus: Callable[[], dict[str, str]],
        claim_pods: ClaimPods,
        kube: Any,
        metrics: Any,
        *,
        usage_interval: float = 15.0,
        reclaimer: Any = None,
        step_budget: float = 10.0,
    ) -> None:
        super().__init__("gpu-watch", "usage", LOG, "the GPU watcher's poll failed unexpectedly")
        self.reader = reader
        self.claims = claims
        self.gpus = gpus
        self.claim_pods = claim_pods
        self.kube = kube
        self.metrics = metrics
        self.usage_interval = usage_interval
        self.reclaimer = reclaimer
        self.step_budget = step_budget
        self.snapshot: dict[str, GpuReading] = {}  # the last usage poll's readings: replaced whole
        self.available = False  # NVML answered at the last usage poll
        self.usage_polls = 0
        self.backoff: dict[str, Backoff] = {}  # per GPU: NVML failures
        self.read_backoff: dict[str, Backoff] = {}  # per GPU: its claims' reads
        self.foreign: set[str] = set()  # pods whose GPU's claims were read and named none of them
        self.health: Any = None  # health.HealthMonitor: a GPU NVML calls lost taints it and its MIG devices
        self.lost: set[str] = set()  # GPUs NVML answered GPU_IS_LOST for (cleared when they answer again)
        self._events: Any = None  # NVML's event set for critical XIDs (with ``health``)
        self._registered: set[str] = set()  # GPUs registered in it (or that refused: not asked again)
        self._usage_due = 0.0
        self._reclaim_due = 0.0

    def start(self) -> None:
        self.start_thread()
        LOG.info("GPU use measured every %g s", self.usage_interval)
        if self.reclaimer is not None:
            LOG.info(
                "reclaim on: evicting above-request claims below %.1f%% free GPU memory, every %g s",
                self.reclaimer.margin,
                self.reclaimer.interval,
            )

    def step(self) -> None:
        self.tick()

    def next_wait(self) -> float:
        """Seconds to the next poll that is due, or to the end of NVML's backoff when that comes first.

        A backoff that has ended is no reason to wake: NVML is tried again by the next poll that is due
        (waking for it would spin this thread until then, on every node without NVML)."""
        now = time.monotonic()
        wait = max(0.0, self._usage_due - now)
        if self.reclaimer is not None:
            wait = min(wait, max(0.0, self._reclaim_due - now))
        if self.reader.nvml is None and self.reader.backoff.until > now:
            wait = min(wait, self.reader.backoff.until - now)
        return wait

    def tick(self) -> None:
        """One tick: a reclaim step when reclaim is on, the usage poll when it is due; one reading per GPU."""
        self.reader.begin()
        if self.reclaimer is not None and time.monotonic() >= self._reclaim_due:
            self._reclaim_due = time.monotonic() + self.reclaimer.interval
            self.reclaimer.poll()
        if time.monotonic() >= self._usage_due:
            self._usage_due = time.monotonic() + self.usage_interval
            self._poll_usage()

    def poll_usage(self) -> None:
        """A usage poll of fresh readings (outside a tick: the tests and the benchmark call it)."""
        self.reader.begin()
        self._poll_usage()

    def _poll_usage(self) -> None:
        """Read every published NVIDIA GPU into a new snapshot (GPUs that fail are left out, backed off)."""
        self.usage_polls += 1
        now = time.monotonic()
        if not self.reader.ready(now):
            self.available = False
            self.snapshot = {}
            return
        claims = dict(self.claims())
        self.claim_pods.keep_only(set(claims))
        readings: dict[str, GpuReading] = {}
        failed = 0
        gpus = self.gpus()
        for pci in sorted(gpus):
            entry = self.backoff.get(pci)
            if entry is not None and entry.waiting(now):
                failed += 1
                continue
            try:
                readings[pci] = self.reader.read(pci)
                self.reader.sample_gpm(readings[pci])
            except Exception as exc:
                failed += 1
                self._gpu_failed(pci, exc)
                if self.reader.nvml is None:  # NVML lost its initialization: started again next poll
                    break
                continue
            if self.backoff.pop(pci, None) is not None:
                LOG.info("GPU %s answers NVML again", pci)
            if pci in self.lost and self.health is not None:
                self.lost.discard(pci)
                self.health.gpu_signal(pci)
        self.available = self.reader.nvml is not None and not (gpus and failed == len(gpus))
        self._poll_xids(gpus)
        self._find_pods(readings, claims)
        self.snapshot = readings if self.available else {}

    def _poll_xids(self, gpus: dict[str, str]) -> None:
        """Drain NVML's critical XID events without waiting; an XID of the GPU's, not the application's, taints
        the GPU and its MIG devices (health's ``xid``)."""
        nvml = self.reader.nvml
        if self.health is None or nvml is None or not hasattr(nvml, "nvmlEventSetCreate"):
            return
        try:
            if self._events is None:
                self._events = nvml.nvmlEventSetCreate()
            for pci in sorted(set(gpus) - self._registered):
                self._registered.add(pci)
                handle = nvml.nvmlDeviceGetHandleByPciBusId(pci.encode("ascii"))
                try:
                    nvml.nvmlDeviceRegisterEvents(handle, XID_CRITICAL, self._events)
                except nvml.NVMLError as exc:  # NOT_SUPPORTED on some GPUs
                    LOG.info("GPU %s gives no XID events: %s", pci, exc)
            for _event in range(MAX_EVENTS):
                try:
                    event = nvml.nvmlEventSetWait_v2(self._events, 0)
                except nvml.NVMLError as exc:
                    if getattr(exc, "value", None) == NVML_ERROR_TIMEOUT:
                        return  # none waiting
                    raise
                xid = int(event.eventData)
                raw = nvml.nvmlDeviceGetPciInfo(event.device).busId
                domain, _sep, rest = (raw.decode("ascii") if isinstance(raw, bytes) else str(raw)).partition(":")
                pci = f"{int(domain, 16):04x}:{rest}".lower()
                if xid not in XID_APPLICATION and pci in gpus:
                    LOG.warning("GPU %s: XID %d (critical): tainted for the hold", pci, xid)
                    self.health.gpu_signal(pci, "xid", f"XID {xid}")
        except Exception as exc:
            LOG.warning("usage: reading NVML's XID events failed: %s", exc)

    def _gpu_failed(self, pci: str, exc: Exception) -> None:
        kind = self.reader.lost(exc)
        entry = self.backoff.setdefault(pci, Backoff())
        delay = entry.failed()
        if kind == "gone":
            self.reader.forget(pci)
            if getattr(exc, "value", None) == getattr(self.reader.nvml, "NVML_ERROR_GPU_IS_LOST", object()):
                self.lost.add(pci)
                if self.health is not None:
                    self.health.gpu_signal(pci, "gpu-lost", "NVML: GPU is lost")
        what = {"gone": "is gone from NVML", "uninitialized": ": NVML lost its initialization"}.get(kind, "failed")
        level = logging.WARNING if entry.failures == 1 else logging.DEBUG
        LOG.log(level, "usage: GPU %s %s (%d in a row; next try in %.1f s): %s", pci, what, entry.failures, delay, exc)
        self.metrics.errors.labels(operation="usage").inc()

    def _find_pods(self, readings: dict[str, GpuReading], claims: dict[str, Any]) -> None:
        """Read again the claims of a GPU where a process of an unknown pod runs (bounded, backed off)."""
        from ..kube import ApiError

        running = {pod for r in readings.values() for pod in r.pods.values() if pod is not None}
        self.foreign &= running  # a pod gone: asked about again should it come back
        budget = MAX_CLAIM_READS
        now = time.monotonic()
        for pci, reading in sorted(readings.items()):
            known = {pod for pods in self.claim_pods.snapshot().values() for _name, pod in pods}
            unknown = {p for p in reading.pods.values() if p is not None and p not in known} - self.foreign
            if not unknown or (pci in self.read_backoff and self.read_backoff[pci].waiting(now)):
                continue
            on_gpu = claims_on(claims, pci)
            if len(on_gpu) > budget and budget < MAX_CLAIM_READS:
                return  # the next poll goes on (a GPU with more claims than the bound is read alone)
            budget -= len(on_gpu)
            deadline = time.monotonic() + self.step_budget
            try:
                for uid, entry in on_gpu:
                    pods = read_claim_pods(self.kube, entry["namespace"], entry["name"], uid, deadline)
                    self.claim_pods.set(uid, pods)
            except ApiError as exc:
                delay = self.read_backoff.setdefault(pci, Backoff()).failed()
                LOG.warning("usage: reading the claims of GPU %s failed (next try in %.1f s): %s", pci, delay, exc)
                self.metrics.errors.labels(operation="usage").inc()
                continue
            self.read_backoff.pop(pci, None)
            known = {pod for pods in self.claim_pods.snapshot().values() for _name, pod in pods}
            self.foreign |= unknown - known
