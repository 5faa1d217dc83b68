# SPDX-License-Identifier: Apache-2.0
"""TEST HARNESS for the bundled DRA driver (tests only, never shipped).

Builds a small node's sysfs/procfs tree with the fixture builder, a ``/dev``
stand-in whose device nodes are real character devices (major 1, minor 3:
``/dev/null``'s, so podman can create them in a container), starts the real
driver process (``python -m aligned_dra_driver``) against the strict fake API
server, and talks to it over its real Unix sockets with a gRPC client.

    from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
    node = h.NodeTree.build(tmp_dir, nic_name="aldnic0")
    with FakeApiServer("1.35") as api, h.DriverProcess(node, api) as drv:
        drv.prepare([h.claim_ref(claim)])
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
DRIVER_SRC = REPO / "driver"
sys.path.insert(0, str(REPO / "tests" / "support" / "node_side"))
import sysfs_builder  # noqa: E402

DRIVER = "dra.aligned.dev"
NODE = "node-a"
GPU_BDF = "0000:18:00.0"
NIC_BDF = "0000:19:00.0"
MGMT_BDF = "0000:5b:00.0"
GPU_UUID = "GPU-11111111-2222-3333-4444-555555555555"
GPU = "gpu-0000-18-00-0"
NIC = "nic-0000-19-00-0"


def layout(nic_name: str = "aldnic0", gpus: int = 1, totalvfs: int = 0) -> dict[str, Any]:
    """One NVIDIA GPU and one RoCE NIC (mlx5_0) on pci0000:17, a management NIC on pci0000:5a.

    ``totalvfs`` makes the NIC SR-IOV capable (no VFs enabled yet).
    """
    gpu_children = [
        {
            "type": "bridge",
            "vendor": 0x8086,
            "device": 0x352A,
            "addr": f"{1 + i:02x}.0",
            "children": [
                {
                    "vendor": 0x10DE,
                    "device": 0x2330,
                    "class": 0x030200,
                    "driver": "nvidia",
                    "gpu": {
                        "model": "NVIDIA H100 80GB HBM3",
                        "uuid": GPU_UUID if i == 0 else f"GPU-{uuid.UUID(int=i)}",
                        "minor": i,
                    },
                }
            ],
        }
        for i in range(gpus)
    ]
    return {
        "name": "driver-node",
        "numa": {"nodes": [{"id": 0, "cpus": "0-3", "memory_kb": 8000000}]},
        "nvidia_driver": "570.124.06",
        "hostbridges": [
            {
                "bus": 0x17,
                "numa_node": 0,
                "children": gpu_children
                + [
                    {
                        "type": "bridge",
                        "vendor": 0x8086,
                        "device": 0x352A,
                        "addr": f"{1 + gpus:02x}.0",
                        "children": [
                            {
                                "vendor": 0x15B3,
                                "device": 0x1021,
                                "class": 0x020000,
                                "driver": "mlx5_core",
                                "netdevs": [{"name": nic_name, "type": "eth", "mtu": 1500, "speed": 100000}],
                                "rdma": {"name": "mlx5_0", "link_layer": "Ethernet", "rate": "100 Gb/sec (4X EDR)"},
                                **(
                                    {
                                        "sriov": {
                                            "totalvfs": totalvfs,
                                            "numvfs": 0,
                                            "vf_device": 0x101E,
                                            "vf_driver": "mlx5_core",
                                        }
                                    }
                                    if totalvfs
                                    else {}
                                ),
                            }
                        ],
                    }
                ],
            },
            {
                "bus": 0x5A,
                "numa_node": 0,
                "children": [
                    {
                        "type": "bridge",
                        "vendor": 0x8086,
                        "device": 0x352A,
                        "addr": "01.0",
                        "children": [
                            {
                                "vendor": 0x8086,
                                "device": 0x1593,
                                "class": 0x020000,
                                "driver": "ice",
                                "netdevs": [{"name": "eno1", "type": "eth", "mtu": 1500, "speed": 25000}],
                            }
                        ],
                    }
                ],
            },
        ],
    }


class NodeTree:
    """A built node: ``root/sys``, ``root/proc``, ``root/dev`` and driver directories."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sys = root / "sys"
        self.proc = root / "proc"
        self.dev = root / "dev"
        self.cdi = root / "cdi"
        self.state = root / "state"
        self.kubelet = root / "k"
        self.vendor_cdi = root / "vendor-cdi"

    @classmethod
    def build(cls, root: Path, nic_name: str = "aldnic0", gpus: int = 1, totalvfs: int = 0) -> NodeTree:
        sysfs_builder.build(layout(nic_name, gpus, totalvfs), root)
        tree = cls(root)
        for directory in (tree.cdi, tree.state, tree.kubelet, tree.vendor_cdi):
            directory.mkdir(parents=True, exist_ok=True)
        names = ["nvidiactl", "nvidia-uvm", "infiniband/rdma_cm", "infiniband/uverbs0", "infiniband/umad0"]
        names += [f"nvidia{i}" for i in range(gpus)]
        for name in names:
            path = tree.dev / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                make_char_device(path)
        return tree

    def options(self, **extra: Any) -> dict[str, Any]:
        """The driver's ``Options`` for this node, in process (the unit tests' driver)."""
        values: dict[str, Any] = {
            "node_name": NODE,
            "sysfs_root": str(self.sys),
            "procfs_root": str(self.proc),
            "dev_root": str(self.dev),
            "cdi_dir": str(self.cdi),
            "state_dir": str(self.state),
            "vendor_cdi_dirs": [str(self.vendor_cdi)],
            "device_options": {"exclude": ["eno*"]},
        }
        values.update(extra)
        return values


def accepts(path: Path) -> bool:
    """Whether a Unix socket takes a connection now (a listening server), without a request."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            return False
    return True


def make_char_device(path: Path) -> None:
    """A character device with /dev/null's numbers (root), else a plain file stand-in."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        path.write_text("")


def ifname(tag: str) -> str:
    """A host interface name unique to this test process (<= 15 characters).

    The machine's network namespace is shared by everyone running tests on it:
    fixed names would collide between two test runs at the same time.
    """
    if len(tag) > 9:
        raise ValueError(f"tag {tag!r} is longer than 9 characters")
    return f"{tag}{os.getpid() % 0x1000000:06x}"


def delete_links(*names: str) -> None:
    """Delete host interfaces if present; one that vanishes meanwhile (its pod's namespace went away) is fine."""
    from pyroute2 import IPRoute
    from pyroute2.netlink.exceptions import NetlinkError

    with IPRoute() as ipr:
        for name in names:
            for index in ipr.link_lookup(ifname=name):
                try:
                    ipr.link("del", index=index)
                except NetlinkError as exc:
                    if exc.code != 19:  # ENODEV
                        raise


def short_tmp() -> Path:
    """A short directory under /tmp: Unix socket paths must stay under 108 bytes."""
    return Path(tempfile.mkdtemp(prefix="ad", dir="/tmp"))


def memory_tmp() -> Path:
    """A short directory in memory (``/dev/shm``, a tmpfs) for the unit tier's in-process node trees: their
    thousands of sysfs files and the checkpoint's durable writes never wait on a disk; ``/tmp`` where there is
    no writable ``/dev/shm``. The process tests keep :func:`short_tmp` (a real disk under their crashes)."""
    shm = "/dev/shm"
    base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else "/tmp"
    return Path(tempfile.mkdtemp(prefix="ad", dir=base))


def driver_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(DRIVER_SRC), str(REPO / ".cache" / "collections")])
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return env


def hook_command() -> str:
    """An executable that runs the netdev hook from the checkout (what the wheel's entry point does).

    Where PID 1's network namespace cannot be read (a sandbox whose init is another user's, as on the
    development machines), the hook would rightly refuse to tell the host's namespace: the wrapper then
    hands it a ``--procfs-root`` of links into /proc in which PID 1 is the wrapper itself (it runs in
    the host's namespace, as the container runtime does). On a real node nothing is changed.
    """
    path = REPO / ".cache" / "aligned-dra-netdev-hook"
    env = f"PYTHONPATH={DRIVER_SRC}:{REPO / '.cache' / 'collections'}"
    script = (
        "#!/bin/sh\n"
        "if readlink /proc/1/ns/net >/dev/null 2>&1; then\n"
        f'    {env} exec {sys.executable} -m aligned_dra_driver.network.hook "$@"\n'
        "fi\n"
        "procfs=$(mktemp -d /tmp/aldhook.XXXXXX) || exit 1\n"
        'for entry in /proc/[0-9]*; do ln -s "$entry" "$procfs/${entry#/proc/}"; done\n'
        'rm -f "$procfs/1" && ln -s "/proc/$$" "$procfs/1" && ln -s /proc/self "$procfs/self"\n'
        f'{env} {sys.executable} -m aligned_dra_driver.network.hook --procfs-root "$procfs" "$@"\n'
        "status=$?\n"
        'rm -rf "$procfs"\n'
        'exit "$status"\n'
    )
    if not path.exists() or path.read_text() != script:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(script)
        tmp.chmod(0o755)
        tmp.rename(path)
    return str(path)


MPS_STAND_IN = """#!/bin/sh
# test stand-in for nvidia-cuda-mps-control
if [ "$1" = "-d" ]; then : > "$CUDA_MPS_PIPE_DIRECTORY/control"; else cat > /dev/null; rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"; fi
"""


def gpu_tools(root: Path) -> tuple[dict[str, str], Path]:
    """A driver process's ``env`` for fractional GPUs and reclaim: a stand-in of ``nvidia-cuda-mps-control`` first
    on its PATH, tests/support/fakes/nvml.py as ``pynvml`` on its PYTHONPATH; and the fake NVML's state file (write it with
    ``FakeNvml.write_state``; until then NVML is missing)."""
    from ansible_collections.aligned.dra.tests.support.fakes import nvml as fake_nvml

    bin_dir, shim, state = root / "bin", root / "nvml", root / "nvml.json"
    bin_dir.mkdir()
    (bin_dir / "nvidia-cuda-mps-control").write_text(MPS_STAND_IN)
    (bin_dir / "nvidia-cuda-mps-control").chmod(0o755)
    shim.mkdir()
    fake_nvml.write_module(shim, state)
    return {
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "PYTHONPATH": os.pathsep.join([str(shim), driver_env()["PYTHONPATH"]]),
    }, state


class DriverProcess:
    """The real driver as a child process, with a gRPC client on its sockets."""

    def __init__(
        self,
        node: NodeTree,
        api: Any,
        extra: list[str] | None = None,
        kubeconfig: Path | None = None,
        env: dict[str, str] | None = None,
    ):
        self.env = env or {}
        self.node = node
        self.api = api
        self.extra = extra or []
        self.kubeconfig = kubeconfig or api.write_kubeconfig(node.root / "kubeconfig")
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = node.root / "driver.log"
        self.reg_socket = node.kubelet / "plugins_registry" / f"{DRIVER}-reg.sock"
        self.dra_socket = node.kubelet / "plugins" / DRIVER / "dra.sock"
        self._channels: list[Any] = []

    def args(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "aligned_dra_driver",
            "--node-name",
            NODE,
            "--kubeconfig",
            str(self.kubeconfig),
            "--sysfs-root",
            str(self.node.sys),
            "--procfs-root",
            str(self.node.proc),
            "--dev-root",
            str(self.node.dev),
            "--kubelet-dir",
            str(self.node.kubelet),
            "--cdi-dir",
            str(self.node.cdi),
            "--state-dir",
            str(self.node.state),
            "--vendor-cdi-dir",
            str(self.node.vendor_cdi),
            "--netdev-hook",
            hook_command(),
            "--exclude",
            "eno*",
            "--rescan-interval",
            "0.5",
            *self.extra,
        ]

    def start(self, wait: bool = True) -> DriverProcess:
        for sock in (self.reg_socket, self.dra_socket):
            if sock.exists():
                sock.unlink()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                self.args(),
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**driver_env(), **self.env},
                cwd=str(self.node.root),
            )
        if wait:
            try:
                self.wait_ready()
            except BaseException:
                self.kill9()  # never leave a driver behind a failed start
                raise
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until both gRPC servers answer: a socket file exists before its server listens."""
        import grpc

        deadline = time.monotonic() + timeout
        waiting = [self.dra_socket, self.reg_socket]
        while waiting and time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"driver exited with {self.proc.returncode}:\n{self.log.read_text()[-4000:]}")
            if accepts(waiting[0]):
                waiting.pop(0)
            else:
                time.sleep(0.02)
        for path in () if waiting else (self.dra_socket, self.reg_socket):
            with grpc.insecure_channel(f"unix://{path}") as channel:  # the HTTP/2 handshake: the server answered
                try:
                    grpc.channel_ready_future(channel).result(timeout=max(deadline - time.monotonic(), 0.1))
                except grpc.FutureTimeoutError:
                    waiting.append(path)
        if waiting:
            raise TimeoutError(f"no answer on {waiting} within {timeout} s:\n{self.log.read_text()[-4000:]}")

    def stop(self) -> int:
        for channel in self._channels:
            channel.close()
        self._channels = []
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        self.proc = None
        return code

    def kill9(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None
        for channel in self._channels:
            channel.close()
        self._channels = []

    def __enter__(self) -> DriverProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- gRPC -----------------------------------------------------------------

    def channel(self, socket: Path) -> Any:
        import grpc

        channel = grpc.insecure_channel(f"unix://{socket}")
        self._channels.append(channel)
        return channel

    def stubs(self, version: str = "v1") -> Any:
        from aligned_dra_driver.kubelet.proto import dra_v1_pb2_grpc, dra_v1beta1_pb2_grpc

        module = dra_v1_pb2_grpc if version == "v1" else dra_v1beta1_pb2_grpc
        return module.DRAPluginStub(self.channel(self.dra_socket))

    def prepare(self, claims: list[dict[str, Any]], version: str = "v1", timeout: float = 45.0) -> Any:
        from aligned_dra_driver.kubelet.proto import dra_v1_pb2, dra_v1beta1_pb2

        pb2 = dra_v1_pb2 if version == "v1" else dra_v1beta1_pb2
        request = pb2.NodePrepareResourcesRequest(claims=[pb2.Claim(**c) for c in claims])
        return self.stubs(version).NodePrepareResources(request, timeout=timeout)

    def unprepare(self, claims: list[dict[str, Any]], version: str = "v1", timeout: float = 45.0) -> Any:
        from aligned_dra_driver.kubelet.proto import dra_v1_pb2, dra_v1beta1_pb2

        pb2 = dra_v1_pb2 if version == "v1" else dra_v1beta1_pb2
        request = pb2.NodeUnprepareResourcesRequest(claims=[pb2.Claim(**c) for c in claims])
        return self.stubs(version).NodeUnprepareResources(request, timeout=timeout)

    def register(self, registered: bool = True, error: str = "") -> Any:
        from aligned_dra_driver.kubelet.proto import registration_pb2, registration_pb2_grpc

        stub = registration_pb2_grpc.RegistrationStub(self.channel(self.reg_socket))
        info = stub.GetInfo(registration_pb2.InfoRequest(), timeout=10)
        stub.NotifyRegistrationStatus(
            registration_pb2.RegistrationStatus(plugin_registered=registered, error=error), timeout=10
        )
        return info


def node_object(name: str = NODE) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def pod_object(name: str, priority: int = 0, namespace: str = "default") -> dict[str, Any]:
    """A running, ready pod on this node."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"nodeName": NODE, "priority": priority, "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def claim_object(
    name: str,
    results: list[dict[str, Any]],
    config: list[dict[str, Any]] | None = None,
    namespace: str = "default",
    driver: str = DRIVER,
) -> dict[str, Any]:
    """An allocated ResourceClaim; ``results`` entries: {request, device[, pool, driver, shareID, consumedCapacity]}.

    A result's ``consumedCapacity`` is what its request asked for (``capacity.requests``), as the scheduler
    writes it from the request."""
    requests = sorted({r["request"].split("/")[0] for r in results}) or ["none"]
    asked = {r["request"]: r["consumedCapacity"] for r in results if r.get("consumedCapacity")}
    allocation: dict[str, Any] = {
        "devices": {
            "results": [{"driver": r.get("driver", driver), "pool": r.get("pool", NODE), **r} for r in results]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]
        },
    }
    if config:
        allocation["devices"]["config"] = config
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": req,
                        "exactly": {
                            "deviceClassName": "aligned",
                            **({"capacity": {"requests": asked[req]}} if req in asked else {}),
                        },
                    }
                    for req in requests
                ]
            }
        },
        "status": {"allocation": allocation},
    }


def shared_claim(api: Any, name: str, pod: str, memory: str = "10Gi", compute: str = "25") -> tuple[dict, str]:
    """A fractional GPU claim (``memory`` and ``compute`` requested) reserved for a new running pod, in the fake
    API server: its reference for Prepare, and the pod's UID."""
    pod_uid = api.create(pod_object(pod))["metadata"]["uid"]
    capacity = {"memory": memory, "compute": compute}
    obj = claim_object(
        name, [{"request": "gpu", "device": GPU, "shareID": str(uuid.uuid4()), "consumedCapacity": capacity}]
    )
    obj["status"]["reservedFor"] = [{"resource": "pods", "name": pod, "uid": pod_uid}]
    return claim_ref(api.create(obj)), pod_uid


def nic_config(source: str = "FromClaim", requests: list[str] | None = None, **fields: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "source": source,
        "opaque": {
            "driver": DRIVER,
            "parameters": {"apiVersion": "dra.aligned.dev/v1alpha1", "kind": "NicConfig", **fields},
        },
    }
    if requests:
        entry["requests"] = requests
    return entry


def claim_ref(stored: dict[str, Any]) -> dict[str, str]:
    meta = stored["metadata"]
    return {"namespace": meta["namespace"], "uid": meta["uid"], "name": meta["name"]}


def copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, symlinks=True)


# -- the metrics endpoint ---------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_get(url: str) -> tuple[int, str]:
    """(status, body) of a GET; an HTTP error status is an answer too."""
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metric_value(text: str, name: str, labels: str = "") -> float:
    """One sample of a Prometheus text page (``labels`` as written between the braces, a regex)."""
    import re

    pattern = re.escape(name) + (r"\{" + labels + r"\}" if labels else "") + r" ([0-9.e+-]+)"
    found = re.search(pattern, text)
    assert found, f"{name}{{{labels}}} missing"
    return float(found.group(1))


def wait_until(predicate: Any, timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


# -- resource use of the driver process (soak benchmark and test) -------------------------------


def process_usage(pid: int, reads: int = 5, pause: float = 0.02) -> dict[str, int]:
    """Open file descriptors, threads and resident memory (bytes) of a process, from /proc.

    Descriptors and threads are the lowest of ``reads`` reads ``pause`` seconds apart: a topology scan
    or an API request in flight holds one for a moment, which is not growth. RSS is the last read.
    """
    fds, threads, rss = [], [], 0
    for index in range(reads):
        if index:
            time.sleep(pause)
        fds.append(len(os.listdir(f"/proc/{pid}/fd")))
        with open(f"/proc/{pid}/status") as handle:
            status = dict(line.split(":", 1) for line in handle if ":" in line)
        threads.append(int(status["Threads"]))
        rss = int(status["VmRSS"].split()[0]) * 1024
    return {"fds": min(fds), "threads": min(threads), "rss": rss}


class SoakClient:
    """Prepare/Unprepare cycles of fresh claims over one channel to the DRA socket (as the kubelet keeps one)."""

    def __init__(self, process: DriverProcess, api: Any) -> None:
        from aligned_dra_driver.kubelet.proto import dra_v1_pb2, dra_v1_pb2_grpc, dra_v1beta1_pb2, dra_v1beta1_pb2_grpc

        self.api = api
        channel = process.channel(process.dra_socket)
        self.versions = {
            "v1": (dra_v1_pb2, dra_v1_pb2_grpc.DRAPluginStub(channel)),
            "v1beta1": (dra_v1beta1_pb2, dra_v1beta1_pb2_grpc.DRAPluginStub(channel)),
        }

    def claim(self, index: int) -> dict[str, str]:
        """A fresh allocated claim (1 GPU + 1 NIC with a NicConfig) in the fake API server."""
        claim = self.api.create(
            claim_object(
                f"soak-{index}",
                [{"request": "gpu", "device": GPU}, {"request": "nic", "device": NIC}],
                [nic_config(interfaceName="net1", mtu=9000, addresses=["10.0.0.2/24"])],
            )
        )
        return claim_ref(claim)

    def cycle(self, index: int) -> None:
        """Prepare and Unprepare of a fresh claim (v1 and v1beta1 in turn); the claim is deleted afterwards."""
        ref = self.claim(index)
        pb2, stub = self.versions["v1" if index % 2 == 0 else "v1beta1"]
        claims = [pb2.Claim(**ref)]
        answer = stub.NodePrepareResources(pb2.NodePrepareResourcesRequest(claims=claims), timeout=45).claims
        if answer[ref["uid"]].error or len(answer[ref["uid"]].devices) != 2:
            raise AssertionError(f"cycle {index}: prepare failed: {answer[ref['uid']].error}")
        undone = stub.NodeUnprepareResources(pb2.NodeUnprepareResourcesRequest(claims=claims), timeout=45).claims
        if undone[ref["uid"]].error:
            raise AssertionError(f"cycle {index}: unprepare failed: {undone[ref['uid']].error}")
        self.api.delete("resourceclaims", ref["name"], ref["namespace"])

    def burst(self, start: int, count: int, process: DriverProcess | None = None) -> None:
        """``count`` cycles (and registrations, with ``process``) at the same time: afterwards the servers'
        worker threads, which gRPC starts on demand up to a fixed number, all exist."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=count) as pool:
            cycles = list(pool.map(self.cycle, range(start, start + count)))
            if process is not None:
                list(pool.map(lambda _index: process.register(), range(count)))
        assert len(cycles) == count
