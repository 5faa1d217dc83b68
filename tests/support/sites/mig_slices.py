# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: MIG-capable GPUs published as partitionable devices, the way NVIDIA's GPU driver does.

One ResourceSlice per node (driver ``gpu.nvidia.com``): per GPU a counter set
``gpu-<i>-counter-set`` (``memory`` and ``memory-slice-0`` ... ``memory-slice-<n-1>``), one device per
profile and placement named as NVIDIA names them (``gpu-0-mig-1g10gb-0``: the profile without its dot),
consuming its profile's memory and exactly the memory slices of its placement, then the GPU whole,
consuming all of them. The geometry is the one NVIDIA documents per model (``controller/mig/geometry``);
the devices come in the driver's preference order (the smallest profiles first, each profile's placements
that block the fewest larger ones first: ``dra/mig.publish_order``), so a planner that re-sorts them by
name tries ``1g.10gb`` before ``1g.5gb`` on an A100 40GB. Never shipped.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import geometry
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig

DRIVER = "gpu.nvidia.com"
A100_40GB = "0x20b0"
H100_80GB = "0x2330"
GIB = 1 << 30


def documented_state(device_id: str) -> dict[str, Any]:
    """A model's documented geometry as ``nvml_state.read_gpu`` shapes a GPU's state (memory from the names)."""
    geo = geometry.documented(device_id)
    assert geo is not None, device_id
    profiles = [dict(p, memory_bytes=p["memory_gb"] * GIB) for p in geo["profiles"]]
    return {"profiles": profiles, "memory_slices": geo["memory_slices"]}


def nvidia_name(gpu: int, profile: str, start: int) -> str:
    return f"gpu-{gpu}-mig-{profile.replace('.', '').replace('+', '-')}-{start}"


def _counters(memory_gb: int, slices: range) -> dict[str, dict[str, str]]:
    counters = {"memory": {"value": f"{memory_gb}Gi"}}
    counters.update({f"memory-slice-{i}": {"value": "1"} for i in slices})
    return counters


def gpu_devices(gpu: int, state: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(counter set, devices)`` of one partitionable GPU, devices in the driver's order (the GPU whole last)."""
    set_name = f"gpu-{gpu}-counter-set"
    whole_gb = max(p["memory_gb"] for p in state["profiles"])
    devices = []
    for profile, placement in dra_mig.publish_order(state):
        start, size = placement["start"], placement["size"]
        attributes = {
            "type": {"string": "mig"},
            "profile": {"string": profile["name"]},
            "index": {"int": gpu},
            "placementStart": {"int": start},
        }
        devices.append(
            {
                "name": nvidia_name(gpu, profile["name"], start),
                "attributes": attributes,
                "capacity": {"memory": {"value": f"{profile['memory_gb']}Gi"}},
                "consumesCounters": [
                    {"counterSet": set_name, "counters": _counters(profile["memory_gb"], range(start, start + size))}
                ],
            }
        )
    everything = _counters(whole_gb, range(state["memory_slices"]))
    devices.append(
        {
            "name": f"gpu-{gpu}",
            "attributes": {"type": {"string": "gpu"}, "index": {"int": gpu}},
            "capacity": {"memory": {"value": f"{whole_gb}Gi"}},
            "consumesCounters": [{"counterSet": set_name, "counters": everything}],
        }
    )
    return {"name": set_name, "counters": everything}, devices


def nvidia_mig_slices(node: str = "n1", device_id: str = A100_40GB, gpus: int = 1) -> list[dict[str, Any]]:
    """The node's one ResourceSlice: ``gpus`` GPUs of the model, each partitionable (1.34's layout: counter sets
    and devices in one slice)."""
    state = documented_state(device_id)
    sets, devices = [], []
    for gpu in range(gpus):
        counter_set, found = gpu_devices(gpu, state)
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
