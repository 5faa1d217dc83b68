# SPDX-License-Identifier: Apache-2.0
"""End to end: a real Prometheus scrapes a driver process (usage on, the fake NVML) through the scrape
configuration the role writes for host mode, while a claim's pod's processes grow and shrink; the dashboard's
and the alerts' queries follow, and the claim's series go with Unprepare (docs/monitoring.md)."""

from __future__ import annotations

import shutil

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import (
    monitoring,
    monitoring_dashboard,
    monitoring_rules,
)
from ansible_collections.aligned.dra.tests.support.fakes import nvml as fake_nvml
from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses import prometheus

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not prometheus.available(), reason="Debian's prometheus package is not installed"),
]
GIB = fake_nvml.GIB


def query(name: str) -> str:
    return monitoring_dashboard.QUERIES[name].replace("$node", h.NODE).replace("$namespace", ".*")


def values(server: prometheus.Prometheus, expr: str, by: tuple[str, ...]) -> dict:
    return server.values(expr, None, by)


def test_prometheus_scrapes_the_driver_and_the_queries_follow_a_claim_s_use(tmp_path):
    root = h.short_tmp()
    try:
        node = h.NodeTree.build(root)
        env, state = h.gpu_tools(root)
        gpus = fake_nvml.GpuNode(node.proc, first_pid=525700)
        gpus.add_gpu(h.GPU_BDF, 80 * GIB, mps_server_gib=0.5)
        nvml = gpus.nvml
        nvml.write_state(state)
        port = h.free_port()
        # the host-mode scrape configuration the role writes, for this node at 127.0.0.1
        entry = monitoring.scrape_config(
            {"interval": "1s"},
            {"mode": "host"},
            [{"port_name": "metrics", "metrics_port": port}],
            {h.NODE: "127.0.0.1"},
        )
        extra = [f"--mps-root={node.root / 'mps'}", "--usage-interval=0.1", f"--metrics-address=127.0.0.1:{port}"]
        with FakeApiServer("1.36") as api, prometheus.Prometheus(tmp_path / "prometheus", [entry]) as server:
            api.create(h.node_object())
            driver = h.DriverProcess(node, api, env=env, extra=extra).start()
            try:
                server.wait_for(f'up{{job="{monitoring_rules.JOB}", node="{h.NODE}"}} == 1', bool)
                ref, pod_uid = h.shared_claim(api, "thin", "train")
                assert driver.prepare([ref]).claims[ref["uid"]].error == ""
                pid = gpus.process(h.GPU_BDF, 4, fake_nvml.pod_cgroup(pod_uid, container="0a"), mps_client=True)
                nvml.write_state(state)
                used = query("share_used")
                server.wait_for(used, lambda r: [float(s["value"][1]) for s in r] == [4 * GIB])
                assert values(server, query("share_request"), ("claim",)) == {"thin": 10 * GIB}
                assert values(server, query("share_limit"), ("claim",)) == {"thin": 10 * GIB}
                assert values(server, query("share_sm"), ("claim",)) == {}  # never sampled: absent, not 0
                assert values(server, query("gpu_total"), ("device",)) == {h.GPU: 80 * GIB}
                assert values(server, query("namespace_allocated"), ("namespace",)) == {"default": 10 * GIB}
                assert values(server, query("namespace_gpus_allocated"), ("namespace",)) == {"default": 0.125}
                rules = {rule["alert"]: rule["expr"] for rule in monitoring_rules.alerts()}
                assert values(server, rules["AlignedDraClaimNearMemoryLimit"], ("claim",)) == {}

                # grows above its request and limit's 90%, busy on the SMs
                nvml.run(h.GPU_BDF, pid, 30 * GIB, mps_client=True)
                nvml.sample(h.GPU_BDF, pid, 75)
                nvml.write_state(state)
                server.wait_for(used, lambda r: [float(s["value"][1]) for s in r] == [30 * GIB])
                assert values(server, query("namespace_used_ratio"), ("namespace",)) == {"default": 3.0}
                near = values(server, rules["AlignedDraClaimNearMemoryLimit"], ("namespace", "claim", "pod"))
                assert near == {("default", "thin", "train"): 3.0}

                def busy(result: list) -> bool:
                    # NVML gives the samples since the last poll: the process keeps computing while we look
                    nvml.sample(h.GPU_BDF, pid, 75)
                    nvml.write_state(state)
                    return [float(s["value"][1]) for s in result] == [0.75]

                server.wait_for(query("share_sm"), busy)
                assert values(server, rules["AlignedDraGpuAllocatedIdle"], ("claim",)) == {}

                # and shrinks: nothing near the limit any more
                nvml.run(h.GPU_BDF, pid, 1 * GIB, mps_client=True)
                nvml.write_state(state)
                server.wait_for(used, lambda r: [float(s["value"][1]) for s in r] == [1 * GIB])
                assert values(server, rules["AlignedDraClaimNearMemoryLimit"], ("claim",)) == {}
                assert values(server, query("namespace_used_ratio"), ("namespace",)) == {"default": 0.1}

                # Unprepare: the claim's series go stale at the next scrape
                assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
                server.wait_for(used, lambda r: r == [])
                assert values(server, query("namespace_allocated"), ("namespace",)) == {}
                assert values(server, query("gpu_unattributed"), ("device",))[h.GPU] >= 0.5 * GIB
            finally:
                driver.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
