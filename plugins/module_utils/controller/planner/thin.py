# SPDX-License-Identifier: Apache-2.0
"""The thin ratio of burstable fractional templates: GPU memory promised over GPU memory there is.

A burstable template (docs/claims.md, "Burstable fractional GPUs") asks for a
request (``capacity.requests.memory``: what the scheduler counts, and what the
plan's allocations already hold it to) and carries a limit in its GpuConfig
(``sharing.mps.limits.memory``). Per GPU, the thin ratio is::

    claims of the template the plan places on the GPU  x  min(limit, the GPU's memory)
    ---------------------------------------------------------------------------------
                                 the GPU's memory

the claims being those the planner fits by request on an empty node (the
template's own ``allocations``). A node's ratio sums the numerators and the
memory of the GPUs that hold a claim; the site's, those of every node. A ratio
above 1 is memory promised that is not there: a pod that bursts past its
request can have that memory taken back (the pod evicted). Where the node's
search gave up or stopped counting, more claims may fit: the ratio is a lower
bound (``bound: true``); a GPU that publishes no memory leaves its ratio, and
the node's and site's, unknown (``null``).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DIGITS = 4


def _quantity(value: Any) -> Fraction | None:
    try:
        return dra_cel.parse_quantity(str(value))
    except ValueError:
        return None


def burst_limits(template: dict[str, Any]) -> tuple[Fraction, Fraction] | None:
    """``(request, limit)`` of GPU memory of a burstable template (a limit in a GpuConfig); None for the others.

    Without a memory limit (a compute limit only), the limit is the request.
    """
    if template.get("kind", "ResourceClaimTemplate") != "ResourceClaimTemplate":
        return None
    devices = ((template.get("spec") or {}).get("spec") or {}).get("devices") or {}
    limit = None
    for config in devices.get("config") or []:
        parameters = ((config or {}).get("opaque") or {}).get("parameters") or {}
        if not isinstance(parameters, dict) or parameters.get("kind") != "GpuConfig":
            continue
        limits = ((parameters.get("sharing") or {}).get("mps") or {}).get("limits")
        if isinstance(limits, dict):
            limit = limits.get("memory", "")  # "": a compute limit only
    if limit is None:
        return None
    requests = devices.get("requests") or []
    capacity = ((requests[0].get("exactly") or {}).get("capacity") or {}).get("requests") or {} if requests else {}
    request = _quantity(capacity.get("memory"))
    if request is None:
        return None
    found = _quantity(limit) if limit != "" else request
    return (request, found if found is not None and found >= request else request)


def gpu_memory(nodes: dict[str, dict[str, Any]]) -> dict[str, dict[str, Fraction | None]]:
    """``{node: {device label: memory in bytes, or None}}`` (labels as the plan's allocations write them)."""
    out: dict[str, dict[str, Fraction | None]] = {}
    for node, data in nodes.items():
        found: dict[str, Fraction | None] = {}
        for device in data.get("devices") or []:
            driver = device.get("driver") or dra.DRIVER_NAME
            label = device["name"] if driver == dra.DRIVER_NAME else f"{driver}/{device['name']}"
            memory = None
            for name, value in (device.get("capacity") or {}).items():
                domain, ident = dra.split_qualified_name(name, driver)
                if ident == "memory" and domain == driver:
                    memory = _quantity((value or {}).get("value"))
            found[label] = memory
        out[node] = found
    return out


def _ratio(promised: Fraction, memory: Fraction) -> float:
    return round(float(promised / memory), DIGITS)


def _node(result: dict[str, Any], limit: Fraction, memory: dict[str, Fraction | None]) -> dict[str, Any]:
    claims: dict[str, int] = {}
    for allocation in result.get("allocations") or []:
        for labels in (allocation.get("devices") or {}).values():
            for label in labels:
                claims[label] = claims.get(label, 0) + 1
    gpus = {}
    promised, total, known = Fraction(0), Fraction(0), True
    for label, count in sorted(claims.items()):
        have = memory.get(label)
        if not have:
            gpus[label] = {"claims": count, "memory": None, "promised": None, "ratio": None}
            known = False
            continue
        given = count * min(limit, have)
        gpus[label] = {"claims": count, "memory": int(have), "promised": int(given), "ratio": _ratio(given, have)}
        promised += given
        total += have
    bound = "search_limit" in result or "capped" in result
    return {
        "claims": sum(claims.values()),
        "memory": int(total) if known and total else None,
        "promised": int(promised) if known and total else None,
        "ratio": _ratio(promised, total) if known and total else None,
        "bound": bound,
        "gpus": gpus,
    }


def thin(
    plan_result: dict[str, Any], templates: list[dict[str, Any]], nodes: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """One entry per burstable template of the plan (none without them): the site's, each node's, each GPU's ratio."""
    entries = {entry["name"]: entry for entry in plan_result["templates"]}
    memory = None
    out = []
    for template in templates:
        name = (template.get("metadata") or {}).get("name")
        found = burst_limits(template)
        if found is None or name not in entries:
            continue
        memory = gpu_memory(nodes) if memory is None else memory
        request, limit = found
        per_node = {
            node: _node(result, limit, memory.get(node, {})) for node, result in sorted(entries[name]["nodes"].items())
        }
        parts = [entry for entry in per_node.values() if entry["claims"]]
        known = all(entry["ratio"] is not None for entry in parts)
        total = sum(entry["memory"] for entry in parts) if known else 0
        promised = sum(entry["promised"] for entry in parts) if known else 0
        out.append(
            {
                "template": name,
                "request_memory": int(request),
                "limit_memory": int(limit),
                "claims": sum(entry["claims"] for entry in parts),
                "memory": total if known and total else None,
                "promised": promised if known and total else None,
                "ratio": _ratio(Fraction(promised), Fraction(total)) if known and total else None,
                "bound": any(entry["bound"] for entry in per_node.values()),
                "nodes": per_node,
            }
        )
    return out
