# SPDX-License-Identifier: Apache-2.0
"""TEST HARNESS: an HTTP/1.1 proxy that injects network faults in front of the fake API server.

This module lives in ``tests/`` and is never shipped. It sits between a real
client (the official ``kubernetes`` Python client through urllib3, which keeps
connections alive) and a plain-HTTP upstream (``FakeApiServer``), forwards
requests unchanged, and breaks the ones that match a rule the way a real
network or a dying API server breaks them. Standard library only.

Interface
=========

::

    from ansible_collections.aligned.dra.tests.support.harnesses.fault_proxy import FaultProxy

    with FakeApiServer() as api, FaultProxy(api.url) as proxy:
        proxy.write_kubeconfig(tmp_path / "kubeconfig")      # points at the proxy
        rule = proxy.add("GET", r"/nodes/", "status", code=503, retry_after=2, times=1)
        proxy.add("PATCH", r"/status$", "hang")             # never answers ...
        proxy.release()                                      # ... until released (or the rule removed)
        proxy.remove(rule); proxy.clear()                    # clear() also releases hung requests
        proxy.refuse(); proxy.accept()                       # API server down (ECONNREFUSED), back (same port)
        proxy.requests, proxy.answered, proxy.connections, rule.hits

Actions (``method`` ``"*"`` matches any method; ``path_regex`` is searched in
the path without the query string; rules are tried in the order added, the
first match with ``times`` left applies):

``hang``
    read the request, never answer; when released (``release``, ``clear``,
    ``remove``, ``stop``) close the connection without answering.
``reset``
    read the request, close the connection with an RST (``SO_LINGER`` 0).
``close``
    read the request, close the connection with a FIN (a server that died).
``delay``
    wait ``seconds``, then forward.
``status``
    answer ``code`` with a Kubernetes ``Status`` body (and ``Retry-After`` when
    ``retry_after`` is given) without forwarding.

Forwarded requests keep the client connection alive (unless the client asked
for ``Connection: close``); chunked request bodies are forwarded with a
``Content-Length``. An unreachable upstream answers 502 with a ``Status`` body.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlsplit

ACTIONS = ("hang", "reset", "delay", "status", "close")

# Kubernetes StatusReason values (k8s.io/apimachinery metav1) for the codes a fault usually answers.
REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

# Headers that describe one connection, not the message: never relayed as they are.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
        "content-length",
    }
)

MAX_LINE = 65536
MAX_HEADERS = 200
# Bounds the joins in stop() (and of the accept thread): a wedged thread must not wedge the test run.
JOIN_TIMEOUT = 5.0
UPSTREAM_TIMEOUT = 60.0


@dataclass(eq=False)
class Rule:
    """One fault rule (see ``FaultProxy.add``).

    ``times`` is what is left: it counts down each time the rule applies (``None``: unlimited); ``hits``
    counts how often it applied.
    """

    method: str
    path_regex: str
    action: str
    times: int | None = None
    seconds: float = 0.0
    code: int = 503
    retry_after: int | None = None
    hits: int = 0
    pattern: re.Pattern[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown action {self.action!r}; choose one of {ACTIONS}")
        if self.times is not None and self.times < 0:
            raise ValueError("times must be None or >= 0")
        self.method = self.method.upper()
        self.pattern = re.compile(self.path_regex)

    def matches(self, method: str, path: str) -> bool:
        return self.method in ("*", method.upper()) and self.pattern.search(path) is not None


class _BadRequest(Exception):
    pass


@dataclass
class _Request:
    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes
    had_body: bool

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    def tokens(self, name: str) -> set[str]:
        found: set[str] = set()
        for key, value in self.headers:
            if key.lower() == name:
                found.update(token.strip().lower() for token in value.split(","))
        return found

    @property
    def keep_alive(self) -> bool:
        connection = self.tokens("connection")
        if self.version == "HTTP/1.0":
            return "keep-alive" in connection
        return "close" not in connection


class _Conn:
    """One client connection and the thread that serves it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.closed = threading.Event()
        self.thread: threading.Thread | None = None
        self.upstream: http.client.HTTPConnection | None = None

    def kill(self) -> None:
        """Close from another thread: shutdown wakes the serving thread's blocking recv (EOF) and sends a FIN."""
        self.closed.set()
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        # and a thread waiting for the upstream's answer
        upstream_sock = self.upstream.sock if self.upstream is not None else None
        if upstream_sock is not None:
            with contextlib.suppress(OSError):
                upstream_sock.shutdown(socket.SHUT_RDWR)


class FaultProxy:
    """An HTTP/1.1 fault-injecting proxy on 127.0.0.1 in front of a plain-HTTP upstream (see the module docstring)."""

    def __init__(self, upstream_url: str) -> None:
        split = urlsplit(upstream_url)
        if split.scheme != "http" or not split.hostname:
            raise ValueError(f"upstream must be a plain http:// URL, got {upstream_url!r}")
        self.upstream_host = split.hostname
        self.upstream_port = split.port or 80
        self.requests: list[tuple[str, str]] = []
        self.connections = 0
        self._answered = 0
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._release_generation = 0
        self._conns: set[_Conn] = set()
        self._port = 0
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._started = False
        self._stopping = threading.Event()
        # serialises start/stop/refuse/accept: they swap the listener and its accept thread
        self._life = threading.Lock()

    # -- life cycle -----------------------------------------------------------

    def start(self) -> FaultProxy:
        with self._life:
            if self._started:
                raise RuntimeError("proxy already started")
            self._listen()
            self._started = True
        return self

    def stop(self) -> None:
        """Stop listening, close every client connection (hung ones too) and join the threads (bounded)."""
        with self._life:
            if not self._started or self._stopping.is_set():
                return
            self._stopping.set()
            self._stop_listening()
        conns = self._kill_connections()
        deadline = time.monotonic() + JOIN_TIMEOUT  # one bound for all: stop() never waits longer
        for conn in conns:
            if conn.thread is not None:
                conn.thread.join(max(0.0, deadline - time.monotonic()))

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if not self._port:
            raise RuntimeError("proxy not started")
        return f"http://127.0.0.1:{self._port}"

    @property
    def answered(self) -> int:
        """How many requests were forwarded upstream and answered by it (counted before relaying the answer)."""
        with self._lock:
            return self._answered

    def write_kubeconfig(self, path: str | Path) -> Path:
        """Write a kubeconfig that points at this proxy and return its path."""
        from ansible_collections.aligned.dra.tests.support.fakes.apiserver import write_kubeconfig

        return write_kubeconfig(path, self.url)

    # -- rules ----------------------------------------------------------------

    def add(
        self,
        method: str,
        path_regex: str,
        action: str,
        *,
        times: int | None = None,
        seconds: float = 0.0,
        code: int = 503,
        retry_after: int | None = None,
    ) -> Rule:
        """Add a rule after the existing ones; ``times=None`` applies it to every match."""
        rule = Rule(method, path_regex, action, times=times, seconds=seconds, code=code, retry_after=retry_after)
        with self._cond:
            self._rules.append(rule)
        return rule

    def remove(self, rule: Rule) -> None:
        """Remove one rule; connections it holds hung are released (closed without an answer)."""
        with self._cond:
            if rule in self._rules:
                self._rules.remove(rule)
            self._cond.notify_all()

    def clear(self) -> None:
        """Remove every rule and release the hung connections."""
        with self._cond:
            self._rules.clear()
            self._release_generation += 1
            self._cond.notify_all()

    def release(self) -> None:
        """Release the connections hung so far (closed without an answer); the rules stay."""
        with self._cond:
            self._release_generation += 1
            self._cond.notify_all()

    def _match(self, method: str, path: str) -> Rule | None:
        with self._lock:
            for rule in self._rules:
                if rule.matches(method, path) and (rule.times is None or rule.times > 0):
                    if rule.times is not None:
                        rule.times -= 1
                    rule.hits += 1
                    return rule
        return None

    # -- down and back --------------------------------------------------------

    def refuse(self) -> None:
        """The API server goes down: close the listening socket (ECONNREFUSED) and every client connection."""
        with self._life:
            self._stop_listening()
        self._kill_connections()

    def _kill_connections(self) -> list[Any]:
        """Close every client connection (hung ones too), as a dead server would; returns them."""
        with self._cond:
            conns = list(self._conns)
            self._cond.notify_all()
        for conn in conns:
            conn.kill()
        return conns

    def accept(self) -> None:
        """The API server is back: listen again on the same port."""
        with self._life:
            if not self._started or self._stopping.is_set():
                raise RuntimeError("proxy not running")
            if self._listener is None:
                self._listen()

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            # the port may still have TIME_WAIT connections from before refuse()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", self._port))
            listener.listen(64)
        except OSError:
            listener.close()
            raise
        self._port = listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._listener = listener
        self._accept_thread = threading.Thread(
            target=self._accept_loop,
            args=(listener, self._wake_r),
            name=f"fault-proxy-accept-{self._port}",
            daemon=True,
        )
        self._accept_thread.start()

    def _stop_listening(self) -> None:
        # the accept thread closes the listener itself: closing a socket under another thread's accept() is racy
        if self._listener is None:
            return
        assert self._wake_w is not None and self._accept_thread is not None
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self._accept_thread.join(JOIN_TIMEOUT)
        self._wake_w.close()
        self._listener = None
        self._accept_thread = None
        self._wake_r = self._wake_w = None

    def _accept_loop(self, listener: socket.socket, wake: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        selector.register(listener, selectors.EVENT_READ)
        selector.register(wake, selectors.EVENT_READ)
        try:
            while True:
                ready = [key.fileobj for key, _events in selector.select()]
                if wake in ready:
                    return
                try:
                    sock, _address = listener.accept()
                except OSError:
                    continue
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                conn = _Conn(sock)
                conn.thread = threading.Thread(
                    target=self._serve, args=(conn,), name=f"fault-proxy-conn-{self._port}", daemon=True
                )
                with self._cond:
                    self._conns.add(conn)
                    self.connections += 1
                conn.thread.start()
        finally:
            selector.close()
            listener.close()
            wake.close()

    # -- one client connection ------------------------------------------------

    def _serve(self, conn: _Conn) -> None:
        reader = conn.sock.makefile("rb")
        upstream: http.client.HTTPConnection | None = None
        how = "close"  # how the client socket ends: "close" (FIN) or "reset" (RST)
        try:
            while not conn.closed.is_set():
                request = self._read_request(reader, conn.sock)
                if request is None:
                    break
                path = urlsplit(request.target).path
                with self._lock:
                    self.requests.append((request.method, path))
                rule = self._match(request.method, path)
                action = rule.action if rule is not None else "forward"
                if action == "reset":
                    how = "reset"
                    break
                if action == "close":
                    break
                if action == "hang":
                    assert rule is not None
                    self._hang(conn, rule)
                    break
                if action == "status":
                    assert rule is not None
                    self._send_status(conn.sock, request, rule)
                else:
                    if action == "delay":
                        assert rule is not None
                        if conn.closed.wait(rule.seconds):
                            break
                    if upstream is None:
                        upstream = conn.upstream = http.client.HTTPConnection(
                            self.upstream_host, self.upstream_port, timeout=UPSTREAM_TIMEOUT
                        )
                    self._forward(conn.sock, request, upstream)
                if not request.keep_alive:
                    break
        except (OSError, ValueError, _BadRequest, http.client.HTTPException):
            pass  # the client or the upstream went away, or sent garbage: drop the connection
        finally:
            if upstream is not None:
                upstream.close()
            reader.close()  # the socket's fd only closes once its makefile is closed too
            if how == "reset":
                with contextlib.suppress(OSError):
                    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                with contextlib.suppress(OSError):
                    conn.sock.shutdown(socket.SHUT_WR)
            conn.sock.close()
            with self._cond:
                self._conns.discard(conn)

    def _hang(self, conn: _Conn, rule: Rule) -> None:
        with self._cond:
            generation = self._release_generation
            while (
                rule in self._rules
                and generation == self._release_generation
                and not conn.closed.is_set()
                and not self._stopping.is_set()
            ):
                self._cond.wait(0.1)
                # a client that gave up (read timeout) closes its end: stop holding the thread for it
                if self._peer_closed(conn.sock):
                    return

    @staticmethod
    def _peer_closed(sock: socket.socket) -> bool:
        try:
            sock.setblocking(False)
            try:
                return sock.recv(1, socket.MSG_PEEK) == b""
            finally:
                sock.setblocking(True)
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _read_request(self, reader: BinaryIO, sock: socket.socket) -> _Request | None:
        line = reader.readline(MAX_LINE + 1)
        while line in (b"\r\n", b"\n"):  # RFC 9112 2.2: ignore empty lines before a request line
            line = reader.readline(MAX_LINE + 1)
        if not line:
            return None
        if len(line) > MAX_LINE:
            raise _BadRequest("request line too long")
        parts = line.decode("latin-1").split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            raise _BadRequest(f"bad request line {line!r}")
        method, target, version = parts
        headers = self._read_headers(reader)
        request = _Request(method.upper(), target, version, headers, b"", False)
        if "100-continue" in request.tokens("expect"):
            sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
        if "chunked" in request.tokens("transfer-encoding"):
            request.body = self._read_chunked(reader)
            request.had_body = True
        elif (length := request.header("content-length")) is not None:
            size = int(length)
            if size < 0:
                raise _BadRequest("negative Content-Length")
            request.body = self._read_exact(reader, size)
            request.had_body = True
        return request

    @staticmethod
    def _read_headers(reader: BinaryIO) -> list[tuple[str, str]]:
        headers: list[tuple[str, str]] = []
        while True:
            line = reader.readline(MAX_LINE + 1)
            if not line:
                raise _BadRequest("connection closed inside the headers")
            if line in (b"\r\n", b"\n"):
                return headers
            if len(headers) >= MAX_HEADERS or len(line) > MAX_LINE:
                raise _BadRequest("too many or too long headers")
            name, sep, value = line.decode("latin-1").partition(":")
            if not sep:
                raise _BadRequest(f"bad header line {line!r}")
            headers.append((name.strip(), value.strip()))

    @staticmethod
    def _read_exact(reader: BinaryIO, size: int) -> bytes:
        data = reader.read(size)
        if len(data) != size:
            raise _BadRequest("connection closed inside the body")
        return data

    def _read_chunked(self, reader: BinaryIO) -> bytes:
        chunks: list[bytes] = []
        while True:
            line = reader.readline(MAX_LINE + 1)
            if not line:
                raise _BadRequest("connection closed inside a chunk size")
            size = int(line.split(b";", 1)[0].strip(), 16)  # chunk extensions are ignored
            if size == 0:
                self._read_headers(reader)  # trailers: dropped
                return b"".join(chunks)
            chunks.append(self._read_exact(reader, size))
            if reader.readline(MAX_LINE + 1) not in (b"\r\n", b"\n"):
                raise _BadRequest("chunk not followed by CRLF")

    def _forward(self, sock: socket.socket, request: _Request, upstream: http.client.HTTPConnection) -> None:
        try:
            upstream.putrequest(request.method, request.target, skip_host=True, skip_accept_encoding=True)
            if request.header("host") is None:
                upstream.putheader("Host", f"{self.upstream_host}:{self.upstream_port}")
            for name, value in request.headers:
                if name.lower() not in HOP_BY_HOP:
                    upstream.putheader(name, value)
            if request.had_body or request.body:
                upstream.putheader("Content-Length", str(len(request.body)))
            upstream.endheaders(request.body or None)
            response = upstream.getresponse()
            body = response.read()
        except (OSError, http.client.HTTPException) as exc:
            # the upstream itself is down or broke the exchange: answer as a gateway would
            upstream.close()
            self._send(sock, request, 502, [("Content-Type", "application/json")], self._status_body(502, exc))
            return
        headers = [(name, value) for name, value in response.getheaders() if name.lower() not in HOP_BY_HOP]
        bodyless = request.method == "HEAD" or response.status in (204, 304) or response.status < 200
        if bodyless:
            # a HEAD answer's Content-Length describes the GET body: relay it as it is
            length = response.getheader("Content-Length")
            if length is not None and response.status not in (204, 304) and response.status >= 200:
                headers.append(("Content-Length", length))
        # counted before relaying: a client that has its answer must see the count include it
        with self._lock:
            self._answered += 1
        self._send(sock, request, response.status, headers, body, reason=response.reason, bodyless=bodyless)

    def _send_status(self, sock: socket.socket, request: _Request, rule: Rule) -> None:
        headers = [("Content-Type", "application/json")]
        if rule.retry_after is not None:
            headers.append(("Retry-After", str(rule.retry_after)))
        self._send(sock, request, rule.code, headers, self._status_body(rule.code, None, rule.retry_after))

    @staticmethod
    def _status_body(code: int, exc: Exception | None, retry_after: int | None = None) -> bytes:
        reason = REASONS.get(code)
        if reason is None:
            try:
                reason = HTTPStatus(code).phrase.replace(" ", "").replace("-", "")
            except ValueError:
                reason = "Unknown"
        message = f"fault proxy: upstream unreachable: {exc!r}" if exc is not None else f"fault injected: {code}"
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        if retry_after is not None:
            status["details"] = {"retryAfterSeconds": retry_after}
        return json.dumps(status).encode()

    @staticmethod
    def _send(
        sock: socket.socket,
        request: _Request,
        code: int,
        headers: list[tuple[str, str]],
        body: bytes,
        *,
        reason: str | None = None,
        bodyless: bool = False,
    ) -> None:
        if reason is None:
            try:
                reason = HTTPStatus(code).phrase
            except ValueError:
                reason = ""
        lines = [f"HTTP/1.1 {code} {reason}"]
        lines += [f"{name}: {value}" for name, value in headers]
        if not bodyless:
            lines.append(f"Content-Length: {len(body)}")
        if not request.keep_alive:
            lines.append("Connection: close")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
        # one write: headers and body in separate segments would cost a delayed-ACK round trip
        sock.sendall(head if bodyless else head + body)
