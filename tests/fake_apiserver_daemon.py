# SPDX-License-Identifier: Apache-2.0
"""TEST HARNESS: run the strict fake API server (tests/fake_apiserver.py) as a background process.

Tests only, never shipped. Molecule scenarios start it on the controller in
``prepare`` and stop it in ``cleanup``; nodes that share the controller's
network (podman ``--network host``) reach it on 127.0.0.1.

    python tests/fake_apiserver_daemon.py start DIR [--minor 1.35] [--node NAME ...]
    python tests/fake_apiserver_daemon.py stop DIR

``start`` returns once the server answers, leaving in DIR: ``kubeconfig``
(points at the server), ``url``, ``pid`` and ``log``. The given Nodes exist
from the start. Starting while a server from DIR still runs keeps that one
(its objects are in memory only). ``stop`` ends it; nothing running is fine.
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


def start(directory: Path, minor: str, nodes: list[str], timeout: float = 30.0) -> int:
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
        if url_file.exists():
            print(f"started: {url_file.read_text().strip()} (pid {proc.pid})")
            return 0
        time.sleep(0.05)
    proc.kill()
    print(f"fake API server did not start within {timeout}s", file=sys.stderr)
    return 1


def serve(directory: Path, minor: str, nodes: list[str]) -> int:
    sys.path.insert(0, str(HERE))
    from fake_apiserver import FakeApiServer

    api = FakeApiServer(minor=minor).start()
    for name in nodes:
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_args: done.set())
    signal.signal(signal.SIGINT, lambda *_args: done.set())
    tmp = directory / "kubeconfig.tmp"
    api.write_kubeconfig(tmp)
    tmp.rename(directory / "kubeconfig")
    (directory / "pid").write_text(str(os.getpid()))
    (directory / "url").write_text(api.url)  # written last: start() waits for it
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
    args = parser.parse_args(argv)
    directory = args.directory.resolve()
    if args.action == "start":
        return start(directory, args.minor, args.node)
    if args.action == "serve":
        return serve(directory, args.minor, args.node)
    return stop(directory)


if __name__ == "__main__":
    sys.exit(main())
