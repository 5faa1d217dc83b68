# SPDX-License-Identifier: Apache-2.0
"""TEST HARNESS: run the strict fake API server (tests/support/fakes/apiserver/) as a background process.

Tests only, never shipped. Molecule scenarios start it on the controller in
``prepare`` and stop it in ``cleanup``; nodes that share the controller's
network (podman ``--network host``) reach it on 127.0.0.1.

    python tests/support/fakes/apiserver/daemon.py start DIR [--minor 1.35] [--node NAME ...]
        [--pod NODE/NAMESPACE/NAME ...] [--daemonset NAMESPACE/NAME ...] [--address IP]
    python tests/support/fakes/apiserver/daemon.py stop DIR

``start`` returns once the server answers, leaving in DIR: ``kubeconfig``
(points at the server), ``url``, ``pid`` and ``log``. The given Nodes exist
from the start, with the workload a drain meets:

- ``--pod NODE/NAMESPACE/NAME``: a Running, Ready Pod NAME on NODE, labelled
  ``app: NAME`` and controlled by a ReplicaSet NAME (created with it), so
  ``kubernetes.core.k8s_drain`` evicts it;
- ``--daemonset NAMESPACE/NAME``: a DaemonSet NAME and one Running, Ready Pod
  ``NAME-<node>`` of it on every ``--node`` (a drain with
  ``ignore_daemonsets`` leaves them).

Nothing runs the ReplicaSets and DaemonSets: an evicted pod is gone for good.
Starting while a server from DIR still runs keeps that one (its objects are in
memory only). ``stop`` ends it; nothing running is fine.

``--address IP``: nodes with network namespaces of their own cannot reach the
controller's loopback; the daemon then also listens on IP (an address of the
controller they reach, such as their podman network's gateway) and passes
every connection through to the server; ``url`` and ``kubeconfig`` name that
address.

Run it as a script, as the Molecule scenarios do (``python
tests/support/fakes/apiserver/daemon.py``); its server process imports the package as
``apiserver`` from ``tests/support/fakes/``. The script's folder comes first on
``sys.path``, so no module of the package may be named like a module of the
standard library (hence ``selector``, not ``selectors``).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent  # tests/support/fakes/apiserver


def _alive(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return None
    return pid


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/version", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _workload_args(pods: list[str], daemonsets: list[str]) -> list[str]:
    return [*sum((["--pod", p] for p in pods), []), *sum((["--daemonset", d] for d in daemonsets), [])]


def _running_pod(name: str, namespace: str, node: str, owner: dict, app: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app": app},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": owner["kind"],
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"nodeName": node, "containers": [{"name": app, "image": "registry.k8s.io/pause:3.10"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def _controller(kind: str, namespace: str, name: str) -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": name, "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


def create_workload(api: object, nodes: list[str], pods: list[str], daemonsets: list[str]) -> None:
    """The ``--pod`` and ``--daemonset`` objects (see the module docstring)."""
    for spec in pods:
        node, namespace, name = _split(spec, 3, "--pod NODE/NAMESPACE/NAME")
        owner = api.create(_controller("ReplicaSet", namespace, name))
        api.create(_running_pod(name, namespace, node, owner, name))
    for spec in daemonsets:
        namespace, name = _split(spec, 2, "--daemonset NAMESPACE/NAME")
        owner = api.create(_controller("DaemonSet", namespace, name))
        for node in nodes:
            api.create(_running_pod(f"{name}-{node}", namespace, node, owner, name))


def _split(spec: str, parts: int, usage: str) -> list[str]:
    fields = spec.split("/")
    if len(fields) != parts or not all(fields):
        raise SystemExit(f"bad value {spec!r}: expected {usage}")
    return fields


def _pass_through(source: socket.socket, sink: socket.socket) -> None:
    """Copy one direction of a connection until its end; then end that direction for the other side too."""
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass  # either side went away: the other direction ends as well
    finally:
        try:
            sink.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class _Relay(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def relay(address: str, target: tuple[str, int]) -> _Relay:
    """A listener on ``address`` (any free port) that passes every connection through to ``target``.

    The server binds the loopback only; a relay instead of a second server keeps
    one store of objects whichever address a client uses.
    """

    class Connection(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            with socket.create_connection(target, timeout=10) as upstream:
                upstream.settimeout(None)
                back = threading.Thread(target=_pass_through, args=(upstream, self.request), daemon=True)
                back.start()
                _pass_through(self.request, upstream)
                back.join()

    server = _Relay((address, 0), Connection)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def start(
    directory: Path,
    minor: str,
    nodes: list[str],
    timeout: float = 30.0,
    pods: list[str] | None = None,
    daemonsets: list[str] | None = None,
    address: str | None = None,
) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    pid_file, url_file = directory / "pid", directory / "url"
    if _alive(pid_file) and url_file.exists() and _answers(url_file.read_text().strip()):
        print(f"running: {url_file.read_text().strip()}")
        return 0
    for name in ("pid", "url", "kubeconfig"):
        (directory / name).unlink(missing_ok=True)
    with open(directory / "log", "ab") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "serve",
                str(directory),
                "--minor",
                minor,
                *sum((["--node", n] for n in nodes), []),
                *_workload_args(pods or [], daemonsets or []),
                *(["--address", address] if address else []),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            print((directory / "log").read_text()[-4000:], file=sys.stderr)
            return 1
        if url_file.exists() and _answers(url_file.read_text().strip()):  # an answer, not only the file
            print(f"started: {url_file.read_text().strip()} (pid {proc.pid})")
            return 0
        time.sleep(0.05)
    proc.kill()
    print(f"fake API server did not start within {timeout}s", file=sys.stderr)
    return 1


def serve(
    directory: Path, minor: str, nodes: list[str], pods: list[str], daemonsets: list[str], address: str | None = None
) -> int:
    sys.path.insert(0, str(HERE.parent))
    from apiserver import FakeApiServer, write_kubeconfig

    api = FakeApiServer(minor=minor).start()
    url = api.url
    passing = None
    if address:
        server = urllib.parse.urlsplit(api.url)
        passing = relay(address, (server.hostname, server.port))
        relay_host, relay_port = passing.server_address[:2]
        url = f"http://{relay_host}:{relay_port}"
    for name in nodes:
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    create_workload(api, nodes, pods, daemonsets)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_args: done.set())
    signal.signal(signal.SIGINT, lambda *_args: done.set())
    tmp = directory / "kubeconfig.tmp"
    write_kubeconfig(tmp, url)
    tmp.rename(directory / "kubeconfig")
    (directory / "pid").write_text(str(os.getpid()))
    # written last and whole (a rename): start() takes it for an answer, as the server listens already
    (directory / "url.tmp").write_text(url)
    (directory / "url.tmp").rename(directory / "url")
    print(f"serving {url} (Kubernetes {minor})", flush=True)
    done.wait()
    if passing is not None:
        passing.shutdown()
        passing.server_close()
    api.stop()
    for rejected in api.rejections:
        print("rejected:", *rejected, flush=True)
    return 0


def stop(directory: Path, timeout: float = 15.0) -> int:
    pid = _alive(directory / "pid")
    if pid is None:
        print("not running")
        return 0
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(directory / "pid"):
        time.sleep(0.05)
    if _alive(directory / "pid"):
        os.kill(pid, signal.SIGKILL)
    (directory / "pid").unlink(missing_ok=True)
    print(f"stopped pid {pid}")
    return 0


def _ipv4(text: str) -> str:
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--address {text!r} is not an IPv4 address") from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["start", "stop", "serve"])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--minor", default="1.35")
    parser.add_argument("--node", action="append", default=[], help="a Node object to create at start")
    parser.add_argument(
        "--pod", action="append", default=[], help="NODE/NAMESPACE/NAME: a running pod of a ReplicaSet on NODE"
    )
    parser.add_argument(
        "--daemonset", action="append", default=[], help="NAMESPACE/NAME: a DaemonSet with a running pod on every node"
    )
    parser.add_argument(
        "--address", type=_ipv4, help="also listen on this IPv4 address (for nodes that cannot reach the loopback)"
    )
    args = parser.parse_args(argv)
    directory = args.directory.resolve()
    for spec in args.pod:
        _split(spec, 3, "--pod NODE/NAMESPACE/NAME")
    for spec in args.daemonset:
        _split(spec, 2, "--daemonset NAMESPACE/NAME")
    if args.action == "start":
        return start(directory, args.minor, args.node, pods=args.pod, daemonsets=args.daemonset, address=args.address)
    if args.action == "serve":
        return serve(directory, args.minor, args.node, args.pod, args.daemonset, args.address)
    return stop(directory)


if __name__ == "__main__":
    sys.exit(main())
