# SPDX-License-Identifier: Apache-2.0
"""The nodes a trace is replayed on: an openb node list, or a site's ``plan.json``.

An openb node list (``sn,cpu_milli,memory_mib,gpu,model``) gives every
node's CPU, memory, GPUs and GPU model. A plan gives the site's nodes and,
per node, the devices of its GPU DeviceClass (``classes.<class>.nodes``); it
knows neither the nodes' CPU and memory nor their GPU models in a trace's
words, so those are not limited (said in the result, never invented). The
plan also says whether the site's minor renders the fractional GPU template
with consumable capacity (a share of one GPU per claim): when it does not,
``fractional`` falls back to whole GPUs, with the reason.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import json

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import MAX_NODE_GPUS, ReplayError
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import read_rows

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

OPENB_NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
PLAN_SCHEMA_VERSION = 1


class NodeSpec:
    """One node: CPU and memory (None: not limited), its GPUs and their model (None: unknown)."""

    __slots__ = ("name", "cpu_milli", "memory_mib", "gpus", "model")

    def __init__(self, name: str, cpu_milli: int | None, memory_mib: int | None, gpus: int, model: str | None) -> None:
        self.name = name
        self.cpu_milli = cpu_milli
        self.memory_mib = memory_mib
        self.gpus = gpus
        self.model = model

    def __repr__(self) -> str:
        return f"NodeSpec({self.name!r}, cpu={self.cpu_milli}, mem={self.memory_mib}, gpus={self.gpus}, {self.model!r})"


def read_openb_nodes(path: str, option: str = "nodes") -> tuple[list[NodeSpec], dict[str, Any]]:
    """``(nodes, info)`` of an openb node list; ``info`` is the result's ``nodes`` entry."""
    nodes: list[NodeSpec] = []
    seen: dict[str, int] = {}
    for row in read_rows(path, option, OPENB_NODE_COLUMNS, OPENB_NODE_COLUMNS):
        name = row.text("sn")
        if not name:
            raise row.error("sn", "is empty")
        if name in seen:
            raise row.error("sn", f"{name!r} is on line {seen[name]} too")
        seen[name] = row.line
        nodes.append(
            NodeSpec(
                name,
                row.integer("cpu_milli"),
                row.integer("memory_mib"),
                row.integer("gpu", 0, MAX_NODE_GPUS),
                row.text("model") or None,
            )
        )
    if not nodes:
        raise ReplayError(f"{option}: {path} lists no node")
    info = {
        "source": "openb",
        "path": path,
        "limits": {"cpu": True, "memory": True, "gpu_model": True},
        "gpu_class": None,
        "fractional_template": None,
        "notes": [],
    }
    return nodes, info


def _load_plan(path: str, option: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte, a file that is not UTF-8
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ReplayError(f"{option}: cannot read {path}: {reason}") from None
    try:
        plan = json.loads(text)
    except ValueError as exc:
        raise ReplayError(f"{option}: {path} is not JSON: {exc}") from None
    if not isinstance(plan, dict) or plan.get("schema_version") != PLAN_SCHEMA_VERSION:
        raise ReplayError(f"{option}: {path} is not a plan (a JSON object with schema_version {PLAN_SCHEMA_VERSION})")
    if not isinstance(plan.get("nodes"), list) or not all(isinstance(n, str) for n in plan["nodes"]):
        raise ReplayError(f"{option}: {path}: 'nodes' must be a list of node names")
    if not isinstance(plan.get("classes"), dict):
        raise ReplayError(
            f"{option}: {path} has no 'classes' (the devices of each DeviceClass): "
            "it was written by an older collection; run the claims stage again"
        )
    if not isinstance(plan.get("templates"), list):
        raise ReplayError(f"{option}: {path}: 'templates' must be a list")
    return plan


def _gpu_counts(plan: dict[str, Any], path: str, option: str, gpu_class: str) -> dict[str, int]:
    entry = plan["classes"].get(gpu_class)
    if entry is None:
        known = ", ".join(sorted(map(str, plan["classes"]))) or "none"
        raise ReplayError(
            f"gpu_class: the plan {path} has no DeviceClass {gpu_class!r} (its classes: {known}); "
            "name the class of the site's GPUs"
        )
    counts = entry.get("nodes") if isinstance(entry, dict) else None
    if not isinstance(counts, dict):
        raise ReplayError(f"{option}: {path}: classes.{gpu_class}.nodes must map nodes to device counts")
    for node, count in counts.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ReplayError(f"{option}: {path}: classes.{gpu_class}.nodes.{node} {count!r} is not a count")
    return counts


def fractional_support(plan: dict[str, Any], template: str) -> tuple[dict[str, Any] | None, str | None]:
    """``(template entry, reason)``: the fractional template the plan's minor renders, or why there is none.

    The template must be a ResourceClaimTemplate (consumable capacity: each
    claim takes a share of one GPU). Where the minor leaves consumable
    capacity off, the claims role renders the shared ResourceClaim
    ``<template>-shared`` instead: pods that use it share the same whole
    GPUs, and the scheduler places no share per pod.
    """
    minor = plan.get("kubernetes_version") or "(unknown minor)"
    kinds = {str(t.get("name")): t.get("kind") for t in plan["templates"] if isinstance(t, dict)}
    if kinds.get(template) == "ResourceClaimTemplate":
        return {"name": template, "kind": "ResourceClaimTemplate"}, None
    shared = template + "-shared"
    if kinds.get(shared) == "ResourceClaim":
        return {"name": shared, "kind": "ResourceClaim"}, (
            f"Kubernetes {minor} renders {template} as the shared ResourceClaim {shared} "
            "(no consumable capacity): pods that use it share whole GPUs, no share per pod is scheduled"
        )
    return None, f"the plan (Kubernetes {minor}) has no fractional GPU template {template!r}"


def plan_nodes(
    path: str, gpu_class: str, fractional_template: str, option: str = "plan"
) -> tuple[list[NodeSpec], dict[str, Any]]:
    """``(nodes, info)`` of a site's plan: its nodes with the devices of ``gpu_class``, no CPU or memory limit.

    ``info`` is the result's ``nodes`` entry; its ``fractional_reason`` says
    why the plan's minor renders no fractional GPU (None when it does).
    """
    plan = _load_plan(path, option)
    counts = _gpu_counts(plan, path, option, gpu_class)
    strays = sorted(set(counts) - set(plan["nodes"]))
    if strays:
        raise ReplayError(f"{option}: {path}: classes.{gpu_class}.nodes names nodes the plan does not: {strays}")
    nodes = [NodeSpec(name, None, None, counts.get(name, 0), None) for name in sorted(set(plan["nodes"]))]
    if not nodes:
        raise ReplayError(f"{option}: {path} plans no node")
    template, reason = fractional_support(plan, fractional_template)
    notes = [
        "CPU and memory are not limited: a plan knows the nodes' devices, not their CPU and memory",
        "GPU models are not matched: a plan does not name its GPUs in a trace's words (gpu_spec is not applied)",
    ]
    failed = plan.get("nodes_failed")
    if isinstance(failed, dict) and failed:
        notes.append(f"{len(failed)} node(s) of the site failed or were unreachable and are not in the plan")
    info = {
        "source": "plan",
        "path": path,
        "site": plan.get("site"),
        "kubernetes_version": plan.get("kubernetes_version"),
        "limits": {"cpu": False, "memory": False, "gpu_model": False},
        "gpu_class": gpu_class,
        "fractional_template": template,
        "fractional_reason": reason,
        "notes": notes,
    }
    return nodes, info
