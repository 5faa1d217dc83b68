# SPDX-License-Identifier: Apache-2.0
"""A hand-computed usage window of ten one-minute steps, for the usage summary's and the report's tests.

- ``whole-a`` (namespace ns-a): a whole GPU, 10 GiB used and SM 0.5 for five steps, then no process for five;
  GPM's share of its SMs busy 0.2 for three steps and 0.4 for two (the first five);
- ``share-b`` (ns-b): a quarter of a GPU (20 GiB request, 40 GiB limit), two pods: 15 GiB + 10 GiB for five
  steps (5 GiB above its request, SM 0.3), then 15 GiB at SM 0.02 (below the 5 % threshold) for five;
- ``silent-c`` (ns-a): allocated the whole window, never measured: unknown, never idle;
- ``dcgm-e`` (ns-a): a whole GPU, 1 GiB used, no SM of its own; DCGM's utilization of the GPU 3 % for five
  steps (idle by that bound), 40 % for five;
- with ``nic=True``, a NIC's info series of whole-a (no GPU UUID): not a GPU, never counted.
"""

from __future__ import annotations

from array import array

from ansible_collections.aligned.dra.plugins.module_utils.controller import usage as metrics
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.series import Series, UsageData

GIB = float(2**30)
TOTAL = 80 * GIB
STEPS = 10


def _series(metric: str, labels: dict, values: list[float], points: list[int] | None = None) -> Series:
    points = list(range(STEPS)) if points is None else points
    return Series(metric, labels, array("l", points), array("d", values))


def _claim(namespace: str, name: str, uuid: str, pod: str) -> dict[str, str]:
    return {"namespace": namespace, "claim": name, "pod": pod, "device": "gpu-0", "gpu_uuid": uuid}


def window(nic: bool = False) -> UsageData:
    a = _claim("ns-a", "whole-a", "GPU-a", "pa")
    b1, b2 = _claim("ns-b", "share-b", "GPU-b", "pb1"), _claim("ns-b", "share-b", "GPU-b", "pb2")
    c = _claim("ns-a", "silent-c", "GPU-c", "pc")
    e = _claim("ns-a", "dcgm-e", "GPU-e", "pe")
    series: dict[str, list[Series]] = {name: [] for name in metrics.METRICS}
    nic_labels = {"namespace": "ns-a", "claim": "whole-a", "pod": "pa", "device": "nic-0", "gpu_uuid": ""}
    for labels in (a, b1, c, e, *([nic_labels] if nic else [])):
        series[metrics.CLAIM_INFO].append(_series(metrics.CLAIM_INFO, dict(labels, pool="node-1"), [1.0] * STEPS))
    for labels, request in ((a, TOTAL), (b1, 20 * GIB), (b2, 20 * GIB), (c, TOTAL), (e, TOTAL)):
        limit = request * 2 if request < TOTAL else request
        series[metrics.CLAIM_REQUEST].append(_series(metrics.CLAIM_REQUEST, labels, [request] * STEPS))
        series[metrics.CLAIM_LIMIT].append(_series(metrics.CLAIM_LIMIT, labels, [limit] * STEPS))
    series[metrics.CLAIM_USED] += [
        _series(metrics.CLAIM_USED, a, [10 * GIB] * 5 + [0.0] * 5),
        _series(metrics.CLAIM_USED, b1, [15 * GIB] * STEPS),
        _series(metrics.CLAIM_USED, b2, [10 * GIB] * 5, list(range(5))),
        _series(metrics.CLAIM_USED, e, [1 * GIB] * STEPS),
    ]
    series[metrics.CLAIM_SM] += [
        _series(metrics.CLAIM_SM, a, [0.5] * 5, list(range(5))),
        _series(metrics.CLAIM_SM, b1, [0.3] * 5 + [0.02] * 5),
    ]
    series[metrics.CLAIM_SMS_BUSY].append(_series(metrics.CLAIM_SMS_BUSY, a, [0.2] * 3 + [0.4] * 2, list(range(5))))
    for uuid in ("GPU-a", "GPU-b", "GPU-c", "GPU-e"):
        series[metrics.GPU_TOTAL].append(_series(metrics.GPU_TOTAL, {"gpu_uuid": uuid}, [TOTAL] * STEPS))
    # node-1's NVML answered but for the last two steps (when the driver exports no claim series: here it
    # still does, so that the claims' figures stay simple; only the hours are read from this series)
    series[metrics.USAGE_AVAILABLE].append(_series(metrics.USAGE_AVAILABLE, {"node": "node-1"}, [1.0] * 8 + [0.0] * 2))
    series[metrics.DCGM_UTIL].append(_series(metrics.DCGM_UTIL, {"UUID": "GPU-e"}, [3.0] * 5 + [40.0] * 5))
    return UsageData(0.0, 60.0 * (STEPS - 1), 60.0, series, "test")
