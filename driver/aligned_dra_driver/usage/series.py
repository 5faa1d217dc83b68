# SPDX-License-Identifier: Apache-2.0
"""The series of ``--usage=on``, made at scrape time from the GPU watcher's last snapshot and the claims
prepared now (an unprepared claim's series are gone at the next scrape).

Per prepared GPU of a claim, one series per pod of the claim (``pod=""`` while none is known):

- ``aligned_dra_claim_gpu_memory_used_bytes{namespace,claim,pod,device,gpu_uuid}``: the pod's processes'
  memory on that GPU (compute and MPS lists);
- ``aligned_dra_claim_gpu_memory_request_bytes`` and ``..._limit_bytes``: what Prepare recorded (a whole
  GPU: the GPU's memory; a share without a memory figure: no series); the claim's, repeated for each pod;
- ``aligned_dra_claim_gpu_sm_utilization_ratio``: 0..1, the pod's processes' SM utilization summed (at
  most 1), only where NVML sampled at least one of them since the last poll: absent, never 0, otherwise. NVML's
  per-process figure is a share of *time* (the part of the period a kernel of the process ran, on any SMs);
- ``aligned_dra_claim_gpu_sms_busy_ratio``: 0..1, the share of the *SMs* busy since the last poll (NVML's GPM
  ``SM_UTIL``, Hopper and newer), of the claim's GPU whole or of its MIG device's GPU instance; the device's
  figure, repeated for each pod. Not exported for a share of a GPU (GPM sees the GPU, not a process), nor
  where GPM is not supported or has no earlier sample yet (absent, never 0).

A MIG device of a claim (``device`` its name, ``gpu_uuid`` its MIG UUID): memory used is NVML's on its MIG
handle (the instance's whole use, for each pod of the claim), request and limit the instance's memory.

Per published NVIDIA GPU: ``aligned_dra_gpu_memory_used_bytes{device,gpu_uuid}``,
``aligned_dra_gpu_memory_total_bytes`` and ``aligned_dra_gpu_memory_unattributed_bytes`` (the processes
of no prepared claim's pod: the MPS server, the host's, other containers'). Per prepared device
``aligned_dra_claim_device_info{namespace,claim,pod,device,pool,gpu_uuid,pci_bus_id} 1`` (NICs too, with
``gpu_uuid=""``), for joins on the GPU's UUID. ``aligned_dra_usage_available``: 1 while NVML answers, 0
when it is missing or failing (then no other usage series).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from prometheus_client.core import GaugeMetricFamily

CLAIM_LABELS = ["namespace", "claim", "pod", "device", "gpu_uuid"]
GPU_LABELS = ["device", "gpu_uuid"]
INFO_LABELS = ["namespace", "claim", "pod", "device", "pool", "gpu_uuid", "pci_bus_id"]
FAMILIES = {
    "aligned_dra_usage_available": ("1 while NVML answers the driver's GPU use poll, else 0", []),
    "aligned_dra_claim_gpu_memory_used_bytes": ("GPU memory used by the processes of a claim's pod", CLAIM_LABELS),
    "aligned_dra_claim_gpu_memory_request_bytes": (
        "GPU memory a claim's share requested (guaranteed); a whole GPU: its memory",
        CLAIM_LABELS,
    ),
    "aligned_dra_claim_gpu_memory_limit_bytes": (
        "GPU memory a claim's share may use (its MPS limit); a whole GPU: its memory",
        CLAIM_LABELS,
    ),
    "aligned_dra_claim_gpu_sm_utilization_ratio": (
        "Share of time (0-1) a kernel of a claim's pod's processes ran on the GPU since the last poll (NVML's "
        "per-process SM figure, where NVML samples them): a share of time, not of the SMs",
        CLAIM_LABELS,
    ),
    "aligned_dra_claim_gpu_sms_busy_ratio": (
        "Share of the SMs (0-1) busy since the last poll on a claim's whole GPU or MIG device (NVML GPM SM_UTIL, "
        "Hopper and newer): a share of the SMs, not of time",
        CLAIM_LABELS,
    ),
    "aligned_dra_gpu_memory_used_bytes": ("GPU memory used (NVML), all processes and the driver's reserve", GPU_LABELS),
    "aligned_dra_gpu_memory_total_bytes": ("GPU memory (NVML)", GPU_LABELS),
    "aligned_dra_gpu_memory_unattributed_bytes": (
        "GPU memory of processes of no prepared claim's pod (the MPS server, the host's, other containers')",
        GPU_LABELS,
    ),
    "aligned_dra_claim_device_info": (
        "1 for each prepared device of a claim, per pod: joins GPU series to pods",
        INFO_LABELS,
    ),
}


def _families() -> dict[str, GaugeMetricFamily]:
    return {name: GaugeMetricFamily(name, text, labels=labels) for name, (text, labels) in FAMILIES.items()}


class UsageCollector:
    """A prometheus_client collector over the watcher (``snapshot``, ``available``) and the prepared claims."""

    def __init__(self, watcher: Any, claims: Callable[[], dict[str, Any]], claim_pods: Any) -> None:
        self.watcher = watcher
        self.claims = claims
        self.claim_pods = claim_pods

    def describe(self) -> list[Any]:
        return list(_families().values())

    def collect(self) -> list[Any]:
        families = _families()
        available = self.watcher.available
        families["aligned_dra_usage_available"].add_metric([], 1 if available else 0)
        if not available:
            return [families["aligned_dra_usage_available"]]
        snapshot = self.watcher.snapshot  # replaced whole by the watcher: one consistent version
        claims = dict(self.claims())
        pods = self.claim_pods.snapshot()
        claimed = {pod for uid in claims for _name, pod in pods.get(uid, [])}
        devices = dict(self.watcher.gpus())
        for pci, reading in sorted(snapshot.items()):
            labels = [devices.get(pci, ""), reading.uuid]
            families["aligned_dra_gpu_memory_used_bytes"].add_metric(labels, reading.used)
            families["aligned_dra_gpu_memory_total_bytes"].add_metric(labels, reading.total)
            foreign = sum(used for pid, used in reading.processes.items() if reading.pods.get(pid) not in claimed)
            families["aligned_dra_gpu_memory_unattributed_bytes"].add_metric(labels, foreign)
        for uid, entry in sorted(claims.items()):
            self._claim(families, entry, pods.get(uid) or [("", "")], snapshot)
        return list(families.values())

    @staticmethod
    def _claim(
        families: dict[str, GaugeMetricFamily],
        entry: dict[str, Any],
        pods: list[tuple[str, str]],
        snapshot: dict[str, Any],
    ) -> None:
        namespace, claim = entry.get("namespace", ""), entry.get("name", "")
        for device in entry.get("devices") or []:
            reading = snapshot.get(device.get("pci_address")) if device.get("kind") == "gpu" else None
            mig = device.get("mig") if isinstance(device.get("mig"), dict) else None
            part = reading.migs.get(mig.get("gpu_instance")) if reading is not None and mig else None
            if mig and part is None:
                reading = None  # its instance is not (or no longer) on the GPU: no figure, never the parent's
            uuid = part.uuid if part is not None else reading.uuid if reading is not None else ""
            pool, name, pci = device.get("pool", ""), device.get("device", ""), device.get("pci_address", "")
            for pod_name, _pod_uid in pods:
                families["aligned_dra_claim_device_info"].add_metric(
                    [namespace, claim, pod_name, name, pool, uuid, pci], 1
                )
            if reading is None:
                continue
            share = device.get("share") if isinstance(device.get("share"), dict) else None
            total = part.total if part is not None else reading.total
            request = total if share is None else (share.get("request") or {}).get("memory")
            limit = total if share is None else (share.get("limit") or {}).get("memory")
            by_pod = reading.by_pod() if part is None else {pod_uid: part.used for _name, pod_uid in pods}
            # GPM sees a GPU or a GPU instance: a whole GPU's or a MIG device's figure, never a share's
            busy = part.sms_busy if part is not None else reading.sms_busy if share is None else None
            for pod_name, pod_uid in pods:
                labels = [namespace, claim, pod_name, name, uuid]
                families["aligned_dra_claim_gpu_memory_used_bytes"].add_metric(labels, by_pod.get(pod_uid, 0))
                if isinstance(request, int):
                    families["aligned_dra_claim_gpu_memory_request_bytes"].add_metric(labels, request)
                if isinstance(limit, int):
                    families["aligned_dra_claim_gpu_memory_limit_bytes"].add_metric(labels, limit)
                sampled = [ratio for pid, ratio in reading.sm.items() if pod_uid and reading.pods.get(pid) == pod_uid]
                if sampled:
                    families["aligned_dra_claim_gpu_sm_utilization_ratio"].add_metric(labels, min(1.0, sum(sampled)))
                if busy is not None:
                    families["aligned_dra_claim_gpu_sms_busy_ratio"].add_metric(labels, busy)
