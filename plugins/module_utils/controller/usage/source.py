# SPDX-License-Identifier: Apache-2.0
"""GPU use over a window, read from Prometheus's HTTP API or from exported files, as a :class:`~.series.UsageData`.

The window is ``window`` (a Prometheus duration: ``7d``, ``12h``, ``90m``;
default ``7d``) ending at ``end`` (RFC 3339 or seconds since the epoch), on a
grid of ``step`` (default ``60s``): the points ``start, start + step, ...,
end`` with ``start = end - window + step``, so that the steps they stand for
(each point the step that ends at it) cover the window exactly, no more. The
window must be a whole number of steps.

Each metric is asked as follows; files are evaluated on the grid as Prometheus 2.42 evaluates these queries,
both ends of every range included (Prometheus 3 leaves the start out: only a sample exactly at ``t - step``
or ``t - 5m`` differs):

==============================================  ========================================  =============================
metric                                          query at grid time ``t``                  samples that count
==============================================  ========================================  =============================
``aligned_dra_claim_gpu_memory_used_bytes``     ``max_over_time(<metric>{match}[step])``  ``[t - step, t]``
``aligned_dra_claim_gpu_sm_utilization_ratio``  ``avg_over_time(<metric>{match}[step])``  ``[t - step, t]``
``DCGM_FI_DEV_GPU_UTIL``                        ``avg_over_time(<metric>{match}[step])``  ``[t - step, t]``
the others (info, request, limit, GPU total)    ``<metric>{match}``                       the latest in ``[t - 5m, t]``
==============================================  ========================================  =============================

A grid point without a sample that counts has no value (absent, never 0); a peak between two grid times is
never missed. Labels are kept as read, less ``__name__``; a metric's series are sorted by their labels.

- :func:`read_prometheus`: ``prometheus`` (base URL), ``window``, ``step``,
  ``end`` (default: now, rounded down to a whole step), ``bearer_token_file``,
  ``ca_file``, ``headers``, ``timeout`` (seconds per request, default 30),
  ``max_points`` (default 11000, the most Prometheus answers per series and
  query: the window is asked in consecutive chunks of at most that many grid
  points), ``match`` (label matchers added to every selector, such as
  ``job="aligned-dra-driver"``).
- :func:`read_files`: ``files`` (paths), ``window``, ``step``, ``end``
  (default: the last sample's time rounded down to a whole step). Each file is
  either OpenMetrics or Prometheus text with timestamps in seconds (what
  ``promtool tsdb create-blocks-from openmetrics`` reads) or a saved JSON
  answer of ``query_range`` or ``query``. Metrics other than
  :data:`~.METRICS` are ignored.
- :func:`read_usage`: either of them, by which of ``prometheus`` and ``files`` is set.

A required metric (:data:`~.REQUIRED`) with no series in the window is an
error naming every one missing; an optional one gives an empty list.
Every error is a :class:`~.UsageError` naming the option, the key, the URL or
the file's line. Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import datetime
import json
import math
import operator
import re
import time
from array import array
from bisect import bisect_left, bisect_right
from itertools import islice

from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import (
    CLAIM_SM,
    CLAIM_USED,
    DCGM_UTIL,
    METRICS,
    REQUIRED,
    UsageError,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.series import Series, UsageData

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

DEFAULT_WINDOW = "7d"
DEFAULT_STEP = "60s"
DEFAULT_TIMEOUT = 30
# Prometheus refuses a range query of more than 11,000 points per series.
DEFAULT_MAX_POINTS = 11000
# Prometheus's default --query.lookback-delta: a plain selector's last sample counts for 5 minutes.
LOOKBACK_MS = 300_000
# How each metric is asked: "max" and "avg" over the step before each grid point, else the last value.
FUNCTIONS = {CLAIM_USED: "max", CLAIM_SM: "avg", DCGM_UTIL: "avg"}
COMMON_KEYS = frozenset({"window", "step", "end"})
PROMETHEUS_KEYS = COMMON_KEYS | frozenset(
    "prometheus bearer_token_file ca_file headers timeout max_points match".split()
)
FILES_KEYS = COMMON_KEYS | {"files"}

_UNITS = (("y", 31_536_000_000), ("w", 604_800_000), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000))
# Prometheus's duration syntax: units from the largest down, each at most once.
_DURATION = re.compile(r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\\n]|\\.)*)"\s*(?:,|$)')
_ESCAPE = re.compile(r"\\(.)")
_UNESCAPED = {"n": "\n", "\\": "\\", '"': '"'}
# The compact form Prometheus writes: read series by series, without a Python object per sample.
_MATRIX_HEAD = re.compile(r'\s*\{"status":"success","data":\{"resultType":"matrix","result":\[')
_PAIR = re.compile(r'\[([^,\[\]"]+),"([^"]*)"\]')
_SUCCESS = re.compile(r'\s*\{\s*"status"\s*:\s*"success"')
_DECODER = json.JSONDecoder()
_EOF = object()


def parse_duration(value: Any, key: str, option: str = "aligned_dra_usage") -> int:
    """Milliseconds of a Prometheus duration (``1h30m``, ``7d``) or a number of seconds; positive."""
    where = f"{option}.{key}"
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise UsageError(f"{where}: {value!r} is not a duration such as 60s, 90m, 12h or 7d")
    text = str(value).strip()
    if _NUMBER.fullmatch(text):
        seconds = float(text)
        ms = round(seconds * 1000)
        if not math.isfinite(seconds) or abs(seconds * 1000 - ms) > 1e-6:
            raise UsageError(f"{where}: {value!r} is not a whole number of milliseconds")
    else:
        match = _DURATION.fullmatch(text)
        if not text or not match:
            raise UsageError(f"{where}: {value!r} is not a duration such as 60s, 90m, 12h or 7d")
        scales = [scale for _unit, scale in _UNITS] + [1]
        ms = sum(int(count) * scale for count, scale in zip(match.groups(), scales, strict=True) if count)
    if ms <= 0:
        raise UsageError(f"{where}: {value!r} must be longer than 0")
    return ms


def format_duration(ms: int) -> str:
    """A duration as Prometheus reads it, in days down to milliseconds: ``60s``, ``1h30m``, ``7d``, ``1s500ms``."""
    parts = []
    for unit, scale in (*_UNITS[2:], ("ms", 1)):
        count, ms = divmod(ms, scale)
        parts += [f"{count}{unit}"] if count else []
    return "".join(parts)


def parse_end(value: Any, option: str = "aligned_dra_usage") -> int:
    """Milliseconds since the epoch of an RFC 3339 time (with its offset), a datetime or seconds since the epoch."""
    where = f"{option}.end"
    bad = f"{where}: {value!r} is neither RFC 3339 (2025-01-31T00:00:00Z) nor seconds since the epoch"
    if isinstance(value, datetime.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=datetime.UTC)  # YAML: no offset is UTC
    elif isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise UsageError(bad)
    elif isinstance(value, str) and not _NUMBER.fullmatch(value.strip()):
        try:
            moment = datetime.datetime.fromisoformat(value.strip())
        except ValueError:
            raise UsageError(bad) from None
        if moment.tzinfo is None:
            raise UsageError(f"{where}: {value!r} has no offset (Z or +01:00): the time it means is ambiguous")
    else:
        seconds = float(value)
        if not math.isfinite(seconds):
            raise UsageError(f"{where}: {value!r} is not a time")
        return round(seconds * 1000)
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
    return (moment - epoch) // datetime.timedelta(milliseconds=1)


def rfc3339(ms: int) -> str:
    """A time of the grid in messages."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds").replace("+00:00", "Z")


def _window_and_step(conf: Mapping[str, Any], option: str) -> tuple[int, int]:
    window = parse_duration(conf.get("window", DEFAULT_WINDOW), "window", option)
    step = parse_duration(conf.get("step", DEFAULT_STEP), "step", option)
    if step > window:
        raise UsageError(f"{option}: step {format_duration(step)} is larger than window {format_duration(window)}")
    if window % step:
        raise UsageError(
            f"{option}: window {format_duration(window)} is not a whole number of steps of {format_duration(step)}"
        )
    return window, step


def chunks(points: int, max_points: int) -> list[tuple[int, int]]:
    """Consecutive ``(first, last)`` grid indices (both included) covering ``0 .. points - 1``, each at most
    ``max_points`` long: every point in exactly one."""
    return [(first, min(first + max_points, points) - 1) for first in range(0, points, max_points)]


def _check_keys(conf: Any, allowed: frozenset[str], other: frozenset[str], source: str, option: str) -> None:
    if not isinstance(conf, dict):
        raise UsageError(f"{option}: must be a mapping with prometheus or files, not {type(conf).__name__}")
    unknown = sorted(str(key) for key in conf if key not in allowed | other)
    if unknown:
        known = ", ".join(sorted(PROMETHEUS_KEYS | FILES_KEYS | allowed))
        raise UsageError(f"{option}: unknown key(s) {', '.join(unknown)}; known: {known}")
    foreign = sorted(str(key) for key in conf if key not in allowed)
    if foreign:
        raise UsageError(f"{option}: not used when reading from {source}: {', '.join(foreign)}")


def _missing(option: str, data: UsageData, where: str, window: int, extra: str = "") -> None:
    missing = [metric for metric in REQUIRED if not data.series[metric]]
    if missing:
        raise UsageError(
            f"{option}: no series of {', '.join(missing)} in {where}{extra} over the {format_duration(window)} "
            f"window ending {rfc3339(round(data.end * 1000))}: the driver's metrics must be scraped, with --usage=on "
            "(the default) on the driver (docs/monitoring.md)"
        )


def _usage(start: int, end: int, step: int, found: dict[str, dict[tuple, Series]], source: str) -> UsageData:
    series = {
        metric: [found[metric][key] for key in sorted(found[metric])] if metric in found else [] for metric in METRICS
    }
    return UsageData(start=start / 1000, end=end / 1000, step=step / 1000, series=series, source=source)


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
    for labels, first, stop in items:
        pairs = _PAIR.findall(text, first, stop)
        if len(pairs) != text.count("[", first, stop):
            raise ValueError(f'{labels}: a value is not a [time, "value"] pair')
        yield labels, pairs


def _matrix(text: str) -> tuple[str, Iterable[tuple[dict[str, str], list]]]:
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


class _Prometheus:
    """``query_range`` on one Prometheus, with the conf's credentials; every failure a :class:`UsageError`."""

    def __init__(self, conf: Mapping[str, Any], option: str) -> None:
        try:
            import requests  # only this source needs it, so only the Prometheus path asks for it
        except ImportError as exc:
            raise UsageError(f"{option}.prometheus needs the Python package requests>=2.31: {exc}") from None
        self.requests, self.option = requests, option
        url = conf.get("prometheus")
        if not isinstance(url, str) or not re.match(r"https?://[^/\s]+", url.strip()):
            raise UsageError(f"{option}.prometheus: {url!r} is not an http:// or https:// URL")
        self.url = url.strip().rstrip("/")
        timeout = conf.get("timeout", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise UsageError(f"{option}.timeout: {timeout!r} is not a number of seconds above 0")
        self.timeout = timeout
        headers = conf.get("headers") or {}
        if not isinstance(headers, dict) or not all(isinstance(item, str) for pair in headers.items() for item in pair):
            raise UsageError(f"{option}.headers: {headers!r} is not a mapping of header names to strings")
        self.headers = dict(headers)
        self.token_file = conf.get("bearer_token_file")
        if self.token_file:
            if any(name.lower() == "authorization" for name in headers):
                raise UsageError(f"{option}: give bearer_token_file or an Authorization header, not both")
            token = self._read(self.token_file, "bearer_token_file").strip()
            if not token:
                raise UsageError(f"{option}.bearer_token_file: {self.token_file} is empty")
            self.headers["Authorization"] = f"Bearer {token}"
        self.ca_file = conf.get("ca_file")
        if self.ca_file:
            self._read(self.ca_file, "ca_file")
        self.session = requests.Session()

    def _read(self, path: Any, key: str) -> str:
        try:
            with open(str(path), encoding="utf-8") as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{self.option}.{key}: cannot read {path}: {exc}") from None

    def query_range(self, expr: str, start: int, end: int, step: int) -> str:
        """The answer's text; raises :class:`UsageError` on any failure, naming what was refused and why."""
        exceptions = self.requests.exceptions
        where = f"{self.option}: Prometheus at {self.url}"
        try:
            answer = self.session.post(
                f"{self.url}/api/v1/query_range",
                data={
                    "query": expr,
                    "start": f"{start / 1000:.3f}",
                    "end": f"{end / 1000:.3f}",
                    "step": format_duration(step),
                },
                headers=self.headers,
                timeout=self.timeout,
                verify=self.ca_file or True,
            )
        except exceptions.Timeout:
            raise UsageError(f"{where} did not answer within the timeout of {self.timeout} s (query {expr})") from None
        except exceptions.SSLError as exc:
            hint = f"ca_file {self.ca_file}" if self.ca_file else "the system's CA certificates (set ca_file)"
            raise UsageError(f"{where}: TLS verification with {hint} failed: {_reason(exc)}") from None
        except exceptions.ConnectionError as exc:
            raise UsageError(
                f"{where} cannot be reached (connection refused, unknown host or no route; timeout {self.timeout} s): "
                f"{_reason(exc)}"
            ) from None
        except exceptions.RequestException as exc:
            raise UsageError(f"{where}: the request failed: {_reason(exc)}") from None
        if answer.status_code in (401, 403):
            given = f"the token of bearer_token_file {self.token_file}" if self.token_file else "the request's headers"
            raise UsageError(
                f"{where} refused {given} (HTTP {answer.status_code} {answer.reason}); "
                "set bearer_token_file or headers to credentials it accepts"
            )
        text = answer.content.decode("utf-8", errors="replace")  # JSON is UTF-8: no guessing over a large body
        if answer.status_code >= 300 or not _SUCCESS.match(text):
            self._refused(answer.status_code, answer.reason, text, expr)
        return text

    def _refused(self, status: int, reason: str, text: str, expr: str) -> None:
        """Raises the error an answer says, unless it is a success after all (its keys in another order)."""
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if status < 300 and isinstance(body, dict) and body.get("status") == "success":
            return
        if isinstance(body, dict) and body.get("status") == "error":
            raise UsageError(
                f"{self.option}: Prometheus at {self.url} refused the query {expr} (HTTP {status}, "
                f"{body.get('errorType')}): {body.get('error')}"
            )
        if status >= 300:
            raise UsageError(
                f"{self.option}: Prometheus at {self.url} answered HTTP {status} {reason} to the query {expr}: "
                f"{text[:300].strip()}"
            )
        raise UsageError(
            f"{self.option}: the answer of {self.url} to the query {expr} is not Prometheus's JSON "
            f"(is it Prometheus's base URL?): {text[:200].strip()}"
        )


def _reason(exc: Exception) -> str:
    text = str(exc)
    found = re.search(r"\[Errno -?\d+\][^'\")]*|Name or service not known|certificate verify failed[^'\")]*", text)
    return found.group(0).strip() if found else text


def query_for(metric: str, step: int, match: str = "") -> str:
    """The PromQL asked for ``metric`` (the module's table)."""
    selector = f"{metric}{{{match}}}" if match else metric
    function = FUNCTIONS.get(metric)
    return f"{function}_over_time({selector}[{format_duration(step)}])" if function else selector


def read_prometheus(conf: Mapping[str, Any], option: str = "aligned_dra_usage") -> UsageData:
    """GPU use over the window from Prometheus's HTTP API: one ``query_range`` per metric and chunk."""
    _check_keys(conf, PROMETHEUS_KEYS, FILES_KEYS, "prometheus", option)
    window, step = _window_and_step(conf, option)
    max_points = conf.get("max_points", DEFAULT_MAX_POINTS)
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 1:
        raise UsageError(f"{option}.max_points: {max_points!r} is not a whole number above 0")
    match = conf.get("match") or ""
    if not isinstance(match, str):
        raise UsageError(f'{option}.match: {match!r} is not label matchers such as job="aligned-dra-driver"')
    match = match.strip().removeprefix("{").removesuffix("}").strip()
    client = _Prometheus(conf, option)
    end = parse_end(conf["end"], option) if conf.get("end") is not None else int(time.time() * 1000) // step * step
    start = end - window + step  # each point stands for the step ending at it: window // step of them
    found: dict[str, dict[tuple, Series]] = {}
    for metric in METRICS:
        expr = query_for(metric, step, match)
        merged = found.setdefault(metric, {})
        for first, last in chunks(window // step, max_points):
            text = client.query_range(expr, start + first * step, start + last * step, step)
            try:
                _merge_answer(text, metric, start, step, merged)
            except (ValueError, TypeError, KeyError) as exc:
                raise UsageError(
                    f"{option}: the answer of {client.url} to the query {expr} cannot be read: {exc}"
                ) from None
    data = _usage(start, end, step, found, client.url)
    _missing(option, data, f"Prometheus at {client.url}", window, f" (match {match})" if match else "")
    return data


def _merge_answer(text: str, metric: str, start: int, step: int, merged: dict[tuple, Series]) -> None:
    """The series of one chunk's answer appended to those of the earlier chunks (same label set, same Series)."""
    kind, items = _matrix(text)
    if kind != "matrix":
        raise ValueError(f"resultType {kind}, not matrix")
    for labels, pairs in items:
        labels = {k: v for k, v in labels.items() if k != "__name__"}
        if not pairs:
            continue
        key = tuple(sorted(labels.items()))
        series = merged.get(key)
        if series is None:
            series = merged[key] = Series(metric=metric, labels=labels)
        first = round((float(pairs[0][0]) * 1000 - start) / step)
        last = round((float(pairs[-1][0]) * 1000 - start) / step)
        if last - first + 1 == len(pairs):  # every point of the run answered: no index to compute per sample
            series.points.extend(range(first, last + 1))
        else:
            series.points.extend(round((float(pair[0]) * 1000 - start) / step) for pair in pairs)
        series.values.extend(map(float, (pair[1] for pair in pairs)))


class _Samples(dict):
    """Every file's samples of the metrics kept, per ``(metric, labels)``: labels, times (ms), values (arrays)."""

    def of(self, metric: str, labels: dict[str, str]) -> tuple[array, array]:
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
    """A saved ``query_range`` or ``query`` answer: every result names its metric (``__name__``)."""
    try:
        _kind, items = _matrix(text)
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


def _file_list(conf: Mapping[str, Any], option: str) -> list[str]:
    files = conf.get("files")
    if isinstance(files, str):
        files = [files]
    if not files or not isinstance(files, list) or not all(isinstance(p, str) and p for p in files):
        raise UsageError(f"{option}.files: {files!r} names no file: give a list of paths")
    return files


def read_files(conf: Mapping[str, Any], option: str = "aligned_dra_usage") -> UsageData:
    """GPU use over the window from exported files, evaluated on the grid as Prometheus evaluates the queries."""
    _check_keys(conf, FILES_KEYS, PROMETHEUS_KEYS, "files", option)
    files = _file_list(conf, option)
    window, step = _window_and_step(conf, option)
    end = parse_end(conf["end"], option) if conf.get("end") is not None else None
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
    ordered = {key: (labels, *_ordered(times, values)) for key, (labels, times, values) in samples.items()}
    if end is None:
        latest = max((times[-1] for _labels, times, _values in ordered.values() if times), default=None)
        if latest is None:
            raise UsageError(
                f"{option}: no sample of {', '.join(METRICS)} in {', '.join(files)}: "
                "the driver's metrics must be exported from a Prometheus that scrapes them (docs/monitoring.md)"
            )
        end = latest // step * step
    start, points = end - window + step, window // step
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
    data = _usage(start, end, step, found, ", ".join(files))
    _missing(option, data, ", ".join(files), window)
    return data


def read_usage(conf: Mapping[str, Any], option: str = "aligned_dra_usage", *, others: Iterable[str] = ()) -> UsageData:
    """:func:`read_prometheus` or :func:`read_files`, by which of ``prometheus`` and ``files`` ``conf`` sets.
    ``others``: keys of the same mapping the caller reads itself (left out here, known in the messages)."""
    others = frozenset(others)
    _check_keys(conf, PROMETHEUS_KEYS | FILES_KEYS | others, frozenset(), "", option)
    given = [key for key in ("prometheus", "files") if conf.get(key) not in (None, "")]
    if len(given) != 1:
        raise UsageError(
            f"{option}: set exactly one of prometheus (a Prometheus base URL) and files (exported series), "
            f"not {' and '.join(given) if given else 'neither'}"
        )
    conf = {key: value for key, value in conf.items() if key not in others}
    return read_prometheus(conf, option) if given == ["prometheus"] else read_files(conf, option)
