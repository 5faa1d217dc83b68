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

from ansible_collections.aligned.dra.plugins.module_utils.controller.site.inputs import InputError, check_topologies
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology.summary import site_summary
from ansible_collections.aligned.dra.plugins.module_utils.dra.device_model import (
    accelerator_labels,
    family_counts_text,
    node_devices,
    plural,
)
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import GPU_KINDS, LEVEL_RANK, LEVELS, NIC_KINDS

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
    ("none", "no RDMA NIC", (None,)),
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


def level_matrix(model: Mapping[str, Any], rdma_nics: Iterable[str] | None = None) -> dict[str, Any]:
    """GPU x NIC matrix of a layout model, in ``nvidia-smi topo -m`` order.

    A VF shares its PF's column when it has the PF's level towards every GPU
    (the probe gives it the PF's link); otherwise, or when its PF is not on the
    node (a VM with a passed-through VF), it gets a column of its own.
    Rows are labelled by accelerator family and model (``GPU0``, ``VE0``,
    ``ACC0``: :func:`device_model.accelerator_labels`). ``rdma_nics`` are the
    physical NICs the planner pairs accelerators with
    (:func:`device_model.node_devices`); each row's ``nearest`` is its best
    level to one of them. Default: every NIC that owns an RDMA device.
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
        ranked = sorted(
            (LEVEL_RANK[lv], nic) for nic, lv in links.get(bdf, {}).items() if nic in paired and lv in LEVEL_RANK
        )
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
                "numa": _effective_numa(gpu),
                "local_cpulist": gpu.get("local_cpulist"),
                "nearest": nearest,
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
            info.update(label=row["label"], text=row["model"], gpu=True)
            vfs = sum(1 for d in model["devices"] if d.get("physfn") == bdf)
            info["vfs"] = vfs
        else:
            column = nic_columns[bdf]
            names = column["rdma_devices"] + column["netdevs"]
            label = column["label"] + (" (VF)" if column["vf"] else "")
            info.update(label=label, text=" ".join(names[:2]) or "no netdev/RDMA", rdma_nic=column["rdma_nic"])
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


# --------------------------------------------------------------------------
# Text that fits its box
# --------------------------------------------------------------------------

# Upper bounds of a character's advance in em for the sans-serif fonts the
# pages ask for (system-ui, DejaVu Sans and their bold faces): a label cut to
# fit with these never overflows its box, whatever font the browser picks.
_NARROW = frozenset("il.,:;|!'`ijfrtI()[]{} ")
_WIDE = frozenset("mwMW@%\u2026\u00d7")


def _char_em(char: str) -> float:
    if char in _NARROW:
        return 0.45
    if char in _WIDE:
        return 1.15
    if char.isupper():
        return 0.88
    if char.isdigit():
        return 0.72
    if char.islower() or char in "-_/#*+=?~^\u00b7":
        return 0.74
    return 1.2


def text_width(text: str, size: float) -> float:
    """Upper bound of the rendered width of ``text`` in px at font size ``size``."""
    return size * sum(_char_em(c) for c in text)


def fit_text(text: str | None, width: float, size: float) -> dict[str, str]:
    """``{"text", "full"}``: ``text`` cut with an ellipsis to ``width`` px; ``full`` is set when it was cut."""
    text = text or ""
    if text_width(text, size) <= width:
        return {"text": text, "full": ""}
    budget = width - text_width("\u2026", size)
    shown = ""
    used = 0.0
    for char in text:
        used += size * _char_em(char)
        if used > budget:
            break
        shown += char
    return {"text": shown.rstrip() + "\u2026", "full": text}


def _label(
    x: float, y: float, text: str | None, width: float, size: float, cls: str = "", anchor: str = "middle"
) -> dict[str, Any]:
    """An SVG text of the picture, cut to ``width`` (the box it sits in, less padding)."""
    fitted = fit_text(text, width, size)
    return {"x": f"{x:.0f}", "y": f"{y:.0f}", "cls": cls, "anchor": anchor, "width": f"{width:.0f}", **fitted}


# Font sizes (px) of the picture's texts; the page's CSS sets the same.
_FONT = {"": 11.0, "name": 11.0, "sub": 10.0, "vfs": 10.0, "band": 13.0, "pairlabel": 10.0, "muted": 11.0}


# --------------------------------------------------------------------------
# SVG picture of one layout: geometry only, drawn by the templates
# --------------------------------------------------------------------------


def node_picture(model: Mapping[str, Any], matrix: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Geometry of the picture of one layout: a band per NUMA node, a tree per root complex.

    Returns ``{"width", "height", "bands": [...], "pairs": [...]}`` for the
    ``picture`` macro of the templates.
    """
    if matrix is None:
        matrix = level_matrix(model)
    forest = _build_forest(model, matrix)
    numa_info = {n["id"]: n for n in model["numa_nodes"]}
    band_ids = sorted(set(numa_info) | {n for n in forest if n is not None})
    if None in forest:
        band_ids.append(None)
    bands: list[dict[str, Any]] = []
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
        band: dict[str, Any] = {
            "numa": "unknown" if numa is None else str(numa),
            "x": _MARGIN,
            "y": y,
            "w": f"{band_w:.0f}",
            "h": band_h,
            "colour": colour,
            "texts": [_label(_MARGIN + 10, y + 20, title, band_w - 20, _FONT["band"], "band", "start")],
            "edges": [],
            "nodes": [],
        }
        if not trees:
            band["texts"].append(
                _label(
                    _MARGIN + 10, y + 48, "no PCI devices of interest", band_w - 20, _FONT["muted"], "muted", "start"
                )
            )
        top = y + _BAND_HEAD
        for tree in trees:
            for node in _walk(tree):
                node.y = top + node.depth * _ROW_H
            for node in _walk(tree):
                for child in node.children.values():
                    x1, y1 = node.x + node.w / 2, node.y + (_LEAF_H - 18 if node.leaf is None else _LEAF_H)
                    x2, y2 = child.x + child.w / 2, child.y
                    mid = (y1 + y2) / 2
                    band["edges"].append(f"M{x1:.0f} {y1:.0f}V{mid:.0f}H{x2:.0f}V{y2:.0f}")
            for node in _walk(tree):
                band["nodes"].append(_node_shape(node))
                if node.leaf is not None and node.leaf.get("bdf"):
                    centres[node.leaf["bdf"]] = (node.x + node.w / 2, node.y + _LEAF_H, node.x)
        bands.append(band)
        y += band_h + _GAP
    return {
        "width": f"{width:.0f}",
        "height": f"{y + _MARGIN - _GAP:.0f}",
        "bands": bands,
        "pairs": _pair_shapes(matrix, centres),
    }


def _node_shape(node: _TreeNode) -> dict[str, Any]:
    """One box of the picture: ``{"cls", "data", "rect", "stroke", "texts"}``."""
    x, y, w = node.x, node.y, node.w
    inner = w - 8
    if node.leaf is None:
        h = _LEAF_H - 18
        return {
            "cls": "rc" if node.kind == "root" else "sw",
            "data": {"key": node.key},
            "rect": {"x": f"{x:.0f}", "y": f"{y:.0f}", "w": f"{w:.0f}", "h": h, "rx": 4},
            "stroke": "",
            "texts": [
                _label(x + w / 2, y + 16, node.label, inner, _FONT[""]),
                _label(x + w / 2, y + 31, node.sub, inner, _FONT["sub"], "sub"),
            ],
        }
    leaf = node.leaf
    colour = _numa_colour(leaf["numa"])
    rect = {"x": f"{x:.0f}", "y": f"{y:.0f}", "w": f"{w:.0f}", "h": _LEAF_H, "rx": 4}
    if leaf["kind"] in _GROUPED_KINDS:
        label = f"{leaf['count']} NVMe" if leaf["kind"] == "nvme" else f"{leaf['count']} other"
        return {
            "cls": f"dev {leaf['kind']}",
            "data": {"bdf": leaf["first"]},
            "rect": rect,
            "stroke": colour,
            "texts": [
                _label(x + w / 2, y + 18, label, inner, _FONT["name"], "name"),
                _label(
                    x + w / 2,
                    y + 34,
                    leaf["first"] + (" \u2026" if leaf["count"] > 1 else ""),
                    inner,
                    _FONT["sub"],
                    "sub",
                ),
            ],
        }
    kind = "gpu" if leaf.get("gpu") else "nic"
    numa_text = "NUMA ?" if leaf["numa"] is None else f"NUMA {leaf['numa']}{'*' if leaf['inferred'] else ''}"
    rect["rx"] = 5
    vfs = leaf.get("numvfs") if kind == "nic" else leaf.get("vfs")
    texts = []
    name_width = inner
    if vfs:
        extra = f"+{vfs} VFs"
        extra_w = text_width(extra, _FONT["vfs"])
        texts.append(_label(x + w - 4, y + 14, extra, extra_w, _FONT["vfs"], "vfs", "end"))
        name_width = max(inner - extra_w - 4, 20)
    texts.insert(0, _label(x + 6, y + 15, leaf["label"], name_width, _FONT["name"], "name", "start"))
    texts += [
        _label(x + w / 2, y + 30, leaf["bdf"], inner, _FONT["sub"], "sub"),
        _label(x + w / 2, y + 43, leaf.get("text"), inner, _FONT["sub"], "sub"),
        _label(x + w / 2, y + 54, numa_text, inner, _FONT["sub"], "sub"),
    ]
    # A NIC the planner does not pair accelerators with (no RDMA device, or not published) is drawn dashed.
    cls = f"dev {kind}" + (" plain" if kind == "nic" and not leaf.get("rdma_nic") else "")
    return {"cls": cls, "data": {"bdf": leaf["bdf"]}, "rect": rect, "stroke": colour, "texts": texts}


def _pair_shapes(matrix: Mapping[str, Any], centres: Mapping[str, tuple[float, float, float]]) -> list[dict[str, Any]]:
    """Arcs from each accelerator to its nearest RDMA NIC(s), coloured by level."""
    pairs = []
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
            low = max(y1, y2) + drop
            pairs.append(
                {
                    "gpu": row["pci_address"],
                    "nic": nic,
                    "level": level,
                    "colour": LEVEL_COLOURS[level],
                    "d": f"M{x1:.0f} {y1:.0f}C{x1:.0f} {low:.0f} {x2:.0f} {low:.0f} {x2:.0f} {y2:.0f}",
                    "label": {"x": f"{(x1 + x2) / 2:.0f}", "y": f"{low - 2:.0f}", "text": level},
                }
            )
    return pairs


# --------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------

# The pages' Jinja2 templates ship in the collection as roles/report/templates/report/.
# The site_report action reads them on the controller and hands their text to
# the module; tests and callers in this checkout read them from disk.
TEMPLATE_NAMES = (
    "page.html.j2",
    "macros.html.j2",
    "site.html.j2",
    "index.html.j2",
    "layout.html.j2",
    "plan.html.j2",
    "teams.html.j2",
    "utilization.html.j2",
)


def default_template_dir() -> str:
    """``roles/report/templates/report`` of the collection this file belongs to."""
    import os

    # plugins/module_utils/controller/report/ -> the collection's root
    root = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 4))
    return os.path.join(root, "roles", "report", "templates", "report")


def load_templates(directory: str | None = None) -> dict[str, str]:
    """``{name: source}`` of the report's templates, read from ``directory`` (default: the collection's)."""
    import os

    directory = directory or default_template_dir()
    sources = {}
    for name in TEMPLATE_NAMES:
        path = os.path.join(directory, name)
        try:
            with open(path, encoding="utf-8") as handle:
                sources[name] = handle.read()
        except OSError as exc:
            raise ReportError(f"templates: cannot read {path}: {exc.strerror or exc}") from None
    return sources


_ENVIRONMENTS: dict[str, Any] = {}
_CURRENT: dict[str, Any] = {"sources": None}


def use_templates(sources: Mapping[str, str] | None) -> None:
    """Render with these template sources from now on (None: the collection's files)."""
    _CURRENT["sources"] = dict(sources) if sources is not None else None


def _environment() -> Any:
    sources = _CURRENT["sources"]
    if sources is None:
        sources = load_templates()
    missing = [name for name in TEMPLATE_NAMES if not isinstance(sources.get(name), str)]
    if missing:
        raise ReportError(f"templates: {', '.join(missing)} missing or not text")
    key = hashlib.sha256(json.dumps(sources, sort_keys=True).encode()).hexdigest()
    env = _ENVIRONMENTS.get(key)
    if env is None:
        try:
            import jinja2
        except ImportError:
            raise ReportError("templates: the Python package jinja2 is needed to write the report") from None
        env = jinja2.Environment(
            loader=jinja2.DictLoader(sources),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
        )
        env.globals.update(
            plural=plural,
            level_colours=LEVEL_COLOURS,
            level_meaning=LEVEL_MEANING,
            level_rank=LEVEL_RANK,
            percent=_percent,
        )
        _ENVIRONMENTS.clear()
        _ENVIRONMENTS[key] = env
    return env


def _render(name: str, **context: Any) -> Any:
    """Render a template; the result is markup that other templates insert as it is."""
    import jinja2
    from markupsafe import Markup

    env = _environment()
    try:
        return Markup(env.get_template(name).render(**context))
    except jinja2.TemplateError as exc:
        where = getattr(exc, "name", None) or name
        line = getattr(exc, "lineno", None)
        raise ReportError(f"templates: {where}{f' line {line}' if line else ''}: {exc}") from None


# --------------------------------------------------------------------------
# Site page pieces: data for the templates
# --------------------------------------------------------------------------


def alignment_score(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Share of a site's accelerators per level bucket of their nearest RDMA NIC.

    Takes :func:`topology.site_summary` output and reads the planner's view,
    ``best_rdma_level_per_accelerator`` (:func:`device_model.node_devices`);
    returns ``{"gpus", "buckets": [{"key", "label", "count", "share"}]}``
    (shares are fractions, 0 when there is no accelerator).
    """
    counts = {key: 0 for key, _label, _levels in SCORE_BUCKETS}
    total = 0
    for node in summary["per_node"].values():
        for best in node["best_rdma_level_per_accelerator"].values():
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


def _numa_text(numa: tuple[int | None, bool]) -> str:
    node, inferred = numa
    if node is None:
        return "N/A"
    return f"{node}*" if inferred else str(node)


def _matrix_view(matrix: Mapping[str, Any]) -> dict[str, Any]:
    rows = []
    for row in matrix["gpus"]:
        bdf = row["pci_address"]
        best = set(row["nearest"].get("nics") or [])
        rows.append(
            {
                "bdf": bdf,
                "label": row["label"],
                "cells": [
                    {
                        "nic": c["pci_address"],
                        "level": matrix["cells"][bdf][c["pci_address"]],
                        "best": c["pci_address"] in best,
                    }
                    for c in matrix["nics"]
                ],
                "cpus": row["local_cpulist"] or "N/A",
                "numa": _numa_text(row["numa"]),
                "model": row["model"] or "",
            }
        )
    nics = []
    for c in matrix["nics"]:
        bits = [f"NUMA {_numa_text(c['numa'])}"]
        if c["vf"]:
            bits.append(f"VF of {c['physfn'] or '?'}")
        if c["numvfs"]:
            bits.append(plural(c["numvfs"], "VF") + " enabled")
        if c["collapsed_vfs"]:
            bits.append(plural(c["collapsed_vfs"], "VF") + " shown in this column (same level as the PF)")
        bits.append("RDMA NIC (the planner pairs it)" if c["rdma_nic"] else "not an RDMA NIC for the planner")
        nics.append(
            {
                "bdf": c["pci_address"],
                "label": c["label"],
                "rdma_nic": c["rdma_nic"],
                "names": ", ".join(c["rdma_devices"] + c["netdevs"]) or "no netdev/RDMA device",
                "bits": "; ".join(bits),
                "collapsed_vfs": c["collapsed_vfs"],
            }
        )
    return {
        "rows": rows,
        "nics": nics,
        "inferred": any(row["numa"][1] for row in matrix["gpus"]),
    }


def matrix_html(matrix: Mapping[str, Any]) -> Any:
    """The accelerator x NIC table and its legends, laid out like ``nvidia-smi topo -m``."""
    return _render("layout.html.j2", part="matrix", matrix=_matrix_view(matrix))


def node_svg(model: Mapping[str, Any], matrix: Mapping[str, Any] | None = None) -> Any:
    """SVG picture of one layout (the ``picture`` macro over :func:`node_picture`)."""
    return _render("layout.html.j2", part="picture", picture=node_picture(model, matrix))


def _warning_items(hosts: list[str], warnings: Mapping[str, list[str]]) -> list[dict[str, str]]:
    seen: dict[str, list[str]] = {}
    for host in hosts:
        for warning in warnings.get(host, []):
            seen.setdefault(warning, []).append(host)
    items = []
    for text, who in seen.items():
        if len(who) == len(hosts):
            where = "all nodes of this layout" if len(hosts) > 1 else ""
        elif len(who) <= 5:
            where = ", ".join(who)
        else:
            where = f"{plural(len(who), 'node')} ({who[0]} \u2026 {who[-1]})"
        items.append({"text": text, "where": where})
    return items


def _layout_view(
    index: int, group: Mapping[str, Any], summary: Mapping[str, Any], rdma_nics: Iterable[str]
) -> dict[str, Any]:
    model = group["model"]
    hosts = group["hosts"]
    matrix = level_matrix(model, rdma_nics)
    first = summary["per_node"][hosts[0]]
    models = sorted({g["model"] for g in matrix["gpus"] if g["model"]})
    facts = [plural(len(hosts), "node"), plural(len(model["numa_nodes"]), "NUMA node")]
    families = family_counts_text(first["accelerators"])
    facts.append(
        (", ".join(families) if families else "no accelerator") + (f" ({', '.join(models)})" if models else "")
    )
    facts.append(plural(first["rdma_nics"], "RDMA NIC") + f" of {plural(first['nics'], 'physical NIC')}")
    if first["vfs"]:
        facts.append(plural(first["vfs"], "VF"))
    return {
        "index": index + 1,
        "fingerprint": group["fingerprint"],
        "hosts": hosts,
        "facts": " \u00b7 ".join(facts),
        "picture": node_picture(model, matrix),
        "matrix": _matrix_view(matrix),
        "has_gpus": bool(matrix["gpus"]),
        "has_nics": bool(matrix["nics"]),
        "warnings": _warning_items(hosts, {h: summary["per_node"][h]["warnings"] for h in hosts}),
    }


def _inventory_rows(summary: Mapping[str, Any], layout_of: Mapping[str, int]) -> list[dict[str, Any]]:
    rows = []
    for host, node in summary["per_node"].items():
        best = node["best_rdma_level_per_accelerator"].values()
        levels = [b.get("level") for b in best]
        parts = [f"{lv} {levels.count(lv)}" for lv in LEVELS if lv in levels]
        if None in levels:
            parts.append(f"no RDMA NIC {levels.count(None)}")
        rows.append(
            {
                "host": host,
                "layout": layout_of[host],
                "numa": node["numa_nodes"],
                "accelerators": ", ".join(family_counts_text(node["accelerators"])) or "0",
                "rdma_nics": node["rdma_nics"],
                "vfs": node["vfs"],
                "levels": ", ".join(parts) or "-",
                "warnings": len(node["warnings"]),
            }
        )
    return rows


def _level_order(level: str | None) -> int:
    return LEVEL_RANK.get(level, len(LEVELS)) if level is not None else len(LEVELS)


# Why the bundled driver tainted a device: the value of its "DRIVER/unhealthy" taint (docs/driver.md).
DRIVER_TAINT_CAUSES = {
    "gone": "the PCI function is no longer on the node",
    "not-responding": "the function does not answer (config space reads all ones: fell off the bus)",
    "no-driver": "no kernel driver is bound",
    "link-down": "a network link of the NIC is down",
    "rdma-port-down": "an RDMA port is not ACTIVE",
    "aer-fatal": "the function reported fatal PCIe (AER) errors recently",
}


def _taint_rows(plan: Mapping[str, Any]) -> list[dict[str, str]]:
    rows = []
    for entry in plan.get("tainted_devices") or []:
        key, value = str(entry.get("key", "")), str(entry.get("value", ""))
        why = DRIVER_TAINT_CAUSES.get(value, "") if key.endswith("/unhealthy") else ""
        rows.append(
            {
                "node": str(entry.get("node", "?")),
                "device": str(entry.get("device", "?")),
                "taint": f"{key}={value}" if value else key,
                "effect": str(entry.get("effect", "")),
                "since": str(entry.get("timeAdded", "")),
                "why": why,
                "keeps_out": bool(entry.get("keeps_out")),
            }
        )
    return rows


def _plan_view(plan: Mapping[str, Any], max_errors: int = 20) -> dict[str, Any]:
    templates = []
    for template in plan["templates"]:
        groups: dict[tuple[int, str | None, bool], list[str]] = {}
        for node, entry in sorted(template["nodes"].items()):
            key = (entry["fits"], entry["worst_level"], entry.get("worst_level_exact", True))
            groups.setdefault(key, []).append(node)
        ordered = sorted(groups.items(), key=lambda kv: (-kv[0][0], _level_order(kv[0][1]), not kv[0][2]))
        templates.append(
            {
                "name": str(template["name"]),
                "required": template["required"],
                "ok": template["satisfiable"],
                "fits_total": template["fits_total"],
                "worst_level": template["worst_level"],
                "worst_level_exact": template.get("worst_level_exact", True),
                "errors_total": len(template["errors"]),
                "groups": [
                    {
                        "fits": fits,
                        "level": level,
                        "exact": exact,
                        "count": len(nodes),
                        "nodes": ", ".join(nodes[:8]),
                        "more": len(nodes) > 8,
                    }
                    for (fits, level, exact), nodes in ordered
                ],
                "errors": [
                    {
                        "node": str(e.get("node", "?")),
                        "device": str(e.get("device", "")),
                        "request": str(e.get("request", "")),
                        "message": str(e.get("message", "")),
                        "expression": str(e["expression"]) if e.get("expression") else "",
                    }
                    for e in template["errors"][:max_errors]
                ],
                "more_errors": max(len(template["errors"]) - max_errors, 0),
                "reason": str(template["reason"]) if not template["satisfiable"] and template.get("reason") else "",
            }
        )
    meta = ", ".join(f"{k} {plan[k]}" for k in ("kubernetes_version", "driver") if plan.get(k) not in (None, ""))
    return {"meta": meta, "templates": templates, "tainted": _taint_rows(plan)}


def plan_html(plan: Mapping[str, Any], max_errors: int = 20) -> Any:
    """Capacity per claim template and the worst level inside allocations."""
    return _render("plan.html.j2", plan=_plan_view(plan, max_errors))


_QUOTA_STATUS = {
    "ok": "within capacity",
    "oversubscribed": "oversubscribed (allowed)",
    "over_limit": "OVER THE ALLOWED FACTOR",
    "unknown": "capacity unknown (no plan)",
}


def teams_html(teams: Mapping[str, Any]) -> Any:
    """Teams of the site and their guaranteed quotas against each class's capacity."""
    capacity = []
    for row in teams["capacity"]:
        status = str(row["status"])
        capacity.append(
            {
                "cls": str(row["class"]),
                "capacity": "?" if row["capacity"] is None else row["capacity"],
                "guaranteed": row["guaranteed"],
                "opportunistic": row["opportunistic"],
                "factor": f"{row.get('factor') or 1.0:g}",
                "status": _QUOTA_STATUS.get(status, status),
                "warn": status in ("oversubscribed", "over_limit"),
                "shares": ", ".join(
                    f"{name} {entry['quota']}{'' if entry['guaranteed'] else ' (opportunistic)'}"
                    for name, entry in sorted(row["teams"].items())
                ),
            }
        )
    rows = [
        {
            "name": str(t["name"]),
            "tier": str(t["tier"]),
            "priority_class": str(t["priority_class"]),
            "namespaces": ", ".join(t["namespaces"]),
            "templates": ", ".join(t["templates"]) or "-",
            "quotas": ", ".join(f"{k} {v}" for k, v in sorted(t["quotas"].items())) or "-",
            "admin": "yes" if t.get("admin_access") else "no",
        }
        for t in teams["teams"]
    ]
    return _render("teams.html.j2", capacity=capacity, teams=rows, **_kueue_rows(teams.get("kueue")))


def _amounts(values: Mapping[str, Any] | None, missing: str = "-") -> str:
    """``{class: amount}`` as ``class amount, ...``; a null amount (no limit, unknown) as ``missing``."""
    if not values:
        return "-"
    return ", ".join(f"{cls} {missing if v is None else v}" for cls, v in sorted(values.items()))


def _kueue_rows(queues: Mapping[str, Any] | None) -> dict[str, Any]:
    """The Kueue engine's rows of the teams section: queues per team and the what-if outcome."""
    if not queues:
        return {"engine": "resourcequota", "queues": [], "what_if": None, "notes": []}
    rows = [
        {
            "name": str(t["name"]),
            "queue": f"{t['cluster_queue']} / {t['local_queue']}",
            "cohort": str(t["cohort"]),
            "flavor": str(t["flavor"]),
            "nominal": _amounts(t.get("nominal")),
            "borrowable": _amounts(t.get("borrowable"), "no limit"),
            "lendable": _amounts(t.get("lendable")),
            "idle": _amounts(t["idle"], "unknown") if "idle" in t else "unknown (no utilization)",
        }
        for t in queues.get("teams") or []
    ]
    what_if = None
    outcome = queues.get("what_if")
    if outcome:
        what_if = {
            "teams": [
                {
                    "name": str(name),
                    "nominal": _amounts(t.get("by_nominal")),
                    "borrowing": _amounts(t.get("by_borrowing")),
                    "pending": _amounts(t.get("pending")),
                    "preempted": ", ".join(f"{p['name']} ({p['reason']})" for p in t.get("preempted") or []) or "-",
                }
                for name, t in sorted((outcome.get("teams") or {}).items())
            ],
            "over": [
                f"{cls}: {row['admitted']} admitted, {row['capacity']} on the site"
                for cls, row in sorted((outcome.get("over_capacity") or {}).items())
            ],
        }
    return {"engine": "kueue", "queues": rows, "what_if": what_if, "notes": [str(n) for n in queues.get("notes") or []]}


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f} %"


def _usage_chart(classes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """Geometry of the bar chart of allocated and idle devices per class."""
    names = [name for name, row in classes.items() if row["published"]]
    if not names:
        return None
    widest = max(row["published"] for row in classes.values())
    bar_w, label_w, row_h = 300, 170, 22
    bars = []
    for index, name in enumerate(names):
        row = classes[name]
        y = 4 + index * row_h
        used = bar_w * row["allocated"] / widest
        idle = bar_w * row["idle"] / widest
        bars.append(
            {
                "name": _label(label_w - 6, y + 14, str(name), label_w - 10, 11.0, "", "end"),
                "y": y + 3,
                "used_x": label_w,
                "used_w": f"{used:.1f}",
                "idle_x": f"{label_w + used:.1f}",
                "idle_w": f"{idle:.1f}",
                "count": {
                    "x": f"{label_w + used + idle + 6:.1f}",
                    "y": y + 14,
                    "text": f"{row['allocated']}/{row['published']}",
                },
            }
        )
    return {"width": label_w + bar_w + 60, "height": row_h * len(names) + 8, "bars": bars}


def utilization_svg(classes: Mapping[str, Mapping[str, Any]]) -> Any:
    """A small horizontal bar chart: allocated and idle devices per class."""
    chart = _usage_chart(classes)
    return _render("utilization.html.j2", part="chart", chart=chart) if chart else ""


def _level_counts(exact: Mapping[str, int], bounds: Mapping[str, int]) -> list[tuple[str, bool, int]]:
    """``[(level, exact, count)]`` in level order, a bound after the exact level of its name."""
    found = [(lv, True, n) for lv, n in exact.items() if n and lv in LEVEL_RANK]
    found += [(lv, False, n) for lv, n in bounds.items() if n and lv in LEVEL_RANK]
    return sorted(found, key=lambda item: (LEVEL_RANK[item[0]], not item[1]))


def utilization_html(used: Mapping[str, Any]) -> Any:
    """Devices published, allocated and idle per class, node and team; shared devices; measured levels."""
    alignment = used["alignment"]
    levels = _level_counts(alignment["levels"], alignment.get("bounds") or {})
    teams = [
        {
            "name": str(name),
            "claims": t["claims"],
            "devices": ", ".join(f"{k} {v}" for k, v in sorted(t["devices"].items())),
            "levels": _level_counts(t["levels"], t.get("bounds") or {}),
        }
        for name, t in used["teams"].items()
    ]
    shared = [
        {
            "node": str(s["node"]),
            "device": str(s["device"]),
            "claims": s["claims"],
            "consumers": s["consumers"],
            "capacity": [(k, f"{v['share'] * 100:.0f}") for k, v in s["capacity"].items() if v.get("share")],
        }
        for s in used["shared"]
    ]
    return _render(
        "utilization.html.j2",
        part="all",
        totals=used["totals"],
        claims=used["claims"],
        chart=_usage_chart(used["classes"]),
        classes=used["classes"],
        nodes=used["nodes"],
        teams=teams,
        alignment=alignment,
        levels=levels,
        unknown=alignment["levels"].get("unknown") or 0,
        below=alignment.get("below_promise") or [],
        maybe_below=alignment.get("maybe_below_promise") or [],
        shared=shared,
    )


# --------------------------------------------------------------------------
# Failed and unreachable nodes (summary.json / plan.json: nodes_failed, node_counts)
# --------------------------------------------------------------------------


def failed_nodes(*sources: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{"rows", "counts"}`` from the first source that has ``nodes_failed`` (absent in older files)."""
    failed: Mapping[str, Any] = {}
    counts: Mapping[str, Any] | None = None
    for source in sources:
        if isinstance(source, dict) and isinstance(source.get("nodes_failed"), dict):
            failed = source["nodes_failed"]
            counts = source.get("node_counts") if isinstance(source.get("node_counts"), dict) else None
            break
    rows = []
    for host, entry in sorted(failed.items()):
        entry = entry if isinstance(entry, dict) else {}
        stale = entry.get("stale_facts") if isinstance(entry.get("stale_facts"), dict) else None
        age = stale.get("age_s") if stale else None
        rows.append(
            {
                "host": str(host),
                "state": str(entry.get("state") or "failed"),
                "stage": str(entry.get("stage") or "?"),
                "task": str(entry.get("task") or ""),
                "error": str(entry.get("error") or ""),
                "stale": "none"
                if stale is None
                else f"{stale.get('file') or '?'}, {_age(age)} old, {'used' if stale.get('used') else 'not used'}",
            }
        )
    return {"rows": rows, "counts": dict(counts) if counts else None}


def _age(seconds: Any) -> str:
    if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 0:
        return "?"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            return plural(seconds // size, unit)
    return plural(seconds, "second")


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
    device_options: Mapping[str, Any] | None = None,
    summary_file: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Build a site page. Returns ``{"html", "summary", "score", "layouts", "failed"}``.

    ``summary_file`` is the site's ``summary.json`` as the topology role wrote
    it, read for the nodes that failed (``nodes_failed``, ``node_counts``).
    """
    options = dict(device_options) if device_options else None
    summary = site_summary(site, dict(nodes), warn_levels, options)
    groups = group_layouts(nodes)
    layout_of = {host: index + 1 for index, group in enumerate(groups) for host in group["hosts"]}
    score = alignment_score(summary)
    failed = failed_nodes(plan, summary_file)
    counts = failed["counts"] or {
        "ok": summary["nodes"],
        "failed": sum(1 for r in failed["rows"] if r["state"] != "unreachable"),
        "unreachable": sum(1 for r in failed["rows"] if r["state"] == "unreachable"),
    }
    layouts = []
    for index, group in enumerate(groups):
        first = nodes[group["hosts"][0]]
        rdma = [n["pci_address"] for n in node_devices(first, options)["rdma_nics"]]
        layouts.append(_render("layout.html.j2", part="section", layout=_layout_view(index, group, summary, rdma)))
    families = family_counts_text(summary["accelerators"])
    subtitle = " \u00b7 ".join(
        [plural(summary["nodes"], "node")]
        + (families or ["no accelerator"])
        + [
            plural(summary["rdma_nics"], "RDMA NIC"),
            plural(summary["vfs"], "VF"),
            plural(len(summary["warnings"]), "warning"),
        ]
    )
    html = _render(
        "site.html.j2",
        site=site,
        title=f"Site {site}",
        subtitle=subtitle,
        counts=counts,
        score=score,
        plan=plan_html(plan) if plan is not None else None,
        teams=teams_html(teams) if teams is not None else None,
        utilization=utilization_html(utilization) if utilization is not None else None,
        failed=failed["rows"],
        inventory=_inventory_rows(summary, layout_of),
        layouts=layouts,
        layout_count=len(groups),
        node_count=summary["nodes"],
        links={"plan": plan is not None, "teams": teams is not None, "utilization": utilization is not None},
    )
    return {"html": html, "summary": summary, "score": score, "layouts": groups, "failed": failed, "counts": counts}


def index_page(sites: Iterable[Mapping[str, Any]]) -> str:
    """Index of sites. Each entry: ``{"site", "summary", "score", "layouts", "plan"}``."""
    rows = []
    for entry in sites:
        summary, score = entry["summary"], entry["score"]
        aligned = score["buckets"][0]
        plan = entry.get("plan")
        rows.append(
            {
                "site": entry["site"],
                "nodes": summary["nodes"],
                "failed": len((entry.get("failed") or {}).get("rows") or []),
                "layouts": len(entry["layouts"]),
                "accelerators": ", ".join(family_counts_text(summary["accelerators"])) or "0",
                "rdma_nics": summary["rdma_nics"],
                "share": f"{aligned['share'] * 100:.0f} %" if score["gpus"] else "-",
                "plan": None
                if plan is None
                else {
                    "templates": len(plan["templates"]),
                    "bad": sum(1 for t in plan["templates"] if not t["satisfiable"]),
                },
                "warnings": len(summary["warnings"]),
            }
        )
    return str(_render("index.html.j2", title="aligned.dra sites", subtitle="Topology of every probed site", rows=rows))


# --------------------------------------------------------------------------
# Plan, teams and utilization files: what the report reads
# --------------------------------------------------------------------------


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


_QUEUE_KEYS = ("name", "cluster_queue", "local_queue", "cohort", "flavor", "tier", "nominal", "borrowable", "lendable")


def _require_keys(row: Any, keys: Iterable[str], where: str) -> None:
    """``row`` is an object holding every key of ``keys``; else a ReportError that names ``where``."""
    for key in keys:
        if not isinstance(row, dict) or key not in row:
            raise ReportError(f"{where} has no '{key}'")


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
        _require_keys(
            template, ("name", "required", "fits_total", "worst_level", "satisfiable", "errors", "nodes"), where
        )
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
    tainted = plan.get("tainted_devices", [])
    if not isinstance(tainted, list) or not all(
        isinstance(t, dict) and isinstance(t.get("node"), str) and isinstance(t.get("device"), str) for t in tainted
    ):
        raise ReportError(f"{source}: 'tainted_devices' must be a list of objects with 'node' and 'device'")
    return plan


def validate_teams(teams: Any, source: str = "teams.json") -> dict[str, Any]:
    """Check the fields of the teams summary (``aligned.dra.teams_render``) that the report reads."""
    if not isinstance(teams, dict) or teams.get("schema_version") != 1:
        raise ReportError(f"{source}: expected a JSON object with schema_version 1")
    for key in ("teams", "capacity"):
        if not isinstance(teams.get(key), list):
            raise ReportError(f"{source}: '{key}' must be a list")
    for index, row in enumerate(teams["capacity"]):
        keys = ("class", "capacity", "guaranteed", "opportunistic", "status", "teams")
        _require_keys(row, keys, f"{source}: capacity[{index}]")
    queues = teams.get("kueue")
    if queues is not None:
        if not isinstance(queues, dict) or not isinstance(queues.get("teams"), list):
            raise ReportError(f"{source}: 'kueue' must be an object with a 'teams' list")
        for index, row in enumerate(queues["teams"]):
            _require_keys(row, _QUEUE_KEYS, f"{source}: kueue.teams[{index}]")
        outcome = queues.get("what_if")
        if outcome is not None:
            if not isinstance(outcome, dict) or not isinstance(outcome.get("teams"), dict):
                raise ReportError(f"{source}: kueue.what_if must be an object with 'teams'")
            for name, row in outcome["teams"].items():
                keys = ("by_nominal", "by_borrowing", "pending", "preempted")
                _require_keys(row, keys, f"{source}: kueue.what_if.teams.{name}")
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
    device_options: Mapping[str, Any] | None = None,
    templates: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Pages for the sites in ``<output_dir>/index.json`` (written by the topology role).

    Reads each site's node files listed in the index and, when present, its
    ``plan.json`` and ``summary.json`` (for the nodes that failed).
    ``device_options`` are the driver's (``aligned_dra_device_options``): they
    decide which devices the planner sees. ``templates`` are the Jinja2
    sources (:func:`load_templates`; default, the collection's files). Returns ``{"files": {relative path: html}, "sites": {site: info}}``;
    writes nothing. Raises :class:`ReportError` naming the file or site at fault.
    """
    import os

    use_templates(templates)
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
        summary_path = os.path.join(output_dir, site, "summary.json")
        summary_file = _read_json(summary_path, f"site {site}: summary") if os.path.exists(summary_path) else None
        if summary_file is not None and not isinstance(summary_file, dict):
            raise ReportError(f"site {site}: summary {summary_path} is not a JSON object")
        result = site_report(
            site, nodes, warn_levels, plan, device_options=device_options, summary_file=summary_file, **extra
        )
        files[f"{site}/report.html"] = result["html"]
        entries.append({"site": site, "plan": plan, **result})
        info[site] = {
            "report": f"{site}/report.html",
            "nodes": result["summary"]["nodes"],
            "layouts": [{"fingerprint": g["fingerprint"], "hosts": g["hosts"]} for g in result["layouts"]],
            "score": {b["key"]: b["count"] for b in result["score"]["buckets"]},
            "gpus": result["score"]["gpus"],
            "accelerators": result["summary"]["accelerators"],
            "rdma_nics": result["summary"]["rdma_nics"],
            "node_counts": result["counts"],
            "plan": plan is not None,
            "warnings": len(result["summary"]["warnings"]),
        }
    # The index lists every site of index.json that has a page, built now or before.
    all_entries = list(entries)
    if sites is not None:
        for site in sorted(set(available) - set(wanted)):
            if os.path.exists(os.path.join(output_dir, site, "report.html")):
                all_entries.append(
                    _index_entry_from_files(output_dir, site, available[site], warn_levels, device_options)
                )
    files["index.html"] = index_page(sorted(all_entries, key=lambda e: e["site"]))
    return {"files": files, "sites": info}


def _index_entry_from_files(
    output_dir: str,
    site: str,
    entry: Mapping[str, Any],
    warn_levels: list[str],
    device_options: Mapping[str, Any] | None = None,
) -> dict:
    """Index row for a site that is not rebuilt this time (recomputed from its files, not drawn)."""
    import os

    nodes = {
        os.path.basename(rel)[: -len(".json")]: _read_json(os.path.join(output_dir, rel), f"site {site}: node file")
        for rel in entry.get("node_files") or []
    }
    summary = site_summary(site, nodes, warn_levels, dict(device_options) if device_options else None)
    plan_path = os.path.join(output_dir, site, "plan.json")
    plan = validate_plan(_read_json(plan_path, "plan"), plan_path) if os.path.exists(plan_path) else None
    summary_path = os.path.join(output_dir, site, "summary.json")
    summary_file = _read_json(summary_path, f"site {site}: summary") if os.path.exists(summary_path) else None
    return {
        "failed": failed_nodes(plan, summary_file if isinstance(summary_file, dict) else None),
        "site": site,
        "summary": summary,
        "score": alignment_score(summary),
        "layouts": group_layouts(nodes),
        "plan": plan,
    }
