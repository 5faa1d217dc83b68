# SPDX-License-Identifier: Apache-2.0
"""The files the report reads besides the topologies: plan, teams, utilization, replay and jobs.

Each is checked for the fields the pages read, and refused with a
:class:`ReportError` that names the file and the field.
"""

from __future__ import annotations

import math

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import LEVEL_RANK, LEVELS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

PLAN_SCHEMA_VERSION = 1


class ReportError(ValueError):
    """Input the report cannot use (names the file or field)."""


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


_QUEUE_KEYS = ("name", "cluster_queue", "local_queue", "cohort", "flavor", "tier", "nominal", "borrowable", "lendable")


def _require_keys(row: Any, keys: Iterable[str], where: str) -> None:
    """``row`` is an object holding every key of ``keys``; else a ReportError that names ``where``."""
    for key in keys:
        if not isinstance(row, dict) or key not in row:
            raise ReportError(f"{where} has no '{key}'")


def validate_plan(plan: Any, source: str = "plan.json") -> dict[str, Any]:
    """Check the fields of the planner's output that the report reads."""
    if not isinstance(plan, dict):
        raise ReportError(f"{source}: expected a JSON object, got {type(plan).__name__}")
    if plan.get("schema_version") != PLAN_SCHEMA_VERSION:
        raise ReportError(
            f"{source}: schema_version {plan.get('schema_version')!r} is not supported (expected {PLAN_SCHEMA_VERSION})"
        )
    templates = plan.get("templates")
    if not isinstance(templates, list):
        raise ReportError(f"{source}: 'templates' must be a list")
    for index, template in enumerate(templates):
        where = f"{source}: templates[{index}]"
        if not isinstance(template, dict):
            raise ReportError(f"{where} must be an object")
        _require_keys(
            template, ("name", "required", "fits_total", "worst_level", "satisfiable", "errors", "nodes"), where
        )
        if template["worst_level"] is not None and template["worst_level"] not in LEVEL_RANK:
            raise ReportError(f"{where}.worst_level {template['worst_level']!r} is not one of {list(LEVELS)}")
        if not isinstance(template["nodes"], dict) or not isinstance(template["errors"], list):
            raise ReportError(f"{where}: 'nodes' must be an object and 'errors' a list")
        # Counts and flags go into the page as they are: only numbers and booleans are accepted.
        if not _count(template["fits_total"]):
            raise ReportError(f"{where}.fits_total {template['fits_total']!r} is not a count")
        for key in ("required", "satisfiable"):
            if not isinstance(template[key], bool):
                raise ReportError(f"{where}.{key} {template[key]!r} is not a boolean")
        _check_fits_per_rail(template.get("fits_per_rail"), f"{where}.fits_per_rail")
        for node, entry in template["nodes"].items():
            if not isinstance(entry, dict) or "fits" not in entry or "worst_level" not in entry:
                raise ReportError(f"{where}.nodes.{node} needs 'fits' and 'worst_level'")
            if not _count(entry["fits"]):
                raise ReportError(f"{where}.nodes.{node}.fits {entry['fits']!r} is not a count")
            if entry["worst_level"] is not None and entry["worst_level"] not in LEVEL_RANK:
                raise ReportError(
                    f"{where}.nodes.{node}.worst_level {entry['worst_level']!r} is not one of {list(LEVELS)}"
                )
    tainted = plan.get("tainted_devices", [])
    if not isinstance(tainted, list) or not all(
        isinstance(t, dict) and isinstance(t.get("node"), str) and isinstance(t.get("device"), str) for t in tainted
    ):
        raise ReportError(f"{source}: 'tainted_devices' must be a list of objects with 'node' and 'device'")
    _check_thin(plan.get("thin", []), f"{source}: thin")
    return plan


def _ratio(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0)


def _check_thin(thin: Any, where: str) -> None:
    """The thin ratios of burstable templates (planner/thin.py): numbers, booleans and counts only."""
    if not isinstance(thin, list):
        raise ReportError(f"{where} must be a list")
    for index, entry in enumerate(thin):
        at = f"{where}[{index}]"
        if not isinstance(entry, dict):
            raise ReportError(f"{at} must be an object")
        _require_keys(entry, ("template", "request_memory", "limit_memory", "claims", "ratio", "bound"), at)
        for key in ("request_memory", "limit_memory", "claims"):
            if not _count(entry[key]):
                raise ReportError(f"{at}.{key} {entry[key]!r} is not a count")
        if not _ratio(entry["ratio"]) or not isinstance(entry["bound"], bool):
            raise ReportError(f"{at}: 'ratio' must be a number or null and 'bound' a boolean")
        nodes = entry.get("nodes", {})
        if not isinstance(nodes, dict):
            raise ReportError(f"{at}.nodes must be an object")
        for node, part in nodes.items():
            if not (
                isinstance(part, dict)
                and _count(part.get("claims"))
                and _ratio(part.get("ratio"))
                and isinstance(part.get("bound"), bool)
            ):
                raise ReportError(f"{at}.nodes.{node} needs 'claims' (a count), 'ratio' (a number or null), 'bound'")


def _check_fits_per_rail(fits: Any, where: str) -> None:
    """``fits_per_rail`` (optional): rail number (a string of digits) -> claims that fit."""
    if fits is None:
        return
    if not isinstance(fits, dict):
        raise ReportError(f"{where} must be an object of rail -> claims that fit")
    for rail, count in fits.items():
        if not isinstance(rail, str) or not rail.isdigit():
            raise ReportError(f"{where}: {rail!r} is not a rail number")
        if not _count(count):
            raise ReportError(f"{where}.{rail} {count!r} is not a count")


def summary_rails(summary: Any, source: str = "summary.json") -> dict[str, dict[str, Any] | None]:
    """Each node's rails in the topology role's ``summary.json`` (``per_node.<host>.rails``).

    ``{host: rails or None}``; a summary written before rails existed gives
    ``None`` for every node (no rule). Refused, naming the field, where a
    node's rails are not what the report reads (``rule``, ``nics`` with
    ``pci_address``, ``rail``, ``why`` and, where written, ``unknown``;
    ``problems``).
    """
    if not isinstance(summary, dict) or not isinstance(summary.get("per_node"), dict):
        return {}
    found: dict[str, dict[str, Any] | None] = {}
    for host, node in summary["per_node"].items():
        entry = node.get("rails") if isinstance(node, dict) else None
        where = f"{source}: per_node.{host}.rails"
        if entry is None:
            found[str(host)] = None
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("nics"), list):
            raise ReportError(f"{where} must be an object with a 'nics' list")
        if entry.get("rule") is not None and not isinstance(entry["rule"], str):
            raise ReportError(f"{where}.rule {entry['rule']!r} is not a text")
        problems = entry.get("problems")
        if problems is not None and not (isinstance(problems, list) and all(isinstance(p, str) for p in problems)):
            raise ReportError(f"{where}.problems must be a list of texts")
        for index, nic in enumerate(entry["nics"]):
            _require_keys(nic, ("pci_address", "rail", "why"), f"{where}.nics[{index}]")
            rail = nic["rail"]
            if not isinstance(nic["pci_address"], str) or not (rail is None or _count(rail)):
                raise ReportError(f"{where}.nics[{index}]: pci_address must be a text and rail a number or null")
            if not isinstance(nic.get("unknown", False), bool) or (nic.get("unknown") and rail is not None):
                raise ReportError(f"{where}.nics[{index}].unknown must be true (with rail null) or false")
        found[str(host)] = entry
    return found


def validate_teams(teams: Any, source: str = "teams.json") -> dict[str, Any]:
    """Check the fields of the teams summary (``aligned.dra.teams_render``) that the report reads."""
    if not isinstance(teams, dict) or teams.get("schema_version") != 1:
        raise ReportError(f"{source}: expected a JSON object with schema_version 1")
    for key in ("teams", "capacity"):
        if not isinstance(teams.get(key), list):
            raise ReportError(f"{source}: '{key}' must be a list")
    for index, row in enumerate(teams["capacity"]):
        keys = ("class", "capacity", "guaranteed", "opportunistic", "status", "teams")
        _require_keys(row, keys, f"{source}: capacity[{index}]")
    queues = teams.get("kueue")
    if queues is not None:
        if not isinstance(queues, dict) or not isinstance(queues.get("teams"), list):
            raise ReportError(f"{source}: 'kueue' must be an object with a 'teams' list")
        for index, row in enumerate(queues["teams"]):
            _require_keys(row, _QUEUE_KEYS, f"{source}: kueue.teams[{index}]")
        outcome = queues.get("what_if")
        if outcome is not None:
            if not isinstance(outcome, dict) or not isinstance(outcome.get("teams"), dict):
                raise ReportError(f"{source}: kueue.what_if must be an object with 'teams'")
            for name, row in outcome["teams"].items():
                keys = ("by_nominal", "by_borrowing", "pending", "preempted")
                _require_keys(row, keys, f"{source}: kueue.what_if.teams.{name}")
    scheduled = teams.get("kai")
    if scheduled is not None:
        if not isinstance(scheduled, dict) or not isinstance(scheduled.get("queues"), list):
            raise ReportError(f"{source}: 'kai' must be an object with a 'queues' list")
        for index, row in enumerate(scheduled["queues"]):
            keys = ("queue", "priority", "quota", "limit", "over_quota_weight")
            _require_keys(row, keys, f"{source}: kai.queues[{index}]")
        outcome = scheduled.get("what_if")
        if outcome is not None and not isinstance(outcome, dict):
            raise ReportError(f"{source}: kai.what_if must be an object")
        for name, row in ((outcome or {}).get("fair_share") or {}).items():
            _require_keys(row, ("gpu", "quota", "demand", "beyond_quota"), f"{source}: kai.what_if.fair_share.{name}")
    return teams


# The devices allocated from the ResourceSlices; a site with ``usage`` but no slices has none of them.
ALLOCATION_KEYS = ("totals", "claims", "nodes", "classes", "teams", "alignment", "shared")


def has_allocation(used: Mapping[str, Any]) -> bool:
    """Whether a checked ``utilization.json`` has the allocation part (else it holds ``usage`` alone)."""
    return any(key in used for key in ALLOCATION_KEYS)


def validate_utilization(used: Any, source: str = "utilization.json") -> dict[str, Any]:
    """Check the fields of the utilization result (``aligned.dra.utilization``) that the report reads.

    The allocation part may be left out (every one of :data:`ALLOCATION_KEYS`) only where ``usage`` is
    there; ``usage`` is checked by :func:`check_usage`."""
    if not isinstance(used, dict) or used.get("schema_version") != 1:
        raise ReportError(f"{source}: expected a JSON object with schema_version 1")
    if used.get("usage") is not None:
        check_usage(used["usage"], f"{source}: usage")
        if not has_allocation(used):
            return used
    for key in ALLOCATION_KEYS[:-1]:
        if not isinstance(used.get(key), dict):
            raise ReportError(f"{source}: '{key}' must be an object")
    if not isinstance(used.get("shared"), list):
        raise ReportError(f"{source}: 'shared' must be a list")
    return used


def _numbers(value: Any) -> bool:
    return isinstance(value, list) and all(_number(v) for v in value)


# What a field of ``usage`` must be, by the name its spec gives it; "?" also allows null.
_FIELD_KINDS = {
    "count": (_count, "a count"),
    "number": (lambda v: _number(v) and v >= 0, "a number"),
    "number?": (lambda v: v is None or (_number(v) and v >= 0), "a number or null"),
    "text": (lambda v: isinstance(v, str), "a text"),
    "text?": (lambda v: v is None or isinstance(v, str), "a text or null"),
    "object": (lambda v: isinstance(v, dict), "an object"),
    "object?": (lambda v: v is None or isinstance(v, dict), "an object or null"),
    "list": (lambda v: isinstance(v, list), "a list"),
    "numbers": (_numbers, "a list of numbers"),
    "texts": (lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v), "a list of texts"),
    "boolean": (lambda v: isinstance(v, bool), "a boolean"),
    # where a chart places a point: finite, or the picture has no place for it
    "signed": (lambda v: _number(v) and math.isfinite(v), "a finite number"),
    "finite?": (lambda v: v is None or (_number(v) and 0 <= v < math.inf), "a finite number or null"),
}
_HOURS = {"allocated": "number", "active": "number", "idle": "number", "unknown": "number"}
_USAGE = {
    "source": "text",
    "window": "object",
    "sm_idle_threshold": "number",
    "totals": "object",
    "teams": "object",
    "templates": "object",
    "claims": "list",
    "timeline": "object",
    "advice": "object",
}
_WINDOW = {"start": "number", "end": "number", "step_seconds": "number", "points": "count", "hours": "number"}
_AGGREGATE = {
    "claims": "count",
    "claims_measured": "count",
    "claims_unknown": "count",
    "claims_without_size": "count",
    "gpu_hours": "object",
    "idle_share": "number?",
    "unknown_hours_share": "number?",
    "memory_used_over_requested": "number?",
    "memory_peak_bytes": "number?",
}
_CLAIM = {
    "namespace": "text",
    "claim": "text",
    "team": "text",
    "template": "text",
    "node": "text?",
    "device": "text?",
    "gpu_uuid": "text?",
    "kind": "text",
    "status": "text",
    "limit_bytes": "number?",
    "hours": "object",
    "gpu_hours": "object?",
    "memory_used_bytes": "object?",
}
_TIMELINE = {"start": "number", "bucket_seconds": "number", "buckets": "count", "teams": "object"}
_TIMELINE_SERIES = ("allocated_gpus", "active_gpus", "idle_gpus", "unknown_gpus", "memory_used_gpus")
_ADVICE = {
    "request_percentile": "number",
    "fractional": "list",
    "site": "object",
    "whole_gpu_candidates": "list",
    "inventory_snippet": "object?",
}
_GROUP = {"claims": "count", "claims_measured": "count", "advice": "object?"}
_ADVISED = {
    "request": "text",
    "limit": "text",
    "request_bytes": "number",
    "limit_bytes": "number",
    "burst_factor": "number",
    "claims_above_request": "count",
}
_CANDIDATE = {
    "namespace": "text",
    "claim": "text",
    "team": "text",
    "template": "text",
    "memory_max_bytes": "number",
    "memory_max_share": "number",
    "compute_max": "number?",
    "compute_known": "boolean",
    "gpu_hours": "number?",
}


def _fields(row: Any, spec: Mapping[str, str], where: str) -> dict[str, Any]:
    """``row`` is an object whose keys of ``spec`` hold what the spec names; else a ReportError naming the key."""
    if not isinstance(row, dict):
        raise ReportError(f"{where} must be an object")
    _require_keys(row, spec, where)
    for key, kind in spec.items():
        check, words = _FIELD_KINDS[kind]
        if not check(row[key]):
            raise ReportError(f"{where}.{key} {_short(row[key])} is not {words}")
    return row


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_usage(usage: Any, where: str) -> None:
    """The fields of ``usage`` (used versus allocated, ``controller/usage``) that the report reads."""
    _fields(usage, _USAGE, where)
    _fields(usage["window"], _WINDOW, f"{where}.window")
    if not _FIELD_KINDS["texts"][0](usage.get("series_missing", [])):
        raise ReportError(f"{where}.series_missing must be a list of texts")
    groups = [("totals", usage["totals"])]
    groups += [(f"{part}.{name}", row) for part in ("teams", "templates") for name, row in usage[part].items()]
    for name, row in groups:
        _fields(row, _AGGREGATE, f"{where}.{name}")
        _fields(row["gpu_hours"], _HOURS, f"{where}.{name}.gpu_hours")
    for index, claim in enumerate(usage["claims"]):
        at = f"{where}.claims[{index}]"
        _fields(claim, _CLAIM, at)
        _fields(claim["hours"], _HOURS, f"{at}.hours")
        if claim["gpu_hours"] is not None:
            _fields(claim["gpu_hours"], _HOURS, f"{at}.gpu_hours")
        if claim["memory_used_bytes"] is not None:
            _fields(claim["memory_used_bytes"], {"max": "number"}, f"{at}.memory_used_bytes")
    _check_timeline(usage["timeline"], f"{where}.timeline")
    _check_advice(usage["advice"], f"{where}.advice")


def _check_timeline(timeline: Any, where: str) -> None:
    """Per team, each series a list of numbers, one per bucket; a bucket of some length."""
    _fields(timeline, _TIMELINE, where)
    if not timeline["bucket_seconds"] and timeline["buckets"]:
        raise ReportError(f"{where}.bucket_seconds must be above 0")
    spec = dict.fromkeys(_TIMELINE_SERIES, "numbers")
    for team, rows in timeline["teams"].items():
        _fields(rows, spec, f"{where}.teams.{team}")
        for key in _TIMELINE_SERIES:
            if len(rows[key]) != timeline["buckets"]:
                raise ReportError(f"{where}.teams.{team}.{key} has {len(rows[key])} values, not {timeline['buckets']}")


def _check_group(group: Any, where: str) -> None:
    """One group's advice (usage/advice.py): the advised sizes, today's and the claims per GPU; or why none."""
    _fields(group, _GROUP, where)
    if group["advice"] is None:
        _fields(group, {"reason": "text"}, where)
        return
    _fields(group["advice"], _ADVISED, f"{where}.advice")
    _fields(group, {"today": "object", "claims_per_gpu": "object"}, where)
    _fields(group["today"], {"request": "text"}, f"{where}.today")
    _fields(group["claims_per_gpu"], {"today": "count", "advised": "count"}, f"{where}.claims_per_gpu")
    if not isinstance(group.get("few_claims", False), bool):
        raise ReportError(f"{where}.few_claims {_short(group['few_claims'])} is not a boolean")


def _check_advice(advice: Any, where: str) -> None:
    _fields(advice, _ADVICE, where)
    for index, group in enumerate(advice["fractional"]):
        at = f"{where}.fractional[{index}]"
        _fields(group, {"team": "text", "template": "text"}, at)
        _check_group(group, at)
    _check_group(advice["site"], f"{where}.site")
    for index, candidate in enumerate(advice["whole_gpu_candidates"]):
        _fields(candidate, _CANDIDATE, f"{where}.whole_gpu_candidates[{index}]")


_REPLAY_KEYS = (
    "policy",
    "policy_applied",
    "fallback",
    "order",
    "mode",
    "trace",
    "nodes",
    "gpus_total",
    "pods_placed",
    "gpu_pods_placed",
    "gpu_allocated_share",
    "gpu_requested_share",
    "shares_of",
    "first_unplaced",
)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def validate_replay(replay: Any, source: str = "replay.json") -> dict[str, Any]:
    """Check the fields of the replay results (``playbooks/replay.yml``, one per policy) that the report reads."""
    if not isinstance(replay, dict) or replay.get("schema_version") != 1:
        raise ReportError(f"{source}: expected a JSON object with schema_version 1")
    policies = replay.get("policies")
    if not isinstance(policies, dict) or not policies:
        raise ReportError(f"{source}: 'policies' must be an object of policy -> replay result")
    for name, run in policies.items():
        where = f"{source}: policies.{name}"
        _require_keys(run, _REPLAY_KEYS, where)
        for key in ("gpus_total", "pods_placed", "gpu_pods_placed"):
            if not _count(run[key]):
                raise ReportError(f"{where}.{key} {run[key]!r} is not a count")
        for key in ("gpu_allocated_share", "gpu_requested_share"):
            if run[key] is not None and not _number(run[key]):
                raise ReportError(f"{where}.{key} {run[key]!r} is not a number")
        _require_keys(run["trace"], ("format", "pods", "gpu_pods"), f"{where}.trace")
        _require_keys(run["nodes"], ("count",), f"{where}.nodes")
        _require_keys(run["shares_of"], ("basis", "capacity_milli"), f"{where}.shares_of")
        if run["first_unplaced"] is not None:
            _require_keys(run["first_unplaced"], ("name",), f"{where}.first_unplaced")
        if run["mode"] == "timeline":
            _check_series(run.get("timeline"), f"{where}.timeline")
        if run.get("thin") is not None:
            _check_replay_thin(run["thin"], f"{where}.thin")
        if run.get("measured") is not None:
            _check_measured(run["measured"], f"{where}.measured")
        if run.get("thin_factors") is not None:
            if not isinstance(run["thin_factors"], list):
                raise ReportError(f"{where}.thin_factors must be a list")
            for index, factor in enumerate(run["thin_factors"]):
                _fields(factor, _FACTOR, f"{where}.thin_factors[{index}]")
    return replay


# The figures on measured use the report reads (replay/thin_result.py; docs/replay.md).
_MEASURED = {
    "rules": "object",
    "gpu_memory": "object",
    "basis": "text",
    "window": "object",
    "pods": "count",
    "pods_placed": "count",
    "pods_unstarted": "count",
    "gpus_total": "count",
    "gpus_needed": "object",
    "evictions": "count",
    "evictions_per_day": "number?",
    "pods_evicted": "count",
    "requeued": "count",
    "waiting_at_end": "list",
    "memory": "object",
}
_RULES = {"policy": "text", "request": "text", "limit": "text", "reclaim_margin": "number", "on_evict": "text"}
_PEAK_MEAN = {"peak": "number", "mean": "number"}
_FACTOR = {
    "factor": "number",
    "gpus": "number",
    "gpus_fractional": "number",
    "gpus_saved": "signed",  # below 0 where thin needs more GPUs than fractional
    "evictions": "count",
    "evictions_per_day": "finite?",
    "pods_evicted": "count",
}


def _check_measured(measured: Any, where: str) -> None:
    """A policy's figures on measured use: the rules, the GPUs' memory, the counts and the memory's peaks and means."""
    _fields(measured, _MEASURED, where)
    _fields(measured["rules"], _RULES, f"{where}.rules")
    _fields(
        measured["gpu_memory"], {"bytes": "number", "source": "text", "plan_bytes": "number?"}, f"{where}.gpu_memory"
    )
    _fields(measured["window"], {"seconds": "number"}, f"{where}.window")
    _fields(measured["gpus_needed"], _PEAK_MEAN, f"{where}.gpus_needed")
    memory = _fields(measured["memory"], {"capacity_bytes": "number"}, f"{where}.memory")
    for key in ("promised_bytes", "used_bytes"):
        _fields(memory.get(key), _PEAK_MEAN, f"{where}.memory.{key}")


def _check_replay_thin(thin: Any, where: str) -> None:
    """The thin policy's figures (replay/result.py): counts, shares (numbers or null), a basis and a time."""
    keys = ("promised_milli", "guaranteed_milli", "over_request_milli", "pods_with_limit")
    _require_keys(thin, (*keys, "promised_share", "guaranteed_share", "basis", "time"), where)
    for key in keys:
        if not _count(thin[key]):
            raise ReportError(f"{where}.{key} {thin[key]!r} is not a count")
    for key in ("promised_share", "guaranteed_share", "time"):
        if thin[key] is not None and not _number(thin[key]):
            raise ReportError(f"{where}.{key} {thin[key]!r} is not a number")


def _check_series(line: Any, where: str) -> None:
    """A timeline: ``time``, ``occupied_milli`` and ``requested_milli`` of one length, numbers; its peak."""
    _require_keys(
        line, ("start", "end", "time", "occupied_milli", "requested_milli", "peak", "unstarted_gpu_pods"), where
    )
    series = [line[key] for key in ("time", "occupied_milli", "requested_milli")]
    if not all(isinstance(s, list) and all(_number(v) for v in s) for s in series):
        raise ReportError(f"{where}: time, occupied_milli and requested_milli must be lists of numbers")
    if len({len(s) for s in series}) != 1:
        raise ReportError(f"{where}: time, occupied_milli and requested_milli must be of one length")
    if series[0] and not (_number(line["start"]) and _number(line["end"])):
        raise ReportError(f"{where}: start and end must be numbers")
    _require_keys(
        line["peak"].get("occupied") if isinstance(line["peak"], dict) else None, ("milli",), f"{where}.peak.occupied"
    )


_JOB_KEYS = (
    "name",
    "template",
    "worker_count",
    "placement",
    "fits",
    "domain",
    "domains",
    "rails",
    "worst_level",
    "worst_level_exact",
    "capacity",
    "workers",
    "reason",
)


def _text(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _level_or_none(value: Any, where: str) -> None:
    if value is not None and value not in LEVEL_RANK:
        raise ReportError(f"{where} {value!r} is not one of {list(LEVELS)}")


def _rail_list(value: Any, where: str) -> None:
    if value is not None and not (isinstance(value, list) and all(_count(r) for r in value)):
        raise ReportError(f"{where} {value!r} must be a list of rail numbers or null")


def validate_jobs(jobs: Any, source: str = "jobs.json") -> dict[str, Any]:
    """Check the fields of the job placements (``aligned.dra.jobs``) that the report reads.

    Counts are used as sizes in the picture: only whole numbers are accepted.
    ``domains_of_nodes`` is optional (written by the module, not the planner),
    and so is ``level_sources`` (jobs.json written before levels named their
    source); when given it names the ``levels`` in their order.
    """
    if not isinstance(jobs, dict) or jobs.get("schema_version") != 1:
        raise ReportError(f"{source}: expected a JSON object with schema_version 1")
    if not isinstance(jobs.get("jobs"), list):
        raise ReportError(f"{source}: 'jobs' must be a list")
    for key in ("levels", "warnings"):
        if not (isinstance(jobs.get(key, []), list) and all(isinstance(v, str) for v in jobs.get(key, []))):
            raise ReportError(f"{source}: '{key}' must be a list of texts")
    _check_level_sources(jobs.get("level_sources"), jobs.get("levels", []), f"{source}: level_sources")
    for index, job in enumerate(jobs["jobs"]):
        name = job.get("name") if isinstance(job, dict) else None
        where = f"{source}: jobs[{index}]" + (f" ({name})" if isinstance(name, str) else "")
        _require_keys(job, _JOB_KEYS, where)
        _check_job(job, where)
    _check_domains_of_nodes(jobs.get("domains_of_nodes"), f"{source}: domains_of_nodes")
    return jobs


def _check_job(job: dict[str, Any], where: str) -> None:
    for key in ("name", "template"):
        if not _text(job[key]):
            raise ReportError(f"{where}.{key} {job[key]!r} is not a text")
    if not _count(job["worker_count"]) or job["worker_count"] == 0:
        raise ReportError(f"{where}.worker_count {job['worker_count']!r} is not a number of workers")
    for key in ("fits", "fits_exact", "worst_level_exact", "capacity_exact", "rails_pinned"):
        if not isinstance(job.get(key, True), bool):
            raise ReportError(f"{where}.{key} {job[key]!r} is not a boolean")
    if job.get("capacity_bound") not in (None, "lower", "upper", "unknown"):
        raise ReportError(f"{where}.capacity_bound {job['capacity_bound']!r} is not lower, upper, unknown or null")
    _require_keys(job["placement"], ("level", "mode"), f"{where}.placement")
    level, mode = job["placement"]["level"], job["placement"]["mode"]
    if not (level is None or _text(level)) or mode not in (None, "required", "preferred"):
        raise ReportError(f"{where}.placement: level must be a text or null, mode required, preferred or null")
    if job["domain"] is not None:
        _require_keys(job["domain"], ("level", "name"), f"{where}.domain")
    if not isinstance(job["domains"], list):
        raise ReportError(f"{where}.domains must be a list")
    for number, domain in enumerate(job["domains"]):
        _require_keys(domain, ("level", "name", "workers"), f"{where}.domains[{number}]")
        if not _count(domain["workers"]):
            raise ReportError(f"{where}.domains[{number}].workers {domain['workers']!r} is not a count")
    _rail_list(job["rails"], f"{where}.rails")
    _level_or_none(job["worst_level"], f"{where}.worst_level")
    if job["reason"] is not None and not isinstance(job["reason"], str):
        raise ReportError(f"{where}.reason {job['reason']!r} is not a text")
    if not isinstance(job["workers"], list):
        raise ReportError(f"{where}.workers must be a list")
    for number, worker in enumerate(job["workers"]):
        at = f"{where}.workers[{number}]"
        _require_keys(worker, ("index", "node", "worst_level", "worst_level_exact"), at)
        if not _count(worker["index"]) or not _text(worker["node"]):
            raise ReportError(f"{at}: index must be a count and node a text")
        _level_or_none(worker["worst_level"], f"{at}.worst_level")
        if not isinstance(worker["worst_level_exact"], bool):
            raise ReportError(f"{at}.worst_level_exact {worker['worst_level_exact']!r} is not a boolean")
    _check_capacity(job["capacity"], f"{where}.capacity")


def _check_capacity(capacity: Any, where: str) -> None:
    """The figures that decided a job: workers the site and each listed domain hold, nodes by workers held."""
    if capacity is None:
        return
    _require_keys(capacity, ("site", "nodes", "level"), where)
    if not _count(capacity["site"]):
        raise ReportError(f"{where}.site {capacity['site']!r} is not a count")
    _rail_list(capacity.get("rails"), f"{where}.rails")
    if capacity["level"] is not None and not _text(capacity["level"]):
        raise ReportError(f"{where}.level {capacity['level']!r} is not a text")
    for key in ("nodes", "domains"):
        found = capacity.get(key, {})
        if not isinstance(found, dict) or not all(_count(v) for v in found.values()):
            raise ReportError(f"{where}.{key} must be an object of counts")
    if not all(isinstance(k, str) and k.isdigit() for k in capacity["nodes"]):
        raise ReportError(f"{where}.nodes: every key must be a number of workers")
    for key in ("domains_left_out", "hosts_without_domain"):
        if not _count(capacity.get(key, 0)):
            raise ReportError(f"{where}.{key} {capacity[key]!r} is not a count")


def _check_domains_of_nodes(found: Any, where: str) -> None:
    """``{"levels": [names], "nodes": {host: [domain per level or null]}}``, or absent."""
    if found is None:
        return
    _require_keys(found, ("levels", "nodes"), where)
    levels = found["levels"]
    if not isinstance(levels, list) or not all(_text(level) for level in levels) or len(set(levels)) != len(levels):
        raise ReportError(f"{where}.levels must be a list of distinct level names")
    if not isinstance(found["nodes"], dict):
        raise ReportError(f"{where}.nodes must be an object of host -> domains")
    for host, row in found["nodes"].items():
        if not isinstance(row, list) or len(row) != len(levels) or not all(d is None or _text(d) for d in row):
            raise ReportError(f"{where}.nodes.{host} must list a domain (a text or null) for each of {levels}")


# what each source of a level names beside it (placement/search.py level_sources)
_SOURCE_KEYS = {"inventory": (), "node_label": ("key",), "device_attribute": ("driver", "attribute")}


def _check_level_sources(found: Any, levels: Any, where: str) -> None:
    """``[{"name", "label", "source", "key" | "driver", "attribute"}]``, one per level in order, or absent."""
    if found is None:
        return
    if not isinstance(found, list):
        raise ReportError(f"{where} must be a list of the levels' sources")
    for number, entry in enumerate(found):
        at = f"{where}[{number}]"
        _require_keys(entry, ("name", "source"), at)
        if entry["source"] not in _SOURCE_KEYS:
            raise ReportError(f"{at}.source {entry['source']!r} is not one of {', '.join(_SOURCE_KEYS)}")
        for key in ("label", *_SOURCE_KEYS[entry["source"]]):
            if not _text(entry.get(key)):
                raise ReportError(f"{at}.{key} {entry.get(key)!r} is not a text")
    names = [entry["name"] for entry in found]
    if names != levels:
        raise ReportError(f"{where} names {names}, not the levels {levels}")
