# SPDX-License-Identifier: Apache-2.0
"""Reclaim (``--reclaim=evict``): which claim's pods go when a GPU runs short, and that nothing it meets (NVML
missing, a GPU gone, an API that refuses or hangs) stops it or holds Prepare and Unprepare.

NVML is ``tests/support/fakes/nvml.py``; the API is a double of the driver's Kube (claims, pods, evictions, events).
"""

from __future__ import annotations

import copy
import logging
import shutil
import threading
import time
import uuid

import pytest
from aligned_dra_driver.devices.inventory import Options
from aligned_dra_driver.kube import ApiError
from aligned_dra_driver.kubelet import driver as drv
from aligned_dra_driver.usage import reclaim
from aligned_dra_driver.usage.metrics import Metrics
from aligned_dra_driver.usage.reclaim import Reclaimer, pod_uid_of_cgroup

from ansible_collections.aligned.dra.tests.support.fakes.nvml import GIB, GpuNode, pod_cgroup, share_entry
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses import driver_doubles as d

GPU_A, DEV_A = "0000:18:00.0", "gpu-0000-18-00-0"
GPU_B, DEV_B = "0000:3b:00.0", "gpu-0000-3b-00-0"


class PodsAndClaims:
    """Test double of the driver's Kube for reclaim: claims, pods, evictions, events; refusals and hangs."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], dict] = {}
        self.pods: dict[tuple[str, str], dict] = {}
        self.refused: set[str] = set()  # pod names whose eviction a PodDisruptionBudget refuses
        self.evicted: list[str] = []
        self.events: list[dict] = []
        self.calls = 0
        self.fail: ApiError | None = None  # every call raises it
        self.hang = False  # every call waits for release, or its deadline
        self.hanging = threading.Event()
        self.release = threading.Event()

    def _call(self, deadline: float | None) -> None:
        self.calls += 1
        if self.hang:
            self.hanging.set()
            self.release.wait(max(0.0, (deadline or time.monotonic() + 10) - time.monotonic()))
            raise ApiError(0, "API server unreachable: ReadTimeoutError: timed out")
        if self.fail is not None:
            raise self.fail

    def get_claim(self, namespace: str, name: str, deadline: float | None = None) -> dict:
        self._call(deadline)
        if (namespace, name) not in self.claims:
            raise ApiError(404, f'404 resourceclaims "{name}" not found')
        return copy.deepcopy(self.claims[(namespace, name)])

    def get_pod(self, namespace: str, name: str, deadline: float | None = None) -> dict:
        self._call(deadline)
        if (namespace, name) not in self.pods:
            raise ApiError(404, f'404 pods "{name}" not found')
        return copy.deepcopy(self.pods[(namespace, name)])

    def evict_pod(self, namespace: str, name: str, uid: str | None = None, deadline: float | None = None) -> str:
        self._call(deadline)
        pod = self.pods.get((namespace, name))
        if pod is None or pod["metadata"]["uid"] != uid:
            return "gone"
        if name in self.refused:
            return "refused"
        del self.pods[(namespace, name)]
        self.evicted.append(name)
        return "evicted"

    def create_event(self, namespace: str, body: dict, deadline: float | None = None) -> dict:
        self._call(deadline)
        self.events.append(body)
        return body


class Node(GpuNode):
    """A node's fractional claims: checkpoint entries, the API's claims and pods, processes on fake GPUs."""

    def __init__(self, root) -> None:
        super().__init__(root / "proc")
        self.kube = PodsAndClaims()
        self.metrics = Metrics()
        self.checkpoint: dict[str, dict] = {}
        # the MPS server (in the driver's own pod) and a host process use each GPU too, as NVML reports them
        self.add_gpu(GPU_A, 80 * GIB)
        self.add_gpu(GPU_B, 80 * GIB)

    def claim(
        self, name: str, bus: str, request_gib: float | None, use_gib: float, priority: int = 0, pods: int = 1
    ) -> tuple[str, list[str]]:
        """A fractional claim on one GPU, its pods using ``use_gib`` in all; (claim UID, pod names)."""
        uid = str(uuid.uuid4())
        self.checkpoint[uid] = share_entry(uid, name, bus, h.NODE, request_gib, limit_gib=80)
        reserved, names = [], []
        for index in range(pods):
            pod_uid, pod_name = str(uuid.uuid4()), f"{name}-pod{index}"
            self.kube.pods[("default", pod_name)] = {
                "metadata": {"name": pod_name, "uid": pod_uid},
                "spec": {"priority": priority},
            }
            reserved.append({"resource": "pods", "name": pod_name, "uid": pod_uid})
            names.append(pod_name)
            # systemd and cgroupfs drivers, both as the kubelet names a pod's cgroup
            cgroup = pod_cgroup(pod_uid) if index % 2 == 0 else pod_cgroup(pod_uid, systemd=False, container="ef" * 32)
            self.process(bus, use_gib / pods, cgroup)
        self.kube.claims[("default", name)] = {
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "status": {"reservedFor": reserved},
        }
        return uid, names

    def reclaimer(self, **extra) -> Reclaimer:
        values = dict(
            driver_name=h.DRIVER,
            node_name=h.NODE,
            procfs_root=str(self.procfs),
            margin=5.0,
            interval=0.05,
            step_budget=2.0,
        )
        values["nvml_loader"] = lambda: self.nvml
        values.update(extra)
        return Reclaimer(lambda: self.checkpoint, self.kube, self.metrics, **values)

    def metric(self, name: str, labels: str = "") -> float:
        return h.metric_value(self.metrics.render().decode(), name, labels)


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def test_a_burst_within_room_is_left_alone(node):
    node.claim("burst", GPU_A, 10, 40)  # 30 GiB above its request, 39.5 GiB still free
    assert node.reclaimer().poll() == []
    assert node.kube.evicted == [] and node.kube.calls == 0  # no pressure: not even a read of the API


def test_pressure_evicts_the_lowest_priority_then_the_largest_overage_and_only_it(node):
    node.claim("important", GPU_A, 10, 30, priority=1000)  # most above its request, but important
    node.claim("small-over", GPU_A, 10, 12)
    _uid, (victim,) = node.claim("big-over", GPU_A, 10, 25)
    node.claim("within", GPU_A, 20, 12)  # 79.5 GiB of 80 used: under the 5 % margin
    node.claim("other-gpu", GPU_B, 1, 30)  # far above its request, on a GPU with room
    watcher = node.reclaimer()
    (done,) = watcher.poll()
    assert node.kube.evicted == [victim]
    assert done["gpu"] == DEV_A and done["use"] == 25 * GIB and done["request"] == 10 * GIB
    assert node.metric("aligned_dra_gpu_bytes_above_request", f'gpu="{DEV_A}"') == (20 + 2 + 15) * GIB
    # while the victim's processes still hold their memory, nothing more goes from that GPU, and nothing is read
    calls = node.kube.calls
    assert watcher.poll() == [] and node.kube.evicted == [victim] and node.kube.calls == calls
    for pid, (used, _mps) in list(node.nvml.gpus[GPU_A].processes.items()):
        if used == 25 * GIB:
            node.nvml.end(GPU_A, pid)  # its pod stopped: 25 GiB free again, no shortage
    assert watcher.poll() == [] and node.kube.evicted == [victim]


def test_the_gauge_of_a_gpu_goes_with_its_last_share(node):
    uid, _pods = node.claim("greedy", GPU_A, 8, 76)
    watcher = node.reclaimer()
    watcher.poll()
    assert node.metric("aligned_dra_gpu_bytes_above_request", f'gpu="{DEV_A}"') == 68 * GIB
    del node.checkpoint[uid]  # unprepared
    watcher.poll()
    assert "aligned_dra_gpu_bytes_above_request{" not in node.metrics.render().decode()


def test_a_claim_within_its_request_or_of_unknown_request_is_never_touched(node):
    node.claim("within", GPU_A, 30, 30)
    node.claim("old-entry", GPU_A, None, 20)  # written before requests: nothing to weigh it against
    node.process(GPU_A, 28, "0::/system.slice/training.service", mps_client=False)  # not a pod's
    watcher = node.reclaimer()
    assert watcher.poll() == [] and watcher.poll() == []
    assert node.kube.evicted == []
    assert node.kube.calls > 0  # the pressure was seen: the claims were read


def test_a_disruption_budget_refusal_moves_on_to_the_next_candidate(node, caplog):
    _uid, (protected,) = node.claim("protected", GPU_A, 10, 40)
    _uid, (second,) = node.claim("second", GPU_A, 10, 38)
    node.kube.refused.add(protected)
    with caplog.at_level(logging.WARNING, "aligned_dra_driver.usage.reclaim"):
        (done,) = node.reclaimer().poll()
    assert node.kube.evicted == [second] and done["pods"] == [
        node.kube.claims[("default", "second")]["status"]["reservedFor"][0]["uid"]
    ]
    assert any(f"{protected} (claim protected) was refused" in r.getMessage() for r in caplog.records)


def test_each_reclaim_writes_events_on_the_pod_and_the_claim_and_counts(node):
    uid, (pod,) = node.claim("greedy", GPU_A, 8, 76)
    node.reclaimer().poll()
    involved = [(e["involvedObject"]["kind"], e["involvedObject"]["name"]) for e in node.kube.events]
    assert involved == [("Pod", pod), ("ResourceClaim", "greedy")]
    assert node.kube.events[1]["involvedObject"]["uid"] == uid
    for event in node.kube.events:
        assert event["reason"] == "Reclaimed" and event["type"] == "Warning"
        assert DEV_A in event["message"] and GPU_A in event["message"]
        assert "request of 8192 MiB" in event["message"] and "uses 77824 MiB" in event["message"]
    assert node.metric("aligned_dra_reclaims_total", f'gpu="{DEV_A}"') == 1


def test_a_claim_with_several_pods_goes_as_late_as_its_most_important_pod(node):
    node.claim("mixed", GPU_A, 10, 40, priority=0, pods=2)
    node.kube.pods[("default", "mixed-pod1")]["spec"]["priority"] = 500
    _uid, (low,) = node.claim("low", GPU_A, 10, 20, priority=100)
    node.claim("fill", GPU_A, 18, 18)
    node.reclaimer().poll()
    assert node.kube.evicted == [low]


@pytest.mark.parametrize(
    ("cgroup", "pod"),
    [
        # cgroup v2, systemd driver (containerd, CRI-O), burstable and guaranteed
        (
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0c6f1fd2_5a3c_4b8e_9d2e_1f2a3b4c5d6e"
            ".slice/cri-containerd-0123abcd.scope",
            "0c6f1fd2-5a3c-4b8e-9d2e-1f2a3b4c5d6e",
        ),
        (
            "0::/kubepods.slice/kubepods-pod0c6f1fd2_5a3c_4b8e_9d2e_1f2a3b4c5d6e.slice/crio-0123abcd.scope",
            "0c6f1fd2-5a3c-4b8e-9d2e-1f2a3b4c5d6e",
        ),
        # cgroup v1 and v2, cgroupfs driver
        (
            "12:memory:/kubepods/besteffort/pod0C6F1FD2-5A3C-4B8E-9D2E-1F2A3B4C5D6E/0123abcd",
            "0c6f1fd2-5a3c-4b8e-9d2e-1f2a3b4c5d6e",
        ),
        ("0::/kubepods/pod0c6f1fd2-5a3c-4b8e-9d2e-1f2a3b4c5d6e/0123abcd", "0c6f1fd2-5a3c-4b8e-9d2e-1f2a3b4c5d6e"),
        # read from a container with a cgroup namespace of its own: relative to the reader's cgroup
        (
            "0::/../../../kubepods-besteffort.slice/kubepods-besteffort-pod0c6f1fd2_5a3c_4b8e_9d2e_1f2a3b4c5d6e"
            ".slice/cri-containerd-0123abcd.scope",
            "0c6f1fd2-5a3c-4b8e-9d2e-1f2a3b4c5d6e",
        ),
        # not a pod's: the host, a plain container, a name that only looks like one
        ("0::/system.slice/nvidia-persistenced.service", None),
        ("0::/", None),
        ("0::/kubepods.slice/kubepods-burstable.slice/podman-pod0c6f1fd2.scope", None),
    ],
)
def test_the_pod_of_a_process_from_its_cgroup(cgroup, pod):
    assert pod_uid_of_cgroup(cgroup + "\n") == pod


def test_missing_nvml_is_retried_with_backoff(node):
    loads = []

    def missing():
        loads.append(1)
        raise ImportError("No module named 'pynvml'")

    node.claim("greedy", GPU_A, 8, 76)
    watcher = node.reclaimer(nvml_loader=missing)
    assert watcher.poll() == [] and watcher.poll() == []
    assert len(loads) == 1  # the second poll came before the retry
    assert node.metric("aligned_dra_errors_total", 'operation="reclaim"') == 1
    watcher.reader.backoff.until = 0.0  # the retry is due
    watcher.nvml_loader = lambda: node.nvml
    assert len(watcher.poll()) == 1


def test_a_gpu_that_vanished_backs_off_and_the_others_go_on(node):
    node.claim("a", GPU_A, 8, 76)
    watcher = node.reclaimer()
    node.nvml.remove_gpu(GPU_A)
    _uid, (pod_b,) = node.claim("b", GPU_B, 8, 76)
    assert [d["gpu"] for d in watcher.poll()] == [DEV_B]
    assert node.kube.evicted == [pod_b]
    assert watcher.backoff[GPU_A].failures == 1
    assert node.metric("aligned_dra_errors_total", 'operation="reclaim"') == 1


def test_an_api_that_refuses_is_retried_with_backoff(node):
    _uid, (pod,) = node.claim("greedy", GPU_A, 8, 76)
    node.kube.fail = ApiError(403, "403 forbidden")
    watcher = node.reclaimer()
    assert watcher.poll() == [] and watcher.poll() == []
    assert node.kube.calls == 1 and watcher.backoff[GPU_A].failures == 1
    node.kube.fail = None
    watcher.backoff[GPU_A].until = 0.0
    assert len(watcher.poll()) == 1 and node.kube.evicted == [pod]
    assert GPU_A not in watcher.backoff


@pytest.mark.parametrize("trouble", ["nvml-missing", "api-hangs"])
def test_prepare_and_unprepare_never_wait_for_the_watcher(node, trouble):
    root = h.memory_tmp()
    try:
        tree = h.NodeTree.build(root)
        claims = d.ClaimsInMemory()
        driver = drv.Driver(Options(**tree.options()), claims, status_queue=d.StatusRecorder(claims))
        driver.restore()
        driver.rescan()
        node.claim("greedy", GPU_A, 8, 76)
        extra = {"nvml_loader": _missing_nvml} if trouble == "nvml-missing" else {}
        node.kube.hang = trouble == "api-hangs"
        watcher = Reclaimer(
            lambda: {**node.checkpoint, **driver.checkpoint.claims},  # what cli.py gives it
            node.kube,
            node.metrics,
            extra.get("nvml_loader", lambda: node.nvml),
            driver_name=h.DRIVER,
            node_name=h.NODE,
            procfs_root=str(node.procfs),
            interval=0.01,
            step_budget=30.0,
        )
        watcher.start()
        try:
            if trouble == "api-hangs":
                assert node.kube.hanging.wait(10), "the watcher never reached the API"
            else:
                h.wait_until(lambda: watcher.polls >= 1, what="a first poll")
            ref = claims.add(h.claim_object("c", [{"request": "gpu", "device": h.GPU}]))
            started = time.monotonic()
            assert "error" not in driver.prepare([ref], budget=5.0)[ref[1]]
            assert driver.unprepare([ref], budget=5.0) == {ref[1]: ""}
            assert time.monotonic() - started < 5.0
            if trouble == "api-hangs":
                assert not node.kube.release.is_set()  # Prepare and Unprepare ran while the watcher hung
        finally:
            node.kube.release.set()
            watcher.stop(timeout=5.0)
        assert not watcher._thread.is_alive()
        assert node.metric("aligned_dra_errors_total", 'operation="reclaim"') >= 1  # logged, counted, retried
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _missing_nvml():
    raise ImportError("No module named 'pynvml'")


def test_the_watcher_keeps_polling_through_failures(node, monkeypatch):
    node.claim("greedy", GPU_A, 8, 76)
    node.kube.fail = ApiError(500, "500 internal error")
    monkeypatch.setattr(reclaim, "BACKOFF_BASE", 0.001)
    watcher = node.reclaimer()
    watcher.start()
    try:
        h.wait_until(lambda: node.kube.calls >= 3, what="three failed API reads")
        node.kube.fail = None
        h.wait_until(lambda: node.kube.evicted, what="the eviction once the API answers")
    finally:
        watcher.stop()
