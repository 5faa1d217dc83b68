# SPDX-License-Identifier: Apache-2.0
"""The driver process with ``--usage=on`` (the default): a fractional claim prepared over gRPC on Kubernetes 1.36,
its pod's processes growing and shrinking on the fake NVML, its series on /metrics, gone with Unprepare; NVML
failing and missing: only ``aligned_dra_usage_available 0``, one log line, errors counted, Prepare and Unprepare
going on.

NVML is ``tests/support/fakes/nvml.py``, reached by the driver process as ``pynvml`` through a test-only stand-in
module on its ``PYTHONPATH`` (``harnesses.driver.gpu_tools``); the driver has no switch of its own for it.
"""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.aligned.dra.tests.support.fakes import nvml as fake_nvml
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

GIB = fake_nvml.GIB


@pytest.fixture
def kubernetes_minor() -> str:
    return "1.36"  # fractional GPUs


@pytest.fixture
def setup(node):
    env, state = h.gpu_tools(node.root)
    return node, env, state


def scrape(port: int) -> dict[str, dict[tuple, float]]:
    """``{family: {sorted label items: value}}`` of the driver's /metrics."""
    status, text = h.http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    found: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def claim_value(port: int, name: str, claim: str) -> float | None:
    values = [v for k, v in scrape(port).get(name, {}).items() if dict(k).get("claim") == claim]
    return values[0] if values else None


def test_a_claim_s_use_grows_and_shrinks_on_metrics_and_goes_with_unprepare(setup, api):
    node, env, state = setup
    gpus = fake_nvml.GpuNode(node.proc, first_pid=525200)
    gpus.add_gpu(h.GPU_BDF, 80 * GIB, mps_server_gib=0.5)
    nvml = gpus.nvml
    nvml.write_state(state)
    port = h.free_port()
    extra = [f"--mps-root={node.root / 'mps'}", "--usage-interval=0.1", f"--metrics-address=127.0.0.1:{port}"]
    driver = h.DriverProcess(node, api, env=env, extra=extra).start()
    try:
        ref, pod_uid = h.shared_claim(api, "thin", "train")
        assert driver.prepare([ref]).claims[ref["uid"]].error == ""
        pid = gpus.process(h.GPU_BDF, 4, fake_nvml.pod_cgroup(pod_uid, container="0a"), mps_client=True)
        nvml.write_state(state)
        used = "aligned_dra_claim_gpu_memory_used_bytes"
        assert h.wait_until(lambda: claim_value(port, used, "thin") == 4 * GIB, what="4 GiB used")
        page = scrape(port)
        uuid = nvml.uuid_of(h.GPU_BDF)
        labels = (
            ("claim", "thin"),
            ("device", h.GPU),
            ("gpu_uuid", uuid),
            ("namespace", "default"),
            ("pod", "train"),
        )
        assert page["aligned_dra_claim_gpu_memory_request_bytes"][labels] == 10 * GIB
        assert page["aligned_dra_claim_gpu_memory_limit_bytes"][labels] == 10 * GIB
        assert labels not in page.get("aligned_dra_claim_gpu_sm_utilization_ratio", {})  # never sampled: absent
        gpu = (("device", h.GPU), ("gpu_uuid", uuid))
        assert page["aligned_dra_gpu_memory_total_bytes"][gpu] == 80 * GIB
        assert page["aligned_dra_gpu_memory_unattributed_bytes"][gpu] == 0.5 * GIB  # the MPS server
        info = {dict(k)["claim"]: dict(k) for k in page["aligned_dra_claim_device_info"]}
        assert info["thin"] == {
            "namespace": "default",
            "claim": "thin",
            "pod": "train",
            "device": h.GPU,
            "pool": h.NODE,
            "gpu_uuid": uuid,
            "pci_bus_id": h.GPU_BDF,
        }

        nvml.run(h.GPU_BDF, pid, 30 * GIB, mps_client=True)  # grows above its request
        nvml.sample(h.GPU_BDF, pid, 75)
        nvml.write_state(state)
        assert h.wait_until(lambda: claim_value(port, used, "thin") == 30 * GIB, what="30 GiB used")
        nvml.run(h.GPU_BDF, pid, 1 * GIB, mps_client=True)  # and shrinks
        nvml.write_state(state)
        assert h.wait_until(lambda: claim_value(port, used, "thin") == 1 * GIB, what="1 GiB used")

        assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
        page = scrape(port)  # at once: no poll in between
        for name in (used, "aligned_dra_claim_gpu_memory_request_bytes", "aligned_dra_claim_device_info"):
            assert not page.get(name), name
        assert page["aligned_dra_gpu_memory_unattributed_bytes"][gpu] >= 0.5 * GIB
    finally:
        driver.stop()


def test_nvml_failing_or_missing_leaves_the_flag_one_log_line_and_prepare_goes_on(setup, api):
    node, env, state = setup
    gpus = fake_nvml.GpuNode(node.proc, first_pid=525300)
    gpus.add_gpu(h.GPU_BDF, 80 * GIB)
    nvml = gpus.nvml
    nvml.write_state(state)
    port = h.free_port()
    extra = [f"--mps-root={node.root / 'mps'}", "--usage-interval=0.1", f"--metrics-address=127.0.0.1:{port}"]
    available = "aligned_dra_usage_available"
    driver = h.DriverProcess(node, api, env=env, extra=extra).start()
    try:
        ref, _pod_uid = h.shared_claim(api, "thin", "train")
        assert driver.prepare([ref]).claims[ref["uid"]].error == ""
        assert h.wait_until(lambda: scrape(port).get(available) == {(): 1.0}, what="usage available")
        nvml.failing = True  # the NVIDIA driver in trouble: every call fails
        nvml.write_state(state)
        assert h.wait_until(lambda: scrape(port).get(available) == {(): 0.0}, what="usage unavailable")
        page = scrape(port)
        assert not page.get("aligned_dra_claim_gpu_memory_used_bytes")
        assert not page.get("aligned_dra_gpu_memory_total_bytes")
        assert page["aligned_dra_errors_total"][(("operation", "usage"),)] >= 1
        assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
        nvml.failing = False
        nvml.write_state(state)
        assert h.wait_until(lambda: scrape(port).get(available) == {(): 1.0}, what="usage available again")

        # a start where NVML's library is missing: retried with backoff, one log line
        driver.stop()
        nvml.library = False
        nvml.write_state(state)
        driver.start()
        h.wait_until(
            lambda: scrape(port).get("aligned_dra_errors_total", {}).get((("operation", "usage"),)),
            what="a failed NVML start",
        )
        assert h.wait_until(lambda: scrape(port).get(available) == {(): 0.0}, what="usage unavailable")
        again = h.claim_ref(api.create(h.claim_object("whole", [{"request": "gpu", "device": h.GPU}])))
        assert driver.prepare([again]).claims[again["uid"]].error == ""
        assert driver.unprepare([again]).claims[again["uid"]].error == ""
        h.wait_until(lambda: scrape(port)["aligned_dra_errors_total"][(("operation", "usage"),)] >= 2, what="a retry")
    finally:
        driver.stop()
    log = driver.log.read_text()
    assert log.count("NVML is not usable") == 1, log[-3000:]  # retried, counted, logged once
