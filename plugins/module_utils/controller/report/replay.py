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
two instants; the caption says so too). Pure Python, no Ansible imports.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

POLICY_ORDER = ("whole", "fractional", "thin")
COLOURS = {"whole": "#4e79a7", "fractional": "#f28e2b", "thin": "#e15759"}
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


def _duration(seconds: float) -> str:
    """A span of the trace in the largest unit that keeps it readable."""
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


def _step_path(heights: Sequence[float], scale: float, x0: float, bottom: float) -> str:
    """An SVG path of the column heights (milli-GPUs), one pixel column each."""
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
                    "path": _step_path(heights, scale, LEFT, bottom),
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
        "span": _duration(end - start),
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
        "window": _duration(basis["window_seconds"]) if basis.get("window_seconds") else None,
        "notes": notes,
        "chart": chart,
        "column": _duration(chart["seconds_per_column"]) if chart else None,
        "bars": None if timeline else saturation_bars(runs),
        "legend": [{"policy": str(name), "colour": COLOURS.get(name, OTHER_COLOUR)} for name, _run in runs],
        "left_header": "GPU pods that could not start" if timeline else "pods not tried",
        "rows": [_row(name, run) for name, run in runs],
        "thin": thin_rows(runs),
    }
