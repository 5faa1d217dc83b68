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

==============================================  =============================================  ===========================
metric                                          query at grid time ``t``                       samples that count
==============================================  =============================================  ===========================
``aligned_dra_claim_gpu_memory_used_bytes``     ``max_over_time(<metric>{match}[step])``       ``[t - step, t]``
``aligned_dra_claim_gpu_sm_utilization_ratio``  ``avg_over_time(<metric>{match}[step])``       ``[t - step, t]``
``aligned_dra_claim_gpu_sms_busy_ratio``        ``avg_over_time(<metric>{match}[step])``       ``[t - step, t]``
``DCGM_FI_DEV_GPU_UTIL``                        ``avg_over_time(<metric>{dcgm_match}[step])``  ``[t - step, t]``
the others (info, request, limit, GPU total)    ``<metric>{match}``                            the latest in ``[t-5m, t]``
==============================================  =============================================  ===========================

The others include ``aligned_dra_usage_available`` (the driver's: 1 while NVML answers, 0 when it fails).

A grid point without a sample that counts has no value (absent, never 0); a peak between two grid times is
never missed. Labels are kept as read, less ``__name__``; a metric's series are sorted by their labels.

- :func:`read_prometheus`: ``prometheus`` (base URL), ``window``, ``step``,
  ``end`` (default: now, rounded down to a whole step), ``bearer_token_file``,
  ``ca_file``, ``headers``, ``timeout`` (seconds per request, default 30),
  ``max_points`` (default 11000, the most Prometheus answers per series and
  query: the window is asked in consecutive chunks of at most that many grid
  points; a chunk Prometheus refuses as over its ``--query.max-samples`` is
  halved and asked again, down to one point), ``match`` (label matchers added
  to the driver's selectors, such as ``job="aligned-dra-driver"``),
  ``dcgm_match`` (the same for DCGM's, another job's: default none).
- :func:`read_files`: ``files`` (paths), ``window``, ``step``, ``end``
  (default: the last sample's time rounded down to a whole step). Each file is
  either OpenMetrics or Prometheus text with timestamps in seconds (what
  ``promtool tsdb create-blocks-from openmetrics`` reads) or a saved JSON
  answer of ``query`` (an instant query of a range vector: the raw samples)
  or ``query_range``; :mod:`~.exported` reads and evaluates them. Metrics
  other than :data:`~.METRICS` are ignored.
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
import re
import time

from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import (
    DCGM_UTIL,
    METRICS,
    REQUIRED,
    UsageError,
    exported,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.exported import FUNCTIONS
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.series import Series, UsageData

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

DEFAULT_WINDOW = "7d"
DEFAULT_STEP = "60s"
DEFAULT_TIMEOUT = 30
# Prometheus refuses a range query of more than 11,000 points per series.
DEFAULT_MAX_POINTS = 11000
# How Prometheus (its API's errorType "execution", HTTP 422) refuses a query over --query.max-samples.
TOO_MANY_SAMPLES = "query processing would load too many samples into memory"
COMMON_KEYS = frozenset({"window", "step", "end"})
PROMETHEUS_KEYS = COMMON_KEYS | frozenset(
    "prometheus bearer_token_file ca_file headers timeout max_points match dcgm_match".split()
)
FILES_KEYS = COMMON_KEYS | {"files"}

_UNITS = (("y", 31_536_000_000), ("w", 604_800_000), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000))
# Prometheus's duration syntax: units from the largest down, each at most once.
_DURATION = re.compile(r"(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?(?:(\d+)ms)?")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_SUCCESS = re.compile(r'\s*\{\s*"status"\s*:\s*"success"')


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
    """``window`` and ``step`` in milliseconds: the window a whole number of steps, at least one."""
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


def check_keys(conf: Any, allowed: frozenset[str], other: frozenset[str], source: str, option: str) -> None:
    """Refuses a conf that is no mapping, an unknown key, or a key of the other source (``other``)."""
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
    """Refuses data without a series of some required metric, naming every one missing."""
    missing = [metric for metric in REQUIRED if not data.series[metric]]
    if missing:
        raise UsageError(
            f"{option}: no series of {', '.join(missing)} in {where}{extra} over the {format_duration(window)} "
            f"window ending {rfc3339(round(data.end * 1000))}: the driver's metrics must be scraped, with --usage=on "
            "(the default) on the driver (docs/monitoring.md)"
        )


def _usage(start: int, end: int, step: int, found: dict[str, dict[tuple, Series]], source: str) -> UsageData:
    """The :class:`UsageData` of the grid and the series found, every metric a key, its series sorted by labels."""
    series = {
        metric: [found[metric][key] for key in sorted(found[metric])] if metric in found else [] for metric in METRICS
    }
    return UsageData(start=start / 1000, end=end / 1000, step=step / 1000, series=series, source=source)


class _Prometheus:
    """``query_range`` on one Prometheus, with the conf's credentials; every failure a :class:`UsageError`."""

    def __init__(self, options: Mapping[str, Any], conf: Mapping[str, Any], option: str) -> None:
        """``options`` from :func:`prometheus_options`; reads the credentials' files before any request."""
        try:
            import requests  # only this source needs it, so only the Prometheus path asks for it
        except ImportError as exc:
            raise UsageError(f"{option}.prometheus needs the Python package requests>=2.31: {exc}") from None
        self.requests, self.option = requests, option
        self.url, self.timeout = options["url"], options["timeout"]
        headers = options["headers"]
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
        """A credentials file's text; a :class:`UsageError` naming ``key`` when it cannot be read."""
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
            error = str(body.get("error"))
            if status == 422 and body.get("errorType") == "execution" and TOO_MANY_SAMPLES in error:
                raise TooManySamples(error)
            raise UsageError(
                f"{self.option}: Prometheus at {self.url} refused the query {expr} (HTTP {status}, "
                f"{body.get('errorType')}): {body.get('error')}"
            )
        if status == 404:  # a path below the API's base: the API is not there
            raise UsageError(
                f"{self.option}: Prometheus at {self.url} answered HTTP 404 {reason} to the query {expr}: is "
                f"{self.url} Prometheus's base URL (its API at {self.url}/api/v1)? {text[:200].strip()}"
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


class TooManySamples(UsageError):
    """Prometheus refused a query that would load more samples than its ``--query.max-samples``."""


def _reason(exc: Exception) -> str:
    """The part of a :mod:`requests` error that says why (the errno, the name or the certificate)."""
    text = str(exc)
    found = re.search(r"\[Errno -?\d+\][^'\")]*|Name or service not known|certificate verify failed[^'\")]*", text)
    return found.group(0).strip() if found else text


def query_for(metric: str, step: int, match: str = "", dcgm_match: str = "") -> str:
    """The PromQL asked for ``metric`` (the module's table): ``dcgm_match`` for DCGM's series, ``match`` for the
    driver's (DCGM's exporter is another job, so the driver's matchers would drop its series)."""
    matchers = dcgm_match if metric == DCGM_UTIL else match
    selector = f"{metric}{{{matchers}}}" if matchers else metric
    function = FUNCTIONS.get(metric)
    return f"{function}_over_time({selector}[{format_duration(step)}])" if function else selector


def read_prometheus(conf: Mapping[str, Any], option: str = "aligned_dra_usage") -> UsageData:
    """GPU use over the window from Prometheus's HTTP API: one ``query_range`` per metric and chunk."""
    check_keys(conf, PROMETHEUS_KEYS, FILES_KEYS, "prometheus", option)
    window, step = _window_and_step(conf, option)
    options = prometheus_options(conf, option)
    max_points, match, dcgm_match = options["max_points"], options["match"], options["dcgm_match"]
    client = _Prometheus(options, conf, option)
    end = parse_end(conf["end"], option) if conf.get("end") is not None else int(time.time() * 1000) // step * step
    start = end - window + step  # each point stands for the step ending at it: window // step of them
    found: dict[str, dict[tuple, Series]] = {}
    for metric in METRICS:
        expr = query_for(metric, step, match, dcgm_match)
        merged = found.setdefault(metric, {})
        for text in _answers(client, expr, start, step, window // step, max_points):
            try:
                _merge_answer(text, metric, start, step, merged)
            except (ValueError, TypeError, KeyError) as exc:
                raise UsageError(
                    f"{option}: the answer of {client.url} to the query {expr} cannot be read: {exc}"
                ) from None
    data = _usage(start, end, step, found, client.url)
    _missing(option, data, f"Prometheus at {client.url}", window, f" (match {match})" if match else "")
    return data


def prometheus_options(conf: Mapping[str, Any], option: str = "aligned_dra_usage") -> dict[str, Any]:
    """The Prometheus source's own settings, checked without a request (the validation stage checks them the
    same way): ``url``, ``timeout``, ``headers``, ``max_points``, ``match``, ``dcgm_match``."""
    url = conf.get("prometheus")
    if not isinstance(url, str) or not re.match(r"https?://[^/\s]+", url.strip()):
        raise UsageError(f"{option}.prometheus: {url!r} is not an http:// or https:// URL")
    timeout = conf.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise UsageError(f"{option}.timeout: {timeout!r} is not a number of seconds above 0")
    headers = conf.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(item, str) for pair in headers.items() for item in pair):
        raise UsageError(f"{option}.headers: {headers!r} is not a mapping of header names to strings")
    max_points = conf.get("max_points", DEFAULT_MAX_POINTS)
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < 1:
        raise UsageError(f"{option}.max_points: {max_points!r} is not a whole number above 0")
    for key in ("bearer_token_file", "ca_file"):
        if conf.get(key) is not None and not isinstance(conf[key], str):
            raise UsageError(f"{option}.{key}: {conf[key]!r} is not a string")
    return {
        "url": url.strip().rstrip("/"),
        "timeout": timeout,
        "headers": headers,
        "max_points": max_points,
        "match": _matchers(conf, "match", option),
        "dcgm_match": _matchers(conf, "dcgm_match", option),
    }


def _matchers(conf: Mapping[str, Any], key: str, option: str) -> str:
    """``match`` or ``dcgm_match`` without its braces; empty when not set."""
    value = conf.get(key) or ""
    if not isinstance(value, str):
        raise UsageError(f'{option}.{key}: {value!r} is not label matchers such as job="aligned-dra-driver"')
    return value.strip().removeprefix("{").removesuffix("}").strip()


def _answers(client: _Prometheus, expr: str, start: int, step: int, points: int, max_points: int) -> Iterable[str]:
    """The answers to ``expr`` over the grid's ``points``, in order: chunks of at most ``max_points``, each
    halved (down to one point) while Prometheus says it would load more samples than its ``--query.max-samples``;
    the halved size holds for the rest of the query (its later chunks are as dense)."""
    first, size = 0, max_points
    while first < points:
        last = min(first + size, points) - 1
        try:
            text = client.query_range(expr, start + first * step, start + last * step, step)
        except TooManySamples as exc:
            if first == last:
                raise UsageError(
                    f"{client.option}: Prometheus at {client.url} refused the query {expr} even for one point "
                    f"({rfc3339(start + first * step)}, step {format_duration(step)}): {exc}; ask for a smaller "
                    "step or window, or run Prometheus with a larger --query.max-samples"
                ) from None
            size = (last - first + 1) // 2
            continue
        yield text
        first = last + 1


def _merge_answer(text: str, metric: str, start: int, step: int, merged: dict[tuple, Series]) -> None:
    """The series of one chunk's answer appended to those of the earlier chunks (same label set, same Series)."""
    kind, items = exported.matrix(text)
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


def file_list(conf: Mapping[str, Any], option: str) -> list[str]:
    """``files`` as a list of paths (one path alone is a list of one)."""
    files = conf.get("files")
    if isinstance(files, str):
        files = [files]
    if not files or not isinstance(files, list) or not all(isinstance(p, str) and p for p in files):
        raise UsageError(f"{option}.files: {files!r} names no file: give a list of paths")
    return files


def read_files(conf: Mapping[str, Any], option: str = "aligned_dra_usage") -> UsageData:
    """GPU use over the window from exported files, evaluated on the grid as Prometheus evaluates the queries."""
    check_keys(conf, FILES_KEYS, PROMETHEUS_KEYS, "files", option)
    files = file_list(conf, option)
    window, step = _window_and_step(conf, option)
    end = parse_end(conf["end"], option) if conf.get("end") is not None else None
    ordered = exported.read_samples(files, option)
    if end is None:
        latest = max((times[-1] for _labels, times, _values in ordered.values() if times), default=None)
        if latest is None:
            raise UsageError(
                f"{option}: no sample of {', '.join(METRICS)} in {', '.join(files)}: "
                "the driver's metrics must be exported from a Prometheus that scrapes them (docs/monitoring.md)"
            )
        end = latest // step * step
    start = end - window + step
    found = exported.evaluate(ordered, start, step, window // step)
    data = _usage(start, end, step, found, ", ".join(files))
    _missing(option, data, ", ".join(files), window)
    return data


def read_usage(conf: Mapping[str, Any], option: str = "aligned_dra_usage", *, others: Iterable[str] = ()) -> UsageData:
    """:func:`read_prometheus` or :func:`read_files`, by which of ``prometheus`` and ``files`` ``conf`` sets.
    ``others``: keys of the same mapping the caller reads itself (left out here, known in the messages)."""
    others = frozenset(others)
    given = source_of(conf, option, others)
    conf = {key: value for key, value in conf.items() if key not in others}
    return read_prometheus(conf, option) if given == "prometheus" else read_files(conf, option)


def source_of(conf: Any, option: str = "aligned_dra_usage", others: Iterable[str] = ()) -> str:
    """``prometheus`` or ``files``: the one source ``conf`` sets, its keys all known (``others``: the caller's)."""
    check_keys(conf, PROMETHEUS_KEYS | FILES_KEYS | frozenset(others), frozenset(), "", option)
    given = [key for key in ("prometheus", "files") if conf.get(key) not in (None, "")]
    if len(given) != 1:
        raise UsageError(
            f"{option}: set exactly one of prometheus (a Prometheus base URL) and files (exported series), "
            f"not {' and '.join(given) if given else 'neither'}"
        )
    return given[0]
