# SPDX-License-Identifier: Apache-2.0
"""Per node, the GPUs published and those KAI counts: by the driver's own attribute, and by driver name."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import gpu_counts
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import CLASSES


def device(driver: str, name: str, **attributes: str) -> dict:
    return {
        "name": name,
        "driver": driver,
        "attributes": {f"{driver}/{k}": {"string": v} for k, v in attributes.items()},
    }


def test_one_driver_for_gpus_and_nics_is_counted_by_kai_as_no_gpu():
    topology = {
        "devices": [
            {"pci_address": "0000:10:00.0", "kind": "gpu", "pcie_root": "pci0000:0f", "numa_node": 0},
            {"pci_address": "0000:11:00.0", "kind": "rdma", "pcie_root": "pci0000:0f", "numa_node": 0,
             "rdma_devices": ["mlx5_0"]},
        ],
        "links": {},
    }  # fmt: skip
    nodes = planner.nodes_from_topologies({"n1": topology})
    assert gpu_counts.node_counts(nodes) == {"n1": {"published": 1, "counted_by_kai": 0}}
    # the plan carries the counts, for every site
    assert planner.plan("s", nodes, CLASSES, [])["gpu_counts"] == {"n1": {"published": 1, "counted_by_kai": 0}}


def test_a_gpu_driver_is_counted_whole_nics_included():
    nodes = {
        "n1": {
            "devices": [
                device("gpu.nvidia.com", "gpu-0", type="gpu"),
                device("gpu.nvidia.com", "mig-0", type="mig"),
                device("gpu.nvidia.com", "channel-0", type="channel"),  # not a GPU, but KAI counts it
                device("dra.net", "eth1"),
                device("dra.aligned.dev", "gpu-1", kind="accelerator"),
            ]
        },
        "n2": {"devices": []},
    }
    assert gpu_counts.node_counts(nodes) == {
        "n1": {"published": 3, "counted_by_kai": 3},
        "n2": {"published": 0, "counted_by_kai": 0},
    }
    assert not gpu_counts.is_gpu(device("dra.aligned.dev", "nic-0", kind="nic"))


def test_the_driver_split_by_kind_has_its_gpus_counted_by_kai_and_its_nics_not():
    topology = {
        "devices": [
            {"pci_address": "0000:10:00.0", "kind": "gpu", "pcie_root": "pci0000:0f", "numa_node": 0},
            {"pci_address": "0000:12:00.0", "kind": "accelerator", "pcie_root": "pci0000:0f", "numa_node": 0},
            {"pci_address": "0000:11:00.0", "kind": "rdma", "pcie_root": "pci0000:0f", "numa_node": 0,
             "rdma_devices": ["mlx5_0"]},
        ],
        "links": {},
    }  # fmt: skip
    nodes = planner.nodes_from_topologies({"n1": topology}, {"split_gpu_driver": "gpu.aligned.dev"})
    assert {d["name"]: d["driver"] for d in nodes["n1"]["devices"]} == {
        "acc-0000-12-00-0": "gpu.aligned.dev",
        "gpu-0000-10-00-0": "gpu.aligned.dev",
        "nic-0000-11-00-0": "dra.aligned.dev",
    }
    assert gpu_counts.node_counts(nodes) == {"n1": {"published": 2, "counted_by_kai": 2}}
    # the split driver's devices are the collection's by their kind (under dra.aligned.dev/), whatever its name
    assert gpu_counts.is_gpu(dict(device("dra.aligned.dev", "gpu-2", kind="gpu"), driver="nvidia-gpu.example.com"))
    assert not gpu_counts.is_gpu(dict(device("dra.aligned.dev", "nic-2", kind="nic"), driver="gpu.aligned.dev"))
