# SPDX-License-Identifier: Apache-2.0
"""The driver process with ``--reclaim=evict``: a fractional claim prepared over gRPC on Kubernetes 1.36 grows
above its request while the GPU runs short, and its pod is evicted through the strict fake API server; after
``kill -9`` the driver starts again on a node where NVML is missing: the watcher backs off and Prepare and
Unprepare go on.

NVML is ``tests/support/fakes/nvml.py``, reached by the driver process as ``pynvml`` through a test-only stand-in
module on its ``PYTHONPATH`` (``fake_nvml.write_module``); the driver has no switch of its own for it.
``nvidia-cuda-mps-control`` is a stand-in script on the driver's PATH, as in test_fractional_gpus.py
(``harnesses.driver.gpu_tools`` writes both).
"""

from __future__ import annotations

import shutil

import pytest

from ansible_collections.aligned.dra.tests.support.fakes import nvml as fake_nvml
from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

GIB = fake_nvml.GIB


@pytest.fixture
def setup():
    root = h.short_tmp()
    node = h.NodeTree.build(root)
    env, state = h.gpu_tools(root)
    yield node, env, state
    shutil.rmtree(root, ignore_errors=True)


def metric(port: int, name: str, labels: str):
    status, text = h.http_get(f"http://127.0.0.1:{port}/metrics")
    try:
        return status == 200 and h.metric_value(text, name, labels)
    except AssertionError:  # not written yet
        return False


def test_a_claim_above_its_request_is_evicted_and_a_missing_nvml_never_stops_the_driver(setup):
    node, env, state = setup
    gpus = fake_nvml.GpuNode(node.proc, first_pid=424200)
    gpus.add_gpu(h.GPU_BDF, 80 * GIB)
    nvml = gpus.nvml
    nvml.write_state(state)
    port = h.free_port()
    extra = [
        f"--mps-root={node.root / 'mps'}",
        "--reclaim=evict",
        "--reclaim-interval=0.1",
        f"--metrics-address=127.0.0.1:{port}",
    ]
    with FakeApiServer("1.36") as api:
        api.create(h.node_object())
        driver = h.DriverProcess(node, api, env=env, extra=extra).start()
        try:
            ref, pod_uid = h.shared_claim(api, "thin", "train")
            assert driver.prepare([ref]).claims[ref["uid"]].error == ""
            # the pod's MPS client uses 30 GiB (request 10 GiB), another container 46 GiB: 3.5 GiB free of 80
            gpus.process(h.GPU_BDF, 30, fake_nvml.pod_cgroup(pod_uid, container="0a"), mps_client=True)
            gpus.process(h.GPU_BDF, 46, "0::/system.slice/batch.service", mps_client=False)
            nvml.write_state(state)
            gpu = f'gpu="{h.GPU}"'
            assert h.wait_until(lambda: metric(port, "aligned_dra_reclaims_total", gpu), what="the reclaim") == 1
            assert api.get("pods", "train", "default") is None  # evicted through policy/v1
            assert metric(port, "aligned_dra_gpu_bytes_above_request", gpu) == 20 * GIB

            # kill -9, then a start on a node whose NVML library is missing: the watcher backs off
            driver.kill9()
            nvml.library = False
            nvml.write_state(state)
            driver.start()
            errors = 'operation="reclaim"'
            h.wait_until(lambda: metric(port, "aligned_dra_errors_total", errors), what="a failed NVML start")
            assert driver.unprepare([ref]).claims[ref["uid"]].error == ""
            again = h.claim_ref(api.create(h.claim_object("whole", [{"request": "gpu", "device": h.GPU}])))
            assert driver.prepare([again]).claims[again["uid"]].error == ""
            assert driver.unprepare([again]).claims[again["uid"]].error == ""
            assert driver.proc is not None and driver.proc.poll() is None
        finally:
            driver.stop()
