# SPDX-License-Identifier: Apache-2.0
"""Layouts of a site's nodes and the GPU x NIC level matrix of each layout.

A layout is the part of a topology that the report draws, without per-node
identifiers: nodes whose hardware is laid out the same way share one. Levels
are never recomputed here: the matrix comes from the probe's ``links`` (the
physical levels), each accelerator's nearest NIC from the level its traffic
flows at (:func:`device_model.pair_level`, with the probe's ``p2p``: a pair
through the host bridge is PHB). The ``p2p`` map is part of a layout: nodes
whose ACS settings differ are drawn apart.
Rails are not part of a layout (a per-node map may give the same NIC of two
such nodes different rails): :func:`rail_labels` labels a NIC with its rail
only where every node of the layout agrees.
"""

from __future__ import annotations

import hashlib
import json

from ansible_collections.aligned.dra.plugins.module_utils.controller.fabric import rails as fabric_rails
from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.dra.device_model import accelerator_labels
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import GPU_KINDS, LEVEL_RANK, LEVELS, NIC_KINDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

# Device fields that describe how a machine is built. Everything else (MACs,
# GUIDs, UUIDs, link state, memory size, hostname, sysfs path) differs between
# identical machines and stays out of the layout.
_DEVICE_LAYOUT_KEYS = (
    "pci_address",
    "kind",
    "class_id",
    "vendor_id",
    "device_id",
    "subsystem_vendor_id",
    "subsystem_device_id",
    "vendor_name",
    "device_name",
    "driver",
    "numa_node",
    "numa_node_inferred",
    "local_cpulist",
    "pcie_root",
    "host_bridge",
    "switches",
    "physfn",
)


# --------------------------------------------------------------------------
# Layouts: what is drawn, and its fingerprint
# --------------------------------------------------------------------------


def layout_model(topology: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a topology that the report draws, without per-node identifiers.

    Two nodes with the same layout model get the same picture and matrix. The
    renderer draws from this model only, so sharing a drawing between nodes is
    correct by construction.
    """
    devices = []
    for device in sorted(topology.get("devices", []), key=lambda d: d["pci_address"]):
        entry = {key: device.get(key) for key in _DEVICE_LAYOUT_KEYS}
        entry["netdevs"] = sorted(n.get("name") or "" for n in device.get("netdevs") or [])
        entry["rdma_devices"] = sorted(device.get("rdma_devices") or [])
        sriov = device.get("sriov")
        entry["sriov"] = {"numvfs": sriov.get("numvfs"), "totalvfs": sriov.get("totalvfs")} if sriov else None
        gpu = device.get("gpu") or {}
        entry["gpu_model"] = gpu.get("model")
        entry["gpu_minor"] = gpu.get("minor")
        devices.append(entry)
    switches = [
        {
            "upstream_port": s.get("upstream_port"),
            "parent": s.get("parent"),
            "vendor_id": s.get("vendor_id"),
            "device_id": s.get("device_id"),
        }
        for s in sorted(topology.get("switches", []), key=lambda s: s.get("upstream_port") or "")
    ]
    numa_nodes = [
        {"id": n.get("id"), "cpulist": n.get("cpulist"), "distances": n.get("distances")}
        for n in sorted(topology.get("numa_nodes", []), key=lambda n: n.get("id", 0))
    ]
    model = {
        "numa_nodes": numa_nodes,
        "devices": devices,
        "switches": switches,
        "links": topology.get("links", {}),
        "nearest_nics": topology.get("nearest_nics", {}),
    }
    if "p2p" in topology:  # facts before the probe read paths keep the layout (and fingerprint) they had
        model["p2p"] = topology.get("p2p") or {}
    return model


def layout_fingerprint(topology: Mapping[str, Any]) -> str:
    """sha256 of :func:`layout_model`: equal for machines built the same way."""
    canonical = json.dumps(layout_model(topology), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def group_layouts(nodes: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Group nodes by layout fingerprint.

    Returns ``[{"fingerprint", "hosts", "model"}]`` ordered by first host name;
    the model is taken from the first host (all hosts of a group share it).
    """
    groups: dict[str, dict[str, Any]] = {}
    for host in sorted(nodes):
        model = layout_model(nodes[host])
        canonical = json.dumps(model, sort_keys=True, separators=(",", ":"))
        fingerprint = hashlib.sha256(canonical.encode()).hexdigest()
        group = groups.get(fingerprint)
        if group is None:
            groups[fingerprint] = {"fingerprint": fingerprint, "hosts": [host], "model": model}
        else:
            group["hosts"].append(host)
    return sorted(groups.values(), key=lambda g: g["hosts"][0])


# --------------------------------------------------------------------------
# Matrix: GPU rows x NIC columns, VFs collapsed into their PF's column
# --------------------------------------------------------------------------


def effective_numa(device: Mapping[str, Any]) -> tuple[int | None, bool]:
    """``(NUMA node, inferred)`` of a device: its own node, else the one inferred by the probe."""
    if device.get("numa_node") is not None:
        return device["numa_node"], False
    inferred = device.get("numa_node_inferred")
    if inferred:
        return inferred.get("node"), True
    return None, False


# --------------------------------------------------------------------------
# Rails: one label per NIC for every node of a layout
# --------------------------------------------------------------------------

RAIL_VARIES = "rail varies"
NO_RAIL = "no rail"
RAIL_UNKNOWN = "rail unknown"
# _rail_of's answer for a NIC whose rail is unknown (a subnet rule on a captured tree): never "no rail"
_UNKNOWN = "unknown"


def _rail_of(entry: Mapping[str, Any] | None, address: str) -> tuple[int | str | None, str]:
    """``(rail, why)``: the rail, :data:`_UNKNOWN`, or ``None`` (on no rail)."""
    if entry is None:
        return None, "no rule on this node"
    for nic in entry.get("nics") or []:
        if nic.get("pci_address") == address:
            why = str(nic.get("why") or "")
            return (_UNKNOWN, why) if fabric_rails.nic_unknown(nic) else (nic.get("rail"), why)
    return None, "not an RDMA NIC of this node"


def _rail_words(rail: int | str | None) -> str:
    return "no rail" if rail is None else RAIL_UNKNOWN if rail == _UNKNOWN else f"rail {rail}"


def rail_labels(hosts: Iterable[str], rails_by_host: Mapping[str, Mapping[str, Any] | None]) -> dict[str, Any]:
    """``{PCI address: {"rail", "text", "why"}}`` for the RDMA NIC PFs of one layout's nodes.

    ``rails_by_host`` maps a host to its rails in ``summary.json`` (``None``:
    no rule). ``text`` is ``rail 3``, ``no rail`` or ``rail unknown`` (the
    rule cannot place the NIC here: a ``subnet`` rule on a captured tree;
    never said as no rail) when every node of the layout agrees, else
    ``rail varies`` (``rail`` is then ``None`` and ``why`` says which node
    has which). Empty when no node of the layout has a rule: the pictures
    then show no rails at all.
    """
    hosts = list(hosts)
    entries = {host: rails_by_host.get(host) for host in hosts}
    if all(entry is None for entry in entries.values()):
        return {}
    addresses = sorted(
        {nic["pci_address"] for entry in entries.values() if entry is not None for nic in entry.get("nics") or []}
    )
    labels: dict[str, Any] = {}
    order = {None: -2, _UNKNOWN: -1}
    for address in addresses:
        seen: dict[int | str | None, list[str]] = {}
        reasons: set[str] = set()
        for host in hosts:
            rail, why = _rail_of(entries[host], address)
            seen.setdefault(rail, []).append(host)
            if not isinstance(rail, int):
                reasons.add(why)
        if len(seen) > 1:
            parts = [
                f"{_rail_words(rail)} on {_hosts_text(who)}"
                for rail, who in sorted(seen.items(), key=lambda item: order.get(item[0], item[0]))  # type: ignore[arg-type]
            ]
            labels[address] = {"rail": None, "text": RAIL_VARIES, "why": "; ".join(parts)}
        elif None in seen or _UNKNOWN in seen:
            why = reasons.pop() if len(reasons) == 1 else "the reason differs between nodes"
            labels[address] = {"rail": None, "text": NO_RAIL if None in seen else RAIL_UNKNOWN, "why": why}
        else:
            rail = next(iter(seen))
            labels[address] = {"rail": rail, "text": f"rail {rail}", "why": ""}
    return labels


def _hosts_text(hosts: list[str]) -> str:
    if len(hosts) <= 3:
        return ", ".join(hosts)
    return f"{len(hosts)} nodes ({hosts[0]} \u2026 {hosts[-1]})"


def level_matrix(
    model: Mapping[str, Any], rdma_nics: Iterable[str] | None = None, rails: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """GPU x NIC matrix of a layout model, in ``nvidia-smi topo -m`` order.

    A VF shares its PF's column when it has the PF's level towards every GPU
    (the probe gives it the PF's link); otherwise, or when its PF is not on the
    node (a VM with a passed-through VF), it gets a column of its own.
    Rows are labelled by accelerator family and model (``GPU0``, ``VE0``,
    ``ACC0``: :func:`device_model.accelerator_labels`). ``rdma_nics`` are the
    physical NICs the planner pairs accelerators with
    (:func:`device_model.node_devices`); each row's ``nearest`` is its best
    level to one of them. Default: every NIC that owns an RDMA device.
    ``rails`` (:func:`rail_labels`) gives each column its ``rail`` label
    (``None`` where it has none); a VF's column takes its PF's.
    Returns ``{"gpus": [...], "nics": [...], "cells": {gpu: {column nic: level}}}``: the physical
    levels; ``nearest`` is at the level traffic flows at. A model with ``p2p`` adds ``paths``
    (``{gpu: {column nic: the probe's p2p entry or None}}``).
    """
    devices = {d["pci_address"]: d for d in model["devices"]}
    links = model["links"]
    p2p = model.get("p2p")
    gpus = [d for d in model["devices"] if d["kind"] in GPU_KINDS]
    nics = [d for d in model["devices"] if d["kind"] in NIC_KINDS]
    gpu_bdfs = [g["pci_address"] for g in gpus]

    def same_as_pf(vf: Mapping[str, Any]) -> bool:
        pf = vf.get("physfn")
        if pf not in devices or devices[pf]["kind"] not in NIC_KINDS:
            return False
        return all(links.get(g, {}).get(vf["pci_address"]) == links.get(g, {}).get(pf) for g in gpu_bdfs)

    columns: list[dict[str, Any]] = []
    by_bdf: dict[str, dict[str, Any]] = {}
    collapsed: list[Mapping[str, Any]] = []
    for nic in nics:
        if nic.get("physfn") and same_as_pf(nic):
            collapsed.append(nic)
            continue
        column = {
            "pci_address": nic["pci_address"],
            "kind": nic["kind"],
            "vf": bool(nic.get("physfn")),
            "physfn": nic.get("physfn"),
            "rdma_devices": nic.get("rdma_devices") or [],
            "netdevs": nic.get("netdevs") or [],
            "numa": effective_numa(nic),
            "local_cpulist": nic.get("local_cpulist"),
            "numvfs": (nic.get("sriov") or {}).get("numvfs") or 0,
            "collapsed_vfs": 0,
            "rail": (rails or {}).get(nic.get("physfn") or nic["pci_address"]),
        }
        columns.append(column)
        by_bdf[nic["pci_address"]] = column
    for vf in collapsed:
        by_bdf[vf["physfn"]]["collapsed_vfs"] += 1
    if rdma_nics is None:
        rdma_nics = [n["pci_address"] for n in nics if n.get("rdma_devices") and not n.get("physfn")]
    paired = set(rdma_nics)
    for index, column in enumerate(columns):
        column["label"] = f"NIC{index}"
        column["rdma_nic"] = column["pci_address"] in paired
    labels = accelerator_labels(gpus)
    rows = []
    cells: dict[str, dict[str, str | None]] = {}
    for gpu in gpus:
        bdf = gpu["pci_address"]
        flowing = ((nic, device_model.pair_level(links, bdf, nic, p2p)) for nic in links.get(bdf, {}))
        ranked = sorted((LEVEL_RANK[lv], nic) for nic, lv in flowing if nic in paired and lv in LEVEL_RANK)
        nearest = {"level": None, "nics": []}
        if ranked:
            nearest = {"level": LEVELS[ranked[0][0]], "nics": sorted(n for r, n in ranked if r == ranked[0][0])}
        rows.append(
            {
                "pci_address": bdf,
                "label": labels[bdf]["label"],
                "family": labels[bdf]["family"],
                "kind": gpu["kind"],
                "model": labels[bdf]["model"],
                "minor": gpu.get("gpu_minor"),
                "numa": effective_numa(gpu),
                "local_cpulist": gpu.get("local_cpulist"),
                "nearest": nearest,
            }
        )
        cells[bdf] = {c["pci_address"]: links.get(bdf, {}).get(c["pci_address"]) for c in columns}
    found = {"gpus": rows, "nics": columns, "cells": cells}
    if p2p is not None:
        found["paths"] = {g: {c["pci_address"]: device_model.pair_path(p2p, g, c["pci_address"]) for c in columns}
                          for g in cells}  # fmt: skip
    return found
