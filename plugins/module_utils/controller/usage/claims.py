# SPDX-License-Identifier: Apache-2.0
"""Per claim and GPU, what the window held: the driver's series of the claim's pods folded onto the grid.

A claim's GPU is keyed by ``(namespace, claim, gpu_uuid)`` (NVML's UUID is
unique across the site); a GPU the driver prepared but NVML did not read has
no UUID and is keyed by its node and device (it is never measured: unknown).
Two series of one pod (two scrapes of one driver) count once, at their
largest. At each grid point:

- **allocated**: the claim's info series or any of its pods' use series has a
  value (the driver exports both for every prepared device);
- **used memory**: the sum over the claim's pods (their processes' memory on
  the GPU; the source asked Prometheus for each step's peak); absent where no
  pod's series has a value (unknown, never 0);
- **SM**: the sum over the pods that NVML sampled, at most 1; absent
  (:data:`NO_RATIO`) where none was sampled (NVML's per-process figure: a
  share of time);
- **SMs busy**: NVML GPM's share of the SMs busy on the claim's whole GPU or
  MIG device, the device's figure the pods' series repeat (their largest at
  each point, never a sum); absent where the driver exported none;
- **request** and **limit**: the largest the pods' series repeat (one claim's
  pods repeat its request);
- the GPU's memory (``aligned_dra_gpu_memory_total_bytes``, its largest value)
  and DCGM's utilization of the GPU (``DCGM_FI_DEV_GPU_UTIL``, a percent),
  joined by UUID.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass, field
from itertools import repeat
from operator import truediv

from ansible_collections.aligned.dra.plugins.module_utils.controller import usage
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.series import Series

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.series import UsageData

# The driver's GPU devices (docs/devices.md): gpu-<PCI address>.
GPU_DEVICE_PREFIX = "gpu-"
# A grid point without a value: in the used memory, below any value; in ratios (SM, DCGM), above any.
ABSENT = -1.0
NO_RATIO = 2.0


@dataclass(slots=True)
class ClaimGpu:
    """One claim's GPU over the window: dense arrays over the grid, :data:`ABSENT` where nothing was measured."""

    namespace: str
    claim: str
    gpu_uuid: str
    device: str = ""
    node: str = ""
    pods: set[str] = field(default_factory=set)
    allocated: bytearray = field(default_factory=bytearray)
    used: array = field(default_factory=lambda: array("d"))
    sm: array = field(default_factory=lambda: array("d"))
    has_sm: bool = False
    busy: array | None = None  # GPM's share of SMs busy, made only for a claim that has the series
    request: float | None = None
    limit: float | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.namespace, self.claim, self.gpu_uuid or f"{self.node}/{self.device}")


def _dense(steps: int, absent: float = ABSENT) -> array:
    return array("d", [absent]) * steps


def _claim(found: dict[tuple[str, str, str], ClaimGpu], labels: dict[str, str], steps: int) -> ClaimGpu | None:
    uuid = labels.get("gpu_uuid") or ""
    device = labels.get("device") or ""
    node = labels.get("pool") or labels.get("node") or ""
    # A GPU the driver prepared but NVML did not read has no UUID: measured never, it is unknown, not
    # left out. A NIC's info series has no UUID either: the driver's GPU devices are named gpu-<address>.
    if not uuid and not device.startswith(GPU_DEVICE_PREFIX):
        return None
    key = (labels.get("namespace") or "", labels.get("claim") or "", uuid or f"{node}/{device}")
    entry = found.get(key)
    if entry is None:
        entry = ClaimGpu(
            key[0], key[1], uuid, allocated=bytearray(steps), used=_dense(steps), sm=_dense(steps, NO_RATIO)
        )
        found[key] = entry
    entry.device = entry.device or device
    # the info series names the node (pool); a scraped series carries the target's node label
    entry.node = entry.node or node
    if labels.get("pod"):
        entry.pods.add(labels["pod"])
    return entry


def _contiguous(one: Series) -> bool:
    points = one.points
    return bool(points) and points[-1] - points[0] + 1 == len(points)


def _mark(entry: ClaimGpu, one: Series) -> None:
    allocated = entry.allocated
    if _contiguous(one):  # the usual series, a value at every step: one slice, not a loop
        allocated[one.points[0] : one.points[-1] + 1] = b"\x01" * len(one.points)
        return
    for point in one.points:
        allocated[point] = 1


def _add_used(target: array, one: Series, first: bool) -> None:
    """The pod's memory added to the claim's (the first pod's, when contiguous, copied as a slice)."""
    if first and _contiguous(one):
        target[one.points[0] : one.points[-1] + 1] = one.values
        return
    for point, value in zip(one.points, one.values):
        now = target[point]
        target[point] = value if now < 0 else now + value


def _add_ratio(target: array, one: Series) -> None:
    """The pod's SM added to the claim's, at most 1."""
    for point, value in zip(one.points, one.values):
        now = target[point]
        total = value if now >= NO_RATIO else now + value
        target[point] = total if total < 1.0 else 1.0


def _largest(current: float | None, one: Series) -> float | None:
    if not one.values:
        return current
    top = max(one.values)
    return top if current is None or top > current else current


def _per_pod(
    found: dict[tuple[str, str, str], ClaimGpu], series: list[Series], steps: int
) -> dict[tuple[tuple[str, str, str], str], list[Series]]:
    """The series of each pod of each claim's GPU: one, or several when two scrapes (two Prometheus jobs, an
    HA pair without deduplication) report the same pod, told apart only by their target's labels."""
    grouped: dict[tuple[tuple[str, str, str], str], list[Series]] = {}
    for one in series:
        entry = _claim(found, one.labels, steps)
        if entry is not None:
            grouped.setdefault((entry.key, one.labels.get("pod") or ""), []).append(one)
    return grouped


def _peak_of(group: list[Series]) -> Series:
    """One series of a pod: itself, or the largest of its copies at each point (the same pod counted once)."""
    if len(group) == 1:
        return group[0]
    points: dict[int, float] = {}
    for one in group:
        for point, value in zip(one.points, one.values):
            if value > points.get(point, -math.inf):
                points[point] = value
    ordered = sorted(points)
    return Series(group[0].metric, group[0].labels, array("l", ordered), array("d", (points[p] for p in ordered)))


def _device_figures(
    found: dict[tuple[str, str, str], ClaimGpu], series: list[Series], steps: int
) -> dict[tuple[str, str, str], Series]:
    """A figure of the claim's device each pod's series repeats: one series per claim, the largest at each point."""
    grouped: dict[tuple[str, str, str], list[Series]] = {}
    for (key, _pod), group in _per_pod(found, series, steps).items():
        grouped.setdefault(key, []).extend(group)
    return {key: _peak_of(group) for key, group in grouped.items() if any(one.points for one in group)}


def claim_gpus(data: UsageData) -> dict[tuple[str, str, str], ClaimGpu]:
    """Every claim's GPU the window saw, keyed ``(namespace, claim, gpu_uuid)``."""
    steps = data.steps
    found: dict[tuple[str, str, str], ClaimGpu] = {}
    for one in data.series.get(usage.CLAIM_INFO, []):
        entry = _claim(found, one.labels, steps)
        if entry is not None:
            _mark(entry, one)
    added: set[tuple[str, str, str]] = set()
    for (key, _pod), group in _per_pod(found, data.series.get(usage.CLAIM_USED, []), steps).items():
        entry = found[key]
        for one in group:
            _mark(entry, one)
        _add_used(entry.used, _peak_of(group), key not in added)
        added.add(key)
    for (key, _pod), group in _per_pod(found, data.series.get(usage.CLAIM_SM, []), steps).items():
        merged = _peak_of(group)
        if merged.points:
            _add_ratio(found[key].sm, merged)
            found[key].has_sm = True
    for key, merged in _device_figures(found, data.series.get(usage.CLAIM_SMS_BUSY, []), steps).items():
        entry = found[key]
        entry.busy = _dense(steps, NO_RATIO)
        for point, value in zip(merged.points, merged.values):
            entry.busy[point] = min(1.0, max(0.0, value))
    for metric, attribute in ((usage.CLAIM_REQUEST, "request"), (usage.CLAIM_LIMIT, "limit")):
        for one in data.series.get(metric, []):
            entry = _claim(found, one.labels, steps)
            if entry is not None:
                setattr(entry, attribute, _largest(getattr(entry, attribute), one))
    return found


def gpu_memory(data: UsageData) -> dict[str, float]:
    """``{gpu_uuid: bytes}``: each GPU's memory, the largest value its series gave."""
    found: dict[str, float] = {}
    for one in data.series.get(usage.GPU_TOTAL, []):
        uuid = one.labels.get("gpu_uuid") or ""
        top = _largest(found.get(uuid), one)
        if uuid and top is not None:
            found[uuid] = top
    return found


def nvml_unavailable(data: UsageData) -> dict[str, int]:
    """``{node: points}`` where the driver said NVML was not answering (``aligned_dra_usage_available`` 0):
    it exports no claim series then, so those points of the node's claims are not in the window at all."""
    found: dict[str, int] = {}
    for one in data.series.get(usage.USAGE_AVAILABLE, []):
        node = one.labels.get("node") or one.labels.get("instance") or ""
        down = sum(1 for value in one.values if value == 0)
        found[node] = found.get(node, 0) + down
    return {node: points for node, points in sorted(found.items()) if points}


def dcgm_utilization(data: UsageData) -> dict[str, array]:
    """``{UUID: dense ratios}``: DCGM's GPU utilization (a percent) as 0-1 per grid point (:data:`NO_RATIO`
    where none); the largest where several exporters report one GPU (a rollout, a second exporter)."""
    steps = data.steps
    found: dict[str, array] = {}
    for one in data.series.get(usage.DCGM_UTIL, []):
        uuid = one.labels.get("UUID") or ""
        if not uuid:
            continue
        if uuid not in found and _contiguous(one):  # the usual series: scaled in one C-level pass
            found[uuid] = target = _dense(steps, NO_RATIO)
            target[one.points[0] : one.points[-1] + 1] = array("d", map(truediv, one.values, repeat(100.0)))
            continue
        target = found.setdefault(uuid, _dense(steps, NO_RATIO))
        for point, value in zip(one.points, one.values):
            ratio = value / 100.0
            now = target[point]
            if now >= NO_RATIO or ratio > now:
                target[point] = ratio
    return found
