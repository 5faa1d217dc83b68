# SPDX-License-Identifier: Apache-2.0
"""The node's devices: attribute filters and CEL selectors on what is published."""

from __future__ import annotations

import shutil

import pytest
from aligned_dra_driver import inventory

from ansible_collections.aligned.dra.tests.support.harnesses import driver as h


@pytest.fixture
def node():
    root = h.memory_tmp()
    yield h.NodeTree.build(root)
    shutil.rmtree(root, ignore_errors=True)


def published(node, **extra) -> list[str]:
    opts = inventory.Options(**node.options(**extra))
    return [d["name"] for d in inventory.scan(opts).devices]


def test_match_rules_filter_published_devices(node):
    assert published(node, match=[("dra.aligned.dev/kind", True, "gpu")]) == [h.GPU]
    assert published(node, match=[("dra.aligned.dev/rdmaDevice", False, "mlx5_*")]) == [h.GPU]


def test_cel_selectors_filter_published_devices(node):
    assert published(node, selectors=['device.attributes["dra.aligned.dev"].kind == "nic"']) == [h.NIC]
    both = [
        'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:17"',
        'device.capacity["dra.aligned.dev"].memory.compareTo(quantity("40Gi")) > 0',
    ]
    assert published(node, selectors=both) == [h.GPU]  # the NIC has no memory: an error, left out


def test_a_selector_that_does_not_compile_is_named():
    with pytest.raises(ValueError, match="does not compile"):
        inventory.compile_selectors(["device.attributes["])
