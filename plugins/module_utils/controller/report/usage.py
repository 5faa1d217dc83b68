# SPDX-License-Identifier: Apache-2.0
"""The "Used versus allocated" part of the utilization section: ``usage`` of ``utilization.json``.

The utilization stage measures the GPUs' use over a window (``controller/usage``: ``summary.py`` and
``advice.py``). This module turns that into what ``usage.html.j2`` shows and recomputes none of its
figures: the window, a row per team and per template, the claims with the most idle GPU-hours, the advice,
and the geometry of one SVG chart with a panel per team of the timeline: the GPUs allocated as an outline,
inside it the active, idle and unknown GPUs stacked, and the memory used (in GPUs) as a dashed line.

A point that no use series measured is unknown: the chart draws it grey, labelled "unknown (no samples)",
and every figure that rests on unknowns alone reads "unknown", never 0 and never idle. Like the replay's
chart, a pixel column is drawn at the highest value within it (:func:`replay.envelope`). Pure Python, no
Ansible imports.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims.burst import quantity
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.replay import (
    LEFT,
    PLOT_W,
    duration,
    envelope,
    step_path,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.svg import text_label
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.advice import MIN_CLAIMS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

UNKNOWN = "unknown"
GIB = 2**30
# Rows of the claims' and candidates' tables, and panels of the chart, at most (the rest are counted).
MAX_ROWS = 20
MAX_PANELS = 12
# Stacked bottom to top inside the allocated outline.
STATES = ("active", "idle", "unknown")
STATE_LABELS = {"active": "active", "idle": "idle", "unknown": "unknown (no samples)"}
STATE_COLOURS = {"active": "#4e79a7", "idle": "#f28e2b", "unknown": "#bab0ac"}
ALLOCATED_COLOUR = "#1d232a"
MEMORY_COLOUR = "#b07aa1"
# One panel: a title row, the plot, the time axis; the right margin holds half of the last time label.
PLOT_H, TITLE_H, AXIS_H, RIGHT = 110, 24, 30, 30
PANEL_H = TITLE_H + PLOT_H + AXIS_H
TITLE_SIZE = 12.0
# Time ticks per unit: the steps that read well (a unit is used from three of it).
_TIME_UNITS = (
    ("d", 86400.0, (1, 2, 7, 14, 30, 60, 90, 180, 365)),
    ("h", 3600.0, (1, 2, 3, 6, 12, 24)),
    ("min", 60.0, (1, 2, 5, 10, 15, 30, 60)),
    ("s", 1.0, (1, 2, 5, 10, 15, 30, 60)),
)
MAX_TIME_TICKS = 8
# Tops of the GPU axis (times a power of ten): its middle tick reads well too.
NICE_FACTORS = (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)


# --------------------------------------------------------------------------
# Figures as text: what is not known reads "unknown"
# --------------------------------------------------------------------------


def hours_text(value: float | None) -> str:
    """GPU-hours (or hours): two decimals; ``unknown`` for None."""
    return UNKNOWN if value is None else f"{value:.2f}"


def share_text(value: float | None) -> str:
    """A share as a percentage with one decimal; ``unknown`` for None."""
    return UNKNOWN if value is None else f"{value * 100:.1f} %"


def gib_text(value: float | None) -> str:
    """Bytes in GiB with one decimal; ``unknown`` for None."""
    return UNKNOWN if value is None else f"{value / GIB:.1f}"


def _plain(value: float) -> str:
    """A number with at most two decimals and no trailing zeros: ``0.25``, ``2``."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def utc_text(seconds: float) -> str:
    """A Unix time as a UTC date and time: the page is read in any time zone."""
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def quantity_text(text: str, value: float | None) -> str:
    """A Kubernetes quantity as the advice writes it; plain bytes (no binary unit is exact) get their GiB."""
    return f"{text} ({gib_text(value)} GiB)" if text.isdigit() and value is not None else text


def _bytes_quantity(value: float | None) -> str:
    return UNKNOWN if value is None else quantity_text(quantity(Fraction(int(value))), value)


# --------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------


def aggregate_row(name: str, row: Mapping[str, Any]) -> dict[str, Any]:
    """One team's, template's or the site's figures as the summary gives them."""
    sized = row["claims"] - row["claims_without_size"]
    # GPU-hours count the claims of known size only: with none they are unknown, not 0; with some, at least
    known = sized > 0 or row["claims"] == 0
    bound = "\u2265 " if known and row["claims_without_size"] else ""
    return {
        "name": str(name),
        "claims": row["claims"],
        "measured": row["claims_measured"],
        "unknown": row["claims_unknown"],
        "without_size": row["claims_without_size"],
        "gpu_hours": {
            state: bound + hours_text(value) if known else UNKNOWN for state, value in row["gpu_hours"].items()
        },
        # unknown GPU-hours may have been idle: the share is then at least the figure
        "idle_share": ("\u2265 " if row.get("idle_share_is_lower_bound") and row["idle_share"] is not None else "")
        + share_text(row["idle_share"]),
        "unknown_hours_share": share_text(row["unknown_hours_share"]),
        "memory": share_text(row["memory_used_over_requested"]),
        "peak": gib_text(row["memory_peak_bytes"]),
    }


def idle_claims(claims: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The claims with the most idle GPU-hours (at most :data:`MAX_ROWS`), and those that cannot be ranked."""
    ranked = [c for c in claims if c["gpu_hours"] is not None and c["gpu_hours"]["idle"] > 0]
    ranked.sort(key=lambda c: (-c["gpu_hours"]["idle"], c["namespace"], c["claim"]))
    rows = [
        {
            "namespace": str(c["namespace"]),
            "claim": str(c["claim"]),
            "team": str(c["team"]),
            "node": UNKNOWN if c["node"] is None else str(c["node"]),
            "device": UNKNOWN if c["device"] is None else str(c["device"]),
            "gpu": UNKNOWN if c["gpu_uuid"] is None else str(c["gpu_uuid"]),
            "idle": hours_text(c["gpu_hours"]["idle"]),
            "allocated": hours_text(c["gpu_hours"]["allocated"]),
            "unknown": hours_text(c["gpu_hours"]["unknown"]),
        }
        for c in ranked[:MAX_ROWS]
    ]
    return {
        "rows": rows,
        "more": max(0, len(ranked) - MAX_ROWS),
        # idle, but of a size the summary could not tell: no GPU-hours to rank them by
        "unsized": sum(1 for c in claims if c["gpu_hours"] is None and c["hours"]["idle"] > 0),
    }


def _group_row(group: Mapping[str, Any], team: str, template: str, limit_today: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "team": str(team),
        "template": str(template),
        "claims": group["claims"],
        "measured": group["claims_measured"],
        "advised": group["advice"] is not None,
    }
    if group["advice"] is None:
        return {**row, "reason": str(group["reason"])}
    advised = group["advice"]
    return {
        **row,
        "request": {
            "today": quantity_text(str(group["today"]["request"]), group["today"].get("request_bytes")),
            "advised": quantity_text(str(advised["request"]), advised["request_bytes"]),
        },
        "limit": {
            "today": _bytes_quantity(limit_today),
            "advised": quantity_text(str(advised["limit"]), advised["limit_bytes"]),
        },
        "per_gpu": dict(group["claims_per_gpu"]),
        "burst": _plain(advised["burst_factor"]),
        "above": advised["claims_above_request"],
        "few_claims": bool(group.get("few_claims")),
        # claims with unknown steps may have peaked there: the advised request and limit are at least these
        "partly_measured": group.get("claims_partly_measured") or 0,
    }


def advice_view(advice: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The advice: a row per team and fractional template and one for the site, the whole-GPU candidates
    (at most :data:`MAX_ROWS`, the most GPU-hours first) and the inventory snippet as YAML."""
    # advice.py gives today's request (the largest of the measured shares); today's limit is the largest
    # limit of the same claims
    limits: dict[Any, float] = {}
    for claim in claims:
        if claim["kind"] == "share" and claim["memory_used_bytes"] and claim["limit_bytes"] is not None:
            for key in ((claim["team"], claim["template"]), None):
                limits[key] = max(limits.get(key, 0.0), claim["limit_bytes"])
    groups = [
        _group_row(g, g["team"], g["template"], limits.get((g["team"], g["template"]))) for g in advice["fractional"]
    ]
    found = sorted(advice["whole_gpu_candidates"], key=lambda c: (-(c["gpu_hours"] or 0.0), c["namespace"], c["claim"]))
    candidates = [
        {
            "namespace": str(c["namespace"]),
            "claim": str(c["claim"]),
            "team": str(c["team"]),
            "template": str(c["template"]),
            "memory": gib_text(c["memory_max_bytes"]),
            "memory_share": share_text(c["memory_max_share"]),
            "compute": share_text(c["compute_max"])
            if c["compute_known"]
            else (
                f"at least {share_text(c['compute_max'])} (measured at {c.get('compute_points', 0)} of "
                f"{c.get('memory_points', 0)} points)"
                if c["compute_max"] is not None
                else "compute unknown"
            ),
            "gpu_hours": hours_text(c["gpu_hours"]),
        }
        for c in found[:MAX_ROWS]
    ]
    return {
        "percentile": _plain(advice["request_percentile"]),
        "min_claims": MIN_CLAIMS,
        "groups": groups,
        "site": _group_row(advice["site"], "the site", "every fractional template", limits.get(None)),
        "candidates": candidates,
        "more_candidates": max(0, len(found) - MAX_ROWS),
        "snippet": snippet_yaml(advice["inventory_snippet"]),
    }


def snippet_yaml(snippet: Mapping[str, Any] | None) -> str | None:
    """The inventory snippet as YAML to paste (a dump, so the page shows exactly what the file holds)."""
    if snippet is None:
        return None
    import yaml

    return yaml.safe_dump(dict(snippet), default_flow_style=False, sort_keys=False)


# --------------------------------------------------------------------------
# The chart: a panel per team
# --------------------------------------------------------------------------


def time_ticks(span: float) -> list[dict[str, Any]]:
    """Ticks of the time axis from the window's start: whole days, hours, minutes or seconds."""
    if span <= 0:
        return [{"x": f"{LEFT:.1f}", "text": "0"}]
    unit, size, steps = next((entry for entry in _TIME_UNITS if span >= 3 * entry[1]), _TIME_UNITS[-1])
    count = span / size
    step = next((s for s in steps if count / s <= MAX_TIME_TICKS), math.ceil(count / MAX_TIME_TICKS))
    ticks = []
    value = 0
    while value * size <= span * (1 + 1e-9):
        ticks.append({"x": f"{LEFT + PLOT_W * value * size / span:.1f}", "text": f"{value} {unit}"})
        value += step
    return ticks


def nice_top(value: float) -> float:
    """The smallest of :data:`NICE_FACTORS` times a power of ten at or above ``value`` (1 for nothing)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    # a tolerance, so that a value already round (3.0 GPUs) is its own top
    return next(factor * power for factor in NICE_FACTORS if factor * power >= value * (1 - 1e-9))


def _panel(index: int, team: str, rows: Mapping[str, Sequence[float]], frame: Mapping[str, Any]) -> dict[str, Any]:
    """One team's panel: the states stacked as areas, the allocated outline and the memory line."""
    times, start, end = frame["times"], frame["start"], frame["end"]
    panel_top = index * PANEL_H
    plot_top = panel_top + TITLE_H
    bottom = plot_top + PLOT_H
    stacked = [sum(values) for values in zip(*(rows[f"{state}_gpus"] for state in STATES))]
    top = nice_top(max([0.0, *rows["allocated_gpus"], *rows["memory_used_gpus"], *stacked]))
    scale = PLOT_H / top
    areas = []
    cumulative = [0.0] * len(times)
    for state in STATES:
        cumulative = [below + value for below, value in zip(cumulative, rows[f"{state}_gpus"])]
        heights = envelope(times, cumulative, start, end, PLOT_W)
        # an area from the axis up to this state's top; the states below are drawn over it
        path = step_path(heights, scale, LEFT, bottom) + f"V{bottom}H{LEFT}Z"
        areas.append({"state": state, "label": STATE_LABELS[state], "colour": STATE_COLOURS[state], "path": path})
    lines = [
        {
            "series": series,
            "label": label,
            "colour": colour,
            "dashed": dashed,
            "path": step_path(envelope(times, rows[key], start, end, PLOT_W), scale, LEFT, bottom),
        }
        for series, key, label, colour, dashed in (
            ("allocated", "allocated_gpus", "GPUs allocated", ALLOCATED_COLOUR, False),
            ("memory", "memory_used_gpus", "memory used, in GPUs", MEMORY_COLOUR, True),
        )
    ]
    ticks = []
    for fraction in (0.0, 0.5, 1.0):
        y = bottom - fraction * PLOT_H
        ticks.append({"y": f"{y:.1f}", "label_y": f"{y + 4:.1f}", "text": _plain(fraction * top)})
    return {
        "team": str(team),
        "title": text_label(LEFT, panel_top + 16, str(team), PLOT_W, TITLE_SIZE, anchor="start"),
        "top": plot_top,
        "bottom": bottom,
        "middle": plot_top + PLOT_H // 2,
        "axis_y": bottom + 16,
        "scale": scale,
        "areas": list(reversed(areas)),  # the highest first, so that each lower state is drawn over it
        "lines": lines,
        "ticks": ticks,
    }


def timeline_chart(
    timeline: Mapping[str, Any], window: Mapping[str, Any], teams: Mapping[str, Mapping[str, Any]]
) -> dict[str, Any] | None:
    """The chart's geometry: a panel per team of the timeline (the :data:`MAX_PANELS` teams with the most
    GPU-hours allocated, in name order); None without a team or a bucket."""
    found = timeline["teams"]
    if not found or not timeline["buckets"]:
        return None

    def allocated(name: str) -> float:
        return -float(((teams.get(name) or {}).get("gpu_hours") or {}).get("allocated") or 0.0)

    chosen = sorted(sorted(found, key=lambda name: (allocated(name), name))[:MAX_PANELS])
    start = timeline["start"]
    span = window["points"] * window["step_seconds"]
    frame = {
        "start": start,
        "end": start + span,
        "times": [start + bucket * timeline["bucket_seconds"] for bucket in range(timeline["buckets"])],
    }
    panels = [_panel(index, name, found[name], frame) for index, name in enumerate(chosen)]
    return {
        "width": LEFT + PLOT_W + RIGHT,
        "height": PANEL_H * len(panels),
        "left": LEFT,
        "right": LEFT + PLOT_W,
        "panels": panels,
        "x_ticks": time_ticks(span),
        "left_out": len(found) - len(chosen),
        "bucket": duration(timeline["bucket_seconds"]),
        "seconds_per_column": span / PLOT_W,
    }


# --------------------------------------------------------------------------
# The section
# --------------------------------------------------------------------------


def usage_view(usage: Mapping[str, Any]) -> dict[str, Any]:
    """What the "Used versus allocated" section shows, from ``usage`` of a checked ``utilization.json``."""
    window = usage["window"]
    chart = timeline_chart(usage["timeline"], window, usage["teams"])
    return {
        "source": str(usage["source"]),
        "window": {
            "start": utc_text(window["start"]),
            "end": utc_text(window["end"]),
            "step": duration(window["step_seconds"]),
            "hours": _plain(window["hours"]),
            "points": window["points"],
        },
        "threshold": share_text(usage["sm_idle_threshold"]),
        "missing": [str(name) for name in usage.get("series_missing") or []],
        "totals": aggregate_row("all teams", usage["totals"]),
        "teams": [aggregate_row(name, row) for name, row in usage["teams"].items()],
        "templates": [aggregate_row(name, row) for name, row in usage["templates"].items()],
        "chart": chart,
        "column": duration(chart["seconds_per_column"]) if chart else None,
        "not_charted": sorted(str(name) for name in usage["teams"] if name not in usage["timeline"]["teams"]),
        # a claim of unknown size is drawn as one GPU, unknown: the allocated outline there is a bound
        "bounded": sorted(str(name) for name in usage["timeline"].get("unsized_as_one_gpu") or []),
        "legend": [{"label": STATE_LABELS[state], "colour": STATE_COLOURS[state]} for state in STATES],
        "colours": {"allocated": ALLOCATED_COLOUR, "memory": MEMORY_COLOUR},
        "idle": idle_claims(usage["claims"]),
        # allocated now (the claims read), named by no series of the window: hours unknown, so not summed
        "not_measured": [f"{c['namespace']}/{c['claim']}" for c in usage.get("claims_not_measured") or []],
        "nvml_down": {str(node): _plain(hours) for node, hours in (usage.get("nvml_unavailable_hours") or {}).items()},
        "advice": advice_view(usage["advice"], usage["claims"]),
    }
