# SPDX-License-Identifier: Apache-2.0
"""What the controller knows of a node's MIG: the one source the planner, claims, teams, utilization and
the replay read (issue "MIG in the controller").

The input is a node's probed topology and its host's ``aligned_dra_mig`` (the inventory's settings, as the
filter ``aligned.dra.mig_settings`` hands them on: ``{host: settings}``, a file's layouts read inline). The
output is what the driver publishes for the node (:func:`publish`), per GPU (:func:`node_gpus`), and per site
(:func:`site_capacity`):

- a GPU's profiles (:func:`gpu_state`) are NVML's where the probe read them (MIG mode on, the GPU driver's
  own sizes), else the geometry NVIDIA documents for its PCI device ID (``source: "documented"``: each
  profile's memory is the figure of its name, a nominal size that the GPU driver may set a little lower);
- ``static``: the instances are the layout's, packed by the node's own solver (``node/mig/packing``) as the
  node would make them, or the instances the probe read where it read some; planned instances carry no MIG
  UUID (they do not exist yet);
- ``dynamic``: every placement of every profile, then the GPU whole where the driver can prepare it (not on
  an Ampere GPU, whose MIG mode changes only with a reset: ``dra/mig.publishes_whole``, the architecture from
  the probe's NVML reading, else from the documented geometry), in the driver's order
  (``dra/mig.publish_order``), and the GPU's counter set.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import math

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import checks, geometry
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig
from ansible_collections.aligned.dra.plugins.module_utils.node.mig import packing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VARIABLE = "aligned_dra_mig"
MODES = ("static", "dynamic")
GIB = 1 << 30
ADVICE_LAYOUT = "aligned-advice"
PCI_ATTRIBUTE = "resource.kubernetes.io/pciBusID"
# the mode a GPU MIG takes is in (the rollout turns it on; the driver at start on Hopper and newer)
MIG_MODE_ON = {"current": True, "pending": True}


class MigModelError(ValueError):
    """A node's MIG settings that cannot be modelled (the validation stage says the same earlier)."""


def mode_of(settings: Any) -> str:
    """``static``, ``dynamic`` or ``off`` (no settings, or not a mapping)."""
    mode = settings.get("mode", "off") if isinstance(settings, dict) else "off"
    return mode if mode in MODES else "off"


def gpu_state(device: dict[str, Any]) -> dict[str, Any] | None:
    """A probed GPU's MIG state in ``nvml_state.read_gpu``'s shape, plus ``source`` and ``model``; None without MIG.

    NVML's profiles where the probe read them; else the documented geometry, each profile's ``memory_bytes``
    from its name (GiB) and its ``ofa_engines`` (the guide's figure: 1 for ``+me`` and the full profile, so the
    counter set holds one OFA engine and refuses a second ``+me`` partition), no multiprocessor or other engine
    figures (unknown: those counters are left out).

    ``architecture``: NVML's where the probe read the GPU, else the documented one for its device ID
    (``geometry``); ``mig_mode`` of a documented state is on, the mode MIG leaves the GPU in (the rollout turns
    it on, the driver at start on Hopper and newer). So an Ampere GPU in ``dynamic`` publishes no GPU whole
    (``dra/mig.publishes_whole``), before the first probe too.
    """
    geo = geometry.of_gpu(device)
    if geo is None:
        return None
    entry = device.get("mig") if isinstance(device.get("mig"), dict) else {}
    if geo["source"] == geometry.NVML:
        state = {k: v for k, v in entry.items() if k not in ("readable", "reason")}
        state.update(source=geometry.NVML, model=geo.get("model") or entry.get("name"))
        state.update(pci_address=device.get("pci_address"), architecture=geo["architecture"])
        return state
    profiles = [dict(p, memory_bytes=int(p["memory_gb"]) * GIB) for p in geo["profiles"]]
    return {
        "pci_address": device.get("pci_address"),
        "name": geo["model"],
        "model": geo["model"],
        "source": geometry.DOCUMENTED,
        "architecture": geo["architecture"],
        "mig_mode": dict(MIG_MODE_ON),
        "mig_capable": True,
        "memory_slices": geo["memory_slices"],
        "memory_bytes": max((p["memory_bytes"] for p in profiles), default=0),
        "profiles": profiles,
        "instances": [],
    }


def _probed_instances(state: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for instance in state.get("instances") or []:
        placement = instance.get("placement") or {}
        found.append({"profile": instance["profile"], "start": placement["start"], "size": placement["size"]})
    return sorted(found, key=lambda i: (i["start"], i["profile"]))


def _layout_instances(
    settings: dict[str, Any], index: int, device: dict[str, Any], state: dict[str, Any]
) -> list[dict[str, Any]]:
    """The static layout's instances on one GPU (``index`` in the node's NVIDIA GPUs by PCI address)."""
    name = settings.get("layout")
    if not name:
        raise MigModelError(f"{VARIABLE}: mode static needs layout")
    try:
        entries = checks.layout_entries(checks.configs_of(settings), str(name))
    except checks.MigSettingsError as exc:
        raise MigModelError(f"{VARIABLE}: {exc}") from None
    wanted: dict[str, int] = {}
    for entry in entries:
        devices = entry["devices"]
        filtered = entry["device_filter"] and geometry.device_id(device.get("device_id")) not in checks.filter_ids(
            entry
        )
        if (devices != "all" and index not in devices) or filtered or not entry["mig_enabled"]:
            continue
        for profile, count in (entry["mig_devices"] or {}).items():
            wanted[profile] = wanted.get(profile, 0) + int(count)
    if not wanted:
        return []
    try:
        placed = packing.pack(state["profiles"], [], wanted)
    except packing.PackingError as exc:
        raise MigModelError(f"{VARIABLE}: layout {name} on GPU {device.get('pci_address')}: {exc}") from None
    return [{"profile": p["profile"], "start": p["start"], "size": p["size"]} for p in placed]


def node_gpus(topology: dict[str, Any] | None, settings: Any) -> list[dict[str, Any]]:
    """The node's GPUs MIG takes under one host's ``aligned_dra_mig`` (empty for mode off), in PCI order.

    Each: ``{"pci_address", "device" (the published GPU's name), "mode", "model", "source", "memory_slices",
    "state", "instances"}``; ``instances`` (static only) are ``[{"profile", "start", "size"}]``.
    """
    mode = mode_of(settings)
    if mode == "off":
        return []
    found = []
    for index, device in checks.selected(checks.node_gpus(topology), settings.get("gpus")):
        state = gpu_state(device)
        if state is None:
            continue  # "every MIG-capable GPU" leaves it out (one picked by address: the validation refuses it)
        instances: list[dict[str, Any]] = []
        if mode == "static":
            probed = state["source"] == geometry.NVML and (state.get("mig_mode") or {}).get("current")
            instances = _probed_instances(state) if probed and state.get("instances") else None
            if instances is None:
                instances = _layout_instances(settings, index, device, state)
        found.append(
            {
                "pci_address": device.get("pci_address"),
                "device": _device_name(device),
                "mode": mode,
                "model": state.get("model"),
                "source": state["source"],
                "memory_slices": dra_mig.memory_slices(state),
                "state": state,
                "instances": instances,
            }
        )
    return found


def _device_name(device: dict[str, Any]) -> str:
    from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

    return dra.device_name("gpu", str(device.get("pci_address")))


def _attribute(device: dict[str, Any], name: str) -> Any:
    value = (device.get("attributes") or {}).get(name) or {}
    return next(iter(value.values()), None) if isinstance(value, dict) else None


def _static_devices(gpu_device: dict[str, Any], gpu: dict[str, Any]) -> list[dict[str, Any]]:
    profiles = {p["name"]: p for p in gpu["state"].get("profiles") or []}
    devices = []
    for instance in gpu["instances"]:
        profile = profiles.get(instance["profile"], {"name": instance["profile"]})
        devices.append(dra_mig.planned_device(gpu_device, profile, instance["start"], instance["size"]))
    return devices


def publish(
    topology: dict[str, Any] | None, devices: list[dict[str, Any]], settings: Any
) -> tuple[list[dict[str, Any]], dict[str, dict[str, int]]]:
    """The node's devices as the driver publishes them under ``settings``, and its counter sets
    ``{set name: {counter: value}}`` (dynamic GPUs only). ``devices``: the topology's devices in published order
    (``dra.devices_from_topology``); each MIG GPU's entry is replaced where it stood."""
    gpus = {str(g["pci_address"]).lower(): g for g in node_gpus(topology, settings)}
    if not gpus:
        return list(devices), {}
    out: list[dict[str, Any]] = []
    counters: dict[str, dict[str, int]] = {}
    for device in devices:
        gpu = gpus.get(str(_attribute(device, PCI_ATTRIBUTE) or "").lower())
        if gpu is None or _attribute(device, "dra.aligned.dev/kind") != "gpu":
            out.append(device)
            continue
        if gpu["mode"] == "static":
            out.extend(_static_devices(device, gpu))
            continue
        out.extend(dra_mig.dynamic_devices(device, gpu["state"]))
        capacity = dra_mig.published_capacities(gpu["state"])
        if gpu["source"] == geometry.DOCUMENTED:
            # no multiprocessor or engine figure but the OFA one: unknown, not zero (ofa-engines 1 is kept)
            capacity = {name: value for name, value in capacity.items() if value}
        counters[dra_mig.counter_set_name(device["name"])] = capacity
    return out, counters


def gpu_memory(gpu: dict[str, Any]) -> int:
    """The MIG memory one of :func:`node_gpus`'s GPUs offers: its instances' (static) or its ``memory`` counter
    (dynamic: an upper bound where the profiles' densities differ, see ``dra/mig.capacities``)."""
    if gpu["mode"] == "static":
        profiles = {p["name"]: p for p in gpu["state"].get("profiles") or []}
        return sum(int((profiles.get(i["profile"]) or {}).get("memory_bytes") or 0) for i in gpu["instances"])
    return dra_mig.capacities(gpu["state"])[dra_mig.MEMORY]


def site_capacity(topologies: dict[str, Any], mig: dict[str, Any] | None) -> dict[str, Any]:
    """The site's MIG capacity: ``{"gpus", "memory_bytes", "by_profile": {profile: {"gpus", "max_per_gpu",
    "memory_bytes"}}, "sources": {source: GPUs}, "bound": bool}``. ``bound`` is true where a figure rests on
    documented sizes or on a dynamic GPU's counter bound (not exact)."""
    total = {"gpus": 0, "memory_bytes": 0, "by_profile": {}, "sources": {}, "bound": False}
    for host, settings in sorted((mig or {}).items()):
        for gpu in node_gpus(topologies.get(host), settings):
            total["gpus"] += 1
            total["memory_bytes"] += gpu_memory(gpu)
            total["sources"][gpu["source"]] = total["sources"].get(gpu["source"], 0) + 1
            state = gpu["state"]
            if gpu["source"] != geometry.NVML or gpu["mode"] == "dynamic":
                total["bound"] = True
            counts = _profile_counts(gpu)
            for profile in state.get("profiles") or []:
                name = profile["name"]
                if not counts.get(name):
                    continue
                entry = total["by_profile"].setdefault(name, {"gpus": 0, "max_per_gpu": 0, "memory_bytes": 0})
                entry["gpus"] += 1
                entry["max_per_gpu"] = max(entry["max_per_gpu"], counts[name])
                entry["memory_bytes"] = int(profile.get("memory_bytes") or 0)
    total["by_profile"] = dict(sorted(total["by_profile"].items()))
    return total


def _profile_counts(gpu: dict[str, Any]) -> dict[str, int]:
    """Per profile, how many the GPU holds: the static layout's instances, else the most placements of the
    profile that can exist at once (pairwise disjoint, ``instance_count`` at most)."""
    if gpu["mode"] == "static":
        counts: dict[str, int] = {}
        for instance in gpu["instances"]:
            counts[instance["profile"]] = counts.get(instance["profile"], 0) + 1
        return counts
    return {profile["name"]: most_at_once(profile) for profile in gpu["state"].get("profiles") or []}


def most_at_once(profile: dict[str, Any]) -> int:
    """The most instances of one profile that exist at once on a GPU: its placements pairwise disjoint
    (all of one size, so taking them by start finds the most), NVML's ``instance_count`` at most."""
    taken, count = 0, 0
    for placement in sorted(profile.get("placements") or [], key=lambda p: p["start"]):
        mask = ((1 << placement["size"]) - 1) << placement["start"]
        if not taken & mask:
            taken |= mask
            count += 1
    return min(count, int(profile.get("instance_count") or count))


def compute_slices(profiles: list[dict[str, Any]]) -> int:
    """The GPU's compute slices: the largest profile's (7 on an A100 or H100)."""
    return max((int(p.get("slices") or 0) for p in profiles), default=0)


# The share of a profile's memory a measured peak leaves free, by default (the replay's and the advice's
# ``mig_headroom``).
DEFAULT_HEADROOM = 0.05


def smallest_profile(
    profiles: list[dict[str, Any]],
    memory_bytes: int | None = None,
    compute_fraction: float | None = None,
    headroom: float = 0.0,
) -> dict[str, Any] | None:
    """The smallest profile (driver's order) holding ``memory_bytes`` and ``compute_fraction`` of the GPU's
    compute slices; None when none does (the work needs the GPU whole, or more). ``headroom`` (a fraction
    of the profile's memory, 0 <= headroom < 1) is kept free: a profile holds ``memory_bytes`` only where
    ``memory_bytes <= memory * (1 - headroom)``, so a measured peak does not fit a profile it would fill.
    Media-extension profiles (``+me``) are left out: they hold the same as their plain profile and exist
    once per GPU."""
    if not 0.0 <= float(headroom) < 1.0:
        raise ValueError(f"headroom {headroom!r} is not a fraction in [0, 1)")
    need_slices = 0
    if compute_fraction is not None:
        need_slices = math.ceil(round(float(compute_fraction) * compute_slices(profiles), 9))
    for profile in dra_mig.ordered_profiles(profiles):  # the driver's order, smallest first
        if "+" in profile["name"]:
            continue
        usable = int(profile.get("memory_bytes") or 0) * (1.0 - float(headroom))
        if memory_bytes is not None and usable < int(memory_bytes):
            continue
        if int(profile.get("slices") or 0) < need_slices:
            continue
        return profile
    return None


def decided_by(
    profiles: list[dict[str, Any]],
    memory_bytes: int | None,
    compute_fraction: float | None,
    headroom: float,
    chosen: str | None,
) -> str:
    """Which need picked ``chosen`` (the :func:`smallest_profile` of both; None: no profile holds both):
    ``memory`` or ``compute`` where that need alone picks it and the other a smaller one, else ``both`` (each
    alone picks it, or only the two together do); without one of the figures, the other decided. Where no
    profile holds both: ``memory`` if no profile holds the memory, else ``both``."""
    if compute_fraction is None:
        return "memory"
    if memory_bytes is None:
        return "compute"
    by_memory = smallest_profile(profiles, memory_bytes=memory_bytes, headroom=headroom)
    by_compute = smallest_profile(profiles, compute_fraction=compute_fraction)
    memory_name = by_memory["name"] if by_memory else None
    compute_name = by_compute["name"] if by_compute else None
    if chosen is None:
        return "memory" if memory_name is None else "both"
    if memory_name == chosen != compute_name:
        return "memory"
    if compute_name == chosen != memory_name:
        return "compute"
    return "both"


def layout_snippet(profile_counts: dict[str, int], selector: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ready ``aligned_dra_mig`` value: mode static, one mig-parted config ``aligned-advice`` giving every
    selected GPU ``profile_counts``."""
    snippet: dict[str, Any] = {
        "mode": "static",
        "layout": ADVICE_LAYOUT,
        "mig_configs": {
            ADVICE_LAYOUT: [
                {
                    "devices": "all",
                    "mig-enabled": True,
                    "mig-devices": {name: int(count) for name, count in sorted(profile_counts.items()) if count},
                }
            ]
        },
    }
    if selector:
        snippet["gpus"] = dict(selector)
    return snippet
