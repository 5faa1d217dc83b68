# SPDX-License-Identifier: Apache-2.0
"""The fault proxy's ``delay``, which waits for real: it forwards the request late (the rest of the proxy's
tests, which wait for no clock, are in tests/unit/support/harnesses/test_fault_proxy.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import kubernetes.client
import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses.fault_proxy import FaultProxy

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
NODE_PATH = "/api/v1/nodes/n1"


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
    cfg.retries = False
    client = kubernetes.client.ApiClient(cfg)
    yield kubernetes.client.CoreV1Api(client)
    client.close()


def node_gets(api: FakeApiServer) -> int:
    return sum(1 for method, path, _type in api.requests if (method, path) == ("GET", NODE_PATH))


def test_delay_forwards_late(api: FakeApiServer, proxy: FaultProxy, core: kubernetes.client.CoreV1Api) -> None:
    rule = proxy.add("GET", r"/nodes/n1$", "delay", seconds=0.3)
    start = time.monotonic()
    assert core.read_node("n1", _request_timeout=5).metadata.name == "n1"
    assert time.monotonic() - start >= 0.3
    assert rule.hits == 1 and proxy.answered == 1 and node_gets(api) == 1
