# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The site report: self-contained HTML pages built from topology facts.

One page per site and an index of sites. Per layout (nodes whose hardware is
laid out the same way are drawn once): an SVG picture of the machine (NUMA
nodes, PCIe root complexes, switches, GPUs, NICs with their VFs collapsed per
PF), the GPU x NIC level matrix in the layout of ``nvidia-smi topo -m`` and the
warnings. Per site: the node inventory, the alignment score and, when the
planner ran, what its claim templates achieve.

Levels are never recomputed here: the matrix, the best pairs and the score all
come from the probe's ``links`` and ``nearest_nics`` and from
:func:`topology.site_summary`, the same code the site summary uses.

Pages use no network, no fonts, no scripts: one HTML file with inline CSS and
inline SVG. Output is deterministic (no timestamps), so a rerun on the same
facts writes nothing. Pure Python (>= 3.9), no Ansible imports.
"""

from __future__ import annotations

import hashlib
import json
from html import escape

from ansible_collections.aligned.dra.plugins.module_utils.inputs import InputError, check_topologies
from ansible_collections.aligned.dra.plugins.module_utils.topology import (
    GPU_KINDS,
    LEVEL_RANK,
    LEVELS,
    NIC_KINDS,
    site_summary,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

REPORT_SCHEMA_VERSION = 1
PLAN_SCHEMA_VERSION = 1

# Alignment score buckets, best first: the share of GPUs whose nearest
# physical NIC is at these levels.
SCORE_BUCKETS = (
    ("aligned", "PIX/PXB", ("PIX", "PXB")),
    ("host", "PHB/NODE", ("PHB", "NODE")),
    ("sys", "SYS only", ("SYS",)),
    ("none", "no NIC", (None,)),
)

LEVEL_COLOURS = {
    "PIX": "#1a9850",
    "PXB": "#66bd63",
    "PHB": "#e6b400",
    "NODE": "#f46d43",
    "SYS": "#d73027",
}
LEVEL_MEANING = {
    "X": "Self",
    "PIX": "Connection traversing at most a single PCIe bridge",
    "PXB": "Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    "PHB": "Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "NODE": "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
    "SYS": "Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
}
NUMA_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#e15759", "#9c755f")
UNKNOWN_NUMA_COLOUR = "#8c8c8c"

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
# Collapsed leaves: these kinds are counted per parent instead of drawn one by one.
_GROUPED_KINDS = ("nvme", "other")

_LEAF_W = 112
_LEAF_H = 58
_GAP = 12
_ROW_H = 84
_BAND_HEAD = 30
_MARGIN = 16
_PAIR_DROP = 26


class ReportError(ValueError):
    """Input the report cannot use (names the file or field)."""


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
    return {
        "numa_nodes": numa_nodes,
        "devices": devices,
        "switches": switches,
        "links": topology.get("links", {}),
        "nearest_nics": topology.get("nearest_nics", {}),
    }


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


def _effective_numa(device: Mapping[str, Any]) -> tuple[int | None, bool]:
    if device.get("numa_node") is not None:
        return device["numa_node"], False
    inferred = device.get("numa_node_inferred")
    if inferred:
        return inferred.get("node"), True
    return None, False


def level_matrix(model: Mapping[str, Any]) -> dict[str, Any]:
    """GPU x NIC matrix of a layout model, in ``nvidia-smi topo -m`` order.

    A VF shares its PF's column when it has the PF's level towards every GPU
    (the probe gives it the PF's link); otherwise, or when its PF is not on the
    node (a VM with a passed-through VF), it gets a column of its own.
    Returns ``{"gpus": [...], "nics": [...], "cells": {gpu: {column nic: level}}}``.
    """
    devices = {d["pci_address"]: d for d in model["devices"]}
    links = model["links"]
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
            "numa": _effective_numa(nic),
            "local_cpulist": nic.get("local_cpulist"),
            "numvfs": (nic.get("sriov") or {}).get("numvfs") or 0,
            "collapsed_vfs": 0,
        }
        columns.append(column)
        by_bdf[nic["pci_address"]] = column
    for vf in collapsed:
        by_bdf[vf["physfn"]]["collapsed_vfs"] += 1
    for index, column in enumerate(columns):
        column["label"] = f"NIC{index}"
    rows = []
    cells: dict[str, dict[str, str | None]] = {}
    for index, gpu in enumerate(gpus):
        bdf = gpu["pci_address"]
        rows.append(
            {
                "pci_address": bdf,
                "label": f"GPU{index}",
                "kind": gpu["kind"],
                "model": gpu.get("gpu_model") or gpu.get("device_name"),
                "minor": gpu.get("gpu_minor"),
                "numa": _effective_numa(gpu),
                "local_cpulist": gpu.get("local_cpulist"),
                "nearest": model["nearest_nics"].get(bdf) or {"level": None, "nics": []},
            }
        )
        cells[bdf] = {c["pci_address"]: links.get(bdf, {}).get(c["pci_address"]) for c in columns}
    return {"gpus": rows, "nics": columns, "cells": cells}


# --------------------------------------------------------------------------
# SVG picture of one layout
# --------------------------------------------------------------------------


def _numa_colour(numa: int | None) -> str:
    if numa is None:
        return UNKNOWN_NUMA_COLOUR
    return NUMA_COLOURS[numa % len(NUMA_COLOURS)]


def _short(text: str | None, length: int = 17) -> str:
    if not text:
        return ""
    return text if len(text) <= length else text[: length - 1] + "\u2026"


class _TreeNode:
    __slots__ = ("key", "kind", "label", "sub", "children", "leaf", "numa", "x", "y", "w", "depth")

    def __init__(self, key: str, kind: str, label: str, sub: str = "") -> None:
        self.key = key
        self.kind = kind
        self.label = label
        self.sub = sub
        self.children: dict[str, _TreeNode] = {}
        self.leaf: dict[str, Any] | None = None
        self.numa: int | None = None
        self.x = 0.0
        self.y = 0.0
        self.w = 0.0
        self.depth = 0


def _leaf_numa_votes(node: _TreeNode, votes: dict[int | None, int]) -> None:
    if node.leaf is not None:
        numa = node.leaf["numa"]
        votes[numa] = votes.get(numa, 0) + node.leaf.get("count", 1)
    for child in node.children.values():
        _leaf_numa_votes(child, votes)


def _build_forest(model: Mapping[str, Any], matrix: Mapping[str, Any]) -> dict[int | None, list[_TreeNode]]:
    """Host bridge trees, grouped by the NUMA node most of their devices sit on."""
    devices = {d["pci_address"]: d for d in model["devices"]}
    switch_info = {s["upstream_port"]: s for s in model["switches"]}
    gpu_labels = {g["pci_address"]: g for g in matrix["gpus"]}
    nic_columns = {c["pci_address"]: c for c in matrix["nics"]}
    roots: dict[str, _TreeNode] = {}
    for device in model["devices"]:
        bdf = device["pci_address"]
        if device["kind"] in NIC_KINDS and bdf not in nic_columns:
            continue  # a VF drawn inside its PF
        if device.get("physfn") and device["kind"] not in NIC_KINDS and device["physfn"] in devices:
            continue  # GPU/other VFs: counted on the PF below
        host = device.get("host_bridge") or "unknown"
        root = roots.get(host)
        if root is None:
            sub = "root complex" if device.get("pcie_root") else "root complex, no pcieRoot"
            root = roots[host] = _TreeNode(host, "root", host, sub)
        parent = root
        for upstream in device.get("switches") or []:
            child = parent.children.get(upstream)
            if child is None:
                info = switch_info.get(upstream) or {}
                ids = ":".join(x[2:] for x in (info.get("vendor_id"), info.get("device_id")) if x)
                child = parent.children[upstream] = _TreeNode(upstream, "switch", upstream, f"PCIe switch {ids}")
            parent = child
        numa, inferred = _effective_numa(device)
        if device["kind"] in _GROUPED_KINDS:
            key = f"{parent.key}/{device['kind']}"
            leaf = parent.children.get(key)
            if leaf is None:
                leaf = parent.children[key] = _TreeNode(key, device["kind"], "", "")
                leaf.leaf = {"kind": device["kind"], "count": 0, "numa": numa, "first": bdf, "bdfs": []}
            leaf.leaf["count"] += 1
            leaf.leaf["bdfs"].append(bdf)
            continue
        node = parent.children[bdf] = _TreeNode(bdf, device["kind"], "", "")
        info: dict[str, Any] = {"kind": device["kind"], "bdf": bdf, "numa": numa, "inferred": inferred}
        if device["kind"] in GPU_KINDS:
            row = gpu_labels[bdf]
            info.update(label=row["label"], text=row["model"] or device.get("vendor_id") or "", gpu=True)
            vfs = sum(1 for d in model["devices"] if d.get("physfn") == bdf)
            info["vfs"] = vfs
        else:
            column = nic_columns[bdf]
            names = column["rdma_devices"] + column["netdevs"]
            info.update(label=column["label"] + (" (VF)" if column["vf"] else ""), text=" ".join(names[:2]))
            info["vfs"] = column["collapsed_vfs"]
            info["numvfs"] = column["numvfs"]
        node.leaf = info
    forest: dict[int | None, list[_TreeNode]] = {}
    for key in sorted(roots):
        root = roots[key]
        votes: dict[int | None, int] = {}
        _leaf_numa_votes(root, votes)
        numa = max(sorted(votes, key=lambda n: -1 if n is None else n), key=lambda n: votes[n]) if votes else None
        root.numa = numa
        forest.setdefault(numa, []).append(root)
    return forest


def _place(node: _TreeNode, x: float, depth: int) -> float:
    """Tidy placement: leaves left to right, parents centred above. Returns the width used."""
    node.depth = depth
    if not node.children:
        node.w = _LEAF_W
        node.x = x
        return _LEAF_W + _GAP
    used = 0.0
    for key in sorted(node.children, key=lambda k: (node.children[k].leaf is not None, k)):
        used += _place(node.children[key], x + used, depth + 1)
    first = min(c.x for c in node.children.values())
    last = max(c.x + c.w for c in node.children.values())
    node.w = min(max(last - first, _LEAF_W), 180)
    node.x = (first + last) / 2 - node.w / 2
    return max(used, _LEAF_W + _GAP)


def _max_depth(node: _TreeNode) -> int:
    return max([node.depth] + [_max_depth(c) for c in node.children.values()])


def _walk(node: _TreeNode) -> Iterable[_TreeNode]:
    yield node
    for child in node.children.values():
        yield from _walk(child)


def _text(x: float, y: float, text: str, cls: str = "", anchor: str = "middle") -> str:
    attrs = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.0f}" y="{y:.0f}" text-anchor="{anchor}"{attrs}>{escape(text)}</text>'


def node_svg(model: Mapping[str, Any], matrix: Mapping[str, Any] | None = None) -> str:
    """SVG picture of one layout: a band per NUMA node, a tree per root complex."""
    if matrix is None:
        matrix = level_matrix(model)
    forest = _build_forest(model, matrix)
    numa_info = {n["id"]: n for n in model["numa_nodes"]}
    band_ids = sorted(set(numa_info) | {n for n in forest if n is not None})
    if None in forest:
        band_ids.append(None)
    parts: list[str] = []
    y = _MARGIN
    width = 320.0
    centres: dict[str, tuple[float, float, float]] = {}
    for numa in band_ids:
        trees = forest.get(numa, [])
        x = _MARGIN + 8.0
        for tree in trees:
            x += _place(tree, x, 0) + _GAP
        depth = max([_max_depth(t) for t in trees] + [0])
        band_h = _BAND_HEAD + (depth + 1) * _ROW_H + (_PAIR_DROP + 22 if trees else 0)
        band_w = max(x - _MARGIN, 300.0)
        width = max(width, band_w + 2 * _MARGIN)
        colour = _numa_colour(numa)
        info = numa_info.get(numa) if numa is not None else None
        if numa is None:
            title = "NUMA node unknown (-1)"
        else:
            cpus = f"CPUs {info['cpulist']}" if info and info.get("cpulist") else "no CPUs listed"
            title = f"NUMA node {numa} \u2014 {cpus}"
        parts.append(
            f'<g class="numa" data-numa="{"unknown" if numa is None else numa}">'
            f'<rect x="{_MARGIN}" y="{y}" width="{band_w:.0f}" height="{band_h}" rx="8" '
            f'fill="{colour}" fill-opacity="0.08" stroke="{colour}" stroke-width="2"/>'
            + _text(_MARGIN + 10, y + 20, title, "band", "start")
        )
        if not trees:
            parts.append(_text(_MARGIN + 10, y + 48, "no PCI devices of interest", "muted", "start"))
        top = y + _BAND_HEAD
        for tree in trees:
            for node in _walk(tree):
                node.y = top + node.depth * _ROW_H
            for node in _walk(tree):
                for child in node.children.values():
                    x1, y1 = node.x + node.w / 2, node.y + (_LEAF_H - 18 if node.leaf is None else _LEAF_H)
                    x2, y2 = child.x + child.w / 2, child.y
                    mid = (y1 + y2) / 2
                    parts.append(f'<path class="edge" d="M{x1:.0f} {y1:.0f}V{mid:.0f}H{x2:.0f}V{y2:.0f}"/>')
            for node in _walk(tree):
                parts.append(_draw_node(node, colour))
                if node.leaf is not None and node.leaf.get("bdf"):
                    centres[node.leaf["bdf"]] = (node.x + node.w / 2, node.y + _LEAF_H, node.x)
        parts.append("</g>")
        y += band_h + _GAP
    parts.append(_draw_pairs(matrix, centres))
    height = y + _MARGIN - _GAP
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="topo" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img">'
    )
    return head + "".join(parts) + "</svg>"


def _draw_node(node: _TreeNode, band_colour: str) -> str:
    x, y, w = node.x, node.y, node.w
    if node.leaf is None:
        cls = "rc" if node.kind == "root" else "sw"
        h = _LEAF_H - 18
        return (
            f'<g class="{cls}" data-key="{escape(node.key)}"><rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" '
            f'height="{h}" rx="4"/>'
            + _text(x + w / 2, y + 16, _short(node.label, int(w / 6.2)))
            + _text(x + w / 2, y + 31, _short(node.sub, int(w / 6.2)), "sub")
            + "</g>"
        )
    leaf = node.leaf
    colour = _numa_colour(leaf["numa"])
    if leaf["kind"] in _GROUPED_KINDS:
        label = f"{leaf['count']} NVMe" if leaf["kind"] == "nvme" else f"{leaf['count']} other"
        return (
            f'<g class="dev {leaf["kind"]}" data-bdf="{escape(leaf["first"])}">'
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{_LEAF_H}" rx="4" stroke="{colour}"/>'
            + _text(x + w / 2, y + 18, label, "name")
            + _text(x + w / 2, y + 34, _short(leaf["first"] + (" \u2026" if leaf["count"] > 1 else ""), 18), "sub")
            + "</g>"
        )
    kind = "gpu" if leaf.get("gpu") else "nic"
    numa_text = "NUMA ?" if leaf["numa"] is None else f"NUMA {leaf['numa']}{'*' if leaf['inferred'] else ''}"
    extra = ""
    if kind == "nic" and leaf.get("numvfs"):
        extra = f'<text x="{x + w - 4:.0f}" y="{y + 14:.0f}" text-anchor="end" class="vfs">+{leaf["numvfs"]} VFs</text>'
    elif kind == "gpu" and leaf.get("vfs"):
        extra = f'<text x="{x + w - 4:.0f}" y="{y + 14:.0f}" text-anchor="end" class="vfs">+{leaf["vfs"]} VFs</text>'
    return (
        f'<g class="dev {kind}" data-bdf="{escape(leaf["bdf"])}">'
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{_LEAF_H}" rx="5" stroke="{colour}"/>'
        + _text(x + 6, y + 15, leaf["label"], "name", "start")
        + extra
        + _text(x + w / 2, y + 30, leaf["bdf"], "sub")
        + _text(x + w / 2, y + 43, _short(leaf.get("text"), 19), "sub")
        + _text(x + w / 2, y + 54, numa_text, "sub")
        + "</g>"
    )


def _draw_pairs(matrix: Mapping[str, Any], centres: Mapping[str, tuple[float, float, float]]) -> str:
    """Arcs from each GPU to its nearest physical NIC(s), coloured by level."""
    parts = ['<g class="pairs">']
    for row in matrix["gpus"]:
        nearest = row["nearest"]
        level = nearest.get("level")
        start = centres.get(row["pci_address"])
        targets = [n for n in nearest.get("nics", []) if n in centres]
        if start is None or level is None or level == "SYS" or not targets or len(targets) > 4:
            continue
        for index, nic in enumerate(targets):
            x1, y1, _x = start
            x2, y2, _x2 = centres[nic]
            drop = _PAIR_DROP + 5 * index
            parts.append(
                f'<path class="pair" data-gpu="{escape(row["pci_address"])}" data-nic="{escape(nic)}" '
                f'data-level="{level}" stroke="{LEVEL_COLOURS[level]}" '
                f'd="M{x1:.0f} {y1:.0f}C{x1:.0f} {max(y1, y2) + drop:.0f} {x2:.0f} {max(y1, y2) + drop:.0f} '
                f'{x2:.0f} {y2:.0f}"/>'
            )
            parts.append(_text((x1 + x2) / 2, max(y1, y2) + drop - 2, level, "pairlabel"))
    parts.append("</g>")
    return "".join(parts)


# --------------------------------------------------------------------------
# HTML
# --------------------------------------------------------------------------

_CSS = """
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0;color:#1d232a;background:#fafbfc}
header{background:#1d232a;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:22px}header p{margin:4px 0 0;color:#c9d1d9}
header a{color:#9ecbff}
main{padding:8px 24px 40px;max-width:1500px}
h2{margin:28px 0 8px;font-size:18px;border-bottom:1px solid #d0d7de;padding-bottom:4px}
h3{margin:18px 0 6px;font-size:16px}
table{border-collapse:collapse;margin:6px 0 10px;background:#fff}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f0f3f6}
td.num{text-align:right}
.muted{color:#6e7781;fill:#6e7781}
.warn{color:#9a3412}
ul.warnings li{color:#9a3412}
.score{display:flex;height:22px;width:520px;max-width:100%;border:1px solid #d0d7de;border-radius:4px;overflow:hidden}
.score span{display:block;height:100%}
.s-aligned{background:#1a9850}.s-host{background:#e6b400}.s-sys{background:#d73027}.s-none{background:#8c8c8c}
.key{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:baseline}
table.matrix td,table.matrix th{text-align:center;font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:13px}
table.matrix th.row{text-align:left}
td.lv-PIX{background:#c7e9c0}td.lv-PXB{background:#e5f5e0}td.lv-PHB{background:#fff3bf}
td.lv-NODE{background:#fdd0a2}td.lv-SYS{background:#fcbba1}
td.best{font-weight:700;outline:2px solid #1d232a;outline-offset:-3px}
.layout{background:#fff;border:1px solid #d0d7de;border-radius:8px;padding:8px 16px 12px;margin:16px 0}
.picture{overflow-x:auto;border:1px solid #eaeef2;border-radius:6px;background:#fff;margin:8px 0}
svg.topo{display:block;max-width:100%;height:auto;font-family:system-ui,"DejaVu Sans",sans-serif}
svg.topo text{font-size:11px;fill:#1d232a}
svg.topo text.band{font-size:13px;font-weight:600}
svg.topo text.name{font-weight:700}
svg.topo text.sub{font-size:10px;fill:#57606a}
svg.topo text.vfs{font-size:10px;fill:#0550ae;font-weight:700}
svg.topo text.pairlabel{font-size:10px;font-weight:700}
svg.topo .rc rect{fill:#eaeef2;stroke:#57606a}
svg.topo .sw rect{fill:#f6f8fa;stroke:#8c959f;stroke-dasharray:4 2}
svg.topo .dev rect{fill:#fff;stroke-width:2.5}
svg.topo .dev.gpu rect{fill:#f2f7ee}
svg.topo .dev.nic rect{fill:#eef4fb}
svg.topo .dev.nvme rect,svg.topo .dev.other rect{fill:#f6f8fa;stroke-width:1.5}
svg.topo path.edge{fill:none;stroke:#8c959f;stroke-width:1.2}
svg.topo path.pair{fill:none;stroke-width:2.5;opacity:.85}
details summary{cursor:pointer}
code{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:12.5px}
nav a{margin-right:12px}
svg.usage{display:block;font-family:system-ui,"DejaVu Sans",sans-serif;font-size:11px}
svg.usage rect.used{fill:#4e79a7}svg.usage rect.idle{fill:#d0d7de}
"""


def _page(title: str, subtitle: str, body: str, nav: str = "") -> str:
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="aligned.dra site report">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head>\n"
        f"<body><header><h1>{escape(title)}</h1><p>{subtitle}</p>{nav}</header>\n<main>\n{body}</main></body></html>\n"
    )


def alignment_score(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Share of a site's GPUs per level bucket of their nearest physical NIC.

    Takes :func:`topology.site_summary` output; returns ``{"gpus", "buckets":
    [{"key", "label", "count", "share"}]}`` (shares are fractions, 0 when no GPUs).
    """
    counts = {key: 0 for key, _label, _levels in SCORE_BUCKETS}
    total = 0
    for node in summary["per_node"].values():
        for best in node["best_level_per_gpu"].values():
            total += 1
            for key, _label, levels in SCORE_BUCKETS:
                if best.get("level") in levels:
                    counts[key] += 1
                    break
    return {
        "gpus": total,
        "buckets": [
            {"key": key, "label": label, "count": counts[key], "share": (counts[key] / total) if total else 0.0}
            for key, label, _levels in SCORE_BUCKETS
        ],
    }


def _score_html(score: Mapping[str, Any]) -> str:
    if not score["gpus"]:
        return '<p class="muted">No GPUs or accelerators on this site.</p>'
    stack = "".join(
        f'<span class="s-{b["key"]}" style="width:{b["share"] * 100:.2f}%" title="{escape(b["label"])}"></span>'
        for b in score["buckets"]
        if b["count"]
    )
    rows = "".join(
        f'<tr data-bucket="{b["key"]}"><td><span class="key s-{b["key"]}"></span>{escape(b["label"])}</td>'
        f'<td class="num">{b["count"]}</td><td class="num">{b["share"] * 100:.1f} %</td></tr>'
        for b in score["buckets"]
    )
    return (
        f'<div class="score" aria-label="alignment score">{stack}</div>'
        f'<table class="scoretable"><tr><th>nearest NIC of a GPU</th><th>GPUs</th><th>share</th></tr>{rows}</table>'
    )


def _level_cell(level: str | None, best: bool, gpu: str, nic: str) -> str:
    cls = f"lv-{level}" if level else ""
    if best:
        cls += " best"
    return f'<td class="{cls.strip()}" data-gpu="{escape(gpu)}" data-nic="{escape(nic)}">{level or "?"}</td>'


def _numa_text(numa: tuple[int | None, bool]) -> str:
    node, inferred = numa
    if node is None:
        return "N/A"
    return f"{node}*" if inferred else str(node)


def matrix_html(matrix: Mapping[str, Any]) -> str:
    """The GPU x NIC table and its legends, laid out like ``nvidia-smi topo -m``."""
    if not matrix["gpus"]:
        return '<p class="muted">No GPU or accelerator on this layout: no level matrix.</p>'
    if not matrix["nics"]:
        return '<p class="warn">GPUs but no NIC on this layout: every GPU is without a network path.</p>'
    head = "".join(f'<th data-nic="{escape(c["pci_address"])}">{c["label"]}</th>' for c in matrix["nics"])
    rows = []
    any_inferred = False
    for row in matrix["gpus"]:
        bdf = row["pci_address"]
        best = set(row["nearest"].get("nics") or [])
        cells = "".join(
            _level_cell(matrix["cells"][bdf][c["pci_address"]], c["pci_address"] in best, bdf, c["pci_address"])
            for c in matrix["nics"]
        )
        any_inferred = any_inferred or row["numa"][1]
        rows.append(
            f'<tr data-gpu="{escape(bdf)}"><th class="row">{row["label"]}</th>{cells}'
            f"<td>{escape(row['local_cpulist'] or 'N/A')}</td><td>{_numa_text(row['numa'])}</td>"
            f"<td>{escape(row['model'] or '')}</td></tr>"
        )
    table = (
        '<table class="matrix"><thead><tr><th></th>'
        f"{head}<th>CPU Affinity</th><th>NUMA Affinity</th><th>model</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    legend = "".join(f"<li><code>{k}</code> = {escape(v)}</li>" for k, v in LEVEL_MEANING.items() if k != "X")
    nic_legend = []
    for c in matrix["nics"]:
        names = ", ".join(c["rdma_devices"] + c["netdevs"]) or "no netdev/RDMA device"
        bits = [f"<code>{escape(c['pci_address'])}</code>", f"NUMA {_numa_text(c['numa'])}"]
        if c["vf"]:
            bits.append(f"VF of <code>{escape(c['physfn'] or '?')}</code>")
        if c["numvfs"]:
            bits.append(f"{c['numvfs']} VFs enabled")
        if c["collapsed_vfs"]:
            bits.append(f"{c['collapsed_vfs']} VFs shown in this column (same level as the PF)")
        nic_legend.append(
            f'<li data-nic="{escape(c["pci_address"])}" data-collapsed-vfs="{c["collapsed_vfs"]}">'
            f"<b>{c['label']}</b>: {escape(names)} ({'; '.join(bits)})</li>"
        )
    note = '<p class="muted">* NUMA node inferred: the kernel reports -1 for this device.</p>' if any_inferred else ""
    return (
        table
        + note
        + '<p class="muted">Bold framed cells: the GPU\'s nearest physical NIC(s). Legend:</p>'
        + f'<ul class="legend">{legend}</ul><p><b>NIC Legend:</b></p><ul class="nics">{"".join(nic_legend)}</ul>'
    )


def _hosts_html(hosts: list[str]) -> str:
    links = ", ".join(f'<a href="#node-{escape(h)}" data-host="{escape(h)}">{escape(h)}</a>' for h in hosts)
    if len(hosts) <= 12:
        return f'<p class="hosts">Nodes: {links}</p>'
    return f'<details class="hosts"><summary>{len(hosts)} nodes: {escape(hosts[0])} \u2026 {escape(hosts[-1])}</summary><p>{links}</p></details>'


def _warnings_by_text(hosts: list[str], warnings: Mapping[str, list[str]]) -> str:
    seen: dict[str, list[str]] = {}
    for host in hosts:
        for warning in warnings.get(host, []):
            seen.setdefault(warning, []).append(host)
    if not seen:
        return '<p class="muted">No warnings.</p>'
    items = []
    for text, who in seen.items():
        if len(who) == len(hosts):
            where = "all nodes of this layout" if len(hosts) > 1 else ""
        elif len(who) <= 5:
            where = ", ".join(who)
        else:
            where = f"{len(who)} nodes ({who[0]} \u2026 {who[-1]})"
        suffix = " \u2014 " + escape(where) if where else ""
        items.append(f"<li>{escape(text)}{suffix}</li>")
    return f'<ul class="warnings">{"".join(items)}</ul>'


def _layout_html(index: int, group: Mapping[str, Any], summary: Mapping[str, Any]) -> str:
    model = group["model"]
    matrix = level_matrix(model)
    hosts = group["hosts"]
    per_node = summary["per_node"]
    first = per_node[hosts[0]]
    gpus = matrix["gpus"]
    models = sorted({g["model"] for g in gpus if g["model"]})
    title = f"Layout {index + 1}"
    vfs = " \u00b7 {} VFs".format(first["vfs"]) if first["vfs"] else ""
    facts = (
        f"{len(hosts)} node{'s' if len(hosts) != 1 else ''} \u00b7 {len(model['numa_nodes'])} NUMA nodes \u00b7 "
        f"{first['gpus']} GPUs{(' (' + ', '.join(models) + ')') if models else ''} \u00b7 {first['nics']} NICs{vfs}"
    )
    warnings = {h: per_node[h]["warnings"] for h in hosts}
    return (
        f'<section class="layout" id="layout-{index + 1}" data-fingerprint="{group["fingerprint"]}" '
        f'data-hosts="{escape(" ".join(hosts))}">'
        f'<h3>{title} <span class="muted">({group["fingerprint"][:12]})</span></h3>'
        f"<p>{escape(facts)}</p>{_hosts_html(hosts)}"
        f'<div class="picture">{node_svg(model, matrix)}</div>'
        f"<h4>GPU \u00d7 NIC levels</h4>{matrix_html(matrix)}"
        f"<h4>Warnings</h4>{_warnings_by_text(hosts, warnings)}</section>\n"
    )


def _inventory_html(summary: Mapping[str, Any], layout_of: Mapping[str, int]) -> str:
    rows = []
    for host, node in summary["per_node"].items():
        hist = ", ".join(f"{lv} {n}" for lv, n in node["level_histogram"].items()) or "-"
        none = sum(1 for b in node["best_level_per_gpu"].values() if b.get("level") is None)
        if none:
            hist += f"{', ' if hist != '-' else ''}no NIC {none}" if hist != "-" else f"no NIC {none}"
        layout = layout_of[host]
        nwarn = len(node["warnings"])
        rows.append(
            f'<tr id="node-{escape(host)}" data-host="{escape(host)}"><td>{escape(host)}</td>'
            f'<td><a href="#layout-{layout}">{layout}</a></td><td class="num">{node["numa_nodes"]}</td>'
            f'<td class="num">{node["gpus"]}</td><td class="num">{node["nics"]}</td><td class="num">{node["vfs"]}</td>'
            f'<td>{escape(hist)}</td><td class="num{" warn" if nwarn else ""}">{nwarn}</td></tr>'
        )
    return (
        '<table class="inventory"><thead><tr><th>node</th><th>layout</th><th>NUMA</th><th>GPUs</th>'
        "<th>NICs</th><th>VFs</th><th>nearest NIC per GPU</th><th>warnings</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


# --------------------------------------------------------------------------
# Plan (the planner's plan.json)
# --------------------------------------------------------------------------


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def validate_plan(plan: Any, source: str = "plan.json") -> dict[str, Any]:
    """Check the fields of the planner's output that the report reads."""
    if not isinstance(plan, dict):
        raise ReportError(f"{source}: expected a JSON object, got {type(plan).__name__}")
    if plan.get("schema_version") != PLAN_SCHEMA_VERSION:
        raise ReportError(
            f"{source}: schema_version {plan.get('schema_version')!r} is not supported (expected {PLAN_SCHEMA_VERSION})"
        )
    templates = plan.get("templates")
    if not isinstance(templates, list):
        raise ReportError(f"{source}: 'templates' must be a list")
    for index, template in enumerate(templates):
        where = f"{source}: templates[{index}]"
        if not isinstance(template, dict):
            raise ReportError(f"{where} must be an object")
        for key in ("name", "required", "fits_total", "worst_level", "satisfiable", "errors", "nodes"):
            if key not in template:
                raise ReportError(f"{where} has no '{key}'")
        if template["worst_level"] is not None and template["worst_level"] not in LEVEL_RANK:
            raise ReportError(f"{where}.worst_level {template['worst_level']!r} is not one of {list(LEVELS)}")
        if not isinstance(template["nodes"], dict) or not isinstance(template["errors"], list):
            raise ReportError(f"{where}: 'nodes' must be an object and 'errors' a list")
        # Counts and flags go into the page as they are: only numbers and booleans are accepted.
        if not _count(template["fits_total"]):
            raise ReportError(f"{where}.fits_total {template['fits_total']!r} is not a count")
        for key in ("required", "satisfiable"):
            if not isinstance(template[key], bool):
                raise ReportError(f"{where}.{key} {template[key]!r} is not a boolean")
        for node, entry in template["nodes"].items():
            if not isinstance(entry, dict) or "fits" not in entry or "worst_level" not in entry:
                raise ReportError(f"{where}.nodes.{node} needs 'fits' and 'worst_level'")
            if not _count(entry["fits"]):
                raise ReportError(f"{where}.nodes.{node}.fits {entry['fits']!r} is not a count")
            if entry["worst_level"] is not None and entry["worst_level"] not in LEVEL_RANK:
                raise ReportError(
                    f"{where}.nodes.{node}.worst_level {entry['worst_level']!r} is not one of {list(LEVELS)}"
                )
    return plan


def _level_badge(level: str | None) -> str:
    if level is None:
        return '<span class="muted">none</span>'
    return f'<b style="color:{LEVEL_COLOURS[level]}">{level}</b>'


def plan_html(plan: Mapping[str, Any], max_errors: int = 20) -> str:
    """Capacity per claim template and the worst level inside allocations."""
    meta = ", ".join(
        f"{k} {escape(str(plan[k]))}" for k in ("kubernetes_version", "driver") if plan.get(k) not in (None, "")
    )
    rows = []
    details = []
    for template in plan["templates"]:
        name = str(template["name"])
        ok = template["satisfiable"]
        status = "satisfiable" if ok else "UNSATISFIABLE"
        cls = "" if ok else ' class="warn"'
        req = "required" if template["required"] else "optional"
        rows.append(
            f'<tr data-template="{escape(name)}"><td>{escape(name)}</td><td>{req}</td><td{cls}>{status}</td>'
            f'<td class="num">{template["fits_total"]}</td><td>{_level_badge(template["worst_level"])}</td>'
            f'<td class="num">{len(template["errors"])}</td></tr>'
        )
        groups: dict[tuple[int, str | None], list[str]] = {}
        for node, entry in sorted(template["nodes"].items()):
            groups.setdefault((entry["fits"], entry["worst_level"]), []).append(node)
        more = " \u2026"
        items = "".join(
            f"<li>{fits} claim{'s' if fits != 1 else ''} per node, worst level {_level_badge(level)}: "
            f"{len(nodes)} node{'s' if len(nodes) != 1 else ''} ({escape(', '.join(nodes[:8]))}"
            f"{more if len(nodes) > 8 else ''})</li>"
            for (fits, level), nodes in sorted(
                groups.items(), key=lambda kv: (-kv[0][0], LEVEL_RANK.get(kv[0][1], len(LEVELS)))
            )
        )
        if not items:
            items = '<li class="muted">no node fits one claim</li>'
        errors = "".join(
            f"<li>{escape(str(e.get('node', '?')))} {escape(str(e.get('device', '')))} request "
            f"{escape(str(e.get('request', '')))}: {escape(str(e.get('message', '')))}"
            f"{' <code>' + escape(str(e['expression'])) + '</code>' if e.get('expression') else ''}</li>"
            for e in template["errors"][:max_errors]
        )
        if len(template["errors"]) > max_errors:
            errors += f"<li>\u2026 and {len(template['errors']) - max_errors} more</li>"
        if errors:
            errors = f'<p class="warn">Errors that abort allocation:</p><ul class="warnings">{errors}</ul>'
        reason = ""
        if not ok and template.get("reason"):
            reason = f'<p class="warn">Why: {escape(str(template["reason"]))}</p>'
        details.append(
            f'<details class="template" data-template="{escape(name)}"><summary>{escape(name)}: '
            f"{template['fits_total']} claims fit on the site</summary>"
            f"{reason}<ul>{items}</ul>{errors}</details>"
        )
    table = (
        '<table class="plan"><thead><tr><th>claim template</th><th></th><th>status</th><th>claims that fit</th>'
        "<th>worst level in allocations</th><th>errors</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    intro = f'<p class="muted">Simulated allocation ({meta}).</p>' if meta else ""
    return intro + table + "".join(details)


def validate_teams(teams: Any, source: str = "teams.json") -> dict[str, Any]:
    """Check the fields of the teams summary (``aligned.dra.teams_render``) that the report reads."""
    if not isinstance(teams, dict) or teams.get("schema_version") != 1:
        raise ReportError(f"{source}: expected a JSON object with schema_version 1")
    for key in ("teams", "capacity"):
        if not isinstance(teams.get(key), list):
            raise ReportError(f"{source}: '{key}' must be a list")
    for index, row in enumerate(teams["capacity"]):
        for key in ("class", "capacity", "guaranteed", "opportunistic", "status", "teams"):
            if not isinstance(row, dict) or key not in row:
                raise ReportError(f"{source}: capacity[{index}] has no '{key}'")
    return teams


def validate_utilization(used: Any, source: str = "utilization.json") -> dict[str, Any]:
    """Check the fields of the utilization result (``aligned.dra.utilization``) that the report reads."""
    if not isinstance(used, dict) or used.get("schema_version") != 1:
        raise ReportError(f"{source}: expected a JSON object with schema_version 1")
    for key in ("totals", "claims", "nodes", "classes", "teams", "alignment"):
        if not isinstance(used.get(key), dict):
            raise ReportError(f"{source}: '{key}' must be an object")
    if not isinstance(used.get("shared"), list):
        raise ReportError(f"{source}: 'shared' must be a list")
    return used


_QUOTA_STATUS = {
    "ok": "within capacity",
    "oversubscribed": "oversubscribed (allowed)",
    "over_limit": "OVER THE ALLOWED FACTOR",
    "unknown": "capacity unknown (no plan)",
}


def teams_html(teams: Mapping[str, Any]) -> str:
    """Teams of the site and their guaranteed quotas against each class's capacity."""
    rows = []
    for row in teams["capacity"]:
        status = str(row["status"])
        cls = ' class="warn"' if status in ("oversubscribed", "over_limit") else ""
        capacity = "?" if row["capacity"] is None else row["capacity"]
        shares = ", ".join(
            f"{escape(str(name))} {entry['quota']}{'' if entry['guaranteed'] else ' (opportunistic)'}"
            for name, entry in sorted(row["teams"].items())
        )
        factor = row.get("factor") or 1.0
        rows.append(
            f'<tr data-class="{escape(str(row["class"]))}"><td>{escape(str(row["class"]))}</td>'
            f'<td class="num">{capacity}</td><td class="num">{row["guaranteed"]}</td>'
            f'<td class="num">{row["opportunistic"]}</td><td class="num">{factor:g}</td>'
            f"<td{cls}>{escape(_QUOTA_STATUS.get(status, status))}</td><td>{shares}</td></tr>"
        )
    team_rows = "".join(
        f'<tr data-team="{escape(str(t["name"]))}"><td>{escape(str(t["name"]))}</td>'
        f"<td>{escape(str(t['tier']))} (<code>priorityClassName: {escape(str(t['priority_class']))}</code>)</td>"
        f"<td>{escape(', '.join(t['namespaces']))}</td><td>{escape(', '.join(t['templates'])) or '-'}</td>"
        f"<td>{escape(', '.join(f'{k} {v}' for k, v in sorted(t['quotas'].items()))) or '-'}</td>"
        f"<td>{'yes' if t.get('admin_access') else 'no'}</td></tr>"
        for t in teams["teams"]
    )
    return (
        '<p class="muted">Guaranteed quotas (tiers that are guaranteed, quota times namespaces) against the '
        "devices each DeviceClass selects on the site (from the plan).</p>"
        '<table class="quotas"><thead><tr><th>DeviceClass</th><th>capacity</th><th>guaranteed</th>'
        "<th>opportunistic</th><th>allowed factor</th><th>status</th><th>teams</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        '<table class="teams"><thead><tr><th>team</th><th>tier</th><th>namespaces</th><th>claim templates</th>'
        f"<th>quotas per namespace</th><th>admin access</th></tr></thead><tbody>{team_rows}</tbody></table>"
    )


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f} %"


def utilization_svg(classes: Mapping[str, Mapping[str, Any]]) -> str:
    """A small horizontal bar chart: allocated and idle devices per class."""
    names = [name for name, row in classes.items() if row["published"]]
    if not names:
        return ""
    widest = max(row["published"] for row in classes.values())
    bar_w, label_w, row_h = 300, 170, 22
    height = row_h * len(names) + 8
    parts = []
    for index, name in enumerate(names):
        row = classes[name]
        y = 4 + index * row_h
        used = bar_w * row["allocated"] / widest
        idle = bar_w * row["idle"] / widest
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 14}" text-anchor="end">{escape(_short(name, 26))}</text>'
            f'<rect class="used" x="{label_w}" y="{y + 3}" width="{used:.1f}" height="14"/>'
            f'<rect class="idle" x="{label_w + used:.1f}" y="{y + 3}" width="{idle:.1f}" height="14"/>'
            f'<text x="{label_w + used + idle + 6:.1f}" y="{y + 14}">{row["allocated"]}/{row["published"]}</text>'
        )
    return (
        f'<svg class="usage" xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 60}" height="{height}" '
        f'viewBox="0 0 {label_w + bar_w + 60} {height}" role="img" aria-label="allocated and idle devices per class">'
        + "".join(parts)
        + "</svg>"
    )


def utilization_html(used: Mapping[str, Any]) -> str:
    """Devices published, allocated and idle per class, node and team; shared devices; measured levels."""
    totals = used["totals"]
    claims = used["claims"]
    share = _percent(totals.get("utilization"))
    intro = (
        f"<p>{totals['allocated']} of {totals['published']} devices allocated ({share}), {totals['idle']} idle; "
        f"{claims['allocated']} allocated claims, {claims['pending']} pending, "
        f"{claims['admin_access_results']} devices held with admin access (not counted).</p>"
    )
    chart = utilization_svg(used["classes"])
    legend = (
        '<p class="muted"><span class="key" style="background:#4e79a7"></span>allocated '
        '<span class="key" style="background:#d0d7de"></span>idle</p>'
        if chart
        else ""
    )

    def count_rows(rows: Mapping[str, Mapping[str, Any]], attr: str) -> str:
        return "".join(
            f'<tr data-{attr}="{escape(str(name))}"><td>{escape(str(name))}</td><td class="num">{r["published"]}</td>'
            f'<td class="num">{r["allocated"]}</td><td class="num">{r["idle"]}</td>'
            f'<td class="num">{_percent(r.get("utilization"))}</td></tr>'
            for name, r in rows.items()
        )

    head = "<th>published</th><th>allocated</th><th>idle</th><th>utilization</th></tr></thead>"
    classes = f'<table class="usage-classes"><thead><tr><th>class</th>{head}<tbody>{count_rows(used["classes"], "class")}</tbody></table>'
    nodes = (
        f'<details><summary>Per node ({len(used["nodes"])})</summary><table class="usage-nodes"><thead><tr>'
        f"<th>node</th>{head}<tbody>{count_rows(used['nodes'], 'node')}</tbody></table></details>"
    )
    team_rows = "".join(
        f'<tr data-team="{escape(str(name))}"><td>{escape(str(name))}</td><td class="num">{t["claims"]}</td>'
        f"<td>{escape(', '.join(f'{k} {v}' for k, v in sorted(t['devices'].items())))}</td>"
        f"<td>{' '.join(f'{_level_badge(lv)} {n}' for lv, n in sorted(t['levels'].items(), key=lambda kv: LEVEL_RANK[kv[0]]))}"
        "</td></tr>"
        for name, t in used["teams"].items()
    )
    teams = (
        '<table class="usage-teams"><thead><tr><th>team</th><th>claims</th><th>devices</th>'
        f"<th>GPU-NIC level of its claims</th></tr></thead><tbody>{team_rows}</tbody></table>"
    )
    alignment = used["alignment"]
    levels = ", ".join(f"{_level_badge(lv)} {n}" for lv, n in alignment["levels"].items() if n and lv in LEVEL_RANK)
    if alignment["levels"].get("unknown"):
        levels += f", unknown {alignment['levels']['unknown']}"
    promise = ""
    if alignment.get("promised_level"):
        below = alignment.get("below_promise") or []
        promise = f" The plan promises {_level_badge(alignment['promised_level'])} at worst; " + (
            f'<span class="warn">{len(below)} claim(s) got less: {escape(", ".join(below[:10]))}</span>'
            if below
            else "every measured claim got it."
        )
    measured = (
        f"<p>{alignment['claims_with_gpus_and_nics']} claims hold GPUs and NICs: {levels or 'none'} "
        f'<span class="muted">(levels from {escape(" and ".join(alignment["level_source"]) or "nothing")})</span>.'
        f"{promise}</p>"
    )
    shared = "".join(
        f"<li>{escape(str(s['node']))} {escape(str(s['device']))}: {s['claims']} claim(s), {s['consumers']} consumer(s)"
        + "".join(f", {escape(k)} {v['share'] * 100:.0f} % used" for k, v in s["capacity"].items() if v.get("share"))
        + "</li>"
        for s in used["shared"]
    )
    shared = f"<p>Shared devices:</p><ul>{shared}</ul>" if shared else '<p class="muted">No shared devices.</p>'
    return (
        intro
        + chart
        + legend
        + classes
        + nodes
        + "<h3>Teams</h3>"
        + teams
        + "<h3>Alignment measured</h3>"
        + measured
        + shared
    )


# --------------------------------------------------------------------------
# Pages
# --------------------------------------------------------------------------


def site_report(
    site: str,
    nodes: Mapping[str, Mapping[str, Any]],
    warn_levels: Iterable[str] = ("SYS",),
    plan: Mapping[str, Any] | None = None,
    teams: Mapping[str, Any] | None = None,
    utilization: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build a site page. Returns ``{"html", "summary", "score", "layouts"}``."""
    summary = site_summary(site, dict(nodes), warn_levels)
    groups = group_layouts(nodes)
    layout_of = {host: index + 1 for index, group in enumerate(groups) for host in group["hosts"]}
    score = alignment_score(summary)
    sections = [
        "<h2>Alignment score</h2>",
        '<p class="muted">Share of GPUs/accelerators by the level of their nearest physical NIC '
        "(PIX/PXB: same PCIe switch; PHB/NODE: through the CPU; SYS: across NUMA nodes).</p>",
        _score_html(score),
    ]
    if plan is not None:
        sections += ["<h2>Claim templates (planner)</h2>", plan_html(plan)]
    else:
        sections += [
            "<h2>Claim templates (planner)</h2>",
            '<p class="muted">No plan for this site yet: run the claims stage to see what each claim template '
            "allocates here.</p>",
        ]
    if teams is not None:
        sections += ["<h2>Teams and quotas</h2>", teams_html(teams)]
    if utilization is not None:
        sections += ["<h2>Utilization</h2>", utilization_html(utilization)]
    sections += ["<h2>Nodes</h2>", _inventory_html(summary, layout_of)]
    sections.append(
        f'<h2>Layouts</h2><p class="muted">{len(groups)} distinct layout{"s" if len(groups) != 1 else ""} '
        f"for {summary['nodes']} nodes; nodes built the same way are drawn once. Colours: NUMA node "
        "(box outline); arcs join each GPU to its nearest NIC(s), coloured by level.</p>"
    )
    sections += [_layout_html(index, group, summary) for index, group in enumerate(groups)]
    subtitle = (
        f"{summary['nodes']} nodes \u00b7 {summary['gpus']} GPUs/accelerators \u00b7 {summary['nics']} physical NICs "
        f"\u00b7 {summary['vfs']} VFs \u00b7 {len(summary['warnings'])} warnings"
    )
    nav = (
        '<nav><a href="../index.html">all sites</a><a href="summary.json">summary.json</a>'
        + ('<a href="plan.json">plan.json</a>' if plan is not None else "")
        + ('<a href="teams.json">teams.json</a>' if teams is not None else "")
        + ('<a href="utilization.json">utilization.json</a>' if utilization is not None else "")
        + "</nav>"
    )
    html = _page(f"Site {site}", escape(subtitle), "\n".join(sections), nav)
    return {"html": html, "summary": summary, "score": score, "layouts": groups}


def index_page(sites: Iterable[Mapping[str, Any]]) -> str:
    """Index of sites. Each entry: ``{"site", "summary", "score", "layouts", "plan"}``."""
    rows = []
    for entry in sites:
        summary, score = entry["summary"], entry["score"]
        aligned = score["buckets"][0]
        share = f"{aligned['share'] * 100:.0f} %" if score["gpus"] else "-"
        plan = entry.get("plan")
        if plan is None:
            plan_text = '<span class="muted">no plan</span>'
        else:
            bad = [t["name"] for t in plan["templates"] if not t["satisfiable"]]
            plan_text = f"{len(plan['templates'])} templates" + (
                f', <span class="warn">{len(bad)} unsatisfiable</span>' if bad else ""
            )
        site = escape(entry["site"])
        rows.append(
            f'<tr data-site="{site}"><td><a href="{site}/report.html">{site}</a></td>'
            f'<td class="num">{summary["nodes"]}</td><td class="num">{len(entry["layouts"])}</td>'
            f'<td class="num">{summary["gpus"]}</td><td class="num">{summary["nics"]}</td>'
            f'<td class="num">{share}</td><td>{plan_text}</td>'
            f'<td class="num">{len(summary["warnings"])}</td></tr>'
        )
    body = (
        "<h2>Sites</h2>"
        '<table class="sites"><thead><tr><th>site</th><th>nodes</th><th>layouts</th><th>GPUs</th><th>NICs</th>'
        "<th>GPUs with a NIC at PIX/PXB</th><th>plan</th><th>warnings</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    return _page("aligned.dra sites", "Topology of every probed site", body)


# --------------------------------------------------------------------------
# Files: from what the topology role wrote to the pages
# --------------------------------------------------------------------------


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        raise ReportError(f"{what} {path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise ReportError(f"{what} {path} cannot be read: {exc}") from None


def build_reports(
    output_dir: str,
    sites: Iterable[str] | None = None,
    warn_levels: Iterable[str] = ("SYS",),
) -> dict[str, Any]:
    """Pages for the sites in ``<output_dir>/index.json`` (written by the topology role).

    Reads each site's node files listed in the index and, when present, its
    ``plan.json``. Returns ``{"files": {relative path: html}, "sites": {site: info}}``;
    writes nothing. Raises :class:`ReportError` naming the file or site at fault.
    """
    import os

    warn_levels = list(warn_levels)
    unknown = [lv for lv in warn_levels if lv not in LEVEL_RANK]
    if unknown:
        raise ReportError(f"warn_levels: unknown level(s) {unknown}; use {list(LEVELS)}")
    index_path = os.path.join(output_dir, "index.json")
    if not os.path.exists(index_path):
        raise ReportError(f"{index_path} does not exist: run the topology role (playbooks/probe.yml) first")
    index = _read_json(index_path, "site index")
    if not isinstance(index, dict) or not isinstance(index.get("sites"), list):
        raise ReportError(f"site index {index_path} has no 'sites' list")
    available = {str(entry.get("site")): entry for entry in index["sites"] if isinstance(entry, dict)}
    wanted = sorted(available) if sites is None else list(sites)
    missing = [s for s in wanted if s not in available]
    if missing:
        raise ReportError(f"sites {missing} are not in {index_path} (it has {sorted(available)})")
    files: dict[str, str] = {}
    info: dict[str, Any] = {}
    entries = []
    for site in wanted:
        nodes = {}
        for rel in available[site].get("node_files") or []:
            host = os.path.basename(rel)[: -len(".json")] if rel.endswith(".json") else os.path.basename(rel)
            nodes[host] = _read_json(os.path.join(output_dir, rel), f"site {site}: node file")
            if not isinstance(nodes[host], dict) or "devices" not in nodes[host]:
                raise ReportError(f"site {site}: node file {rel} is not a topology (no 'devices')")
            try:
                check_topologies({host: nodes[host]}, "topology")
            except InputError as exc:
                raise ReportError(f"site {site}: node file {rel} is not a topology: {exc}") from None
        plan_path = os.path.join(output_dir, site, "plan.json")
        plan = None
        if os.path.exists(plan_path):
            plan = validate_plan(_read_json(plan_path, f"site {site}: plan"), plan_path)
        extra = {}
        for key, check in (("teams", validate_teams), ("utilization", validate_utilization)):
            path = os.path.join(output_dir, site, f"{key}.json")
            if os.path.exists(path):
                extra[key] = check(_read_json(path, f"site {site}: {key}"), path)
        result = site_report(site, nodes, warn_levels, plan, **extra)
        files[f"{site}/report.html"] = result["html"]
        entries.append({"site": site, "plan": plan, **result})
        info[site] = {
            "report": f"{site}/report.html",
            "nodes": result["summary"]["nodes"],
            "layouts": [{"fingerprint": g["fingerprint"], "hosts": g["hosts"]} for g in result["layouts"]],
            "score": {b["key"]: b["count"] for b in result["score"]["buckets"]},
            "gpus": result["score"]["gpus"],
            "plan": plan is not None,
            "warnings": len(result["summary"]["warnings"]),
        }
    # The index lists every site of index.json that has a page, built now or before.
    all_entries = list(entries)
    if sites is not None:
        for site in sorted(set(available) - set(wanted)):
            if os.path.exists(os.path.join(output_dir, site, "report.html")):
                all_entries.append(_index_entry_from_files(output_dir, site, available[site], warn_levels))
    files["index.html"] = index_page(sorted(all_entries, key=lambda e: e["site"]))
    return {"files": files, "sites": info}


def _index_entry_from_files(output_dir: str, site: str, entry: Mapping[str, Any], warn_levels: list[str]) -> dict:
    """Index row for a site that is not rebuilt this time (recomputed from its files, not drawn)."""
    import os

    nodes = {
        os.path.basename(rel)[: -len(".json")]: _read_json(os.path.join(output_dir, rel), f"site {site}: node file")
        for rel in entry.get("node_files") or []
    }
    summary = site_summary(site, nodes, warn_levels)
    plan_path = os.path.join(output_dir, site, "plan.json")
    plan = validate_plan(_read_json(plan_path, "plan"), plan_path) if os.path.exists(plan_path) else None
    return {
        "site": site,
        "summary": summary,
        "score": alignment_score(summary),
        "layouts": group_layouts(nodes),
        "plan": plan,
    }
