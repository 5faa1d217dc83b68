# SPDX-License-Identifier: Apache-2.0
"""MIG for the quota engines, engine-neutral: which rendered classes select MIG devices, and what the site has.

Quotas on MIG devices need facts the team model (``teams``: a ResourceQuota's MIG classes and their capacity
in devices) and the schedulers' modules share (``kueue/mig.py`` charges GPU memory, ``kai/mig.py`` refuses
what KAI would miscount), so they live here, below all of them:

- :func:`mig_classes`: the site's DeviceClasses that select MIG devices, read from their selectors (the
  claims catalogue's ``mig.aligned.dev`` and one per profile, ``controller/claims/mig.py``; renamed classes
  are found the same way), each with its profile (None: every MIG device);
- :func:`site`: the site's MIG hosts by mode (``aligned_dra_mig``, as the filter ``aligned.dra.mig_settings``
  hands it on) and the MIG capacity the controller's model gives for them (``controller/mig/model.
  site_capacity``): the GPUs, the GPU memory their MIG devices can hold at once, per profile, and where
  the figures come from. A host without a probed topology makes the capacity unknown (None), never 0; a
  figure from the geometry NVIDIA documents (no NVML reading) or from a dynamic GPU's ``memory`` counter
  (the bound the driver publishes: the most its partitions can consume together) is marked ``bound``;
- :func:`gpu_sets`: the site's MIG GPUs in sets of one model and one way of being given (``shared``: a dynamic
  GPU the driver publishes whole and as partitions, Hopper and newer; ``partitions``: a static GPU, or a dynamic
  Ampere GPU, which is never published whole), with per GPU what Kueue can charge of it at once
  (:func:`most_charged`), for the one count of the shared hardware (``schedulers/shared.py``).

Nothing here for a site without MIG: :func:`site` is None, and the stage's output stays what it was.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import re
from functools import cache

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# a selector that keeps the collection's MIG devices (claims/mig.py: attribute kind == "mig")
_KIND_RE = re.compile(r'\.kind\s*==\s*"' + dra_mig.KIND + '"')
_PROFILE_RE = re.compile(r'\.profile\s*==\s*"([^"]+)"')


# how a set of MIG GPUs is given: whole or as partitions (dynamic, Hopper and newer), or as partitions only
SHARED = "shared"
PARTITIONS = "partitions"
PCI_ATTRIBUTE = "resource.kubernetes.io/pciBusID"

# the notes of the schedulers' MIG modules that the teams stage also gives as the task's warnings
WARNING_PREFIX = "MIG: "


class MigTeamsError(ValueError):
    """The site's MIG cannot be read for its quotas; the message names the host and the setting."""


def mig_classes(claim_objects: list[dict[str, Any]]) -> dict[str, str | None]:
    """``{DeviceClass: its profile, or None for every MIG device}`` of the rendered classes that select MIG
    devices, the class of every MIG device first."""
    found: dict[str, str | None] = {}
    for obj in claim_objects:
        if obj.get("kind") != "DeviceClass":
            continue
        expressions = [
            (s.get("cel") or {}).get("expression") or "" for s in (obj.get("spec") or {}).get("selectors") or []
        ]
        if not any(_KIND_RE.search(e) for e in expressions):
            continue
        profiles = [m.group(1) for e in expressions for m in _PROFILE_RE.finditer(e)]
        found[obj["metadata"]["name"]] = profiles[0] if profiles else None
    return dict(sorted(found.items(), key=lambda item: (item[1] is not None, item[0])))


def pool_class(classes: dict[str, str | None]) -> str | None:
    """The class of every MIG device (no profile): the one a team's GPU-memory quota is given on."""
    return next((cls for cls, profile in classes.items() if profile is None), None)


def site(mig: dict[str, Any] | None, topologies: dict[str, Any] | None) -> dict[str, Any] | None:
    """The site's MIG for its quotas; None where no host runs MIG.

    ``{"hosts": {"static": [...], "dynamic": [...]}, "unprobed": [hosts without a topology], "settings":
    {host: aligned_dra_mig}, "capacity":
    {"gpus", "memory_bytes", "memory" (a quantity), "by_profile", "sources", "bound"}}``; the capacity's
    figures are None where some host is unprobed (``reason`` says which).
    """
    hosts = {host: s for host, s in sorted((mig or {}).items()) if mig_model.mode_of(s) != "off"}
    if not hosts:
        return None
    by_mode: dict[str, list[str]] = {mode: [] for mode in mig_model.MODES}
    for host, settings in hosts.items():
        by_mode[mig_model.mode_of(settings)].append(host)
    unprobed = [host for host in hosts if not (topologies or {}).get(host)]
    out: dict[str, Any] = {"hosts": by_mode, "unprobed": unprobed, "settings": hosts}
    if unprobed:
        out["capacity"] = {
            "gpus": None,
            "memory_bytes": None,
            "memory": None,
            "by_profile": None,
            "sources": None,
            "bound": None,
            "reason": f"no probed topology of {', '.join(unprobed)}: their GPUs' MIG memory is unknown",
        }
        return out
    try:
        capacity = mig_model.site_capacity(topologies or {}, hosts)
    except mig_model.MigModelError as exc:
        raise MigTeamsError(str(exc)) from None
    except (TypeError, AttributeError, KeyError, ValueError) as exc:
        # a shape the validation stage refuses (aligned_dra_mig's argument spec) met here first
        raise MigTeamsError(f"{mig_model.VARIABLE} cannot be read ({type(exc).__name__}: {exc})") from None
    capacity["memory"] = dra_mig.quantity(capacity["memory_bytes"])
    capacity["devices"] = _devices_at_once(topologies or {}, hosts)
    out["capacity"] = capacity
    out["sets"] = gpu_sets(topologies or {}, hosts)
    return out


def class_driver(device_class: dict[str, Any]) -> str | None:
    """The driver a DeviceClass selects (``device.driver == "..."`` in its selectors), None where none is named."""
    for selector in (device_class.get("spec") or {}).get("selectors") or []:
        expression = (selector.get("cel") or {}).get("expression") or ""
        _before, sep, rest = expression.partition('device.driver == "')
        if sep:
            return rest.partition('"')[0]
    return None


def most_charged(state: dict[str, Any]) -> int:
    """The most GPU memory Kueue can charge on one dynamic GPU at once: the largest sum of the profiles' memory
    (NVML's sizes where the probe read them) over the partitions that can exist together (memory slices
    pairwise disjoint, each profile at most NVML's ``instance_count``, compute slices at most the GPU's).

    Kueue charges a claim the largest ``memory`` its matching devices consume (``pkg/dra/counters.go``,
    ``computeCounterCharges``, v0.19.2): a partition costs its profile's memory, so this is the most that
    quotas in memory can have in use on the GPU; at most its ``memory`` counter, less where the densest profile
    cannot fill every slice (seven 1g.10gb of an H100 hold seven slices of eight)."""
    profiles = [p for p in state.get("profiles") or [] if p.get("placements")]
    limit = mig_model.compute_slices(profiles) or 1 << 30
    slices = dra_mig.memory_slices(state)
    starts: dict[int, list[tuple[int, int, int, int]]] = {}
    for index, profile in enumerate(profiles):
        for placement in profile["placements"]:
            entry = (index, int(placement["size"]), int(profile.get("slices") or 0), int(profile["memory_bytes"]))
            starts.setdefault(int(placement["start"]), []).append(entry)
    caps = tuple(int(p.get("instance_count") or 8) for p in profiles)

    @cache
    def best(position: int, counts: tuple[int, ...], compute: int) -> int:
        if position >= slices:
            return 0
        found = best(position + 1, counts, compute)  # this slice left empty
        for index, size, used, memory in starts.get(position, []):
            if counts[index] >= caps[index] or compute + used > limit or position + size > slices:
                continue
            more = counts[:index] + (counts[index] + 1,) + counts[index + 1 :]
            found = max(found, memory + best(position + size, more, compute + used))
        return found

    return best(0, (0,) * len(profiles), 0)


def _whole_device(topology: dict[str, Any], pci_address: str) -> dict[str, Any] | None:
    """The device the driver publishes for a GPU whole (its attributes, as without MIG)."""
    for device in dra.devices_from_topology(topology, None, None):
        value = (device.get("attributes") or {}).get(PCI_ATTRIBUTE) or {}
        if str(next(iter(value.values()), "")).lower() == str(pci_address).lower():
            return device
    return None


def _gpu_entry(gpu: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """``(kind, why, figures)`` of one MIG GPU of :func:`mig_model.node_gpus`."""
    state = gpu["state"]
    profiles = {p["name"]: p for p in state.get("profiles") or []}
    if gpu["mode"] == "static":
        counts: dict[str, int] = {}
        for instance in gpu["instances"]:
            counts[instance["profile"]] = counts.get(instance["profile"], 0) + 1
        memory = mig_model.gpu_memory(gpu)
        figures = {"memory_counter_bytes": None, "charge_bytes": memory, "multiprocessors": None, "at_once": counts}
        return PARTITIONS, "static MIG: the layout's instances, never whole", figures
    counters = dra_mig.capacities(state)
    figures = {
        "memory_counter_bytes": counters[dra_mig.MEMORY],
        "charge_bytes": most_charged(state),
        # no multiprocessor figure in the documented geometry: unknown, not 0
        "multiprocessors": counters.get(dra_mig.MULTIPROCESSORS) or None,
        "at_once": {name: mig_model.most_at_once(p) for name, p in profiles.items() if p.get("placements")},
    }
    if dra_mig.publishes_whole(state):
        return SHARED, "dynamic MIG: given whole or as partitions, never both at once", figures
    return PARTITIONS, "dynamic MIG on an Ampere GPU: partitions only (no GPU whole is published)", figures


def gpu_sets(topologies: dict[str, Any], hosts: dict[str, Any]) -> list[dict[str, Any]]:
    """The site's MIG GPUs in sets that share one model, source, way of being given and figures.

    Each: ``{"set", "kind" (shared or partitions), "why", "model", "source", "hosts" {host: GPUs}, "gpus",
    "per_gpu": {"memory_counter_bytes", "memory_counter", "charge_bytes", "charge", "multiprocessors"},
    "at_once": {profile: most at once per GPU}, "profiles": {profile: its memory, as published}}``; a shared set
    also keeps the published whole devices (``_whole``, for the classes' selectors; never written out).
    """
    groups: dict[tuple, dict[str, Any]] = {}
    for host, settings in hosts.items():
        topology = topologies.get(host)
        for gpu in mig_model.node_gpus(topology, settings):
            kind, why, figures = _gpu_entry(gpu)
            profiles = {
                p["name"]: dra_mig.quantity(int(p.get("memory_bytes") or 0))
                for p in dra_mig.ordered_profiles(gpu["state"].get("profiles") or [])
            }
            key = (kind, gpu["model"], gpu["source"], repr(sorted(figures.items())), repr(profiles))
            entry = groups.setdefault(
                key,
                {
                    "set": f"{gpu['model']} ({kind}, {gpu['source']})",
                    "kind": kind,
                    "why": why,
                    "model": gpu["model"],
                    "source": gpu["source"],
                    "hosts": {},
                    "gpus": 0,
                    "per_gpu": {
                        "memory_counter_bytes": figures["memory_counter_bytes"],
                        "memory_counter": None
                        if figures["memory_counter_bytes"] is None
                        else dra_mig.quantity(figures["memory_counter_bytes"]),
                        "charge_bytes": figures["charge_bytes"],
                        "charge": dra_mig.quantity(figures["charge_bytes"]),
                        "multiprocessors": figures["multiprocessors"],
                    },
                    "at_once": dict(sorted(figures["at_once"].items())),
                    "profiles": profiles,
                    "_whole": [],
                },
            )
            entry["hosts"][host] = entry["hosts"].get(host, 0) + 1
            entry["gpus"] += 1
            if kind == SHARED:
                entry["_whole"].append(_whole_device(topology, gpu["pci_address"]))
    return [groups[key] for key in sorted(groups, key=lambda k: (k[0] != SHARED, str(k[1]), k[2]))]


def public(sets: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The sets as ``teams.json`` shows them (without the devices kept for the selectors)."""
    if sets is None:
        return None
    return [{k: v for k, v in s.items() if not k.startswith("_")} for s in sets]


def _devices_at_once(topologies: dict[str, Any], hosts: dict[str, Any]) -> dict[str, Any]:
    """The most MIG devices that exist at once: ``{"all": n, "by_profile": {profile: n}, "dynamic_gpus": n}``.

    A static GPU has its instances; a dynamic one publishes every placement of every profile, which exclude
    each other, so it holds at most its largest count of one profile (all MIG devices) or of that profile.
    """
    total, by_profile, dynamic = 0, {}, 0
    for host, settings in hosts.items():
        for gpu in mig_model.node_gpus(topologies.get(host), settings):
            if gpu["mode"] == "static":
                counts: dict[str, int] = {}
                for instance in gpu["instances"]:
                    counts[instance["profile"]] = counts.get(instance["profile"], 0) + 1
                total += len(gpu["instances"])
            else:
                dynamic += 1
                counts = {
                    p["name"]: mig_model.most_at_once(p)
                    for p in gpu["state"].get("profiles") or []
                    if p.get("placements")
                }
                total += max(counts.values(), default=0)
            for name, count in counts.items():
                by_profile[name] = by_profile.get(name, 0) + count
    return {"all": total, "by_profile": dict(sorted(by_profile.items())), "dynamic_gpus": dynamic}


def device_capacity(mig: dict[str, Any] | None, cls: str) -> dict[str, Any] | None:
    """The capacity of MIG class ``cls`` in devices, from the model rather than the plan's published devices
    (a dynamic GPU publishes every placement: the plan's count is not what can be allocated at once).

    ``{"capacity": n or None, "bound": bool, "capacity_is": text}``; None where ``cls`` is not a MIG class.
    """
    classes = (mig or {}).get("classes") or {}
    if cls not in classes:
        return None
    capacity = mig.get("capacity") or {}
    devices = capacity.get("devices")
    if devices is None:
        return {"capacity": None, "bound": None, "capacity_is": capacity.get("reason") or "unknown"}
    profile = classes[cls]
    count = devices["all"] if profile is None else devices["by_profile"].get(profile, 0)
    if devices["dynamic_gpus"]:
        how = (
            "the most MIG devices that exist at once: a dynamic GPU publishes every placement, which exclude each "
            "other, and holds at most its largest count of one profile"
        )
        return {"capacity": count, "bound": True, "capacity_is": how}
    return {"capacity": count, "bound": False, "capacity_is": "the static layouts' instances"}


def published_per_gpu(topologies: dict[str, Any] | None, mig: dict[str, Any] | None) -> dict[str, dict[str, int]]:
    """``{host: {"gpus": MIG GPUs, "devices": MIG devices the driver publishes for them}}``: dynamic GPUs publish
    every placement of every profile and the GPU whole where the driver can prepare it (not on Ampere:
    ``dra/mig.publishes_whole``), static ones each instance (``controller/mig/model``)."""
    found: dict[str, dict[str, int]] = {}
    for host, settings in sorted((mig or {}).items()):
        topology = (topologies or {}).get(host)
        if mig_model.mode_of(settings) == "off" or not topology:
            continue
        try:
            gpus = mig_model.node_gpus(topology, settings)
        except mig_model.MigModelError as exc:
            raise MigTeamsError(f"{host}: {exc}") from None
        devices = 0
        for gpu in gpus:
            if gpu["mode"] == "static":
                devices += len(gpu["instances"])
            else:
                devices += len(dra_mig.publish_order(gpu["state"])) + int(dra_mig.publishes_whole(gpu["state"]))
        found[host] = {"gpus": len(gpus), "devices": devices}
    return found
