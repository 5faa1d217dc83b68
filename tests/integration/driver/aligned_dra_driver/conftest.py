# SPDX-License-Identifier: Apache-2.0
"""The node and the API server of the driver's integration tests, defined once for the folder.

- ``node``: a node tree in a short temporary root (the driver's Unix socket paths stay under their limit),
  removed afterwards. It is built by ``build_node``: the driver harness's fixture node (``NodeTree.build``: one
  GPU, the RoCE NIC, the management NIC) unless a file overrides ``build_node`` with a builder of its own.
- ``api``: the strict fake API server, serving ``kubernetes_minor`` (1.35 unless a file overrides it), with the
  node's Node object.
- ``module_node``, ``module_api``: the same fixture node and 1.35 server, shared by the tests of one file (files
  that start one driver for all their tests).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h


def node_in_a_short_root(build: Callable[[Path], h.NodeTree]) -> Iterator[h.NodeTree]:
    root = h.short_tmp()
    yield build(root)
    shutil.rmtree(root, ignore_errors=True)


def served_with_the_node(minor: str) -> Iterator[FakeApiServer]:
    with FakeApiServer(minor) as server:
        server.create(h.node_object())
        yield server


@pytest.fixture
def build_node() -> Callable[[Path], h.NodeTree]:
    return h.NodeTree.build


@pytest.fixture
def kubernetes_minor() -> str:
    return "1.35"


@pytest.fixture
def node(build_node):
    yield from node_in_a_short_root(build_node)


@pytest.fixture
def api(kubernetes_minor):
    yield from served_with_the_node(kubernetes_minor)


@pytest.fixture(scope="module")
def module_node():
    yield from node_in_a_short_root(h.NodeTree.build)


@pytest.fixture(scope="module")
def module_api():
    yield from served_with_the_node("1.35")
