# SPDX-License-Identifier: Apache-2.0
"""The NVML calls MIG needs (:mod:`aligned_dra_driver.mig.prepare`), on the module ``pynvml`` as nvidia-ml-py
has it (list calls fill a buffer of handles and a count; a placement goes by reference), or the tests' fake.

Fail closed: when profiles, instances, compute instances and MIG devices are listed, only the answers NVML
documents for "no such index" (``NOT_SUPPORTED``, ``INVALID_ARGUMENT``; ``NOT_FOUND`` for a MIG device index)
mean "not there"; every other error raises, so that an error never reads as "no instance". No profile at all
is confirmed on the same handle (:meth:`Nvml.profiles`): a stale handle raises, it never reads as "no instance".
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ..claims.container_edits import PrepareError
from ..collection import mig_state

ERRORS = {"INVALID_ARGUMENT": 2, "NOT_SUPPORTED": 3, "NOT_FOUND": 6, "GPU_IS_LOST": 15, "RESET_REQUIRED": 16}
ERRORS.update(IN_USE=19, INSUFFICIENT_RESOURCES=23)
ABSENT = ("NOT_SUPPORTED", "INVALID_ARGUMENT")  # a profile index the GPU (instance) lacks, one past the enum


def text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _profile_name(info: Any) -> str:
    """``MIG 1g.10gb`` (NVML's v2 name) → ``1g.10gb``."""
    name = text(getattr(info, "name", "")).strip()
    return name[4:] if name.startswith("MIG ") else name


class Instance(SimpleNamespace):
    """A GPU instance as found: ``gi`` (NVML's handle), ``id``, ``profile_id``, ``profile``, ``start``,
    ``size``, ``slices``, ``cis`` ([(handle, id)])."""


class Nvml:
    """The NVML calls MIG needs, on the module ``pynvml`` (or the tests' fake)."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib

    def code(self, exc: BaseException) -> int | None:
        error = getattr(self.lib, "NVMLError", None)
        if isinstance(error, type) and isinstance(exc, error):
            return getattr(exc, "value", None)
        return None

    def is_error(self, exc: BaseException, name: str) -> bool:
        return self.code(exc) == getattr(self.lib, f"NVML_ERROR_{name}", ERRORS.get(name))

    def handle(self, pci: str) -> Any:
        return self.lib.nvmlDeviceGetHandleByPciBusId(pci.encode("ascii"))

    def architecture(self, handle: Any) -> int:
        return int(self.lib.nvmlDeviceGetArchitecture(handle))

    def mig_mode(self, handle: Any) -> bool | None:
        """Current MIG mode; None for a GPU without MIG."""
        try:
            current, _pending = self.lib.nvmlDeviceGetMigMode(handle)
        except Exception as exc:
            if self.is_error(exc, "NOT_SUPPORTED"):
                return None
            raise
        return bool(current)

    def absent(self, exc: BaseException, *names: str) -> bool:
        """Whether NVML's error means "not there" (``names``, default :data:`ABSENT`), not a failure."""
        return any(self.is_error(exc, name) for name in names or ABSENT)

    def _indexed(self, call: Callable[[int], Any], count: int) -> list[Any]:
        """The infos of every profile index the GPU (instance) answers for; any other NVML error raises."""
        infos = []
        for index in range(count):
            try:
                infos.append(call(index))
            except Exception as exc:
                if not self.absent(exc):
                    raise
        return infos

    def profiles(self, handle: Any) -> list[Any]:
        """GPU instance profile infos (MIG mode on; none while it is off: NVML answers NOT_SUPPORTED).

        None found is confirmed: a handle taken before a MIG mode change (``nvidia-smi``, mig-parted) answers
        INVALID_ARGUMENT for every index, which says nothing of the GPU. So the MIG mode is read on the same
        handle, which raises for such a handle, and MIG mode on without a profile raises too."""
        count = int(getattr(self.lib, "NVML_GPU_INSTANCE_PROFILE_COUNT", mig_state.GPU_INSTANCE_PROFILE_COUNT))
        infos = self._indexed(lambda index: self.lib.nvmlDeviceGetGpuInstanceProfileInfo(handle, index), count)
        if not infos and self.mig_mode(handle):
            raise PrepareError("NVML offers no MIG profile while MIG mode is on: its instances cannot be listed")
        return infos

    def profile(self, handle: Any, name: str, pci: str) -> Any:
        for info in self.profiles(handle):
            if _profile_name(info) == name:
                return info
        raise PrepareError(f"GPU {pci} has no MIG profile {name!r} (is MIG mode on?)")

    def instances(self, handle: Any) -> list[Instance]:
        """Every GPU instance on the GPU, with its compute instances."""
        found = []
        for info in self.profiles(handle):
            for gi in mig_state.gpu_instances(self.lib, handle, info.id, int(info.instanceCount)):
                gi_info = self.lib.nvmlGpuInstanceGetInfo(gi)
                place = gi_info.placement
                found.append(
                    Instance(
                        gi=gi,
                        id=int(gi_info.id),
                        profile_id=int(info.id),
                        profile=_profile_name(info),
                        start=int(place.start),
                        size=int(place.size),
                        slices=int(info.sliceCount),
                        cis=self.compute_instances(gi),
                    )
                )
        return found

    def _ci_profiles(self, gi: Any) -> list[Any]:
        engine = getattr(self.lib, "NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED", 0)
        count = int(getattr(self.lib, "NVML_COMPUTE_INSTANCE_PROFILE_COUNT", mig_state.COMPUTE_INSTANCE_PROFILE_COUNT))
        return self._indexed(
            lambda index: self.lib.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, index, engine), count
        )

    def compute_instances(self, gi: Any) -> list[tuple[Any, int]]:
        out = []
        for info in self._ci_profiles(gi):
            for ci in mig_state.compute_instances(self.lib, gi, info.id, int(info.instanceCount)):
                out.append((ci, int(self.lib.nvmlComputeInstanceGetInfo(ci).id)))
        return out

    def placement(self, start: int, size: int) -> Any:
        cls = getattr(self.lib, "c_nvmlGpuInstancePlacement_t", None)
        placement = cls() if cls is not None else SimpleNamespace()
        placement.start, placement.size = start, size
        # the real pynvml hands it to C as is: a ctypes structure goes by reference (the C side takes a pointer)
        return ctypes.byref(placement) if isinstance(placement, ctypes.Structure) else placement

    def create(self, handle: Any, info: Any, start: int, size: int) -> Any:
        return self.lib.nvmlDeviceCreateGpuInstanceWithPlacement(handle, info.id, self.placement(start, size))

    def create_ci(self, gi: Any, slices: int) -> int:
        """The compute instance that spans the GPU instance; its id."""
        for info in self._ci_profiles(gi):
            if int(info.sliceCount) == slices:
                ci = self.lib.nvmlGpuInstanceCreateComputeInstance(gi, info.id)
                return int(self.lib.nvmlComputeInstanceGetInfo(ci).id)
        raise PrepareError(f"no compute instance profile spans {slices} slice(s)")

    def gpu_processes(self, handle: Any) -> list[int]:
        """PIDs of every compute process NVML lists on the GPU (on any of its instances)."""
        return sorted({int(p.pid) for p in self.lib.nvmlDeviceGetComputeRunningProcesses(handle)})

    def minor(self, handle: Any) -> int:
        return int(self.lib.nvmlDeviceGetMinorNumber(handle))

    def processes(self, handle: Any, gi_id: int) -> list[int]:
        """PIDs running on the GPU instance (NVML lists them on the parent with their instance ids)."""
        return sorted(
            int(p.pid)
            for p in self.lib.nvmlDeviceGetComputeRunningProcesses(handle)
            if getattr(p, "gpuInstanceId", None) == gi_id
        )

    def mig_uuid(self, handle: Any, gi_id: int, ci_id: int) -> str | None:
        for index in range(int(self.lib.nvmlDeviceGetMaxMigDeviceCount(handle))):
            try:
                mig = self.lib.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
            except Exception as exc:
                if not self.absent(exc, "NOT_FOUND", "INVALID_ARGUMENT"):  # NOT_FOUND: no MIG device at the index
                    raise
                continue
            if (self.lib.nvmlDeviceGetGpuInstanceId(mig), self.lib.nvmlDeviceGetComputeInstanceId(mig)) == (
                gi_id,
                ci_id,
            ):
                return text(self.lib.nvmlDeviceGetUUID(mig))
        return None

    def destroy(self, instance: Instance) -> None:
        """Its compute instances, then itself; NVML's IN_USE passes through."""
        for ci, _ci_id in instance.cis:
            self.lib.nvmlComputeInstanceDestroy(ci)
        self.lib.nvmlGpuInstanceDestroy(instance.gi)


def at(instances: list[Instance], start: int, size: int, profile: str | None = None) -> Instance | None:
    return next((i for i in instances if i.start == start and i.size == size and profile in (None, i.profile)), None)
