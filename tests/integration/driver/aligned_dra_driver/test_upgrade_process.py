# SPDX-License-Identifier: Apache-2.0
"""The driver process with ``--mig=dynamic`` under a control-plane upgrade from 1.34 to 1.35.

The pool's slices differ by minor: 1.34 keeps each counter set in a slice with the devices that consume it,
1.35 refuses a slice with both (counter sets in slices of their own). The fake API server (the gate
``DRAPartitionableDevices`` on, as a cluster with dynamic MIG has it) is upgraded under the running driver; the
kubelet then deletes a slice of the pool (as at a plugin's registration), the driver writes the pool again in
the shape of 1.34, is refused, asks the minor again and publishes the shape of 1.35: no restart.
"""

from __future__ import annotations

import shutil

import pytest

from ansible_collections.aligned.dra.tests.support.fakes import nvml as fake_nvml
from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

PARTITIONABLE = {"DRAPartitionableDevices": True}


@pytest.fixture
def setup():
    root = h.short_tmp()
    node = h.NodeTree.build(root)
    env, state = h.gpu_tools(root)
    yield node, env, state
    shutil.rmtree(root, ignore_errors=True)


def shape(api: FakeApiServer) -> str:
    """The minor whose shape the stored pool has, once whole (one generation, resourceSliceCount slices)."""
    items = api.list("resourceslices")
    generations = {s["spec"]["pool"]["generation"] for s in items}
    if not items or len(generations) != 1 or {s["spec"]["pool"]["resourceSliceCount"] for s in items} != {len(items)}:
        return ""
    specs = [s["spec"] for s in items]
    if not any(s.get("sharedCounters") for s in specs):
        return ""
    return "1.34" if any(s.get("sharedCounters") and s.get("devices") is not None for s in specs) else "1.35"


def test_an_upgrade_to_1_35_under_a_running_driver_gives_the_pool_the_new_shape(setup):
    node, env, state = setup
    nvml = fake_nvml.FakeNvml(procfs=node.proc)
    nvml.add_gpu(h.GPU_BDF, model="H100-SXM5-80GB")
    nvml.enable_mig(h.GPU_BDF)
    nvml.write_state(state)
    with FakeApiServer("1.34", gates=PARTITIONABLE) as api:
        api.create(h.node_object())
        driver = h.DriverProcess(node, api, env=env, extra=["--mig=dynamic"]).start()
        try:
            h.wait_until(lambda: shape(api) == "1.34", timeout=30, what="the pool in the shape of 1.34")
            devices = sorted(d["name"] for s in api.list("resourceslices") for d in s["spec"].get("devices") or [])
            assert any("-mig-" in name for name in devices), devices
            pid = driver.proc.pid
            api.upgrade("1.35", gates=PARTITIONABLE)
            api.delete("resourceslices", api.list("resourceslices")[0]["metadata"]["name"])
            h.wait_until(lambda: shape(api) == "1.35", timeout=30, what="the pool in the shape of 1.35")
            after = sorted(d["name"] for s in api.list("resourceslices") for d in s["spec"].get("devices") or [])
            assert after == devices  # the same devices, in the new shape
            assert driver.proc.poll() is None and driver.proc.pid == pid  # no restart
            refused = [r for r in api.rejections if r[2] == 422]
            assert refused and all("only one of `sharedCounters` or `devices`" in r[3] for r in refused)
        finally:
            assert driver.stop() == 0
    log = driver.log.read_text()
    assert "the API server is Kubernetes 1.35 now (was 1.34)" in log
    assert "refused ResourceSlice" not in log  # explained by the upgrade: no refusal reported
