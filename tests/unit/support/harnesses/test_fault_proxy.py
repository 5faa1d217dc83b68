# SPDX-License-Identifier: Apache-2.0
"""The fault-injecting proxy, between the official kubernetes client (or raw sockets) and the fake API server."""

from __future__ import annotations

import http.client
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import kubernetes.client
import pytest
import urllib3
import yaml
from kubernetes.client.exceptions import ApiException

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.fakes.apiserver.serving import Serving
from ansible_collections.aligned.dra.tests.support.harnesses.fault_proxy import FaultProxy

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
NODE_PATH = "/api/v1/nodes/n1"


def wait_for(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return False


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer() as server:
        server.create(NODE)
        yield server


@pytest.fixture
def proxy(api: FakeApiServer) -> Iterator[FaultProxy]:
    with FaultProxy(api.url) as fault_proxy:
        yield fault_proxy


@pytest.fixture
def core(proxy: FaultProxy) -> Iterator[kubernetes.client.CoreV1Api]:
    cfg = kubernetes.client.Configuration()
    cfg.host = proxy.url
    # urllib3 would otherwise retry resets and (with Retry-After) 429/503 itself, hiding the fault
    cfg.retries = False
    client = kubernetes.client.ApiClient(cfg)
    yield kubernetes.client.CoreV1Api(client)
    client.close()


def port_of(proxy: FaultProxy) -> int:
    return int(proxy.url.rsplit(":", 1)[1])


def raw_request(proxy: FaultProxy, method: str = "GET", path: str = NODE_PATH, extra: str = "") -> socket.socket:
    """Send one request on a new raw connection and return the socket (the answer is left unread)."""
    sock = socket.create_connection(("127.0.0.1", port_of(proxy)), timeout=5)
    sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())
    return sock


def read_answer(sock: socket.socket) -> tuple[bytes, dict[str, str], bytes]:
    """Read one answer (status line, headers, Content-Length body) from a raw socket."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    head, _sep, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _colon, value in (line.partition(":") for line in lines)}
    while len(body) < int(headers["content-length"]):
        chunk = sock.recv(65536)
        assert chunk
        body += chunk
    return status.encode(), headers, body


def nothing_yet(sock: socket.socket) -> bool:
    """Whether nothing has arrived on ``sock`` (neither data nor EOF) so far; the socket stays blocking."""
    sock.setblocking(False)
    try:
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    finally:
        sock.settimeout(5)
    return False


def node_gets(api: FakeApiServer) -> int:
    return sum(1 for method, path, _type in api.requests if (method, path) == ("GET", NODE_PATH))


# -- forwarding -----------------------------------------------------------------


def test_forwards_over_one_kept_alive_connection(
    api: FakeApiServer, proxy: FaultProxy, core: kubernetes.client.CoreV1Api
) -> None:
    for _round in range(3):
        assert core.read_node("n1", _request_timeout=5).metadata.name == "n1"
    assert proxy.connections == 1  # urllib3 reused its connection: the proxy kept it alive
    assert proxy.answered == 3
    assert proxy.requests == [("GET", NODE_PATH)] * 3
    assert node_gets(api) == 3


def test_relays_status_headers_and_body(proxy: FaultProxy) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port_of(proxy), timeout=5)
    conn.request("GET", "/api/v1/nodes/absent")
    response = conn.getresponse()
    assert response.status == 404
    assert response.getheader("Content-Type") == "application/json"
    assert json.loads(response.read())["reason"] == "NotFound"
    first = conn.sock
    conn.request("GET", NODE_PATH)
    response = conn.getresponse()
    assert response.status == 200 and json.loads(response.read())["metadata"]["name"] == "n1"
    assert conn.sock is first  # same connection: not closed after the answer
    conn.close()


def test_client_connection_close_is_honoured(proxy: FaultProxy) -> None:
    sock = raw_request(proxy, extra="Connection: close\r\n")
    status, headers, _body = read_answer(sock)
    assert status.startswith(b"HTTP/1.1 200")
    assert headers["connection"] == "close"
    assert sock.recv(1) == b""
    sock.close()


def test_chunked_request_body_is_forwarded(api: FakeApiServer, proxy: FaultProxy) -> None:
    body = json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"}}).encode()
    half = len(body) // 2
    chunked = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in (body[:half], body[half:]))
    sock = socket.create_connection(("127.0.0.1", port_of(proxy)), timeout=5)
    sock.sendall(
        b"POST /api/v1/nodes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + chunked + b"0\r\n\r\n"
    )
    status, _headers, answer = read_answer(sock)
    assert status.startswith(b"HTTP/1.1 201"), answer
    assert api.get("nodes", "n2") is not None
    # the connection is still in step after the chunked body
    sock.sendall(f"GET {NODE_PATH} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert read_answer(sock)[0].startswith(b"HTTP/1.1 200")
    sock.close()


def test_upstream_connection_close_is_absorbed() -> None:
    """An upstream that closes after every answer (HTTP/1.0): the client's connection still stays open."""

    class OneShot(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = self.path.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            return

    upstream = http.server.ThreadingHTTPServer(("127.0.0.1", 0), OneShot)
    serving = Serving(upstream, "one-shot-upstream")
    try:
        with FaultProxy(f"http://127.0.0.1:{upstream.server_address[1]}") as proxy:
            conn = http.client.HTTPConnection("127.0.0.1", port_of(proxy), timeout=5)
            for path in ("/a", "/b", "/c"):
                conn.request("GET", path)
                assert conn.getresponse().read() == path.encode()
            conn.close()
            assert proxy.connections == 1 and proxy.answered == 3
    finally:
        serving.stop()


def test_unreachable_upstream_answers_502() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    with FaultProxy(f"http://127.0.0.1:{dead}") as proxy:
        sock = raw_request(proxy)
        status, _headers, body = read_answer(sock)
        sock.close()
    assert status.startswith(b"HTTP/1.1 502")
    assert json.loads(body)["kind"] == "Status"


def test_write_kubeconfig_points_at_the_proxy(tmp_path: Path, proxy: FaultProxy) -> None:
    path = proxy.write_kubeconfig(tmp_path / "kubeconfig")
    config = yaml.safe_load(path.read_text())
    assert config["clusters"][0]["cluster"]["server"] == proxy.url
    assert config["users"][0]["user"]["token"] == "fake-token"
    client = kubernetes.config.new_client_from_config(str(path))
    assert kubernetes.client.CoreV1Api(client).read_node("n1", _request_timeout=5).metadata.name == "n1"
    client.close()
    assert proxy.answered == 1


# -- status ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "reason", "retry_after"),
    [(503, "ServiceUnavailable", 7), (429, "TooManyRequests", 2), (500, "InternalError", None)],
)
def test_status_answers_without_forwarding(
    api: FakeApiServer,
    proxy: FaultProxy,
    core: kubernetes.client.CoreV1Api,
    code: int,
    reason: str,
    retry_after: int | None,
) -> None:
    rule = proxy.add("GET", r"/nodes/n1$", "status", code=code, retry_after=retry_after)
    with pytest.raises(ApiException) as caught:
        core.read_node("n1", _request_timeout=5)
    assert caught.value.status == code
    assert caught.value.headers.get("Retry-After") == (None if retry_after is None else str(retry_after))
    status = json.loads(caught.value.body)
    assert status["kind"] == "Status" and status["apiVersion"] == "v1" and status["status"] == "Failure"
    assert status["code"] == code and status["reason"] == reason and status["message"]
    assert rule.hits == 1
    assert proxy.answered == 0 and node_gets(api) == 0
    proxy.clear()
    assert core.read_node("n1", _request_timeout=5).metadata.name == "n1"
    assert proxy.connections == 1  # the fault answer kept the connection alive


# -- hang -----------------------------------------------------------------------


def test_hang_times_out_the_client_then_release_serves_again(
    api: FakeApiServer, proxy: FaultProxy, core: kubernetes.client.CoreV1Api
) -> None:
    rule = proxy.add("GET", r"/nodes/n1$", "hang", times=1)
    # the proxy holds the request until released: any read timeout ends in the same error, so a short one
    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.read_node("n1", _request_timeout=0.05)
    assert rule.hits == 1 and node_gets(api) == 0
    proxy.release()
    assert core.read_node("n1", _request_timeout=5).metadata.name == "n1"
    assert proxy.answered == 1


def test_hang_holds_until_release_then_closes_unanswered(proxy: FaultProxy) -> None:
    rule = proxy.add("*", r"/nodes/n1$", "hang")
    sock = raw_request(proxy)
    assert wait_for(lambda: rule.hits == 1)  # the proxy holds the request ...
    assert nothing_yet(sock)  # ... unanswered
    proxy.release()
    assert sock.recv(1) == b""  # closed, nothing answered (an answer sent late would show here)
    sock.close()
    # the rule stays: the next request hangs too, until the rule is removed
    sock = raw_request(proxy)
    assert wait_for(lambda: rule.hits == 2)
    assert nothing_yet(sock)
    proxy.clear()
    assert sock.recv(1) == b""
    sock.close()


def test_removing_the_rule_releases_its_hung_connection(proxy: FaultProxy) -> None:
    rule = proxy.add("GET", r"/nodes/n1$", "hang")
    sock = raw_request(proxy)
    assert wait_for(lambda: rule.hits == 1)
    proxy.remove(rule)
    sock.settimeout(5)
    assert sock.recv(1) == b""
    sock.close()


# -- reset and close --------------------------------------------------------------


def test_reset_sends_rst(proxy: FaultProxy) -> None:
    proxy.add("GET", r"/nodes/n1$", "reset")
    sock = raw_request(proxy)
    with pytest.raises(ConnectionResetError):
        sock.recv(1)
    sock.close()


def test_reset_seen_by_the_kubernetes_client(proxy: FaultProxy, core: kubernetes.client.CoreV1Api) -> None:
    rule = proxy.add("GET", r"/nodes/n1$", "reset", times=1)
    with pytest.raises(urllib3.exceptions.ProtocolError) as caught:
        core.read_node("n1", _request_timeout=5)
    # exactly a reset: http.client's RemoteDisconnected (a clean close) subclasses ConnectionResetError
    assert type(caught.value.args[1]) is ConnectionResetError  # pylint: disable=unidiomatic-typecheck
    assert rule.hits == 1
    assert core.read_node("n1", _request_timeout=5).metadata.name == "n1"


def test_close_sends_fin_without_answer(proxy: FaultProxy, core: kubernetes.client.CoreV1Api) -> None:
    proxy.add("GET", r"/nodes/n1$", "close", times=1)
    sock = raw_request(proxy)
    assert sock.recv(1) == b""  # orderly EOF, not a reset
    sock.close()
    proxy.add("GET", r"/nodes/n1$", "close", times=1)
    with pytest.raises(urllib3.exceptions.ProtocolError) as caught:
        core.read_node("n1", _request_timeout=5)
    assert isinstance(caught.value.args[1], http.client.RemoteDisconnected)
    assert proxy.answered == 0


# -- down and back ---------------------------------------------------------------


def test_refuse_then_accept_on_the_same_port(proxy: FaultProxy, core: kubernetes.client.CoreV1Api) -> None:
    url, port = proxy.url, port_of(proxy)
    assert core.read_node("n1", _request_timeout=5).metadata.name == "n1"
    idle = raw_request(proxy)
    read_answer(idle)
    proxy.refuse()
    assert idle.recv(1) == b""  # existing connections die with the server
    idle.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    proxy.accept()
    assert proxy.url == url
    # urllib3 notices its pooled connection was dropped and opens a new one
    assert core.read_node("n1", _request_timeout=5).metadata.name == "n1"
    assert proxy.answered == 3


# -- rule selection ---------------------------------------------------------------


def test_times_and_order(proxy: FaultProxy, core: kubernetes.client.CoreV1Api) -> None:
    first = proxy.add("*", r"/nodes/", "status", code=503, times=2)
    second = proxy.add("*", r"/nodes/", "status", code=429, times=1)
    codes = []
    for _round in range(3):
        with pytest.raises(ApiException) as caught:
            core.read_node("n1", _request_timeout=5)
        codes.append(caught.value.status)
    assert codes == [503, 503, 429]
    assert core.read_node("n1", _request_timeout=5).metadata.name == "n1"
    assert (first.hits, first.times, second.hits, second.times) == (2, 0, 1, 0)


def test_method_and_path_matching(api: FakeApiServer, proxy: FaultProxy, core: kubernetes.client.CoreV1Api) -> None:
    post = proxy.add("POST", r"^/api/v1/nodes$", "status", code=500)
    listing = proxy.add("get", r"^/api/v1/nodes$", "status", code=429)
    assert core.read_node("n1", _request_timeout=5).metadata.name == "n1"  # path does not match
    with pytest.raises(ApiException) as caught:
        core.create_node({"metadata": {"name": "n3"}}, _request_timeout=5)
    assert caught.value.status == 500 and api.get("nodes", "n3") is None
    # the query string is not part of the matched path, nor of the recorded one
    with pytest.raises(ApiException) as caught:
        core.list_node(limit=1, _request_timeout=5)
    assert caught.value.status == 429
    assert (post.hits, listing.hits) == (1, 1)
    assert proxy.requests == [("GET", NODE_PATH), ("POST", "/api/v1/nodes"), ("GET", "/api/v1/nodes")]


def test_bad_action_is_refused(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError):
        proxy.add("GET", "/", "explode")


# -- stop -------------------------------------------------------------------------


def test_stop_returns_with_a_hung_connection(api: FakeApiServer) -> None:
    proxy = FaultProxy(api.url).start()
    idle = raw_request(proxy)  # a kept-alive connection, idle in the proxy's read of the next request
    read_answer(idle)
    proxy.add("*", ".", "hang")
    sock = raw_request(proxy)
    assert wait_for(lambda: len(proxy.requests) == 2)
    stopper = threading.Thread(target=proxy.stop, daemon=True)
    stopper.start()
    stopper.join(20)
    assert not stopper.is_alive()
    assert sock.recv(1) == b""
    assert idle.recv(1) == b""
    sock.close()
    idle.close()
    prefix = f"fault-proxy-conn-{port_of(proxy)}"
    assert not [t for t in threading.enumerate() if t.name.startswith(prefix)]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port_of(proxy)), timeout=5).close()
