# SPDX-License-Identifier: Apache-2.0
"""Device health as DeviceTaints: the real driver process, a fixture sysfs tree and the strict fake API server.

A fault made in the tree (an RDMA port DOWN, a link without carrier, a bumped
``aer_dev_fatal``, a config space of all ones, a removed function) shows up as
a taint of the device in the ResourceSlice at the next scan (the driver
rescans every 0.5 s here), the health stream and the metrics say the same at
that moment, and recovery removes the taint. Where the configuration says the
cluster has no DRADeviceTaints, nothing carries a ``taints`` field.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

KEY = "dra.aligned.dev/unhealthy"
SCAN = 0.5  # the harness's --rescan-interval
# one scan plus the uevent settle and a loaded CI machine's slack
WITHIN_A_SCAN = 8.0


def node_with_aer_baseline(root: Path) -> h.NodeTree:
    tree = h.NodeTree.build(root)
    # an AER-capable GPU with no fatal error yet: the driver's baseline
    (tree.sys / "bus" / "pci" / "devices" / h.GPU_BDF / "aer_dev_fatal").write_text(aer(0))
    return tree


@pytest.fixture
def build_node():
    return node_with_aer_baseline


def aer(total: int) -> str:
    return f"Undefined 0\nDLP 0\nSDES 0\nTLP {total}\nFCP 0\nTOTAL_ERR_FATAL {total}\n"


def published(api: FakeApiServer) -> tuple[dict[str, dict[str, Any]], set[int]]:
    """Devices of the node's pool by name, and the pool generations present."""
    items = api.list("resourceslices")
    devices = {d["name"]: d for item in items for d in item["spec"].get("devices") or []}
    return devices, {item["spec"]["pool"]["generation"] for item in items}


def taints_of(api: FakeApiServer, device: str) -> list[dict[str, Any]] | None:
    found = published(api)[0].get(device)
    return None if found is None else found.get("taints") or []


def wait_taint(api: FakeApiServer, device: str, value: str | None) -> list[dict[str, Any]]:
    """Wait until the device's taints are exactly one of ``value`` (None: none) and return them."""

    def done() -> Any:
        taints = taints_of(api, device)
        if taints is None:
            return None
        if value is None:
            return [] if not taints else None
        return taints if [t.get("value") for t in taints] == [value] else None

    result = h.wait_until(lambda: done() is not None, WITHIN_A_SCAN, f"{device} tainted {value}")
    assert result
    return done()


def set_port_state(node: h.NodeTree, state: str) -> None:
    (node.sys / "class" / "infiniband" / "mlx5_0" / "ports" / "1" / "state").write_text(state + "\n")


def remove_function(node: h.NodeTree, bdf: str, keep: Path) -> tuple[Path, Path]:
    """The kernel removes a function: its directory and its bus link go (moved aside to ``keep``)."""
    link = node.sys / "bus" / "pci" / "devices" / bdf
    real = link.resolve()
    shutil.move(str(real), str(keep))
    link.unlink()
    return link, real


def health_stream(driver: h.DriverProcess) -> Any:
    from aligned_dra_driver.kubelet.proto import health_v1alpha1_pb2, health_v1alpha1_pb2_grpc

    stub = health_v1alpha1_pb2_grpc.DRAResourceHealthStub(driver.channel(driver.dra_socket))
    return stub.NodeWatchResources(health_v1alpha1_pb2.NodeWatchResourcesRequest(), timeout=60)


def stream_until(stream: Any, device: str, healthy: bool, cause: str = "") -> Any:
    """The first update (earlier ones are skipped) in which the device has this health (and cause)."""
    from aligned_dra_driver.kubelet.proto import health_v1alpha1_pb2

    wanted = health_v1alpha1_pb2.HEALTHY if healthy else health_v1alpha1_pb2.UNHEALTHY
    for update in stream:
        entry = {d.device.device_name: d for d in update.devices}.get(device)
        if entry is not None and entry.health == wanted and entry.message.startswith(cause):
            return entry
    raise AssertionError("the health stream ended")


def unhealthy_metric(base: str, device: str) -> dict[str, str] | None:
    """Labels of the aligned_dra_device_unhealthy sample of ``device`` (None when there is none)."""
    import re

    text = h.http_get(base + "/metrics")[1]
    for labels, value in re.findall(r"^aligned_dra_device_unhealthy\{([^}]*)\} ([0-9.e+-]+)$", text, re.M):
        pairs = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        if pairs.get("device") == device and float(value) == 1:
            return pairs
    return None


def test_faults_taint_devices_and_recovery_removes_the_taints(node):
    port = h.free_port()
    base = f"http://127.0.0.1:{port}"
    extra = ["--device-taints=on", "--health-service", "--aer-hold=2", "--metrics-address", f"127.0.0.1:{port}"]
    with FakeApiServer("1.36") as api:
        api.create(h.node_object())
        with h.DriverProcess(node, api, extra=extra) as driver:
            driver.register()
            h.wait_until(lambda: published(api)[0], 10, "the first publication")
            assert taints_of(api, h.GPU) == [] and taints_of(api, h.NIC) == []
            stream = health_stream(driver)

            # an RDMA port goes DOWN: NoSchedule, and the stream and the metrics say the same
            set_port_state(node, "1: DOWN")
            (taint,) = wait_taint(api, h.NIC, "rdma-port-down")
            assert taint["key"] == KEY and taint["effect"] == "NoSchedule"
            assert taint["timeAdded"].endswith("Z")
            entry = stream_until(stream, h.NIC, healthy=False)
            assert entry.message == "rdma-port-down: mlx5_0 port 1: DOWN"
            assert unhealthy_metric(base, h.NIC) == {"device": h.NIC, "cause": "rdma-port-down", "effect": "NoSchedule"}
            metrics = h.http_get(base + "/metrics")[1]
            assert h.metric_value(metrics, "aligned_dra_unhealthy_devices") == 1
            assert h.metric_value(metrics, "aligned_dra_published_device_taints", 'cause="rdma-port-down".*') == 1
            # the stored taint is stable: no new generation scan after scan
            generations = published(api)[1]
            time.sleep(4 * SCAN)
            assert published(api)[1] == generations
            assert taints_of(api, h.NIC) == [taint]

            # the port is ACTIVE again: the taint goes
            set_port_state(node, "4: ACTIVE")
            wait_taint(api, h.NIC, None)
            stream_until(stream, h.NIC, healthy=True)
            assert unhealthy_metric(base, h.NIC) is None

            # the NIC's interface is up and loses its carrier: link-down
            netdev = node.sys / "class" / "net" / "aldnic0"
            (netdev / "carrier").write_text("0\n")
            (netdev / "operstate").write_text("down\n")
            (taint,) = wait_taint(api, h.NIC, "link-down")
            assert taint["effect"] == "NoSchedule"
            (netdev / "carrier").write_text("1\n")
            (netdev / "operstate").write_text("up\n")
            wait_taint(api, h.NIC, None)

            # the GPU reports a fatal AER error: NoSchedule for the hold, then clean again
            gpu_dir = node.sys / "bus" / "pci" / "devices" / h.GPU_BDF
            (gpu_dir / "aer_dev_fatal").write_text(aer(1))
            (taint,) = wait_taint(api, h.GPU, "aer-fatal")
            assert taint["effect"] == "NoSchedule"
            assert unhealthy_metric(base, h.GPU) == {"device": h.GPU, "cause": "aer-fatal", "effect": "NoSchedule"}
            wait_taint(api, h.GPU, None)  # --aer-hold=2 passed without a new error

            # the GPU falls off the bus: its config space reads all ones
            config = (gpu_dir / "config").read_bytes()
            (gpu_dir / "config").write_bytes(b"\xff" * len(config))
            (taint,) = wait_taint(api, h.GPU, "not-responding")
            assert taint["effect"] == "NoExecute"
            (gpu_dir / "config").write_bytes(config)
            wait_taint(api, h.GPU, None)

            # the GPU's function is removed: it stays published with NoExecute until it is back
            link, real = remove_function(node, h.GPU_BDF, node.root / "gone-gpu")
            (taint,) = wait_taint(api, h.GPU, "gone")
            assert taint["effect"] == "NoExecute"
            entry = stream_until(stream, h.GPU, healthy=False, cause="gone: ")
            assert entry.message == "gone: no longer present on the node"
            assert unhealthy_metric(base, h.GPU) == {"device": h.GPU, "cause": "gone", "effect": "NoExecute"}
            shutil.move(str(node.root / "gone-gpu"), str(real))
            link.symlink_to(real)
            wait_taint(api, h.GPU, None)
            stream_until(stream, h.GPU, healthy=True)
            assert unhealthy_metric(base, h.GPU) is None
            stream.cancel()
            assert not [r for r in api.rejections if "resourceslices" in r[1]]


def no_taints_anywhere(api: FakeApiServer) -> bool:
    return not any(d.get("taints") for d in published(api)[0].values())


@pytest.mark.parametrize(
    ("minor", "flag"),
    [
        ("1.35", []),  # the driver role leaves taints off where the gate is off
        ("1.35", ["--device-taints=on"]),  # told wrong: the API server drops the field, the driver notices
    ],
)
def test_no_taints_without_the_gate(node, minor, flag):
    with FakeApiServer(minor) as api:
        api.create(h.node_object())
        with h.DriverProcess(node, api, extra=flag) as driver:
            h.wait_until(lambda: published(api)[0], 10, "the first publication")
            set_port_state(node, "1: DOWN")
            time.sleep(4 * SCAN)
            assert no_taints_anywhere(api)
            assert h.NIC in published(api)[0]
            generations = published(api)[1]
            time.sleep(4 * SCAN)
            assert published(api)[1] == generations, "republished scan after scan"
            remove_function(node, h.GPU_BDF, node.root / "gone-gpu")
            h.wait_until(lambda: h.GPU not in published(api)[0], WITHIN_A_SCAN, "the gone GPU leaves the slice")
            assert no_taints_anywhere(api)
            log = driver.log.read_text()
            assert ("dropped the device taints" in log) == bool(flag)
