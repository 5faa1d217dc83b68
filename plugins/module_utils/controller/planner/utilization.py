# SPDX-License-Identifier: Apache-2.0
"""Utilization of a site's DRA devices, measured from ResourceSlices and ResourceClaims.

:func:`utilization` reads what the drivers publish (ResourceSlices of any
driver) and what the scheduler allocated (``status.allocation`` of
ResourceClaims) and reports, per site, node, DeviceClass and team:

- devices published, allocated and idle (a device counts as allocated once,
  however many claims share it; ``adminAccess`` results do not block a device
  and are counted apart);
- shared devices: devices in more than one claim (consumable capacity,
  ``shareID``) or in one claim reserved for several consumers, with the share
  of their capacity the claims consume;
- for every claim that holds GPUs and NICs, the GPU-NIC level it got (PIX ...
  SYS) per pair: each device is joined to its node's probe by any PCI address
  its driver publishes (:func:`device_model.join_device`), and the level is the
  probe's ``links`` entry (``level_source`` ``topology``); else it is decided or
  bounded by the PCIe roots and NUMA nodes (``attributes``: other roots on one
  NUMA node are NODE, other NUMA nodes SYS; ``inferred``: the same with the
  NUMA node of a device that publishes none taken from another device on its
  root, :func:`device_model.infer_root_numa`; ``bound``: one root is PHB at
  worst, one NUMA node NODE at worst, reported with ``exact: false``). A
  claim's worst and aligned levels are never better than its pairs: one
  unknown pair makes them unknown (``None``, ``exact: false``) unless another
  is exactly SYS.

MIG partitions (``mig``, where the site publishes some): :mod:`utilization_mig`.

Device kinds: :func:`device_model.published_kind`. Classes: the DeviceClasses given
(their selectors evaluated by the planner's CEL code), and the class each
allocated request names. Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import utilization_mig
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import LEVEL_RANK, LEVELS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SCHEMA_VERSION = 1
GPU_KINDS = ("gpu", "accelerator")
NIC_KINDS = ("nic", "vf")
UNASSIGNED = "(no team)"


class UtilizationError(ValueError):
    """Input that cannot be read (a claim or slice without the fields the API requires)."""


def _label(driver: str, name: str) -> str:
    return name if driver == dra.DRIVER_NAME else f"{driver}/{name}"


device_kind = device_model.published_kind


def _bdf_from_name(name: str) -> str | None:
    """The PCI address in a collection device name (``gpu-0000-1b-00-0`` -> ``0000:1b:00.0``)."""
    prefix, sep, rest = name.partition("-")
    parts = rest.split("-")
    if not sep or prefix not in dra.NAME_PREFIX.values() or len(parts) != 4:
        return None
    return f"{parts[0]}:{parts[1]}:{parts[2]}.{parts[3]}"


def _quantity(value: Any) -> Fraction | None:
    try:
        return dra_cel.parse_quantity(str(value))
    except ValueError:
        return None


class _Inventory:
    """Published devices by (driver, pool, name)."""

    def __init__(self, slices: list[dict[str, Any]], topologies: dict[str, dict[str, Any]]) -> None:
        self.devices: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.by_node = dra_slices.devices_from_slices(slices)
        for node, devices in self.by_node.items():
            probed = device_model.probed_node(topologies.get(node))
            joined = []  # this node's (label, join): the NUMA inference reads one node, not the site
            for device in devices:
                driver = device["driver"]
                attributes = device_model.flat_attributes(device, driver)
                if device_model.collection_device(driver, attributes) and dra.ATTR_PCI_BUS_ID not in attributes:
                    bdf = _bdf_from_name(device["name"])  # domains the standard attribute cannot hold
                    if bdf:
                        attributes[dra.ATTR_PCI_BUS_ID] = bdf
                label = _label(driver, device["name"])
                capacity = {}
                for name, value in (device.get("capacity") or {}).items():
                    domain, ident = dra.split_qualified_name(name, driver)
                    amount = _quantity((value or {}).get("value"))
                    if amount is not None:
                        capacity[ident if domain == driver else f"{domain}/{ident}"] = amount
                join = device_model.join_device(driver, attributes, probed, label)
                joined.append((label, join))
                self.devices[(driver, device["pool"], device["name"])] = {
                    "node": node,
                    "driver": driver,
                    "label": label,
                    "kind": device_kind(driver, attributes),
                    "join": join,
                    "capacity": capacity,
                    "multi": bool(device.get("allowMultipleAllocations")),
                    "classes": [],
                }
            # a device with a pcieRoot and no numaNode: the NUMA node of the other devices on its root
            device_model.infer_root_numa(joined)


def _request_classes(claim: dict[str, Any]) -> dict[str, str]:
    """``{request or request/subrequest: DeviceClass}`` of a claim's spec."""
    found = {}
    for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        name = request.get("name")
        if request.get("exactly"):
            found[name] = request["exactly"].get("deviceClassName")
        for sub in request.get("firstAvailable") or []:
            found[f"{name}/{sub.get('name')}"] = sub.get("deviceClassName")
    return found


def _pair_level(
    gpu: dict[str, Any], nic: dict[str, Any], links: dict[str, dict[str, str]], p2p: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``{"gpu", "nic", "level", "exact", "source"[, "reason"][, "path"]}`` of one GPU and one NIC.

    ``path`` (and ``physical_level`` for a pair the host bridge moves to PHB)
    where the node's probe has ``p2p``: :func:`device_model.joined_pair_level`.
    """
    if gpu["node"] != nic["node"]:
        found = {"level": "SYS", "exact": True, "source": "nodes"}
    else:
        found = device_model.joined_pair_level(gpu["join"], nic["join"], links, p2p)
    return {"gpu": gpu["label"], "nic": nic["label"], **found}


def _worst(levels) -> str | None:
    """The worst of ``(level, exact)`` pairs as a level name; ``None`` when one is unknown (and none is SYS)."""
    return device_model.worst_level(levels)[0]


def _count_row() -> dict[str, Any]:
    return {"published": 0, "allocated": 0, "idle": 0}


def _finish(row: dict[str, Any]) -> dict[str, Any]:
    row["idle"] = row["published"] - row["allocated"]
    row["utilization"] = round(row["allocated"] / row["published"], 3) if row["published"] else None
    return row


def utilization(
    slices: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    classes: list[dict[str, Any]] | None = None,
    teams: dict[str, str] | None = None,
    topologies: dict[str, dict[str, Any]] | None = None,
    site: str | None = None,
    plan: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The utilization report of one site (shape in docs/teams.md).

    ``teams`` maps namespaces to team names; ``topologies`` (probed, per node)
    give the GPU-NIC levels; ``plan`` (plan.json) gives the level the site
    promised, against which the measured levels are compared.
    """
    teams = teams or {}
    topologies = topologies or {}
    inventory = _Inventory(slices, topologies)
    devices = inventory.devices
    class_names = _assign_classes(inventory, classes) if classes else []
    allocated, claim_rows, tally = _read_claims(claims, devices, teams, topologies)
    per_node, per_class, shared = _device_rows(devices, allocated, class_names)
    per_team = _team_rows(claim_rows)
    mig = utilization_mig.section(
        inventory.by_node, slices, allocated, {e["claim"]: e["team"] for e in claim_rows}, topologies
    )
    result = {
        "schema_version": SCHEMA_VERSION,
        "site": site,
        "totals": _finish(
            {
                "published": len(devices),
                "allocated": sum(1 for k in devices if k in allocated),
                "idle": 0,
            }
        ),
        "claims": {
            "allocated": len(claim_rows),
            "pending": tally["pending"],
            "admin_access_results": tally["admin_access_results"],
            "results_outside_slices": tally["results_outside_slices"],
        },
        "nodes": dict(sorted(per_node.items())),
        "classes": dict(sorted(per_class.items())),
        "teams": dict(sorted(per_team.items())),
        "shared": shared,
        "alignment": _alignment(claim_rows, plan),
        "allocations": claim_rows,
    }
    if mig is not None:  # MIG partitions, where the site publishes some (planner/utilization_mig.py)
        result["mig"] = mig
    return result


def _assign_classes(inventory: _Inventory, classes: list[dict[str, Any]]) -> list[str]:
    """Adds to each published device the DeviceClasses that select it; the class names, in order."""
    devices = inventory.devices
    class_names: list[str] = []
    members = planner.class_members(
        {n: {"devices": d, "links": {}, "shared_counters": {}} for n, d in inventory.by_node.items()}, classes
    )
    labels = {(info["node"], info["label"]): key for key, info in devices.items()}
    for class_name, per_node in members.items():
        class_names.append(class_name)
        for node, found in per_node.items():
            for label in found:
                devices[labels[(node, label)]]["classes"].append(class_name)
    return class_names


def _read_claims(
    claims: list[dict[str, Any]],
    devices: dict[tuple[str, str, str], dict[str, Any]],
    teams: dict[str, str],
    topologies: dict[str, dict[str, Any]],
) -> tuple[dict[tuple[str, str, str], list[dict[str, Any]]], list[dict[str, Any]], dict[str, int]]:
    """``(allocated, claim rows, tally)`` of the claims' allocations.

    ``allocated``: device -> ``[{claim, consumers, consumed}]``; a claim row per
    claim that holds a published device; ``tally``: the claims not yet
    allocated, the adminAccess results, and the results on devices no slice
    publishes.
    """
    allocated: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    claim_rows = []
    tally = {"pending": 0, "admin_access_results": 0, "results_outside_slices": 0}
    for claim in claims:
        meta = claim.get("metadata") or {}
        name, namespace = meta.get("name"), meta.get("namespace") or "default"
        if not name:
            raise UtilizationError("a ResourceClaim has no metadata.name")
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        if not results:
            tally["pending"] += 1
            continue
        consumers = len(status.get("reservedFor") or [])
        held = _held_devices(f"{namespace}/{name}", claim, results, consumers, devices, allocated, tally)
        if held:
            team = teams.get(namespace, UNASSIGNED)
            claim_rows.append(_claim_row(f"{namespace}/{name}", namespace, team, consumers, held, devices, topologies))
    return allocated, claim_rows, tally


def _held_devices(claim_name, claim, results, consumers, devices, allocated, tally) -> list[tuple[tuple, str | None]]:
    """``[(device key, DeviceClass)]`` a claim's results hold, each recorded in ``allocated``."""
    request_class = _request_classes(claim)
    held = []
    for result in results:
        key = (result.get("driver") or "", result.get("pool") or "", result.get("device") or "")
        if key not in devices:
            tally["results_outside_slices"] += 1  # a device no slice publishes (a pool being replaced): not counted
            continue
        if result.get("adminAccess"):
            tally["admin_access_results"] += 1
            continue
        request = result.get("request") or ""
        class_name = request_class.get(request) or request_class.get(request.split("/")[0])
        consumed = {k: _quantity(v) for k, v in (result.get("consumedCapacity") or {}).items()}
        allocated.setdefault(key, []).append({"claim": claim_name, "consumers": consumers, "consumed": consumed})
        held.append((key, class_name))
    return held


def _claim_row(claim_name, namespace, team, consumers, held, devices, topologies) -> dict[str, Any]:
    """One claim's row: its node, devices by class, and the GPU-NIC levels of its pairs."""
    held_devices = [devices[key] for key, _class in held]
    nodes = sorted({d["node"] for d in held_devices})
    gpus = [d for d in held_devices if d["join"]["role"] == "accelerator"]
    nics = [d for d in held_devices if d["join"]["role"] == "nic"]
    entry: dict[str, Any] = {
        "claim": claim_name,
        "namespace": namespace,
        "team": team,
        "node": nodes[0] if len(nodes) == 1 else None,
        "devices": {},
        "consumers": consumers,
    }
    for key, class_name in held:
        entry["devices"].setdefault(class_name or devices[key]["driver"], []).append(devices[key]["label"])
    if gpus and nics:
        topology = topologies.get(gpus[0]["node"]) or {}
        links, p2p = topology.get("links") or {}, topology.get("p2p") or None
        pairs = []
        best_per_gpu = []
        for gpu in gpus:
            row = [_pair_level(gpu, nic, links, p2p) for nic in nics]
            pairs += row
            best_per_gpu.append(device_model.best_level((p["level"], p["exact"]) for p in row))
        entry["worst_level"], entry["worst_level_exact"] = device_model.worst_level(
            (p["level"], p["exact"]) for p in pairs
        )
        entry["aligned_level"], entry["aligned_level_exact"] = device_model.worst_level(best_per_gpu)
        entry["level_source"] = "+".join(sorted({p["source"] for p in pairs}))
        entry["pairs"] = pairs
    return entry


def _device_rows(
    devices: dict[tuple[str, str, str], dict[str, Any]],
    allocated: dict[tuple[str, str, str], list[dict[str, Any]]],
    class_names: list[str],
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """``(per node, per class, shared devices)``: published, allocated and idle devices counted per node
    (and per class on each node) and per class; the devices several claims or consumers share."""
    per_node: dict[str, dict[str, Any]] = {}
    per_class: dict[str, dict[str, Any]] = {c: _count_row() for c in class_names}
    shared = []
    for key, info in sorted(devices.items(), key=lambda kv: (kv[1]["node"], kv[0])):
        row = per_node.setdefault(info["node"], dict(_count_row(), classes={}))
        holders = allocated.get(key) or []
        row["published"] += 1
        row["allocated"] += 1 if holders else 0
        group = info["classes"] or [info["driver"] + ("/" + info["kind"] if info["kind"] else "")]
        for class_name in group:
            for target in (per_class.setdefault(class_name, _count_row()), row["classes"].setdefault(class_name,
                                                                                                     _count_row())):  # fmt: skip
                target["published"] += 1
                target["allocated"] += 1 if holders else 0
        if len(holders) > 1 or (holders and holders[0]["consumers"] > 1):
            shared.append(_shared_device(info, holders))
    for row in per_node.values():
        _finish(row)
        for sub in row["classes"].values():
            _finish(sub)
    for row in per_class.values():
        _finish(row)
    return per_node, per_class, shared


def _shared_device(info: dict[str, Any], holders: list[dict[str, Any]]) -> dict[str, Any]:
    """A device that several claims or consumers share, with the share of its capacity they consume."""
    item: dict[str, Any] = {
        "node": info["node"],
        "device": info["label"],
        "kind": info["kind"],
        "claims": len(holders),
        "consumers": sum(h["consumers"] for h in holders),
        "capacity": {},
    }
    for cap, total in sorted(info["capacity"].items()):
        used = sum((h["consumed"].get(cap) or 0) for h in holders)
        if used:
            item["capacity"][cap] = {"total": str(total), "consumed": str(used),
                                     "share": round(float(used / total), 3) if total else None}  # fmt: skip
    return item


def _team_rows(claim_rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per team: its claims, namespaces, devices per class, and the aligned levels its claims got."""
    per_team: dict[str, dict[str, Any]] = {}
    for entry in claim_rows:
        team = per_team.setdefault(
            entry["team"], {"claims": 0, "namespaces": set(), "devices": {}, "levels": {}, "bounds": {}}
        )
        team["claims"] += 1
        team["namespaces"].add(entry["namespace"])
        for class_name, labels in entry["devices"].items():
            team["devices"][class_name] = team["devices"].get(class_name, 0) + len(labels)
        if entry.get("aligned_level"):
            counts = team["levels"] if entry["aligned_level_exact"] else team.setdefault("bounds", {})
            counts[entry["aligned_level"]] = counts.get(entry["aligned_level"], 0) + 1
        elif "aligned_level" in entry:
            team["levels"]["unknown"] = team["levels"].get("unknown", 0) + 1
    for team in per_team.values():
        team["namespaces"] = sorted(team["namespaces"])
    return per_team


def _alignment(claim_rows: list[dict[str, Any]], plan: dict[str, Any] | None) -> dict[str, Any]:
    """The report's ``alignment``: the aligned levels claims got, and the claims below what the plan promised."""
    with_pairs = [e for e in claim_rows if "aligned_level" in e]
    exact = [e for e in with_pairs if e["aligned_level_exact"]]
    bounded = [e for e in with_pairs if not e["aligned_level_exact"]]
    histogram = {lv: sum(1 for e in exact if e["aligned_level"] == lv) for lv in LEVELS}
    histogram["unknown"] = sum(1 for e in with_pairs if e["aligned_level"] is None)
    bounds = {lv: n for lv in LEVELS if (n := sum(1 for e in bounded if e["aligned_level"] == lv))}
    promised = None
    if plan:
        # a template of unknown level promises nothing that can be checked: then no promise at all
        promised = _worst(
            (t.get("aligned_level"), t.get("aligned_level_exact", True))
            for t in plan.get("templates") or []
            if t.get("satisfiable")
        )
    # an unknown level is SYS at worst (and never exact)
    worse = [
        e for e in with_pairs if promised and LEVEL_RANK.get(e["aligned_level"], len(LEVELS) - 1) > LEVEL_RANK[promised]
    ]
    below = [e["claim"] for e in worse if e["aligned_level_exact"]]
    # a bound worse than the promise, or an unknown level, says the claim may have got less, not that it did
    maybe_below = [e["claim"] for e in worse if not e["aligned_level_exact"]]
    sources = sorted({e["level_source"] for e in with_pairs})
    return {
        "claims_with_gpus_and_nics": len(with_pairs),
        "levels": histogram,
        "bounds": bounds,
        "level_source": sources,
        "promised_level": promised,
        "below_promise": below,
        "maybe_below_promise": maybe_below,
    }
