# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: a small hand-written node and the claim objects the planner's tests plan on.

Also the builders of hand-written DeviceClasses (one per kind of the bundled
driver) and ResourceClaimTemplates the planner's and allocator's tests share.

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


# The bundled driver's kind attribute, as a CEL expression reads it.
KIND = 'device.attributes["dra.aligned.dev"].kind'


def device_class(name: str, expression: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}  # fmt: skip


CLASSES = [
    device_class("gpu", f'device.driver == "dra.aligned.dev" && {KIND} == "gpu"'),
    device_class("nic", f'device.driver == "dra.aligned.dev" && {KIND} == "nic"'),
    device_class("vf", f'device.driver == "dra.aligned.dev" && {KIND} == "vf"'),
]


def template(name: str, requests: list, constraints: list | None = None) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": {"devices": {"requests": requests, "constraints": constraints or []}}},
    }


def exactly(name: str, cls: str, count: int = 1, **extra) -> dict:
    spec = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
    spec.update(extra)
    return {"name": name, "exactly": spec}
