# SPDX-License-Identifier: Apache-2.0
"""Prometheus metrics and the health endpoint (``--metrics-address``).

``GET /metrics``: Prometheus text format. ``GET /healthz`` (and ``/readyz``):
200 ``ok`` while the gRPC services run and nothing is degraded, else 503 with
``degraded: <reasons>`` (API errors in a row, the age of the last successful
publication, CDI specs not restored). ``GET /livez``: 200 while the gRPC
services run: what a liveness probe asks, so an API outage never restarts the
driver.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 45.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "aligned_dra_claim_operations",
            "Claims prepared and unprepared, by result",
            ["operation", "result"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "aligned_dra_claim_operation_seconds",
            "Time to prepare or unprepare one claim (the API round trip included)",
            ["operation"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.published_devices = Gauge(
            "aligned_dra_published_devices", "Devices in this node's ResourceSlices", registry=self.registry
        )
        self.published_slices = Gauge(
            "aligned_dra_published_slices", "ResourceSlices of this node's pool", registry=self.registry
        )
        self.prepared_claims = Gauge("aligned_dra_prepared_claims", "Claims in the checkpoint", registry=self.registry)
        self.errors = Counter("aligned_dra_errors", "Errors by operation", ["operation"], registry=self.registry)
        self.unhealthy_devices = Gauge(
            "aligned_dra_unhealthy_devices", "Devices whose last health check failed", registry=self.registry
        )
        self.api_errors = Gauge(
            "aligned_dra_api_consecutive_errors",
            "API requests of the publication loop that failed in a row (0 after a success)",
            registry=self.registry,
        )
        self.last_publish = Gauge(
            "aligned_dra_last_publish_timestamp_seconds",
            "Unix time of the last successful ResourceSlice publication (0: none yet)",
            registry=self.registry,
        )
        self.publish_age = Gauge(
            "aligned_dra_last_publish_age_seconds",
            "Seconds since the last successful ResourceSlice publication (-1: none yet)",
            registry=self.registry,
        )
        self.publish_age.set_function(self._publish_age)
        self.degraded = Gauge(
            "aligned_dra_degraded", "1 while /healthz reports the driver degraded", registry=self.registry
        )
        self.restore_pending = Gauge(
            "aligned_dra_cdi_restore_pending_claims",
            "Checkpointed claims whose CDI spec could not be restored (retried)",
            registry=self.registry,
        )
        self.status_queue = Gauge(
            "aligned_dra_claim_status_queue", "Claim status writes waiting or in flight", registry=self.registry
        )
        self.status_dropped = Counter(
            "aligned_dra_claim_status_dropped",
            "Claim status writes given up (refused by the API server, or the queue was full)",
            registry=self.registry,
        )
        self.published_taints = Gauge(
            "aligned_dra_published_device_taints",
            "Device taints in this node's ResourceSlices after the last successful publication",
            ["cause", "effect"],
            registry=self.registry,
        )
        # --rails-file (rails.py): said here, never in /healthz: a rule's problem is the site's to fix in the
        # inventory, and a driver reported unready for it would hold the install and gain nothing
        self.rails_file_error = Gauge(
            "aligned_dra_rails_file_error",
            "Whether --rails-file cannot be read or used: 1 (no rail is published; the log says why), else 0",
            registry=self.registry,
        )
        self.rail_problems = Gauge(
            "aligned_dra_rail_problems",
            "Problems of the site's rail rule on this node at the last scan (logged); the NICs it places keep their rail",
            registry=self.registry,
        )
        self.rail_nics = Gauge(
            "aligned_dra_rail_nics", "RDMA NICs (PFs) on a rail at the last scan", registry=self.registry
        )
        # --reclaim=evict (reclaim.py); gpu: the GPU's published device name
        self.reclaims = Counter(
            "aligned_dra_reclaims",
            "Fractional GPU claims evicted because the GPU ran short of memory while they used more than requested",
            ["gpu"],
            registry=self.registry,
        )
        self.mig_kept_instances = Gauge(
            "aligned_dra_mig_kept_instances",
            "MIG instances no prepared claim holds, kept at start because a process runs on them (not published)",
            registry=self.registry,
        )
        self.mig_unreadable_gpus = Gauge(
            "aligned_dra_mig_unreadable_gpus",
            "GPUs selected for MIG the last scan could not publish from NVML (cause nvml: NVML did not load or failed "
            "to read it; device-model: its MIG state was refused): each keeps what was last published, or is withdrawn",
            ["cause"],
            registry=self.registry,
        )
        self.gpu_bytes_above_request = Gauge(
            "aligned_dra_gpu_bytes_above_request",
            "Bytes of GPU memory the fractional claims on a GPU use above their requests (pods as last read)",
            ["gpu"],
            registry=self.registry,
        )
        self._last_publish_wall: float | None = None

    def watch_health(self, monitor: Any, driver: str) -> None:
        """Health metrics read from the monitor's table at scrape time: the health stream's one source."""
        self.unhealthy_devices.set_function(monitor.unhealthy)
        self.registry.register(_HealthCollector(monitor, driver))

    def taints_published(self, devices: list[dict[str, Any]]) -> None:
        """Count the taints of what was just published, by cause (the taint's value) and effect."""
        from ..devices.health import CAUSES

        counts = {(cause, effect): 0 for cause, effect in CAUSES.items()}
        for device in devices:
            for taint in device.get("taints") or []:
                key = (str(taint.get("value")), str(taint.get("effect")))
                counts[key] = counts.get(key, 0) + 1
        for (cause, effect), count in counts.items():
            self.published_taints.labels(cause=cause, effect=effect).set(count)

    def published_now(self) -> None:
        import time

        self._last_publish_wall = time.time()
        self.last_publish.set(self._last_publish_wall)

    def _publish_age(self) -> float:
        import time

        return -1.0 if self._last_publish_wall is None else max(0.0, time.time() - self._last_publish_wall)

    def observe(self, operation: str, result: str, seconds: float) -> None:
        self.requests.labels(operation=operation, result=result).inc()
        self.latency.labels(operation=operation).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _HealthCollector:
    """``aligned_dra_device_unhealthy{device,cause,effect}``: 1 for each device the health table calls unhealthy."""

    def __init__(self, monitor: Any, driver: str) -> None:
        self.monitor = monitor
        self.driver = driver

    def describe(self) -> list[Any]:
        return [self._family()]

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "aligned_dra_device_unhealthy",
            "1 for each device whose last health check failed, with its cause and the effect of its taint",
            labels=["device", "cause", "effect"],
        )

    def collect(self) -> list[Any]:
        from ..devices.health import CAUSES

        family = self._family()
        for name, entry in sorted(self.monitor.snapshot().items()):
            if not entry.healthy:
                family.add_metric([name, entry.cause, CAUSES[entry.cause]], 1)
        return [family]


class MetricsServer:
    """HTTP server for /metrics and /healthz in a daemon thread."""

    def __init__(
        self,
        address: str,
        metrics: Metrics,
        health: Callable[[], tuple[bool, str]],
        live: Callable[[], tuple[bool, str]] | None = None,
    ) -> None:
        host, sep, port = address.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"--metrics-address {address!r} must be HOST:PORT (port 0 picks one)")
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    code, body, ctype = 200, metrics.render(), CONTENT_TYPE_LATEST
                elif path in ("/healthz", "/readyz", "/livez"):
                    ok, reason = (live or health)() if path == "/livez" else health()
                    code, body, ctype = (200 if ok else 503), (reason + "\n").encode(), "text/plain"
                else:
                    code, body, ctype = 404, b"not found\n", "text/plain"
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer((host.strip("[]") or "0.0.0.0", int(port)), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="metrics", daemon=True)
        del owner

    @property
    def port(self) -> int:
        return self.httpd.server_address[1]

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
