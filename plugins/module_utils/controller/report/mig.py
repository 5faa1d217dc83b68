# SPDX-License-Identifier: Apache-2.0
"""The MIG section of the site report: each static GPU layout drawn, and the replay's MIG figures.

**Layouts.** The site's MIG GPUs are what the planner and the replay read
(:func:`controller.mig.model.node_gpus`: each host's ``aligned_dra_mig``
against its probe; NVML's profiles where the probe read them, else the
documented geometry). A static GPU is drawn as a row of its memory slices with
a box per instance (the profile, over the slices of its placement); GPUs of
one model with the same instances share a row, which names them (a site of
500 identical nodes has one row, as it has one layout picture). Slices no
instance takes are drawn dashed. Dynamic GPUs have no layout (the driver makes
each partition at Prepare): they are counted per model.

**Replay.** Where ``replay.json`` has the policy ``mig``, a table compares
the driver's order (first fit, nodes by name: the best case as a rule) with
its range under the scheduler's random tie-breaks among nodes (min to max,
median, over the seeded draws) and the fragmentation-aware order: pods
placed, GPUs needed, the memory slices stranded at the first pod that found
no device, what decided each pod's profile (memory, compute, both, or whole
GPUs), the profiles taken, and the first pods not placed with the reason;
the profiles' sizes the replay used, each with its source (NVML or documented).

Pure Python, no Ansible imports; the templates draw (``mig.html.j2``,
``replay.html.j2``).
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import checks as mig_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.inputs import (
    ReportError,
    _fields,
    validate_replay,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.svg import text_label
from ansible_collections.aligned.dra.plugins.module_utils.dra.model import DeviceModelError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# The layout picture, in pixels: a label column, then one cell per memory slice.
LABEL_W = 300
SLICE_W = 64
ROW_H = 34
HEAD_H = 20
GAP = 6
MARGIN = 8
FONT = 11.0
# Box colours by compute slices (1g … 7g): one hue per size, light enough for dark text.
PROFILE_COLOURS = {1: "#d0e2f2", 2: "#c8e6c9", 3: "#ffe0b2", 4: "#f8d0d8", 7: "#e1d5f0"}
OTHER_COLOUR = "#e4e7eb"
# Pods not placed listed per order in the replay's table (the rest are counted).
NOT_PLACED_SHOWN = 5


def _hosts_text(gpus: list[tuple[str, str]]) -> str:
    """``gpu-01 (0000:18:00.0, 0000:19:00.0), gpu-02 (…)``: which GPUs share a row."""
    by_host: dict[str, list[str]] = {}
    for host, address in gpus:
        by_host.setdefault(host, []).append(address)
    return ", ".join(f"{host} ({', '.join(addresses)})" for host, addresses in by_host.items())


def site_gpus(nodes: Mapping[str, Mapping[str, Any]], mig: Mapping[str, Any] | None, site: str) -> list[tuple]:
    """``[(host, MIG GPU)]`` of the site's nodes under their hosts' settings, hosts by name, GPUs in PCI order."""
    found = []
    for host in sorted(nodes):
        settings = (mig or {}).get(host)
        if mig_model.mode_of(settings) == "off":
            continue
        try:
            gpus = mig_model.node_gpus(dict(nodes[host]), settings)
        except (mig_model.MigModelError, mig_checks.MigSettingsError, DeviceModelError) as exc:
            raise ReportError(f"mig: site {site}: {host}: {exc}") from None
        found.extend((host, gpu) for gpu in gpus)
    return found


def _colour(profile: str) -> str:
    head = profile.split("g.", 1)[0]
    return PROFILE_COLOURS.get(int(head), OTHER_COLOUR) if head.isdigit() else OTHER_COLOUR


def _row(index: int, group: dict[str, Any], slices: int) -> dict[str, Any]:
    y = MARGIN + HEAD_H + index * (ROW_H + GAP)
    x0 = MARGIN + LABEL_W
    count = len(group["gpus"])
    title = f"{group['model']} \u00b7 {count} GPU{'s' if count != 1 else ''}"
    boxes, taken = [], set()
    for instance in group["instances"]:
        start, size = instance["start"], instance["size"]
        taken.update(range(start, start + size))
        width = size * SLICE_W
        boxes.append(
            {
                "x": f"{x0 + start * SLICE_W + 1:.0f}",
                "y": f"{y:.0f}",
                "width": f"{width - 2:.0f}",
                "height": ROW_H,
                "fill": _colour(instance["profile"]),
                "profile": instance["profile"],
                "start": start,
                "title": f"{instance['profile']} at memory slice {start} (size {size})",
                "label": text_label(
                    x0 + start * SLICE_W + width / 2, y + ROW_H / 2 + 4, instance["profile"], width - 8, FONT
                ),
            }
        )
    free = [
        {"x": f"{x0 + s * SLICE_W + 1:.0f}", "y": f"{y:.0f}", "width": SLICE_W - 2, "height": ROW_H, "slice": s}
        for s in range(slices)
        if s not in taken
    ]
    return {
        "y": f"{y:.0f}",
        "label_box": {"x": MARGIN, "y": f"{y:.0f}", "width": LABEL_W - 8, "height": ROW_H},
        "label": text_label(MARGIN + 4, y + 14, title, LABEL_W - 16, FONT, cls="name", anchor="start"),
        "sub": text_label(
            MARGIN + 4, y + 28, _hosts_text(group["gpus"]), LABEL_W - 16, 10.0, cls="sub", anchor="start"
        ),
        "hosts": _hosts_text(group["gpus"]),
        "source": group["source"],
        "boxes": boxes,
        "free": free,
        "gpus": count,
    }


def layout_view(nodes: Mapping[str, Mapping[str, Any]], mig: Mapping[str, Any] | None, site: str) -> dict | None:
    """The section's data: the static layouts' picture (None without one), the dynamic GPUs per model, and
    where the profiles came from; None when the site has no MIG GPU."""
    gpus = site_gpus(nodes, mig, site)
    if not gpus:
        return None
    groups: dict[tuple, dict[str, Any]] = {}
    dynamic: dict[str, int] = {}
    sources: dict[str, int] = {}
    for host, gpu in gpus:
        sources[gpu["source"]] = sources.get(gpu["source"], 0) + 1
        if gpu["mode"] == "dynamic":
            dynamic[str(gpu["model"])] = dynamic.get(str(gpu["model"]), 0) + 1
            continue
        instances = tuple((i["profile"], int(i["start"]), int(i["size"])) for i in gpu["instances"])
        key = (str(gpu["model"]), int(gpu["memory_slices"]), gpu["source"], instances)
        group = groups.setdefault(
            key,
            {
                "model": str(gpu["model"]),
                "slices": int(gpu["memory_slices"]),
                "source": gpu["source"],
                "instances": [dict(i) for i in gpu["instances"]],
                "gpus": [],
            },
        )
        group["gpus"].append((host, str(gpu["pci_address"])))
    ordered = sorted(groups.values(), key=lambda g: (g["model"], g["gpus"][0]))
    picture = None
    if ordered:
        slices = max(g["slices"] for g in ordered)
        rows = [_row(index, group, group["slices"]) for index, group in enumerate(ordered)]
        head = [
            {
                "x": f"{MARGIN + LABEL_W + s * SLICE_W:.0f}",
                "width": SLICE_W,
                "label": text_label(
                    MARGIN + LABEL_W + s * SLICE_W + SLICE_W / 2, MARGIN + 13, str(s), SLICE_W - 4, 10.0, cls="sub"
                ),
            }
            for s in range(slices)
        ]
        picture = {
            "width": MARGIN * 2 + LABEL_W + slices * SLICE_W,
            "height": MARGIN * 2 + HEAD_H + len(rows) * (ROW_H + GAP),
            "head": head,
            "head_y": MARGIN,
            "head_h": HEAD_H - 4,
            "rows": rows,
        }
    return {
        "static_gpus": sum(len(g["gpus"]) for g in ordered),
        "layouts": len(ordered),
        "picture": picture,
        "dynamic": [{"model": model, "gpus": count} for model, count in sorted(dynamic.items())],
        "sources": [{"source": source, "gpus": count} for source, count in sorted(sources.items())],
    }


# --------------------------------------------------------------------------
# The replay's MIG figures
# --------------------------------------------------------------------------

ORDER_NAMES = {
    "first_fit": "the driver's order (first fit), nodes by name",
    "fragmentation_aware": "fragmentation-aware (for comparison)",
}
DECIDERS = ("memory", "compute", "both", "whole")
GIB = 1 << 30
_FIGURES = {
    "gpus": "count",
    "gpus_without_mig": "count",
    "memory_slices": "count",
    "gpu_models": "object",
    "sources": "object",
    "sizing": "object",
    "orders": "object",
}
_ORDER = {
    "gpu_pods_placed": "count",
    "pods_not_tried": "count",
    "gpus_needed": "object",
    "stranded": "object?",
    "profiles": "object",
    "not_placed": "list",
}


def validate_replay_mig(replay: Any, source: str = "replay.json") -> dict[str, Any]:
    """:func:`inputs.validate_replay`, and the ``mig`` figures of each policy that has them."""
    validate_replay(replay, source)
    for name, run in replay["policies"].items():
        if run.get("mig") is not None:
            check_replay_mig(run["mig"], f"{source}: policies.{name}.mig")
    return replay


def check_replay_mig(figures: Any, where: str) -> None:
    """The ``mig`` policy's figures the report reads (replay/mig_result.py); a ReportError names the key."""
    _fields(figures, _FIGURES, where)
    _fields(figures["sizing"], {"rule": "text"}, f"{where}.sizing")
    for key, order in figures["orders"].items():
        _fields(order, _ORDER, f"{where}.orders.{key}")
        _fields(
            order["gpus_needed"],
            {"peak": "count", "mean": "number?", "basis": "text"},
            f"{where}.orders.{key}.gpus_needed",
        )
        if order["stranded"] is not None:
            _fields(
                order["stranded"], {"pod": "text", "slices": "count", "gpus": "count"}, f"{where}.orders.{key}.stranded"
            )
        for index, row in enumerate(order["not_placed"]):
            _fields(
                row, {"pod": "text", "reason": "text", "needs": "text"}, f"{where}.orders.{key}.not_placed[{index}]"
            )
    spread = figures.get("first_fit_range")  # absent from a replay.json written before the draws
    if spread is not None:
        at = f"{where}.first_fit_range"
        _fields(spread, {"seed": "count", "draws": "count", "gpu_pods_placed": "object", "best_case": "object"}, at)
        _fields(
            spread["gpu_pods_placed"], {"min": "count", "median": "number", "max": "count"}, at + ".gpu_pods_placed"
        )
        _fields(spread["best_case"], {"draws_placing_more": "count"}, at + ".best_case")
        if spread.get("gpus_needed_peak") is not None:
            _fields(spread["gpus_needed_peak"], {"min": "count", "median": "number", "max": "count"}, at + ".gpus")


def _needed(gpus: Mapping[str, Any]) -> str:
    peak = gpus.get("peak")
    text = "-" if peak is None else str(peak)
    if gpus.get("mean") is not None:
        text += f" (mean {gpus['mean']:.2f})"
    return text


def _stranded(stranded: Mapping[str, Any] | None) -> str:
    if not stranded:
        return "none (every GPU pod was placed)"
    gpus = stranded["gpus"]
    return f"{stranded['slices']} on {gpus} GPU{'s' if gpus != 1 else ''} (when {stranded['pod']} found no device)"


def _range(spread: Mapping[str, Any] | None) -> str:
    if not spread:
        return "-"
    low, middle, high = spread["min"], spread["median"], spread["max"]
    text = f"{low}" if low == high else f"{low} to {high}"
    return f"{text} (median {middle:g})"


def _decided(decided: Mapping[str, Any] | None) -> str:
    if not decided:
        return "-"
    return ", ".join(f"{key} {decided[key]}" for key in DECIDERS if decided.get(key))


def _range_row(figures: Mapping[str, Any], gpu_pods: int) -> dict[str, Any] | None:
    """The row of first fit's range over the random tie-breaks, and a note where a draw beat the name order."""
    spread = figures.get("first_fit_range")
    if not spread:
        return None
    best = spread["best_case"]
    beaten = best.get("draws_placing_more", 0)
    note = ""
    if beaten:
        note = (
            f"{beaten} of {spread['draws']} draws placed more GPU pods than the name order: "
            "here it is not the best case"
        )
    else:
        note = f"No draw of {spread['draws']} placed more GPU pods than the name order: here it is the best case"
    peak = spread.get("gpus_needed_peak")
    return {
        "key": "first_fit_range",
        "name": f"the driver's order, random ties among nodes ({spread['draws']} draws, seed {spread['seed']})",
        "placed": f"{_range(spread['gpu_pods_placed'])} / {gpu_pods}",
        "not_tried": "-",
        "gpus": _range(peak),
        "stranded": "-",
        "decided": "-",
        "profiles": "-",
        "not_placed": [],
        "more": 0,
        "note": note,
    }


def _sizes(figures: Mapping[str, Any]) -> str:
    """The profiles' memory the replay used, per model and source."""
    parts = []
    for entry in figures.get("profile_sizes") or []:
        sizes = ", ".join(
            f"{name} {profile['memory_bytes'] / GIB:.3g} GiB" for name, profile in entry["profiles"].items()
        )
        parts.append(f"{entry['model']} ({entry['mode']}, {entry['source']}): {sizes}")
    return "; ".join(parts)


def replay_mig_view(run: Mapping[str, Any]) -> dict[str, Any]:
    """A table of the ``mig`` policy's orders (first fit's range among them), and the sizing rule, the profiles'
    sizes and the GPUs it replayed on."""
    figures = run["mig"]
    gpu_pods = run["trace"]["gpu_pods"]
    orders = []
    for key, name in ORDER_NAMES.items():
        order = figures["orders"].get(key)
        if order is None:
            continue
        not_placed = order["not_placed"]
        orders.append(
            {
                "key": key,
                "name": name,
                "placed": f"{order['gpu_pods_placed']} / {gpu_pods}",
                "not_tried": order.get("pods_not_tried", 0),
                "gpus": _needed(order["gpus_needed"]),
                "stranded": _stranded(order.get("stranded")),
                "decided": _decided(order.get("decided_by")),
                "profiles": ", ".join(f"{name} \u00d7{count}" for name, count in order["profiles"].items()) or "-",
                "not_placed": [
                    {"pod": str(p["pod"]), "reason": str(p["reason"]), "needs": str(p["needs"])}
                    for p in not_placed[:NOT_PLACED_SHOWN]
                ],
                "more": max(len(not_placed) - NOT_PLACED_SHOWN, 0),
                "note": "",
            }
        )
        if key == "first_fit":
            spread = _range_row(figures, gpu_pods)
            if spread is not None:
                orders.append(spread)
    models = ", ".join(f"{count} {model}" for model, count in figures["gpu_models"].items())
    return {
        "gpus": figures["gpus"],
        "models": models or "none",
        "without": figures["gpus_without_mig"],
        "slices": figures["memory_slices"],
        "sources": ", ".join(f"{source} {count}" for source, count in figures["sources"].items()) or "-",
        "rule": str(figures["sizing"]["rule"]),
        "measured": figures["sizing"].get("measured_pods", 0),
        "headroom": figures["sizing"].get("headroom"),
        "sizes": _sizes(figures),
        "basis": str((figures["orders"].get("first_fit") or {}).get("gpus_needed", {}).get("basis", "")),
        "orders": orders,
    }
