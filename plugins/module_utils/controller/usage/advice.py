# SPDX-License-Identifier: Apache-2.0
"""Right-sized fractions from measured use: advice, never a change.

Per team and fractional template (the claims whose request is a share of
their GPU), from each measured claim's peak memory over the window:

- **request**: the ``request_percentile`` (default 95, nearest rank) of the
  claims' peaks, rounded up to a whole MiB: that share of the claims never
  used more than it;
- **limit**: the largest peak, rounded up to a MiB and capped at the smallest
  GPU memory among the claims' GPUs;
- **claims per GPU**: that GPU's memory over the request, whole claims, today
  (the claims' largest request) and advised.

Whole-GPU claims that used under half of their GPU's memory and, where
known, under half of its compute at every measured point, with every
allocated point measured, are candidates for a fraction; ``compute_known``
is true only where the compute was measured at every one of those points.
A group with claims measured at only some of their steps says how many
(``claims_partly_measured``): their peaks, and the advice, are lower bounds
(``peaks_lower_bound``). A group without a
measured claim gets no advice (the reason says so); fewer than
``MIN_CLAIMS`` measured claims is advice marked ``few_claims``.

The inventory snippet (``aligned_dra_claims.templates.fractional_gpu.memory``
and ``aligned_dra_fractional_burst.memory``) is per site, from every measured
share of the site. The collection never changes the inventory.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims.burst import quantity
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.summary import percentile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MIB = 2**20
MIN_CLAIMS = 5
# A whole GPU used under this share of its memory and compute is a candidate for a fraction.
CANDIDATE_SHARE = 0.5
FACTOR_DIGITS = 2


def _mib_up(value: float) -> int:
    return math.ceil(value / MIB) * MIB


def _group_advice(claims: list[dict[str, Any]], rank: float) -> dict[str, Any]:
    measured = [c for c in claims if c["memory_used_bytes"]]
    out: dict[str, Any] = {"claims": len(claims), "claims_measured": len(measured)}
    if not measured:
        out["advice"] = None
        out["reason"] = "no claim of the group has a measured sample: nothing to size from"
        return out
    peaks = sorted(c["memory_used_bytes"]["max"] for c in measured)
    gpu_memory = min(c["gpu_memory_bytes"] for c in measured)
    today = max(c["request_bytes"] for c in measured)
    request = min(_mib_up(percentile(peaks, rank) or 0) or MIB, int(gpu_memory))
    limit = max(request, min(_mib_up(peaks[-1]), int(gpu_memory)))
    out["advice"] = {
        "request_bytes": request,
        "request": quantity(Fraction(request)),
        "limit_bytes": limit,
        "limit": quantity(Fraction(limit)),
        "burst_factor": math.ceil(limit / request * 10**FACTOR_DIGITS) / 10**FACTOR_DIGITS,
        "claims_above_request": sum(1 for p in peaks if p > request),
    }
    out["today"] = {"request_bytes": today, "request": quantity(Fraction(int(today)))}
    out["gpu_memory_bytes"] = gpu_memory
    out["claims_per_gpu"] = {"today": int(gpu_memory // today), "advised": int(gpu_memory // request)}
    out["peak_bytes"] = {"p50": percentile(peaks, 50), f"p{rank:g}": percentile(peaks, rank), "max": peaks[-1]}
    if len(measured) < MIN_CLAIMS:
        out["few_claims"] = True
    # a claim with unknown steps may have peaked in them: its peak, and the advice, are then at least this
    partial = sum(1 for c in measured if c["hours"]["unknown"])
    if partial:
        out["claims_partly_measured"] = partial
        out["advice"]["peaks_lower_bound"] = True
    return out


def _candidate(claim: dict[str, Any]) -> dict[str, Any] | None:
    memory, total = claim["memory_used_bytes"], claim["gpu_memory_bytes"]
    if claim["kind"] != "whole" or not memory or not total or claim["hours"]["unknown"]:
        return None
    if memory["max"] >= CANDIDATE_SHARE * total:
        return None
    activity = claim.get("activity_max")
    if activity is not None and activity >= CANDIDATE_SHARE:
        return None
    # the compute is known for the whole window only where it was measured at every measured step
    compute_known = activity is not None and claim.get("activity_points") == memory["points"]
    return {
        "namespace": claim["namespace"],
        "claim": claim["claim"],
        "team": claim["team"],
        "template": claim["template"],
        "memory_max_bytes": memory["max"],
        "memory_max_share": round(memory["max"] / total, 4),
        "compute_max": activity,
        "compute_known": compute_known,
        "compute_points": claim.get("activity_points", 0),
        "memory_points": memory["points"],
        "gpu_hours": claim["gpu_hours"]["allocated"] if claim["gpu_hours"] else None,
    }


def advise(summary: dict[str, Any], request_percentile: float = 95.0) -> dict[str, Any]:
    """``advice`` of ``utilization.json``: per team and template, the whole-GPU candidates and the snippet."""
    shares: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for claim in summary["claims"]:
        if claim["kind"] == "share":
            shares.setdefault((claim["team"], claim["template"]), []).append(claim)
    groups = []
    for (team, template), claims in sorted(shares.items()):
        groups.append({"team": team, "template": template, **_group_advice(claims, request_percentile)})
    candidates = [found for found in map(_candidate, summary["claims"]) if found]
    site = _group_advice([c for claims in shares.values() for c in claims], request_percentile)
    snippet = None
    if site.get("advice"):
        snippet = {
            "aligned_dra_claims": {"templates": {"fractional_gpu": {"memory": site["advice"]["request"]}}},
            "aligned_dra_fractional_burst": {"memory": max(1.0, site["advice"]["burst_factor"])},
        }
    return {
        "request_percentile": request_percentile,
        "fractional": groups,
        "site": site,
        "whole_gpu_candidates": candidates,
        "inventory_snippet": snippet,
    }
