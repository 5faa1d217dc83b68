# SPDX-License-Identifier: Apache-2.0
"""The ``mig`` policy of the replay: the site's MIG GPUs read, the trace placed in both orders, the result.

The site's MIG GPUs are those :func:`controller.mig.model.node_gpus` gives each node of the plan under its
host's ``aligned_dra_mig`` (``mig``: ``{host: settings}``, as the filter ``aligned.dra.mig_settings`` hands
them on) and its probe (``<topology_dir>/<host>.json``, the topology role's file): NVML's profiles where the
probe read them, else the documented geometry (marked), a static GPU with its layout's instances. GPUs of the
site without MIG are not used by this policy, and the result says how many there are.

The result is the one the other policies return (pods placed, shares of the capacity, first pod not placed,
the timeline), counted for the driver's order on the MIG GPUs only (a partition takes its memory slices over
the GPU's, in milli-GPUs), plus ``mig``: per order (``first_fit``, ``fragmentation_aware``) the pods placed,
the GPUs needed, the memory slices stranded at the first pod that found no device, what sized and what decided
each pod's device, every placement and every pod not placed with the reason; the profiles' sizes the replay
used, each with its source (``profile_sizes``); and first fit's range under the scheduler's random tie-breaks
(``first_fit_range``, :mod:`mig_draws`), of which the name order (``orders.first_fit``) is the best case as a
rule (docs/replay.md, "MIG").

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import json
import os

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import checks as mig_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError, mig_draws, mig_sizing
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import mig as mig_engine
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.nodes import NodeSpec
from ansible_collections.aligned.dra.plugins.module_utils.dra.model import DeviceModelError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import Pod
    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.usage import Usage

SIZING_RULE = (
    "each GPU pod's share rounded up to the smallest profile of each GPU model holding both its memory (its "
    "peak measured use where usage has samples of it, with mig_headroom of the profile's memory kept free; "
    "else the trace's gpu_memory, a request, as it is) and its share of the GPU's compute slices; a share no "
    "profile holds takes the GPU whole (dynamic GPUs of Hopper and newer); pods of whole GPUs take the GPU "
    "whole of such GPUs with no partition in use, on one node"
)
HEADROOM_APPLIES = "measured peaks only (a trace's gpu_memory is a request, fitted as it is)"
ORDER_CASES = {
    mig_engine.FIRST_FIT: "nodes in name order: the best case as a rule (the scheduler draws among equal nodes)",
    mig_engine.FRAGMENTATION_AWARE: "for comparison: no scheduler places by it",
}


def first_fit_case(spread: dict[str, Any] | None) -> str:
    """What the name order is, in words, against the draws: the best case where no draw placed more GPU pods,
    else said not to be (a rule, not a theorem: a draw can beat it)."""
    if spread is None:
        return ORDER_CASES[mig_engine.FIRST_FIT] + "; no draws to check it against (draws: 0)"
    beaten, draws = spread["best_case"]["draws_placing_more"], spread["draws"]
    if not beaten:
        return f"nodes in name order: the best case, no draw of {draws} placed more GPU pods"
    return f"nodes in name order: not the best case here, {beaten} of {draws} draws placed more GPU pods"


def _read_topology(path: str, host: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            found = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ReplayError(f"topology_dir: the probe of {host}, {path}, cannot be read: {exc}") from None
    if not isinstance(found, dict) or not isinstance(found.get("devices"), list):
        raise ReplayError(f"topology_dir: {path} is not a probed topology (no 'devices' list)")
    return found


def site_gpus(
    specs: list[NodeSpec], mig: Any, topology_dir: str | None
) -> tuple[list[tuple[str, list[dict[str, Any]]]], int, list[str]]:
    """``(nodes, GPUs without MIG, notes)``: each node of the plan with its MIG GPUs (PCI order), how many of
    the site's GPUs MIG does not take, and what the nodes could not say."""
    if not isinstance(mig, dict) or not all(isinstance(s, dict) for s in mig.values()):
        raise ReplayError("mig: must map each host to its aligned_dra_mig settings")
    hosts = {host for host, settings in mig.items() if mig_model.mode_of(settings) != "off"}
    if not hosts:
        raise ReplayError(
            "policies: mig replays on the site's MIG GPUs, and no host of mig has aligned_dra_mig with mode "
            "static or dynamic: give the site's settings (mig), or leave mig out of policies"
        )
    if not topology_dir:
        raise ReplayError("topology_dir: the policy mig reads each MIG node's probe from it (<host>.json)")
    names = {spec.name for spec in specs}
    nodes, without, missing = [], 0, []
    for spec in specs:
        if spec.name not in hosts:
            nodes.append((spec.name, []))
            without += spec.gpus
            continue
        topology = _read_topology(os.path.join(topology_dir, f"{spec.name}.json"), spec.name)
        if topology is None:
            missing.append(spec.name)
            nodes.append((spec.name, []))
            without += spec.gpus
            continue
        try:
            gpus = mig_model.node_gpus(topology, mig[spec.name])
        except (mig_model.MigModelError, mig_checks.MigSettingsError, DeviceModelError) as exc:
            raise ReplayError(f"mig.{spec.name}: {exc}") from None
        probed = sum(1 for d in topology["devices"] if d.get("kind") == "gpu" and d.get("physfn") is None)
        without += max(probed - len(gpus), 0)
        nodes.append((spec.name, gpus))
    notes = []
    if missing:
        notes.append(
            f"policy mig: {len(missing)} node(s) with aligned_dra_mig have no probe in {topology_dir} "
            f"({', '.join(missing[:5])}{' and more' if len(missing) > 5 else ''}): their GPUs are not used"
        )
    strays = sorted(hosts - names)
    if strays:
        notes.append(f"policy mig: {len(strays)} host(s) with aligned_dra_mig are not in the plan: not replayed")
    if without:
        notes.append(f"policy mig: {without} GPU(s) of the site without MIG are not used (MIG GPUs only)")
    return nodes, without, notes


def _first(outcome: mig_engine.MigOutcome) -> dict[str, Any] | None:
    if outcome.first_unplaced is None:
        return None
    pod, needs = outcome.first_unplaced
    return {"name": pod.name, "line": pod.line, "created": pod.created, "needs": needs}


def order_figures(pods: list[Pod], outcome: mig_engine.MigOutcome) -> dict[str, Any]:
    """One order's figures (the ``mig.orders`` entry)."""
    gpu_pods = {pod.name for pod in pods if pod.gpu}
    return {
        "case": ORDER_CASES.get(outcome.order, ""),
        "node_order": "name",
        "pods_placed": len(outcome.placed),
        "gpu_pods_placed": sum(1 for name in outcome.placed if name in gpu_pods),
        "gpu_pods_not_placed": len(outcome.not_placed),
        "pods_not_tried": outcome.not_tried,
        "first_unplaced": _first(outcome),
        "gpus_needed": mig_draws.gpus_needed(outcome),
        "stranded": outcome.stranded,
        "sized_by": dict(sorted(outcome.sized_by.items())),
        "decided_by": {key: outcome.decided_by.get(key, 0) for key in mig_sizing.DECIDERS},
        "profiles": dict(sorted(outcome.profiles.items())),
        "placements": outcome.placements,
        "not_placed": outcome.not_placed,
    }


def _models(site: mig_engine.Site) -> dict[str, int]:
    found: dict[str, int] = {}
    for gpu in site.gpus:
        label = f"{gpu.kind.model} ({gpu.kind.mode})"
        found[label] = found.get(label, 0) + 1
    return dict(sorted(found.items()))


def replay_mig(
    pods: list[Pod],
    specs: list[NodeSpec],
    info: dict[str, Any],
    mode: str,
    mig: Any,
    topology_dir: str | None,
    usage: Usage | None,
    summarise: Callable[..., dict[str, Any]],
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``mig`` policy's result. ``summarise(specs, info, outcome)`` shapes the figures every policy has
    (``result.summarise`` with the trace's and the run's other arguments bound); ``settings``: those of
    :func:`options` (``mig_headroom``, ``seed``, ``draws``), checked."""
    chosen = dict(DEFAULTS, **(settings or {}))
    nodes, without, notes = site_gpus(specs, mig, topology_dir)
    site = mig_engine.Site(nodes, chosen["mig_headroom"])
    measured = {}
    if usage is not None:
        for pod in pods:
            peak = usage.peak(pod.name) if pod.gpu else None
            if peak is not None:
                measured[pod.name] = peak
    outcomes = {order: mig_engine.replay(pods, site, order, mode, measured) for order in mig_engine.ORDERS}
    mig_specs = [NodeSpec(name, None, None, len(gpus), None) for name, gpus in nodes]
    info = dict(info, notes=list(info.get("notes") or []) + notes)
    info["notes"].append(
        "policy mig: the driver's device order (first fit), nodes in name order, gives the figures above: the "
        "best case as a rule (the scheduler draws among equal nodes; mig.first_fit_range gives the range, and "
        "mig.orders.first_fit.case says whether a draw beat it); the "
        "replay's order (pack or spread) does not apply; mig.orders compares it with a fragmentation-aware order"
    )
    result = summarise(mig_specs, info, outcomes[mig_engine.FIRST_FIT])
    orders = {order: order_figures(pods, outcome) for order, outcome in outcomes.items()}
    sources: dict[str, int] = {}
    for _node, gpus in nodes:
        for gpu in gpus:
            sources[gpu["source"]] = sources.get(gpu["source"], 0) + 1
    result["mig"] = {
        "gpus": len(site.gpus),
        "gpus_without_mig": without,
        "memory_slices": site.memory_slices,
        "gpu_models": _models(site),
        "sources": dict(sorted(sources.items())),
        "sizing": {
            "rule": SIZING_RULE,
            "measured_pods": len(measured),
            "headroom": chosen["mig_headroom"],
            "headroom_applies_to": HEADROOM_APPLIES,
        },
        "profile_sizes": mig_sizing.profile_sizes(site.kinds),
        "orders": orders,
        "first_fit_range": mig_draws.first_fit_range(
            pods, site, mode, measured, chosen["seed"], chosen["draws"], orders[mig_engine.FIRST_FIT]
        ),
    }
    orders[mig_engine.FIRST_FIT]["case"] = first_fit_case(result["mig"]["first_fit_range"])
    return result


DEFAULTS = {
    "mig_headroom": mig_sizing.DEFAULT_HEADROOM,
    "seed": mig_draws.DEFAULT_SEED,
    "draws": mig_draws.DEFAULT_DRAWS,
}


def options(given: dict[str, Any], policies: list[str]) -> dict[str, Any]:
    """The ``mig`` policy's settings checked (each error names its setting); a setting other than its default
    without ``mig`` in ``policies`` is refused (it would change nothing)."""
    chosen = {name: given.get(name, default) for name, default in DEFAULTS.items()}
    chosen["mig_headroom"] = mig_sizing.headroom_of(chosen["mig_headroom"])
    chosen["seed"] = mig_draws.seed_of(chosen["seed"])
    chosen["draws"] = mig_draws.draws_of(chosen["draws"])
    if "mig" not in policies:
        for name, default in DEFAULTS.items():
            if chosen[name] != default:
                raise ReplayError(
                    f"{name}: {given[name]!r} applies to the policy mig only: add mig to policies, or leave it out"
                )
    return chosen
