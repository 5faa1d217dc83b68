# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: dynamic MIG GPUs published as NVIDIA's DRA driver for GPUs publishes them, written from
NVIDIA's published figures and naming alone. Never shipped.

It imports nothing of the collection: it is the independent side of the tests that check the collection's
device model, planner and allocator against NVIDIA's.

- **Profiles** (:data:`PROFILES`): NVIDIA's MIG user guide, "Supported MIG Profiles" (A100-SXM4-40GB,
  H100-SXM5-80GB), with the profile IDs, multiprocessors, engines and memory as ``nvidia-smi mig -lgip`` and
  ``-lgipp`` print them (memory in MiB, as NVML's ``memorySizeMB``); placements as ``{starts}:size``.
- **Naming and counters**: NVIDIA's k8s-dra-driver-gpu (``cmd/gpu-kubelet-plugin``, ``mig.go`` and
  ``partitions.go`` at commit 22407113 of May 2026): the GPU whole ``gpu-<minor>``, a partition
  ``gpu-<minor>-mig-<profile without dots, RFC 1123>-<profile ID>-<placement start>``, one counter set
  ``gpu-<minor>-counter-set`` per GPU holding, per capacity, the largest value any profile has
  (``multiprocessors``, ``copy-engines``, ``decoders``, ``encoders``, ``jpeg-engines``, ``ofa-engines``,
  ``memory`` in bytes) and one ``memory-slice-<i>`` counter of 1 per memory slice; a partition consumes its
  profile's figures and exactly the slices of its placement, the GPU whole everything. On Ampere with MIG
  mode on the GPU whole is not published (its mode changes only with a reset).
- **Order**: NVIDIA's driver sorts a GPU's devices by name (``order="nvidia"``: the GPU whole first, then
  ``1g10gb`` before ``1g5gb``). ``order="preference"`` is the order this collection's driver documents
  (docs/mig.md, "Order"), computed here from first principles: profiles by memory slices, then compute
  slices, then memory; within a profile, the placements overlapping the fewest placements of larger profiles
  first, ties by the higher start; the GPU whole last.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

DRIVER = "gpu.nvidia.com"
A100_40GB = "0x20b0"
H100_80GB = "0x2330"
MIB = 1 << 20
SEVEN = (0, 1, 2, 3, 4, 5, 6)


class Published(NamedTuple):
    """One GPU instance profile as NVIDIA publishes it."""

    name: str
    id: int
    compute_slices: int
    instances: int
    multiprocessors: int
    copy_engines: int
    decoders: int
    encoders: int
    jpeg_engines: int
    ofa_engines: int
    memory_mib: int
    size: int  # memory slices of each placement
    starts: tuple[int, ...]


# (PCI device ID) -> (Ampere?, profiles). A100 40GB: the guide's table for R525 and later (1g.10gb and
# 1g.5gb+me included); H100 80GB: its table and nvidia-smi's listing (9.75 GiB = 9984 MiB for a 1g.10gb).
PROFILES: dict[str, tuple[bool, tuple[Published, ...]]] = {
    A100_40GB: (
        True,
        (
            Published("1g.5gb", 19, 1, 7, 14, 1, 0, 0, 0, 0, 4864, 1, SEVEN),
            Published("1g.5gb+me", 20, 1, 1, 14, 1, 1, 0, 1, 1, 4864, 1, SEVEN),
            Published("1g.10gb", 15, 1, 4, 14, 1, 1, 0, 0, 0, 9856, 2, (0, 2, 4, 6)),
            Published("2g.10gb", 14, 2, 3, 28, 2, 1, 0, 0, 0, 9856, 2, (0, 2, 4)),
            Published("3g.20gb", 9, 3, 2, 42, 3, 2, 0, 0, 0, 19968, 4, (0, 4)),
            Published("4g.20gb", 5, 4, 1, 56, 4, 2, 0, 0, 0, 19968, 4, (0,)),
            Published("7g.40gb", 0, 7, 1, 98, 7, 5, 0, 1, 1, 40192, 8, (0,)),
        ),
    ),
    H100_80GB: (
        False,
        (
            Published("1g.10gb", 19, 1, 7, 16, 1, 1, 0, 1, 0, 9984, 1, SEVEN),
            Published("1g.10gb+me", 20, 1, 1, 16, 1, 1, 0, 1, 1, 9984, 1, SEVEN),
            Published("1g.20gb", 15, 1, 4, 26, 1, 1, 0, 1, 0, 20096, 2, (0, 2, 4, 6)),
            Published("2g.20gb", 14, 2, 3, 32, 2, 2, 0, 2, 0, 20096, 2, (0, 2, 4)),
            Published("3g.40gb", 9, 3, 2, 60, 3, 3, 0, 3, 0, 40448, 4, (0, 4)),
            Published("4g.40gb", 5, 4, 1, 64, 4, 4, 0, 4, 0, 40448, 4, (0,)),
            Published("7g.80gb", 0, 7, 1, 132, 8, 7, 0, 7, 1, 81152, 8, (0,)),
        ),
    ),
}
CAPACITIES = ("multiprocessors", "copy-engines", "decoders", "encoders", "jpeg-engines", "ofa-engines", "memory")


def figures(profile: Published) -> dict[str, int]:
    """A profile's capacities by NVIDIA's counter names (memory in bytes)."""
    return {
        "multiprocessors": profile.multiprocessors,
        "copy-engines": profile.copy_engines,
        "decoders": profile.decoders,
        "encoders": profile.encoders,
        "jpeg-engines": profile.jpeg_engines,
        "ofa-engines": profile.ofa_engines,
        "memory": profile.memory_mib * MIB,
    }


def rfc1123(text: str) -> str:
    """NVIDIA's ``toRFC1123Compliant``: lower case, anything but ``a-z0-9-.`` as ``-``, outer ``-`` trimmed."""
    return re.sub(r"[^a-z0-9.-]", "-", text.lower()).strip("-").removesuffix(".")


def nvidia_name(gpu: int, profile: Published, start: int) -> str:
    return f"gpu-{gpu}-mig-{rfc1123(profile.name.replace('.', ''))}-{profile.id}-{start}"


def slices_of(profile: Published, start: int) -> range:
    return range(start, start + profile.size)


def preference(profiles: tuple[Published, ...]) -> list[tuple[Published, int]]:
    """(profile, start) in the collection's documented preference order, from first principles."""

    def overlaps(profile: Published, start: int) -> int:
        mine = set(slices_of(profile, start))
        return sum(
            1
            for other in profiles
            if other.size > profile.size
            for s in other.starts
            if mine & set(slices_of(other, s))
        )

    ordered = sorted(profiles, key=lambda p: (p.size, p.compute_slices, p.memory_mib, p.name))
    return [(p, s) for p in ordered for s in sorted(p.starts, key=lambda s, p=p: (overlaps(p, s), -s))]


def _counters(values: dict[str, int], slices: range) -> dict[str, dict[str, str]]:
    counters = {name: {"value": str(values[name])} for name in CAPACITIES}
    counters.update({f"memory-slice-{i}": {"value": "1"} for i in slices})
    return counters


def gpu_devices(gpu: int, device_id: str, order: str = "preference") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(counter set, devices)`` of one partitionable GPU of the model, in ``order`` ("nvidia" or "preference")."""
    ampere, profiles = PROFILES[device_id]
    set_name = f"gpu-{gpu}-counter-set"
    most = {name: max(figures(p)[name] for p in profiles) for name in CAPACITIES}
    slice_count = max(s + p.size for p in profiles for s in p.starts)
    partitions = []
    for profile, start in preference(profiles):
        attributes = {
            "type": {"string": "mig"},
            "profile": {"string": profile.name},
            "index": {"int": gpu},
            "placementStart": {"int": start},
        }
        partitions.append(
            {
                "name": nvidia_name(gpu, profile, start),
                "attributes": attributes,
                "capacity": {name: {"value": str(v)} for name, v in figures(profile).items()},
                "consumesCounters": [
                    {"counterSet": set_name, "counters": _counters(figures(profile), slices_of(profile, start))}
                ],
            }
        )
    everything = _counters(most, range(slice_count))
    whole = {
        "name": f"gpu-{gpu}",
        "attributes": {"type": {"string": "gpu"}, "index": {"int": gpu}},
        "capacity": {name: {"value": str(v)} for name, v in most.items()},
        "consumesCounters": [{"counterSet": set_name, "counters": everything}],
    }
    devices = partitions + ([] if ampere else [whole])
    if order == "nvidia":
        devices.sort(key=lambda d: d["name"])
    elif order != "preference":
        raise ValueError(order)
    return {"name": set_name, "counters": everything}, devices


def nvidia_mig_slices(
    node: str = "n1", device_id: str = A100_40GB, gpus: int = 1, order: str = "preference"
) -> list[dict[str, Any]]:
    """The node's one ResourceSlice: ``gpus`` GPUs of the model, each partitionable (1.34's layout: counter sets
    and devices in one slice)."""
    sets, devices = [], []
    for gpu in range(gpus):
        counter_set, found = gpu_devices(gpu, device_id, order)
        sets.append(counter_set)
        devices.extend(found)
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu-nvidia-com"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "sharedCounters": sets,
                "devices": devices,
            },
        }
    ]


def mig_class(name: str = "mig.nvidia.com") -> dict[str, Any]:
    """NVIDIA's DeviceClass of MIG devices."""
    expression = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "mig"'
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}  # fmt: skip


def gpu_class(name: str = "gpu.nvidia.com") -> dict[str, Any]:
    """NVIDIA's DeviceClass of whole GPUs."""
    expression = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "gpu"'
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]}}  # fmt: skip


def profile_request(name: str, profile: str | None = None, start: int | None = None, **extra) -> dict[str, Any]:
    """A request for one MIG device (of ``profile``, at ``start`` where given) of NVIDIA's class."""
    tests = [f'device.attributes["{DRIVER}"].profile == "{profile}"'] if profile else []
    if start is not None:
        tests.append(f'device.attributes["{DRIVER}"].placementStart == {start}')
    spec: dict[str, Any] = {"deviceClassName": "mig.nvidia.com"}
    if tests:
        spec["selectors"] = [{"cel": {"expression": " && ".join(tests)}}]
    spec.update(extra)
    return {"name": name, "exactly": spec}
