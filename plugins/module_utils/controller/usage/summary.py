# SPDX-License-Identifier: Apache-2.0
"""Used versus allocated over the window, per claim, team, template and site.

Each grid point of a claim's GPU stands for one step of time. An allocated
point is exactly one of:

- **unknown**: no use series of the claim has a value there (not scraped, the
  driver without NVML): counted as unknown, never as idle;
- **idle**: no process of the claim's pods holds memory on the GPU (used
  memory 0), or its SM use is below the threshold (the driver's per-claim SM
  where NVML sampled it; else DCGM's utilization of the whole GPU, which bounds
  every claim on it);
- **active**: any other measured point (a process is there and nothing says
  it is below the threshold).

Hours are points times the step. A claim's GPU-hours weigh them by its share
of the GPU: 1 for a whole GPU (its request is the GPU's memory), a MIG
device's memory slices over its GPU's (``kind: mig``; known only with the
published slices), else its memory request over the GPU's memory; a claim whose request or GPU memory is
unknown has no GPU-hours (``gpu_fraction: null``) and is counted in
``claims_without_size`` and ``hours_without_size`` (claim-hours: each is at
most one GPU). ``idle_share`` is over the GPU-hours of sized claims;
``unknown_hours_share`` over claim-hours, so that a claim never measured
(which usually has no size either) still weighs. Memory statistics are over the measured points only
(nearest rank: every percentile is a value that was seen). An aggregate
(team, template, site) sums its claims' hours and never reports a percentile
of pooled samples it did not compute: it gives the mean (memory used over
memory requested, both over measured points) and the largest peak, and the
spread of its claims' own p95s.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from itertools import compress, repeat
from operator import and_, gt, lt

from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import claims as claim_series
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.claims import NO_RATIO

TYPE_CHECKING = False
if TYPE_CHECKING:
    from array import array
    from collections.abc import Mapping, Sequence
    from typing import Any

    from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.series import UsageData

UNASSIGNED = "(no team)"
UNKNOWN_TEMPLATE = "(unknown)"
# The chart's points at most: the window's steps are averaged into buckets of whole steps.
TIMELINE_BUCKETS = 168
# A request within this much of the GPU's memory is the whole GPU (the driver writes the GPU's memory).
WHOLE_TOLERANCE = 0.001
DIGITS = 4
HOUR = 3600.0
# A MIG device of the driver: <gpu>-mig-<profile>-<start> (docs/mig.md)
MIG_INFIX = "-mig-"


def percentile(ordered: list[float], rank: float) -> float | None:
    """Nearest-rank percentile (``rank`` 0-100, a number or a Fraction) of an ascending list: the smallest value
    with at least ``rank`` percent of the values at or below it, so a value that was seen; None when empty.
    The replay's request rule ``pNN`` reads the same."""
    if not ordered:
        return None
    # rank times the count first: exact for whole and Fraction ranks (0.95 * 20 is not 19 in floats)
    index = max(0, math.ceil(rank * len(ordered) / 100) - 1)
    return ordered[min(index, len(ordered) - 1)]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, DIGITS)


class _Timeline:
    """Per team, each bucket's mean GPUs allocated, active, idle, unknown, and memory used in GPUs.

    A claim of unknown size is drawn as one GPU (the most a claim's device can be), all of it unknown: its
    points are neither idle nor active, and the team is listed in ``unsized_as_one_gpu``, so that the
    allocated line there is an upper bound."""

    FIELDS = ("allocated_gpus", "active_gpus", "idle_gpus", "unknown_gpus", "memory_used_gpus")

    def __init__(self, steps: int) -> None:
        self.per_bucket = max(1, math.ceil(steps / TIMELINE_BUCKETS))
        self.buckets = math.ceil(steps / self.per_bucket)
        self.steps = steps
        self.teams: dict[str, dict[str, list[float]]] = {}
        # teams with a claim of unknown size, drawn as one GPU (at most), unknown
        self.bounded: set[str] = set()

    def add(self, team: str, fraction: float, counts: list[list[float]]) -> None:
        rows = self.teams.setdefault(team, {name: [0.0] * self.buckets for name in self.FIELDS})
        for name, bucket_counts in zip(self.FIELDS, counts):
            row = rows[name]
            # memory used is already in GPUs (bytes over the GPU's memory); the rest are point counts
            weight = 1.0 if name == "memory_used_gpus" else fraction
            for bucket, count in enumerate(bucket_counts):
                if count:
                    row[bucket] += weight * count

    def result(self, start: float, step: float) -> dict[str, Any]:
        sizes = [min(self.per_bucket, self.steps - b * self.per_bucket) for b in range(self.buckets)]
        teams = {
            team: {name: [round(v / n, DIGITS) for v, n in zip(row, sizes)] for name, row in rows.items()}
            for team, rows in sorted(self.teams.items())
        }
        return {
            "start": start,
            "bucket_seconds": self.per_bucket * step,
            "buckets": self.buckets,
            "teams": teams,
            "unsized_as_one_gpu": sorted(self.bounded),
        }


def _fraction(
    entry: claim_series.ClaimGpu, total: float | None, mig: Mapping[tuple[str, str], float | None] | None = None
) -> tuple[str, float | None]:
    """``(kind, share of the GPU)``: ``whole`` (1), ``share`` (request over memory), ``mig`` (its memory slices
    over its GPU's, from the published slices: ``mig``, keyed by node and device; None without them) or
    ``unknown`` (None)."""
    if MIG_INFIX in entry.device:  # its series are on the MIG device's own handle: the parent's memory is not its
        return "mig", (mig or {}).get((entry.node, entry.device))
    if entry.request is None or not total:
        return "unknown", None
    if entry.request >= total * (1 - WHOLE_TOLERANCE):
        return "whole", 1.0
    return "share", entry.request / total


def _activity(entry: claim_series.ClaimGpu, dcgm: array | None) -> tuple[Sequence[float] | None, str]:
    """Per grid point, the ratio the threshold is compared with: the claim's SM where NVML sampled it, else
    DCGM's utilization of the whole GPU (it bounds every claim on the GPU); :data:`NO_RATIO` where neither."""
    if entry.has_sm and dcgm is not None:
        return [s if s < NO_RATIO else d for s, d in zip(entry.sm, dcgm)], "sm and dcgm"
    if entry.has_sm:
        return entry.sm, "sm"
    if dcgm is not None:
        return dcgm, "dcgm"
    return None, "none"


def _walk(
    entry: claim_series.ClaimGpu, dcgm: array | None, threshold: float, per_bucket: int, buckets: int, total: float
) -> dict[str, Any]:
    """The claim's allocated points, bucket by bucket: counts, measured values and the chart's bucket counts.

    Every step is a C-level pass over one bucket's slice (compress, sort, bisect, map): a window of 10,000
    points costs a few hundred calls, not 10,000 iterations of Python."""
    used, allocated, request = entry.used, entry.allocated, entry.request
    activity, activity_source = _activity(entry, dcgm)
    steps = len(used)
    counts = [[0.0] * buckets for _state in range(5)]
    allocated_b, active_b, idle_b, unknown_b, memory_b = counts
    measured_all: list[float] = []
    no_process = below = above = 0
    above_max = 0.0
    for bucket in range(buckets):
        low, high = bucket * per_bucket, min(steps, (bucket + 1) * per_bucket)
        mask = allocated[low:high]
        held = mask.count(1)
        if not held:
            continue
        values = sorted(compress(used[low:high], mask))
        unknown = bisect_left(values, 0.0)
        idle_here = bisect_right(values, 0.0) - unknown
        no_process += idle_here
        measured = values[unknown:]
        measured_all.extend(measured)
        if total:
            memory_b[bucket] = sum(measured) / total
        if request is not None and measured and measured[-1] > request:
            above += len(measured) - bisect_right(measured, request)
            above_max = max(above_max, measured[-1] - request)
        if activity is not None and len(measured) > idle_here:
            # a point with a process on the GPU whose ratio is below the threshold
            slow = map(lt, compress(activity[low:high], mask), repeat(threshold))
            busy = map(gt, compress(used[low:high], mask), repeat(0.0))
            low_points = sum(map(and_, slow, busy))
            below += low_points
            idle_here += low_points
        allocated_b[bucket] = held
        unknown_b[bucket] = unknown
        idle_b[bucket] = idle_here
        active_b[bucket] = held - unknown - idle_here
    measured_all.sort()
    sm_seen: list[float] = []
    if entry.has_sm:
        ratios = sorted(compress(entry.sm, allocated))
        sm_seen = ratios[: bisect_left(ratios, NO_RATIO)]
    busy_seen: list[float] = []
    if entry.busy is not None:
        ratios = sorted(compress(entry.busy, allocated))
        busy_seen = ratios[: bisect_left(ratios, NO_RATIO)]
    activity_max = None
    activity_points = 0
    if activity is not None:  # the compute bound of a whole-GPU claim (advice: candidates for a fraction)
        ratios = sorted(compress(activity, allocated))
        known = bisect_left(ratios, NO_RATIO)
        activity_max = ratios[known - 1] if known else None
        activity_points = known
    held_all = sum(allocated_b)
    unknown_all = sum(unknown_b)
    return {
        "idle": [no_process, below],
        "unknown": unknown_all,
        "active": held_all - unknown_all - no_process - below,
        "above": above,
        "above_max": above_max,
        "measured": measured_all,
        "sm": sm_seen,
        "sms_busy": busy_seen,
        "activity_source": activity_source,
        "activity_max": activity_max,
        "activity_points": activity_points,
        "counts": counts,
    }


def _memory(ordered: list[float]) -> dict[str, Any] | None:
    if not ordered:
        return None
    return {
        "mean": round(sum(ordered) / len(ordered)),
        "p50": ordered[(len(ordered) + 1) // 2 - 1],
        "p95": percentile(ordered, 95),
        "max": ordered[-1],
        "points": len(ordered),
    }


def _sm(ordered: list[float]) -> dict[str, Any] | None:
    if not ordered:
        return None
    return {
        "mean": _round(sum(ordered) / len(ordered)),
        "p95": _round(percentile(ordered, 95)),
        "max": _round(ordered[-1]),
        "points": len(ordered),
    }


def claim_summary(
    entry: claim_series.ClaimGpu,
    walked: dict[str, Any],
    total: float | None,
    step: float,
    team: str,
    template: str,
    mig: Mapping[tuple[str, str], float | None] | None = None,
) -> dict[str, Any]:
    """One claim's GPU over the window, as ``utilization.json`` lists it."""
    kind, fraction = _fraction(entry, total, mig)
    idle = walked["idle"]
    hours = {
        "allocated": sum(idle) + walked["unknown"] + walked["active"],
        "active": walked["active"],
        "idle": sum(idle),
        "unknown": walked["unknown"],
    }
    hours = {name: round(points * step / HOUR, DIGITS) for name, points in hours.items()}
    memory = _memory(walked["measured"])
    return {
        "namespace": entry.namespace,
        "claim": entry.claim,
        "team": team,
        "template": template,
        "node": entry.node,
        "device": entry.device,
        "gpu_uuid": entry.gpu_uuid or None,
        "pods": sorted(entry.pods),
        "kind": kind,
        "status": "measured" if memory else "unknown",
        "request_bytes": entry.request,
        "limit_bytes": entry.limit,
        "gpu_memory_bytes": total,
        "gpu_fraction": _round(fraction),
        "hours": hours,
        "gpu_hours": None if fraction is None else {k: round(v * fraction, DIGITS) for k, v in hours.items()},
        "idle_by": {
            "no_process_hours": round(idle[0] * step / HOUR, DIGITS),
            "below_threshold_hours": round(idle[1] * step / HOUR, DIGITS),
        },
        "activity_source": walked["activity_source"],
        "activity_max": _round(walked["activity_max"]),
        "activity_points": walked["activity_points"],
        "memory_used_bytes": memory,
        "sm_ratio": _sm(walked["sm"]),
        "sms_busy_ratio": _sm(walked["sms_busy"]),
        "above_request": (
            {"hours": round(walked["above"] * step / HOUR, DIGITS), "max_bytes": walked["above_max"]}
            if kind == "share"
            else None
        ),
    }


def _empty_aggregate() -> dict[str, Any]:
    return {
        "claims": 0,
        "claims_measured": 0,
        "claims_unknown": 0,
        "claims_without_size": 0,
        "hours_without_size": 0.0,
        "hours": {"allocated": 0.0, "active": 0.0, "idle": 0.0, "unknown": 0.0},
        "gpu_hours": {"allocated": 0.0, "active": 0.0, "idle": 0.0, "unknown": 0.0},
        "_used": 0.0,
        "_requested": 0.0,
        "_peak": None,
        "_p95s": [],
    }


def _aggregate(into: dict[str, Any], claim: dict[str, Any], walked: dict[str, Any]) -> None:
    into["claims"] += 1
    into["claims_measured" if claim["status"] == "measured" else "claims_unknown"] += 1
    for name, value in claim["hours"].items():
        into["hours"][name] += value
    if claim["gpu_hours"] is None:
        into["claims_without_size"] += 1
        into["hours_without_size"] += claim["hours"]["allocated"]
    else:
        for name, value in claim["gpu_hours"].items():
            into["gpu_hours"][name] += value
    memory = claim["memory_used_bytes"]
    if memory:
        if claim["request_bytes"]:  # used over requested: both of the claims whose request is known
            into["_used"] += sum(walked["measured"])
            into["_requested"] += claim["request_bytes"] * memory["points"]
        into["_peak"] = memory["max"] if into["_peak"] is None else max(into["_peak"], memory["max"])
        into["_p95s"].append(memory["p95"])


def _finish(aggregate: dict[str, Any]) -> dict[str, Any]:
    p95s = sorted(aggregate.pop("_p95s"))
    used, requested, peak = aggregate.pop("_used"), aggregate.pop("_requested"), aggregate.pop("_peak")
    aggregate["hours_without_size"] = round(aggregate["hours_without_size"], DIGITS)
    for group in ("hours", "gpu_hours"):
        aggregate[group] = {name: round(value, DIGITS) for name, value in aggregate[group].items()}
    gpu_hours = aggregate["gpu_hours"]
    aggregate["idle_share"] = _round(gpu_hours["idle"] / gpu_hours["allocated"]) if gpu_hours["allocated"] else None
    # unknown GPU-hours may have been idle: the share is then at least this
    aggregate["idle_share_is_lower_bound"] = gpu_hours["unknown"] > 0
    hours = aggregate["hours"]
    # over claim-hours, not GPU-hours: a claim never measured usually has no size either, and must still count
    aggregate["unknown_hours_share"] = _round(hours["unknown"] / hours["allocated"]) if hours["allocated"] else None
    aggregate["memory_used_over_requested"] = _round(used / requested) if requested else None
    aggregate["memory_peak_bytes"] = peak
    aggregate["claim_p95_bytes"] = (
        {"p50": percentile(p95s, 50), "p95": percentile(p95s, 95), "max": p95s[-1]} if p95s else None
    )
    return aggregate


def summarise(
    data: UsageData,
    namespaces: Mapping[str, str],
    templates: Mapping[tuple[str, str], str],
    sm_idle_threshold: float = 0.05,
    mig: Mapping[tuple[str, str], float | None] | None = None,
) -> dict[str, Any]:
    """Used versus allocated: ``window``, ``totals``, ``teams``, ``templates``, ``claims`` and ``timeline``.

    ``namespaces`` maps a namespace to its team, ``templates`` a ``(namespace, claim)`` to the template the
    claim came from (its ``aligned.dev/template`` label), ``mig`` a ``(node, MIG device)`` to its
    GPU-equivalents (``planner/utilization_mig.device_fractions``)."""
    found = claim_series.claim_gpus(data)
    memory = claim_series.gpu_memory(data)
    dcgm = claim_series.dcgm_utilization(data)
    timeline = _Timeline(data.steps)
    totals = _empty_aggregate()
    teams: dict[str, dict[str, Any]] = {}
    by_template: dict[str, dict[str, Any]] = {}
    listed = []
    for key in sorted(found):
        entry = found[key]
        team = namespaces.get(entry.namespace, UNASSIGNED)
        template = templates.get((entry.namespace, entry.claim), UNKNOWN_TEMPLATE)
        total = memory.get(entry.gpu_uuid)
        walked = _walk(
            entry, dcgm.get(entry.gpu_uuid), sm_idle_threshold, timeline.per_bucket, timeline.buckets, total or 0.0
        )
        claim = claim_summary(entry, walked, total, data.step, team, template, mig)
        listed.append(claim)
        for aggregate in (
            totals,
            teams.setdefault(team, _empty_aggregate()),
            by_template.setdefault(template, _empty_aggregate()),
        ):
            _aggregate(aggregate, claim, walked)
        if claim["gpu_fraction"] is not None:
            timeline.add(team, claim["gpu_fraction"], walked["counts"])
        else:  # of unknown size: every allocated point is unknown, drawn as one GPU at most (a bound)
            allocated_points = walked["counts"][0]
            none = [0.0] * timeline.buckets
            timeline.add(team, 1.0, [allocated_points, none, none, allocated_points, none])
            timeline.bounded.add(team)
    return {
        "source": data.source,
        "window": {
            "start": data.start,
            "end": data.end,
            "step_seconds": data.step,
            "points": data.steps,
            "hours": round(data.steps * data.step / HOUR, DIGITS),
        },
        "sm_idle_threshold": sm_idle_threshold,
        "series_missing": sorted(name for name, found_series in data.series.items() if not found_series),
        # hours a node's driver said NVML was down: it exported no claim series, so nothing of them is counted
        "nvml_unavailable_hours": {
            node: round(points * data.step / HOUR, DIGITS)
            for node, points in claim_series.nvml_unavailable(data).items()
        },
        "totals": _finish(totals),
        "teams": {name: _finish(value) for name, value in sorted(teams.items())},
        "templates": {name: _finish(value) for name, value in sorted(by_template.items())},
        "claims": listed,
        "timeline": timeline.result(data.start, data.step),
    }


def not_measured(claim_objects: list[Any] | None, summary: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The claims the cluster (or the claim files) shows holding GPUs of the driver (``gpu-`` devices) that
    no series of the window names: allocated, never measured (the driver not scraped, NVML down, or a
    claim made after the window). Their hours are not known, so they are listed, not summed."""
    seen = {(c["namespace"], c["claim"]) for c in summary["claims"]}
    found = []
    for item in claim_objects or []:
        meta = item.get("metadata") or {}
        results = ((((item.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")) or []
        gpus = [r for r in results if str(r.get("device") or "").startswith(claim_series.GPU_DEVICE_PREFIX)]
        key = (meta.get("namespace") or "", meta.get("name") or "")
        if gpus and key not in seen:
            found.append({"namespace": key[0], "claim": key[1], "gpus": len(gpus), "node": gpus[0].get("pool") or ""})
    return sorted(found, key=lambda c: (c["namespace"], c["claim"]))
