# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: a small hand-written node and the claim objects the planner's tests plan on.

One node with two GPUs and one RDMA NIC: the NIC shares a PCIe root (PIX) with
the first GPU and sits on the other NUMA node (SYS) from the second. Never
shipped.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims

PAIR_NODE_TOPOLOGY: dict[str, Any] = {
    "devices": [
        {"pci_address": "0000:10:00.0", "kind": "gpu", "pcie_root": "pci0000:0f", "numa_node": 0},
        {
            "pci_address": "0000:11:00.0",
            "kind": "rdma",
            "pcie_root": "pci0000:0f",
            "numa_node": 0,
            "rdma_devices": ["mlx5_0"],
        },
        {"pci_address": "0000:90:00.0", "kind": "gpu", "pcie_root": "pci0000:8f", "numa_node": 1},
    ],
    "links": {"0000:10:00.0": {"0000:11:00.0": "PIX"}, "0000:90:00.0": {"0000:11:00.0": "SYS"}},
}


def pair_objects(minor: str = "1.36") -> list[dict[str, Any]]:
    """DeviceClasses and ResourceClaimTemplates for one and two GPU-NIC pairs of site ``s`` (a fresh copy)."""
    return claims.render({"templates": {"pairs": {"counts": [1, 2]}}}, "s", minor)["objects"]
