# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: a site whose H100s the collection's driver publishes with MIG, its claims, and a usage window.

The DGX H100 fixture's probe (eight H100 SXM5, documented geometry: no NVML on the controller) under
``aligned_dra_mig`` settings, published as the driver publishes them (``controller/mig/model.publish``), cut
into the pool's slices (``dra/slices.partitioned_slices``: the 1.36 shape); claims allocated on named devices;
usage series of MIG claims as the driver exports them (``device`` the MIG device, ``gpu_uuid`` its MIG UUID,
request and limit the instance's memory). Never shipped.
"""

from __future__ import annotations

from array import array
from typing import Any

from ansible_collections.aligned.dra.plugins.module_utils.controller import usage as metrics
from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.series import Series, UsageData
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

GIB = 1 << 30
STEPS = 10
HALF = {"half": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]}


def topology() -> dict[str, Any]:
    return topology_of("dgx-h100")


def gpu_names(topo: dict[str, Any]) -> list[str]:
    """The published names of the node's GPUs, in PCI order."""
    return [g["device"] for g in model.node_gpus(topo, {"mode": "dynamic"})]


def slices(node: str, settings: dict[str, Any], topo: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The node's pool under ``settings`` (its devices and counter sets), as the driver publishes it on 1.36."""
    topo = topo or topology()
    devices = dra.devices_from_topology(topo, None, None)
    out, counters = model.publish(topo, devices, settings)
    sets = [
        {
            "name": name,
            "counters": {c: {"value": dra_mig.quantity(v) if c == "memory" else str(v)} for c, v in values.items()},
        }
        for name, values in counters.items()
    ]
    if sets:
        return dra_slices.partitioned_slices(node, out, sets, "1.36")
    return dra_slices.resource_slices(node, out)


def claim(namespace: str, name: str, node: str, devices: list[str]) -> dict[str, Any]:
    """An allocated ResourceClaim holding ``devices`` of the collection's driver on ``node``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "mig", "exactly": {"deviceClassName": "mig.aligned.dev"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {"driver": dra.DRIVER_NAME, "pool": node, "device": device, "request": "mig"}
                        for device in devices
                    ]
                }
            },
            "reservedFor": [{"resource": "pods", "name": f"{name}-pod", "uid": f"uid-{name}"}],
        },
    }


def _series(metric: str, labels: dict[str, str], values: list[float]) -> Series:
    return Series(metric, labels, array("l", range(len(values))), array("d", values))


def usage_window(claims: list[dict[str, Any]]) -> UsageData:
    """Ten one-minute steps. Each entry: ``namespace``, ``claim``, ``node``, ``device``, ``uuid``, ``used``
    (bytes per step; None: never measured), ``request`` (bytes; the instance's or the GPU's memory),
    ``gpu_total`` (the GPU's memory series, for a whole GPU or a share; None for a MIG device: its parent's
    series has the parent's UUID) and ``sm`` (a ratio per step, or None)."""
    series: dict[str, list[Series]] = {name: [] for name in metrics.METRICS}
    for entry in claims:
        labels = {
            "namespace": entry["namespace"],
            "claim": entry["claim"],
            "pod": f"{entry['claim']}-pod",
            "device": entry["device"],
            "gpu_uuid": entry["uuid"],
        }
        info = dict(labels, pool=entry["node"])
        series[metrics.CLAIM_INFO].append(_series(metrics.CLAIM_INFO, info, [1.0] * STEPS))
        for metric in (metrics.CLAIM_REQUEST, metrics.CLAIM_LIMIT):
            series[metric].append(_series(metric, labels, [float(entry["request"])] * STEPS))
        if entry.get("used") is not None:
            series[metrics.CLAIM_USED].append(_series(metrics.CLAIM_USED, labels, [float(v) for v in entry["used"]]))
        if entry.get("sm") is not None:
            series[metrics.CLAIM_SM].append(_series(metrics.CLAIM_SM, labels, list(entry["sm"])))
        if entry.get("sms_busy") is not None:  # GPM's share of the instance's SMs busy (Hopper and newer)
            series[metrics.CLAIM_SMS_BUSY].append(_series(metrics.CLAIM_SMS_BUSY, labels, list(entry["sms_busy"])))
        if entry.get("gpu_total"):
            gpu = {"device": entry["device"], "gpu_uuid": entry["uuid"]}
            series[metrics.GPU_TOTAL].append(_series(metrics.GPU_TOTAL, gpu, [float(entry["gpu_total"])] * STEPS))
    return UsageData(0.0, 60.0 * (STEPS - 1), 60.0, series, "test")
