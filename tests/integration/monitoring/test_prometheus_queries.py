# SPDX-License-Identifier: Apache-2.0
"""The dashboard's and the alerts' queries, and the join with DCGM's exporter, asked of a real Prometheus
over a TSDB backfilled with ``promtool tsdb create-blocks-from openmetrics``: series shaped like the driver's
(as scraped: job, instance, node) and like DCGM's exporter (its UUID label, its own pod and namespace)."""

from __future__ import annotations

import time

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import (
    monitoring_dashboard,
    monitoring_rules,
)
from ansible_collections.aligned.dra.tests.support.harnesses import prometheus

pytestmark = pytest.mark.skipif(not prometheus.available(), reason="Debian's prometheus package is not installed")

GIB = 2**30
TARGET = {"job": "aligned-dra-driver", "instance": "10.0.0.1:8089", "node": "node-a"}
SHARED = {"device": "gpu-0", "gpu_uuid": "GPU-aaaa"}
WHOLE = {"device": "gpu-1", "gpu_uuid": "GPU-bbbb"}
# two claims share gpu-0 (one near its limit); a third holds gpu-1 whole and idle
CLAIMS = [
    ({"namespace": "team-a", "claim": "c1", "pod": "p1", **SHARED}, 10 * GIB, 20 * GIB, 12 * GIB, 0.5),
    ({"namespace": "team-b", "claim": "c2", "pod": "p2", **SHARED}, 20 * GIB, 20 * GIB, 19 * GIB, None),
    # a second pod of c2: its series repeat the claim's request and limit, with its own use
    ({"namespace": "team-b", "claim": "c2", "pod": "p2b", **SHARED}, 20 * GIB, 20 * GIB, 0, None),
    ({"namespace": "team-a", "claim": "c3", "pod": "p3", **WHOLE}, 80 * GIB, 80 * GIB, 0, None),
]
GPUS = [(SHARED, 80 * GIB, 34 * GIB, 3 * GIB), (WHOLE, 80 * GIB, 0, 0)]
DCGM = {"job": "dcgm-exporter", "namespace": "gpu-operator", "pod": "dcgm-exporter-x", "Hostname": "node-a"}
STEPS = 30


def series_text(families: dict[str, list[tuple[dict, float]]], start: int) -> str:
    lines = []
    for name, members in families.items():
        lines.append(f"# TYPE {name} gauge")
        for labels, value in members:
            shown = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            lines += [f"{name}{{{shown}}} {value} {start + 60 * step}" for step in range(STEPS)]
    return "\n".join(lines) + "\n# EOF\n"


def families() -> dict[str, list[tuple[dict, float]]]:
    out: dict[str, list[tuple[dict, float]]] = {}
    for labels, request, limit, used, sm in CLAIMS:
        labels = dict(TARGET, **labels)
        out.setdefault("aligned_dra_claim_gpu_memory_request_bytes", []).append((labels, request))
        out.setdefault("aligned_dra_claim_gpu_memory_limit_bytes", []).append((labels, limit))
        out.setdefault("aligned_dra_claim_gpu_memory_used_bytes", []).append((labels, used))
        if sm is not None:
            out.setdefault("aligned_dra_claim_gpu_sm_utilization_ratio", []).append((labels, sm))
        out.setdefault("aligned_dra_claim_device_info", []).append(
            (
                dict(
                    labels, pool="node-a", pci_bus_id="0000:3b:00.0" if labels["device"] == "gpu-0" else "0000:86:00.0"
                ),
                1,
            )
        )
    for labels, total, used, unattributed in GPUS:
        labels = dict(TARGET, **labels)
        out.setdefault("aligned_dra_gpu_memory_total_bytes", []).append((labels, total))
        out.setdefault("aligned_dra_gpu_memory_used_bytes", []).append((labels, used))
        out.setdefault("aligned_dra_gpu_memory_unattributed_bytes", []).append((labels, unattributed))
    out["DCGM_FI_DEV_GPU_UTIL"] = [
        (dict(DCGM, gpu="0", UUID="GPU-aaaa", device="nvidia0", pci_bus_id="00000000:3B:00.0"), 70),
        (dict(DCGM, gpu="1", UUID="GPU-bbbb", device="nvidia1", pci_bus_id="00000000:86:00.0"), 0),
    ]
    return out


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory):
    work = tmp_path_factory.mktemp("prometheus")
    start = (int(time.time()) // 3600 - 4) * 3600  # whole hours, well before the head block
    prometheus.backfill(series_text(families(), start), work / "tsdb")
    with prometheus.Prometheus(work) as server:
        yield server, start + 60 * (STEPS - 5)


def ask(server, name: str, at: float, by: tuple[str, ...]) -> dict:
    expr = monitoring_dashboard.QUERIES[name].replace("$node", ".*").replace("$namespace", ".*")
    return server.values(expr, at, by)


def test_the_dashboards_per_gpu_queries_give_each_share_its_request_limit_and_use(backfilled):
    server, at = backfilled
    by = ("device", "claim", "pod")
    shares = [("gpu-0", "c1", "p1"), ("gpu-0", "c2", "p2"), ("gpu-0", "c2", "p2b"), ("gpu-1", "c3", "p3")]
    assert ask(server, "share_request", at, by) == dict(
        zip(shares, [10 * GIB, 20 * GIB, 20 * GIB, 80 * GIB], strict=True)
    )
    assert ask(server, "share_limit", at, by) == dict(
        zip(shares, [20 * GIB, 20 * GIB, 20 * GIB, 80 * GIB], strict=True)
    )
    assert ask(server, "share_used", at, by) == dict(zip(shares, [12 * GIB, 19 * GIB, 0, 0], strict=True))
    # absent where NVML does not say, never 0
    assert ask(server, "share_sm", at, by) == {("gpu-0", "c1", "p1"): 0.5}
    assert ask(server, "gpu_total", at, ("device",)) == {"gpu-0": 80 * GIB, "gpu-1": 80 * GIB}
    assert ask(server, "gpu_used", at, ("device",)) == {"gpu-0": 34 * GIB, "gpu-1": 0}
    assert ask(server, "gpu_unattributed", at, ("device",)) == {"gpu-0": 3 * GIB, "gpu-1": 0}


def test_the_dashboards_per_namespace_queries_set_use_against_allocation(backfilled):
    server, at = backfilled
    by = ("namespace",)
    assert ask(server, "namespace_used", at, by) == {"team-a": 12 * GIB, "team-b": 19 * GIB}
    assert ask(server, "namespace_allocated", at, by) == {
        "team-a": 90 * GIB,
        "team-b": 20 * GIB,
    }  # c2 counted once for its two pods
    assert ask(server, "namespace_used_ratio", at, by) == pytest.approx({"team-a": 12 / 90, "team-b": 0.95})
    # in GPUs' worth: a 10 GiB request on an 80 GiB GPU is 1/8 of it
    assert ask(server, "namespace_gpus_allocated", at, by) == pytest.approx({"team-a": 1.125, "team-b": 0.25})
    assert ask(server, "namespace_gpus_used", at, by) == pytest.approx({"team-a": 0.15, "team-b": 19 / 80})
    # the node and namespace variables narrow them
    narrowed = monitoring_dashboard.QUERIES["namespace_used"].replace("$node", "node-a").replace("$namespace", "team-b")
    assert server.values(narrowed, at, by) == {"team-b": 19 * GIB}


def test_the_dcgm_join_gives_each_pod_its_gpus_utilisation_where_the_documented_short_form_fails(backfilled):
    server, at = backfilled
    joined = ask(server, "pod_gpu_utilization_dcgm", at, ("namespace", "pod", "UUID"))
    # the pods are the claims' (never the exporter's own pod label), and both sharers of gpu-0 get its figure
    assert joined == {
        ("team-a", "p1", "GPU-aaaa"): 70,
        ("team-b", "p2", "GPU-aaaa"): 70,
        ("team-b", "p2b", "GPU-aaaa"): 70,
        ("team-a", "p3", "GPU-bbbb"): 0,
    }
    assert server.values(monitoring_dashboard.DCGM_JOIN, at, ("pod",)) == {"p1": 70, "p2": 70, "p2b": 70, "p3": 0}
    short = (
        "DCGM_FI_DEV_GPU_UTIL * on(UUID) group_left(namespace,pod) "
        'label_replace(aligned_dra_claim_device_info, "UUID", "$1", "gpu_uuid", "(.*)")'
    )
    with pytest.raises(prometheus.PrometheusError, match="many-to-many"):
        server.query(short, at)  # a GPU shared by two claims has two info series


def test_the_alerts_queries_find_the_claim_near_its_limit_and_the_idle_gpu(backfilled):
    server, at = backfilled
    rules = {rule["alert"]: rule["expr"] for rule in monitoring_rules.alerts()}
    near = server.values(rules["AlignedDraClaimNearMemoryLimit"], at, ("claim",))
    assert near == {"c2": pytest.approx(0.95)}
    idle = server.values(rules["AlignedDraGpuAllocatedIdle"], at, ("claim", "device"))
    assert idle == {("c3", "gpu-1"): 0}
