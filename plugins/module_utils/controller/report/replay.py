# SPDX-License-Identifier: Apache-2.0
"""The replay section of the site report: a workload trace replayed with whole, fractional and thin GPUs.

Reads ``<site>/replay.json`` (``playbooks/replay.yml``: one ``replay`` result
of :mod:`aligned.dra.replay` per policy) and computes what the section shows
(``replay.html.j2`` draws it): the ratio of pods placed, a row per policy,
and the geometry of an inline SVG chart - in timeline mode the GPUs occupied
and requested over time per policy, in saturation mode the GPUs allocated
and requested when the replay stopped.

The chart never shows less than the series holds: a pixel column stands for
an interval of the trace and is drawn at the highest value within it (the
caption says so). The series itself leaves out a pod created and deleted at
the same instant (placed, and counted in the rows, but never running between
two instants; the caption says so too).

On measured use (``measured``, docs/replay.md "Thin provisioning on measured
use") the section adds a table with a column per policy, and under ``thin``
with ``thin_factors`` the geometry of a chart of evictions per day against
GPUs saved, one point per burst factor; a factor whose run dropped pods or
left some unstarted is drawn open and marked in its table (its GPUs saved
come partly from pods that did not run). Under the policy ``mig`` a table
compares the driver's order with a fragmentation-aware one
(:func:`report.mig.replay_mig_view`). Pure Python, no Ansible imports.
"""

from __future__ import annotations

import math

from ansible_collections.aligned.dra.plugins.module_utils.controller.report.mig import replay_mig_view
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.svg import text_width

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

POLICY_ORDER = ("whole", "fractional", "thin", "mig")
COLOURS = {"whole": "#4e79a7", "fractional": "#f28e2b", "thin": "#e15759", "mig": "#76b7b2"}
OTHER_COLOUR = "#59a14f"
CAPACITY_COLOUR = "#8c8c8c"
# The time chart: plot area and margins, in pixels.
PLOT_W, PLOT_H = 560, 180
LEFT, TOP, BOTTOM, RIGHT = 56, 12, 30, 16


def _gpus(milli: float) -> str:
    """Milli-GPUs as GPUs: ``2500`` -> ``2.5``."""
    return f"{milli / 1000:.3f}".rstrip("0").rstrip(".")


def _file_name(path: str | None) -> str:
    """The trace's file name: the page may travel, the controller's directories stay home."""
    import os

    return os.path.basename(path) if path else "(unnamed)"


def _percent(share: float | None) -> str:
    return "unknown" if share is None else f"{share * 100:.1f} %"


def duration(seconds: float) -> str:
    """A span of time in the largest unit that keeps it readable."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if abs(seconds) >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.3g} s"


def policies_of(replay: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``[(policy, result)]``: whole first, then fractional, then any other."""
    found = replay["policies"]
    names = [p for p in POLICY_ORDER if p in found] + sorted(p for p in found if p not in POLICY_ORDER)
    return [(name, found[name]) for name in names]


# --------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------


def placed_ratio(replay: Mapping[str, Any]) -> dict[str, Any] | None:
    """Pods placed with fractional GPUs over those placed with whole GPUs (None without both policies)."""
    found = replay["policies"]
    if "whole" not in found or "fractional" not in found:
        return None
    whole, fractional = found["whole"]["pods_placed"], found["fractional"]["pods_placed"]
    gpu_whole, gpu_fractional = found["whole"]["gpu_pods_placed"], found["fractional"]["gpu_pods_placed"]
    return {
        "whole": whole,
        "fractional": fractional,
        "ratio": fractional / whole if whole else None,
        "gpu_ratio": gpu_fractional / gpu_whole if gpu_whole else None,
    }


def envelope(times: Sequence[float], values: Sequence[float], start: float, end: float, columns: int) -> list[float]:
    """The step series ``(times, values)`` as ``columns`` intervals of ``[start, end]``, each its highest value.

    Before the first point the value is 0; a point holds until the next.
    """
    out = [0.0] * columns
    count = len(times)
    if count == 0 or columns <= 0:
        return out
    span = end - start
    if span <= 0:
        return [float(values[-1])] * columns
    index, current = 0, 0.0
    for column in range(columns):
        left = start + span * column / columns
        right = start + span * (column + 1) / columns
        while index < count and times[index] <= left:
            current = values[index]
            index += 1
        top = current
        while index < count and times[index] < right:
            current = values[index]
            top = max(top, current)
            index += 1
        out[column] = top
    return out


def step_path(heights: Sequence[float], scale: float, x0: float, bottom: float) -> str:
    """An SVG path of the column heights (in the chart's unit, ``scale`` pixels each), one pixel column each."""
    parts = []
    last = None
    for column, value in enumerate(heights):
        y = bottom - value * scale
        if last is None:
            parts.append(f"M{x0 + column:.0f} {y:.1f}")
        elif y != last:
            parts.append(f"H{x0 + column:.0f}V{y:.1f}")
        last = y
    parts.append(f"H{x0 + len(heights):.0f}")
    return "".join(parts)


def time_chart(replay: Mapping[str, Any]) -> dict[str, Any] | None:
    """Geometry of the timeline chart: per policy the occupied and requested GPUs; None without a series."""
    runs = [(name, run) for name, run in policies_of(replay) if run.get("timeline") and run["timeline"]["time"]]
    if not runs:
        return None
    start = min(run["timeline"]["start"] for _name, run in runs)
    end = max(run["timeline"]["end"] for _name, run in runs)
    capacity = max(run["gpus_total"] for _name, run in runs) * 1000
    top = max(
        [capacity]
        + [max(run["timeline"]["occupied_milli"] + run["timeline"]["requested_milli"]) for _name, run in runs]
    )
    scale = PLOT_H / top if top else 0.0
    bottom = TOP + PLOT_H
    lines = []
    for name, run in runs:
        line = run["timeline"]
        for series, dashed in (("occupied_milli", False), ("requested_milli", True)):
            heights = envelope(line["time"], line[series], start, end, PLOT_W)
            lines.append(
                {
                    "policy": name,
                    "series": series[: -len("_milli")],
                    "colour": COLOURS.get(name, OTHER_COLOUR),
                    "dashed": dashed,
                    "path": step_path(heights, scale, LEFT, bottom),
                }
            )
    ticks = []
    for fraction in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = bottom - fraction * top * scale
        ticks.append({"y": f"{y:.1f}", "label_y": f"{y + 4:.1f}", "text": _gpus(fraction * top)})
    return {
        "width": LEFT + PLOT_W + RIGHT,
        "height": TOP + PLOT_H + BOTTOM,
        "left": LEFT,
        "right": LEFT + PLOT_W,
        "bottom": bottom,
        "middle": TOP + PLOT_H // 2,
        "lines": lines,
        "ticks": ticks,
        "capacity_y": f"{bottom - capacity * scale:.1f}" if capacity else None,
        "capacity": _gpus(capacity),
        "span": duration(end - start),
        "seconds_per_column": (end - start) / PLOT_W,
    }


# --------------------------------------------------------------------------
# The section's data
# --------------------------------------------------------------------------


def saturation_bars(runs: list[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """Geometry of the saturation chart: per policy, GPUs allocated and requested at the stop, on the capacity."""
    label_w, bar_w, row_h = 170, 320, 20
    capacity = max(run["gpus_total"] for _name, run in runs) * 1000
    bars = []
    for name, run in runs:
        for series in ("allocated", "requested"):
            milli = run["shares_of"].get(series + "_milli") or 0
            y = 4 + len(bars) * row_h
            bars.append(
                {
                    "policy": name,
                    "series": series,
                    "label": {"x": label_w - 6, "y": y + 13, "text": f"{name} {series}"},
                    "y": y + 2,
                    "x": label_w,
                    "width": f"{bar_w * milli / capacity if capacity else 0.0:.1f}",
                    "full": bar_w,
                    "colour": COLOURS.get(name, OTHER_COLOUR),
                    "opacity": "1" if series == "allocated" else "0.45",
                    "count": {"x": label_w + bar_w + 6, "y": y + 13, "text": f"{_gpus(milli)} / {_gpus(capacity)}"},
                }
            )
    return {"width": label_w + bar_w + 90, "height": row_h * len(bars) + 8, "bars": bars}


def _row(name: str, run: Mapping[str, Any]) -> dict[str, Any]:
    timeline = run.get("timeline")
    first = run["first_unplaced"]
    return {
        "policy": str(name),
        "applied": str(run["policy_applied"]),
        "pods": f"{run['pods_placed']} / {run['trace']['pods']}",
        "gpu_pods": f"{run['gpu_pods_placed']} / {run['trace']['gpu_pods']}",
        "allocated": _percent(run["gpu_allocated_share"]),
        "requested": _percent(run["gpu_requested_share"]),
        "peak": _gpus(timeline["peak"]["occupied"]["milli"]) if timeline else "-",
        "left": timeline["unstarted_gpu_pods"] if timeline else run.get("pods_not_tried", 0),
        "first": str(first["name"]) if first else "none",
    }


def thin_rows(runs: list[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Per run with ``thin`` (the thin policy applied): GPU memory promised against guaranteed, in GPUs."""
    rows = []
    for name, run in runs:
        thin = run.get("thin")
        if not thin:
            continue
        rows.append(
            {
                "policy": str(name),
                "promised": _gpus(thin["promised_milli"]),
                "guaranteed": _gpus(thin["guaranteed_milli"]),
                "over": _gpus(thin["over_request_milli"]),
                "promised_share": _percent(thin["promised_share"]),
                "guaranteed_share": _percent(thin["guaranteed_share"]),
                "pods_with_limit": int(thin["pods_with_limit"]),
                "basis": str(thin["basis"]) + ("" if thin.get("time") is None else f" (t = {thin['time']:g} s)"),
            }
        )
    return rows


# --------------------------------------------------------------------------
# On measured use: the figures per policy, evictions against GPUs saved per burst factor
# --------------------------------------------------------------------------

# The factor chart: plot area and margins, in pixels (room for the tick labels and the axis titles).
FACTOR_W, FACTOR_H = 360, 200
F_LEFT, F_TOP, F_BOTTOM, F_RIGHT = 56, 14, 44, 16
FACTOR_FONT = 11.0


def _memory(value: float) -> str:
    """Bytes in GiB: ``85899345920`` -> ``80 GiB``."""
    return f"{value / 2**30:.1f}".removesuffix(".0") + " GiB"


def _of(part: float, whole: float) -> str:
    """``part`` as a share of ``whole``; unknown when there is nothing to be a share of."""
    return _percent(part / whole if whole else None)


def _per_day(value: float | None) -> str:
    """Evictions per day to a tenth; ``-`` without a window to count a day over."""
    return "-" if value is None else f"{value:.1f}"


def _counted(value: Any) -> bool:
    """Whether a figure of the file is a count (replay.json files written before a figure was added lack it)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _count_text(value: Any) -> str:
    """A count as the table writes it; ``-`` where the file does not give one."""
    return str(value) if _counted(value) else "-"


def _reserve(rules: Mapping[str, Any]) -> str:
    """``gpu_reserve`` in GiB; ``-`` where the file predates it."""
    value = rules.get("gpu_reserve_bytes")
    return _memory(value) if _counted(value) else "-"


def _over_memory(measured: Mapping[str, Any]) -> str:
    """Where a GPU's pods and the reserve stayed above its memory after the evictions: steps, GPU-time, pods."""
    over = measured.get("over_memory")
    if not isinstance(over, dict) or not _counted(over.get("steps")) or not _counted(over.get("pods")):
        return "-"
    steps, pods, seconds = over["steps"], over["pods"], over.get("gpu_seconds")
    if not steps:
        return "none"
    timed = isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and 0 <= seconds < math.inf
    time = f", {duration(seconds)} of GPU time" if timed else ""
    return f"{steps} step{'s' * (steps != 1)}{time}, {pods} pod{'s' * (pods != 1)}"


def partly_unplaced(factor: Mapping[str, Any]) -> bool:
    """Whether a factor's run dropped pods or left some unstarted: its GPUs saved are partly theirs, not savings."""
    return (
        factor.get("all_placed") is False
        or (_counted(factor.get("pods_dropped")) and factor["pods_dropped"] > 0)
        or (_counted(factor.get("pods_unstarted")) and factor["pods_unstarted"] > 0)
    )


def _gpu_memory(memory: Mapping[str, Any]) -> str:
    """The GPUs' memory and where it came from; the plan's beside the option's when they differ."""
    text = f"{_memory(memory['bytes'])} ({'the plan' if memory['source'] == 'plan' else 'gpu_memory'})"
    plan = memory.get("plan_bytes")
    if plan is not None and plan != memory["bytes"]:
        text += f"; the plan publishes {_memory(plan)}"
    return text


# The rules' short names in words (docs/replay.md, "Requests and limits"); others (p95, 2 x request) read as they are.
_RULE_WORDS = {
    ("request", "request"): "the trace's request",
    ("limit", "max"): "its largest sample",
    ("limit", "request"): "its request",
}


def _rule(value: Any, which: str) -> str:
    """A rule (``which``: request or limit) in words where its short name says little."""
    return _RULE_WORDS.get((which, value), str(value))


# The rows of the measured table: (key, label, the cell of one policy's ``measured``).
_MEASURED_ROWS: tuple[tuple[str, str, Any], ...] = (
    ("applied", "rules of the policy", lambda m: str(m["rules"]["policy"])),
    ("request", "request rule", lambda m: _rule(m["rules"]["request"], "request")),
    ("limit", "limit rule", lambda m: _rule(m["rules"]["limit"], "limit")),
    ("margin", "reclaim margin", lambda m: f"{m['rules']['reclaim_margin']:g} %"),
    ("reserve", "GPU reserve (memory of no pod)", lambda m: _reserve(m["rules"])),
    ("on_evict", "an evicted pod is", lambda m: "requeued" if m["rules"]["on_evict"] == "requeue" else "dropped"),
    ("gpu_memory", "a GPU's memory", lambda m: _gpu_memory(m["gpu_memory"])),
    ("placed", "GPU pods placed", lambda m: f"{m['pods_placed']} of {m['pods']}"),
    ("unstarted", "GPU pods that could not start", lambda m: str(m["pods_unstarted"])),
    ("gpus_peak", "GPUs needed, peak", lambda m: f"{m['gpus_needed']['peak']:g} of {m['gpus_total']}"),
    ("gpus_mean", "GPUs needed, time-weighted", lambda m: f"{m['gpus_needed']['mean']:.2f}"),
    ("evictions", "evictions", lambda m: str(m["evictions"])),
    ("per_day", "evictions per day", lambda m: _per_day(m["evictions_per_day"])),
    ("pods_evicted", "pods evicted", lambda m: str(m["pods_evicted"])),
    ("pods_dropped", "pods dropped (evicted, not run again)", lambda m: _count_text(m.get("pods_dropped"))),
    ("over_memory", "GPUs over memory after evictions", _over_memory),
    (
        "evictions_over_memory",
        "evictions from a GPU over its memory",
        lambda m: _count_text((m.get("over_memory") or {}).get("evictions")),
    ),
    ("requeued", "evicted pods placed again", lambda m: str(m["requeued"])),
    ("waiting", "evicted pods still waiting at the end", lambda m: str(len(m["waiting_at_end"]))),
    (
        "promised_peak",
        "memory promised (limits), peak",
        lambda m: _of(m["memory"]["promised_bytes"]["peak"], m["memory"]["capacity_bytes"]),
    ),
    (
        "promised_mean",
        "memory promised, time-weighted",
        lambda m: _of(m["memory"]["promised_bytes"]["mean"], m["memory"]["capacity_bytes"]),
    ),
    (
        "used_peak",
        "memory used, peak",
        lambda m: _of(m["memory"]["used_bytes"]["peak"], m["memory"]["capacity_bytes"]),
    ),
    (
        "used_mean",
        "memory used, time-weighted",
        lambda m: _of(m["memory"]["used_bytes"]["mean"], m["memory"]["capacity_bytes"]),
    ),
)


_TEXT_ROWS = frozenset(("applied", "request", "limit", "on_evict", "gpu_memory", "over_memory"))


def measured_table(runs: list[tuple[str, Mapping[str, Any]]]) -> dict[str, Any] | None:
    """The figures on measured use, a column per policy that has them; None when none has."""
    found = [(str(name), run["measured"]) for name, run in runs if run.get("measured")]
    if not found:
        return None
    first = found[0][1]
    window = first["window"].get("seconds")
    return {
        "policies": [name for name, _m in found],
        "rows": [
            {
                "key": key,
                "label": label,
                "num": key not in _TEXT_ROWS,
                "cells": [cell(measured) for _name, measured in found],
            }
            for key, label, cell in _MEASURED_ROWS
        ],
        "capacity": _memory(first["memory"]["capacity_bytes"]),
        "basis": f"the mean over {duration(window)}" if window else str(first["basis"]),
        # replayed without a reserve: the trigger saw less than the driver's NVML reading would
        "lower": [name for name, measured in found if measured.get("evictions_bound") == "lower"],
    }


def _ticks(low: float, high: float, integer: bool) -> list[float]:
    """Round tick values from at or below ``low`` to at or above ``high`` (1, 2 or 5 times a power of ten).

    An empty range (one value, or all zero) is widened to one unit, so the scale never divides by zero.
    """
    if high <= low:
        high = low + 1
    raw = (high - low) / 4
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    if integer:
        step = max(step, 1)  # GPUs come whole: no tick between two
    first, last = math.floor(low / step), math.ceil(high / step)
    return [round(k * step, 10) for k in range(first, last + 1)]


def factor_label(factor: float) -> str:
    """A burst factor as the chart and the table write it: ``1.5`` -> ``×1.5``."""
    return f"\u00d7{factor:g}"


def factor_chart(factors: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Geometry of evictions per day (y) against GPUs saved (x), a point per factor joined in factor order.

    None when a factor has no evictions per day (a trace of one instant has no window to count a day over).
    """
    if any(f["evictions_per_day"] is None for f in factors):
        return None
    xs = [f["gpus_saved"] for f in factors]
    ys = [f["evictions_per_day"] for f in factors]
    # 0 on both axes: no GPU saved and no eviction are the references the points are read against
    x_ticks = _ticks(min(0, *xs), max(0, *xs), integer=all(float(x).is_integer() for x in xs))
    y_ticks = _ticks(0, max(ys), integer=False)
    (x0, x1), (y0, y1) = (x_ticks[0], x_ticks[-1]), (y_ticks[0], y_ticks[-1])
    bottom, right = F_TOP + FACTOR_H, F_LEFT + FACTOR_W

    def px(x: float) -> float:
        return F_LEFT + (x - x0) / (x1 - x0) * FACTOR_W

    def py(y: float) -> float:
        return bottom - (y - y0) / (y1 - y0) * FACTOR_H

    points = [
        {"factor": f["factor"], "x": px(x), "y": py(y), "open": partly_unplaced(f)}
        for f, x, y in zip(factors, xs, ys, strict=True)
    ]
    # factors that fall on one spot share one label, so no text is drawn over another
    spots: dict[tuple[float, float], list[float]] = {}
    for point in points:
        spots.setdefault((round(point["x"], 1), round(point["y"], 1)), []).append(point["factor"])
    width = right + F_RIGHT
    labels = []
    for (x, y), shared in spots.items():
        text = ", ".join(factor_label(f) for f in shared)
        # right of the point, or left of it where the text would leave the picture
        after = x + 7 + text_width(text, FACTOR_FONT) <= width
        labels.append(
            {
                "x": f"{x + (7 if after else -7):.1f}",
                "y": f"{y - 5:.1f}",
                "anchor": "start" if after else "end",
                "text": text,
            }
        )
    return {
        "width": width,
        "height": bottom + F_BOTTOM,
        "left": F_LEFT,
        "right": right,
        "top": F_TOP,
        "bottom": bottom,
        "middle_x": F_LEFT + FACTOR_W // 2,
        "middle_y": F_TOP + FACTOR_H // 2,
        "x_axis": {"low": x0, "high": x1},
        "y_axis": {"low": y0, "high": y1},
        "x_ticks": [{"x": f"{px(v):.1f}", "text": f"{v:g}"} for v in x_ticks],
        "y_ticks": [{"y": f"{py(v):.1f}", "label_y": f"{py(v) + 4:.1f}", "text": f"{v:g}"} for v in y_ticks],
        "points": [
            {
                "factor": f"{p['factor']:g}",
                "x": f"{p['x']:.1f}",
                "y": f"{p['y']:.1f}",
                "label": factor_label(p["factor"]),
                "open": p["open"],
            }
            for p in points
        ],
        "path": "".join(f"{'L' if i else 'M'}{p['x']:.1f} {p['y']:.1f}" for i, p in enumerate(points))
        if len(points) > 1
        else None,
        "labels": labels,
        "colour": COLOURS["thin"],
    }


def factor_view(name: str, run: Mapping[str, Any]) -> dict[str, Any]:
    """A policy's burst factors (``thin_factors``): the chart, a row per factor, the GPUs of the baseline."""
    factors = sorted(run["thin_factors"], key=lambda f: f["factor"])
    return {
        "policy": str(name),
        "chart": factor_chart(factors),
        "fractional": factors[0]["gpus_fractional"],
        "rows": [
            {
                "factor": f"{f['factor']:g}",
                "label": factor_label(f["factor"]),
                "gpus": f"{f['gpus']:g}",
                "saved": f"{f['gpus_saved']:g}",
                "partly": partly_unplaced(f),
                "evictions": str(f["evictions"]),
                "per_day": _per_day(f["evictions_per_day"]),
                "pods_evicted": str(f["pods_evicted"]),
                "pods_dropped": _count_text(f.get("pods_dropped")),
                "pods_unstarted": _count_text(f.get("pods_unstarted")),
            }
            for f in factors
        ],
        "partly": any(partly_unplaced(f) for f in factors),
    }


def replay_view(replay: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the replay section shows: the inputs, the ratio, what the shares are of, the chart, a row per policy."""
    runs = policies_of(replay)
    if not runs:
        return None
    first = runs[0][1]
    trace, basis = first["trace"], first["shares_of"]
    timeline = first["mode"] == "timeline"
    ratio = placed_ratio(replay)
    chart = time_chart(replay) if timeline else None
    notes = [f"{name}: {run['fallback']}" for name, run in runs if run.get("fallback")]
    notes += [str(note) for note in first["nodes"].get("notes") or []]
    return {
        "trace": {"file": _file_name(trace.get("path")), "format": str(trace["format"]), "pods": trace["pods"]},
        "gpu_pods": trace["gpu_pods"],
        "gpus": first["gpus_total"],
        "nodes": first["nodes"]["count"],
        "order": str(first["order"]),
        "mode": str(first["mode"]),
        "ratio": None
        if ratio is None
        else dict(
            ratio, text="unknown (no pod placed with whole GPUs)" if ratio["ratio"] is None else f"{ratio['ratio']:.2f}"
        ),
        "capacity": {"gpus": _gpus(basis["capacity_milli"]), "milli": basis["capacity_milli"]},
        "basis": str(basis["basis"]),
        "window": duration(basis["window_seconds"]) if basis.get("window_seconds") else None,
        "notes": notes,
        "chart": chart,
        "column": duration(chart["seconds_per_column"]) if chart else None,
        "bars": None if timeline else saturation_bars(runs),
        "legend": [{"policy": str(name), "colour": COLOURS.get(name, OTHER_COLOUR)} for name, _run in runs],
        "left_header": "GPU pods that could not start" if timeline else "pods not tried",
        "rows": [_row(name, run) for name, run in runs],
        "thin": thin_rows(runs),
        "measured": measured_table(runs),
        "factors": [factor_view(name, run) for name, run in runs if run.get("thin_factors")],
        # the policy mig: the driver's order against a fragmentation-aware one (report/mig.py)
        "mig": [dict(replay_mig_view(run), policy=str(name)) for name, run in runs if run.get("mig")],
    }
