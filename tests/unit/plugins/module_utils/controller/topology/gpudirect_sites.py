# SPDX-License-Identifier: Apache-2.0
"""A small DGX-like topology with the probe's ACS, ``p2p`` and ``gpudirect`` keys, for the GPUDirect tests.

Three PCIe switches below three root ports of one NUMA node, each with one GPU
and one RDMA NIC on two downstream ports (``nvidia-smi topo -m``: PIX within
a switch, NODE across):

- switch A (``0000:1x``): no function redirects: the pair's path is ``direct``;
- switch B (``0000:2x``): the GPU's downstream port ``0000:22:00.0`` has ACS
  Request Redirect on: the pair goes through the host bridge (PHB);
- switch C (``0000:3x``): the NIC's downstream port's ACS could not be read:
  the pair is ``unknown`` (unverified, keeps PIX).

Paths are worked out by the lead's ``p2p.p2p_path`` (the probe's rule).
"""

from __future__ import annotations

import copy

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import p2p as p2p_lib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

QUIET = {"capability": True, "control": 0x01, "redirect": False}
REDIRECT = {"capability": True, "control": 0x1D, "redirect": True}
SWITCHES = {"A": 1, "B": 2, "C": 3}
GPU = {name: f"0000:{n}3:00.0" for name, n in SWITCHES.items()}
NIC = {name: f"0000:{n}4:00.0" for name, n in SWITCHES.items()}


def _chain(n: int, port: int) -> list[str]:
    return [f"0000:{n}0:01.0", f"0000:{n}1:00.0", f"0000:{n}2:0{port}.0"]


def dgx_topology(ready: bool | None = True, reasons: list[str] | None = None) -> dict[str, Any]:
    """The topology (a fresh copy); ``ready`` is ``gpudirect.ready``."""
    bridges, devices = [], []
    acs: dict[str, Any] = {}
    for name, n in SWITCHES.items():
        for bdf, role in ((f"0000:{n}0:01.0", "root_port"), (f"0000:{n}1:00.0", "switch_upstream"),
                          (f"0000:{n}2:00.0", "switch_downstream"), (f"0000:{n}2:01.0", "switch_downstream")):  # fmt: skip
            state = REDIRECT if bdf == "0000:22:00.0" else None if bdf == "0000:32:01.0" else QUIET
            bridges.append({"pci_address": bdf, "role": role, "acs": state})
            acs[bdf] = state
        for bdf, kind, port in ((GPU[name], "gpu", 0), (NIC[name], "rdma", 1)):
            device = {
                "pci_address": bdf,
                "kind": kind,
                "vendor_id": "0x10de" if kind == "gpu" else "0x15b3",
                "device_id": "0x2330" if kind == "gpu" else "0x1021",
                "numa_node": 0,
                "pcie_root": f"pci0000:{n}0",
                "bridges": _chain(n, port),
                "switches": [f"0000:{n}1:00.0"],
                "physfn": None,
                "acs": QUIET,
                "rdma_devices": [f"mlx5_{n}"] if kind == "rdma" else [],
                "netdevs": [{"name": f"ib{n}"}] if kind == "rdma" else [],
                "gpu": {"model": "NVIDIA H100 80GB HBM3", "minor": n} if kind == "gpu" else None,
            }
            devices.append(device)
            acs[bdf] = device["acs"]
    links = {g: {nic: ("PIX" if g[5] == nic[5] else "NODE") for nic in NIC.values()} for g in GPU.values()}
    chains = {d["pci_address"]: d["bridges"] for d in devices}
    p2p = {
        g: {nic: p2p_lib.p2p_path(g, chains[g], nic, chains[nic], acs) for nic in NIC.values()} for g in GPU.values()
    }
    nearest = {g: {"level": "PIX", "nics": [NIC[name]]} for name, g in GPU.items()}
    return {
        "hostname": "dgx",
        "numa_nodes": [{"id": 0, "cpulist": "0-7"}],
        "devices": devices,
        "bridges": bridges,
        "switches": [{"upstream_port": f"0000:{n}1:00.0", "parent": f"0000:{n}0:01.0"} for n in SWITCHES.values()],
        "links": links,
        "nearest_nics": nearest,
        "p2p": p2p,
        "gpudirect": {
            "iommu": {"mode": "passthrough", "groups": {}, "cmdline": ["iommu=pt"]},
            "peer_memory": {"method": "dma_buf", "dma_buf": True, "nvidia_peermem": False},
            "ready": ready,
            "reasons": list(reasons or ([] if ready else ["the IOMMU translates (group type DMA-FQ)"])),
        },
        "warnings": [],
    }


def without_gpudirect(topology: dict[str, Any]) -> dict[str, Any]:
    """The same node as facts from a probe before issue 77 have it: no ``acs``, ``p2p`` or ``gpudirect``."""
    old = copy.deepcopy(topology)
    old.pop("p2p", None)
    old.pop("gpudirect", None)
    for entry in old["devices"] + old["bridges"]:
        entry.pop("acs", None)
    return old
