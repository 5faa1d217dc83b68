# SPDX-License-Identifier: Apache-2.0
"""FAKE NVML for the tests (never shipped): a strict stand-in for the ``pynvml`` functions of ``nvidia-ml-py``
that the driver's NVML reader (``aligned_dra_driver/usage.py``: the usage poll and the reclaim watcher) calls.

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

An instance stands for the module (``FakeNvml().nvmlInit()``, as ``pynvml.nvmlInit()``). For a driver
process, :meth:`FakeNvml.from_state_file` reads its GPUs from a JSON file at every call (written by the test
with :meth:`FakeNvml.write_state`), and :func:`write_module` writes a ``pynvml.py`` that stands for the real
module on that process's ``PYTHONPATH``.

:class:`GpuNode` builds a node as the watcher reads it: the GPUs with the processes NVML lists on a node (the MPS
server, a host daemon), each process's ``<procfs>/<pid>/cgroup`` (:func:`pod_cgroup` for a pod's container), and
:func:`share_entry` the checkpoint entry of a fractional claim.
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_UNKNOWN = 999
_MESSAGES = {
    NVML_ERROR_UNINITIALIZED: "Uninitialized",
    NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
    NVML_ERROR_NOT_SUPPORTED: "Not Supported",
    NVML_ERROR_NOT_FOUND: "Not Found",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
    NVML_ERROR_GPU_IS_LOST: "GPU is lost",
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


_SUBCLASSES = {
    sub._value: sub
    for sub in (
        NVMLError_Uninitialized,
        NVMLError_InvalidArgument,
        NVMLError_NotSupported,
        NVMLError_NotFound,
        NVMLError_LibraryNotFound,
        NVMLError_GpuIsLost,
    )
}


@dataclass(frozen=True)
class Memory:
    """``c_nvmlMemory_t``: bytes."""

    total: int
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


class _Handle:
    """Opaque, as NVML's ``c_nvmlDevice_t``."""

    __slots__ = ("bus", "generation")

    def __init__(self, bus: str, generation: int) -> None:
        self.bus = bus
        self.generation = generation


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


class FakeNvml:
    """The module ``pynvml``, faked: GPUs by PCI address, their memory and processes."""

    NVMLError = NVMLError
    NVMLError_Uninitialized = NVMLError_Uninitialized
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_NotFound = NVMLError_NotFound
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVMLError_GpuIsLost = NVMLError_GpuIsLost
    NVML_ERROR_UNINITIALIZED = NVML_ERROR_UNINITIALIZED
    NVML_ERROR_INVALID_ARGUMENT = NVML_ERROR_INVALID_ARGUMENT
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVML_ERROR_NOT_FOUND = NVML_ERROR_NOT_FOUND
    NVML_ERROR_LIBRARY_NOT_FOUND = NVML_ERROR_LIBRARY_NOT_FOUND
    NVML_ERROR_GPU_IS_LOST = NVML_ERROR_GPU_IS_LOST

    def __init__(self, library: bool = True, state_file: str | Path | None = None) -> None:
        self.library = library
        self.state_file = Path(state_file) if state_file else None
        self.gpus: dict[str, _Gpu] = {}
        self.init_count = 0
        self.calls: list[str] = []
        self.failing = False  # every call after nvmlInit raises NVML_ERROR_UNKNOWN (a driver in trouble)
        self._generation = 0
        self._clock = 1_000_000  # microseconds, as NVML's sample timestamps

    # -- the test's side ----------------------------------------------------------------------------

    def add_gpu(self, bus_id: str, total: int, reserved: int = 512 * 1024 * 1024, utilization: bool = True) -> None:
        if total <= 0 or not 0 <= reserved < total:
            raise ValueError("a GPU needs total > reserved >= 0 bytes")
        self._generation += 1
        gpu_uuid = f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'{bus_id}/{self._generation}')}"
        self.gpus[_bus_key(bus_id)] = _Gpu(total, reserved, self._generation, uuid=gpu_uuid, utilization=utilization)

    def uuid_of(self, bus_id: str) -> str:
        return self.gpus[_bus_key(bus_id)].uuid

    def sample(self, bus_id: str, pid: int, sm: int, mem: int = 0) -> None:
        """NVML sampled the process: ``sm`` percent of the SMs busy (a later timestamp than every sample before)."""
        gpu = self.gpus[_bus_key(bus_id)]
        if pid not in gpu.processes or not 0 <= sm <= 100:
            raise ValueError(f"pid {pid} does not run on {bus_id}, or {sm} is no percent")
        self._clock += 1000
        gpu.samples = (gpu.samples + [[pid, self._clock, sm, mem]])[-SAMPLES_KEPT:]

    def remove_gpu(self, bus_id: str) -> None:
        """The GPU fell off the bus: NOT_FOUND for its bus ID, GPU_IS_LOST for handles taken before."""
        del self.gpus[_bus_key(bus_id)]

    def run(self, bus_id: str, pid: int, used: int | None, mps_client: bool = False) -> None:
        """A process uses ``used`` bytes of the GPU (again: its use changes); refused beyond the GPU's memory."""
        gpu = self.gpus[_bus_key(bus_id)]
        others = sum(u or 0 for p, (u, _m) in gpu.processes.items() if p != pid)
        if used is not None and (used < 0 or gpu.reserved + others + used > gpu.total):
            raise ValueError(f"{used} bytes do not fit on {bus_id}")
        gpu.processes[pid] = (used, mps_client)

    def end(self, bus_id: str, pid: int) -> None:
        del self.gpus[_bus_key(bus_id)].processes[pid]

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
            }
            for bus, gpu in self.gpus.items()
        }
        tmp = Path(str(path) + ".tmp")
        tmp.write_text(json.dumps({"library": self.library, "failing": self.failing, "gpus": state}))
        tmp.replace(path)

    @classmethod
    def from_state_file(cls, path: str | Path) -> FakeNvml:
        fake = cls(state_file=path)
        fake._load()
        return fake

    def _load(self) -> None:
        if self.state_file is None:
            return
        data = json.loads(self.state_file.read_text())
        self.library = data["library"]
        self.failing = data.get("failing", False)
        self.gpus = {
            bus: _Gpu(
                g["total"],
                g["reserved"],
                g["generation"],
                {p: (u, m) for p, u, m in g["processes"]},
                g.get("uuid", ""),
                g.get("utilization", True),
                g.get("samples", []),
            )
            for bus, g in data["gpus"].items()
        }

    # -- pynvml's functions -----------------------------------------------------------------------

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

    def _gpu(self, handle: Any) -> _Gpu:
        self._initialized()
        self._loaded()
        if not isinstance(handle, _Handle):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.gpus.get(handle.bus)
        if gpu is None or gpu.generation != handle.generation:
            raise NVMLError(NVML_ERROR_GPU_IS_LOST)
        return gpu

    def nvmlDeviceGetHandleByPciBusId(self, pciBusId: Any) -> _Handle:
        self.calls.append("nvmlDeviceGetHandleByPciBusId")
        self._initialized()
        self._loaded()
        key = _bus_key(pciBusId)
        gpu = self.gpus.get(key)
        if gpu is None:
            raise NVMLError(NVML_ERROR_NOT_FOUND)
        return _Handle(key, gpu.generation)

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Memory:
        self.calls.append("nvmlDeviceGetMemoryInfo")
        gpu = self._gpu(handle)
        used = gpu.reserved + sum(u or 0 for u, _m in gpu.processes.values())
        return Memory(total=gpu.total, free=gpu.total - used, used=used)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[ProcessInfo]:
        self.calls.append("nvmlDeviceGetComputeRunningProcesses")
        gpu = self._gpu(handle)
        return [ProcessInfo(pid, used) for pid, (used, mps) in sorted(gpu.processes.items()) if not mps]

    def nvmlDeviceGetMPSComputeRunningProcesses(self, handle: Any) -> list[ProcessInfo]:
        self.calls.append("nvmlDeviceGetMPSComputeRunningProcesses")
        gpu = self._gpu(handle)
        return [ProcessInfo(pid, used) for pid, (used, mps) in sorted(gpu.processes.items()) if mps]

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        self.calls.append("nvmlDeviceGetUUID")
        return self._gpu(handle).uuid

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

    def process(self, bus_id: str, gib: float, cgroup: str, mps_client: bool = True) -> int:
        """A new process using ``gib`` GiB of the GPU, in ``cgroup``; its PID."""
        self.pid += 1
        (self.procfs / str(self.pid)).mkdir(parents=True)
        (self.procfs / str(self.pid) / "cgroup").write_text(cgroup + "\n")
        self.nvml.run(bus_id, self.pid, int(gib * GIB), mps_client)
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
