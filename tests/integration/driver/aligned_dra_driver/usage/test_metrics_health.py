# SPDX-License-Identifier: Apache-2.0
"""Prometheus metrics, the health endpoint and the v1alpha1.DRAResourceHealth stream of the real process."""

from __future__ import annotations

import time

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

free_port, get, metric = h.free_port, h.http_get, h.metric_value


def test_metrics_and_health(node):
    port = free_port()
    with FakeApiServer("1.35") as api:
        api.create(h.node_object())
        with h.DriverProcess(node, api, extra=["--metrics-address", f"127.0.0.1:{port}"]) as driver:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 10
            while get(base + "/healthz")[0] != 200 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert get(base + "/healthz") == (200, "ok\n")
            good = api.create(h.claim_object("m1", [{"request": "gpu", "device": h.GPU}]))
            bad = api.create(h.claim_object("m2", [{"request": "gpu", "device": "gpu-0000-99-00-0"}]))
            driver.prepare([h.claim_ref(good), h.claim_ref(bad)])
            driver.unprepare([h.claim_ref(good)])
            code, text = get(base + "/metrics")
            assert code == 200
            assert metric(text, "aligned_dra_claim_operations_total", 'operation="prepare",result="ok"') == 1
            assert metric(text, "aligned_dra_claim_operations_total", 'operation="prepare",result="error"') == 1
            assert metric(text, "aligned_dra_claim_operations_total", 'operation="unprepare",result="ok"') == 1
            assert metric(text, "aligned_dra_claim_operation_seconds_count", 'operation="prepare"') == 2
            assert metric(text, "aligned_dra_published_devices") == 2
            assert metric(text, "aligned_dra_published_slices") == 1
            assert metric(text, "aligned_dra_prepared_claims") == 0
            # the API fails: publishing fails, health says why
            api.fail_next("GET", r"/resourceslices$", code=500, times=1000)
            deadline = time.monotonic() + 10
            while get(base + "/healthz")[0] == 200 and time.monotonic() < deadline:
                time.sleep(0.05)
            code, body = get(base + "/healthz")
            assert code == 503 and body.startswith("degraded: ") and "API error(s) in a row" in body
            assert get(base + "/livez") == (200, "ok\n")  # alive: a liveness probe must not restart it
            assert metric(get(base + "/metrics")[1], "aligned_dra_api_consecutive_errors") >= 1
            assert metric(get(base + "/metrics")[1], "aligned_dra_degraded") == 1
            assert metric(get(base + "/metrics")[1], "aligned_dra_errors_total", 'operation="publish"') >= 1
            assert get(base + "/nothing")[0] == 404


def test_health_stream_reports_a_device_that_goes_away(node):
    from aligned_dra_driver.kubelet.proto import health_v1alpha1_pb2, health_v1alpha1_pb2_grpc

    with FakeApiServer("1.35") as api:
        api.create(h.node_object())
        with h.DriverProcess(node, api, extra=["--health-service"]) as driver:
            info = driver.register()
            assert list(info.supported_versions)[-1] == "v1alpha1.DRAResourceHealth"
            stub = health_v1alpha1_pb2_grpc.DRAResourceHealthStub(driver.channel(driver.dra_socket))
            stream = stub.NodeWatchResources(health_v1alpha1_pb2.NodeWatchResourcesRequest(), timeout=30)
            first = next(stream)
            table = {d.device.device_name: d for d in first.devices}
            assert table[h.GPU].health == health_v1alpha1_pb2.HEALTHY
            assert table[h.GPU].device.pool_name == "node-a"
            assert table[h.NIC].last_updated_time > 0
            # the GPU's kernel driver is unbound: the kernel drops the link and uevent's DRIVER line
            function = node.sys / "bus" / "pci" / "devices" / h.GPU_BDF
            (function / "driver").unlink()
            uevent = function / "uevent"
            uevent.write_text("".join(line for line in uevent.read_text().splitlines(True) if "DRIVER=" not in line))
            update = next(stream)
            table = {d.device.device_name: d for d in update.devices}
            assert table[h.GPU].health == health_v1alpha1_pb2.UNHEALTHY
            assert "no kernel driver" in table[h.GPU].message
            stream.cancel()
