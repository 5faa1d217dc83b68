# SPDX-License-Identifier: Apache-2.0
"""SVG geometry of the report's pictures, drawn by the templates.

The picture of one layout: a band per NUMA node, a tree per PCIe root complex
(switches, GPUs, NICs with their VFs collapsed per PF), arcs from each
accelerator to its nearest RDMA NIC. The bar chart of allocated and idle
devices per class. Texts are cut to fit their boxes.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.report.layouts import (
    RAIL_UNKNOWN,
    RAIL_VARIES,
    effective_numa,
    level_matrix,
)
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import GPU_KINDS, NIC_KINDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

LEVEL_COLOURS = {
    "PIX": "#1a9850",
    "PXB": "#66bd63",
    "PHB": "#e6b400",
    "NODE": "#f46d43",
    "SYS": "#d73027",
}
NUMA_COLOURS = ("#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#e15759", "#9c755f")
UNKNOWN_NUMA_COLOUR = "#8c8c8c"

# Collapsed leaves: these kinds are counted per parent instead of drawn one by one.
_GROUPED_KINDS = ("nvme", "other")

_LEAF_W = 112
_LEAF_H = 58
_GAP = 12
_ROW_H = 84
_BAND_HEAD = 30
_MARGIN = 16
_PAIR_DROP = 26


# --------------------------------------------------------------------------
# Trees of the picture: root complexes, switches and devices per NUMA node
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
        numa, inferred = effective_numa(device)
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
            info["rail"] = column.get("rail")
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


def text_label(
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
            "texts": [text_label(_MARGIN + 10, y + 20, title, band_w - 20, _FONT["band"], "band", "start")],
            "edges": [],
            "nodes": [],
        }
        if not trees:
            band["texts"].append(
                text_label(
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
                text_label(x + w / 2, y + 16, node.label, inner, _FONT[""]),
                text_label(x + w / 2, y + 31, node.sub, inner, _FONT["sub"], "sub"),
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
                text_label(x + w / 2, y + 18, label, inner, _FONT["name"], "name"),
                text_label(
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
    rail = leaf.get("rail")
    rail_full = ""
    if rail:
        # The NIC's rail where every node of the layout agrees (layouts.rail_labels), short
        # enough to fit the box; the whole label and its reason are the text's title.
        numa_full = numa_text
        numa_text += f" \u00b7 {_rail_short(rail)}"
        rail_full = f"{numa_full} \u00b7 {rail['text']}" + (f": {rail['why']}" if rail["why"] else "")
    rect["rx"] = 5
    vfs = leaf.get("numvfs") if kind == "nic" else leaf.get("vfs")
    texts = []
    name_width = inner
    if vfs:
        extra = f"+{vfs} VFs"
        extra_w = text_width(extra, _FONT["vfs"])
        texts.append(text_label(x + w - 4, y + 14, extra, extra_w, _FONT["vfs"], "vfs", "end"))
        name_width = max(inner - extra_w - 4, 20)
    texts.insert(0, text_label(x + 6, y + 15, leaf["label"], name_width, _FONT["name"], "name", "start"))
    texts += [
        text_label(x + w / 2, y + 30, leaf["bdf"], inner, _FONT["sub"], "sub"),
        text_label(x + w / 2, y + 43, leaf.get("text"), inner, _FONT["sub"], "sub"),
        text_label(x + w / 2, y + 54, numa_text, inner, _FONT["sub"], "sub"),
    ]
    if rail_full and rail_full != texts[-1]["text"]:
        texts[-1]["full"] = rail_full
    # A NIC the planner does not pair accelerators with (no RDMA device, or not published) is drawn dashed.
    cls = f"dev {kind}" + (" plain" if kind == "nic" and not leaf.get("rdma_nic") else "")
    data = {"bdf": leaf["bdf"], **({"rail": rail["text"]} if rail else {})}
    return {"cls": cls, "data": data, "rect": rect, "stroke": colour, "texts": texts}


def _rail_short(rail: Mapping[str, Any]) -> str:
    """``rail 3``; ``rail \u2013`` (on no rail); ``rail ?`` (unknown, or the nodes of the layout disagree)."""
    if rail["rail"] is not None:
        return f"rail {rail['rail']}"
    return "rail ?" if rail["text"] in (RAIL_VARIES, RAIL_UNKNOWN) else "rail \u2013"


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
# Bar chart of the utilization section
# --------------------------------------------------------------------------


def usage_chart(classes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
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
                "name": text_label(label_w - 6, y + 14, str(name), label_w - 10, 11.0, "", "end"),
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
