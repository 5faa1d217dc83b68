# SPDX-License-Identifier: Apache-2.0
"""GPU use per claim (``--usage=on``): the NVML reader, the GPU watcher and the series made at scrape time.

NVML is ``tests/support/fakes/nvml.py``; the API is a small double of the driver's Kube (claims by name).
"""

from __future__ import annotations

import copy
import logging
import uuid

import pytest
from aligned_dra_driver.claims.pods import ClaimPods
from aligned_dra_driver.kube import ApiError
from aligned_dra_driver.usage.metrics import Metrics
from aligned_dra_driver.usage.reclaim import Reclaimer
from aligned_dra_driver.usage.series import UsageCollector
from aligned_dra_driver.usage.watcher import GpuWatcher, NvmlReader, nvidia_gpus
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.aligned.dra.tests.support.fakes.nvml import GIB, GpuNode, pod_cgroup, share_entry
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

GPU_A, DEV_A = "0000:18:00.0", "gpu-0000-18-00-0"
GPU_B, DEV_B = "0000:3b:00.0", "gpu-0000-3b-00-0"


class Claims:
    """Test double of the driver's Kube for the watcher: claims by (namespace, name), failures on demand."""

    def __init__(self) -> None:
        self.claims: dict[tuple[str, str], dict] = {}
        self.reads: list[str] = []
        self.fail: ApiError | None = None

    def get_claim(self, namespace: str, name: str, deadline: float | None = None) -> dict:
        self.reads.append(name)
        if self.fail is not None:
            raise self.fail
        if (namespace, name) not in self.claims:
            raise ApiError(404, f'404 resourceclaims "{name}" not found')
        return copy.deepcopy(self.claims[(namespace, name)])

    def evict_pod(self, namespace: str, name: str, uid: str | None = None, deadline: float | None = None) -> str:
        self.reads.append(f"evict {name}")
        return "gone"

    def get_pod(self, namespace: str, name: str, deadline: float | None = None) -> dict:
        self.reads.append(f"pod {name}")
        raise ApiError(404, "gone")


class Node(GpuNode):
    """Two GPUs, the driver's checkpoint entries and the pods Prepare recorded."""

    def __init__(self, root) -> None:
        super().__init__(root / "proc")
        self.kube = Claims()
        self.metrics = Metrics()
        self.checkpoint: dict[str, dict] = {}
        self.pods = ClaimPods()
        self.add_gpu(GPU_A, 80 * GIB, mps_server_gib=0.5, host_gib=1)
        self.add_gpu(GPU_B, 80 * GIB)
        self.loader = lambda: self.nvml
        self.reader = NvmlReader(self.load, str(self.procfs), self.metrics, ("usage",))

    def load(self):
        """NVML as the test's current loader gives it (a test swaps the loader to fail or go missing)."""
        return self.loader()

    def claim(self, name: str, bus: str, request_gib: float | None, use_gib: float, known: bool = True) -> str:
        """A fractional claim with one pod using ``use_gib``; ``known``: its pod recorded by Prepare."""
        uid, pod_uid = str(uuid.uuid4()), str(uuid.uuid4())
        self.checkpoint[uid] = share_entry(uid, name, bus, h.NODE, request_gib, limit_gib=40)
        self.kube.claims[("default", name)] = {
            "metadata": {"name": name, "namespace": "default", "uid": uid},
            "status": {"reservedFor": [{"resource": "pods", "name": f"{name}-pod", "uid": pod_uid}]},
        }
        if known:
            self.pods.set(uid, [(f"{name}-pod", pod_uid)])
        self.pids = getattr(self, "pids", {})
        self.pids[name] = self.process(bus, use_gib, pod_cgroup(pod_uid))
        return uid

    def whole(self, name: str, bus: str) -> str:
        uid = str(uuid.uuid4())
        entry = share_entry(uid, name, bus, h.NODE, None, 0)
        entry["devices"][0].update(share_id=None, mps=False)
        self.checkpoint[uid] = entry
        self.pods.set(uid, [])
        return uid

    def watcher(self, reclaimer=None) -> GpuWatcher:
        watcher = GpuWatcher(
            self.reader,
            lambda: self.checkpoint,
            lambda: {GPU_A: DEV_A, GPU_B: DEV_B},
            self.pods,
            self.kube,
            self.metrics,
            usage_interval=15,
            reclaimer=reclaimer,
            step_budget=2.0,
        )
        self.metrics.registry.register(UsageCollector(watcher, lambda: self.checkpoint, self.pods))
        return watcher

    def series(self, name: str) -> dict[tuple, float]:
        """``{sorted label items: value}`` of one family on /metrics."""
        text = self.metrics.render().decode()
        return {
            tuple(sorted(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == name
        }


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def _labels(**labels) -> tuple:
    return tuple(sorted(labels.items()))


def test_each_claim_and_gpu_has_its_series_with_the_issue_s_names_and_labels(node):
    train = node.claim("train", GPU_A, 10, 12)
    node.whole("infer", GPU_B)
    watcher = node.watcher()
    watcher.tick()
    uuid_a, uuid_b = node.nvml.uuid_of(GPU_A), node.nvml.uuid_of(GPU_B)
    assert node.series("aligned_dra_usage_available") == {(): 1.0}
    claim = _labels(namespace="default", claim="train", pod="train-pod", device=DEV_A, gpu_uuid=uuid_a)
    assert node.series("aligned_dra_claim_gpu_memory_used_bytes")[claim] == 12 * GIB
    assert node.series("aligned_dra_claim_gpu_memory_request_bytes")[claim] == 10 * GIB
    assert node.series("aligned_dra_claim_gpu_memory_limit_bytes")[claim] == 40 * GIB
    # a whole GPU without a known pod: one series with pod="", request and limit the GPU's memory
    whole = _labels(namespace="default", claim="infer", pod="", device=DEV_B, gpu_uuid=uuid_b)
    assert node.series("aligned_dra_claim_gpu_memory_request_bytes")[whole] == 80 * GIB
    assert node.series("aligned_dra_claim_gpu_memory_used_bytes")[whole] == 0
    gpu_a = _labels(device=DEV_A, gpu_uuid=uuid_a)
    assert node.series("aligned_dra_gpu_memory_total_bytes")[gpu_a] == 80 * GIB
    # 0.5 GiB NVML's reserve + the MPS server 0.5 + the host 1 + the claim 12
    assert node.series("aligned_dra_gpu_memory_used_bytes")[gpu_a] == 14 * GIB
    assert node.series("aligned_dra_gpu_memory_unattributed_bytes")[gpu_a] == 1.5 * GIB
    info = node.series("aligned_dra_claim_device_info")
    assert info == {
        _labels(
            namespace="default",
            claim="train",
            pod="train-pod",
            device=DEV_A,
            pool=h.NODE,
            gpu_uuid=uuid_a,
            pci_bus_id=GPU_A,
        ): 1.0,
        _labels(
            namespace="default", claim="infer", pod="", device=DEV_B, pool=h.NODE, gpu_uuid=uuid_b, pci_bus_id=GPU_B
        ): 1.0,
    }
    assert train in node.checkpoint


def test_growing_and_shrinking_use_is_seen_at_the_next_poll_only(node):
    node.claim("train", GPU_A, 10, 12)
    watcher = node.watcher()
    watcher.tick()
    node.nvml.run(GPU_A, node.pids["train"], 30 * GIB, True)
    key = _labels(namespace="default", claim="train", pod="train-pod", device=DEV_A, gpu_uuid=node.nvml.uuid_of(GPU_A))
    assert node.series("aligned_dra_claim_gpu_memory_used_bytes")[key] == 12 * GIB  # a scrape reads no NVML
    watcher.poll_usage()
    assert node.series("aligned_dra_claim_gpu_memory_used_bytes")[key] == 30 * GIB
    node.nvml.run(GPU_A, node.pids["train"], 2 * GIB, True)
    watcher.poll_usage()
    assert node.series("aligned_dra_claim_gpu_memory_used_bytes")[key] == 2 * GIB


def test_an_unprepared_claim_s_series_are_gone_at_the_next_scrape(node):
    gone = node.claim("train", GPU_A, 10, 12)
    node.claim("other", GPU_A, 10, 5)
    watcher = node.watcher()
    watcher.tick()
    del node.checkpoint[gone]  # Unprepare: no poll in between
    node.pods.forget(gone)
    for name in ("aligned_dra_claim_gpu_memory_used_bytes", "aligned_dra_claim_device_info"):
        assert {dict(k)["claim"] for k in node.series(name)} == {"other"}
    # its process, still running, counts as no claim's now
    assert (
        node.series("aligned_dra_gpu_memory_unattributed_bytes")[
            _labels(device=DEV_A, gpu_uuid=node.nvml.uuid_of(GPU_A))
        ]
        == (1.5 + 12) * GIB
    )


def test_sm_utilization_only_where_nvml_sampled_the_process_never_a_zero(node):
    node.claim("busy", GPU_A, 10, 4)
    node.claim("quiet", GPU_A, 10, 4)
    watcher = node.watcher()
    node.nvml.sample(GPU_A, node.pids["busy"], 40)
    node.nvml.sample(GPU_A, node.pids["busy"], 60)
    watcher.tick()
    ratio = node.series("aligned_dra_claim_gpu_sm_utilization_ratio")
    assert {dict(k)["claim"]: v for k, v in ratio.items()} == {"busy": 0.5}  # the mean of its samples
    watcher.poll_usage()  # no sample since: NVML answers NOT_FOUND
    assert node.series("aligned_dra_claim_gpu_sm_utilization_ratio") == {}
    node.nvml.sample(GPU_A, node.pids["quiet"], 0)  # sampled idle: a true 0
    watcher.poll_usage()
    ratio = node.series("aligned_dra_claim_gpu_sm_utilization_ratio")
    assert {dict(k)["claim"]: v for k, v in ratio.items()} == {"quiet": 0.0}


def test_a_gpu_without_per_process_samples_is_not_asked_again(node, caplog):
    node.nvml.add_gpu(GPU_A, 80 * GIB, utilization=False)  # the GPU replaced: a model without the samples
    node.claim("train", GPU_A, 10, 4)
    watcher = node.watcher()
    with caplog.at_level(logging.INFO, "aligned_dra_driver.usage.watcher"):
        watcher.tick()
        watcher.poll_usage()
    assert node.nvml.calls.count("nvmlDeviceGetProcessUtilization") == 3  # GPU A once, GPU B twice
    assert node.series("aligned_dra_claim_gpu_sm_utilization_ratio") == {}
    assert sum("gives no per-process utilization" in r.getMessage() for r in caplog.records) == 1


def test_nvml_missing_leaves_only_the_flag_logs_once_and_counts(node, caplog):
    node.claim("train", GPU_A, 10, 12)

    def missing():
        raise ImportError("No module named 'pynvml'")

    node.loader = missing
    watcher = node.watcher()
    with caplog.at_level(logging.DEBUG, "aligned_dra_driver.usage.watcher"):
        for _retry in range(3):
            node.reader.backoff.until = 0.0  # each retry is due
            watcher.poll_usage()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "NVML is not usable" in warnings[0].getMessage()
    assert node.series("aligned_dra_usage_available") == {(): 0.0}
    assert node.series("aligned_dra_claim_gpu_memory_used_bytes") == {}
    assert node.series("aligned_dra_claim_device_info") == {}
    assert h.metric_value(node.metrics.render().decode(), "aligned_dra_errors_total", 'operation="usage"') == 3
    node.loader = lambda: node.nvml
    node.reader.backoff.until = 0.0
    watcher.poll_usage()
    assert node.series("aligned_dra_usage_available") == {(): 1.0}


def test_nvml_failing_on_every_gpu_reads_as_unavailable(node):
    node.claim("train", GPU_A, 10, 12)
    watcher = node.watcher()
    watcher.tick()
    node.nvml.failing = True
    watcher.poll_usage()
    assert node.series("aligned_dra_usage_available") == {(): 0.0}
    assert node.series("aligned_dra_gpu_memory_used_bytes") == {}
    assert h.metric_value(node.metrics.render().decode(), "aligned_dra_errors_total", 'operation="usage"') == 2


def test_a_gpu_gone_from_nvml_loses_its_series_the_others_stay(node):
    node.claim("train", GPU_A, 10, 12)
    watcher = node.watcher()
    watcher.tick()
    node.nvml.remove_gpu(GPU_B)
    watcher.poll_usage()
    assert {dict(k)["device"] for k in node.series("aligned_dra_gpu_memory_total_bytes")} == {DEV_A}
    assert node.series("aligned_dra_usage_available") == {(): 1.0}
    assert watcher.backoff[GPU_B].failures == 1


def test_a_gpu_nvml_calls_lost_is_signalled_to_the_health_table_until_it_answers(node, monkeypatch):
    from aligned_dra_driver.devices.health import HealthMonitor

    watcher = node.watcher()
    watcher.health = HealthMonitor()
    signals = []
    monkeypatch.setattr(watcher.health, "gpu_signal", lambda pci, cause="", message="": signals.append((pci, cause)))
    answer = node.nvml.nvmlDeviceGetMemoryInfo

    def lost(handle):
        if handle.bus == GPU_B:
            raise node.nvml.NVMLError(node.nvml.NVML_ERROR_GPU_IS_LOST)
        return answer(handle)

    monkeypatch.setattr(node.nvml, "nvmlDeviceGetMemoryInfo", lost)
    watcher.poll_usage()
    assert signals == [(GPU_B, "gpu-lost")] and watcher.lost == {GPU_B}
    monkeypatch.setattr(node.nvml, "nvmlDeviceGetMemoryInfo", answer)
    watcher.backoff.clear()
    watcher.poll_usage()
    assert signals[-1] == (GPU_B, "") and watcher.lost == set()


def test_a_critical_xid_of_the_gpu_signals_it_an_application_s_does_not(node, monkeypatch):
    from types import SimpleNamespace

    from aligned_dra_driver.devices.health import HealthMonitor

    watcher = node.watcher()
    watcher.health = HealthMonitor()
    signals, registered = [], []
    queue = [(GPU_B, 79), (GPU_A, 13)]  # 79: fell off the bus; 13: an application's graphics exception

    def wait(event_set, timeout):
        assert (event_set, timeout) == ("set", 0)  # never waits
        if not queue:
            raise node.nvml.NVMLError(10)  # NVML_ERROR_TIMEOUT: none waiting
        bus, xid = queue.pop(0)
        return SimpleNamespace(device=bus, eventType=8, eventData=xid)

    for name, fn in {
        "nvmlEventSetCreate": lambda: "set",
        "nvmlDeviceRegisterEvents": lambda handle, types, event_set: registered.append((handle.bus, types)),
        "nvmlEventSetWait_v2": wait,
        "nvmlDeviceGetPciInfo": lambda device: SimpleNamespace(busId=b"0000" + device.encode()),
    }.items():
        monkeypatch.setattr(node.nvml, name, fn, raising=False)
    monkeypatch.setattr(
        watcher.health, "gpu_signal", lambda pci, cause="", message="": signals.append((pci, cause, message))
    )
    watcher.poll_usage()
    assert signals == [(GPU_B, "xid", "XID 79")]
    assert sorted(registered) == [(GPU_A, 8), (GPU_B, 8)]
    watcher.poll_usage()  # registered once
    assert len(registered) == 2


def test_an_unknown_pod_s_process_reads_its_gpu_s_claims_once(node):
    uid = node.claim("late", GPU_A, 10, 6, known=False)  # a pod that joined after Prepare, or a restart
    node.process(GPU_A, 3, pod_cgroup(str(uuid.uuid4())))  # a pod of no claim (another driver's)
    watcher = node.watcher()
    watcher.tick()
    assert node.kube.reads == ["late"]
    assert node.pods.get(uid) == [
        ("late-pod", dict(node.kube.claims[("default", "late")]["status"]["reservedFor"][0])["uid"])
    ]
    key = {dict(k)["claim"]: v for k, v in node.series("aligned_dra_claim_gpu_memory_used_bytes").items()}
    assert key == {"late": 6 * GIB}
    watcher.poll_usage()
    watcher.poll_usage()
    assert node.kube.reads == ["late"]  # the foreign pod is not asked about again while it runs


def test_claim_reads_that_fail_back_off(node):
    node.claim("late", GPU_A, 10, 6, known=False)
    node.kube.fail = ApiError(500, "500 internal error")
    watcher = node.watcher()
    watcher.tick()
    watcher.poll_usage()  # backing off: no second read
    assert node.kube.reads == ["late"]
    node.kube.fail = None
    watcher.read_backoff[GPU_A].until = 0.0
    watcher.poll_usage()
    assert node.kube.reads == ["late", "late"] and GPU_A not in watcher.read_backoff


def _reclaimer(node: Node, shared: bool) -> Reclaimer:
    return Reclaimer(
        lambda: node.checkpoint,
        node.kube,
        node.metrics,
        driver_name=h.DRIVER,
        node_name=h.NODE,
        procfs_root=str(node.procfs),
        interval=2.0,
        step_budget=2.0,
        nvml_loader=lambda: node.nvml,
        reader=node.reader if shared else None,
        claim_pods=node.pods,
    )


def test_one_tick_reads_each_gpu_once_for_reclaim_and_usage(node):
    node.claim("train", GPU_A, 10, 12)
    watcher = node.watcher(_reclaimer(node, shared=True))
    watcher.tick()
    assert node.nvml.calls.count("nvmlDeviceGetMemoryInfo") == 2  # GPU A: reclaim and usage; GPU B: usage
    assert node.nvml.calls.count("nvmlInit") == 1


def test_the_bytes_above_request_are_right_before_the_first_pressure(node):
    node.claim("burst", GPU_A, 10, 30)  # 20 GiB above its request, the GPU far from short
    _reclaimer(node, shared=True).poll()
    assert h.metric_value(node.metrics.render().decode(), "aligned_dra_gpu_bytes_above_request", f'gpu="{DEV_A}"') == (
        20 * GIB
    )
    assert node.kube.reads == []  # from what Prepare recorded: no API request


def test_an_eviction_answered_gone_holds_the_gpu_like_a_sent_one(node):
    node.claim("greedy", GPU_A, 8, 76)  # the GPU is short: 2 GiB free of 80
    reclaimer = _reclaimer(node, shared=False)
    assert reclaimer.poll() == []
    assert node.kube.reads == ["greedy", "pod greedy-pod", "evict greedy-pod"]
    assert reclaimer.poll() == [] and reclaimer.poll() == []
    assert node.kube.reads == ["greedy", "pod greedy-pod", "evict greedy-pod"]  # held: no GET, no POST again
    node.nvml.end(GPU_A, node.pids["greedy"])  # its processes ended: the hold ends with them
    node.process(GPU_A, 76, "0::/system.slice/batch.service", mps_client=False)
    reclaimer.poll()
    assert GPU_A not in reclaimer.holds


def test_the_gpus_of_the_scan_are_the_nvidia_ones():
    class Inventory:
        by_name = {
            DEV_A: {"vendor_id": "0x10de", "pci_address": GPU_A},
            "acc-0000-c1-00-0": {"vendor_id": "0x1002", "pci_address": "0000:c1:00.0"},
            "gpu-0000-c2-00-0": {"vendor_id": "0x1002", "pci_address": "0000:c2:00.0"},
            "nic-0000-1a-00-0": {"vendor_id": "0x15b3", "pci_address": "0000:1a:00.0"},
        }

    assert nvidia_gpus(Inventory()) == {GPU_A: DEV_A}


def test_prepare_records_the_claim_s_pods_and_unprepare_forgets_them():
    from aligned_dra_driver.devices.inventory import Options
    from aligned_dra_driver.kubelet import driver as drv

    from ansible_collections.aligned.dra.tests.support.harnesses import driver_doubles as d

    root = h.memory_tmp()
    try:
        tree = h.NodeTree.build(root)
        claims = d.ClaimsInMemory()
        driver = drv.Driver(Options(**tree.options()), claims, status_queue=d.StatusRecorder(claims))
        driver.restore()
        driver.rescan()
        obj = h.claim_object("c", [{"request": "gpu", "device": h.GPU}])
        obj["status"]["reservedFor"] = [
            {"resource": "pods", "name": "p", "uid": "0b6b7c1e-0000-4000-8000-000000000001"},
            {"apiGroup": "batch", "resource": "jobs", "name": "j", "uid": "0b6b7c1e-0000-4000-8000-000000000002"},
        ]
        ref = claims.add(obj)
        assert "error" not in driver.prepare([ref])[ref[1]]
        assert driver.claim_pods.get(ref[1]) == [("p", "0b6b7c1e-0000-4000-8000-000000000001")]
        assert driver.unprepare([ref]) == {ref[1]: ""}
        assert not driver.claim_pods.known(ref[1])
    finally:
        import shutil

        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize(
    ("argv", "watched", "reclaim_thread"),
    [
        ([], True, False),  # usage on by default
        (["--reclaim=evict"], True, False),  # one thread and one reader: the watcher runs the reclaim steps
        (["--usage=off", "--reclaim=evict"], False, True),
        (["--usage=off"], False, False),
        (["--kinds=nic,vf", "--reclaim=evict"], False, True),  # publishes no GPU: measures nothing
    ],
)
def test_the_command_line_gives_one_nvml_reader(argv, watched, reclaim_thread):
    from types import SimpleNamespace

    from aligned_dra_driver import cli

    args = cli.parser().parse_args(["--node-name", h.NODE, *argv])
    opts = SimpleNamespace(procfs_root="/proc", device_options=cli.device_options(args))
    driver = SimpleNamespace(checkpoint=SimpleNamespace(claims={}), claim_pods=ClaimPods(), inventory=None)
    metrics = Metrics()
    reclaimer, watcher = cli.gpu_watchers(args, opts, driver, None, metrics)
    assert (watcher is not None) == watched
    assert (reclaimer is not None and reclaimer.owns_reader) == reclaim_thread
    if watcher is not None and reclaimer is not None:
        assert reclaimer.reader is watcher.reader and watcher.reclaimer is reclaimer
        assert watcher.reader.operations == ("usage", "reclaim")
    if reclaimer is not None:
        assert reclaimer.pods is driver.claim_pods
    families = {family.name for family in text_string_to_metric_families(metrics.render().decode())}
    assert ("aligned_dra_usage_available" in families) == watched


@pytest.mark.parametrize("interval", ["0", "0.05", "3601", "nan"])
def test_a_usage_interval_out_of_range_is_a_usage_error(interval, capsys):
    from aligned_dra_driver import cli

    args = cli.parser().parse_args(["--node-name", h.NODE, "--sysfs-root", "/", f"--usage-interval={interval}"])
    with pytest.raises(SystemExit) as exited:
        cli.build(args)
    assert exited.value.code == 2
    assert "--usage-interval must lie in 0.1..3600 seconds" in capsys.readouterr().err


def test_claim_reads_for_unknown_pods_are_bounded_per_poll(node, monkeypatch):
    from aligned_dra_driver.usage import watcher as usage

    monkeypatch.setattr(usage, "MAX_CLAIM_READS", 3)
    for index in range(2):
        node.claim(f"a{index}", GPU_A, 1, 1, known=False)
    for index in range(4):  # more claims than the bound: read alone, in a poll of its own
        node.claim(f"b{index}", GPU_B, 1, 1, known=False)
    watcher = node.watcher()
    watcher.poll_usage()
    assert sorted(node.kube.reads) == ["a0", "a1"]  # GPU B's 4 reads wait for the next poll
    watcher.poll_usage()
    assert sorted(node.kube.reads[2:]) == ["b0", "b1", "b2", "b3"]
    watcher.poll_usage()
    assert len(node.kube.reads) == 6


def test_each_step_keeps_its_own_interval_in_the_shared_thread(node):
    node.claim("train", GPU_A, 10, 12)
    reclaimer = _reclaimer(node, shared=True)
    reclaimer.interval = 3600.0  # reclaim far less often than usage
    watcher = node.watcher(reclaimer)
    watcher.usage_interval = 0.0
    for _poll in range(3):
        watcher.tick()
    assert reclaimer.polls == 1 and watcher.usage_polls == 3


def test_without_nvml_the_watcher_sleeps_until_the_next_poll_instead_of_spinning(node):
    """A node without NVML: the thread wakes once when the backoff ends, then not before the next poll is
    due (an ended backoff waited for again would be a zero wait: a spinning thread on every such node)."""

    def missing():
        raise ImportError("No module named 'pynvml'")

    node.loader = missing
    watcher = node.watcher()
    watcher.tick()  # the first usage poll: NVML fails, backoff starts
    assert node.reader.nvml is None and node.reader.backoff.failures == 1
    assert 0.0 < watcher.next_wait() <= 15.0  # the end of the backoff, or the next poll
    node.reader.backoff.until = 0.0  # the backoff has ended
    assert 14.0 < watcher.next_wait() <= 15.0
    watcher.tick()  # a wake before the poll is due tries nothing
    assert watcher.usage_polls == 1 and 14.0 < watcher.next_wait() <= 15.0
