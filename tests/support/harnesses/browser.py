# SPDX-License-Identifier: Apache-2.0
"""Headless Chromium for tests, driven over the Chrome DevTools protocol.

A real browser (Debian's ``chromium``, installed by scripts/bootstrap.sh) opens
the generated pages; this module only starts it and speaks CDP to it through
``websocket-client`` (already a dependency of the ``kubernetes`` client). It
lives in ``tests/`` and is never shipped.

The flags are the ones that work on a closed network: without
``--disable-background-networking`` & co. Chromium keeps trying to reach
Google's hosts. ``--no-sandbox`` is added only when running as root, where
Chromium refuses to start otherwise.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
)


def find_chromium() -> str | None:
    """Path of a Chromium binary: $ALIGNED_DRA_CHROMIUM, else the first on PATH."""
    explicit = os.environ.get("ALIGNED_DRA_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class CDPError(RuntimeError):
    """The browser answered a command with an error, or did not answer."""


class Page:
    """One tab, with the console errors, exceptions and requests it produced."""

    def __init__(self, ws_url: str, timeout: float = 30.0) -> None:
        self.ws = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True)
        self.timeout = timeout
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.next_id += 1
        call_id = self.next_id
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params or {}}))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            message = json.loads(self.ws.recv())
            if message.get("id") == call_id:
                if "error" in message:
                    raise CDPError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)
        raise CDPError(f"{method}: no answer in {self.timeout} s")

    def wait_event(self, method: str, since: int = 0) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            for event in self.events[since:]:
                if event["method"] == method:
                    return event
            if time.monotonic() > deadline:
                raise CDPError(f"no {method} event in {self.timeout} s")
            message = json.loads(self.ws.recv())
            if "method" in message:
                self.events.append(message)

    def open(self, url: str) -> float:
        """Navigate, wait for the load event and two animation frames (the page is painted).

        Returns the browser's own figure for it: ms from navigation start to
        the second frame after load (``performance.now()``).
        """
        mark = len(self.events)
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired", since=mark)
        painted = self.evaluate(
            "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(performance.now()))))"
        )
        return float(painted)

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True})
        if "exceptionDetails" in result:
            raise CDPError(f"evaluate {expression[:60]!r}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path, width: int = 1280, height: int = 800) -> Path:
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        data = self.send("Page.captureScreenshot", {"format": "png"})["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and failed loads seen so far."""
        found = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in params["args"]))
            elif method == "Runtime.exceptionThrown":
                found.append("exception: " + json.dumps(params.get("exceptionDetails", {}))[:500])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                found.append("log: " + params["entry"].get("text", ""))
            elif method == "Network.loadingFailed":
                found.append("load failed: " + params.get("errorText", ""))
        return found

    def requests(self) -> list[str]:
        """URLs the page asked for (the page itself included)."""
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def clear(self) -> None:
        self.events.clear()

    def close(self) -> None:
        self.ws.close()


class Browser:
    """A headless Chromium process with a fresh profile; use as a context manager."""

    def __init__(self, executable: str, log: Path | None = None) -> None:
        self.executable = executable
        self.profile = Path(tempfile.mkdtemp(prefix="aligned-dra-chromium-"))
        self.log_path = log or self.profile / "chromium.log"
        self.process: subprocess.Popen | None = None
        self.port = 0

    def __enter__(self) -> Browser:
        args = [self.executable, *FLAGS, "--remote-debugging-port=0", f"--user-data-dir={self.profile}"]
        if os.geteuid() == 0:
            args.append("--no-sandbox")
        args.append("about:blank")
        self.log = open(self.log_path, "wb")  # closed in __exit__
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        active = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not active.exists() or not active.read_text().strip():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise CDPError(f"chromium did not start; its output is in {self.log_path}")
            time.sleep(0.05)
        while True:  # the file may be written before the endpoint answers (or in parts): wait for an answer
            try:
                self.port = int(active.read_text().split()[0])
                self.version()
                return self
            except (OSError, ValueError, IndexError) as exc:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.__exit__(None, None, None)
                    raise CDPError(
                        f"chromium's DevTools endpoint does not answer; its output is in {self.log_path}"
                    ) from exc
                time.sleep(0.05)

    def _json(self, path: str, method: str = "GET") -> Any:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        with urllib.request.urlopen(request, timeout=10) as answer:  # loopback only
            return json.loads(answer.read())

    def new_page(self) -> Page:
        target = self._json("/json/new?about:blank", method="PUT")
        return Page(target["webSocketDebuggerUrl"])

    def version(self) -> str:
        return self._json("/json/version")["Browser"]

    def __exit__(self, *exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if getattr(self, "log", None):
            self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)
