# SPDX-License-Identifier: Apache-2.0
"""The ``replay`` result: a trace replayed on nodes, with honest figures.

:func:`replay` reads the trace and the nodes, runs the engine and returns
the result the module writes (docs/replay.md, "The result"): pods placed,
GPU shares as fractions of the nodes' GPU capacity with their numerator and
denominator, the first pod that could not be placed (null when every pod
was), and in timeline mode the GPUs occupied and requested over time, their
peaks and the pods that could not start.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import os

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import (
    MODES,
    ORDERS,
    POLICIES,
    SCHEMA_VERSION,
    ReplayError,
    engine,
    mig_result,
    thin_result,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import nodes as replay_nodes
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import trace as replay_trace
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import usage as replay_usage

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.nodes import NodeSpec
    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import Pod


def _share(numerator: float, denominator: float) -> float | None:
    """``numerator / denominator``; None (unknown) when there is nothing to divide by."""
    return numerator / denominator if denominator else None


def _trace_info(pods: list[Pod], path: str | None, trace_format: str, models: bool) -> dict[str, Any]:
    gpu_pods = [pod for pod in pods if pod.gpu]
    memory = [pod.gpu_memory_mib for pod in pods if pod.gpu_memory_mib is not None]
    return {
        "path": path,
        "format": trace_format,
        "pods": len(pods),
        "gpu_pods": len(gpu_pods),
        "cpu_pods": len(pods) - len(gpu_pods),
        "gpu_requested_milli": sum(pod.requested_milli for pod in gpu_pods),
        "gpu_memory_mib": sum(memory) if memory else None,
        "gpu_spec_not_applied": 0 if models else sum(1 for pod in pods if pod.models),
    }


def _shares(outcome: engine.Outcome) -> dict[str, Any]:
    """The shares of the GPU capacity, and what they are shares of."""
    capacity = outcome.capacity
    if outcome.mode == "saturation":
        basis = {
            "basis": "at saturation",
            "allocated_milli": outcome.taken,
            "requested_milli": outcome.requested,
            "capacity_milli": capacity,
        }
        return {
            "gpu_allocated_share": _share(outcome.taken, capacity),
            "gpu_requested_share": _share(outcome.requested, capacity),
            "shares_of": basis,
        }
    times, end = outcome.times, outcome.end
    if not times or end is None or end == times[0]:
        # a trace without time to average over: the GPUs at its one instant (none without pods)
        taken = outcome.occupied[-1] if times else 0
        asked = outcome.asked[-1] if times else 0
        said = "at the trace's only instant" if times else "no pods"
        basis = {"basis": said, "allocated_milli": taken, "requested_milli": asked}
        basis.update(capacity_milli=capacity, window_seconds=0)
        return {
            "gpu_allocated_share": _share(taken, capacity),
            "gpu_requested_share": _share(asked, capacity),
            "shares_of": basis,
        }
    window = end - times[0]
    taken_seconds = asked_seconds = 0  # exact while the times are whole seconds
    for index, start in enumerate(times):
        stop = times[index + 1] if index + 1 < len(times) else end
        taken_seconds += outcome.occupied[index] * (stop - start)
        asked_seconds += outcome.asked[index] * (stop - start)
    basis = {
        "basis": "time-weighted mean",
        "allocated_milli_seconds": taken_seconds,
        "requested_milli_seconds": asked_seconds,
        "capacity_milli": capacity,
        "window_seconds": window,
    }
    return {
        "gpu_allocated_share": _share(taken_seconds, capacity * window),
        "gpu_requested_share": _share(asked_seconds, capacity * window),
        "shares_of": basis,
    }


def _peak(times: list[float], values: list[int]) -> dict[str, Any]:
    if not values:
        return {"milli": 0, "at": None}
    top = max(values)
    return {"milli": top, "at": times[values.index(top)]}


def _timeline(outcome: engine.Outcome) -> dict[str, Any]:
    return {
        "start": outcome.times[0] if outcome.times else None,
        "end": outcome.end,
        "time": outcome.times,
        "occupied_milli": outcome.occupied,
        "requested_milli": outcome.asked,
        "peak": {"occupied": _peak(outcome.times, outcome.occupied), "requested": _peak(outcome.times, outcome.asked)},
        "unstarted": outcome.unstarted,
        "unstarted_gpu_pods": outcome.unstarted_gpu,
    }


def _groups(pods: list[Pod], outcome: engine.Outcome, attribute: str) -> dict[str, Any] | None:
    """Per team (or tier) of the trace: pods and GPU pods, and how many were placed; None when no pod names one.

    Pods without one are counted under ``""``.
    """
    if not any(getattr(pod, attribute) for pod in pods):
        return None
    groups: dict[str, dict[str, int]] = {}
    for pod in pods:
        row = groups.setdefault(
            getattr(pod, attribute) or "", {"pods": 0, "pods_placed": 0, "gpu_pods": 0, "gpu_pods_placed": 0}
        )
        placed = pod.name in outcome.placed
        row["pods"] += 1
        row["pods_placed"] += placed
        row["gpu_pods"] += pod.gpu
        row["gpu_pods_placed"] += placed and pod.gpu
    return dict(sorted(groups.items()))


def _thin(pods: list[Pod], outcome: engine.Outcome) -> dict[str, Any]:
    """GPU memory promised (the placed GPU pods' limits) against guaranteed (their requests), in milli-GPUs.

    Saturation: the pods placed at the stop. Timeline: the instant most is
    promised (the first such; pods leave before pods arrive at one instant).
    """
    by_name = {pod.name: pod for pod in pods}
    placed = [by_name[name] for name in outcome.placed if by_name[name].gpu]
    if outcome.mode == "saturation":
        promised, guaranteed, at = sum(p.limit_milli for p in placed), sum(p.requested_milli for p in placed), None
    else:
        events = []
        for pod in placed:
            events.append((pod.created, 1, pod.limit_milli, pod.requested_milli))
            if pod.deleted is not None:
                phase = 0 if pod.deleted > pod.created else 2
                events.append((pod.deleted, phase, -pod.limit_milli, -pod.requested_milli))
        events.sort(key=lambda e: (e[0], e[1]))
        promised = guaranteed = now_promised = now_guaranteed = 0
        at = None
        for position, (time, _phase, limit, request) in enumerate(events):
            now_promised += limit
            now_guaranteed += request
            last = position + 1 == len(events) or events[position + 1][0] != time
            if last and now_promised > promised:
                promised, guaranteed, at = now_promised, now_guaranteed, time
    return {
        "basis": "at saturation" if outcome.mode == "saturation" else "at the peak of promised",
        "time": at,
        "promised_milli": promised,
        "guaranteed_milli": guaranteed,
        "over_request_milli": promised - guaranteed,
        "promised_share": _share(promised, outcome.capacity),
        "guaranteed_share": _share(guaranteed, outcome.capacity),
        "pods_with_limit": sum(1 for p in placed if p.limit_milli > p.requested_milli),
    }


def summarise(
    pods: list[Pod],
    specs: list[NodeSpec],
    node_info: dict[str, Any],
    outcome: engine.Outcome,
    policy: str,
    applied: str,
    fallback: str | None,
    order: str,
    trace_info: dict[str, Any],
) -> dict[str, Any]:
    """The ``replay`` result of one run."""
    by_name = {pod.name: pod for pod in pods}
    first = None
    if outcome.first_unplaced is not None:
        pod, needed = outcome.first_unplaced
        first = {"name": pod.name, "line": pod.line, "created": pod.created, "needs": needed}
    result = {
        "schema_version": SCHEMA_VERSION,
        "policy": policy,
        "policy_applied": applied,
        "fallback": fallback,
        "order": order,
        "mode": outcome.mode,
        "trace": trace_info,
        "nodes": dict(node_info, count=len(specs), gpu_nodes=sum(1 for spec in specs if spec.gpus)),
        "gpus_total": sum(spec.gpus for spec in specs),
        "pods_placed": len(outcome.placed),
        "gpu_pods_placed": sum(1 for name in outcome.placed if by_name[name].gpu),
        "cpu_pods_skipped": len(outcome.cpu_skipped),
        "pods_not_tried": outcome.not_tried,
        "first_unplaced": first,
        **_shares(outcome),
    }
    if applied == "thin":
        result["thin"] = _thin(pods, outcome)
    if outcome.mode == "timeline":
        result["timeline"] = _timeline(outcome)
    for key, attribute in (("teams", "team"), ("tiers", "tier")):
        groups = _groups(pods, outcome, attribute)
        if groups is not None:
            result[key] = groups
    return result


def _choice(option: str, value: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ReplayError(f"{option}: {value!r} is not one of {', '.join(choices)}")
    return value


def replay(trace: str, trace_format: str = "openb", policy: str = "whole", **options: Any) -> dict[str, Any]:
    """Replay the trace file on the openb node list ``nodes`` or the site's ``plan``; the ``replay`` result.

    ``options`` are those of :func:`replay_policies` (``nodes``, ``plan``, ``order``, ``mode``,
    ``gpu_class``, ``fractional_template``, ``usage`` and the thin options of
    :func:`thin_result.options`). With ``usage`` (a CSV of the pods' measured use, timeline mode), the
    result gains ``measured`` and, under ``thin`` with ``burst_factors``, ``thin_factors``.

    Raises :class:`ReplayError` naming the option (and the file's line and
    column) that is wrong.
    """
    return replay_policies(trace, [policy], trace_format=trace_format, **options)[policy]


def replay_policies(
    trace: str,
    policies: list[str],
    trace_format: str = "openb",
    nodes: str | None = None,
    plan: str | None = None,
    order: str = "pack",
    mode: str = "saturation",
    gpu_class: str = "aligned-gpu",
    fractional_template: str = "fractional-gpu",
    usage: str | None = None,
    mig: dict[str, Any] | None = None,
    topology_dir: str | None = None,
    mig_headroom: Any = mig_result.DEFAULTS["mig_headroom"],
    seed: Any = mig_result.DEFAULTS["seed"],
    draws: Any = mig_result.DEFAULTS["draws"],
    **thin_options: Any,
) -> dict[str, dict[str, Any]]:
    """:func:`replay` under each of ``policies`` (each once, in their order): ``{policy: result}``.

    The trace, the nodes and the measured use are read and checked once for
    every policy; each result is the one :func:`replay` returns for it alone. ``mig`` (``{host:
    aligned_dra_mig}``) and ``topology_dir`` (the nodes' probes; default the plan's ``nodes/`` beside it) are
    read by the policy ``mig`` only (:mod:`mig_result`), and so are ``mig_headroom`` (the fraction of a
    profile's memory a measured peak leaves free), ``seed`` and ``draws`` (first fit's random tie-breaks).
    """
    if not policies:
        raise ReplayError(f"policies: give at least one of {', '.join(POLICIES)}")
    for policy in policies:
        _choice("policy", policy, POLICIES)
    if len(set(policies)) != len(policies):
        raise ReplayError(f"policies: each policy once (got {', '.join(policies)})")
    _choice("order", order, ORDERS)
    _choice("mode", mode, MODES)
    unknown = sorted(set(thin_options) - set(thin_result.DEFAULTS))
    if unknown:
        raise TypeError(f"replay() got unknown options {unknown}")
    measured_options = thin_result.options(usage, mode, thin_options)
    mig_settings = mig_result.options({"mig_headroom": mig_headroom, "seed": seed, "draws": draws}, policies)
    if (nodes is None) == (plan is None):
        raise ReplayError("nodes, plan: give exactly one of them (an openb node list, or a site's plan.json)")
    if "mig" in policies and plan is None:
        raise ReplayError("policies: mig replays on a site's plan and its nodes' probes, not on an openb node list")
    if plan is not None:
        specs, info = replay_nodes.plan_nodes(plan, gpu_class, fractional_template)
    else:
        specs, info = replay_nodes.read_openb_nodes(str(nodes))
    pods = replay_trace.read_trace(trace, trace_format)
    fractional_reason = info.pop("fractional_reason", None)
    models = bool(info["limits"]["gpu_model"])
    if usage is not None:
        # the usage is checked before anything is replayed, and the GPUs' memory before the walk needs it
        samples = replay_usage.read_usage(usage, pods, pods.time_kind)
        memory = thin_result.site_gpu_memory(measured_options.gpu_memory, plan, measured_options.reserve)
    trace_info = _trace_info(pods, trace, trace_format, models)
    results = {}
    for policy in policies:
        if policy == "mig":
            results[policy] = mig_result.replay_mig(
                pods,
                specs,
                dict(info),
                mode,
                mig,
                os.path.join(os.path.dirname(str(plan)), "nodes") if topology_dir is None else topology_dir,
                samples if usage is not None else None,
                lambda mig_specs, mig_info, outcome: summarise(
                    pods, mig_specs, mig_info, outcome, "mig", "mig", None, order, dict(trace_info)
                ),
                mig_settings,
            )
            continue
        applied, fallback = policy, None
        if policy in ("fractional", "thin") and fractional_reason:
            applied, fallback = "whole", fractional_reason
        outcome = engine.replay(pods, specs, applied, order, mode, models)
        # each result its own copies: a caller may change one without touching another
        result = summarise(pods, specs, dict(info), outcome, policy, applied, fallback, order, dict(trace_info))
        if usage is not None:
            measured, factors = thin_result.measured(
                pods, specs, order, models, samples, memory, applied, measured_options
            )
            result["measured"] = measured
            if factors is not None:
                result["thin_factors"] = factors
        results[policy] = result
    return results
