# SPDX-License-Identifier: Apache-2.0
"""``aligned_dra_usage`` checked without reading anything: the validation stage's check, and the stage's.

What can be known before any request or file read is refused here, naming
the key: unknown keys, neither or both of ``prometheus`` and ``files``, keys
of the other source, a window that is not a whole number of steps, an
``end`` that is no time, a URL that is not http(s), numbers out of range.
What only the source can tell (a file that cannot be read, a Prometheus that
refuses) is said by ``source`` when it reads.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import math
import re

from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import UsageError, source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# The summary's keys, with their defaults and the largest value each may take (above 0).
SUMMARY = {"idle_threshold": (0.05, 1.0), "request_percentile": (95.0, 100.0)}
# The role's own key: whether it writes the pods' series for the replay (<site>/usage-pods.csv).
ROLE_KEYS = ("pods_csv",)
OTHERS = (*SUMMARY, *ROLE_KEYS)


def summary_setting(conf: Mapping[str, Any], key: str, option: str) -> float:
    """``idle_threshold`` or ``request_percentile``: a number above 0 and at most its bound."""
    default, high = SUMMARY[key]
    value = conf.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= high:
        raise UsageError(f"{option}.{key}: {value!r} must be a number above 0 and at most {high:g}")
    return float(value)


def _check_source(conf: Mapping[str, Any], option: str, given: str) -> None:
    """The keys of the one source given, each of its kind and in range."""
    if given == "prometheus":
        url = conf["prometheus"]
        if not isinstance(url, str) or not re.match(r"https?://[^/\s]+", url.strip()):
            raise UsageError(f"{option}.prometheus: {url!r} is not an http:// or https:// URL")
        timeout = conf.get("timeout", source.DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise UsageError(f"{option}.timeout: {timeout!r} is not a number of seconds above 0")
        points = conf.get("max_points", source.DEFAULT_MAX_POINTS)
        if isinstance(points, bool) or not isinstance(points, int) or points < 1:
            raise UsageError(f"{option}.max_points: {points!r} is not a whole number above 0")
        headers = conf.get("headers") or {}
        if not isinstance(headers, dict) or not all(isinstance(item, str) for pair in headers.items() for item in pair):
            raise UsageError(f"{option}.headers: {headers!r} is not a mapping of header names to strings")
        for key in ("bearer_token_file", "ca_file", "match", "dcgm_match"):
            if conf.get(key) is not None and not isinstance(conf[key], str):
                raise UsageError(f"{option}.{key}: {conf[key]!r} is not a string")
    else:
        files = conf["files"]
        files = [files] if isinstance(files, str) else files
        if not isinstance(files, list) or not files or not all(isinstance(p, str) and p for p in files):
            raise UsageError(f"{option}.files: {conf['files']!r} names no file: give a list of paths")


def check(conf: Any, option: str = "aligned_dra_usage") -> None:
    """Refuses a setting that cannot work, naming the key; ``{}`` (usage not read) is fine."""
    if conf in (None, {}):
        return
    if not isinstance(conf, dict):
        raise UsageError(f"{option}: must be a mapping with prometheus or files, not {type(conf).__name__}")
    known = source.PROMETHEUS_KEYS | source.FILES_KEYS | set(OTHERS)
    unknown = sorted(str(key) for key in conf if key not in known)
    if unknown:
        raise UsageError(f"{option}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    given = [key for key in ("prometheus", "files") if conf.get(key) not in (None, "")]
    if len(given) != 1:
        raise UsageError(
            f"{option}: set exactly one of prometheus (a Prometheus base URL) and files (exported series), "
            f"not {' and '.join(given) if given else 'neither'}"
        )
    allowed = (source.PROMETHEUS_KEYS if given == ["prometheus"] else source.FILES_KEYS) | set(OTHERS)
    foreign = sorted(str(key) for key in conf if key not in allowed)
    if foreign:
        raise UsageError(f"{option}: not used when reading from {given[0]}: {', '.join(foreign)}")
    _check_source(conf, option, given[0])
    step = source.parse_duration(conf.get("step", source.DEFAULT_STEP), "step", option)
    window = source.parse_duration(conf.get("window", source.DEFAULT_WINDOW), "window", option)
    if step > window or window % step:
        raise UsageError(
            f"{option}: window {source.format_duration(window)} must be a whole number of steps of "
            f"{source.format_duration(step)}"
        )
    if conf.get("end") is not None:
        source.parse_end(conf["end"], option)
    for key in SUMMARY:
        summary_setting(conf, key, option)
    if not isinstance(conf.get("pods_csv", False), bool):
        raise UsageError(f"{option}.pods_csv: {conf['pods_csv']!r} is not true or false")
