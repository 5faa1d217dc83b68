# SPDX-License-Identifier: Apache-2.0
"""Fractional GPUs: shareable devices on Kubernetes >= 1.36, MPS limits from the granted share.

``nvidia-cuda-mps-control`` cannot run here (no GPU): a stand-in script on
the driver's PATH records how it was called and creates the control pipe, as
the real daemon does.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

MPS_STAND_IN = """#!/bin/sh
# test stand-in for nvidia-cuda-mps-control
echo "$* CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES PIPE=$CUDA_MPS_PIPE_DIRECTORY" >> "{log}"
if [ "$1" = "-d" ]; then : > "$CUDA_MPS_PIPE_DIRECTORY/control"; else cat >> "{log}"; rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"; fi
"""


@pytest.fixture
def setup():
    root = h.short_tmp()
    node = h.NodeTree.build(root)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    log = root / "mps.log"
    script = bin_dir / "nvidia-cuda-mps-control"
    script.write_text(MPS_STAND_IN.format(log=log))
    script.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    yield node, env, log
    shutil.rmtree(root, ignore_errors=True)


def published_gpu(api):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for item in api.list("resourceslices"):
            for device in item["spec"]["devices"]:
                if device["name"] == h.GPU:
                    return device
        time.sleep(0.05)
    raise AssertionError("no GPU published")


def test_shareable_gpus_on_1_36_and_mps_limits(setup):
    node, env, log = setup
    with FakeApiServer("1.36") as api:
        api.create(h.node_object())
        with h.DriverProcess(node, api, env=env, extra=["--mps-root", str(node.root / "mps")]) as driver:
            gpu = published_gpu(api)
            assert gpu["allowMultipleAllocations"] is True
            assert gpu["capacity"]["memory"]["value"] == "80Gi"
            assert gpu["capacity"]["memory"]["requestPolicy"]["validRange"]["max"] == "80Gi"
            assert gpu["capacity"]["compute"]["requestPolicy"]["validRange"] == {"min": "1", "max": "100", "step": "1"}
            assert api.rejections == []
            shares = []
            for index, (memory, compute) in enumerate((("10Gi", "50"), ("20Gi", "25"))):
                share = str(uuid.uuid4())
                claim = api.create(
                    h.claim_object(
                        f"share{index}",
                        [
                            {
                                "request": "gpu",
                                "device": h.GPU,
                                "shareID": share,
                                "consumedCapacity": {"memory": memory, "compute": compute},
                            }
                        ],
                    )
                )
                ref = h.claim_ref(claim)
                answer = driver.prepare([ref]).claims[ref["uid"]]
                assert answer.error == ""
                assert answer.devices[0].share_id == share
                beta = driver.prepare([ref], version="v1beta1").claims[ref["uid"]]
                assert beta.devices[0].device_name == h.GPU  # v1beta1 has no share_id field
                spec = json.loads((node.cdi / f"aligned.dev-claim_{ref['uid']}.json").read_text())
                env_vars = spec["devices"][0]["containerEdits"]["env"]
                assert f"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE={compute}" in env_vars
                mib = int(memory[:-2]) * 1024
                assert f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={h.GPU_UUID}={mib}M" in env_vars
                assert spec["devices"][0]["containerEdits"]["mounts"][0]["containerPath"] == "/run/nvidia-mps"
                assert spec["devices"][0]["name"].endswith(share)
                shares.append(ref)
            calls = log.read_text().splitlines()
            assert len([c for c in calls if c.startswith("-d")]) == 1  # one daemon for the GPU
            assert f"CUDA_VISIBLE_DEVICES={h.GPU_UUID}" in calls[0]
            driver.unprepare([shares[0]])
            assert "quit" not in log.read_text()  # the second share still runs
            driver.unprepare([shares[1]])
            assert "quit" in log.read_text()


def test_older_clusters_publish_exclusive_gpus_and_share_through_config(setup):
    node, env, log = setup
    with FakeApiServer("1.35") as api:
        api.create(h.node_object())
        with h.DriverProcess(node, api, env=env, extra=["--mps-root", str(node.root / "mps")]) as driver:
            gpu = published_gpu(api)
            assert "allowMultipleAllocations" not in gpu
            assert "compute" not in gpu["capacity"]
            config = [
                {
                    "source": "FromClaim",
                    "opaque": {
                        "driver": h.DRIVER,
                        "parameters": {
                            "apiVersion": "dra.aligned.dev/v1alpha1",
                            "kind": "GpuConfig",
                            "sharing": {
                                "strategy": "MPS",
                                "mps": {"activeThreadPercentage": 30, "pinnedDeviceMemoryLimit": "4Gi"},
                            },
                        },
                    },
                }
            ]
            claim = api.create(h.claim_object("shared", [{"request": "gpu", "device": h.GPU}], config))
            ref = h.claim_ref(claim)
            assert driver.prepare([ref]).claims[ref["uid"]].error == ""
            spec = json.loads((node.cdi / f"aligned.dev-claim_{ref['uid']}.json").read_text())
            env_vars = spec["devices"][0]["containerEdits"]["env"]
            assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30" in env_vars
            assert f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={h.GPU_UUID}=4096M" in env_vars


def test_mps_without_the_control_binary_fails_the_claim_only(setup):
    node, _env, _log = setup
    with FakeApiServer("1.36") as api:
        api.create(h.node_object())
        with h.DriverProcess(node, api, env={"PATH": "/usr/bin:/bin"}, extra=["--mps-root", str(node.root / "m")]) as d:
            claim = api.create(
                h.claim_object(
                    "nomps",
                    [
                        {
                            "request": "gpu",
                            "device": h.GPU,
                            "shareID": str(uuid.uuid4()),
                            "consumedCapacity": {"compute": "10"},
                        }
                    ],
                )
            )
            ref = h.claim_ref(claim)
            assert "nvidia-cuda-mps-control" in d.prepare([ref]).claims[ref["uid"]].error
