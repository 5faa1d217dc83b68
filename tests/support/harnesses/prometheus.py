# SPDX-License-Identifier: Apache-2.0
"""A real Prometheus (Debian's ``prometheus`` package) for the tests, and its ``promtool``.

:class:`Prometheus` starts ``/usr/bin/prometheus`` on loopback, on a free port,
with a generated configuration and a storage directory of its own (a fresh one,
or a TSDB that :func:`backfill` filled with ``promtool tsdb create-blocks-from
openmetrics``); it is ready when ``/-/ready`` answers 200, and it is stopped by
its PID. :func:`check_rules` and :func:`rule_tests` run ``promtool``.

Nothing here sleeps for a fixed time: every wait asks Prometheus (or waits on
the process, which also says when it died) until it answers or a deadline
passes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
READY_SECONDS = 60.0
# between two questions to a process that is not answering yet: a wait on the process itself, which
# returns at once when it dies
POLL_SECONDS = 0.05


def available() -> bool:
    """Whether Prometheus and promtool are installed (scripts/bootstrap.sh installs Debian's package)."""
    return os.access(PROMETHEUS, os.X_OK) and os.access(PROMTOOL, os.X_OK)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def backfill(openmetrics: str, storage: Path) -> None:
    """Blocks in ``storage`` from an OpenMetrics text (ending in ``# EOF``), as ``promtool`` writes them."""
    storage.mkdir(parents=True, exist_ok=True)
    source = storage.parent / (storage.name + ".om")
    source.write_text(openmetrics, encoding="utf-8")
    proc = subprocess.run(
        [PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(source), str(storage)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"promtool tsdb create-blocks-from openmetrics failed:\n{proc.stdout}\n{proc.stderr}")


def check_rules(path: Path) -> subprocess.CompletedProcess:
    """``promtool check rules <path>``."""
    return subprocess.run(
        [PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, check=False, timeout=60
    )


def rule_tests(path: Path) -> subprocess.CompletedProcess:
    """``promtool test rules <path>`` (a unit-test file naming its rule files relative to itself)."""
    return subprocess.run(
        [PROMTOOL, "test", "rules", str(path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        cwd=path.parent,
    )


class Prometheus:
    """One Prometheus process; use it as a context manager.

    ``scrape_configs`` and ``rule_files`` go into the generated configuration;
    ``storage``: the TSDB directory (default: a fresh one below ``workdir``);
    ``flags``: more command-line flags (``--query.max-samples=1000``,
    ``--web.config.file=...``); ``headers``: sent with the harness's own
    requests (its readiness probe, :meth:`api`), such as the credentials a
    ``--web.config.file`` asks for.
    """

    def __init__(
        self,
        workdir: Path,
        scrape_configs: list[dict[str, Any]] | None = None,
        rule_files: list[str] | None = None,
        storage: Path | None = None,
        scrape_interval: str = "1s",
        flags: list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.storage = storage or workdir / "tsdb"
        self.config = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
            "scrape_configs": scrape_configs or [],
            "rule_files": rule_files or [],
        }
        self.flags = list(flags or [])
        self.headers = dict(headers or {})
        self.port = 0
        self.process: subprocess.Popen | None = None
        self.log = workdir / "prometheus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Prometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.storage.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "prometheus.yml"
        config.write_text(yaml.safe_dump(self.config, sort_keys=False), encoding="utf-8")
        # a port free a moment ago may be taken before Prometheus binds it: then it exits, and another is tried
        for _attempt in range(5):
            self.port = _free_port()
            with self.log.open("ab") as log:
                self.process = subprocess.Popen(
                    [
                        PROMETHEUS,
                        f"--config.file={config}",
                        f"--storage.tsdb.path={self.storage}",
                        "--storage.tsdb.retention.time=3650d",
                        f"--web.listen-address=127.0.0.1:{self.port}",
                        "--web.enable-lifecycle",
                        "--log.level=warn",
                        *self.flags,
                    ],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            if self._wait_ready():
                return self
        raise RuntimeError(f"Prometheus did not become ready: {self.log.read_text(errors='replace')[-4000:]}")

    def _wait_ready(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            try:
                ready = urllib.request.Request(self.url + "/-/ready", headers=self.headers)
                with urllib.request.urlopen(ready, timeout=2) as answer:
                    if answer.status == 200:
                        return True
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            try:
                self.process.wait(timeout=POLL_SECONDS)
                return False  # it exited: the port was taken, or the configuration refused
            except subprocess.TimeoutExpired:
                continue
        self.stop()
        raise RuntimeError(f"Prometheus not ready after {READY_SECONDS} s: {self.log.read_text(errors='replace')}")

    def stop(self) -> None:
        """SIGTERM to the process's PID, SIGKILL if it is still there after 20 s."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=20)

    def __enter__(self) -> Prometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def api(self, path: str, **params: Any) -> Any:
        """The ``data`` of a GET on the HTTP API (``/api/v1/<path>``); an error answer raises."""
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        try:
            request = urllib.request.Request(f"{self.url}/api/v1/{path}?{query}", headers=self.headers)
            with urllib.request.urlopen(request, timeout=30) as answer:
                body = json.load(answer)
        except urllib.error.HTTPError as exc:
            body = json.load(exc)
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """An instant query's vector: ``[{"metric": {...}, "value": [t, "v"]}, ...]``."""
        data = self.api("query", query=expr, time=at)
        if data["resultType"] != "vector":
            raise PrometheusError(f"{expr}: a {data['resultType']}, not a vector")
        return data["result"]

    def values(self, expr: str, at: float | None = None, by: tuple[str, ...] = ()) -> dict[Any, float]:
        """An instant query as ``{labels of by (a tuple, or the one value): value}``."""
        out = {}
        for sample in self.query(expr, at):
            key = tuple(sample["metric"].get(label, "") for label in by)
            out[key[0] if len(key) == 1 else key] = float(sample["value"][1])
        return out

    def wait_for(self, expr: str, predicate: Any, seconds: float = 60.0) -> list[dict[str, Any]]:
        """Asks ``expr`` until ``predicate(result)`` holds; the last result. Raises after ``seconds``."""
        deadline = time.monotonic() + seconds
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(expr)
            if predicate(result):
                return result
            assert self.process is not None, "Prometheus was stopped"
            try:
                self.process.wait(timeout=POLL_SECONDS * 4)
                raise RuntimeError(f"Prometheus exited: {self.log.read_text(errors='replace')[-4000:]}")
            except subprocess.TimeoutExpired:
                continue
        raise AssertionError(f"{expr}: {result} after {seconds} s")


class PrometheusError(RuntimeError):
    """An error answer of Prometheus's HTTP API (a bad query, a many-to-many match)."""
