# SPDX-License-Identifier: Apache-2.0
"""The fixtures of the in-process MIG Prepare tests: a node's tree (``node``) and the fake NVML bound to it, no
instance kept from an earlier test (``nvml``). A test file with a ``node`` of its own (the scan's) keeps it."""

from __future__ import annotations

import pytest
from aligned_dra_driver.mig import prepare as mig_prepare

from ansible_collections.aligned.dra.tests.support.harnesses.driver_mig import fake, node_tree


@pytest.fixture
def node():
    yield from node_tree()


@pytest.fixture
def nvml(node, monkeypatch):
    monkeypatch.setattr(mig_prepare, "_HELD", {})
    return fake(node, monkeypatch)
