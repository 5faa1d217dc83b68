# SPDX-License-Identifier: Apache-2.0
"""A small MIG fake for the driver's MIG tests (the names and errors of nvidia-ml-py's ``pynvml``), on top of
tests/support/fakes/nvml.py's errors; it writes the nvidia-caps access files under a procfs root."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ansible_collections.aligned.dra.tests.support.fakes import nvml as fake_nvml

NVMLError = fake_nvml.NVMLError
IN_USE, RESET_REQUIRED, INSUFFICIENT_RESOURCES = 19, 16, 23
# (index, profile id, name, slices, placement starts, placement size): the A100-SXM4-40GB's
GI_PROFILES = [
    (0, 19, "1g.5gb", 1, [0, 1, 2, 3, 4, 5, 6], 1),
    (1, 14, "2g.10gb", 2, [0, 2, 4], 2),
    (2, 9, "3g.20gb", 3, [0, 4], 4),
    (3, 5, "4g.20gb", 4, [0], 4),
    (4, 0, "7g.40gb", 7, [0], 8),
]
CI_PROFILES = [(0, 0, 1), (1, 1, 2), (2, 2, 3), (3, 3, 4), (4, 4, 7)]  # (index, id, slices)


@dataclass
class Gi:
    id: int
    profile: tuple[Any, ...]
    start: int
    size: int
    cis: dict[int, int] = field(default_factory=dict)  # ci id -> ci profile id


@dataclass
class Gpu:
    bus: str
    arch: int
    minor: int
    uuid: str
    mig: int = 1
    gis: dict[int, Gi] = field(default_factory=dict)
    processes: dict[int, tuple[int, int, int]] = field(default_factory=dict)  # pid -> (gi, ci, bytes)


class c_nvmlGpuInstancePlacement_t(ctypes.Structure):
    _fields_ = [("start", ctypes.c_uint), ("size", ctypes.c_uint)]


def _listed(items: list[Any], array: Any, count: Any) -> int:
    """Fill an NVML list call's buffer and count (``byref(c_uint)``), as the library does."""
    if len(array) < len(items):
        raise NVMLError(7)  # NVML_ERROR_INSUFFICIENT_SIZE
    for index, item in enumerate(items):
        array[index] = item
    count._obj.value = len(items)
    return 0


class MigNvml:
    """``pynvml`` with MIG: GPUs by PCI address (architecture 7 Ampere, 9 Hopper)."""

    NVMLError = NVMLError
    NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED = 0
    # handles held in ctypes buffers: any Python object here
    c_nvmlGpuInstance_t = ctypes.py_object
    c_nvmlComputeInstance_t = ctypes.py_object
    c_nvmlGpuInstancePlacement_t = c_nvmlGpuInstancePlacement_t

    def __init__(self, procfs: Path) -> None:
        self.procfs = procfs
        self.gpus: dict[str, Gpu] = {}
        self.next_minor = 100
        (procfs / "devices").parent.mkdir(parents=True, exist_ok=True)
        (procfs / "devices").write_text("Character devices:\n195 nvidia\n237 nvidia-caps\n")

    # -- the test's side
    def add_gpu(self, bus: str, arch: int = 9, mig: int = 1, minor: int = 0) -> Gpu:
        self.gpus[bus] = Gpu(bus, arch, minor, f"GPU-0000-{minor}", mig)
        return self.gpus[bus]

    def run(self, bus: str, pid: int, gi: int, used: int = 1 << 30) -> None:
        self.gpus[bus].processes[pid] = (gi, 0, used)

    def reset(self, bus: str) -> None:
        """A reboot: every instance (and its caps files) gone."""
        for gi in list(self.gpus[bus].gis.values()):
            self._remove_caps(self.gpus[bus], gi)
        self.gpus[bus].gis = {}
        self.gpus[bus].processes = {}

    def _caps(self, gpu: Gpu, gi: int, ci: int | None = None) -> Path:
        path = self.procfs / "driver" / "nvidia" / "capabilities" / f"gpu{gpu.minor}" / "mig" / f"gi{gi}"
        return (path / f"ci{ci}" if ci is not None else path) / "access"

    def _write_caps(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.next_minor += 1
        path.write_text(f"DeviceFileMinor: {self.next_minor}\nDeviceFileMode: 292\n")

    def _remove_caps(self, gpu: Gpu, gi: Gi) -> None:
        for ci in gi.cis:
            self._caps(gpu, gi.id, ci).unlink()
        self._caps(gpu, gi.id).unlink()

    # -- pynvml
    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetHandleByPciBusId(self, bus: Any) -> Gpu:
        bus = bus.decode() if isinstance(bus, bytes) else bus
        if bus not in self.gpus:
            raise NVMLError(fake_nvml.NVML_ERROR_NOT_FOUND)
        return self.gpus[bus]

    def nvmlDeviceGetArchitecture(self, h: Gpu) -> int:
        return h.arch

    def nvmlDeviceGetMinorNumber(self, h: Gpu) -> int:
        return h.minor

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return h.uuid

    def nvmlDeviceGetMigMode(self, h: Gpu) -> list[int]:
        return [h.mig, h.mig]

    def nvmlDeviceSetMigMode(self, h: Gpu, mode: int) -> int:
        if mode == 0 and h.gis:
            raise NVMLError(IN_USE)
        if h.arch < 9:
            raise NVMLError(RESET_REQUIRED)
        h.mig = mode
        return 0

    def _profile(self, h: Gpu, index: int) -> tuple[Any, ...]:
        if not h.mig or not 0 <= index < len(GI_PROFILES):
            raise NVMLError(fake_nvml.NVML_ERROR_NOT_SUPPORTED)
        return GI_PROFILES[index]

    def nvmlDeviceGetGpuInstanceProfileInfo(self, h: Gpu, index: int, version: int = 2) -> Any:
        _i, pid, name, slices, _starts, _size = self._profile(h, index)
        return SimpleNamespace(id=pid, sliceCount=slices, instanceCount=8 // slices, name=f"MIG {name}".encode())

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, h: Gpu, profile_id: int, placement: Any) -> Any:
        placement = getattr(placement, "_obj", placement)  # byref(placement), as pynvml hands it to C
        profile = next((p for p in GI_PROFILES if p[1] == profile_id), None)
        if profile is None or placement.start not in profile[4] or placement.size != profile[5]:
            raise NVMLError(fake_nvml.NVML_ERROR_INVALID_ARGUMENT)
        wanted = set(range(placement.start, placement.start + placement.size))
        if any(wanted & set(range(g.start, g.start + g.size)) for g in h.gis.values()):
            raise NVMLError(INSUFFICIENT_RESOURCES)
        gi = Gi(max(h.gis, default=0) + 1, profile, placement.start, placement.size)
        h.gis[gi.id] = gi
        self._write_caps(self._caps(h, gi.id))
        return (h, gi)

    def nvmlDeviceGetGpuInstances(self, h: Gpu, profile_id: int, array: Any, count: Any) -> int:
        return _listed([(h, g) for g in h.gis.values() if g.profile[1] == profile_id], array, count)

    def nvmlGpuInstanceGetInfo(self, gi: Any) -> Any:
        _h, g = gi
        return SimpleNamespace(id=g.id, profileId=g.profile[1], placement=SimpleNamespace(start=g.start, size=g.size))

    def nvmlGpuInstanceDestroy(self, gi: Any) -> None:
        h, g = gi
        if g.cis or any(p[0] == g.id for p in h.processes.values()):
            raise NVMLError(IN_USE)
        self._remove_caps(h, g)
        del h.gis[g.id]

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(self, gi: Any, index: int, engine: int) -> Any:
        _h, g = gi
        if index >= len(CI_PROFILES) or CI_PROFILES[index][2] > g.profile[3]:
            raise NVMLError(fake_nvml.NVML_ERROR_NOT_SUPPORTED)
        slices = CI_PROFILES[index][2]
        return SimpleNamespace(id=CI_PROFILES[index][1], sliceCount=slices, instanceCount=g.profile[3] // slices)

    def nvmlGpuInstanceCreateComputeInstance(self, gi: Any, profile_id: int) -> Any:
        h, g = gi
        ci = max(g.cis, default=-1) + 1
        g.cis[ci] = profile_id
        self._write_caps(self._caps(h, g.id, ci))
        return (h, g, ci)

    def nvmlGpuInstanceGetComputeInstances(self, gi: Any, profile_id: int, array: Any, count: Any) -> int:
        h, g = gi
        return _listed([(h, g, c) for c, p in g.cis.items() if p == profile_id], array, count)

    def nvmlComputeInstanceGetInfo(self, ci: Any) -> Any:
        return SimpleNamespace(id=ci[2])

    def nvmlComputeInstanceDestroy(self, ci: Any) -> None:
        h, g, c = ci
        if any(p[:2] == (g.id, c) for p in h.processes.values()):
            raise NVMLError(IN_USE)
        self._caps(h, g.id, c).unlink()
        del g.cis[c]

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        return [fake_nvml.ProcessInfo(pid, used, gi, ci) for pid, (gi, ci, used) in sorted(h.processes.items())]

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Any:
        """A MIG handle: its instance's memory (5 GiB a slice) and its processes' use."""
        gpu = self.gpus[h.bus]
        total = 5 * (1 << 30) * gpu.gis[h.gi].size
        used = sum(u for gi, _ci, u in gpu.processes.values() if gi == h.gi)
        return fake_nvml.Memory(total=total, free=total - used, used=used)

    def nvmlDeviceGetMaxMigDeviceCount(self, h: Gpu) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: Gpu, index: int) -> Any:
        devices = [(g.id, c) for g in sorted(h.gis.values(), key=lambda g: g.id) for c in sorted(g.cis)]
        if index >= len(devices):
            raise NVMLError(fake_nvml.NVML_ERROR_NOT_FOUND)
        gi, ci = devices[index]
        return SimpleNamespace(bus=h.bus, gi=gi, ci=ci, uuid=f"MIG-{h.bus}-{gi}")

    def nvmlDeviceGetGpuInstanceId(self, mig: Any) -> int:
        return mig.gi

    def nvmlDeviceGetComputeInstanceId(self, mig: Any) -> int:
        return mig.ci
