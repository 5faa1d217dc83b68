# SPDX-License-Identifier: Apache-2.0
"""One driver process through 200 Prepare/Unprepare cycles: no open file and no thread more afterwards.

The figures with 1,000 cycles and the memory bound are benchmarks/driver_soak.py's; this test checks
the behaviour (counts, not time) on the same path: the real process, the strict fake API server and the
real Unix socket.
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

pytestmark = pytest.mark.slow


def test_200_cycles_leave_open_files_and_threads_where_they_were(node):
    with FakeApiServer("1.35") as api:
        api.create(h.node_object())
        with h.DriverProcess(node, api) as process:
            pid = process.proc.pid
            client = h.SoakClient(process, api)
            for index in range(30):
                client.cycle(index)
            client.burst(30, 16, process)  # every gRPC worker thread exists from here on
            baseline = h.process_usage(pid)
            for index in range(200):
                client.cycle(100 + index)
            end = h.process_usage(pid)
            assert end["fds"] <= baseline["fds"], (baseline, end)
            assert end["threads"] <= baseline["threads"], (baseline, end)
            assert list(node.cdi.iterdir()) == []
            assert json.loads((node.state / "checkpoint.json").read_text())["claims"] == {}
            assert api.list("resourceclaims") == []
