# SPDX-License-Identifier: Apache-2.0
"""TEST HELPER: serve a ``socketserver`` server on a thread and stop it at once. Never shipped.

``serve_forever()`` notices ``shutdown()`` only at its next poll (``poll_interval``), so every stop of a
fake server waits up to that interval, in every test that starts one. :class:`Serving` runs the same
accept loop on a selector that also watches a wake socket: :meth:`Serving.stop` wakes it, and returns as
soon as the loop has left.

::

    serving = Serving(http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler), "fake-prometheus")
    ...
    serving.stop()  # the loop has left and the listening socket is closed
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import socketserver
import threading

# Bounds the join in stop(): a wedged loop must not wedge the test run.
JOIN_TIMEOUT = 5.0


class Serving:
    """``server`` served on a daemon thread named ``name`` until :meth:`stop`."""

    def __init__(self, server: socketserver.BaseServer, name: str) -> None:
        self.server = server
        self._wake_r, self._wake_w = socket.socketpair()
        self.thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self.server, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                ready = [key.fileobj for key, _events in selector.select()]
                if self._wake_r in ready:
                    return
                # what serve_forever() does with a ready listener: accept, and hand the request to its handler
                self.server._handle_request_noblock()  # pylint: disable=protected-access
                self.server.service_actions()

    def stop(self) -> None:
        """Wake the loop, wait for it to leave (bounded), and close the server's socket."""
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")
        self.thread.join(JOIN_TIMEOUT)
        self._wake_w.close()
        self._wake_r.close()
        self.server.server_close()
