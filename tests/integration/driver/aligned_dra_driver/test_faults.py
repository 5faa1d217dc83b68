# SPDX-License-Identifier: Apache-2.0
"""The real driver process under faults: the API server refusing, hanging, resetting, failing and slow
(tests/support/harnesses/fault_proxy.py between the driver and the strict fake API server), full and read-only state and
CDI directories (tiny tmpfs mounts, read-only bind mounts), and damaged checkpoints.

Every test checks what an operator relies on: the exit code, the CDI directory, the checkpoint, the
claim's status in the API server, /healthz and /metrics, and that no descriptor or thread is left behind.

Every driver runs with reclaim on (``--reclaim=evict``, polling every 0.1 s) on Kubernetes 1.36, NVML being
tests/support/fakes/nvml.py: each test prepares a fractional claim (``share``) on a GPU a host process keeps short of
memory, so that the watcher reads that claim from the API at every poll and meets each fault too; it must
never hold up Prepare, Unprepare, the publications or the stop. One test has it evict while the API holds
the eviction.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import threading
import time

import pytest
from aligned_dra_driver.cli import STOP_BOUND

from ansible_collections.aligned.dra.tests.support.fakes import nvml as fake_nvml
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.harnesses.fault_proxy import FaultProxy

KUBELET_TIMEOUT = 45.0  # the kubelet's per-call timeout: the driver must answer before it
STOP_TIMEOUT = 30.0  # TimeoutStopSec and terminationGracePeriodSeconds the driver role renders
API_TIMEOUT = "2"  # --api-timeout for the tests that wait for timeouts
SHARE, SHARER = "shared", "sharer"  # the fractional claim the reclaim watcher polls, and its pod
RECLAIMS = 'operation="reclaim"'  # the watcher's failures in aligned_dra_errors_total


class Node(h.NodeTree):
    """The built node, and its GPU as NVML shows it to the reclaim watcher: the MPS server, a host daemon,
    and (``share``) the share's pod's process and a host process that keep it short of memory."""

    @classmethod
    def build(cls, root, *args, **kwargs):
        tree = super().build(root, *args, **kwargs)
        tree.env, tree.nvml_state = h.gpu_tools(root)
        tree.gpus = fake_nvml.GpuNode(tree.proc)
        tree.gpus.add_gpu(h.GPU_BDF)
        tree.pids = {}
        return tree

    def use(self, **gib):
        """Processes' use of the GPU (``sharer=``, ``host=`` GiB), as the driver's NVML reads it next."""
        processes = self.gpus.nvml.gpus[h.GPU_BDF].processes
        wanted = {self.pids[name]: (int(amount * fake_nvml.GIB), name == "sharer") for name, amount in gib.items()}
        for pid, (used, mps) in sorted(wanted.items(), key=lambda item: item[1][0] - processes[item[0]][0]):
            self.gpus.nvml.run(h.GPU_BDF, pid, used, mps)  # the ones that shrink first: the GPU holds them all
        self.gpus.nvml.write_state(self.nvml_state)


@pytest.fixture
def build_node():
    return Node.build


@pytest.fixture
def kubernetes_minor():
    return "1.36"


@pytest.fixture
def proxy(api):
    with FaultProxy(api.url) as server:
        yield server


@pytest.fixture
def share(node, api):
    """The fractional claim (10 GiB requested) the watcher polls, to be prepared by the test: its pod's process uses
    8 GiB and a host process 70 GiB, 1.5 GiB of 80 are free (below the 5 % margin): every poll reads the claim
    from the API, none evicts (no claim above its request)."""
    ref, pod_uid = h.shared_claim(api, SHARE, SHARER)
    node.pids["sharer"] = node.gpus.process(h.GPU_BDF, 8, fake_nvml.pod_cgroup(pod_uid))
    node.pids["host"] = node.gpus.process(h.GPU_BDF, 70, "0::/system.slice/training.service", mps_client=False)
    node.gpus.nvml.write_state(node.nvml_state)
    return ref


def spawn(node, api, proxy, *extra, metrics=False):
    """The driver talking to the API server through the proxy, reclaim on; with ``metrics`` its /metrics base URL
    too."""
    args = ["--api-timeout", API_TIMEOUT, "--reclaim=evict", "--reclaim-interval=0.1"]
    args += [f"--mps-root={node.root / 'mps'}", *extra]
    base = None
    if metrics:
        port = h.free_port()
        args += ["--metrics-address", f"127.0.0.1:{port}"]
        base = f"http://127.0.0.1:{port}"
    kubeconfig = proxy.write_kubeconfig(node.root / "proxy.kubeconfig")
    process = h.DriverProcess(node, api, extra=args, kubeconfig=kubeconfig, env=node.env)
    process.base = base
    return process


def all_prepared(process, *refs):
    """Prepare each claim in a call of its own; whether every one answered without an error."""
    return all(process.prepare([r]).claims[r["uid"]].error == "" for r in refs)


def gpu_claim(api, name):
    return h.claim_ref(api.create(h.claim_object(name, [{"request": "gpu", "device": h.GPU}])))


def spec_file(node, uid):
    return node.cdi / f"aligned.dev-claim_{uid}.json"


def checkpointed(node):
    path = node.state / "checkpoint.json"
    return json.loads(path.read_text())["claims"] if path.exists() else {}


def leftovers(node):
    return [p.name for d in (node.cdi, node.state) for p in d.iterdir() if p.name.endswith(".tmp")]


def ready_on(api, name):
    """The Ready conditions of this driver on the claim in the API server."""
    claim = api.get("resourceclaims", name, "default") or {}
    devices = (claim.get("status") or {}).get("devices") or []
    return [c for d in devices if d.get("driver") == h.DRIVER for c in d.get("conditions") or []]


def healthz(process):
    return h.http_get(process.base + "/healthz")


def metrics(process):
    return h.http_get(process.base + "/metrics")[1]


def sample(process, name, labels):
    """One sample on /metrics; 0 while it is not written (a labelled counter appears at its first count)."""
    page = metrics(process)
    return h.metric_value(page, name, labels) if f"{name}{{{labels}}}" in page else 0


def reclaim_errors(process):
    """The watcher's failures so far."""
    return sample(process, "aligned_dra_errors_total", RECLAIMS)


def connections_to(pid, port):
    """How many TCP connections the process has established to ``port``."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):  # closed meanwhile
            inodes.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    count = 0
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as rows:
            for row in list(rows)[1:]:
                fields = row.split()  # sl local rem st ... inode
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                count += fields[3] == "01" and remote_port == port and f"socket:[{fields[9]}]" in inodes
    return count


def usage(process, proxy, reads=5):
    """The driver's descriptors and threads (the lowest of ``reads``, as h.process_usage), its connections to the
    API server (``api``) apart from ``fds``: its client pools as many as its requests ever overlapped, and the
    reclaim watcher's reads overlap the publications'."""
    pid, port = process.proc.pid, int(proxy.url.rsplit(":", 1)[1])
    samples = []
    for index in range(reads):
        if index:
            time.sleep(0.02)
        api = connections_to(pid, port)
        now = h.process_usage(pid, reads=1)
        samples.append({"fds": now["fds"] - api, "threads": now["threads"], "api": api})
    return {key: min(s[key] for s in samples) for key in ("fds", "threads", "api")}


def delete_slices(api):
    for item in api.list("resourceslices"):
        api.delete("resourceslices", item["metadata"]["name"])


# -- the API server unreachable, slow or failing -------------------------------------------------------


def test_start_with_the_api_refused_serves_checkpointed_claims_and_recovers(node, api, proxy, share):
    kept, other = gpu_claim(api, "kept"), gpu_claim(api, "other")
    with spawn(node, api, proxy) as process:
        assert all_prepared(process, kept, share)
    for ref in (kept, share):
        spec_file(node, ref["uid"]).unlink()  # a reboot empties /var/run/cdi
    proxy.refuse()
    process = spawn(node, api, proxy, metrics=True).start()  # sockets up: it serves without the API
    try:
        process.register()
        assert spec_file(node, kept["uid"]).exists() and spec_file(node, share["uid"]).exists()  # restored
        # the watcher reads the share's claim at every poll: refused, counted, tried again later
        h.wait_until(lambda: reclaim_errors(process) >= 1, what="the watcher's refused claim read")
        code, body = h.wait_until(lambda: (c := healthz(process)) and c[0] == 503 and "API error" in c[1] and c)
        assert body.startswith("degraded: ") and "no successful ResourceSlice publication yet" in body
        assert h.http_get(process.base + "/livez") == (200, "ok\n")
        assert h.metric_value(metrics(process), "aligned_dra_api_consecutive_errors") >= 1
        assert h.metric_value(metrics(process), "aligned_dra_last_publish_age_seconds") == -1
        again = process.prepare([kept]).claims[kept["uid"]]  # checkpointed: answered without the API
        assert again.error == "" and [d.device_name for d in again.devices] == [h.GPU]
        fresh = process.prepare([other]).claims[other["uid"]]
        assert "API server unreachable" in fresh.error and not spec_file(node, other["uid"]).exists()
        assert process.unprepare([kept]).claims[kept["uid"]].error == ""
        assert set(checkpointed(node)) == {share["uid"]} and not spec_file(node, kept["uid"]).exists()
        proxy.accept()
        h.wait_until(lambda: healthz(process) == (200, "ok\n"), timeout=20, what="healthy after the API returned")
        # the watcher's next try, after its backoff, reads the claim: the GPU's gauge is written from then on
        gauge = f'aligned_dra_gpu_bytes_above_request{{gpu="{h.GPU}"}} 0.0'
        h.wait_until(lambda: gauge in metrics(process), timeout=30, what="the watcher's read, answered")
        assert "reclaim: 0000:18:00.0 works again after " in process.log.read_text()
        assert api.list("resourceslices") and process.proc.poll() is None
        assert h.metric_value(metrics(process), "aligned_dra_api_consecutive_errors") == 0
        assert 0 <= h.metric_value(metrics(process), "aligned_dra_last_publish_age_seconds") < 20
    finally:
        assert process.stop() == 0


def test_the_kubelet_is_served_while_the_first_publication_hangs(node, api, proxy, share):
    """A node rebooting into a slow control plane: it registers and unprepares before any API answer.

    Causal, not timed: the servers answer while every API request is held (none has failed or been
    answered: the watcher's read of the share's claim neither), and the log says it served before the
    first publication attempt ended.
    """
    kept = gpu_claim(api, "kept")
    with spawn(node, api, proxy) as process:
        assert all_prepared(process, kept, share)
    delete_slices(api)
    watcher = proxy.add("GET", rf"/resourceclaims/{SHARE}$", "hang")
    held = proxy.add("*", r".*", "hang")
    process = spawn(node, api, proxy, "--api-timeout", "30")
    try:
        process.start()  # waits for both servers' answers
        h.wait_until(lambda: watcher.hits >= 1, what="the watcher's read of the share's claim, held")
        assert process.register().name == h.DRIVER
        assert process.unprepare([kept]).claims[kept["uid"]].error == ""
        assert set(checkpointed(node)) == {share["uid"]} and not spec_file(node, kept["uid"]).exists()
        assert held.hits >= 1 and api.list("resourceslices") == []
        log = process.log.read_text()
        assert "serving " in log and "publishing ResourceSlices failed" not in log, log
        assert "reclaim: the API server failed" not in log, log
        proxy.clear()  # the API server answers: the publication goes on in the background
        h.wait_until(lambda: api.list("resourceslices"), timeout=30, what="the first publication")
        log = process.log.read_text()
        assert log.index("serving ") < log.index("publishing ResourceSlices failed (1 in a row"), log
    finally:
        assert process.stop() == 0


def test_sigterm_while_the_first_publication_hangs_exits_within_the_bound(node, api, proxy, share):
    """The publications have a thread of their own: a hung one never holds the stop; nor does the reclaim
    watcher's read, held too, of the share prepared meanwhile (its Prepare's read alone is let through)."""
    proxy.add("GET", rf"/resourceclaims/{SHARE}$", "delay", times=1)  # forwarded at once
    watcher = proxy.add("GET", rf"/resourceclaims/{SHARE}$", "hang")
    held = proxy.add("*", r".*", "hang")
    process = spawn(node, api, proxy, "--api-timeout", "30")
    try:
        process.start()
        h.wait_until(lambda: held.hits >= 1, what="the first API request, held")
        assert all_prepared(process, share)
        h.wait_until(lambda: watcher.hits >= 1, what="the watcher's read of the share's claim, held")
        started = time.monotonic()
        process.proc.send_signal(signal.SIGTERM)
        code = process.proc.wait(timeout=STOP_TIMEOUT)
        took = time.monotonic() - started
        process.proc = None
        assert code == 0 and took < STOP_BOUND, (code, took)
        log = process.log.read_text()
        assert "publishing ResourceSlices failed" not in log  # it was still waiting
        assert "reclaim: the API server failed" not in log  # the watcher too
    finally:
        process.stop()


FAULTS = {
    "hang": dict(action="hang"),
    "reset": dict(action="reset"),
    "close": dict(action="close"),
    "500": dict(action="status", code=500),
    "503": dict(action="status", code=503),
    "429-retry-after": dict(action="status", code=429, retry_after=3),
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_publication_survives_every_api_fault_and_recovers(node, api, proxy, share, fault):
    with spawn(node, api, proxy, metrics=True) as process:
        h.wait_until(lambda: api.list("resourceslices"), what="first publication")
        assert all_prepared(process, share)
        process.register()  # the registration server's worker thread exists from here on
        time.sleep(0.5)
        baseline = usage(process, proxy)
        polls = proxy.add("GET", rf"/resourceclaims/{SHARE}$", "delay")  # forwarded at once, counted
        rule = proxy.add("GET", r"/resourceslices$", times=2, **FAULTS[fault])
        delete_slices(api)
        process.register()  # wakes a publication, which meets the fault
        h.wait_until(lambda: rule.hits >= 1, what="the fault to be hit")
        polled = polls.hits
        if fault == "hang":  # the request times out instead of waiting forever
            h.wait_until(
                lambda: h.metric_value(metrics(process), "aligned_dra_api_consecutive_errors") >= 1,
                timeout=20,
                what="the hung request's timeout",
            )
        proxy.release()
        # the publication register() woke before the rule may have written the slices already (its list
        # answered after the delete): the recovery is the success that follows the two failures
        recovered = "the API server answers again: published after 2 failed attempt(s)"
        h.wait_until(
            lambda: recovered in process.log.read_text() and api.list("resourceslices"),
            timeout=20,
            what="slices after the fault",
        )
        assert process.proc.poll() is None and rule.hits == 2
        assert polls.hits > polled  # the watcher went on reading the share's claim meanwhile
        log = process.log.read_text()
        assert "Traceback" not in log
        delays = [
            float(x)
            for x in re.findall(r"publishing ResourceSlices failed \(\d+ in a row; next try in ([0-9.]+) s", log)
        ]
        assert len(delays) == 2
        if fault == "429-retry-after":
            assert min(delays) >= 3.0  # Retry-After honoured over the shorter backoff
        # register() makes two calls back to back; the registration server's pool (two workers)
        # may start its second worker for them, once. A thread or a descriptor leaked per failed
        # request would add two (the rule fires twice); the API client may pool one connection more
        # (a publication and the watcher's read at once), never two.
        h.wait_until(
            lambda: (
                (u := usage(process, proxy))["fds"] <= baseline["fds"] + 1
                and u["threads"] <= baseline["threads"] + 1
                and u["api"] <= baseline["api"] + 1
            ),
            what=f"descriptors and threads back to {baseline} (now {usage(process, proxy)})",
        )


def test_one_hung_claim_get_holds_up_no_other_call(node, api, proxy, share):
    with spawn(node, api, proxy, "--api-timeout", "10") as process:
        prepared = [gpu_claim(api, f"p{i}") for i in range(5)]
        assert all_prepared(process, share, *prepared)
        hung = gpu_claim(api, "hung")
        rule = proxy.add("GET", r"/resourceclaims/hung$", "hang")
        box = {}

        def prepare_hung():
            started = time.monotonic()
            box["answer"] = process.prepare([hung], timeout=KUBELET_TIMEOUT).claims[hung["uid"]]
            box["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=prepare_hung)
        thread.start()
        h.wait_until(lambda: rule.hits == 1, what="the hung GET")
        fresh = [gpu_claim(api, f"f{i}") for i in range(6)]
        answers = {}

        def call(kind, ref):
            fn = process.prepare if kind == "prepare" else process.unprepare
            answers[ref["uid"]] = fn([ref], timeout=KUBELET_TIMEOUT).claims[ref["uid"]].error

        calls = [threading.Thread(target=call, args=("prepare", r)) for r in fresh]
        calls += [threading.Thread(target=call, args=("unprepare", r)) for r in prepared]
        for c in calls:
            c.start()
        for c in calls:
            c.join(KUBELET_TIMEOUT)
        # eleven calls answered, all well, while the twelfth still waits on the API
        assert len(answers) == 11 and set(answers.values()) == {""}
        assert thread.is_alive()
        thread.join(KUBELET_TIMEOUT)
        # the hung claim gets its own error from the driver, before the kubelet would give up
        assert "API server unreachable" in box["answer"].error and box["seconds"] < KUBELET_TIMEOUT
        assert set(checkpointed(node)) == {r["uid"] for r in [share, *fresh]}


def test_an_eviction_the_api_holds_holds_up_no_call_and_is_retried(node, api, proxy, share):
    """The watcher evicts the share's pod (its process grew above the claim's request on a GPU short of memory)
    while the API server holds the eviction: Prepare and Unprepare answer meanwhile; released, the eviction's
    failure is logged, counted and tried again, and the pod goes. A GPU then gone from NVML is logged and
    counted too, and the calls go on.

    Causal, not timed: the calls answer while the eviction is held (it has not failed: the log says nothing of
    it, and the pod is still there).
    """
    evicting = proxy.add("POST", rf"/namespaces/default/pods/{SHARER}/eviction$", "hang", times=1)
    with spawn(node, api, proxy, "--api-timeout", "30", metrics=True) as process:
        assert all_prepared(process, share)
        node.use(sharer=30, host=46)  # 30 GiB of its 10 GiB request; 3.5 GiB of 80 free
        h.wait_until(lambda: evicting.hits == 1, what="the eviction, held")
        fresh = gpu_claim(api, "fresh")
        assert all_prepared(process, fresh)
        assert process.unprepare([fresh]).claims[fresh["uid"]].error == ""
        assert "reclaim: the API server failed" not in process.log.read_text()
        assert api.get("pods", SHARER, "default") is not None
        proxy.release()  # closed without an answer
        gpu = f'gpu="{h.GPU}"'
        h.wait_until(lambda: sample(process, "aligned_dra_reclaims_total", gpu) == 1, what="the eviction, again")
        assert api.get("pods", SHARER, "default") is None and evicting.hits == 1 and reclaim_errors(process) == 1
        failed = "reclaim: the API server failed for GPU 0000:18:00.0 (1 in a row; next try in "
        assert failed in process.log.read_text()
        node.gpus.nvml.remove_gpu(h.GPU_BDF)  # fallen off the bus
        node.gpus.nvml.write_state(node.nvml_state)
        h.wait_until(lambda: reclaim_errors(process) == 2, what="the GPU's loss, counted")
        assert "reclaim: GPU 0000:18:00.0 is gone from NVML (1 in a row; " in process.log.read_text()
        assert all_prepared(process, fresh)
        undone = process.unprepare([fresh, share]).claims
        assert [undone[r["uid"]].error for r in (fresh, share)] == ["", ""]
        assert checkpointed(node) == {} and process.proc.poll() is None


def test_a_failing_status_write_never_fails_prepare_and_is_retried(node, api, proxy, share):
    with spawn(node, api, proxy) as process:
        assert all_prepared(process, share)
        ref = gpu_claim(api, "st")
        reset = proxy.add("PATCH", r"/resourceclaims/st/status$", "reset", times=1)
        failing = proxy.add("PATCH", r"/resourceclaims/st/status$", "status", code=503, times=2)
        answer = process.prepare([ref]).claims[ref["uid"]]
        assert answer.error == "" and spec_file(node, ref["uid"]).exists()
        h.wait_until(lambda: ready_on(api, "st"), timeout=20, what="the status written after the faults")
        assert reset.hits == 1 and failing.hits == 2
        assert ready_on(api, "st")[0]["reason"] == "Prepared"
        # the clear fails for a while too; Unprepare answers at once, the status goes later
        proxy.add("GET", r"/resourceclaims/st$", "status", code=500, times=2)
        assert process.unprepare([ref]).claims[ref["uid"]].error == ""
        h.wait_until(lambda: not ready_on(api, "st"), timeout=20, what="the status cleared")


def race(prepare, unprepare, ref):
    """Prepare and Unprepare of one claim started together; their errors as {"p": ..., "u": ...}."""
    answers = {}
    barrier = threading.Barrier(2)

    def call(key, fn):
        barrier.wait()
        answers[key] = fn([ref]).claims[ref["uid"]].error

    threads = [threading.Thread(target=call, args=("p", prepare)), threading.Thread(target=call, args=("u", unprepare))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(KUBELET_TIMEOUT)
    return answers


def test_unprepare_racing_prepare_of_the_same_claim_leaves_one_state_and_a_status_that_agrees(node, api, proxy, share):
    with spawn(node, api, proxy) as process:
        assert all_prepared(process, share)
        for round_ in range(3):
            ref = gpu_claim(api, f"race{round_}")
            proxy.add("GET", rf"/resourceclaims/race{round_}$", "delay", seconds=0.3, times=1)
            answers = race(process.prepare, process.unprepare, ref)
            assert answers == {"p": "", "u": ""}
            prepared = ref["uid"] in checkpointed(node)
            assert spec_file(node, ref["uid"]).exists() == prepared
            h.wait_until(lambda r=ref, p=prepared: bool(ready_on(api, r["name"])) == p, what="status agreeing")
            time.sleep(0.5)  # nothing later flips it
            assert bool(ready_on(api, ref["name"])) == prepared
            process.unprepare([ref])
            h.wait_until(lambda r=ref: not ready_on(api, r["name"]), what="no Ready on the unprepared claim")


def test_sigterm_during_a_hung_call_exits_within_the_stop_timeout(node, api, proxy, share):
    process = spawn(node, api, proxy, "--api-timeout", "30").start()
    done = gpu_claim(api, "done")
    assert all_prepared(process, done, share)
    hung = gpu_claim(api, "hung")
    rule = proxy.add("GET", r"/resourceclaims/hung$", "hang")
    thread = threading.Thread(target=lambda: _ignore_rpc_error(process.prepare, [hung]), daemon=True)
    thread.start()
    h.wait_until(lambda: rule.hits == 1, what="the hung GET")
    started = time.monotonic()
    process.proc.send_signal(signal.SIGTERM)
    code = process.proc.wait(timeout=STOP_TIMEOUT)  # systemd and the kubelet would SIGKILL after this
    took = time.monotonic() - started
    print(f"SIGTERM to exit with a hung API request: {took:.2f} s")
    # the documented bound (calls in flight get 5 s), not the API request's 30 s timeout
    assert took < STOP_BOUND and code == 0 and rule.hits == 1  # the hang was never released
    process.proc = None
    assert set(checkpointed(node)) == {done["uid"], share["uid"]} and leftovers(node) == []
    assert {p.name for p in node.cdi.iterdir()} == {spec_file(node, r["uid"]).name for r in (done, share)}


def _ignore_rpc_error(fn, *args):
    import grpc

    with contextlib.suppress(grpc.RpcError):
        fn(*args)


# -- disks full, read-only, damaged state ---------------------------------------------------------


@contextlib.contextmanager
def mounted(path, *options):
    """A mount over ``path`` for the test (root only); skipped where mounting is not allowed."""
    result = subprocess.run(["mount", *options, str(path)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.skip(f"cannot mount here: {result.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


@contextlib.contextmanager
def read_only(path):
    with mounted(path, "--bind", str(path)):
        subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], check=True)
        yield path


def fill(directory):
    """Fill a file system to the last byte (unbuffered writes); returns the filler file."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        for size in (65536, 4096, 1):
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * size)
    finally:
        os.close(fd)
    return filler


def test_a_full_state_disk_fails_the_claim_and_loses_nothing(node, api, proxy, share):
    with mounted(node.state, "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs"):
        with spawn(node, api, proxy) as process:
            kept = gpu_claim(api, "kept")
            assert all_prepared(process, kept, share)
            before = (node.state / "checkpoint.json").read_bytes()
            filler = fill(node.state)
            new = gpu_claim(api, "new")
            answer = process.prepare([new]).claims[new["uid"]]
            assert "No space left on device" in answer.error
            assert (node.state / "checkpoint.json").read_bytes() == before and leftovers(node) == []
            assert not spec_file(node, new["uid"]).exists()
            undone = process.unprepare([kept]).claims[kept["uid"]]
            assert "No space left on device" in undone.error and "stays prepared" in undone.error
            assert set(checkpointed(node)) == {kept["uid"], share["uid"]} and spec_file(node, kept["uid"]).exists()
            assert leftovers(node) == []
            filler.unlink()  # space again: the kubelet's retries succeed
            assert process.unprepare([kept]).claims[kept["uid"]].error == ""
            assert process.prepare([new]).claims[new["uid"]].error == ""
            assert set(checkpointed(node)) == {new["uid"], share["uid"]}


def test_a_read_only_state_directory_during_calls_fails_them_cleanly(node, api, proxy, share):
    with spawn(node, api, proxy) as process:
        kept = gpu_claim(api, "kept")
        assert all_prepared(process, kept, share)
        with read_only(node.state):
            new = gpu_claim(api, "new")
            assert "Read-only file system" in process.prepare([new]).claims[new["uid"]].error
            assert "Read-only file system" in process.unprepare([kept]).claims[kept["uid"]].error
            assert set(checkpointed(node)) == {kept["uid"], share["uid"]} and spec_file(node, kept["uid"]).exists()
            assert not spec_file(node, new["uid"]).exists()
        assert process.unprepare([kept]).claims[kept["uid"]].error == ""


def run_to_exit(node, api, proxy):
    process = spawn(node, api, proxy)
    env = {**h.driver_env(), **process.env}
    result = subprocess.run(
        process.args(), env=env, capture_output=True, text=True, timeout=60, cwd=str(node.root), check=False
    )
    return result.returncode, (result.stdout + result.stderr).strip().splitlines()


def test_a_read_only_state_directory_at_start_exits_2_with_one_line(node, api, proxy):
    with read_only(node.state):
        code, lines = run_to_exit(node, api, proxy)
    assert code == 2 and len(lines) == 1 and str(node.state) in lines[0], lines
    assert "Traceback" not in "\n".join(lines)


def test_a_read_only_cdi_directory_at_start_keeps_running_reports_and_retries(node, api, proxy, share):
    kept = gpu_claim(api, "kept")
    with spawn(node, api, proxy) as process:
        assert all_prepared(process, kept, share)
    spec_file(node, kept["uid"]).unlink()  # the share's stays: only kept's is to restore
    with read_only(node.cdi):
        process = spawn(node, api, proxy, metrics=True).start()
        try:
            code, body = h.wait_until(lambda: (c := healthz(process)) and "not restored" in c[1] and c)
            assert code == 503 and kept["uid"] in body and "Read-only file system" in body
            assert h.metric_value(metrics(process), "aligned_dra_cdi_restore_pending_claims") == 1
            answer = process.prepare([kept]).claims[kept["uid"]]  # prepared, but unusable without its spec
            assert "CDI spec cannot be written" in answer.error
            assert process.proc.poll() is None
        except BaseException:
            process.stop()
            raise
    try:  # writable again: the next scan restores it
        h.wait_until(lambda: spec_file(node, kept["uid"]).exists(), timeout=10, what="the spec restored")
        h.wait_until(lambda: healthz(process) == (200, "ok\n"), what="healthy")
        assert h.metric_value(metrics(process), "aligned_dra_cdi_restore_pending_claims") == 0
        assert process.prepare([kept]).claims[kept["uid"]].error == ""
    finally:
        assert process.stop() == 0


def _checkpoint_cases(node, uid):
    path = node.state / "checkpoint.json"
    good = path.read_text()
    data = json.loads(good)
    return {
        "missing": path.unlink,
        "empty": lambda: path.write_text(""),
        "truncated": lambda: path.write_text(good[: len(good) // 2]),
        "dangling-symlink": lambda: (path.unlink(), path.symlink_to(node.state / "gone.json")),
        "a-directory": lambda: (path.unlink(), path.mkdir()),
        "another-schema": lambda: path.write_text(json.dumps(dict(data, version=2))),
        "another-node": lambda: path.write_text(json.dumps(dict(data, node="node-b"))),
        "a-bad-field": lambda: path.write_text(
            json.dumps(dict(data, claims={uid: dict(data["claims"][uid], devices=[{"pci_address": 7}])}))
        ),
        "not-utf8": lambda: path.write_bytes(b"\xff\xfe" + good.encode()),
    }


CHECKPOINT_CASES = (
    "missing",
    "empty",
    "truncated",
    "dangling-symlink",
    "a-directory",
    "another-schema",
    "another-node",
    "a-bad-field",
    "not-utf8",
)


@pytest.mark.parametrize("case", CHECKPOINT_CASES)
def test_a_damaged_checkpoint_with_specs_present_is_refused_and_the_specs_kept(node, api, proxy, share, case):
    kept = gpu_claim(api, "kept")
    with spawn(node, api, proxy) as process:
        assert all_prepared(process, kept, share)
    specs = {r["uid"]: spec_file(node, r["uid"]).read_bytes() for r in (kept, share)}
    _checkpoint_cases(node, kept["uid"])[case]()
    code, lines = run_to_exit(node, api, proxy)
    assert code == 2 and len(lines) == 1 and "checkpoint" in lines[0], lines
    assert {uid: spec_file(node, uid).read_bytes() for uid in specs} == specs  # never deleted on a guess


def test_a_missing_checkpoint_without_specs_is_a_first_start(node, api, proxy, share):
    with spawn(node, api, proxy) as process:
        ref = gpu_claim(api, "first")
        assert all_prepared(process, ref, share)
        assert set(checkpointed(node)) == {ref["uid"], share["uid"]}
    assert os.path.exists(node.state / "checkpoint.json")
