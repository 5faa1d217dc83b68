# SPDX-License-Identifier: Apache-2.0
"""GPU x NIC levels (``nvidia-smi topo -m``) between the devices of a probe."""

from __future__ import annotations

import operator

from . import GPU_KINDS, LEVEL_RANK, LEVELS, NIC_KINDS
from .pci import pci_function_key

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def _effective_numa(device: dict[str, Any]) -> int | None:
    if device["numa_node"] is not None:
        return device["numa_node"]
    inferred = device.get("numa_node_inferred")
    return inferred["node"] if inferred else None


def pair_level(
    a_chain: list[str],
    b_chain: list[str],
    a_bdf: str,
    b_bdf: str,
    a_host: str | None,
    b_host: str | None,
    a_numa: int | None,
    b_numa: int | None,
    bridge_roles: dict[str, str],
    bridge_parent: dict[str, str | None],
) -> str:
    """nvidia-smi ``topo -m`` level between two PCI functions.

    PIX: at most one PCIe switch (or bridge) between them, or two functions of
    one device; PXB: several switches/bridges, host bridge not crossed; PHB:
    through their common host bridge; NODE: different host bridges on one
    NUMA node; SYS: different NUMA nodes, or locality unknown.
    """
    if a_host is not None and a_host == b_host:
        if pci_function_key(a_bdf)[0] == pci_function_key(b_bdf)[0] and a_chain == b_chain:
            return "PIX"
        common = 0
        for x, y in zip(a_chain, b_chain):
            if x != y:
                break
            common += 1
        if common == 0:
            return "PHB"
        hops = set()
        for chain in (a_chain, b_chain):
            for bridge in chain[common - 1 :]:
                role = bridge_roles.get(bridge)
                if role == "root_port":
                    continue
                hops.add(bridge_parent.get(bridge) if role == "switch_downstream" else bridge)
        return "PIX" if len(hops) <= 1 else "PXB"
    if a_numa is not None and a_numa == b_numa:
        return "NODE"
    return "SYS"


def compute_links(
    devices: list[dict[str, Any]],
    functions: dict[str, Any],
    bridge_roles: dict[str, str],
) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, Any]]]:
    """Level matrix {gpu: {nic: level}} and each GPU's nearest physical NICs.

    A VF sits on its PF's link, so it gets its PF's level without another walk.
    """
    bridge_parent = {bdf: f.parent for bdf, f in functions.items()}
    gpus = [d for d in devices if d["kind"] in GPU_KINDS]
    nics = [d for d in devices if d["kind"] in NIC_KINDS]
    # Levels are worked out for NICs that are not VFs of a listed PF; each
    # VF then takes its PF's (a PF sorts before its VFs). ``level_source``
    # names, per NIC in device order, whose level it has.
    own: list[dict[str, Any]] = []
    level_source: list[str] = []
    levels_known: set[str] = set()
    for nic in nics:
        pf = nic["physfn"]
        if pf in levels_known:
            level_source.append(pf)
        else:
            own.append(nic)
            level_source.append(nic["pci_address"])
            levels_known.add(nic["pci_address"])
    row_keys = [d["pci_address"] for d in nics]
    # One C-level lookup per GPU instead of a Python loop over hundreds of VFs.
    pick = operator.itemgetter(*level_source) if len(level_source) > 1 else None
    physical_nics = [d["pci_address"] for d in nics if not d["physfn"]]
    links: dict[str, dict[str, str]] = {}
    nearest: dict[str, dict[str, Any]] = {}
    for gpu in gpus:
        g = functions[gpu["pci_address"]]
        g_numa = _effective_numa(gpu)
        levels: dict[str, str] = {}
        for nic in own:
            n = functions[nic["pci_address"]]
            levels[nic["pci_address"]] = pair_level(
                g.chain,
                n.chain,
                g.bdf,
                n.bdf,
                g.host_key,
                n.host_key,
                g_numa,
                _effective_numa(nic),
                bridge_roles,
                bridge_parent,
            )
        if pick is not None:
            row = dict(zip(row_keys, pick(levels)))
        else:
            row = levels
        links[gpu["pci_address"]] = row
        physical = [(LEVEL_RANK[row[bdf]], bdf) for bdf in physical_nics]
        if physical:
            best = min(rank for rank, _bdf in physical)
            nearest[gpu["pci_address"]] = {
                "level": LEVELS[best],
                "nics": sorted(bdf for rank, bdf in physical if rank == best),
            }
        else:
            nearest[gpu["pci_address"]] = {"level": None, "nics": []}
    return links, nearest
