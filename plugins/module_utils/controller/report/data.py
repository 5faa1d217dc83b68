# SPDX-License-Identifier: Apache-2.0
"""The rows and figures the report's pages show, as data for the templates.

The alignment score, the matrix and layout sections, the node inventory, the
plan, teams and utilization sections, the failed nodes and the index of sites.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.fabric.rails_summary import rails_in_short
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.gpudirect import path_cell
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.layouts import (
    RAIL_UNKNOWN,
    RAIL_VARIES,
    level_matrix,
    rail_labels,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.svg import node_picture, usage_chart
from ansible_collections.aligned.dra.plugins.module_utils.dra.device_model import family_counts_text, plural
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import LEVEL_RANK, LEVELS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

# Alignment score buckets, best first: the share of GPUs whose nearest
# physical NIC is at these levels.
SCORE_BUCKETS = (
    ("aligned", "PIX/PXB", ("PIX", "PXB")),
    ("host", "PHB/NODE", ("PHB", "NODE")),
    ("sys", "SYS only", ("SYS",)),
    ("none", "no RDMA NIC", (None,)),
)


# --------------------------------------------------------------------------
# Alignment score, layout sections and the node inventory
# --------------------------------------------------------------------------


def alignment_score(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Share of a site's accelerators per level bucket of their nearest RDMA NIC.

    Takes :func:`topology.site_summary` output and reads the planner's view,
    ``best_rdma_level_per_accelerator`` (:func:`device_model.node_devices`);
    returns ``{"gpus", "buckets": [{"key", "label", "count", "share"}]}``
    (shares are fractions, 0 when there is no accelerator).
    """
    counts = {key: 0 for key, _label, _levels in SCORE_BUCKETS}
    total = 0
    for node in summary["per_node"].values():
        for best in node["best_rdma_level_per_accelerator"].values():
            total += 1
            for key, _label, levels in SCORE_BUCKETS:
                if best.get("level") in levels:
                    counts[key] += 1
                    break
    return {
        "gpus": total,
        "buckets": [
            {"key": key, "label": label, "count": counts[key], "share": (counts[key] / total) if total else 0.0}
            for key, label, _levels in SCORE_BUCKETS
        ],
    }


def _numa_text(numa: tuple[int | None, bool]) -> str:
    node, inferred = numa
    if node is None:
        return "N/A"
    return f"{node}*" if inferred else str(node)


def matrix_view(matrix: Mapping[str, Any]) -> dict[str, Any]:
    rows = []
    for row in matrix["gpus"]:
        bdf = row["pci_address"]
        best = set(row["nearest"].get("nics") or [])
        rows.append(
            {
                "bdf": bdf,
                "label": row["label"],
                "cells": [
                    {
                        "nic": c["pci_address"],
                        "level": matrix["cells"][bdf][c["pci_address"]],
                        "best": c["pci_address"] in best,
                        **path_cell(matrix, bdf, c["pci_address"]),  # with the probe's p2p: the path
                    }
                    for c in matrix["nics"]
                ],
                "cpus": row["local_cpulist"] or "N/A",
                "numa": _numa_text(row["numa"]),
                "model": row["model"] or "",
            }
        )
    nics = []
    for c in matrix["nics"]:
        bits = [f"NUMA {_numa_text(c['numa'])}"]
        if c["vf"]:
            bits.append(f"VF of {c['physfn'] or '?'}")
        if c["numvfs"]:
            bits.append(plural(c["numvfs"], "VF") + " enabled")
        if c["collapsed_vfs"]:
            bits.append(plural(c["collapsed_vfs"], "VF") + " shown in this column (same level as the PF)")
        bits.append("RDMA NIC (the planner pairs it)" if c["rdma_nic"] else "not an RDMA NIC for the planner")
        rail = c.get("rail")
        if rail:
            bits.append(rail["text"] + (f": {rail['why']}" if rail["why"] else ""))
        nics.append(
            {
                "bdf": c["pci_address"],
                "label": c["label"],
                "rdma_nic": c["rdma_nic"],
                "names": ", ".join(c["rdma_devices"] + c["netdevs"]) or "no netdev/RDMA device",
                "bits": "; ".join(bits),
                "collapsed_vfs": c["collapsed_vfs"],
                "rail": rail["text"] if rail else "",
            }
        )
    return {
        "rows": rows,
        "nics": nics,
        "rails": any(nic["rail"] for nic in nics),
        "inferred": any(row["numa"][1] for row in matrix["gpus"]),
        "paths": "paths" in matrix,
    }


def _warning_items(hosts: list[str], warnings: Mapping[str, list[str]]) -> list[dict[str, str]]:
    seen: dict[str, list[str]] = {}
    for host in hosts:
        for warning in warnings.get(host, []):
            seen.setdefault(warning, []).append(host)
    items = []
    for text, who in seen.items():
        if len(who) == len(hosts):
            where = "all nodes of this layout" if len(hosts) > 1 else ""
        elif len(who) <= 5:
            where = ", ".join(who)
        else:
            where = f"{plural(len(who), 'node')} ({who[0]} \u2026 {who[-1]})"
        items.append({"text": text, "where": where})
    return items


def layout_view(
    index: int, group: Mapping[str, Any], summary: Mapping[str, Any], rdma_nics: Iterable[str]
) -> dict[str, Any]:
    model = group["model"]
    hosts = group["hosts"]
    rails = rail_labels(hosts, {h: summary["per_node"][h].get("rails") for h in hosts})
    matrix = level_matrix(model, rdma_nics, rails)
    first = summary["per_node"][hosts[0]]
    models = sorted({g["model"] for g in matrix["gpus"] if g["model"]})
    facts = [plural(len(hosts), "node"), plural(len(model["numa_nodes"]), "NUMA node")]
    families = family_counts_text(first["accelerators"])
    facts.append(
        (", ".join(families) if families else "no accelerator") + (f" ({', '.join(models)})" if models else "")
    )
    facts.append(plural(first["rdma_nics"], "RDMA NIC") + f" of {plural(first['nics'], 'physical NIC')}")
    if first["vfs"]:
        facts.append(plural(first["vfs"], "VF"))
    if rails:
        on = {label["rail"] for label in rails.values() if label["rail"] is not None}
        varies = sum(1 for label in rails.values() if label["text"] == RAIL_VARIES)
        unknown = sum(1 for label in rails.values() if label["text"] == RAIL_UNKNOWN)
        if on:
            facts.append(f"RDMA NICs on {plural(len(on), 'rail')}")
        elif not unknown:
            facts.append("no RDMA NIC on a rail on every node")
        if unknown:
            # not "no rail": the rule could not place them here (a subnet rule on a captured tree)
            facts.append(f"{plural(unknown, 'NIC')} on an unknown rail")
        if varies:
            facts.append(f"{plural(varies, 'NIC')} on a rail that differs between nodes")
    return {
        "index": index + 1,
        "fingerprint": group["fingerprint"],
        "hosts": hosts,
        "facts": " \u00b7 ".join(facts),
        "picture": node_picture(model, matrix),
        "matrix": matrix_view(matrix),
        "has_gpus": bool(matrix["gpus"]),
        "has_nics": bool(matrix["nics"]),
        "warnings": _warning_items(hosts, {h: summary["per_node"][h]["warnings"] for h in hosts}),
    }


def inventory_rows(summary: Mapping[str, Any], layout_of: Mapping[str, int]) -> list[dict[str, Any]]:
    rows = []
    for host, node in summary["per_node"].items():
        best = node["best_rdma_level_per_accelerator"].values()
        levels = [b.get("level") for b in best]
        parts = [f"{lv} {levels.count(lv)}" for lv in LEVELS if lv in levels]
        if None in levels:
            parts.append(f"no RDMA NIC {levels.count(None)}")
        rows.append(
            {
                "host": host,
                "layout": layout_of[host],
                "numa": node["numa_nodes"],
                "accelerators": ", ".join(family_counts_text(node["accelerators"])) or "0",
                "rdma_nics": node["rdma_nics"],
                "vfs": node["vfs"],
                "levels": ", ".join(parts) or "-",
                "rails": rails_in_short(node.get("rails")),
                "warnings": len(node["warnings"]),
            }
        )
    return rows


# --------------------------------------------------------------------------
# Plan section
# --------------------------------------------------------------------------


def _level_order(level: str | None) -> int:
    return LEVEL_RANK.get(level, len(LEVELS)) if level is not None else len(LEVELS)


# The level badge's name for a summary of unknown level (``None``, exact false: one of its pairs is
# unknown); the badge reads ``None`` as "none", a summary of nothing (no pair, no claim).
UNKNOWN_LEVEL = "unknown"


def badge_level(level: str | None, exact: bool) -> tuple[str | None, bool]:
    """``(level, exact)`` as the level badge shows them: ``unknown`` (never a level) for an unknown summary."""
    if level is None and not exact:
        return UNKNOWN_LEVEL, True
    return level, exact


# Why the bundled driver tainted a device: the value of its "DRIVER/unhealthy" taint (docs/driver.md).
DRIVER_TAINT_CAUSES = {
    "gone": "the PCI function is no longer on the node",
    "not-responding": "the function does not answer (config space reads all ones: fell off the bus)",
    "no-driver": "no kernel driver is bound",
    "link-down": "a network link of the NIC is down",
    "rdma-port-down": "an RDMA port is not ACTIVE",
    "aer-fatal": "the function reported fatal PCIe (AER) errors recently",
    "gpu-lost": "NVML calls the GPU lost (GPU_IS_LOST)",
    "xid": "NVML reported a critical XID error of the GPU recently",
}


def _taint_rows(plan: Mapping[str, Any]) -> list[dict[str, str]]:
    rows = []
    for entry in plan.get("tainted_devices") or []:
        key, value = str(entry.get("key", "")), str(entry.get("value", ""))
        why = DRIVER_TAINT_CAUSES.get(value, "") if key.endswith("/unhealthy") else ""
        rows.append(
            {
                "node": str(entry.get("node", "?")),
                "device": str(entry.get("device", "?")),
                "taint": f"{key}={value}" if value else key,
                "effect": str(entry.get("effect", "")),
                "since": str(entry.get("timeAdded", "")),
                "why": why,
                "keeps_out": bool(entry.get("keeps_out")),
            }
        )
    return rows


def plan_view(plan: Mapping[str, Any], max_errors: int = 20) -> dict[str, Any]:
    templates = []
    for template in plan["templates"]:
        groups: dict[tuple[int, str | None, bool], list[str]] = {}
        for node, entry in sorted(template["nodes"].items()):
            key = (entry["fits"], entry["worst_level"], entry.get("worst_level_exact", True))
            groups.setdefault(key, []).append(node)
        ordered = sorted(groups.items(), key=lambda kv: (-kv[0][0], _level_order(kv[0][1]), not kv[0][2]))
        worst, worst_exact = badge_level(template["worst_level"], template.get("worst_level_exact", True))
        templates.append(
            {
                "name": str(template["name"]),
                "required": template["required"],
                "ok": template["satisfiable"],
                "fits_total": template["fits_total"],
                "worst_level": worst,
                "worst_level_exact": worst_exact,
                "errors_total": len(template["errors"]),
                "groups": [
                    {
                        "fits": fits,
                        "level": badge_level(level, exact)[0],
                        "exact": badge_level(level, exact)[1],
                        "count": len(nodes),
                        "nodes": ", ".join(nodes[:8]),
                        "more": len(nodes) > 8,
                    }
                    for (fits, level, exact), nodes in ordered
                ],
                "errors": [
                    {
                        "node": str(e.get("node", "?")),
                        "device": str(e.get("device", "")),
                        "request": str(e.get("request", "")),
                        "message": str(e.get("message", "")),
                        "expression": str(e["expression"]) if e.get("expression") else "",
                    }
                    for e in template["errors"][:max_errors]
                ],
                "more_errors": max(len(template["errors"]) - max_errors, 0),
                "reason": str(template["reason"]) if not template["satisfiable"] and template.get("reason") else "",
                "per_rail": _per_rail(template.get("fits_per_rail")),
            }
        )
    meta = ", ".join(f"{k} {plan[k]}" for k in ("kubernetes_version", "driver") if plan.get(k) not in (None, ""))
    rails = sorted({int(rail) for t in templates if t["per_rail"] is not None for rail in t["per_rail"]})
    view = {"meta": meta, "templates": templates, "tainted": _taint_rows(plan), "rails": [str(r) for r in rails]}
    view["thin"] = thin_rows(plan.get("thin") or [])
    return view


def thin_text(ratio: float | None, bound: bool) -> str:
    """A thin ratio as people read it: ``1.50``, ``≥ 1.50`` (a lower bound), ``unknown``."""
    if ratio is None:
        return "unknown"
    return f"\u2265 {ratio:.2f}" if bound else f"{ratio:.2f}"


def thin_rows(entries: list[Mapping[str, Any]], max_nodes: int = 8) -> list[dict[str, Any]]:
    """Per burstable template (plan.json ``thin``): the site's thin ratio and its nodes grouped by ratio."""
    rows = []
    for entry in entries:
        groups: dict[str, list[str]] = {}
        for node, part in sorted((entry.get("nodes") or {}).items()):
            if part["claims"]:
                groups.setdefault(thin_text(part["ratio"], part["bound"]), []).append(node)
        rows.append(
            {
                "template": str(entry["template"]),
                "request": _gib(entry["request_memory"]),
                "limit": _gib(entry["limit_memory"]),
                "claims": entry["claims"],
                "ratio": thin_text(entry["ratio"], entry["bound"]),
                "over": entry["ratio"] is not None and entry["ratio"] > 1,
                "groups": [
                    {
                        "ratio": ratio,
                        "count": len(nodes),
                        "nodes": ", ".join(nodes[:max_nodes]),
                        "more": len(nodes) > max_nodes,
                    }
                    for ratio, nodes in sorted(groups.items(), key=lambda kv: -len(kv[1]))
                ],
            }
        )
    return rows


def _gib(amount: int | None) -> str:
    return "unknown" if amount is None else f"{amount / 2**30:g} GiB"


def _per_rail(fits: Mapping[str, int] | None) -> dict[str, int] | None:
    """A template's claims that fit per rail (plan.json ``fits_per_rail``), rails in numeric order; None: not given."""
    if fits is None:
        return None
    return {str(rail): fits[rail] for rail in sorted(fits, key=int)}


# --------------------------------------------------------------------------
# Teams section
# --------------------------------------------------------------------------

_QUOTA_STATUS = {
    "ok": "within capacity",
    "oversubscribed": "oversubscribed (allowed)",
    "over_limit": "OVER THE ALLOWED FACTOR",
    "unknown": "capacity unknown (no plan)",
}


def teams_view(teams: Mapping[str, Any]) -> dict[str, Any]:
    """Teams of the site and their guaranteed quotas against each class's capacity."""
    capacity = []
    for row in teams["capacity"]:
        status = str(row["status"])
        capacity.append(
            {
                "cls": str(row["class"]),
                "capacity": "?" if row["capacity"] is None else row["capacity"],
                "guaranteed": row["guaranteed"],
                "opportunistic": row["opportunistic"],
                "factor": f"{row.get('factor') or 1.0:g}",
                "status": _QUOTA_STATUS.get(status, status),
                "warn": status in ("oversubscribed", "over_limit"),
                "shares": ", ".join(
                    f"{name} {entry['quota']}{'' if entry['guaranteed'] else ' (opportunistic)'}"
                    for name, entry in sorted(row["teams"].items())
                ),
            }
        )
    rows = [
        {
            "name": str(t["name"]),
            "tier": str(t["tier"]),
            "priority_class": str(t["priority_class"]),
            "namespaces": ", ".join(t["namespaces"]),
            "templates": ", ".join(t["templates"]) or "-",
            "quotas": ", ".join(f"{k} {v}" for k, v in sorted(t["quotas"].items())) or "-",
            "admin": "yes" if t.get("admin_access") else "no",
        }
        for t in teams["teams"]
    ]
    engine_rows = kai_rows(teams["kai"]) if teams.get("kai") else kueue_rows(teams.get("kueue"))
    return {"capacity": capacity, "teams": rows, "shared": shared_rows(teams.get("shared")), **engine_rows}


def shared_rows(shared: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The GPUs given whole or as MIG partitions, counted once, and who holds which part (None without MIG)."""
    if not shared or shared.get("status") in (None, "none"):
        return None
    status = str(shared["status"])
    sets = [
        f"{s['gpus']} {s['model']} ({s['kind']}, {s['source']}): {s['why']}; per GPU Kueue charges at most "
        f"{s['per_gpu']['charge']}"
        for s in shared.get("sets") or []
    ]
    holders = [
        {
            "team": str(h["team"]),
            "cls": str(h["class"]),
            "kind": str(h["kind"]),
            "quota": str(h["quota"]),
            "gpus": "?" if h.get("gpus") is None else str(h["gpus"]),
        }
        for h in shared.get("holders") or []
    ]
    return {
        "sets": sets,
        "holders": holders,
        "needed": "?" if shared.get("needed") is None else str(shared["needed"]),
        "capacity": "?" if shared.get("capacity") is None else str(shared["capacity"]),
        "free": "?" if shared.get("free") is None else str(shared["free"]),
        "factor": f"{shared.get('factor') or 1.0:g}",
        "status": _QUOTA_STATUS.get(status, status),
        "warn": status in ("oversubscribed", "over_limit"),
    }


def _amounts(values: Mapping[str, Any] | None, missing: str = "-") -> str:
    """``{class: amount}`` as ``class amount, ...``; a null amount (no limit, unknown) as ``missing``."""
    if not values:
        return "-"
    return ", ".join(f"{cls} {missing if v is None else v}" for cls, v in sorted(values.items()))


def kueue_rows(queues: Mapping[str, Any] | None) -> dict[str, Any]:
    """The Kueue engine's rows of the teams section: queues per team and the what-if outcome."""
    if not queues:
        return {"engine": schedulers.RESOURCEQUOTA, "queues": [], "what_if": None, "notes": []}
    rows = [
        {
            "name": str(t["name"]),
            "queue": f"{t['cluster_queue']} / {t['local_queue']}",
            "cohort": str(t["cohort"]),
            "flavor": str(t["flavor"]),
            "nominal": _amounts(t.get("nominal")),
            "borrowable": _amounts(t.get("borrowable"), "no limit"),
            "lendable": _amounts(t.get("lendable")),
            "idle": _amounts(t["idle"], "unknown") if "idle" in t else "unknown (no utilization)",
        }
        for t in queues.get("teams") or []
    ]
    what_if = None
    outcome = queues.get("what_if")
    if outcome:
        what_if = {
            "teams": [
                {
                    "name": str(name),
                    "nominal": _amounts(t.get("by_nominal")),
                    "borrowing": _amounts(t.get("by_borrowing")),
                    "pending": _amounts(t.get("pending")),
                    "preempted": ", ".join(f"{p['name']} ({p['reason']})" for p in t.get("preempted") or []) or "-",
                }
                for name, t in sorted((outcome.get("teams") or {}).items())
            ],
            "over": [
                f"{cls}: {row['admitted']} admitted, {row['capacity']} on the site"
                for cls, row in sorted((outcome.get("over_capacity") or {}).items())
            ],
        }
    return {
        "engine": schedulers.KUEUE,
        "queues": rows,
        "what_if": what_if,
        "notes": [str(n) for n in queues.get("notes") or []],
    }


def _gpus(value: Any, unlimited: str) -> str:
    """A KAI amount of GPUs: -1 reads ``unlimited`` (no limit, unlimited quota)."""
    return unlimited if value == -1 else str(value)


def kai_rows(scheduled: Mapping[str, Any]) -> dict[str, Any]:
    """The KAI engine's rows of the teams section: the queue tree and the fair-share what-if."""
    rows = [
        {
            "queue": str(q["queue"]),
            "parent": str(q.get("parent") or "-"),
            "team": str(q.get("team") or "-"),
            "priority": q["priority"],
            "quota": _gpus(q["quota"], "unlimited"),
            "limit": _gpus(q["limit"], "no limit"),
            "weight": q["over_quota_weight"],
        }
        for q in scheduled.get("queues") or []
    ]
    fair = None
    outcome = scheduled.get("what_if")
    if outcome:
        shares = outcome.get("fair_share")
        fair = {
            "gpus": "unknown" if outcome.get("gpus") is None else outcome["gpus"],
            "why": outcome.get("why"),
            "allocated_from": str(outcome.get("allocated_from")),
            "unassigned": outcome.get("unassigned"),
            "reclaim": ", ".join(outcome.get("reclaim_order") or []) or "none (no team above its fair share)",
            "notes": [str(n) for n in outcome.get("notes") or []],
            "rows": [
                {
                    "queue": str(name),
                    "demand": row["demand"],
                    "quota": _gpus(row["quota"], "unlimited"),
                    "share": row["gpu"],
                    "beyond": row["beyond_quota"],
                    "allocated": row.get("allocated", "-"),
                    "saturation": (
                        "-"
                        if "allocated" not in row
                        else ("no fair share" if row["saturation"] is None else row["saturation"])
                    ),
                }
                for name, row in (shares or {}).items()
            ],
        }
    nodes = [
        {
            "node": str(n["node"]),
            "published": n["published"],
            "counted": n["counted_by_kai"],
            "warn": n["published"] != n["counted_by_kai"],
        }
        for n in scheduled.get("nodes") or []
    ]
    return {
        "engine": schedulers.KAI,
        "kai_nodes": nodes,
        "kai_queues": rows,
        "scheduler_name": str(scheduled.get("scheduler_name")),
        "queue_label": str(scheduled.get("queue_label")),
        "fair_share": fair,
        "notes": [str(n) for n in scheduled.get("notes") or []],
    }


# --------------------------------------------------------------------------
# Utilization section
# --------------------------------------------------------------------------


def _level_counts(exact: Mapping[str, int], bounds: Mapping[str, int]) -> list[tuple[str, bool, int]]:
    """``[(level, exact, count)]`` in level order, a bound after the exact level of its name."""
    found = [(lv, True, n) for lv, n in exact.items() if n and lv in LEVEL_RANK]
    found += [(lv, False, n) for lv, n in bounds.items() if n and lv in LEVEL_RANK]
    return sorted(found, key=lambda item: (LEVEL_RANK[item[0]], not item[1]))


def utilization_view(used: Mapping[str, Any]) -> dict[str, Any]:
    """Devices published, allocated and idle per class, node and team; shared devices; measured levels."""
    alignment = used["alignment"]
    levels = _level_counts(alignment["levels"], alignment.get("bounds") or {})
    teams = [
        {
            "name": str(name),
            "claims": t["claims"],
            "devices": ", ".join(f"{k} {v}" for k, v in sorted(t["devices"].items())),
            # claims of unknown level last, as "unknown" (never a level)
            "levels": _level_counts(t["levels"], t.get("bounds") or {})
            + ([(UNKNOWN_LEVEL, True, t["levels"]["unknown"])] if t["levels"].get("unknown") else []),
        }
        for name, t in used["teams"].items()
    ]
    shared = [
        {
            "node": str(s["node"]),
            "device": str(s["device"]),
            "claims": s["claims"],
            "consumers": s["consumers"],
            "capacity": [(k, f"{v['share'] * 100:.0f}") for k, v in s["capacity"].items() if v.get("share")],
        }
        for s in used["shared"]
    ]
    return {
        "totals": used["totals"],
        "claims": used["claims"],
        "chart": usage_chart(used["classes"]),
        "classes": used["classes"],
        "nodes": used["nodes"],
        "teams": teams,
        "alignment": alignment,
        "levels": levels,
        "unknown": alignment["levels"].get("unknown") or 0,
        "below": alignment.get("below_promise") or [],
        "maybe_below": alignment.get("maybe_below_promise") or [],
        "shared": shared,
    }


# --------------------------------------------------------------------------
# Index of sites
# --------------------------------------------------------------------------


def index_rows(sites: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows of the index of sites. Each entry: ``{"site", "summary", "score", "layouts", "plan"}``."""
    rows = []
    for entry in sites:
        summary, score = entry["summary"], entry["score"]
        aligned = score["buckets"][0]
        plan = entry.get("plan")
        rows.append(
            {
                "site": entry["site"],
                "nodes": summary["nodes"],
                "failed": len((entry.get("failed") or {}).get("rows") or []),
                "layouts": len(entry["layouts"]),
                "accelerators": ", ".join(family_counts_text(summary["accelerators"])) or "0",
                "rdma_nics": summary["rdma_nics"],
                "share": f"{aligned['share'] * 100:.0f} %" if score["gpus"] else "-",
                "plan": None
                if plan is None
                else {
                    "templates": len(plan["templates"]),
                    "bad": sum(1 for t in plan["templates"] if not t["satisfiable"]),
                },
                "warnings": len(summary["warnings"]),
            }
        )
    return rows


# --------------------------------------------------------------------------
# Failed and unreachable nodes (summary.json / plan.json: nodes_failed, node_counts)
# --------------------------------------------------------------------------


def failed_nodes(*sources: Mapping[str, Any] | None) -> dict[str, Any]:
    """``{"rows", "counts"}`` from the first source that has ``nodes_failed`` (absent in older files)."""
    failed: Mapping[str, Any] = {}
    counts: Mapping[str, Any] | None = None
    for source in sources:
        if isinstance(source, dict) and isinstance(source.get("nodes_failed"), dict):
            failed = source["nodes_failed"]
            counts = source.get("node_counts") if isinstance(source.get("node_counts"), dict) else None
            break
    rows = []
    for host, entry in sorted(failed.items()):
        entry = entry if isinstance(entry, dict) else {}
        stale = entry.get("stale_facts") if isinstance(entry.get("stale_facts"), dict) else None
        age = stale.get("age_s") if stale else None
        rows.append(
            {
                "host": str(host),
                "state": str(entry.get("state") or "failed"),
                "stage": str(entry.get("stage") or "?"),
                "task": str(entry.get("task") or ""),
                "error": str(entry.get("error") or ""),
                "stale": "none"
                if stale is None
                else f"{stale.get('file') or '?'}, {_age(age)} old, {'used' if stale.get('used') else 'not used'}",
            }
        )
    return {"rows": rows, "counts": dict(counts) if counts else None}


def _age(seconds: Any) -> str:
    if not isinstance(seconds, int) or isinstance(seconds, bool) or seconds < 0:
        return "?"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size:
            return plural(seconds // size, unit)
    return plural(seconds, "second")
