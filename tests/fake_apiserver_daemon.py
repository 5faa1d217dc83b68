# SPDX-License-Identifier: Apache-2.0
"""TEST HARNESS: run the strict fake API server (tests/fake_apiserver.py) as a background process.

Tests only, never shipped. Molecule scenarios start it on the controller in
``prepare`` and stop it in ``cleanup``; nodes that share the controller's
network (podman ``--network host``) reach it on 127.0.0.1.

    python tests/fake_apiserver_daemon.py start DIR [--minor 1.35] [--node NAME ...]
        [--pod NODE/NAMESPACE/NAME ...] [--daemonset NAMESPACE/NAME ...]
    python tests/fake_apiserver_daemon.py stop DIR

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
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


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


def start(
    directory: Path,
    minor: str,
    nodes: list[str],
    timeout: float = 30.0,
    pods: list[str] | None = None,
    daemonsets: list[str] | None = None,
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


def serve(directory: Path, minor: str, nodes: list[str], pods: list[str], daemonsets: list[str]) -> int:
    sys.path.insert(0, str(HERE))
    from fake_apiserver import FakeApiServer

    api = FakeApiServer(minor=minor).start()
    for name in nodes:
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    create_workload(api, nodes, pods, daemonsets)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_args: done.set())
    signal.signal(signal.SIGINT, lambda *_args: done.set())
    tmp = directory / "kubeconfig.tmp"
    api.write_kubeconfig(tmp)
    tmp.rename(directory / "kubeconfig")
    (directory / "pid").write_text(str(os.getpid()))
    # written last and whole (a rename): start() takes it for an answer, as the server listens already
    (directory / "url.tmp").write_text(api.url)
    (directory / "url.tmp").rename(directory / "url")
    print(f"serving {api.url} (Kubernetes {minor})", flush=True)
    done.wait()
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
    args = parser.parse_args(argv)
    directory = args.directory.resolve()
    for spec in args.pod:
        _split(spec, 3, "--pod NODE/NAMESPACE/NAME")
    for spec in args.daemonset:
        _split(spec, 2, "--daemonset NAMESPACE/NAME")
    if args.action == "start":
        return start(directory, args.minor, args.node, pods=args.pod, daemonsets=args.daemonset)
    if args.action == "serve":
        return serve(directory, args.minor, args.node, args.pod, args.daemonset)
    return stop(directory)


if __name__ == "__main__":
    sys.exit(main())
