# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: a small hand-written node and the claim objects the planner's tests plan on.

Also the builders of hand-written DeviceClasses (one per kind of the bundled
driver) and ResourceClaimTemplates the planner's and allocator's tests share.

One node with two GPUs and one RDMA NIC: the NIC shares a PCIe root (PIX) with
the first GPU and sits on the other NUMA node (SYS) from the second. And the
ResourceSlices of AWS p5.48xlarge-like nodes as NVIDIA's GPU driver and DRANET
publish them (GPUs with a PCIe root and no NUMA node). Never shipped.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import rails as plan_rails

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


# -- a site of AWS p5.48xlarge-like nodes, published by other drivers -----------------------------
#
# The PCI layout of aws-ofi-nccl's NCCL topology of p5.48xlarge (topology/p5.48xl-topo.xml): eight
# PCIe switches below bridges 0000:00:00.0 ... 0000:07:00.0 (named pci0000:00 ... pci0000:07 here),
# each with one H100 (0000:4f:00.0, 0000:60:00.0, ... 0000:c0:00.0) and the four EFA NICs on the next
# four buses (0000:50:00.0 ... 0000:53:00.0 beside the first GPU). The file nests all eight switches
# in one <cpu> element; the instance has two sockets, and the switches are split four per NUMA node
# (switches 0-3 on node 0, 4-7 on node 1). NVIDIA's GPU driver publishes the GPUs with pciBusID and
# pcieRoot and no numaNode; DRANET publishes the EFA NICs with both (the NUMA node only when
# ``efa_numa`` is true).

P5_GPU_BUSES = (0x4F, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0, 0xC0)
P5_EFA_PER_SWITCH = 4


def p5_root(switch: int) -> str:
    return f"pci0000:{switch:02x}"


def p5_slices(node: str, efa_numa: bool = True, gpu_numa: bool = False) -> list[dict[str, Any]]:
    """The ResourceSlices of one p5-like node: 8 H100 (``gpu.nvidia.com``) and 32 EFA NICs (``dra.net``).

    ``gpu_numa``: the GPUs publish their NUMA node too (``numa``), as a node whose driver says it.
    """
    gpus, nics = [], []
    for switch, bus in enumerate(P5_GPU_BUSES):
        root, numa = p5_root(switch), switch // 4
        gpus.append({"name": f"gpu-{switch}", "attributes": {
            "type": {"string": "gpu"}, "uuid": {"string": f"GPU-{node}-{switch}"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"}, "architecture": {"string": "Hopper"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:{bus:02x}:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": root}}})  # fmt: skip
        if gpu_numa:
            gpus[-1]["attributes"]["numa"] = {"int": numa}
        for nic_bus in range(bus + 1, bus + 1 + P5_EFA_PER_SWITCH):
            bdf = f"0000:{nic_bus:02x}:00.0"
            attributes = {"dra.net/pciAddress": {"string": bdf}, "dra.net/rdma": {"bool": True},
                          "resource.kubernetes.io/pcieRoot": {"string": root}}  # fmt: skip
            if efa_numa:
                attributes["dra.net/numaNode"] = {"int": numa}
            nics.append({"name": "pci-" + bdf.replace(":", "-").replace(".", "-"), "attributes": attributes})
    return [resource_slice(node, "gpu.nvidia.com", gpus), resource_slice(node, "dra.net", nics)]


def resource_slice(node: str, driver: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    """One ResourceSlice of ``driver`` holding the node's whole pool."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver.replace('.', '-')}"},
        "spec": {"driver": driver, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                 "devices": devices},
    }  # fmt: skip


def p5_objects() -> list[dict[str, Any]]:
    """The objects rendered for NVIDIA GPUs and DRANET NICs, and ``gpu-efa-unaligned``: two GPUs and two
    NICs, no constraint (a fresh copy)."""
    rendered = claims.render(
        {"drivers": ["gpu.nvidia.com", "dra.net"], "gpu_driver": "gpu.nvidia.com", "nic_driver": "dra.net"},
        "p5",
        "1.36",
    )["objects"]
    return rendered + [
        template("gpu-efa-unaligned", [exactly("gpu", "nvidia-gpu", count=2), exactly("efa", "dranet-nic", count=2)])
    ]


# -- rails ------------------------------------------------------------------------------------------
#
# Small nodes for the rail templates: each GPU and RDMA NIC given as (PCI address, PCIe root, NUMA
# node); the levels follow from them (same root PIX, same NUMA node NODE, else SYS). NIC i has the
# interface nic<i>, so the rule ``by: netdev_name, pattern: '^nic(\d+)$'`` puts it on rail i.


def rail_node(gpus: list[tuple[str, str, int]], nics: list[tuple[str, str, int]]) -> dict[str, Any]:
    """A topology of GPUs and RDMA NICs (``nic<i>`` for NIC i), levels by hand from the roots and NUMA nodes."""
    devices = [
        {"pci_address": bdf, "kind": "gpu", "pcie_root": root, "numa_node": numa, "vendor_id": "0x10de"}
        for bdf, root, numa in gpus
    ] + [
        {"pci_address": bdf, "kind": "rdma", "pcie_root": root, "numa_node": numa, "rdma_devices": [f"mlx5_{i}"],
         "netdevs": [{"name": f"nic{i}"}]}
        for i, (bdf, root, numa) in enumerate(nics)
    ]  # fmt: skip
    links = {
        g: {n: ("PIX" if g_root == n_root else "NODE" if g_numa == n_numa else "SYS") for n, n_root, n_numa in nics}
        for g, g_root, g_numa in gpus
    }
    return {"devices": devices, "links": links}


def aligned_node(pairs: int, numa_split: int | None = None) -> dict[str, Any]:
    """``pairs`` GPU+NIC pairs, pair i on root ``pci0000:<i>0`` (GPU ``0000:<i>1:00.0``, NIC ``0000:<i>2:00.0``);
    pairs from ``numa_split`` on are on NUMA node 1."""
    split = pairs if numa_split is None else numa_split
    gpus = [(f"0000:{i + 1}1:00.0", f"pci0000:{i + 1}0", int(i >= split)) for i in range(pairs)]
    nics = [(f"0000:{i + 1}2:00.0", f"pci0000:{i + 1}0", int(i >= split)) for i in range(pairs)]
    return rail_node(gpus, nics)


NIC_NAME_RULE = {"by": "netdev_name", "pattern": r"^nic(\d+)$"}


def rail_objects(rules: dict[str, Any], settings: dict[str, Any] | None = None, minor: str = "1.36") -> list[dict]:
    """The objects of site ``s`` with the rail templates the rules declare (pairs of 1 and 2 kept, a fresh copy)."""
    base = {"templates": {"pairs": {"counts": [1, 2]}, "pairs_fallback": {"enabled": False}}}
    for key, value in (settings or {}).items():
        base[key] = value if key != "templates" else {**base["templates"], **value}
    return claims.render(base, "s", minor, rail_rules=rules)["objects"]


# -- planner nodes and placement for the job planner ---------------------------------------------------


def rail_planner_nodes(topologies: dict[str, Any], rules: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The planner's nodes of probed ``topologies``, each node's NICs given their rail under its rule in ``rules``
    (nodes without one have no rails), and the rules' problems."""
    rails, problems = {}, []
    for node, topology in topologies.items():
        rails[node], found = plan_rails.node_rails(node, topology, rules.get(node))
        problems += found
    return planner.nodes_from_topologies(topologies, rails=rails), problems


def split_objects(objects: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(DeviceClasses, claim templates and ResourceClaims)`` of rendered objects."""
    return [o for o in objects if o["kind"] == "DeviceClass"], [o for o in objects if o["kind"] != "DeviceClass"]


def site_placement(levels: list[str], domains: dict[str, dict[str, str]]) -> dict[str, Any]:
    """A site's placement as the job planner reads it: ``levels`` (names, widest first, labelled
    ``aligned.dev/<name>``), each host's ``{level: domain}``, node names equal to the hosts."""
    return {
        "levels": [{"name": name, "label": f"aligned.dev/{name}"} for name in levels],
        "domains": {host: dict(found) for host, found in domains.items()},
        "node_names": {host: host for host in domains},
    }
