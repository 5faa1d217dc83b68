# SPDX-License-Identifier: Apache-2.0
"""The plan's ``mig`` section: per node, MIG GPU and template, the claims that fit and the layout that gives it.

The main plan counts a template's claims per node; with MIG a site also needs
to know what one GPU buys. For every GPU that ``aligned_dra_mig`` takes
(:func:`mig_model.node_gpus`, listed in the planner node's ``mig``) and every
template that can land on one of its MIG devices (some request's candidates
include one), the allocator (:mod:`allocator`: the scheduler's first fit in
published order, shared counters spent as devices are taken) places:

- ``alone``: claims of that template only, one after another until the next
  no longer fits: what the GPU holds if it serves that template only;
- ``mix``: the site's catalogue mix, the templates that land on the GPU taken
  in catalogue order, round-robin (one claim of each in turn, a template
  dropped once its next claim no longer fits) until none fits;

each with the layout that gives it: the profile and placement start of every
MIG device the claims hold, in allocation order (``whole_gpu``: claims that
took the GPU whole instead). A GPU is planned on its own: its devices and the
node's devices that are no GPU (NICs, so that a MIG + NIC template counts
too), never another GPU's. Dynamic GPUs plan on every placement the driver
publishes and their counter set, and on the GPU whole where the driver
publishes it (Hopper and newer; an Ampere GPU's MIG mode changes only with a
reset, so ``whole_gpu`` stays 0 there: ``dra/mig.publishes_whole``); static
ones on the instances their layout declares (packed as the node packs it) or
the probe read.

Profiles come from NVML where the probe read them (``source: nvml``), else from
the geometry NVIDIA documents for the GPU's PCI device ID (``documented``): a
profile's memory is then the figure in its name, which the GPU driver may set
a little lower, so the section says so (``notes``). GPUs that look the same
(same devices, counters and levels: :class:`plan.NodeShapes`) are planned once.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import json

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.allocator import (
    ClaimAllocator,
    NodeDevices,
    SearchLimitReached,
    hold_devices,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.allocator import Device

DOMAIN = dra.DRIVER_NAME
ACCELERATOR_KINDS = device_model.ACCELERATOR_KINDS  # gpu, accelerator, mig: what the levels read as accelerators
DOCUMENTED_NOTE = (
    "documented: profiles from the geometry NVIDIA documents for the GPU's PCI device ID (no NVML answer from "
    "the probe); a profile's memory is the figure in its name, and the GPU driver may set it a little lower"
)


def _gpu_devices(data: dict[str, Any], gpu: dict[str, Any]) -> list[dict[str, Any]]:
    """The planner node's devices that one GPU plans on: the GPU's own (the whole, its MIG devices) and every
    device that is no GPU, accelerator or MIG device of another GPU; in published order."""
    whole = gpu["device"]
    prefix = whole + "-mig-"
    kept = []
    for device in data.get("devices") or []:
        name = device["name"]
        if name == whole or name.startswith(prefix):
            kept.append(device)
            continue
        kind = ((device.get("attributes") or {}).get(f"{DOMAIN}/kind") or {}).get("string")
        if kind not in ACCELERATOR_KINDS:
            kept.append(device)
    return kept


def _placement(device: Device) -> dict[str, Any] | None:
    """``{"profile", "start"}`` of a MIG device; None for any other."""
    if device.attributes.get(f"{DOMAIN}/kind") != "mig":
        return None
    return {
        "profile": device.attributes.get(f"{DOMAIN}/profile"),
        "start": device.attributes.get(f"{DOMAIN}/placementStart"),
    }


class GpuPlanner:
    """One GPU's node (its devices and the node's others) and what each template gets there."""

    def __init__(self, node: str, data: dict[str, Any], gpu: dict[str, Any], domains: set[str]) -> None:
        devices = _gpu_devices(data, gpu)
        sets = {c.get("counterSet") for d in devices for c in d.get("consumesCounters") or []}
        counters = {name: values for name, values in (data.get("shared_counters") or {}).items() if name in sets}
        restricted = dict(data, devices=devices, shared_counters=counters)
        # the name is the GPU's too: NodeShapes keys its signatures by name
        self.node = NodeDevices(f"{node}/{gpu['device']}", restricted, domains)
        self.whole = {d.label for d in self.node.devices if d.key[2] == gpu["device"]}
        self.mig = {d.label: _placement(d) for d in self.node.devices if d.key[2].startswith(gpu["device"] + "-mig-")}

    def lands(self, requests: list) -> bool:
        """Whether some request of the template has one of the GPU's MIG devices among its candidates."""
        return any(
            d.label in self.mig for alternatives in requests for alt in alternatives for d in self.node.matching(alt)[0]
        )

    def layout(self, devices: list[Device], template: str | None = None) -> tuple[list[dict[str, Any]], int]:
        """The placements ``devices`` hold (with ``template`` where given), and 1 if they hold the GPU whole."""
        found = []
        for device in devices:
            placement = self.mig.get(device.label)
            if placement is not None:
                found.append(dict(placement, template=template) if template else dict(placement))
        return found, int(any(d.label in self.whole for d in devices))

    def alone(self, requests: list, constraints: list, step_limit: int) -> dict[str, Any]:
        """Claims of one template only, until the next no longer fits."""
        result = planner.plan_node(self.node, requests, constraints, step_limit, per_rail=False)
        entry: dict[str, Any] = {"claims": result["fits"], "layout": [], "whole_gpu": 0}
        by_label = {d.label: d for d in self.node.devices}
        for allocation in result["allocations"]:
            devices = [by_label[label] for labels in allocation["devices"].values() for label in labels]
            placements, whole = self.layout(devices)
            entry["layout"].extend(placements)
            entry["whole_gpu"] += whole
        if "search_limit" in result or "capped" in result:
            entry["bound"] = True  # a lower bound
        if not result["fits"]:
            entry["reason"] = result.get("reason") or "no claim fits"
        return entry

    def mix(self, compiled: list[tuple[str, list, list]], step_limit: int) -> dict[str, Any]:
        """The templates in turn, one claim each, a template dropped when its next claim does not fit."""
        used: set = set()
        consumed: dict = {}
        counters_used: dict = {}
        entry: dict[str, Any] = {
            "claims": {name: 0 for name, _r, _c in compiled},
            "total": 0,
            "layout": [],
            "whole_gpu": 0,
        }
        active = list(compiled)
        while active and entry["total"] < planner.MAX_CLAIMS_PER_NODE:
            for item in list(active):
                name, requests, constraints = item
                chosen = self._one(requests, constraints, used, consumed, counters_used, step_limit, entry)
                if chosen is None:
                    active.remove(item)
                    continue
                devices = []
                for alternative, taken in chosen:
                    hold_devices(alternative, taken, used, consumed, counters_used)
                    devices.extend(taken)
                placements, whole = self.layout(devices, name)
                entry["layout"].extend(placements)
                entry["whole_gpu"] += whole
                entry["claims"][name] += 1
                entry["total"] += 1
                if not devices or all(alternative.admin for alternative, _taken in chosen):
                    active.remove(item)  # it takes nothing away: one is counted
        if entry["total"] >= planner.MAX_CLAIMS_PER_NODE:
            entry["bound"] = True
        return entry

    def _one(self, requests, constraints, used, consumed, counters_used, step_limit, entry):
        """One claim placed beside what the mix holds; None when it does not fit (or a selector fails)."""
        candidates = []
        for alternatives in requests:
            row = []
            for alternative in alternatives:
                found, errors = self.node.matching(alternative)
                if errors:
                    return None  # the main plan reports the error
                row.append(found)
            candidates.append(row)
        search = ClaimAllocator(self.node, requests, constraints, used, consumed, counters_used, step_limit)
        try:
            return search.run(candidates)
        except SearchLimitReached:
            entry["bound"] = True
            return None


def gpu_entry(gpu: dict[str, Any]) -> dict[str, Any]:
    """What the section says of a GPU itself: where it is, its model, mode, profiles and their source."""
    state = gpu.get("state") or {}
    profiles = [
        {
            "name": profile["name"],
            "memory_bytes": int(profile.get("memory_bytes") or 0) or None,
            "compute_slices": profile.get("slices"),
            "memory_slices": max((p["size"] for p in profile.get("placements") or []), default=None),
        }
        for profile in dra_mig.ordered_profiles(state.get("profiles") or [])  # the driver's order
    ]
    entry = {
        "device": gpu["device"],
        "pci_address": gpu["pci_address"],
        "model": gpu.get("model"),
        "mode": gpu["mode"],
        "source": gpu["source"],
        "memory_slices": gpu.get("memory_slices"),
        "profiles": profiles,
    }
    if gpu["mode"] == "static":
        entry["instances"] = [dict(i) for i in gpu.get("instances") or []]
    if gpu["source"] == "documented":
        entry["note"] = DOCUMENTED_NOTE
    return entry


def section(
    nodes: dict[str, dict[str, Any]],
    classes: list[dict[str, Any]],
    templates: list[dict[str, Any]],
    step_limit: int = planner.DEFAULT_STEP_LIMIT,
) -> dict[str, Any] | None:
    """The plan's ``mig`` section (see docs/claims.md), or None where no planned node has a MIG GPU."""
    if not any(data.get("mig") for data in nodes.values()):
        return None
    compiler = planner.Compiler(classes)
    compiled = [
        ((item.get("metadata") or {}).get("name"), *compiler.template(item))
        for item in templates
        if item.get("kind", "ResourceClaimTemplate") == "ResourceClaimTemplate"  # a shared claim is allocated once
    ]
    domains = dra_cel.referenced_domains(compiler.selectors)
    shapes = planner.NodeShapes(compiler, [(name, (r, c)) for name, r, c in compiled])
    done: dict[tuple, dict[str, Any]] = {}
    same_nodes: dict[str, list[dict[str, Any]]] = {}  # nodes whose input is the same, but for their name
    result: dict[str, Any] = {"gpus": 0, "sources": {}, "notes": [], "mix": [], "templates": {}, "nodes": {}}
    landing: set[str] = set()
    for node, data in sorted(nodes.items()):
        gpus = data.get("mig") or []
        if not gpus:
            continue
        text = _node_text(data)
        entries = same_nodes.get(text)
        if entries is None:
            entries = same_nodes[text] = []
            for gpu in gpus:
                found = GpuPlanner(node, data, gpu, domains)
                key = shapes.signature(found.node) if shapes.enabled else None
                planned = done.get(key) if key is not None else None
                if planned is None:
                    planned = _plan_gpu(found, compiled, step_limit)
                    if key is not None:
                        done[key] = planned
                entries.append(dict(gpu_entry(gpu), **planned))
                over = beyond_instance_count(gpu, planned)
                if over:
                    entries[-1]["warnings"] = over
        for gpu, entry in zip(gpus, entries):
            landing.update(entry["templates"])
            result["gpus"] += 1
            result["sources"][gpu["source"]] = result["sources"].get(gpu["source"], 0) + 1
        result["nodes"][node] = {"gpus": entries}
    result["mix"] = [name for name, _r, _c in compiled if name in landing]
    result["templates"] = _totals(result["mix"], result["nodes"])
    if result["sources"].get("documented"):
        result["notes"].append(DOCUMENTED_NOTE)
    return result


def beyond_instance_count(gpu: dict[str, Any], planned: dict[str, Any]) -> list[str]:
    """Where a layout holds more instances of a profile than the GPU can make (NVML's ``instance_count``, e.g.
    one ``+me`` profile per GPU) and the counters let the scheduler allocate them (Prepare would then fail).

    The engine counters are exact (``dra/mig.engine_capacities``): where the profiles carry their OFA figure
    (NVML's, or the documented geometry's) the one OFA engine refuses a second ``+me`` partition and this never
    fires. It does where that figure is unknown (profiles from NVML without engine figures, say), since the
    memory slices alone allow a ``+me`` on every 1g placement. Said, not hidden: the counts are the scheduler's."""
    limits = {p["name"]: p.get("instance_count") for p in (gpu.get("state") or {}).get("profiles") or []}
    found = []
    layouts = [(name, entry["layout"]) for name, entry in planned["templates"].items()]
    layouts.append(("the catalogue mix", planned["mix"]["layout"]))
    for name, layout in layouts:
        counts: dict[str, int] = {}
        for placement in layout:
            counts[placement["profile"]] = counts.get(placement["profile"], 0) + 1
        for profile, count in sorted(counts.items()):
            limit = limits.get(profile)
            if isinstance(limit, int) and count > limit:
                found.append(
                    f"{name}: {count} x {profile} planned, the GPU makes at most {limit} (instance_count); "
                    "the published counters allow more, so the scheduler would allocate them and Prepare fail"
                )
    return found


def _node_text(data: dict[str, Any]) -> str:
    """A planner node's input as text, without its name (the devices' pool): nodes of one model built from one
    probe repeat it, and their GPUs are planned once (cheaper than a signature per GPU)."""
    devices = [{k: v for k, v in device.items() if k != "pool"} for device in data.get("devices") or []]
    return json.dumps([devices, {k: v for k, v in data.items() if k != "devices"}], sort_keys=True, default=str)


def _plan_gpu(found: GpuPlanner, compiled: list, step_limit: int) -> dict[str, Any]:
    """``{"templates": {name: alone}, "mix": ...}`` of one GPU, for the templates that land on it."""
    lands = [(name, r, c) for name, r, c in compiled if found.lands(r)]
    return {
        "templates": {name: found.alone(r, c, step_limit) for name, r, c in lands},
        "mix": found.mix(lands, step_limit),
    }


def _totals(names: list[str], nodes: dict[str, Any]) -> dict[str, Any]:
    """Per template over the site's MIG GPUs: ``gpus`` it lands on, ``alone`` (each GPU serving it only) and
    ``mix`` (its claims in each GPU's catalogue mix) summed; ``bound`` where a count is a lower bound."""
    totals = {name: {"gpus": 0, "alone": 0, "mix": 0, "bound": False} for name in names}
    for entry in nodes.values():
        for gpu in entry["gpus"]:
            for name, alone in gpu["templates"].items():
                total = totals[name]
                total["gpus"] += 1
                total["alone"] += alone["claims"]
                total["mix"] += gpu["mix"]["claims"].get(name, 0)
                total["bound"] = total["bound"] or bool(alone.get("bound") or gpu["mix"].get("bound"))
    return totals
