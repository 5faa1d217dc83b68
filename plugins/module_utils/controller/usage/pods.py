# SPDX-License-Identifier: Apache-2.0
"""Per-pod usage series, as the replay reads them (docs/replay.md, "Thin provisioning on measured use").

The utilization stage can write what it read as the replay's usage CSV
(``pod,timestamp,memory_used_bytes,sm_ratio``): one row per pod and grid
point where the pod had a value. A pod is ``namespace/pod`` (the name the
trace export of docs/replay.md gives it); its memory at a point is its
largest on any one GPU (the replay counts a pod's use against one GPU's
memory), its SM ratio the largest likewise (empty where NVML sampled none).
Timestamps are RFC 3339 in UTC, as the trace export of docs/replay.md writes
its times (the replay refuses to mix seconds and RFC 3339).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import datetime

from ansible_collections.aligned.dra.plugins.module_utils.controller import usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.series import UsageData

HEADER = "pod,timestamp,memory_used_bytes,sm_ratio\n"


def _largest(found: dict[str, dict[int, float]], metric: str, data: UsageData) -> None:
    for one in data.series.get(metric, []):
        namespace, pod = one.labels.get("namespace") or "", one.labels.get("pod") or ""
        if not pod:  # a claim no pod is known for yet: not a pod's use
            continue
        points = found.setdefault(f"{namespace}/{pod}", {})
        for point, value in zip(one.points, one.values):
            if value > points.get(point, -1.0):
                points[point] = value


def rfc3339(seconds: float) -> str:
    """``2026-11-18T04:30:00Z`` (milliseconds only where the time has them)."""
    moment = datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S")
    millis = round((seconds - int(seconds)) * 1000)
    return f"{text}.{millis:03d}Z" if millis else f"{text}Z"


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


def pods_csv(data: UsageData) -> str:
    """The replay's usage CSV of every pod the window measured, pods and times in order."""
    used: dict[str, dict[int, float]] = {}
    ratio: dict[str, dict[int, float]] = {}
    _largest(used, usage.CLAIM_USED, data)
    _largest(ratio, usage.CLAIM_SM, data)
    lines = [HEADER]
    for pod in sorted(used):
        ratios = ratio.get(pod, {})
        for point in sorted(used[pod]):
            sm = ratios.get(point)
            when = rfc3339(data.start + point * data.step)
            lines.append(f"{pod},{when},{_number(used[pod][point])},{'' if sm is None else repr(sm)}\n")
    return "".join(lines)
