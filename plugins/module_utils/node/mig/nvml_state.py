# SPDX-License-Identifier: Apache-2.0
"""A GPU's MIG state as NVML tells it: :func:`read_gpu` (one GPU), :func:`read_node` (several).

``nvml`` is the module ``pynvml`` of nvidia-ml-py (or a stand-in with its names), initialized by the caller
for :func:`read_gpu` (:func:`read_node` calls ``nvmlInit`` and ``nvmlShutdown`` itself). The entry is a plain
dict (the MIG contract's shape, plus ``error``)::

    {"pci_address", "uuid", "name", "architecture": "ampere"|"ada"|"hopper"|"blackwell"|"unknown", "minor",
     "mig_capable", "mig_mode": {"current": bool, "pending": bool} | None, "memory_bytes",
     "profiles": [{"id", "name": "1g.5gb", "slices", "memory_bytes", "multiprocessors", "copy_engines",
                   "decoders", "encoders", "jpeg_engines", "ofa_engines", "instance_count",
                   "placements": [{"start", "size"}]}] | None,
     "memory_slices": int | None,
     "instances": [{"gpu_instance", "profile_id", "profile", "placement": {"start", "size"},
                    "compute_instances": [{"id", "profile_id"}], "uuid": "MIG-…" | None, "processes": [pid]}],
     "processes": [pid], "error": str | None}

``slices`` is NVML's ``sliceCount`` (compute slices: 7 for 7g.40gb); the memory slices an instance takes are
its placement (``start`` … ``start + size - 1``; ``memory_slices`` of them on the GPU). ``profiles`` is None
while MIG mode is off (current), as NVML answers no profile then. A GPU NVML cannot read is never an exception:
``error`` says which call failed and why, the fields read before it are kept and the rest are None (None:
unknown, never "none there").

The list calls of NVML take ctypes buffers; :func:`possible_placements`, :func:`gpu_instances` and
:func:`compute_instances` wrap them for every user of NVML (this package, the driver).

Node side: Python 3.9, standard library only.
"""

from __future__ import annotations

import ctypes
import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ARCHITECTURES = {7: "ampere", 8: "ada", 9: "hopper", 10: "blackwell"}
NOT_SUPPORTED = 3
NOT_FOUND = 6
NO_PERMISSION = 4
INVALID_ARGUMENT = 2
FUNCTION_NOT_FOUND = 13
GPU_INSTANCE_PROFILE_COUNT = 18  # NVML_GPU_INSTANCE_PROFILE_COUNT where the module lacks it
COMPUTE_INSTANCE_PROFILE_COUNT = 9
NO_INSTANCE = 0xFFFFFFFF  # a process's gpuInstanceId outside MIG


class _Failed(Exception):
    """A call of the read failed: ``step`` the NVML function, ``cause`` its error."""

    def __init__(self, step: str, cause: BaseException) -> None:
        super().__init__(f"{step}: {_describe(cause)}")


def _describe(exc: BaseException) -> str:
    value = getattr(exc, "value", None)
    text = str(exc) or type(exc).__name__
    return f"{text} (NVML error {value})" if isinstance(value, int) else f"{type(exc).__name__}: {text}"


def _code(exc: BaseException) -> int | None:
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def _call(nvml: Any, name: str, *args: Any) -> Any:
    try:
        return getattr(nvml, name)(*args)
    except Exception as exc:  # NVMLError, or anything a broken binding raises
        raise _Failed(name, exc) from exc


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


# -- NVML's list calls ----------------------------------------------------------------------------------


def possible_placements(nvml: Any, handle: Any, profile_id: int) -> list[dict[str, int]]:
    """The placements NVML offers for a GPU instance profile: ``[{"start", "size"}]`` in memory slices."""
    count = ctypes.c_uint(0)
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, None, ctypes.byref(count))
    found = (nvml.c_nvmlGpuInstancePlacement_t * max(count.value, 1))()
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, found, ctypes.byref(count))
    return [{"start": int(p.start), "size": int(p.size)} for p in found[: count.value]]


def gpu_instances(nvml: Any, handle: Any, profile_id: int, room: int) -> list[Any]:
    """The GPU instance handles of a profile (``room``: its instance count, as NVML's buffer must hold them)."""
    count = ctypes.c_uint(0)
    found = (nvml.c_nvmlGpuInstance_t * max(room, 1))()
    nvml.nvmlDeviceGetGpuInstances(handle, profile_id, found, ctypes.byref(count))
    return [found[i] for i in range(count.value)]


def compute_instances(nvml: Any, gpu_instance: Any, profile_id: int, room: int) -> list[Any]:
    """The compute instance handles of a compute instance profile on a GPU instance."""
    count = ctypes.c_uint(0)
    found = (nvml.c_nvmlComputeInstance_t * max(room, 1))()
    nvml.nvmlGpuInstanceGetComputeInstances(gpu_instance, profile_id, found, ctypes.byref(count))
    return [found[i] for i in range(count.value)]


# -- one GPU --------------------------------------------------------------------------------------------


def empty_entry(pci_address: str) -> dict[str, Any]:
    """An entry with nothing read yet (every field unknown)."""
    return {
        "pci_address": pci_address,
        "uuid": None,
        "name": None,
        "architecture": "unknown",
        "minor": None,
        "mig_capable": None,
        "mig_mode": None,
        "memory_bytes": None,
        "profiles": None,
        "memory_slices": None,
        "instances": None,
        "processes": None,
        "error": None,
    }


def read_gpu(nvml: Any, pci_address: str) -> dict[str, Any]:
    """The MIG state of the GPU at ``pci_address`` (NVML initialized by the caller); never raises for a GPU
    NVML cannot read: ``error`` says why."""
    entry = empty_entry(pci_address)
    try:
        _read(nvml, pci_address, entry)
    except _Failed as exc:
        entry["error"] = str(exc)
    return entry


def _read(nvml: Any, pci_address: str, entry: dict[str, Any]) -> None:
    handle = _call(nvml, "nvmlDeviceGetHandleByPciBusId", pci_address)
    entry["uuid"] = _text(_call(nvml, "nvmlDeviceGetUUID", handle))
    entry["name"] = _text(_call(nvml, "nvmlDeviceGetName", handle))
    entry["architecture"] = _architecture(nvml, handle)
    entry["minor"] = int(_call(nvml, "nvmlDeviceGetMinorNumber", handle))
    entry["memory_bytes"] = int(_call(nvml, "nvmlDeviceGetMemoryInfo", handle).total)
    try:
        current, pending = nvml.nvmlDeviceGetMigMode(handle)
    except Exception as exc:
        if _code(exc) != NOT_SUPPORTED:
            raise _Failed("nvmlDeviceGetMigMode", exc) from exc
        entry.update(mig_capable=False, instances=[])
        entry["processes"] = sorted({int(p.pid) for p in _call(nvml, "nvmlDeviceGetComputeRunningProcesses", handle)})
        return
    entry["mig_capable"] = True
    entry["mig_mode"] = {"current": bool(current), "pending": bool(pending)}
    if not current:
        entry["instances"] = []
        entry["processes"] = sorted({int(p.pid) for p in _call(nvml, "nvmlDeviceGetComputeRunningProcesses", handle)})
        return
    entry["profiles"] = _profiles(nvml, handle)
    if not entry["profiles"]:  # every index "not there": a handle made stale by a MIG mode change answers so
        current, _pending = _call(nvml, "nvmlDeviceGetMigMode", handle)  # raises for such a handle
        if current:
            raise _Failed("nvmlDeviceGetGpuInstanceProfileInfo", LookupError("no MIG profile while MIG mode is on"))
    entry["memory_slices"] = max(
        (p["start"] + p["size"] for f in entry["profiles"] for p in f["placements"]), default=0
    )
    entry["instances"] = _instances(nvml, handle, entry["profiles"])
    entry["processes"] = _processes(nvml, handle, entry["instances"])


def _architecture(nvml: Any, handle: Any) -> str:
    call = getattr(nvml, "nvmlDeviceGetArchitecture", None)  # an older binding lacks it
    if call is None:
        return "unknown"
    try:
        return ARCHITECTURES.get(int(call(handle)), "unknown")
    except Exception as exc:
        if _code(exc) != NOT_SUPPORTED:
            raise _Failed("nvmlDeviceGetArchitecture", exc) from exc
        return "unknown"


def _profile_info(nvml: Any, handle: Any, index: int) -> Any:
    """NVML's profile info (v2, named); None for a profile the GPU lacks. A driver without v2: v1, named from
    its figures (``<slices>g.<GiB rounded up>gb``)."""
    try:
        return nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, index)
    except Exception as exc:
        if _code(exc) in (NOT_SUPPORTED, INVALID_ARGUMENT):
            return None
        if _code(exc) != FUNCTION_NOT_FOUND:
            raise _Failed("nvmlDeviceGetGpuInstanceProfileInfo", exc) from exc
    try:
        return nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, index, 1)
    except Exception as exc:
        if _code(exc) in (NOT_SUPPORTED, INVALID_ARGUMENT):
            return None
        raise _Failed("nvmlDeviceGetGpuInstanceProfileInfo", exc) from exc


def _profiles(nvml: Any, handle: Any) -> list[dict[str, Any]]:
    profiles = []
    for index in range(int(getattr(nvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", GPU_INSTANCE_PROFILE_COUNT))):
        info = _profile_info(nvml, handle, index)
        if info is None:
            continue
        name = _text(getattr(info, "name", "") or "")
        if name.startswith("MIG "):
            name = name[4:]
        if not name:
            name = f"{info.sliceCount}g.{math.ceil(int(info.memorySizeMB) / 1024)}gb"
        try:
            placements = possible_placements(nvml, handle, int(info.id))
        except Exception as exc:
            raise _Failed("nvmlDeviceGetGpuInstancePossiblePlacements", exc) from exc
        profiles.append(
            {
                "id": int(info.id),
                "name": name,
                "slices": int(info.sliceCount),
                "memory_bytes": int(info.memorySizeMB) << 20,
                "multiprocessors": int(info.multiprocessorCount),
                "copy_engines": int(info.copyEngineCount),
                "decoders": int(info.decoderCount),
                "encoders": int(info.encoderCount),
                "jpeg_engines": int(info.jpegCount),
                "ofa_engines": int(info.ofaCount),
                "instance_count": int(info.instanceCount),
                "placements": placements,
            }
        )
    return profiles


def _compute_instances(nvml: Any, gi: Any) -> list[dict[str, int]]:
    shared = int(getattr(nvml, "NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED", 0))
    found = []
    for index in range(int(getattr(nvml, "NVML_COMPUTE_INSTANCE_PROFILE_COUNT", COMPUTE_INSTANCE_PROFILE_COUNT))):
        try:
            info = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, index, shared)
        except Exception as exc:
            if _code(exc) in (NOT_SUPPORTED, INVALID_ARGUMENT):
                continue
            raise _Failed("nvmlGpuInstanceGetComputeInstanceProfileInfo", exc) from exc
        try:
            handles = compute_instances(nvml, gi, int(info.id), int(info.instanceCount))
        except Exception as exc:
            raise _Failed("nvmlGpuInstanceGetComputeInstances", exc) from exc
        for ci in handles:
            ci_info = _call(nvml, "nvmlComputeInstanceGetInfo", ci)
            found.append({"id": int(ci_info.id), "profile_id": int(ci_info.profileId)})
    return sorted(found, key=lambda c: c["id"])


def _instances(nvml: Any, handle: Any, profiles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    instances = []
    for profile in profiles:
        try:
            handles = gpu_instances(nvml, handle, profile["id"], profile["instance_count"])
        except Exception as exc:
            raise _Failed("nvmlDeviceGetGpuInstances", exc) from exc
        for gi in handles:
            info = _call(nvml, "nvmlGpuInstanceGetInfo", gi)
            instances.append(
                {
                    "gpu_instance": int(info.id),
                    "profile_id": int(info.profileId),
                    "profile": profile["name"],
                    "placement": {"start": int(info.placement.start), "size": int(info.placement.size)},
                    "compute_instances": _compute_instances(nvml, gi),
                    "uuid": None,
                    "processes": [],
                }
            )
    instances.sort(key=lambda i: i["gpu_instance"])
    return instances


def _mig_devices(nvml: Any, handle: Any) -> list[Any]:
    found = []
    for index in range(int(_call(nvml, "nvmlDeviceGetMaxMigDeviceCount", handle))):
        try:
            found.append(nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index))
        except Exception as exc:
            if _code(exc) not in (NOT_FOUND, INVALID_ARGUMENT):
                raise _Failed("nvmlDeviceGetMigDeviceHandleByIndex", exc) from exc
    return found


def _processes(nvml: Any, handle: Any, instances: list[dict[str, Any]]) -> list[int]:
    """Every process on the GPU; each MIG device's UUID and processes into its instance."""
    by_id = {i["gpu_instance"]: i for i in instances}
    pids: set[int] = set()
    for mig in _mig_devices(nvml, handle):
        gi_id = int(_call(nvml, "nvmlDeviceGetGpuInstanceId", mig))
        ci_id = int(_call(nvml, "nvmlDeviceGetComputeInstanceId", mig))
        instance = by_id.get(gi_id)
        if instance is None:
            continue
        if instance["uuid"] is None or ci_id == min((c["id"] for c in instance["compute_instances"]), default=ci_id):
            instance["uuid"] = _text(_call(nvml, "nvmlDeviceGetUUID", mig))
        for process in _call(nvml, "nvmlDeviceGetComputeRunningProcesses", mig):
            pids.add(int(process.pid))
            instance["processes"] = sorted(set(instance["processes"]) | {int(process.pid)})
    try:
        whole = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
    except Exception as exc:  # on a MIG GPU the parent's list may need more privilege than each device's
        if _code(exc) not in (NO_PERMISSION, NOT_SUPPORTED):
            raise _Failed("nvmlDeviceGetComputeRunningProcesses", exc) from exc
        whole = []
    for process in whole:
        pids.add(int(process.pid))
        instance = by_id.get(int(getattr(process, "gpuInstanceId", NO_INSTANCE)))
        if instance is not None:
            instance["processes"] = sorted(set(instance["processes"]) | {int(process.pid)})
    return sorted(pids)


# -- a node ---------------------------------------------------------------------------------------------


def read_node(nvml: Any, pci_addresses: list[str]) -> list[dict[str, Any]]:
    """The entries of the GPUs at ``pci_addresses`` (in that order), NVML initialized and shut down here; where
    NVML cannot start (no driver, no library) every entry's ``error`` says so."""
    try:
        nvml.nvmlInit()
    except Exception as exc:
        reason = f"nvmlInit: {_describe(exc)}"
        return [dict(empty_entry(address), error=reason) for address in pci_addresses]
    try:
        return [read_gpu(nvml, address) for address in pci_addresses]
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # nothing left to tell: the entries are read
            pass
