# SPDX-License-Identifier: Apache-2.0
"""Exported series read from files, and evaluated on the grid as Prometheus 2.42 evaluates the source's queries.

:func:`read_samples` reads every file's raw samples of :data:`~.METRICS`
(others are ignored): OpenMetrics or Prometheus text with timestamps in
seconds (what ``promtool tsdb create-blocks-from openmetrics`` reads), or a
saved JSON answer of Prometheus's ``query`` or ``query_range`` (an instant
query of a range vector, ``{__name__=~"..."}[7d]``, answers the raw samples
as a ``matrix``). :func:`evaluate` puts them on the grid: a plain selector's
latest sample within the lookback, ``max_over_time`` or ``avg_over_time``
over the step (:data:`FUNCTIONS`), both ends of every range included.
:func:`matrix` reads Prometheus's JSON answers, for the files and for
``source``'s HTTP answers alike.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import json
import math
import operator
import re
from array import array
from bisect import bisect_left, bisect_right
from itertools import islice

from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import (
    CLAIM_SM,
    CLAIM_SMS_BUSY,
    CLAIM_USED,
    DCGM_UTIL,
    METRICS,
    UsageError,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.series import Series

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

# Prometheus's default --query.lookback-delta: a plain selector's last sample counts for 5 minutes.
LOOKBACK_MS = 300_000
# How each metric is asked: "max" and "avg" over the step before each grid point, else the last value.
FUNCTIONS = {CLAIM_USED: "max", CLAIM_SM: "avg", CLAIM_SMS_BUSY: "avg", DCGM_UTIL: "avg"}

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*(?:,|$)')
_ESCAPE = re.compile(r"\\(.)")
_UNESCAPED = {"n": "\n", "\\": "\\", '"': '"'}
# The compact form Prometheus writes: read series by series, without a Python object per sample.
_MATRIX_HEAD = re.compile(r'\s*\{"status":"success","data":\{"resultType":"matrix","result":\[')
_PAIR = re.compile(r'\[([^,\[\]"]+),"([^"]*)"\]')
_DECODER = json.JSONDecoder()
_EOF = object()


def _matrix_compact(text: str) -> Iterable[tuple[dict[str, str], list]] | None:
    """The series of a ``query_range`` answer in Prometheus's compact form, each with its ``(t, "v")`` pairs, one
    at a time; None when the text is in another form (then it is read whole with :mod:`json`)."""
    head = _MATRIX_HEAD.match(text)
    if not head:
        return None
    items = []
    pos = head.end()
    if text.startswith("]", pos):
        return items
    while True:
        if not text.startswith('{"metric":', pos):
            return None
        try:
            labels, pos = _DECODER.raw_decode(text, pos + len('{"metric":'))
        except ValueError:
            return None
        if not isinstance(labels, dict) or not text.startswith(',"values":[', pos):
            return None
        first = pos + len(',"values":[')
        if text.startswith("]}", first):  # no value: nothing to take
            items.append((labels, first, first))
            pos = first + 2
        else:
            stop = text.find("]]", first)  # a value is a quoted number: no bracket inside
            if stop < 0 or not text.startswith("}", stop + 2):
                return None
            # the pairs are taken when the caller gets to this series: one series' strings at a time
            items.append((labels, first, stop + 1))
            pos = stop + 3
        if text.startswith("]", pos):
            break
        if not text.startswith(",", pos):
            return None
        pos += 1
    return _compact_pairs(text, items)


def _compact_pairs(text: str, items: list[tuple[dict, int, int]]) -> Iterable[tuple[dict[str, str], list]]:
    """Each series' labels and its ``(t, "v")`` pairs, found in ``text`` between the offsets of ``items``."""
    for labels, first, stop in items:
        pairs = _PAIR.findall(text, first, stop)
        if len(pairs) != text.count("[", first, stop):
            raise ValueError(f'{labels}: a value is not a [time, "value"] pair')
        yield labels, pairs


def matrix(text: str) -> tuple[str, Iterable[tuple[dict[str, str], list]]]:
    """``(resultType, [(labels, [(t, v), ...]), ...])`` of a ``query`` or ``query_range`` answer; ValueError
    (naming what is wrong) on a text that is not a successful one."""
    compact = _matrix_compact(text)
    if compact is not None:
        return "matrix", compact
    body = json.loads(text)
    if not isinstance(body, dict):
        raise ValueError("not a JSON object")
    if body.get("status", "success") != "success":
        raise ValueError(f"status {body.get('status')!r}: {body.get('error', '')}")
    data = body.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise ValueError('no "data": {"result": [...]}')
    kind = data.get("resultType")
    if kind not in ("matrix", "vector"):
        raise ValueError(f"resultType {kind!r}, not matrix or vector")
    out = []
    for number, item in enumerate(data["result"], 1):
        if not isinstance(item, dict) or not isinstance(item.get("metric"), dict):
            raise ValueError(f"result {number} has no metric")
        pairs = item.get("values", []) if kind == "matrix" else [item["value"]] if "value" in item else []
        if not isinstance(pairs, list) or not all(isinstance(pair, list) and len(pair) == 2 for pair in pairs):
            raise ValueError(f'result {number} ({item["metric"]}): a value is not a [time, "value"] pair')
        out.append((item["metric"], pairs))
    return kind, out


class _Samples(dict):
    """Every file's samples of the metrics kept, per ``(metric, labels)``: labels, times (ms), values (arrays)."""

    def of(self, metric: str, labels: dict[str, str]) -> tuple[array, array]:
        """The times and values arrays of one series, made empty on its first sample."""
        entry = self.setdefault((metric, tuple(sorted(labels.items()))), (labels, array("q"), array("d")))
        return entry[1], entry[2]


def _text_head(head: str) -> tuple[str, dict[str, str]]:
    """Name and labels of ``name{l="v",...}``; ValueError names what is wrong."""
    brace = head.find("{")
    name = head if brace < 0 else head[:brace].strip()
    if not _METRIC_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a metric name")
    labels: dict[str, str] = {}
    if brace >= 0:
        body, pos = head[brace + 1 : -1], 0
        while pos < len(body) and body[pos:].strip():
            found = _LABEL.match(body, pos)
            if not found:
                raise ValueError(f"cannot read the labels {{{body}}}")
            if found.group(2):  # an empty label is no label, as Prometheus stores it
                labels[found.group(1)] = _ESCAPE.sub(lambda m: _UNESCAPED.get(m.group(1), m.group(0)), found.group(2))
            pos = found.end()
    return name, labels


def _text_line(line: str, number: int, where: str, samples: _Samples, heads: dict, option: str) -> Any:
    """The slow path of :func:`_read_text`: a comment, a blank line, a series seen first (its labels parsed
    and remembered) or a bad line. ``(entry, value, timestamp)``, None to skip or ``_EOF``."""
    text = line.strip()
    if not text or text[0] == "#":
        return _EOF if text.startswith("# EOF") else None
    close = text.rfind("}")
    split = close + 1 if close >= 0 else len(text.split(None, 1)[0])
    head, parts = text[:split], text[split:].split()
    if len(parts) != 2:
        what = "no timestamp (seconds since the epoch)" if len(parts) == 1 else "not name{labels} value timestamp"
        raise UsageError(f"{option}: {where} line {number}: {what}: {text[:200]}")
    if head not in heads:
        try:
            name, labels = _text_head(head)
        except ValueError as exc:
            raise UsageError(f"{option}: {where} line {number}: {exc}") from None
        if name in METRICS:
            times, values = samples.of(name, labels)
            heads[head] = (times.append, values.append)
        else:
            heads[head] = None
    return heads[head], parts[0], parts[1]


def _read_text(handle: Iterable[str], where: str, samples: _Samples, option: str) -> None:
    """OpenMetrics / Prometheus text, one sample a line: a line of a series seen before costs a split, a
    dictionary look-up and two numbers (each distinct series text is parsed once)."""
    heads: dict[str, Any] = {}
    for number, line in enumerate(handle, 1):
        try:
            head, value, stamp = line.rsplit(None, 2)
            entry = heads[head]
        except (ValueError, KeyError):
            entry = _text_line(line, number, where, samples, heads, option)
            if entry is None or entry is _EOF:
                if entry is _EOF:
                    return
                continue
            entry, value, stamp = entry
        if entry is None:  # a metric the source does not read
            continue
        try:
            seconds, number_value = float(stamp), float(value)
        except ValueError:
            raise UsageError(f"{option}: {where} line {number}: bad value or timestamp {value} {stamp}") from None
        if not -1e11 < seconds < 1e11:  # also NaN: milliseconds, or no time at all
            raise UsageError(f"{option}: {where} line {number}: timestamp {stamp} is not seconds since the epoch")
        entry[0](int(seconds * 1000))  # as promtool reads it: truncated to the millisecond
        entry[1](number_value)


def _read_json(text: str, path: str, samples: _Samples, option: str) -> None:
    """A saved ``query`` or ``query_range`` answer: every result names its metric (``__name__``); an instant
    query of a range vector answers raw samples, read as the text's are."""
    try:
        _kind, items = matrix(text)
        for number, (labels, pairs) in enumerate(items, 1):
            labels = {key: value for key, value in labels.items() if value != ""}
            name = labels.pop("__name__", None)
            if not name:
                raise UsageError(
                    f"{option}: {path}: result {number} ({labels}) has no __name__: save the answer of a plain "
                    "selector (a function's answer loses the metric's name)"
                )
            if name not in METRICS:
                continue
            times, values = samples.of(name, labels)
            times.extend(round(float(pair[0]) * 1000) for pair in pairs)
            values.extend(map(float, (pair[1] for pair in pairs)))
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{option}: {path}: not a Prometheus query answer: {exc}") from None


def _ordered(times: array, values: array) -> tuple[array, array]:
    """Ascending and one sample per time (the last read wins, as in overlapping exports)."""
    if all(map(operator.lt, times, islice(times, 1, None))):
        return times, values
    order = sorted(range(len(times)), key=times.__getitem__)
    kept = [i for n, i in enumerate(order) if n + 1 == len(order) or times[order[n + 1]] != times[i]]
    return array("q", (times[i] for i in kept)), array("d", (values[i] for i in kept))


def _last(times: array, values: array, start: int, step: int, points: int, series: Series) -> None:
    """The latest sample at or before each grid time, within the lookback (both ends included)."""
    count, j, add_point, add_value = len(times), 0, series.points.append, series.values.append
    i, stop = max(0, -((start - times[0]) // step)), min(points - 1, (times[-1] + LOOKBACK_MS - start) // step)
    while i <= stop:
        t = start + i * step
        j = bisect_right(times, t, j)
        if j and times[j - 1] >= t - LOOKBACK_MS:
            add_point(i)
            add_value(values[j - 1])
            i += 1
        elif j < count:  # a gap: on to the first grid time at or after the next sample
            i = max(i + 1, -((start - times[j]) // step))
        else:
            break


def _max(values: array) -> float:
    """Prometheus 2.42's max_over_time, NaN included."""
    top = max(values)
    if math.isnan(top):  # Prometheus replaces a NaN maximum by any later value; Python's max keeps the first NaN
        top = values[0]
        for value in values:
            if value > top or math.isnan(top):
                top = value
    return top


def _avg(values: array) -> float:
    """Prometheus 2.42's avg_over_time: an incremental mean with Neumaier's compensation, to the last bit."""
    mean = comp = count = 0.0
    for value in values:
        count += 1
        if math.isinf(mean):
            if math.isinf(value) and (mean > 0) == (value > 0):
                continue
            if not math.isinf(value) and not math.isnan(value):
                continue
        inc = value / count - mean / count
        total = mean + inc
        comp += (mean - total) + inc if abs(mean) >= abs(inc) else (inc - total) + mean
        mean = total
    return mean if math.isinf(mean) else mean + comp


def _over_time(
    times: array, values: array, start: int, step: int, points: int, series: Series, reduce: Callable[[array], float]
) -> None:
    """``reduce`` of the samples in ``[t - step, t]`` at each grid time ``t`` that has one."""
    count, lo, hi, add_point, add_value = len(times), 0, 0, series.points.append, series.values.append
    i, stop = max(0, -((start - times[0]) // step)), min(points - 1, (times[-1] + step - start) // step)
    while i <= stop:
        t = start + i * step
        hi = bisect_right(times, t, hi)
        lo = bisect_left(times, t - step, lo, hi)
        if hi > lo:
            add_point(i)
            add_value(reduce(values[lo:hi]))
            i += 1
        elif hi < count:  # a gap: on to the first grid time at or after the next sample
            i = max(i + 1, -((start - times[hi]) // step))
        else:
            break


def read_samples(files: list[str], option: str) -> dict[tuple, tuple[dict[str, str], array, array]]:
    """Every file's samples of :data:`~.METRICS` per ``(metric, sorted labels)``: ``(labels, times in ms,
    values)``, ascending and one sample per time (the last file read wins where exports overlap)."""
    samples = _Samples()
    for path in files:
        try:
            with open(path, encoding="utf-8") as handle:
                first = handle.read(4096).lstrip()[:1]
                handle.seek(0)
                if first == "{":
                    _read_json(handle.read(), path, samples, option)
                else:
                    _read_text(handle, path, samples, option)
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{option}.files: cannot read {path}: {exc}") from None
    return {key: (labels, *_ordered(times, values)) for key, (labels, times, values) in samples.items()}


def evaluate(
    ordered: Mapping[tuple, tuple[dict[str, str], array, array]], start: int, step: int, points: int
) -> dict[str, dict[tuple, Series]]:
    """:func:`read_samples`'s samples on the grid ``start, start + step, ...`` (``points`` of them), per metric
    and labels, as Prometheus evaluates each metric's query; a series with no point on the grid is left out."""
    found: dict[str, dict[tuple, Series]] = {metric: {} for metric in METRICS}
    for (metric, key), (labels, times, values) in ordered.items():
        if not times:
            continue
        series = Series(metric=metric, labels=labels)
        function = FUNCTIONS.get(metric)
        if function is None:
            _last(times, values, start, step, points, series)
        else:
            _over_time(times, values, start, step, points, series, _max if function == "max" else _avg)
        if series.points:
            found[metric][key] = series
    return found
