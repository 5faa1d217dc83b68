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

from ansible_collections.aligned.dra.plugins.module_utils.controller import usage
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import source

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
            when = source.rfc3339(round((data.start + point * data.step) * 1000))
            lines.append(f"{pod},{when},{_number(used[pod][point])},{'' if sm is None else repr(sm)}\n")
    return "".join(lines)
