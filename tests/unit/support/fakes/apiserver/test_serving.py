# SPDX-License-Identifier: Apache-2.0
"""``Serving``: a socketserver served on a thread, stopped at once by a wake socket."""

from __future__ import annotations

import http.client
import http.server
import socket

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver.serving import Serving


class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        data = self.path.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return


def test_serves_until_stopped_then_the_loop_has_left_and_the_port_is_closed() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    port = server.server_address[1]
    serving = Serving(server, "echo")
    assert serving.thread.name == "echo" and serving.thread.is_alive()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    for path in ("/a", "/b"):  # one kept-alive connection, and a second one beside it
        conn.request("GET", path)
        assert conn.getresponse().read() == path.encode()
    other = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    other.request("GET", "/c")
    assert other.getresponse().read() == b"/c"
    conn.close()
    other.close()
    serving.stop()
    assert not serving.thread.is_alive()  # stop() returned once the loop had left
    assert server.socket.fileno() == -1  # and closed the listening socket
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
