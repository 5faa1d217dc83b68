# SPDX-License-Identifier: Apache-2.0
"""MIG in the device model: a GPU's counter set, its partitions as devices, and their order.

The input is a GPU's published device (:func:`model.devices_from_topology`'s entry) and its MIG state as
``node/mig/nvml_state.read_gpu`` reads it from NVML (profiles with their placements, instances). Nothing here
knows a GPU model: profiles, sizes and placements come from NVML (or, on the controller, from the geometry
NVIDIA documents, passed in the same shape).

- :func:`counter_set`: one set per GPU, ``<gpu>-counters``: ``memory`` (bytes), ``multiprocessors``, the
  engines (``copy-engines``, ``decoders``, ``encoders``, ``jpeg-engines``, ``ofa-engines``) and
  ``memory-slice-0`` … ``memory-slice-<n-1>`` (1 each), the names NVIDIA's driver uses. An engine counter's
  capacity is exact: the most that placements existing at once consume (pairwise disjoint memory slices, each
  profile at most ``instance_count`` times, :func:`engine_capacities`), so it never refuses a combination NVML
  allows and refuses a second ``+me`` partition where that profile is the only small one with an OFA engine.
  ``memory`` and ``multiprocessors`` are the highest density per memory slice among the profiles times the
  number of memory slices, a bound (:func:`capacities` says why); the memory slices do the exclusion.
- :func:`dynamic_devices`: the partitionable GPU: one device per profile and placement NVML offers
  (``<gpu>-mig-<profile token>-<start>``, :func:`profile_token`: one token per profile NVML can offer, a GPU
  whose profiles would still share one refused by :func:`check_tokens`), consuming its profile's memory,
  multiprocessors and engines and exactly the memory slices ``start`` … ``start + size - 1``, then the GPU
  whole, consuming every counter whole, where the driver can prepare it (:func:`publishes_whole`: MIG mode
  off, or an architecture whose MIG mode changes live, :func:`mode_changes_live`; not Ampere).
- :func:`static_devices`: the instances that exist, one device each with its MIG UUID and no counters;
  the GPU whole only while MIG mode is off.

Order (:func:`publish_order`): the scheduler takes the first device that fits, in published order, so the
order is the preference. Per GPU: profiles by memory slices, then compute slices, ascending (a request for
"any MIG device" gets the smallest); within a profile, the placements that overlap the fewest placements of
larger profiles first, ties by the higher start (``node/mig/packing.placement_order``, the rule the node's
layout solver uses too); the GPU whole last. On an A100 40GB (8 memory slices; 1g.5gb at 0…6, 2g.10gb at
0, 2, 4, 3g.20gb at 0 and 4 (4 slices), 4g.20gb at 0 (4 slices), 7g.40gb at 0 (8 slices)):

- 1g.5gb: 6 first (it overlaps only 3g@4 and 7g), then 5 and 4 (also 2g@4), then 3, 2, 1, 0 (each
  also under 4g and 3g@0);
- 2g.10gb: 4 (under 3g@4 and 7g), then 2 and 0 (under 4g, 3g@0 and 7g);
- 3g.20gb: 4, then 0 (each under 7g only: 4g is no larger, so the higher start wins).

So three 1g claims land on 6, 5, 4 and a 4g still fits at 0; by name or by start they would land on 0, 1,
2 and strand the 4g.

Node side rules apply (Python >= 3.9, imports only the device model and the node's placement rule).
"""

from __future__ import annotations

import re

from ansible_collections.aligned.dra.plugins.module_utils.dra.model import (
    LIMITS,
    DeviceModelError,
    is_dns_label,
)
from ansible_collections.aligned.dra.plugins.module_utils.node.mig.packing import placement_order

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

KIND = "mig"
DOMAIN = "dra.aligned.dev"
MEMORY = "memory"
MULTIPROCESSORS = "multiprocessors"
# counter name -> the profile's field (node/mig/nvml_state)
ENGINES = (
    ("copy-engines", "copy_engines"),
    ("decoders", "decoders"),
    ("encoders", "encoders"),
    ("jpeg-engines", "jpeg_engines"),
    ("ofa-engines", "ofa_engines"),
)
SLICE_COUNTER = "memory-slice-{}"
# the parent's attributes a MIG device carries as they are (its standard ones pair it with a NIC)
PARENT_ATTRIBUTES = (
    "resource.kubernetes.io/pcieRoot",
    "resource.kubernetes.io/pciBusID",
    "resource.kubernetes.io/numaNode",
    f"{DOMAIN}/vendorID",
    f"{DOMAIN}/deviceID",
    f"{DOMAIN}/model",
    f"{DOMAIN}/driver",
    f"{DOMAIN}/pcieSwitch",
    f"{DOMAIN}/gpudirectRDMA",
    f"{DOMAIN}/gpuIndex",
    f"{DOMAIN}/minor",
    f"{DOMAIN}/rail",
)
MAX_COUNTERS_PER_SET = 32  # ResourceSliceMaxCountersPerCounterSet


# a profile's name as NVML gives it: ``[<C>c.]<G>g.<GB>gb`` and its attributes, ``+`` those it has (``me``,
# ``me.all``, ``gfx``), ``-`` those it lacks (``-me``), several joined by ``,``
_PROFILE = re.compile(
    r"((?:[0-9]+c\.)?[0-9]+g\.[0-9]+gb)((?:[+-][a-z0-9]+(?:\.[a-z0-9]+)*(?:,[a-z0-9]+(?:\.[a-z0-9]+)*)*)*)"
)
_ATTRIBUTES = re.compile(r"([+-])([^+-]+)")
# live MIG mode changes (no GPU reset): the architectures node/mig/nvml_state names so
LIVE_MODE_CHANGE = ("hopper", "blackwell")


def profile_token(profile: str) -> str:
    """A profile as part of a DNS label, one token per profile NVML can offer: the size's ``.`` as ``-``
    (``1g.10gb`` → ``1g-10gb``, ``1c.2g.10gb`` → ``1c-2g-10gb``), each attribute the profile has as ``-<name>``
    and each it lacks as ``-no<name>``, a name's dots dropped: ``1g.10gb+me`` → ``1g-10gb-me``, ``1g.10gb-me``
    → ``1g-10gb-nome``, ``1g.10gb+me.all`` → ``1g-10gb-meall``, ``1g.10gb+gfx`` → ``1g-10gb-gfx``.

    A name outside that form (a future one) has every character but letters and digits as ``-``; where two of
    a GPU's profiles still give one token, :func:`check_tokens` refuses the GPU before anything is published.
    """
    text = str(profile).strip().lower()
    found = _PROFILE.fullmatch(text)
    if found:
        token = found.group(1).replace(".", "-")
        for sign, names in _ATTRIBUTES.findall(found.group(2)):
            for name in names.split(","):
                token += ("-" if sign == "+" else "-no") + name.replace(".", "")
        return token
    token = "".join(c if c.isalnum() and c.isascii() else "-" for c in text).strip("-")
    if not token:
        raise DeviceModelError(f"MIG profile {profile!r} has no name")
    return token


def check_tokens(gpu: str, profiles: Iterable[dict[str, Any]]) -> None:
    """Refuse a GPU two of whose profiles (distinct by name or NVML's profile ID) give one :func:`profile_token`:
    their devices would share names, and the API server refuses a pool with a duplicate device name whole.
    ``gpu`` names the GPU in the message."""
    by_token: dict[str, list[str]] = {}
    seen = set()
    for profile in profiles:
        key = (profile.get("id"), profile["name"])
        if key in seen:
            continue
        seen.add(key)
        label = profile["name"] if profile.get("id") is None else f"{profile['name']} (ID {profile['id']})"
        by_token.setdefault(profile_token(profile["name"]), []).append(label)
    clashes = {token: sorted(labels) for token, labels in sorted(by_token.items()) if len(labels) > 1}
    if clashes:
        said = "; ".join(f"{' and '.join(labels)} give {token!r}" for token, labels in clashes.items())
        raise DeviceModelError(f"GPU {gpu}: MIG profiles whose device names would collide: {said}")


def mode_changes_live(architecture: str | None) -> bool:
    """Whether NVML changes a GPU's MIG mode without a GPU reset: Hopper and Blackwell (idle GPU). Ampere (A100,
    A30) needs a reset, so the driver can never turn MIG mode off at Prepare there; ``ada``, ``unknown`` and any
    other name: no (fail closed)."""
    return architecture in LIVE_MODE_CHANGE


def mig_mode_on(state: dict[str, Any]) -> bool:
    """MIG mode is on now (NVML's current mode)."""
    return bool((state.get("mig_mode") or {}).get("current"))


def publishes_whole(state: dict[str, Any]) -> bool:
    """Whether a dynamic GPU's whole is published: only where the driver can prepare it, i.e. MIG mode is off
    or the GPU changes MIG mode live (``state["architecture"]``, :func:`mode_changes_live`)."""
    return not mig_mode_on(state) or mode_changes_live(state.get("architecture"))


def device_name(gpu_name: str, profile: str, start: int) -> str:
    """``gpu-0000-18-00-0-mig-1g-5gb-6``: the MIG device of ``profile`` at memory slice ``start``."""
    name = f"{gpu_name}-mig-{profile_token(profile)}-{int(start)}"
    if not is_dns_label(name):
        raise DeviceModelError(f"MIG device name {name!r} is not a DNS label of at most 63 characters")
    return name


def counter_set_name(gpu_name: str) -> str:
    return f"{gpu_name}-counters"


def quantity(value: int) -> str:
    """Bytes as a Kubernetes quantity, exact: ``40Gi``, ``4864Mi`` or plain bytes."""
    value = int(value)
    for suffix, unit in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if value and value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


def _size(profile: dict[str, Any]) -> int:
    """Memory slices of the profile (its placements' size)."""
    return max((p["size"] for p in profile.get("placements") or []), default=0)


def memory_slices(state: dict[str, Any]) -> int:
    """The GPU's memory slices: NVML's figure, else the end of the furthest placement."""
    if state.get("memory_slices"):
        return int(state["memory_slices"])
    ends = [p["start"] + p["size"] for profile in state.get("profiles") or [] for p in profile.get("placements") or []]
    return max(ends, default=0)


def _profile_counters(profile: dict[str, Any]) -> dict[str, int]:
    counters = {
        MEMORY: int(profile.get("memory_bytes") or 0),
        MULTIPROCESSORS: int(profile.get("multiprocessors") or 0),
    }
    for counter, field in ENGINES:
        counters[counter] = int(profile.get(field) or 0)
    return counters


def engine_capacities(profiles: list[dict[str, Any]], slices: int) -> dict[str, int]:
    """Per engine counter, the exact maximum of its sum over every set of placements that can exist at once:
    pairwise disjoint memory slices, each profile at most ``instance_count`` times (NVML's limit; all its
    placements where it gives none).

    A left-to-right search over the memory slices (at most 8): at each slice, leave it free or start one of the
    placements that begin there; the state is the slice and what is left of each profile whose
    ``instance_count`` is below its placements (the ``+me`` profiles: once per GPU), memoised, so a GPU's
    answer takes a few hundred steps (the driver computes it in every scan). Each counter is maximised on
    its own (the sets that reach the maxima may differ): a capacity no combination NVML allows exceeds.
    """
    names = [counter for counter, _field in ENGINES]
    limited: list[int] = []  # positions in ``profiles`` whose instance_count binds
    starts: dict[int, list[tuple[int, int, tuple[int, ...]]]] = {}  # start -> [(end, limited slot or -1, values)]
    for profile in profiles:
        placements = [p for p in profile.get("placements") or [] if int(p["size"]) > 0]
        count = int(profile.get("instance_count") or 0)
        slot = -1
        if 0 < count < len(placements):
            slot = len(limited)
            limited.append(count)
        counters = _profile_counters(profile)
        values = tuple(counters[name] for name in names)
        for placement in placements:
            start, end = int(placement["start"]), int(placement["start"]) + int(placement["size"])
            starts.setdefault(start, []).append((end, slot, values))
    last = max([slices] + [end for options in starts.values() for end, _slot, _values in options])
    memo: dict[tuple[int, tuple[int, ...]], tuple[int, ...]] = {}
    zero = tuple(0 for _name in names)

    def best(position: int, left: tuple[int, ...]) -> tuple[int, ...]:
        if position >= last:
            return zero
        key = (position, left)
        found = memo.get(key)
        if found is not None:
            return found
        found = best(position + 1, left)  # this slice left free
        for end, slot, values in starts.get(position, ()):
            if slot >= 0 and not left[slot]:
                continue
            after = left if slot < 0 else left[:slot] + (left[slot] - 1,) + left[slot + 1 :]
            rest = best(end, after)
            found = tuple(max(a, v + r) for a, v, r in zip(found, values, rest))
        memo[key] = found
        return found

    return dict(zip(names, best(0, tuple(limited))))


def capacities(state: dict[str, Any]) -> dict[str, int]:
    """Each counter's capacity on the GPU.

    Engines: exact (:func:`engine_capacities`): NVML's ``instance_count`` is enforced nowhere else, and the
    engines are what tells a ``+me`` profile (an OFA engine, once per GPU) from its plain twin. ``memory`` and
    ``multiprocessors``: the highest density per memory slice among the profiles times the memory slices, a
    bound that never refuses a combination NVML allows. Every profile's memory and multiprocessors grow with
    its memory slices, so the slices already refuse whatever these could; and ``memory`` is the figure Kueue
    charges quotas against and the site's MIG memory is summed from (``controller/mig/model``), which should
    stay the GPU's whole MIG memory rather than the most one packing happens to reach.
    """
    slices = memory_slices(state)
    profiles = [p for p in state.get("profiles") or [] if _size(p)]
    if not slices or not profiles:
        raise DeviceModelError(f"GPU {state.get('pci_address')}: NVML offers no MIG placement to publish")
    result: dict[str, int] = {}
    for profile in profiles:
        size = _size(profile)
        for counter in (MEMORY, MULTIPROCESSORS):
            bound = -(-_profile_counters(profile)[counter] * slices // size)  # ceil
            result[counter] = max(result.get(counter, 0), bound)
    result.update(engine_capacities(profiles, slices))
    for index in range(slices):
        result[SLICE_COUNTER.format(index)] = 1
    if len(result) > MAX_COUNTERS_PER_SET:
        raise DeviceModelError(
            f"GPU {state.get('pci_address')}: {len(result)} counters, at most {MAX_COUNTERS_PER_SET}"
        )
    return result


def _counter_values(counters: dict[str, int]) -> dict[str, dict[str, str]]:
    return {name: {"value": quantity(value) if name == MEMORY else str(value)} for name, value in counters.items()}


def published_capacities(state: dict[str, Any]) -> dict[str, int]:
    """The counters a dynamic GPU's set publishes: :func:`capacities`, less those only the GPU whole would
    consume where it is left out (:func:`publishes_whole`): a counter no partition consumes (an engine no
    profile has, a memory slice no placement covers)."""
    found = capacities(state)
    if publishes_whole(state):
        return found
    consumed = set()
    for profile, placement in publish_order(state):
        consumed.update(_consumed(profile, placement))
    return {name: value for name, value in found.items() if name in consumed}


def counter_set(gpu_device: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """The GPU's counter set, as ``spec.sharedCounters[]`` holds it (:func:`published_capacities`)."""
    return {"name": counter_set_name(gpu_device["name"]), "counters": _counter_values(published_capacities(state))}


def ordered_profiles(profiles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The profiles that have placements, smallest first: memory slices, compute slices, memory, name."""
    usable = [p for p in profiles if _size(p)]
    return sorted(
        usable, key=lambda p: (_size(p), int(p.get("slices") or 0), int(p.get("memory_bytes") or 0), p["name"])
    )


def publish_order(state: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, int]]]:
    """(profile, placement) pairs in the order they are published (the scheduler's preference)."""
    profiles = state.get("profiles") or []
    return [
        (profile, placement)
        for profile in ordered_profiles(profiles)
        for placement in placement_order(profiles, profile["name"])
    ]


def _attributes(
    gpu_device: dict[str, Any], profile: str, start: int, size: int, extra: dict[str, Any]
) -> dict[str, Any]:
    parent = gpu_device.get("attributes") or {}
    attributes = {name: parent[name] for name in PARENT_ATTRIBUTES if name in parent}
    attributes[f"{DOMAIN}/kind"] = {"string": KIND}
    attributes[f"{DOMAIN}/profile"] = {"string": profile}
    attributes[f"{DOMAIN}/placementStart"] = {"int": int(start)}
    attributes[f"{DOMAIN}/placementSize"] = {"int": int(size)}
    parent_uuid = (parent.get(f"{DOMAIN}/uuid") or {}).get("string")
    if parent_uuid:
        attributes[f"{DOMAIN}/parentUUID"] = {"string": parent_uuid}
    attributes.update(extra)
    return attributes


def _device(
    gpu_device: dict[str, Any], profile: dict[str, Any], start: int, size: int, extra: dict[str, Any]
) -> dict[str, Any]:
    device = {
        "name": device_name(gpu_device["name"], profile["name"], start),
        "attributes": _attributes(gpu_device, profile["name"], start, size, extra),
        "capacity": {MEMORY: {"value": quantity(int(profile.get("memory_bytes") or 0))}},
    }
    if len(device["attributes"]) + len(device["capacity"]) > LIMITS["device_max_attributes_and_capacities"]:
        raise DeviceModelError(
            f"{device['name']}: more than {LIMITS['device_max_attributes_and_capacities']} attributes"
        )
    return device


def _consumed(profile: dict[str, Any], placement: dict[str, Any]) -> dict[str, int]:
    """What a partition consumes: its profile's non-zero counters and exactly its memory slices."""
    start, size = int(placement["start"]), int(placement["size"])
    consumed = {k: v for k, v in _profile_counters(profile).items() if v}
    consumed.update({SLICE_COUNTER.format(i): 1 for i in range(start, start + size)})
    return consumed


def _gpu_label(gpu_device: dict[str, Any], state: dict[str, Any]) -> str:
    address = state.get("pci_address")
    return f"{address} ({gpu_device['name']})" if address else str(gpu_device["name"])


def _unique(gpu_device: dict[str, Any], state: dict[str, Any], devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``devices``, refused where two share a name (the backstop of :func:`check_tokens`)."""
    seen: set[str] = set()
    for device in devices:
        if device["name"] in seen:
            raise DeviceModelError(f"GPU {_gpu_label(gpu_device, state)}: two MIG devices named {device['name']!r}")
        seen.add(device["name"])
    return devices


def dynamic_devices(gpu_device: dict[str, Any], state: dict[str, Any]) -> list[dict[str, Any]]:
    """The partitionable GPU: every (profile, placement) NVML offers, in :func:`publish_order`, then the GPU whole
    where the driver can prepare it (:func:`publishes_whole`: not on an Ampere GPU in MIG mode, whose mode
    changes only with a reset).

    :class:`DeviceModelError` where two profiles would give one device name (:func:`check_tokens`), before
    anything is published."""
    check_tokens(_gpu_label(gpu_device, state), state.get("profiles") or [])
    set_name = counter_set_name(gpu_device["name"])
    whole = published_capacities(state)
    devices = []
    for profile, placement in publish_order(state):
        start, size = int(placement["start"]), int(placement["size"])
        device = _device(gpu_device, profile, start, size, {})
        device["consumesCounters"] = [
            {"counterSet": set_name, "counters": _counter_values(_consumed(profile, placement))}
        ]
        devices.append(device)
    if publishes_whole(state):
        gpu = dict(gpu_device)
        gpu["consumesCounters"] = [{"counterSet": set_name, "counters": _counter_values(whole)}]
        devices.append(gpu)
    return _unique(gpu_device, state, devices)


def static_devices(gpu_device: dict[str, Any], state: dict[str, Any]) -> list[dict[str, Any]]:
    """The instances that exist (a device each, with its MIG UUID); the GPU whole only with MIG mode off.

    An instance without a compute instance (no MIG UUID) cannot run work and is left out.
    :class:`DeviceModelError` where two profiles would give one device name (:func:`check_tokens`).
    """
    if not mig_mode_on(state):
        return [gpu_device]
    listed = list(state.get("profiles") or [])
    profiles = {p["name"]: p for p in listed}
    instances = state.get("instances") or []
    unlisted = [{"name": i["profile"], "id": i.get("profile_id")} for i in instances if i["profile"] not in profiles]
    check_tokens(_gpu_label(gpu_device, state), listed + unlisted)
    devices = []
    for instance in sorted(instances, key=lambda i: (i["placement"]["start"], i["profile"])):
        if not instance.get("uuid"):
            continue
        profile = profiles.get(instance["profile"], {"name": instance["profile"]})
        placement = instance["placement"]
        extra = {f"{DOMAIN}/migUUID": {"string": instance["uuid"]}}
        devices.append(_device(gpu_device, profile, placement["start"], placement["size"], extra))
    return _unique(gpu_device, state, devices)


def planned_device(gpu_device: dict[str, Any], profile: dict[str, Any], start: int, size: int) -> dict[str, Any]:
    """A static layout's instance before it exists (the controller's plan): as :func:`static_devices` publishes
    it, less the MIG UUID."""
    return _device(gpu_device, profile, start, size, {})


def mig_devices(gpu_device: dict[str, Any], state: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    """What the driver publishes for one GPU in ``mode`` (``static`` or ``dynamic``)."""
    if mode == "static":
        return static_devices(gpu_device, state)
    if mode == "dynamic":
        return dynamic_devices(gpu_device, state)
    raise DeviceModelError(f"MIG mode {mode!r}: static or dynamic")
