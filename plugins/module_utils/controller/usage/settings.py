# SPDX-License-Identifier: Apache-2.0
"""``aligned_dra_usage`` checked without reading anything: the validation stage's check, and the stage's.

What can be known before any request or file read is refused here, naming
the key: unknown keys, neither or both of ``prometheus`` and ``files``, keys
of the other source, a window that is not a whole number of steps, an
``end`` that is no time, a URL that is not http(s), numbers out of range.
What only the source can tell (a file that cannot be read, a Prometheus that
refuses) is said by ``source`` when it reads. ``mig_headroom`` (the MIG
advice's share of a profile's memory kept free, :func:`mig_headroom`) is a
fraction in [0, 1); the replay's setting of the same name means the same.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import UsageError, source

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# The summary's keys, with their defaults and the largest value each may take (above 0).
SUMMARY = {"idle_threshold": (0.05, 1.0), "request_percentile": (95.0, 100.0)}
# The MIG advice's headroom: a measured peak fits a profile only within (1 - headroom) of its memory.
MIG_HEADROOM = "mig_headroom"
MIG_HEADROOM_DEFAULT = mig_model.DEFAULT_HEADROOM
# The role's own key: whether it writes the pods' series for the replay (<site>/usage-pods.csv).
ROLE_KEYS = ("pods_csv",)
OTHERS = (*SUMMARY, MIG_HEADROOM, *ROLE_KEYS)


def summary_setting(conf: Mapping[str, Any], key: str, option: str) -> float:
    """``idle_threshold`` or ``request_percentile``: a number above 0 and at most its bound."""
    default, high = SUMMARY[key]
    value = conf.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= high:
        raise UsageError(f"{option}.{key}: {value!r} must be a number above 0 and at most {high:g}")
    return float(value)


def mig_headroom(conf: Mapping[str, Any], option: str) -> float:
    """``mig_headroom``: the share of a MIG profile's memory a measured peak leaves free, 0 <= value < 1."""
    value = conf.get(MIG_HEADROOM, MIG_HEADROOM_DEFAULT)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
        raise UsageError(
            f"{option}.{MIG_HEADROOM}: {value!r} must be a fraction of the profile's memory, at least 0 and below 1"
        )
    return float(value)


def check(conf: Any, option: str = "aligned_dra_usage") -> None:
    """Refuses a setting that cannot work, naming the key; ``{}`` (usage not read) is fine."""
    if conf in (None, {}):
        return
    given = source.source_of(conf, option, OTHERS)
    own, other = (
        (source.PROMETHEUS_KEYS, source.FILES_KEYS)
        if given == "prometheus"
        else (source.FILES_KEYS, source.PROMETHEUS_KEYS)
    )
    source.check_keys(conf, own | set(OTHERS), other, given, option)
    # the source's own checks, the ones it makes when it reads (no request, no file read here)
    if given == "prometheus":
        for key in ("match", "dcgm_match"):  # said as the other string settings are, before any parsing
            if conf.get(key) is not None and not isinstance(conf[key], str):
                raise UsageError(f"{option}.{key}: {conf[key]!r} is not a string")
        source.prometheus_options(conf, option)
    else:
        source.file_list(conf, option)
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
    mig_headroom(conf, option)
    if not isinstance(conf.get("pods_csv", False), bool):
        raise UsageError(f"{option}.pods_csv: {conf['pods_csv']!r} is not true or false")
