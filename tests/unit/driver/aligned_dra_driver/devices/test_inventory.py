# SPDX-License-Identifier: Apache-2.0
"""The node's devices: attribute filters and CEL selectors on what is published, ACS and GPUDirect attributes."""

from __future__ import annotations

import shutil

import pytest
from aligned_dra_driver.devices import inventory

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


@pytest.fixture(scope="module")
def dgx_acs():
    """The DGX-H100-like tree with 4 KiB config spaces: socket 1's switch ports redirect peer-to-peer."""
    from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree
    from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder.layouts import load_layout

    root = h.memory_tmp()
    build_tree(load_layout("dgx-h100-acs"), root)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_no_pcie_switch_where_the_path_to_it_redirects_and_gpudirect_readiness_on_gpus(dgx_acs):
    opts = inventory.Options("dgx-acs", sysfs_root=str(dgx_acs / "sys"), procfs_root=str(dgx_acs / "proc"))
    devices = {d["name"]: d["attributes"] for d in inventory.scan(opts).devices}
    switch = "dra.aligned.dev/pcieSwitch"
    # socket 0: nothing redirects, GPU and NIC below one switch share its attribute
    assert devices["gpu-0000-1a-00-0"][switch] == devices["nic-0000-1d-00-0"][switch] == {"string": "0000:16:00.0"}
    # socket 1: the lower switches' ports redirect, so neither the GPU nor the NIC claims the switch
    assert switch not in devices["gpu-0000-9a-00-0"] and switch not in devices["nic-0000-9d-00-0"]
    # the node is not ready (socket 1's aligned pairs go through the host bridge): every GPU says so
    gpus = [attrs for name, attrs in devices.items() if name.startswith("gpu-")]
    assert len(gpus) == 8 and all(attrs["dra.aligned.dev/gpudirectRDMA"] == {"bool": False} for attrs in gpus)
