# SPDX-License-Identifier: Apache-2.0
"""The driver process with ``--reclaim=evict``: a fractional claim prepared over gRPC on Kubernetes 1.36 grows
above its request while the GPU runs short, and its pod is evicted through the strict fake API server; after
``kill -9`` the driver starts again on a node where NVML is missing: the watcher backs off and Prepare and
Unprepare go on.

NVML is ``tests/fake_nvml.py``, reached by the driver process as ``pynvml`` through a test-only stand-in
module on its ``PYTHONPATH`` (``fake_nvml.write_module``); the driver has no switch of its own for it.
``nvidia-cuda-mps-control`` is a stand-in script on the driver's PATH, as in test_fractional_gpus.py.
"""

from __future__ import annotations

import os
import shutil
import uuid

import pytest

from ansible_collections.aligned.dra.tests import driver_harness as h
from ansible_collections.aligned.dra.tests import fake_nvml
from ansible_collections.aligned.dra.tests.fake_apiserver import FakeApiServer

GIB = 1 << 30
MPS_STAND_IN = """#!/bin/sh
# test stand-in for nvidia-cuda-mps-control
if [ "$1" = "-d" ]; then : > "$CUDA_MPS_PIPE_DIRECTORY/control"; else cat > /dev/null; rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"; fi
"""


@pytest.fixture
def setup():
    root = h.short_tmp()
    node = h.NodeTree.build(root)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-cuda-mps-control").write_text(MPS_STAND_IN)
    (bin_dir / "nvidia-cuda-mps-control").chmod(0o755)
    shim = root / "nvml"
    shim.mkdir()
    state = root / "nvml.json"
    fake_nvml.write_module(shim, state)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join([str(shim), h.driver_env()["PYTHONPATH"]]),
    }
    yield node, env, state
    shutil.rmtree(root, ignore_errors=True)


def pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": h.NODE, "priority": 0, "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def running(node: h.NodeTree, nvml: fake_nvml.FakeNvml, pid: int, cgroup: str, used: int, mps: bool) -> None:
    (node.proc / str(pid)).mkdir(parents=True, exist_ok=True)
    (node.proc / str(pid) / "cgroup").write_text(cgroup + "\n")
    nvml.run(h.GPU_BDF, pid, used, mps)


def metric(port: int, name: str, labels: str):
    status, text = h.http_get(f"http://127.0.0.1:{port}/metrics")
    try:
        return status == 200 and h.metric_value(text, name, labels)
    except AssertionError:  # not written yet
        return False


def test_a_claim_above_its_request_is_evicted_and_a_missing_nvml_never_stops_the_driver(setup):
    node, env, state = setup
    nvml = fake_nvml.FakeNvml()
    nvml.add_gpu(h.GPU_BDF, 80 * GIB)
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
            pod_uid = api.create(pod("train"))["metadata"]["uid"]
            obj = h.claim_object(
                "thin",
                [
                    {
                        "request": "gpu",
                        "device": h.GPU,
                        "shareID": str(uuid.uuid4()),
                        "consumedCapacity": {"memory": "10Gi", "compute": "25"},
                    }
                ],
            )
            obj["status"]["reservedFor"] = [{"resource": "pods", "name": "train", "uid": pod_uid}]
            ref = h.claim_ref(api.create(obj))
            assert driver.prepare([ref]).claims[ref["uid"]].error == ""
            # the pod's MPS client uses 30 GiB (request 10 GiB), another container 46 GiB: 3.5 GiB free of 80
            cgroup = f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{pod_uid.replace('-', '_')}"
            running(node, nvml, 424201, cgroup + ".slice/cri-containerd-0a.scope", 30 * GIB, True)
            running(node, nvml, 424202, "0::/system.slice/batch.service", 46 * GIB, False)
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
