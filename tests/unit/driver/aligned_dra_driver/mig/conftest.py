# SPDX-License-Identifier: Apache-2.0
"""The fixtures of the in-process MIG tests: for Prepare, a node's tree (``node``) and the fake NVML bound to it,
no instance kept from an earlier test (``nvml``); for the scan (``test_devices*.py``), the fake NVML of a node of
an A100 40GB, an H100 80GB and an L40S (``scan_nvml``). A test file with a ``node`` of its own keeps it."""

from __future__ import annotations

import pytest
from aligned_dra_driver.mig import prepare as mig_prepare

from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml
from ansible_collections.aligned.dra.tests.support.harnesses.driver_mig import fake, node_tree

SCAN_GPUS = {"0000:18:00.0": "A100-SXM4-40GB", "0000:2a:00.0": "H100-SXM5-80GB", "0000:3b:00.0": "L40S"}


@pytest.fixture
def node():
    yield from node_tree()


@pytest.fixture
def nvml(node, monkeypatch):
    monkeypatch.setattr(mig_prepare, "_HELD", {})
    return fake(node, monkeypatch)


@pytest.fixture
def scan_nvml(tmp_path):
    """The fake NVML of the scan tests' node: its GPUs (``SCAN_GPUS``: the A100, H100 and L40S those files name by
    PCI address) with MIG mode off and no instance, its procfs under ``tmp_path``."""
    fake_nvml = FakeNvml(procfs=tmp_path / "proc")
    for bus, model in SCAN_GPUS.items():
        fake_nvml.add_gpu(bus, model=model)
    return fake_nvml
