# SPDX-License-Identifier: Apache-2.0
"""The ``mig`` policy's first fit with the scheduler's random tie-breaks: a range, not one figure.

kube-scheduler scores the nodes that can take a pod and picks at random among those with the top score. Its
scores do not see MIG devices, and a plan knows neither the nodes' CPU nor their memory, so every node with a
free device of the pod's profile scores the same here. The replay's ``first_fit`` takes the nodes in name order:
it packs the first nodes and keeps the last ones' GPUs whole, the best case as a rule (a draw may beat it on a
site whose models differ by node: each run says how many did). Each draw replays the trace once more, each
pod's node drawn uniformly among those nodes (:meth:`mig.Site.find_one` with an ``rng``), the driver's order on
the node; the draws are seeded (``seed``), so a seed gives the same figures on every run.

The result (``mig.first_fit_range``): per figure (GPU pods placed, pods placed, GPUs needed at the peak and,
in timeline mode, on time-weighted mean) the ``min``, ``median`` and ``max`` over the draws, the name order's
figures beside them (``best_case``) with how many draws beat it, and each draw's figures (``runs``).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import random
import statistics

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import mig as mig_engine

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import Pod

DEFAULT_SEED = 0
DEFAULT_DRAWS = 10
# Each draw replays the whole trace once more: more than this is a typo, not a wish for precision.
MAX_DRAWS = 1000
RULE = (
    "first fit with the scheduler's random tie-breaks: each pod's node drawn uniformly among the nodes with a "
    "free device of its profile (the scheduler's scores do not see MIG devices, and a plan knows no CPU or "
    "memory: every such node scores the same), the driver's order on that node; one replay per draw, seeded"
)


def _count(option: str, value: Any, low: int, high: int | None, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ReplayError(f"{option}: {value!r} is not a whole number ({what})")
    try:
        found = int(value)
    except ValueError:
        raise ReplayError(f"{option}: {value!r} is not a whole number ({what})") from None
    if found < low or (high is not None and found > high):
        bound = f"{low} to {high}" if high is not None else f"at least {low}"
        raise ReplayError(f"{option}: {value!r} is out of range ({bound})")
    return found


def seed_of(value: Any) -> int:
    """``seed`` checked: a whole number, 0 or more."""
    return _count("seed", value, 0, None, "the seed of the random tie-breaks")


def draws_of(value: Any) -> int:
    """``draws`` checked: 0 (no draws) to ``MAX_DRAWS``."""
    return _count("draws", value, 0, MAX_DRAWS, "replays with random tie-breaks; 0: none")


def gpus_needed(outcome: mig_engine.MigOutcome) -> dict[str, Any]:
    """GPUs holding a pod: at the stop (saturation), or the peak, when first reached, and the time-weighted
    mean over the trace's window (timeline; the mean is None without a window)."""
    if outcome.mode == "saturation":
        return {"basis": "at saturation", "peak": outcome.gpus_used_at_stop, "at": None, "mean": None}
    used, times = outcome.gpus_used, outcome.times
    if not used:
        return {"basis": "no pods", "peak": 0, "at": None, "mean": None}
    peak = max(used)
    mean = None
    if outcome.end is not None and outcome.end > times[0]:
        total = sum(used[i] * ((times[i + 1] if i + 1 < len(times) else outcome.end) - t) for i, t in enumerate(times))
        mean = total / (outcome.end - times[0])
    return {"basis": "time-weighted mean", "peak": peak, "at": times[used.index(peak)], "mean": mean}


def _spread(values: list[Any]) -> dict[str, Any] | None:
    if not values or any(value is None for value in values):
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def first_fit_range(
    pods: list[Pod],
    site: mig_engine.Site,
    mode: str,
    measured: dict[str, int],
    seed: int,
    draws: int,
    best: dict[str, Any],
) -> dict[str, Any] | None:
    """``draws`` replays of first fit with random node tie-breaks, seeded by ``seed``; None for 0 draws.
    ``best``: the name order's figures (``mig.orders.first_fit``)."""
    if not draws:
        return None
    gpu_pods = {pod.name for pod in pods if pod.gpu}
    master = random.Random(seed)
    runs = []
    for index in range(draws):
        rng = random.Random(master.getrandbits(64))
        outcome = mig_engine.replay(pods, site, mig_engine.FIRST_FIT, mode, measured, rng=rng, detail=False)
        needed = gpus_needed(outcome)
        first = outcome.first_unplaced
        runs.append(
            {
                "draw": index,
                "pods_placed": len(outcome.placed),
                "gpu_pods_placed": sum(1 for name in outcome.placed if name in gpu_pods),
                "gpus_needed_peak": needed["peak"],
                "gpus_needed_mean": needed["mean"],
                "first_unplaced": None if first is None else first[0].name,
            }
        )
    best_pods, best_gpus = best["gpu_pods_placed"], best["gpus_needed"]["peak"]
    return {
        "seed": seed,
        "draws": draws,
        "rule": RULE,
        "basis": best["gpus_needed"]["basis"],
        "gpu_pods_placed": _spread([run["gpu_pods_placed"] for run in runs]),
        "pods_placed": _spread([run["pods_placed"] for run in runs]),
        "gpus_needed_peak": _spread([run["gpus_needed_peak"] for run in runs]),
        "gpus_needed_mean": _spread([run["gpus_needed_mean"] for run in runs]),
        "best_case": {
            "order": mig_engine.FIRST_FIT,
            "node_order": "name",
            "gpu_pods_placed": best_pods,
            "gpus_needed_peak": best_gpus,
            "draws_placing_more": sum(1 for run in runs if run["gpu_pods_placed"] > best_pods),
            "draws_needing_fewer_gpus": sum(1 for run in runs if run["gpus_needed_peak"] < best_gpus),
        },
        "runs": runs,
    }
