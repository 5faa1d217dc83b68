# SPDX-License-Identifier: Apache-2.0
"""FAKE NVML for the tests (never shipped): a strict stand-in for the ``pynvml`` functions of ``nvidia-ml-py``
that the driver's NVML reader (``aligned_dra_driver/usage/watcher.py``: the usage poll and the reclaim watcher) calls.

Strict as the real library is:

- every call before ``nvmlInit`` (or after the last ``nvmlShutdown``) raises ``NVMLError_Uninitialized``;
  ``nvmlInit`` of a node without ``libnvidia-ml`` (``library=False``) raises ``NVMLError_LibraryNotFound``;
- ``nvmlDeviceGetHandleByPciBusId`` takes the bus ID as a string (``0000:18:00.0`` or NVML's own
  ``00000000:18:00.0``, any case); a malformed one raises ``NVML_ERROR_INVALID_ARGUMENT``, one of no GPU
  ``NVML_ERROR_NOT_FOUND``;
- a handle is opaque: anything else given as one raises ``NVML_ERROR_INVALID_ARGUMENT``; the handle of a GPU
  that fell off the bus (:meth:`FakeNvml.remove_gpu`) raises ``NVML_ERROR_GPU_IS_LOST``;
- memory values are bytes (``total``, ``free``, ``used``: ``used`` is every process's memory plus what the
  driver reserves); ``usedGpuMemory`` is bytes or None (NVML_VALUE_NOT_AVAILABLE);
- a GPU's process lists hold every process on it, whatever container it runs in: the pods' processes, the
  MPS server, other containers' and the host's. ``nvmlDeviceGetComputeRunningProcesses`` lists the
  processes with a compute context of their own (the MPS server among them),
  ``nvmlDeviceGetMPSComputeRunningProcesses`` the MPS clients;
- ``nvmlDeviceGetUUID`` answers ``GPU-<uuid>`` as a str (nvidia-ml-py decodes NVML's bytes);
- ``nvmlDeviceGetProcessUtilization(handle, timeStamp)`` returns the samples (``pid``, ``timeStamp`` in
  microseconds, ``smUtil`` and ``memUtil`` in percent, ``encUtil``, ``decUtil``) taken after ``timeStamp``;
  with none, NVML answers ``NVML_ERROR_NOT_FOUND`` (it never returns an empty list), and a GPU that keeps no
  per-process samples (:meth:`FakeNvml.add_gpu` ``utilization=False``) ``NVML_ERROR_NOT_SUPPORTED``. Samples
  come from :meth:`FakeNvml.sample`; NVML keeps a bounded buffer, here the last 100 per GPU.

MIG (GPU models, MIG mode, GPU and compute instances, MIG devices, nvidia-caps files) is ``nvml_mig.py``, mixed
into :class:`FakeNvml`; its docstring opens with the test-side API. GPM (the share of SMs busy, per GPU and
per GPU instance, Hopper and newer) is ``nvml_gpm.py``, mixed in the same way. Handles are ctypes pointers, as pynvml's
(``c_nvmlDevice_t``; a GPU's also tells a test its ``bus``).

An instance stands for the module (``FakeNvml().nvmlInit()``, as ``pynvml.nvmlInit()``). For a driver
process, :meth:`FakeNvml.from_state_file` reads its GPUs from a JSON file at every call (written by the test
with :meth:`FakeNvml.write_state`), and :func:`write_module` writes a ``pynvml.py`` that stands for the real
module on that process's ``PYTHONPATH``.

:class:`GpuNode` builds a node as the watcher reads it: the GPUs with the processes NVML lists on a node (the MPS
server, a host daemon), each process's ``<procfs>/<pid>/cgroup`` (:func:`pod_cgroup` for a pod's container), and
:func:`share_entry` the checkpoint entry of a fractional claim.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import re
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:  # the package's siblings (tests import tests.support.fakes.nvml)
    from . import nvml_faults, nvml_gpm, nvml_mig
except ImportError:  # loaded by its path (write_module's pynvml.py): the siblings by their paths too

    def _sibling(name: str) -> Any:
        spec = importlib.util.spec_from_file_location(
            f"aligned_dra_fake_{name}", Path(__file__).with_name(f"{name}.py")
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    nvml_mig = _sibling("nvml_mig")
    nvml_faults = _sibling("nvml_faults")
    nvml_gpm = _sibling("nvml_gpm")

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_IN_USE = 19
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_UNKNOWN = 999
_MESSAGES = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
    NVML_ERROR_RESET_REQUIRED: "GPU requires reset",
    NVML_ERROR_IN_USE: "GPU is currently in use",
    NVML_ERROR_INSUFFICIENT_RESOURCES: "Insufficient resources",
    NVML_ERROR_UNKNOWN: "Unknown Error",
}
GIB = 1 << 30
HOST_CGROUP = "0::/system.slice/nvidia-persistenced.service"  # a host daemon's process: no pod's
_BUS_ID = re.compile(r"(?:[0-9a-f]{4}|[0-9a-f]{8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])")


class NVMLError(Exception):
    """As pynvml's: ``NVMLError(value)`` is an instance of the value's subclass, ``.value`` the code."""

    _value = NVML_SUCCESS

    def __new__(cls, value: int | None = None) -> NVMLError:
        value = cls._value if value is None else value
        kind = _SUBCLASSES.get(value, NVMLError) if cls is NVMLError else cls
        obj = Exception.__new__(kind)
        obj.value = value
        return obj

    def __init__(self, value: int | None = None) -> None:
        super().__init__(self.value)

    def __str__(self) -> str:
        return _MESSAGES.get(self.value, f"Unknown Error ({self.value})")


class NVMLError_Uninitialized(NVMLError):
    _value = NVML_ERROR_UNINITIALIZED


class NVMLError_InvalidArgument(NVMLError):
    _value = NVML_ERROR_INVALID_ARGUMENT


class NVMLError_NotSupported(NVMLError):
    _value = NVML_ERROR_NOT_SUPPORTED


class NVMLError_NotFound(NVMLError):
    _value = NVML_ERROR_NOT_FOUND


class NVMLError_LibraryNotFound(NVMLError):
    _value = NVML_ERROR_LIBRARY_NOT_FOUND


class NVMLError_GpuIsLost(NVMLError):
    _value = NVML_ERROR_GPU_IS_LOST


class NVMLError_NoPermission(NVMLError):
    _value = NVML_ERROR_NO_PERMISSION


class NVMLError_InsufficientSize(NVMLError):
    _value = NVML_ERROR_INSUFFICIENT_SIZE


class NVMLError_FunctionNotFound(NVMLError):
    _value = NVML_ERROR_FUNCTION_NOT_FOUND


class NVMLError_ResetRequired(NVMLError):
    _value = NVML_ERROR_RESET_REQUIRED


class NVMLError_InUse(NVMLError):
    _value = NVML_ERROR_IN_USE


class NVMLError_InsufficientResources(NVMLError):
    _value = NVML_ERROR_INSUFFICIENT_RESOURCES


class NVMLError_Unknown(NVMLError):
    _value = NVML_ERROR_UNKNOWN


ERROR_CLASSES = (
    NVMLError_Uninitialized,
    NVMLError_InvalidArgument,
    NVMLError_NotSupported,
    NVMLError_NoPermission,
    NVMLError_NotFound,
    NVMLError_InsufficientSize,
    NVMLError_LibraryNotFound,
    NVMLError_FunctionNotFound,
    NVMLError_GpuIsLost,
    NVMLError_ResetRequired,
    NVMLError_InUse,
    NVMLError_InsufficientResources,
    NVMLError_Unknown,
)
_SUBCLASSES = {sub._value: sub for sub in ERROR_CLASSES}


@dataclass(frozen=True)
class Memory:
    """``c_nvmlMemory_t``: bytes."""

    total: int
    free: int
    used: int


@dataclass(frozen=True)
class MemoryV2:
    """``c_nvmlMemory_v2_t`` (``nvmlDeviceGetMemoryInfo(handle, nvmlMemory_v2)``): bytes."""

    version: int
    total: int
    reserved: int
    free: int
    used: int


@dataclass(frozen=True)
class ProcessInfo:
    """``c_nvmlProcessInfo_t``: ``usedGpuMemory`` in bytes, None when NVML cannot tell."""

    pid: int
    usedGpuMemory: int | None
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


@dataclass(frozen=True)
class ProcessUtilizationSample:
    """``c_nvmlProcessUtilizationSample_t``: ``timeStamp`` in microseconds, the rest in percent."""

    pid: int
    timeStamp: int
    smUtil: int
    memUtil: int
    encUtil: int = 0
    decUtil: int = 0


class nvmlPciInfo_t(nvml_mig._Printable):
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * 16),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * 32),
    ]


class DeviceHandle(nvml_mig.c_nvmlDevice_t):
    """A ``c_nvmlDevice_t`` (opaque to code under test) that tells a test which GPU it is: ``bus``, ``generation``."""

    _type_ = nvml_mig.struct_c_nvmlDevice_t


SAMPLES_KEPT = 100


@dataclass
class _Gpu:
    total: int
    reserved: int
    generation: int
    processes: dict[int, tuple[int | None, bool]] = field(default_factory=dict)  # pid -> (bytes, MPS client)
    uuid: str = ""
    utilization: bool = True  # keeps per-process samples
    samples: list[list[int]] = field(default_factory=list)  # [pid, timeStamp, smUtil, memUtil]
    model: str = nvml_mig.DEFAULT_MODEL  # a key of nvml_mig.MODELS
    minor: int = 0
    mig: dict[str, Any] = field(
        default_factory=lambda: {"current": 0, "pending": 0, "serial": 0, "instances": [], "epoch": 0}
    )
    placed: dict[int, list[int]] = field(default_factory=dict)  # pid -> [gpu instance, compute instance]
    gpm: dict[str, Any] = field(default_factory=dict)  # GPM's counters (nvml_gpm)


def _bus_key(bus_id: Any) -> str:
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode("ascii", "replace")
    if not isinstance(bus_id, str):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    found = _BUS_ID.fullmatch(bus_id.strip().lower())
    if not found:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    domain = bus_id.strip().lower().split(":")[0][-4:]
    return f"{domain}:{found.group(1)}:{found.group(2)}.{found.group(3)}"


class FakeNvml(nvml_faults.FaultyNvml, nvml_mig.MigNvml, nvml_gpm.GpmNvml):
    """The module ``pynvml``, faked: GPUs by PCI address, their memory and processes, and MIG (``nvml_mig``)."""

    NVMLError = NVMLError
    NVML_SUCCESS = NVML_SUCCESS
    nvmlPciInfo_t = nvmlPciInfo_t
    nvmlMemory_v2 = 0x2000028

    def __init__(
        self, library: bool = True, state_file: str | Path | None = None, procfs: str | Path | None = None
    ) -> None:
        self.library = library
        self.state_file = Path(state_file) if state_file else None
        self.procfs = str(procfs) if procfs else None  # the nvidia-caps files and /proc/devices go under it
        self.gpus: dict[str, _Gpu] = {}
        self.init_count = 0
        self.calls: list[str] = []
        self.failing = False  # every call after nvmlInit raises NVML_ERROR_UNKNOWN (a driver in trouble)
        self.faults: list[dict[str, Any]] = []  # errors injected per call (nvml_faults)
        self._generation = 0
        self._clock = 1_000_000  # microseconds, as NVML's sample timestamps
        self._tokens: dict[tuple, int] = {}  # what a handle stands for -> the address it holds, and back
        self._keys: dict[int, tuple] = {}

    # -- the test's side ----------------------------------------------------------------------------

    def add_gpu(
        self,
        bus_id: str,
        total: int | None = None,
        reserved: int = 512 * 1024 * 1024,
        utilization: bool = True,
        model: str = nvml_mig.DEFAULT_MODEL,
        minor: int | None = None,
    ) -> None:
        """A GPU of ``model`` (a key of ``nvml_mig.MODELS``; ``total`` bytes, default the model's memory), minor
        number ``minor`` (default: how many GPUs were added before)."""
        total = nvml_mig.MODELS[model].memory_mib * nvml_mig.MIB if total is None else total
        if total <= 0 or not 0 <= reserved < total:
            raise ValueError("a GPU needs total > reserved >= 0 bytes")
        self._generation += 1
        gpu_uuid = f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'{bus_id}/{self._generation}')}"
        minor = len(self.gpus) if minor is None else minor
        self._load(gpus_only=True)
        self.gpus[_bus_key(bus_id)] = _Gpu(
            total, reserved, self._generation, uuid=gpu_uuid, utilization=utilization, model=model, minor=minor
        )
        self._changed()

    _bus = staticmethod(_bus_key)

    def uuid_of(self, bus_id: str) -> str:
        self._load(gpus_only=True)
        return self.gpus[_bus_key(bus_id)].uuid

    def sample(self, bus_id: str, pid: int, sm: int, mem: int = 0) -> None:
        """NVML sampled the process: ``sm`` percent of the SMs busy (a later timestamp than every sample before)."""
        self._load(gpus_only=True)
        gpu = self.gpus[_bus_key(bus_id)]
        if pid not in gpu.processes or not 0 <= sm <= 100:
            raise ValueError(f"pid {pid} does not run on {bus_id}, or {sm} is no percent")
        self._clock += 1000
        gpu.samples = (gpu.samples + [[pid, self._clock, sm, mem]])[-SAMPLES_KEPT:]

    def remove_gpu(self, bus_id: str) -> None:
        """The GPU fell off the bus: NOT_FOUND for its bus ID, GPU_IS_LOST for handles taken before."""
        self._load(gpus_only=True)
        del self.gpus[_bus_key(bus_id)]
        self._changed()

    def run(
        self,
        bus_id: str,
        pid: int,
        used: int | None,
        mps_client: bool = False,
        gpu_instance: int | None = None,
        compute_instance: int = 0,
    ) -> None:
        """A process uses ``used`` bytes of the GPU (again: its use changes); refused beyond the GPU's memory. On a GPU
        in MIG mode it runs on a MIG device: ``gpu_instance`` (and ``compute_instance``), within its memory."""
        self._load(gpus_only=True)
        gpu = self.gpus[_bus_key(bus_id)]
        others = sum(u or 0 for p, (u, _m) in gpu.processes.items() if p != pid)
        if used is not None and (used < 0 or gpu.reserved + others + used > gpu.total):
            raise ValueError(f"{used} bytes do not fit on {bus_id}")
        self._place(gpu, pid, used, gpu_instance, compute_instance)
        gpu.processes[pid] = (used, mps_client)
        self._changed()

    def end(self, bus_id: str, pid: int) -> None:
        self._load(gpus_only=True)
        gpu = self.gpus[_bus_key(bus_id)]
        del gpu.processes[pid]
        gpu.placed.pop(pid, None)
        self._changed()

    def write_state(self, path: str | Path) -> None:
        """The GPUs as JSON, for a driver process's :meth:`from_state_file` (written whole, then renamed)."""
        state = {
            bus: {
                "total": gpu.total,
                "reserved": gpu.reserved,
                "generation": gpu.generation,
                "processes": [[pid, used, mps] for pid, (used, mps) in sorted(gpu.processes.items())],
                "uuid": gpu.uuid,
                "utilization": gpu.utilization,
                "samples": gpu.samples,
                "model": gpu.model,
                "minor": gpu.minor,
                "mig": gpu.mig,
                "placed": [[pid, *at] for pid, at in sorted(gpu.placed.items())],
                "gpm": gpu.gpm,
            }
            for bus, gpu in self.gpus.items()
        }
        data = {"library": self.library, "failing": self.failing, "procfs": self.procfs, "gpus": state}
        data["faults"] = self.faults
        tmp = Path(f"{path}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data))
        tmp.replace(path)

    def _changed(self) -> None:
        """A fake bound to a state file (a driver process's) writes what changed back to it."""
        if self.state_file is not None:
            self.write_state(self.state_file)

    @classmethod
    def from_state_file(cls, path: str | Path) -> FakeNvml:
        fake = cls(state_file=path)
        fake._load()
        return fake

    def _load(self, gpus_only: bool = False) -> None:
        """The state file read again (``gpus_only``: the test side's own switches, ``library`` and ``failing``,
        stay as they are until its next :meth:`write_state`)."""
        if self.state_file is None:
            return
        data = json.loads(self.state_file.read_text())
        if not gpus_only:
            self.library = data["library"]
            self.failing = data.get("failing", False)
            self.faults = data.get("faults") or []
            self.procfs = data.get("procfs")
        self.gpus = {
            bus: _Gpu(
                g["total"],
                g["reserved"],
                g["generation"],
                {p: (u, m) for p, u, m in g["processes"]},
                g.get("uuid", ""),
                g.get("utilization", True),
                g.get("samples", []),
                g.get("model", nvml_mig.DEFAULT_MODEL),
                g.get("minor", 0),
                g.get("mig") or _Gpu(1, 0, 0).mig,
                {pid: [gi, ci] for pid, gi, ci in g.get("placed", [])},
                g.get("gpm") or {},
            )
            for bus, g in data["gpus"].items()
        }

    def _read_faults(self) -> None:
        if self.state_file is not None:
            self.faults = json.loads(self.state_file.read_text()).get("faults") or []

    # -- pynvml's functions; handles: opaque pointers, as NVML's; each names what it stands for (never dereferenced) ---------

    def _handle(self, kind: Any, key: tuple) -> Any:
        token = self._tokens.get(key)
        if token is None:
            token = self._tokens[key] = 0x1000 + 16 * len(self._tokens)
            self._keys[token] = key
        if kind is not nvml_mig.c_nvmlDevice_t:
            return ctypes.cast(ctypes.c_void_p(token), kind)
        handle = ctypes.cast(ctypes.c_void_p(token), DeviceHandle)
        handle.bus, handle.generation = key[1], key[2][0]  # key[2]: (generation, MIG mode epoch)
        return handle

    def _key(self, handle: Any, kind: Any) -> tuple:
        if not isinstance(handle, kind):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        key = self._keys.get(ctypes.cast(handle, ctypes.c_void_p).value)
        if key is None:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return key

    # -- pynvml: the GPU ---------------------------------------------------------------------------------

    def nvmlDeviceGetArchitecture(self, device: Any) -> int:
        return nvml_mig.MODELS[self._gpu(device).model].architecture

    def nvmlDeviceGetName(self, handle: Any) -> str:
        gpu, gi, _ci = self._device(handle)
        if gi is None:
            return nvml_mig.MODELS[gpu.model].name
        return f"{nvml_mig.MODELS[gpu.model].name} MIG {self._profile_by_id(gpu, gi['profile']).name}"

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        return self._gpu(handle).minor

    def nvmlDeviceGetPciInfo(self, handle: Any) -> nvmlPciInfo_t:
        gpu = self._gpu(handle)
        bus = self._key(handle, nvml_mig.c_nvmlDevice_t)[1]
        domain, rest = bus.split(":", 1)
        info = nvmlPciInfo_t()
        info.busIdLegacy, info.busId = f"{domain}:{rest}".upper(), f"0000{domain}:{rest}".upper()
        info.domain, info.bus, info.device = int(domain, 16), int(rest[:2], 16), int(rest[3:5], 16)
        info.pciDeviceId, info.pciSubSystemId = (nvml_mig.MODELS[gpu.model].device_id << 16) | 0x10DE, 0x14_6310DE
        return info

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        self._load()
        if not self.library:
            raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)
        self.init_count += 1

    def nvmlShutdown(self) -> None:
        self._initialized()
        self.init_count -= 1

    def _initialized(self) -> None:
        if self.init_count <= 0:
            raise NVMLError(NVML_ERROR_UNINITIALIZED)

    def _loaded(self) -> None:
        """The state of now (a driver process's file read again); every call fails while ``failing``."""
        self._load()
        if self.failing:
            raise NVMLError(NVML_ERROR_UNKNOWN)

    def _device(self, handle: Any) -> tuple[_Gpu, dict | None, dict | None]:
        """(GPU, GPU instance, compute instance) of a device handle: the instances None for a GPU's own."""
        self._initialized()
        self._loaded()
        return self._resolve(self._key(handle, nvml_mig.c_nvmlDevice_t))

    def _gpu(self, handle: Any) -> _Gpu:
        """The GPU of a GPU's handle; a MIG device's handle: NVML_ERROR_NOT_SUPPORTED."""
        gpu, gi, _ci = self._device(handle)
        if gi is not None:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def nvmlDeviceGetHandleByPciBusId(self, pciBusId: Any) -> Any:
        self.calls.append("nvmlDeviceGetHandleByPciBusId")
        self._initialized()
        self._loaded()
        key = _bus_key(pciBusId)
        gpu = self.gpus.get(key)
        if gpu is None:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return self._handle(nvml_mig.c_nvmlDevice_t, ("gpu", key, self._era(gpu)))

    def nvmlDeviceGetCount(self) -> int:
        self._initialized()
        self._loaded()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        """The GPUs in PCI address order, as NVML enumerates them."""
        self._initialized()
        self._loaded()
        buses = sorted(self.gpus)
        if not isinstance(index, int) or not 0 <= index < len(buses):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return self.nvmlDeviceGetHandleByPciBusId(buses[index])

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Memory | MemoryV2:
        """A GPU's memory, or a MIG device's (its profile's memory, its processes' use)."""
        self.calls.append("nvmlDeviceGetMemoryInfo")
        gpu, gi, _ci = self._device(handle)
        if version not in (None, self.nvmlMemory_v2):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH in the real one
        if gi is None:
            total, reserved = gpu.total, gpu.reserved
            used = reserved + sum(u or 0 for u, _m in gpu.processes.values())
        else:
            total, reserved = self._profile_by_id(gpu, gi["profile"]).memory_mib * nvml_mig.MIB, 0
            used = sum(gpu.processes[p][0] or 0 for p, at in gpu.placed.items() if at[0] == gi["id"])
        if version is None:
            return Memory(total=total, free=total - used, used=used)
        return MemoryV2(version=version, total=total, reserved=reserved, free=total - used, used=used - reserved)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[ProcessInfo]:
        """A GPU's processes (those on MIG devices with their instance IDs), or a MIG device's."""
        self.calls.append("nvmlDeviceGetComputeRunningProcesses")
        gpu, gi, ci = self._device(handle)
        found = []
        for pid, (used, mps) in sorted(gpu.processes.items()):
            at = gpu.placed.get(pid)
            if not mps and (gi is None or at == [gi["id"], ci["id"]]):
                found.append(ProcessInfo(pid, used, *(at or [0xFFFFFFFF, 0xFFFFFFFF])))
        return found

    def nvmlDeviceGetMPSComputeRunningProcesses(self, handle: Any) -> list[ProcessInfo]:
        self.calls.append("nvmlDeviceGetMPSComputeRunningProcesses")
        gpu = self._gpu(handle)
        return [ProcessInfo(pid, used) for pid, (used, mps) in sorted(gpu.processes.items()) if mps]

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        """``GPU-…`` of a GPU, ``MIG-…`` of a MIG device."""
        self.calls.append("nvmlDeviceGetUUID")
        gpu, _gi, ci = self._device(handle)
        return gpu.uuid if ci is None else ci["uuid"]

    def nvmlDeviceGetProcessUtilization(self, handle: Any, timeStamp: int) -> list[ProcessUtilizationSample]:
        self.calls.append("nvmlDeviceGetProcessUtilization")
        gpu = self._gpu(handle)
        if not isinstance(timeStamp, int) or isinstance(timeStamp, bool) or timeStamp < 0:
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)  # a c_ulonglong
        if not gpu.utilization:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        samples = [ProcessUtilizationSample(p, t, sm, mem) for p, t, sm, mem in gpu.samples if t > timeStamp]
        if not samples:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return samples


for _name, _value in [(c.__name__, c) for c in ERROR_CLASSES] + list(globals().items()):
    if _name.startswith(("NVMLError_", "NVML_ERROR_")):
        setattr(FakeNvml, _name, _value)  # the module's errors, as pynvml's


def pod_cgroup(pod_uid: str, qos: str | None = "burstable", systemd: bool = True, container: str = "cd" * 32) -> str:
    """A pod's container process in ``/proc/<pid>/cgroup``, as the kubelet names it: the systemd cgroup driver
    (containerd, cgroup v2) or cgroupfs (cgroup v1); ``qos`` None for a Guaranteed pod (no QoS level)."""
    if systemd:
        slices = "/kubepods.slice" + (f"/kubepods-{qos}.slice" if qos else "")
        pod = f"kubepods{f'-{qos}' if qos else ''}-pod{pod_uid.replace('-', '_')}.slice"
        return f"0::{slices}/{pod}/cri-containerd-{container}.scope"
    return f"12:memory:/kubepods{f'/{qos}' if qos else ''}/pod{pod_uid}/{container}"


class GpuNode:
    """A node as the reclaim watcher reads it: the GPUs of a :class:`FakeNvml`, their processes, and each
    process's cgroup file under ``procfs`` (which pod it belongs to, if any)."""

    def __init__(self, procfs: str | Path, nvml: FakeNvml | None = None, first_pid: int = 1000) -> None:
        self.nvml = nvml if nvml is not None else FakeNvml()
        self.procfs = Path(procfs)
        self.pid = first_pid

    def add_gpu(self, bus_id: str, total: int = 80 * GIB, mps_server_gib: float = 0, host_gib: float = 0) -> None:
        """A GPU with what NVML lists on every node: the MPS server (in the driver's own pod) and a host daemon."""
        self.nvml.add_gpu(bus_id, total)
        self.process(bus_id, mps_server_gib, pod_cgroup(str(uuid.uuid4()), "besteffort", container="ab" * 32), False)
        self.process(bus_id, host_gib, HOST_CGROUP, mps_client=False)

    def process(
        self, bus_id: str, gib: float, cgroup: str, mps_client: bool = True, gpu_instance: int | None = None
    ) -> int:
        """A new process using ``gib`` GiB of the GPU (of its MIG device ``gpu_instance``), in ``cgroup``; its PID."""
        self.pid += 1
        (self.procfs / str(self.pid)).mkdir(parents=True)
        (self.procfs / str(self.pid) / "cgroup").write_text(cgroup + "\n")
        self.nvml.run(bus_id, self.pid, int(gib * GIB), mps_client, gpu_instance=gpu_instance)
        return self.pid


def share_entry(
    uid: str, name: str, bus_id: str, pool: str, request_gib: float | None, limit_gib: float, compute: int = 25
) -> dict[str, Any]:
    """The driver's checkpoint entry of a fractional claim on one GPU (MPS), as Prepare writes it (no CDI spec: the
    watcher never reads it); ``request_gib`` None: an entry written before requests were recorded."""
    device: dict[str, Any] = {
        "pool": pool,
        "device": "gpu-" + bus_id.replace(":", "-").replace(".", "-"),
        "request_names": ["gpu"],
        "pci_address": bus_id,
        "kind": "gpu",
        "cdi_device_ids": [f"aligned.dev/claim={uid}-gpu"],
        "share_id": str(uuid.uuid4()),
        "mps": True,
    }
    if request_gib is not None:
        device["share"] = {
            "request": {"memory": int(request_gib * GIB), "compute": compute},
            "limit": {"memory": int(limit_gib * GIB)},
        }
    return {"namespace": "default", "name": name, "devices": [device]}


def write_module(directory: str | Path, state_file: str | Path) -> Path:
    """Write ``directory/pynvml.py``: on a driver process's ``PYTHONPATH`` it is this fake, reading
    ``state_file`` at every call (a test-only stand-in: the driver has no switch of its own for it)."""
    path = Path(directory) / "pynvml.py"
    this_file = str(Path(__file__).resolve())
    # loaded by its path, under a name of its own: the folder of fakes is not put on the driver's sys.path
    path.write_text(
        "# TEST STAND-IN for nvidia-ml-py's pynvml, written by tests/support/fakes/nvml.py: never on a node\n"
        "import importlib.util\n"
        "import sys\n"
        f"_spec = importlib.util.spec_from_file_location('aligned_dra_fake_nvml', {this_file!r})\n"
        "_fake_nvml = importlib.util.module_from_spec(_spec)\n"
        "sys.modules[_spec.name] = _fake_nvml\n"
        "_spec.loader.exec_module(_fake_nvml)\n"
        f"sys.modules[__name__] = _fake_nvml.FakeNvml.from_state_file({str(state_file)!r})\n"
    )
    return path


if __name__ == "__main__":  # pragma: no cover
    sys.exit("tests/support/fakes/nvml.py is a test helper, not a program")
