# SPDX-License-Identifier: Apache-2.0
"""The replay on measured use, as the result gives it: the options checked, the walks run, their figures.

:func:`options` checks the options of a replay on measured use (``usage``,
``gpu_memory``, ``gpu_reserve``, ``thin_request``, ``thin_limit``,
``reclaim_margin``, ``on_evict``, ``burst_factors``) and :func:`measured` runs the walk of
:mod:`thin_walk` for the replayed policy (and, under ``thin``, once per burst
factor) and shapes ``measured`` and ``thin_factors`` (docs/replay.md, "Thin
provisioning on measured use").

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import json
import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError, thin_walk
from ansible_collections.aligned.dra.plugins.module_utils.dra.cel import parse_quantity

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.nodes import NodeSpec
    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import Pod
    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.usage import Usage

DAY = 86400
ON_EVICT = ("drop", "requeue")
DEFAULTS = {
    "gpu_memory": None,
    "gpu_reserve": 0,
    "thin_request": "request",
    "thin_limit": "max",
    "reclaim_margin": 5,
    "on_evict": "drop",
    "burst_factors": None,
}
_PERCENTILE = re.compile(r"p([0-9]+(?:\.[0-9]+)?)")
# More than this is not one GPU's memory but a unit mixed up; it also keeps the walk's sums in 64 bits.
MAX_GPU_MEMORY = 2**44


class Options:
    """The checked options of a replay on measured use."""

    __slots__ = (
        "gpu_memory",
        "reserve",
        "request",
        "request_text",
        "limit",
        "limit_text",
        "margin",
        "on_evict",
        "factors",
    )

    def __init__(self) -> None:
        self.gpu_memory: int | None = None  # the option's, in bytes
        self.reserve = 0  # gpu_reserve, in bytes
        self.request: str | Fraction = "request"
        self.request_text = "request"
        self.limit: str | Fraction = "max"
        self.limit_text = "max"
        self.margin = Fraction(5)
        self.on_evict = "drop"
        self.factors: list[tuple[Fraction, float]] = []  # (exact, as given)


def _number(option: str, value: Any, what: str) -> Fraction:
    """A decimal number (a YAML number or its text), exact."""
    if isinstance(value, bool):
        raise ReplayError(f"{option}: {value!r} is not {what}")
    try:
        number = Decimal(str(value).strip())
    except InvalidOperation:
        raise ReplayError(f"{option}: {value!r} is not {what}") from None
    if not number.is_finite():
        raise ReplayError(f"{option}: {value!r} is not {what}")
    return Fraction(number)


def _factor(option: str, value: Any) -> Fraction:
    factor = _number(option, value, "a factor of the request (a number of at least 1, such as 2.0)")
    if factor < 1:
        raise ReplayError(f"{option}: {value!r} is below 1: a limit is at least the request")
    return factor


def gpu_memory_bytes(value: Any, option: str = "gpu_memory") -> int:
    """A GPU's memory: a Kubernetes quantity (``80Gi``) or a number of bytes, above 0, rounded up to a byte."""
    text = str(value).strip()
    if isinstance(value, bool) or not text:
        raise ReplayError(f"{option}: {value!r} is not a quantity of memory (such as 80Gi)")
    try:
        amount = parse_quantity(text)
    except ValueError:
        raise ReplayError(f"{option}: {value!r} is not a quantity of memory (such as 80Gi)") from None
    if amount <= 0:
        raise ReplayError(f"{option}: {value!r} is not above 0")
    if amount > MAX_GPU_MEMORY:
        raise ReplayError(f"{option}: {value!r} is above 16Ti: not one GPU's memory")
    return math.ceil(amount)


def gpu_reserve_bytes(value: Any, option: str = "gpu_reserve") -> int:
    """Memory of each GPU used by no pod: a Kubernetes quantity (``1Gi``) or a number of bytes, 0 or more."""
    text = str(value).strip()
    if isinstance(value, bool) or not text:
        raise ReplayError(f"{option}: {value!r} is not a quantity of memory (such as 1Gi, or 0)")
    try:
        amount = parse_quantity(text)
    except ValueError:
        raise ReplayError(f"{option}: {value!r} is not a quantity of memory (such as 1Gi, or 0)") from None
    if amount < 0:
        raise ReplayError(f"{option}: {value!r} is below 0")
    if amount > MAX_GPU_MEMORY:
        raise ReplayError(f"{option}: {value!r} is above 16Ti: not one GPU's memory")
    return math.ceil(amount)


def _is_default(name: str, value: Any, default: Any) -> bool:
    """Whether an option's value says what its default says (an empty list of factors, a reserve of ``0``)."""
    if name == "burst_factors":
        return value in (None, [])
    if name == "gpu_reserve":
        try:
            return gpu_reserve_bytes(value) == 0  # "0" and "0Gi" from a template say 0 too
        except ReplayError:
            return False
    return value == default


def options(usage: str | None, mode: str, given: dict[str, Any]) -> Options:
    """The options checked; without ``usage``, any of them set to other than its default is refused."""
    if usage is None:
        for name, default in DEFAULTS.items():
            value = given.get(name, default)
            if not _is_default(name, value, default):
                raise ReplayError(f"{name}: {value!r} needs usage (the measured use the thin rules are replayed on)")
        return Options()
    if mode != "timeline":
        raise ReplayError(f"usage: measured use is replayed in timeline mode, not {mode} (set mode: timeline)")
    out = Options()
    if given.get("gpu_memory") is not None:
        out.gpu_memory = gpu_memory_bytes(given["gpu_memory"])
    out.reserve = gpu_reserve_bytes(given.get("gpu_reserve", 0))
    request = str(given.get("thin_request") or "request").strip()
    if request != "request":
        found = _PERCENTILE.fullmatch(request)
        rank = Fraction(Decimal(found.group(1))) if found else Fraction(0)
        if not found or not 0 < rank <= 100:
            raise ReplayError(
                f"thin_request: {request!r} is not request or a percentile of the pod's samples "
                "(p and a number above 0, at most 100, such as p95)"
            )
        out.request = rank
    out.request_text = request
    limit = given.get("thin_limit", "max")
    if str(limit).strip() != "max":
        out.limit = _factor("thin_limit", limit)
        out.limit_text = f"{float(out.limit):g} x request"
    margin = _number("reclaim_margin", given.get("reclaim_margin", 5), "a percent")
    if not 0 < margin < 100:
        raise ReplayError(
            f"reclaim_margin: {given.get('reclaim_margin')!r} is out of range (more than 0, less than 100)"
        )
    out.margin = margin
    out.on_evict = given.get("on_evict") or "drop"
    if out.on_evict not in ON_EVICT:
        raise ReplayError(f"on_evict: {out.on_evict!r} is not one of {', '.join(ON_EVICT)}")
    factors = given.get("burst_factors") or []
    if not isinstance(factors, list):
        raise ReplayError(f"burst_factors: {factors!r} is not a list of factors")
    for position, value in enumerate(factors):
        exact = _factor(f"burst_factors[{position}]", value)
        if any(exact == seen for seen, _value in out.factors):
            raise ReplayError(f"burst_factors[{position}]: {value!r} is in the list already")
        out.factors.append((exact, float(exact)))
    return out


def plan_gpu_memory(plan: str) -> set[int]:
    """The memory of the plan's GPUs that publish one (its ``thin`` entries, per node and GPU), in bytes."""
    try:
        with open(plan, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return set()  # the plan was read and checked already: nothing more to learn from it
    found: set[int] = set()
    entries = data.get("thin") if isinstance(data, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        for node in ((entry or {}).get("nodes") or {}).values():
            for gpu in ((node or {}).get("gpus") or {}).values():
                memory = (gpu or {}).get("memory")
                if isinstance(memory, int) and not isinstance(memory, bool) and 0 < memory <= MAX_GPU_MEMORY:
                    found.add(memory)
    return found


def _size(value: int) -> str:
    return f"{value // 2**30}Gi" if value % 2**30 == 0 else f"{value} bytes"


def site_gpu_memory(given: int | None, plan: str | None, reserve: int = 0) -> dict[str, Any]:
    """The GPUs' memory the walk uses: the option's when given (it wins), else the plan's (one value).

    ``reserve`` (``gpu_reserve``, bytes) must be below it: a GPU whose reserve
    fills it holds no pod.
    """
    memory = _site_gpu_memory(given, plan)
    if reserve >= memory["bytes"]:
        raise ReplayError(
            f"gpu_reserve: {_size(reserve)} is not below the GPUs' memory ({_size(memory['bytes'])}, "
            f"from {memory['source']})"
        )
    return memory


def _site_gpu_memory(given: int | None, plan: str | None) -> dict[str, Any]:
    """:func:`site_gpu_memory` before the reserve is weighed against it."""
    published = plan_gpu_memory(plan) if plan is not None else set()
    plan_bytes = next(iter(published)) if len(published) == 1 else None
    if given is not None:
        return {"bytes": given, "source": "gpu_memory", "plan_bytes": plan_bytes}
    if len(published) > 1:
        sizes = ", ".join(_size(value) for value in sorted(published))
        raise ReplayError(
            f"gpu_memory: the plan's GPUs have different memory ({sizes}): give gpu_memory, the memory the pods' "
            "GPUs have"
        )
    if plan_bytes is None:
        raise ReplayError(
            "gpu_memory: required with usage (a quantity such as 80Gi): "
            + ("the plan publishes no GPU memory" if plan is not None else "an openb node list gives no GPU memory")
        )
    return {"bytes": plan_bytes, "source": "plan", "plan_bytes": plan_bytes}


# -- figures -----------------------------------------------------------------------------------------


def _series(times: Sequence[float], values: Sequence[int], window: float) -> dict[str, Any]:
    """``peak`` (and the first time ``at`` it was reached) and the time-weighted ``mean`` of a per-step figure."""
    if not len(values):
        return {"peak": 0, "at": None, "mean": 0}
    top = max(values)
    at = times[values.index(top)]
    if not window:
        return {"peak": top, "at": at, "mean": values[-1]}
    weighted = sum(value * (after - before) for value, before, after in zip(values, times, times[1:]))
    return {"peak": top, "at": at, "mean": weighted / window}


def over_memory(walk: thin_walk.Walk) -> dict[str, Any]:
    """Where a GPU's pods and its reserve passed its memory: steps and GPU-seconds after the evictions, the pods
    held then, and the evictions made from a GPU past its memory (on a GPU an allocation failed before them)."""
    times = walk.times
    last = len(times) - 1
    # a step holds until the next one; the last step holds no time, as in the time-weighted means
    seconds = sum(times[step + 1] - times[step] for step, _gpu in walk.over_memory if step < last)
    limit = walk.gpu_memory - walk.gpu_reserve
    return {
        "steps": len({step for step, _gpu in walk.over_memory}),
        "gpu_seconds": seconds,
        "pods": len(walk.over_memory_pods),
        "evictions": sum(1 for entry in walk.evictions if entry["gpu_used_bytes"] > limit),
    }


def figures(walk: thin_walk.Walk) -> dict[str, Any]:
    """One walk's figures (docs/replay.md, "Thin provisioning on measured use")."""
    times = walk.times
    window = times[-1] - times[0] if times else 0
    basis = "time-weighted mean" if window else ("at the trace's only instant" if times else "no pods")
    capacity = walk.gpus_total * walk.gpu_memory
    used = _series(times, walk.used, window)
    promised = _series(times, walk.promised, window)
    evictions = len(walk.evictions)
    # without a reserve the trigger sees less than NVML's used memory: the driver would, as a rule, evict more
    bound = {"evictions_bound": "lower"} if not walk.gpu_reserve else {}
    return {
        "basis": basis,
        "window": {"start": times[0] if times else None, "end": times[-1] if times else None, "seconds": window},
        "pods": walk.gpu_pods,
        "pods_placed": walk.placed,
        "pods_unstarted": len(walk.unstarted),
        "all_placed": not walk.unstarted,
        "gpus_total": walk.gpus_total,
        "gpus_needed": _series(times, walk.busy, window),
        "evictions": evictions,
        "evictions_per_day": evictions * DAY / window if window else None,
        **bound,
        "pods_evicted": len({entry["pod"] for entry in walk.evictions}),
        "pods_dropped": len(walk.dropped),
        "requeued": walk.requeued,
        "waiting_at_end": walk.waiting,
        "over_memory": over_memory(walk),
        "memory": {
            "gpu_bytes": walk.gpu_memory,
            "capacity_bytes": capacity,
            "requested_bytes": _series(times, walk.requested, window),
            "promised_bytes": promised,
            "used_bytes": used,
            "used_share": used["mean"] / capacity if capacity else None,
            "promised_share": promised["peak"] / capacity if capacity else None,
        },
        "placements": [
            {"pod": pod, "time": time, "node": node, "gpus": gpus} for pod, time, node, gpus in walk.placements
        ],
        "evicted": walk.evictions,
    }


def _rules_info(applied: str, opts: Options) -> dict[str, Any]:
    """The rules a walk sized the pods by, in words."""
    if applied == "whole":
        request = limit = "whole GPUs"
    elif applied == "fractional":
        request, limit = "peak use", "request"
    else:
        request, limit = opts.request_text, opts.limit_text
    margin = float(opts.margin)
    return {
        "policy": applied,
        "request": request,
        "limit": limit,
        "reclaim_margin": margin,
        "gpu_reserve_bytes": opts.reserve,
        "on_evict": opts.on_evict,
    }


def measured(
    pods: Sequence[Pod],
    specs: Sequence[NodeSpec],
    order: str,
    models: bool,
    usage: Usage,
    memory: dict[str, Any],
    applied: str,
    opts: Options,
) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """``(measured, thin_factors)``: the walk of the applied policy, and under ``thin`` one per burst factor
    (None without burst factors, or when ``thin`` fell back to whole GPUs)."""
    gpu_memory = memory["bytes"]

    def run(policy: str, limit: str | Fraction) -> thin_walk.Walk:
        rules = thin_walk.Rules(policy, opts.request, limit, opts.margin, opts.on_evict, opts.reserve)
        return thin_walk.walk(pods, specs, order, models, usage, gpu_memory, rules)

    out = {
        "usage": usage.info(),
        "gpu_memory": memory,
        "rules": _rules_info(applied, opts),
        **figures(run(applied, opts.limit)),
    }
    if applied != "thin" or not opts.factors:
        return out, None
    baseline = figures(run("fractional", "max"))["gpus_needed"]
    factors = []
    for exact, factor in opts.factors:
        found = figures(run("thin", exact))
        gpus = found["gpus_needed"]["peak"]
        summary = {"factor": factor, "gpus": gpus, "gpus_fractional": baseline["peak"]}
        summary["gpus_saved"] = baseline["peak"] - gpus
        # GPUs freed by pods that were dropped or never started are not savings: said beside them
        summary["all_placed"] = found["all_placed"]
        summary["pods_dropped"] = found["pods_dropped"]
        factors.append({**summary, **found})
    return out, factors
