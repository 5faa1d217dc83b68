# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the fake API server's tests: a served 1.35 with node-a, its clients, a small workload."""

from __future__ import annotations

import kubernetes.client
import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.sites.apiserver_objects import NODE, owner, pod_obj


@pytest.fixture
def api():
    with FakeApiServer(minor="1.35") as server:
        server.create(NODE)
        yield server


@pytest.fixture
def resource_api(api):
    client = api.api_client()
    yield kubernetes.client.ResourceV1Api(client)
    client.close()


@pytest.fixture
def workload(api):
    """node-a runs web-1 (ReplicaSet) and agent-node-a (DaemonSet); node-b runs web-2."""
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}})
    web = owner(api, "ReplicaSet", "web", "web")
    agent = owner(api, "DaemonSet", "agent", "agent")
    api.create(pod_obj("web-1", "node-a", web, "web"))
    api.create(pod_obj("web-2", "node-b", web, "web"))
    api.create(pod_obj("agent-node-a", "node-a", agent, "agent"))
    return api


@pytest.fixture
def core_api(api):
    client = api.api_client()
    yield kubernetes.client.CoreV1Api(client)
    client.close()
