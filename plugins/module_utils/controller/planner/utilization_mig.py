# SPDX-License-Identifier: Apache-2.0
"""MIG partitions in ``utilization.json``: devices published, allocated and idle per profile, GPU, node and
team, and GPU-equivalents beside the counts.

A MIG device is a device of the collection's driver with ``dra.aligned.dev/kind == "mig"`` and a
``dra.aligned.dev/profile`` (docs/mig.md); its GPU is the device whose name prefixes ``-mig-`` in its own.
Two modes publish differently, so "published" means different things, and both are said:

- **static**: each device is an instance that exists. Published, allocated and idle are plain counts.
- **dynamic**: the devices are every placement of every profile, overlapping (a 7-placement ``1g`` row and
  a ``7g`` over the same memory slices), and the GPU whole. Summing them would count one memory slice many
  times, so a profile's ``published`` is what is allocated plus what can **still be made** now
  (``idle``): the most instances of that profile, alone, that fit what the GPU's counter set has left
  once the allocated devices took theirs (each profile's placements tried greedily by end: exact for
  same-sized placements, and the non-slice counters are linear), and never more than NVML allows a GPU
  (the profile's ``instance_count`` from the probe or the documented geometry, where known: a ``+me``
  profile once, which counters of documented sizes cannot say). Idle counts of two profiles of one
  dynamic GPU are alternatives, not a sum (``idle_are_alternatives``). ``placements`` counts the devices
  as published, for reference.

**GPU-equivalents** are additive where device counts are not: a MIG device is its memory slices over its
GPU's (``placementSize`` over the number of ``memory-slice-N`` counters of the GPU's counter set; for a
static GPU, which has no counter set, the probe's or the documented geometry's slice count). Per GPU,
``allocated + idle + unpartitioned`` is 1: allocated is the allocated instances' slices (1 when a dynamic
GPU is allocated whole), idle the free slices (dynamic) or the unallocated instances' slices (static),
unpartitioned a static GPU's slices in no instance. A GPU whose slice count is unknown has no
GPU-equivalents (``gpus_of_unknown_size``) and its teams' figures are lower bounds.

With the usage window (:func:`with_usage`), each allocated instance gains its used versus allocated: the
usage summary's row of the same claim, node and device (the driver exports a MIG claim's series on the MIG
device's own handle), its peak and p95 memory over the instance's memory; an instance the window never
names is ``not measured``, never 0.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

KIND = "mig"
DOMAIN = "dra.aligned.dev"
ATTR_KIND = f"{DOMAIN}/kind"
ATTR_PROFILE = f"{DOMAIN}/profile"
ATTR_START = f"{DOMAIN}/placementStart"
ATTR_SIZE = f"{DOMAIN}/placementSize"
ATTR_DEVICE_ID = f"{DOMAIN}/deviceID"
ATTR_PCI = "resource.kubernetes.io/pciBusID"
SLICE_PREFIX = "memory-slice-"
MIG_INFIX = "-mig-"
DIGITS = 4


def _int(value: Any) -> int | None:
    try:
        return int(dra_cel.parse_quantity(str((value or {}).get("value") if isinstance(value, dict) else value)))
    except (ValueError, TypeError):
        return None


def counter_sets(slices: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, int]]:
    """``{(driver, pool, set name): {counter: value}}`` of the newest generation of each pool."""
    newest: dict[tuple[str, str], int] = {}
    for item in slices:
        spec = item.get("spec") or {}
        key = (spec.get("driver") or "", (spec.get("pool") or {}).get("name") or spec.get("nodeName") or "")
        newest[key] = max(newest.get(key, -1), int((spec.get("pool") or {}).get("generation") or 0))
    found: dict[tuple[str, str, str], dict[str, int]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        key = (spec.get("driver") or "", (spec.get("pool") or {}).get("name") or spec.get("nodeName") or "")
        if int((spec.get("pool") or {}).get("generation") or 0) != newest[key]:
            continue
        for counter_set in spec.get("sharedCounters") or []:
            counters = {n: _int(v) for n, v in (counter_set.get("counters") or {}).items()}
            found[(*key, counter_set.get("name") or "")] = {n: v for n, v in counters.items() if v is not None}
    return found


def _consumed(device: dict[str, Any]) -> tuple[str | None, dict[str, int]]:
    """``(counter set, {counter: value})`` a partitionable device consumes; ``(None, {})`` for none."""
    for entry in device.get("consumesCounters") or []:
        counters = {n: _int(v) for n, v in (entry.get("counters") or {}).items()}
        return entry.get("counterSet"), {n: v for n, v in counters.items() if v is not None}
    return None, {}


def _geometry(node: str, attributes: dict[str, Any], topologies: dict[str, Any]) -> dict[str, Any] | None:
    """The GPU's MIG state (:func:`mig_model.gpu_state`): the probe's GPU by its PCI address (NVML, else the
    documented geometry of its device ID), else the documented geometry of the device ID its MIG devices carry;
    None when neither is known."""
    address = device_model.normalize_pci_address(attributes.get(ATTR_PCI))
    for device in ((topologies.get(node) or {}).get("devices")) or []:
        if address and device_model.normalize_pci_address(device.get("pci_address")) == address:
            state = mig_model.gpu_state(device)
            if state:
                return state
    return mig_model.gpu_state({"device_id": attributes.get(ATTR_DEVICE_ID), "pci_address": address})


def mig_gpus(
    by_node: dict[str, list[dict[str, Any]]],
    slices: list[dict[str, Any]],
    topologies: dict[str, Any] | None = None,
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """``{(driver, pool, GPU name): GPU}`` of every GPU with published MIG devices: ``node``, ``gpu`` (its
    label), ``mode``, ``counter_set``, ``memory_slices``, ``slices_source`` and ``devices`` (in published order,
    each ``{key, label, profile, start, size, memory_bytes, consumes}``)."""
    topologies = topologies or {}
    sets = counter_sets(slices)
    gpus: dict[tuple[str, str, str], dict[str, Any]] = {}
    for node, devices in sorted(by_node.items()):
        for device in devices:
            driver, name = device["driver"], device["name"]
            attributes = device_model.flat_attributes(device, driver)
            if attributes.get(ATTR_KIND) != KIND or not attributes.get(ATTR_PROFILE) or MIG_INFIX not in name:
                continue
            parent = name.split(MIG_INFIX, 1)[0]
            key = (driver, device["pool"], parent)
            set_name, consumes = _consumed(device)
            gpu = gpus.setdefault(
                key,
                {
                    "node": node,
                    "gpu": parent if driver == dra.DRIVER_NAME else f"{driver}/{parent}",
                    "devices": [],
                    "counter_set": None,
                    "attributes": attributes,
                },
            )
            start = attributes.get(ATTR_START)
            size = attributes.get(ATTR_SIZE) or sum(1 for c in consumes if c.startswith(SLICE_PREFIX)) or None
            gpu["devices"].append(
                {
                    "key": (driver, device["pool"], name),
                    "label": name if driver == dra.DRIVER_NAME else f"{driver}/{name}",
                    "profile": str(attributes[ATTR_PROFILE]),
                    "start": int(start) if start is not None else None,
                    "size": int(size) if size else None,
                    "memory_bytes": _int((device.get("capacity") or {}).get("memory")),
                    "consumes": consumes,
                }
            )
            if set_name:
                gpu["counter_set"] = sets.get((driver, device["pool"], set_name))
    for gpu in gpus.values():
        state = _geometry(gpu["node"], gpu.pop("attributes"), topologies) or {}
        # NVML's limit per profile on an empty GPU (a +me profile: once); the counters alone may not say it
        gpu["instance_counts"] = {p["name"]: p.get("instance_count") for p in state.get("profiles") or []}
        gpu["mode"] = "dynamic" if any(d["consumes"] for d in gpu["devices"]) else "static"
        if gpu["mode"] == "dynamic" and gpu["counter_set"]:
            gpu["memory_slices"] = sum(1 for c in gpu["counter_set"] if c.startswith(SLICE_PREFIX)) or None
            gpu["slices_source"] = "counter set"
        else:
            gpu["memory_slices"] = int(state["memory_slices"]) if state.get("memory_slices") else None
            gpu["slices_source"] = state.get("source") or "unknown"
    return gpus


def _can_make(devices: list[dict[str, Any]], left: dict[str, int]) -> int:
    """How many of ``devices`` (one profile's placements) fit ``left`` at once, greedily by placement end."""
    left = dict(left)
    made = 0
    for device in sorted(devices, key=lambda d: ((d["start"] or 0) + (d["size"] or 0), d["start"] or 0)):
        # a counter the set does not name does not limit (a real set names every counter its devices consume)
        if all(left[name] >= value for name, value in device["consumes"].items() if name in left):
            for name, value in device["consumes"].items():
                if name in left:
                    left[name] -= value
            made += 1
    return made


def _left(gpu: dict[str, Any], held: list[dict[str, Any]], whole: bool) -> dict[str, int] | None:
    """What a dynamic GPU's counter set has left once its allocated devices took theirs (nothing once the GPU
    whole is allocated). A set the slices do not carry: its memory slices alone (the exclusion NVML makes;
    memory and multiprocessors would add only bounds, and the engines' exact limits are missing: the idle
    counts are capped by each profile's instance_count), where the slice count is known; else None."""
    counters = gpu["counter_set"]
    if counters is None and gpu["memory_slices"]:
        counters = {f"{SLICE_PREFIX}{i}": 1 for i in range(gpu["memory_slices"])}
    if counters is None:
        return None
    left = {name: 0 for name in counters} if whole else dict(counters)
    for device in held:
        for name, value in device["consumes"].items():
            if name in left:
                left[name] -= value
    return left


def _counters_source(gpu: dict[str, Any]) -> str | None:
    """What a dynamic GPU's idle counts rest on: its ``counter set``, else its ``memory slices`` alone; None
    for a static GPU (no counters) or where neither is known."""
    if gpu["mode"] == "static":
        return None
    if gpu["counter_set"]:
        return "counter set"
    return "memory slices" if gpu["memory_slices"] else None


def _share(slices: int, total: int | None) -> float | None:
    return round(slices / total, DIGITS) if total else None


def gpu_row(
    key: tuple[str, str, str], gpu: dict[str, Any], allocated: dict[tuple[str, str, str], list[dict[str, Any]]]
) -> dict[str, Any]:
    """One GPU's MIG figures (see the module's docstring)."""
    total = gpu["memory_slices"]
    held = [d for d in gpu["devices"] if d["key"] in allocated]
    whole = gpu["mode"] == "dynamic" and key in allocated
    profiles: dict[str, dict[str, Any]] = {}
    for device in gpu["devices"]:
        row = profiles.setdefault(
            device["profile"], {"published": 0, "allocated": 0, "idle": 0, "placements": 0, "size": device["size"]}
        )
        row["placements"] += 1
        row["allocated"] += device["key"] in allocated
    used = sum(d["size"] or 0 for d in held)
    if gpu["mode"] == "static":
        for row in profiles.values():
            row["published"] = row.pop("placements")
            row["idle"] = row["published"] - row["allocated"]
        partitioned = sum(d["size"] or 0 for d in gpu["devices"])
        free, unpartitioned = partitioned - used, (total - partitioned) if total else None
    else:
        left = _left(gpu, held, whole)
        for name, row in profiles.items():
            if left is None:  # neither the counter set nor the slice count: what can be made is unknown
                row["idle"] = row["published"] = None
                continue
            row["idle"] = _can_make(
                [d for d in gpu["devices"] if d["profile"] == name and d["key"] not in allocated], left
            )
            limit = gpu["instance_counts"].get(name)
            if limit is not None:
                row["idle"] = max(0, min(row["idle"], int(limit) - row["allocated"]))
            row["published"] = row["allocated"] + row["idle"]
        used = total if whole and total else used
        free = (total - used) if total else None
        unpartitioned = 0
    return {
        "node": gpu["node"],
        "gpu": gpu["gpu"],
        "mode": gpu["mode"],
        "memory_slices": total,
        "slices_source": gpu["slices_source"],
        "counters_source": _counters_source(gpu),
        "whole_allocated": whole,
        "memory_slices_allocated": used if total or not whole else None,
        "memory_slices_free": free,
        "gpu_equivalents": None
        if not total
        else {
            "allocated": _share(used, total),
            "idle": _share(free or 0, total),
            "unpartitioned": _share(unpartitioned or 0, total),
        },
        "profiles": dict(sorted(profiles.items())),
    }


def _empty() -> dict[str, Any]:
    return {
        "gpus": 0,
        "modes": {},
        "whole_allocated": 0,
        "gpus_of_unknown_size": 0,
        "gpu_equivalents": {"gpus": 0, "allocated": 0.0, "idle": 0.0, "unpartitioned": 0.0},
        "by_profile": {},
        "idle_are_alternatives": False,
    }


def _add(into: dict[str, Any], row: dict[str, Any]) -> None:
    into["gpus"] += 1
    into["modes"][row["mode"]] = into["modes"].get(row["mode"], 0) + 1
    into["whole_allocated"] += row["whole_allocated"]
    if row["gpu_equivalents"] is None:
        into["gpus_of_unknown_size"] += 1
    else:
        into["gpu_equivalents"]["gpus"] += 1
        for name in ("allocated", "idle", "unpartitioned"):
            into["gpu_equivalents"][name] += row["gpu_equivalents"][name]
    for name, counts in row["profiles"].items():
        target = into["by_profile"].setdefault(name, {"published": 0, "allocated": 0, "idle": 0})
        for field in ("published", "allocated", "idle"):
            target[field] += counts[field] or 0
        if counts["idle"] is None:  # a GPU whose free counters are unknown: these counts are lower bounds
            target["idle_is_lower_bound"] = True
    if row["mode"] == "dynamic" and len(row["profiles"]) > 1:
        into["idle_are_alternatives"] = True


def _done(row: dict[str, Any]) -> dict[str, Any]:
    row["gpu_equivalents"] = {k: round(v, DIGITS) for k, v in row["gpu_equivalents"].items()}
    row["by_profile"] = dict(sorted(row["by_profile"].items()))
    row["modes"] = dict(sorted(row["modes"].items()))
    return row


def _instances(
    key: tuple[str, str, str],
    gpu: dict[str, Any],
    allocated: dict[tuple[str, str, str], list[dict[str, Any]]],
    claim_teams: dict[str, str],
) -> list[dict[str, Any]]:
    """The GPU's allocated MIG devices, one row each (and the GPU whole of a dynamic GPU allocated whole)."""
    total = gpu["memory_slices"]
    rows = []
    held = [d for d in gpu["devices"] if d["key"] in allocated]
    if gpu["mode"] == "dynamic" and key in allocated:
        whole = {"key": key, "label": gpu["gpu"], "profile": None, "start": 0, "size": total, "memory_bytes": None}
        held.append(whole)
    for device in held:
        claims = sorted({h["claim"] for h in allocated[device["key"]]})
        rows.append(
            {
                "node": gpu["node"],
                "gpu": gpu["gpu"],
                "device": device["label"],
                "profile": device["profile"],
                "whole_gpu": device["profile"] is None,
                "start": device["start"],
                "size": device["size"],
                "memory_bytes": device["memory_bytes"],
                "gpu_equivalents": _share(device["size"], total) if device["size"] is not None else None,
                "claims": claims,
                "teams": sorted({claim_teams.get(c, "(no team)") for c in claims}),
            }
        )
    return rows


def _team_rows(instances: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    teams: dict[str, dict[str, Any]] = {}
    for row in instances:
        for team in row["teams"]:
            into = teams.setdefault(
                team,
                {
                    "instances": 0,
                    "whole_gpus": 0,
                    "by_profile": {},
                    "gpu_equivalents": 0.0,
                    "memory_bytes": 0,
                    "gpu_equivalents_is_lower_bound": False,
                },
            )
            if row["whole_gpu"]:
                into["whole_gpus"] += 1
            else:
                into["instances"] += 1
                into["by_profile"][row["profile"]] = into["by_profile"].get(row["profile"], 0) + 1
                into["memory_bytes"] += row["memory_bytes"] or 0
            if row["gpu_equivalents"] is None:
                into["gpu_equivalents_is_lower_bound"] = True
            else:
                into["gpu_equivalents"] += row["gpu_equivalents"]
    for into in teams.values():
        into["gpu_equivalents"] = round(into["gpu_equivalents"], DIGITS)
        into["by_profile"] = dict(sorted(into["by_profile"].items()))
    return dict(sorted(teams.items()))


def section(
    by_node: dict[str, list[dict[str, Any]]],
    slices: list[dict[str, Any]],
    allocated: dict[tuple[str, str, str], list[dict[str, Any]]],
    claim_teams: dict[str, str],
    topologies: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """``utilization.json``'s ``mig``: ``totals``, ``nodes``, ``teams``, ``gpus`` and the allocated ``instances``;
    None where no MIG device is published. ``claim_teams`` maps ``namespace/claim`` to its team."""
    gpus = mig_gpus(by_node, slices, topologies)
    if not gpus:
        return None
    totals, nodes, rows, instances = _empty(), {}, [], []
    for key, gpu in sorted(gpus.items(), key=lambda kv: (kv[1]["node"], kv[0])):
        row = gpu_row(key, gpu, allocated)
        rows.append(row)
        _add(totals, row)
        _add(nodes.setdefault(gpu["node"], _empty()), row)
        instances += _instances(key, gpu, allocated, claim_teams)
    return {
        "totals": _done(totals),
        "nodes": {node: _done(row) for node, row in sorted(nodes.items())},
        "teams": _team_rows(instances),
        "gpus": rows,
        "instances": instances,
    }


def device_fractions(mig: dict[str, Any] | None) -> dict[tuple[str, str], float | None]:
    """``{(node, MIG device name): GPU-equivalents}`` of every placement of every profile the site's GPUs
    publish (allocated now or not: a claim of the usage window may have held one since): the usage summary's
    GPU-hours weights."""
    found: dict[tuple[str, str], float | None] = {}
    for gpu in (mig or {}).get("gpus") or []:
        total = gpu["memory_slices"]
        for profile, row in gpu["profiles"].items():
            token = dra_mig.profile_token(profile)
            fraction = _share(row["size"], total) if row["size"] else None
            for start in range(total or 0):
                found[(gpu["node"], f"{gpu['gpu']}{MIG_INFIX}{token}-{start}")] = fraction
    return found


def _measured(instance: dict[str, Any], claim: dict[str, Any] | None) -> dict[str, Any]:
    """Used versus allocated of one instance from its claim's usage row (``usage.claims[]``)."""
    if claim is None:
        return {"status": "not measured", "reason": "no series of the window names this claim's device"}
    memory = claim.get("memory_used_bytes")
    allocated = instance["memory_bytes"] or claim.get("request_bytes")
    hours = claim.get("hours") or {}
    found: dict[str, Any] = {
        "status": claim.get("status"),
        "memory_allocated_bytes": allocated,
        "memory_used_bytes": None if not memory else {k: memory[k] for k in ("p50", "p95", "max", "points")},
        "used_over_allocated": None,
        "hours": hours,
        "idle_share": round(hours["idle"] / hours["allocated"], DIGITS) if hours.get("allocated") else None,
        # NVML's per-process SM figure, a share of time; GPM's share of the instance's SMs busy (Hopper and newer)
        "sm_ratio_p95": (claim.get("sm_ratio") or {}).get("p95"),
        "sms_busy_ratio_p95": (claim.get("sms_busy_ratio") or {}).get("p95"),
        # a claim with unknown steps may have peaked in them: its peak is then at least this
        "peak_lower_bound": bool(hours.get("unknown")),
    }
    if memory and allocated:
        found["used_over_allocated"] = {k: round(memory[k] / allocated, DIGITS) for k in ("p95", "max")}
    return found


def with_usage(mig: dict[str, Any] | None, usage: dict[str, Any] | None) -> None:
    """Adds to each allocated MIG instance of ``mig`` its ``usage`` (used versus allocated, from the usage
    summary's claim row of the same namespace, claim, node and device), and per team the instances measured.
    The driver exports a MIG claim's series on the MIG device's own handle (``device`` its name, docs/mig.md)."""
    if not mig or usage is None:
        return
    rows = {(f"{c['namespace']}/{c['claim']}", c.get("node") or "", c.get("device") or ""): c for c in usage["claims"]}
    counts: dict[str, dict[str, int]] = {}
    for instance in mig["instances"]:
        found = None
        for claim in instance["claims"]:
            found = found or rows.get((claim, instance["node"], instance["device"]))
        instance["usage"] = _measured(instance, found)
        for team in instance["teams"]:
            tally = counts.setdefault(team, {"instances_measured": 0, "instances_not_measured": 0})
            measured = instance["usage"].get("memory_used_bytes") is not None
            tally["instances_measured" if measured else "instances_not_measured"] += 1
    for team, tally in counts.items():
        mig["teams"][team].update(tally)
