# SPDX-License-Identifier: Apache-2.0
"""FAKE NVML, its MIG part, for the tests (never shipped): mixed into ``nvml.FakeNvml`` (one class, one module).

Test-side API (``from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml``)::

    nvml = FakeNvml(procfs=tmp_path / "proc")           # procfs: the nvidia-caps access files and devices go there
    nvml.add_gpu("0000:18:00.0", model="A100-SXM4-40GB")  # minor 0 (the order added, or minor=N); memory: the model's
    nvml.add_gpu("0000:2a:00.0", model="H100-SXM5-80GB")  # minor 1
    nvml.add_gpu("0000:3b:00.0", model="L40S")            # not MIG-capable (a GPU added without a model is one too)
    nvml.enable_mig("0000:18:00.0")                       # MIG on, as a node booted so (no pending, no reset)
    nvml.nvmlInit(); h = nvml.nvmlDeviceGetHandleByPciBusId("0000:2a:00.0")
    nvml.nvmlDeviceSetMigMode(h, 1)                       # Hopper, idle: on now (0); Ampere: pending, 16 RESET_REQUIRED
    nvml.reset("0000:18:00.0")                            # GPU reset: pending mode applies, every instance goes
    nvml.reset("0000:18:00.0", reboot=True)               # a reboot: the same, and the GPU's processes end
    gi = nvml.create("0000:2a:00.0", "1g.10gb", start=6)  # a GPU instance + its full compute instance (ci 0): gi id
    nvml.create("0000:2a:00.0", "1g.10gb", start=5, compute=False); nvml.create_compute("0000:2a:00.0", 12)  # apart
    nvml.run("0000:2a:00.0", 4242, 1 << 30, gpu_instance=gi)  # a process on that MIG device (compute_instance=0)
    nvml.end("0000:2a:00.0", 4242)
    nvml.instances("0000:2a:00.0")  # [{"id", "profile", "profile_id", "start", "size", "cis": [ci ids], "uuid"}]
    nvml.write_state(path)          # for a driver process (write_module); what it creates or destroys is written back,
    nvml = FakeNvml.from_state_file(path)  # so go on with a fake bound to the file: it reads it before every change
                                           # and call, and writes each change back (library, failing: write_state)

From code under test, call pynvml as the real one is called: the list calls take ctypes buffers
(:func:`ansible_collections.aligned.dra.plugins.module_utils.node.mig.nvml_state.possible_placements`,
``gpu_instances`` and ``compute_instances`` wrap them), a placement goes as ``byref(placement)``.

Strict as the real library (figures from NVIDIA's MIG user guide, IDs as ``nvidia-smi mig -lgip`` shows them):

- models (``nvml_models.py``): A100-SXM4-40GB (Ampere), H100-SXM5-80GB (Hopper), RTX-PRO-6000-96GB (Blackwell,
  with the variants of one size NVML offers: ``1g.24gb``, ``+me``, ``+gfx``, ``+me.all``, ``-me``), L40S (no MIG);
  an Ampere GPU in MIG mode: ``enable_mig`` (as booted so), or ``nvmlDeviceSetMigMode`` then :meth:`MigNvml.reset`;
- ``nvmlDeviceGetMigMode`` of a GPU without MIG: NOT_SUPPORTED; ``nvmlDeviceSetMigMode`` returns NVML's
  activation status, as pynvml does (an error code, not raised): Hopper and newer idle: on at once (0), with
  processes: pending (19 IN_USE: a GPU that is not idle keeps its mode); Ampere: pending (16 RESET_REQUIRED)
  until :meth:`MigNvml.reset`; disabling with instances raises IN_USE and changes nothing;
- handles change with the MIG mode: after an effective change (``nvmlDeviceSetMigMode`` that took effect, or a
  reset that applied a pending mode) every handle of that GPU taken before (the GPU's, its instances', its MIG
  devices') raises INVALID_ARGUMENT, as NVML may reset and re-enumerate the GPU for the change; take a new one
  with ``nvmlDeviceGetHandleByPciBusId``. GPU_IS_LOST stays for a GPU that fell off the bus (``remove_gpu``);
- profile info, placements, capacity, instance calls with MIG mode (current) off: NOT_SUPPORTED; a profile index
  the GPU lacks: NOT_SUPPORTED (one past the enum: INVALID_ARGUMENT); an unknown profile ID: INVALID_ARGUMENT;
- ``nvmlDeviceCreateGpuInstanceWithPlacement``: a placement not offered: INVALID_ARGUMENT; taken slices or the
  profile's instance count reached: INSUFFICIENT_RESOURCES; GPU instance IDs as NVML gives them (the swizzle:
  size 8 -> 0, size 4 -> 1 + start/4, size 2 -> 3 + start/2, size 1 -> 7 + start);
- destroying a GPU instance with compute instances or processes, a compute instance with processes: IN_USE;
- a handle of a destroyed instance: INVALID_ARGUMENT; a MIG device handle where only a GPU's is taken:
  NOT_SUPPORTED; ``nvmlDeviceGetGpuInstanceId`` of a GPU's handle: NOT_SUPPORTED;
- nvidia-caps: ``<procfs>/driver/nvidia/capabilities/gpu<minor>/mig/gi<G>[/ci<C>]/access`` (minors as the
  driver's ``mig-minors``: 3 + 135 * gpu minor + 9 * G [+ 1 + C]) and ``<procfs>/devices``' nvidia-caps line.
"""

from __future__ import annotations

import ctypes
import importlib.util
import sys
import uuid
from pathlib import Path
from typing import Any

try:  # the package's sibling (tests import tests.support.fakes.nvml_mig)
    from . import nvml_models
except ImportError:  # loaded by its path (write_module's pynvml.py): the sibling by its path too
    _spec = importlib.util.spec_from_file_location(
        "aligned_dra_fake_nvml_models", Path(__file__).with_name("nvml_models.py")
    )
    nvml_models = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = nvml_models
    _spec.loader.exec_module(nvml_models)

MIB, Profile, GpuModel, MODELS, DEFAULT_MODEL = (
    nvml_models.MIB,
    nvml_models.Profile,
    nvml_models.GpuModel,
    nvml_models.MODELS,
    nvml_models.DEFAULT_MODEL,
)
gi_id, memory_units = nvml_models.gi_id, nvml_models.memory_units
CAPS_MAJOR = 237


class _Printable(ctypes.Structure):
    """As pynvml's ``_PrintableStructure``: char arrays read as str."""

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        return value.decode() if isinstance(value, bytes) else value

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value.encode() if isinstance(value, str) else value)


class struct_c_nvmlDevice_t(ctypes.Structure):
    pass


class struct_c_nvmlGpuInstance_t(ctypes.Structure):
    pass


class struct_c_nvmlComputeInstance_t(ctypes.Structure):
    pass


c_nvmlDevice_t = ctypes.POINTER(struct_c_nvmlDevice_t)
c_nvmlGpuInstance_t = ctypes.POINTER(struct_c_nvmlGpuInstance_t)
c_nvmlComputeInstance_t = ctypes.POINTER(struct_c_nvmlComputeInstance_t)
_U, _UL = ctypes.c_uint, ctypes.c_ulonglong


class c_nvmlGpuInstancePlacement_t(_Printable):
    _fields_ = [("start", _U), ("size", _U)]


class c_nvmlComputeInstancePlacement_t(_Printable):
    _fields_ = [("start", _U), ("size", _U)]


_ENGINES = [("copyEngineCount", _U), ("decoderCount", _U), ("encoderCount", _U), ("jpegCount", _U), ("ofaCount", _U)]
_GI_INFO = [("id", _U), ("isP2pSupported", _U), ("sliceCount", _U), ("instanceCount", _U), ("multiprocessorCount", _U)]


class c_nvmlGpuInstanceProfileInfo_t(_Printable):
    _fields_ = _GI_INFO + _ENGINES + [("memorySizeMB", _UL)]


class c_nvmlGpuInstanceProfileInfo_v2_t(_Printable):
    _fields_ = [("version", _U)] + _GI_INFO + _ENGINES + [("memorySizeMB", _UL), ("name", ctypes.c_char * 96)]


class c_nvmlGpuInstanceInfo_t(_Printable):
    _fields_ = [("device", c_nvmlDevice_t), ("id", _U), ("profileId", _U), ("placement", c_nvmlGpuInstancePlacement_t)]


class c_nvmlComputeInstanceProfileInfo_v2_t(_Printable):
    _fields_ = [
        ("version", _U),
        ("id", _U),
        ("sliceCount", _U),
        ("instanceCount", _U),
        ("multiprocessorCount", _U),
        ("sharedCopyEngineCount", _U),
        ("sharedDecoderCount", _U),
        ("sharedEncoderCount", _U),
        ("sharedJpegCount", _U),
        ("sharedOfaCount", _U),
        ("name", ctypes.c_char * 96),
    ]


class c_nvmlComputeInstanceInfo_t(_Printable):
    _fields_ = [
        ("device", c_nvmlDevice_t),
        ("gpuInstance", c_nvmlGpuInstance_t),
        ("id", _U),
        ("profileId", _U),
        ("placement", c_nvmlComputeInstancePlacement_t),
    ]


GI_PROFILE_COUNT = 18  # NVML_GPU_INSTANCE_PROFILE_COUNT
CI_SLICES = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7, 5: 8, 6: 6}  # NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE -> n
CI_PROFILE_COUNT = 9
CI_SIZES = {1: (1,), 2: (1, 2), 3: (1, 2, 3), 4: (1, 2, 4), 7: (1, 2, 3, 4, 7)}  # GI compute slices -> CI sizes
MAX_MIG_DEVICES = 7
_SLICES = "1_SLICE 2_SLICE 3_SLICE 4_SLICE 7_SLICE 8_SLICE 6_SLICE 1_SLICE_REV1 2_SLICE_REV1 1_SLICE_REV2".split()
CONSTANTS = {  # pynvml's values (the conformance test holds them to the real module's)
    **{f"NVML_DEVICE_ARCH_{n}": v for n, v in [("AMPERE", 7), ("ADA", 8), ("HOPPER", 9), ("BLACKWELL", 10)]},
    "NVML_DEVICE_ARCH_UNKNOWN": 0xFFFFFFFF,
    "NVML_DEVICE_MIG_DISABLE": 0,
    "NVML_DEVICE_MIG_ENABLE": 1,
    **{f"NVML_GPU_INSTANCE_PROFILE_{n}": i for i, n in enumerate(_SLICES)},
    "NVML_GPU_INSTANCE_PROFILE_COUNT": GI_PROFILE_COUNT,
    **{f"NVML_COMPUTE_INSTANCE_PROFILE_{n}": i for i, n in enumerate(_SLICES[:7])},
    "NVML_COMPUTE_INSTANCE_PROFILE_COUNT": CI_PROFILE_COUNT,
    "NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED": 0,
    "NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT": 1,
}


def caps_minor(gpu_minor: int, gi: int, ci: int | None = None) -> int:
    """The nvidia-caps minor of a GPU instance (``ci`` None) or compute instance, as the driver's mig-minors."""
    return 3 + 135 * gpu_minor + 9 * gi + (0 if ci is None else 1 + ci)


def _overlap(a_start: int, a_size: int, b_start: int, b_size: int) -> bool:
    return a_start < b_start + b_size and b_start < a_start + a_size


def _out(ref: Any, cls: Any) -> Any:
    """The object behind ``byref(x)`` or ``pointer(x)`` (NVML's out and in pointers); else INVALID_ARGUMENT."""
    obj = getattr(ref, "_obj", None)
    if obj is None and isinstance(ref, ctypes._Pointer) and ref:
        obj = ref.contents
    if isinstance(cls, tuple):  # field names: a structure of that layout, whichever module defined it
        return obj if isinstance(obj, ctypes.Structure) and tuple(f[0] for f in obj._fields_) == cls else None
    return obj if isinstance(obj, cls) else None


class MigNvml:
    """The MIG calls of ``pynvml`` (mixed into ``FakeNvml``, which gives ``gpus``, ``_device``, ``_changed`` and
    the errors); pynvml's constants and ctypes types are set on it below the class."""

    def _resolve(self, key: tuple) -> tuple[Any, dict | None, dict | None]:
        """(gpu, gpu instance, compute instance) of a handle's key; GPU_IS_LOST, INVALID_ARGUMENT when gone."""
        gpu = self.gpus.get(key[1])
        generation, epoch = key[2]
        if gpu is None or gpu.generation != generation:
            raise self.NVMLError(self.NVML_ERROR_GPU_IS_LOST)
        if gpu.mig.get("epoch", 0) != epoch:  # taken before an effective MIG mode change
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        if len(key) == 3:
            return gpu, None, None
        gi = next((g for g in gpu.mig["instances"] if g["serial"] == key[3]), None)
        ci = None if gi is None or len(key) == 4 else next((c for c in gi["cis"] if c["serial"] == key[4]), None)
        if gi is None or (len(key) == 5 and ci is None):
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        return gpu, gi, ci

    @staticmethod
    def _era(gpu: Any) -> tuple[int, int]:
        """What a GPU handle taken now is bound to: the GPU (its generation) and its MIG mode epoch."""
        return gpu.generation, gpu.mig.get("epoch", 0)

    def _mode_changed(self, gpu: Any) -> None:
        """MIG mode changed in effect: every handle of the GPU taken before is no longer valid."""
        gpu.mig["epoch"] = gpu.mig.get("epoch", 0) + 1

    def _gi(self, handle: Any) -> tuple[Any, dict]:
        self._initialized()
        self._loaded()
        gpu, gi, _ci = self._resolve(self._key(handle, c_nvmlGpuInstance_t))
        return gpu, gi

    def _ci(self, handle: Any) -> tuple[Any, dict, dict]:
        self._initialized()
        self._loaded()
        return self._resolve(self._key(handle, c_nvmlComputeInstance_t))

    def _mig_on(self, handle: Any) -> Any:
        """The GPU of a handle whose MIG mode is on (current); NOT_SUPPORTED otherwise."""
        gpu = self._gpu(handle)
        if not MODELS[gpu.model].profiles or not gpu.mig["current"]:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return gpu

    def _profile_by_id(self, gpu: Any, profile_id: Any) -> Profile:
        found = next((p for p in MODELS[gpu.model].profiles if p.id == profile_id), None)
        if found is None or isinstance(profile_id, bool):
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        return found

    # -- the test's side -------------------------------------------------------------------------------

    def enable_mig(self, bus_id: str) -> None:
        """MIG mode on (current and pending), as a node booted with it: no reset needed."""
        gpu = self._test_gpu(bus_id)
        if not MODELS[gpu.model].profiles:
            raise ValueError(f"{bus_id} ({gpu.model}) has no MIG")
        gpu.mig["current"] = gpu.mig["pending"] = 1
        self._changed()

    def reset(self, bus_id: str, reboot: bool = False) -> None:
        """A GPU reset (refused, as nvidia-smi's, while a process runs) or a reboot (``reboot``: processes end):
        the pending MIG mode applies and every instance is gone (its nvidia-caps files too)."""
        gpu = self._test_gpu(bus_id)
        if gpu.processes and not reboot:
            raise ValueError(f"{bus_id} runs processes {sorted(gpu.processes)}: no GPU reset")
        if reboot:
            gpu.processes.clear()
            gpu.placed.clear()
        for gi in list(gpu.mig["instances"]):
            self._remove_caps(gpu, gi)
        gpu.mig["instances"] = []
        if gpu.mig["current"] != gpu.mig["pending"]:
            self._mode_changed(gpu)
        gpu.mig["current"] = gpu.mig["pending"]
        self._changed()

    def create(self, bus_id: str, profile: str, start: int | None = None, compute: bool = True) -> int:
        """A GPU instance of ``profile`` (its name) at ``start`` (None: where NVML would put it) with the compute
        instance spanning it (``compute`` False: without, as a layout made half-way), through the pynvml calls
        (their errors raise); the GPU instance's ID. Each instance made gets a MIG UUID of its own, a re-made one
        (the same placement and IDs, after a destroy or a reboot) a new one, as NVML's."""
        gpu = self._test_gpu(bus_id)
        found = next((p for p in MODELS[gpu.model].profiles if p.name == profile), None)
        if found is None:
            raise ValueError(f"{gpu.model} has no profile {profile}")
        handle = self._handle(c_nvmlDevice_t, ("gpu", self._bus(bus_id), self._era(gpu)))
        self.init_count += 1
        try:
            if start is None:
                gi = self.nvmlDeviceCreateGpuInstance(handle, found.id)
            else:
                placement = c_nvmlGpuInstancePlacement_t(start, found.size)
                gi = self.nvmlDeviceCreateGpuInstanceWithPlacement(handle, found.id, ctypes.byref(placement))
            gi_id = self.nvmlGpuInstanceGetInfo(gi).id
        finally:
            self.init_count -= 1
        if compute:
            self.create_compute(bus_id, gi_id)
        return gi_id

    def create_compute(self, bus_id: str, gpu_instance: int) -> int:
        """The compute instance spanning a GPU instance (by its ID), through the pynvml calls; its ID."""
        gpu = self._test_gpu(bus_id)
        handle = self._handle(c_nvmlDevice_t, ("gpu", self._bus(bus_id), self._era(gpu)))
        self.init_count += 1
        try:
            gi = self.nvmlDeviceGetGpuInstanceById(handle, gpu_instance)
            slices = self._profile_by_id(gpu, self._gi(gi)[1]["profile"]).slices
            ci_index = next(i for i, n in CI_SLICES.items() if n == slices)
            ci = self.nvmlGpuInstanceCreateComputeInstance(gi, ci_index)
            return self.nvmlComputeInstanceGetInfo(ci).id
        finally:
            self.init_count -= 1

    def instances(self, bus_id: str) -> list[dict[str, Any]]:
        gpu = self._test_gpu(bus_id)
        profiles = {p.id: p for p in MODELS[gpu.model].profiles}
        return [
            {
                "id": gi["id"],
                "profile": profiles[gi["profile"]].name,
                "profile_id": gi["profile"],
                "start": gi["start"],
                "size": gi["size"],
                "cis": [c["id"] for c in gi["cis"]],
                "uuid": {c["id"]: c["uuid"] for c in gi["cis"]},
            }
            for gi in sorted(gpu.mig["instances"], key=lambda g: g["id"])
        ]

    def mig_uuid(self, bus_id: str, gpu_instance: int, compute_instance: int = 0) -> str:
        gi = next(g for g in self._test_gpu(bus_id).mig["instances"] if g["id"] == gpu_instance)
        return next(c["uuid"] for c in gi["cis"] if c["id"] == compute_instance)

    def _test_gpu(self, bus_id: str) -> Any:
        self._load(gpus_only=True)  # a fake bound to a state file: what the driver process changed
        return self.gpus[self._bus(bus_id)]

    def _place(self, gpu: Any, pid: int, used: int | None, gpu_instance: int | None, compute_instance: int) -> None:
        """Where ``run`` puts a process: a MIG device (``gpu_instance``) of a GPU in MIG mode, or the GPU whole."""
        if gpu_instance is None:
            if gpu.mig["current"]:
                raise ValueError("MIG mode is on: a process runs on a MIG device (gpu_instance=)")
            return
        gi = next((g for g in gpu.mig["instances"] if g["id"] == gpu_instance), None)
        if gi is None or all(c["id"] != compute_instance for c in gi["cis"]):
            raise ValueError(f"no MIG device gi {gpu_instance} ci {compute_instance}")
        others = sum(gpu.processes[p][0] or 0 for p, at in gpu.placed.items() if at[0] == gpu_instance and p != pid)
        if (used or 0) + others > self._profile_by_id(gpu, gi["profile"]).memory_mib * MIB:
            raise ValueError(f"{used} bytes do not fit on gi {gpu_instance}")
        gpu.placed[pid] = [gpu_instance, compute_instance]

    # -- nvidia-caps ---------------------------------------------------------------------------------

    def _caps_dir(self, gpu: Any, gi: dict, ci: dict | None = None) -> Path | None:
        if self.procfs is None:
            return None
        path = Path(self.procfs) / "driver/nvidia/capabilities" / f"gpu{gpu.minor}" / "mig" / f"gi{gi['id']}"
        return path if ci is None else path / f"ci{ci['id']}"

    def _write_caps(self, gpu: Any, gi: dict, ci: dict | None = None) -> None:
        path = self._caps_dir(gpu, gi, ci)
        if path is None:
            return
        path.mkdir(parents=True, exist_ok=True)
        minor = caps_minor(gpu.minor, gi["id"], None if ci is None else ci["id"])
        (path / "access").write_text(f"DeviceFileMinor: {minor}\nDeviceFileMode: 292\n")
        devices = Path(self.procfs) / "devices"
        text = devices.read_text() if devices.exists() else "Character devices:\n  1 mem\n195 nvidia-frontend\n"
        if " nvidia-caps\n" not in text:
            devices.write_text(text + f"{CAPS_MAJOR} nvidia-caps\n")

    def _remove_caps(self, gpu: Any, gi: dict, ci: dict | None = None) -> None:
        path = self._caps_dir(gpu, gi, ci)
        if path is None or not path.exists():
            return
        for child in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            child.rmdir() if child.is_dir() else child.unlink()
        path.rmdir()

    # -- pynvml: MIG mode ------------------------------------------------------------------------------

    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        gpu = self._gpu(device)
        if not MODELS[gpu.model].profiles:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return [gpu.mig["current"], gpu.mig["pending"]]

    def nvmlDeviceSetMigMode(self, device: Any, mode: int) -> int:
        gpu = self._gpu(device)
        if not MODELS[gpu.model].profiles:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        if mode not in (0, 1) or isinstance(mode, bool):
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        if not mode and gpu.mig["instances"]:
            raise self.NVMLError(self.NVML_ERROR_IN_USE)
        gpu.mig["pending"] = mode
        status = self.NVML_SUCCESS
        if mode != gpu.mig["current"]:
            if MODELS[gpu.model].architecture < self.NVML_DEVICE_ARCH_HOPPER:
                status = self.NVML_ERROR_RESET_REQUIRED
            elif gpu.processes:
                status = self.NVML_ERROR_IN_USE
            else:
                gpu.mig["current"] = mode
                self._mode_changed(gpu)
        self._changed()
        return status

    # -- pynvml: GPU instance profiles and placements ------------------------------------------------------

    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> Any:
        gpu = self._gpu(device)
        if version not in (1, 2):
            raise self.NVMLError(self.NVML_ERROR_FUNCTION_NOT_FOUND)
        if not isinstance(profile, int) or not 0 <= profile < GI_PROFILE_COUNT:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        found = next((p for p in MODELS[gpu.model].profiles if p.index == profile), None)
        if found is None or not gpu.mig["current"]:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        info = c_nvmlGpuInstanceProfileInfo_v2_t() if version == 2 else c_nvmlGpuInstanceProfileInfo_t()
        if version == 2:
            info.version, info.name = 0x2000098, f"MIG {found.name}"
        info.id, info.isP2pSupported, info.sliceCount, info.instanceCount = found.id, 0, found.slices, found.instances
        info.multiprocessorCount, info.memorySizeMB = found.sms, found.memory_mib
        info.copyEngineCount, info.decoderCount, info.encoderCount, info.jpegCount, info.ofaCount = found.engines
        return info

    nvmlDeviceGetGpuInstanceProfileInfoV = nvmlDeviceGetGpuInstanceProfileInfo

    def nvmlDeviceGetGpuInstancePossiblePlacements(
        self, device: Any, profileId: int, placementsRef: Any, countRef: Any
    ) -> int:
        gpu = self._mig_on(device)
        found = self._profile_by_id(gpu, profileId)
        count = _out(countRef, ctypes.c_uint)
        if count is None:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        if placementsRef is not None:
            self._fill(placementsRef, [c_nvmlGpuInstancePlacement_t(s, found.size) for s in found.starts])
        count.value = len(found.starts)
        return self.NVML_SUCCESS

    def _fill(self, array: Any, items: list[Any]) -> None:
        if not isinstance(array, ctypes.Array):
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        if len(array) < len(items):
            raise self.NVMLError(self.NVML_ERROR_INSUFFICIENT_SIZE)
        try:
            for i, item in enumerate(items):
                array[i] = item
        except TypeError:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT) from None

    def _free_starts(self, gpu: Any, found: Profile) -> list[int]:
        taken = [(g["start"], g["size"]) for g in gpu.mig["instances"]]
        return [s for s in found.starts if not any(_overlap(s, found.size, *t) for t in taken)]

    def nvmlDeviceGetGpuInstanceRemainingCapacity(self, device: Any, profileId: int) -> int:
        gpu = self._mig_on(device)
        found = self._profile_by_id(gpu, profileId)
        left = found.instances - sum(1 for g in gpu.mig["instances"] if g["profile"] == found.id)
        chosen: list[int] = []
        for start in self._free_starts(gpu, found):  # placements of one profile are aligned: greedy is the most
            if not any(_overlap(start, found.size, s, found.size) for s in chosen):
                chosen.append(start)
        return max(0, min(left, len(chosen)))

    # -- pynvml: GPU instances --------------------------------------------------------------------------

    def nvmlDeviceCreateGpuInstance(self, device: Any, profileId: int) -> Any:
        """NVML's own pick: the free placement overlapping the fewest placements of larger profiles, the higher
        start on a tie (the fake's choice; real NVML does not document its own)."""
        gpu = self._mig_on(device)
        found = self._profile_by_id(gpu, profileId)
        larger = [(s, p.size) for p in MODELS[gpu.model].profiles if p.size > found.size for s in p.starts]
        free = self._free_starts(gpu, found)
        if not free:
            raise self.NVMLError(self.NVML_ERROR_INSUFFICIENT_RESOURCES)
        best = min(free, key=lambda s: (sum(_overlap(s, found.size, *other) for other in larger), -s))
        return self._create_gi(device, gpu, found, best)

    def nvmlDeviceCreateGpuInstanceWithPlacement(self, device: Any, profileId: int, placement: Any) -> Any:
        gpu = self._mig_on(device)
        found = self._profile_by_id(gpu, profileId)
        wanted = _out(placement, ("start", "size"))
        if wanted is None or wanted.size != found.size or wanted.start not in found.starts:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        if wanted.start not in self._free_starts(gpu, found):
            raise self.NVMLError(self.NVML_ERROR_INSUFFICIENT_RESOURCES)
        return self._create_gi(device, gpu, found, wanted.start)

    def _create_gi(self, device: Any, gpu: Any, found: Profile, start: int) -> Any:
        if sum(1 for g in gpu.mig["instances"] if g["profile"] == found.id) >= found.instances:
            raise self.NVMLError(self.NVML_ERROR_INSUFFICIENT_RESOURCES)
        gpu.mig["serial"] += 1
        gi = {
            "id": gi_id(found.size, start, memory_units(MODELS[gpu.model])),
            "profile": found.id,
            "start": start,
            "size": found.size,
        }
        gi.update(serial=gpu.mig["serial"], cis=[])
        gpu.mig["instances"].append(gi)
        self._write_caps(gpu, gi)
        self._changed()
        return self._gi_handle(device, gi)

    def _gi_handle(self, device: Any, gi: dict) -> Any:
        return self._handle(c_nvmlGpuInstance_t, ("gi", *self._key(device, c_nvmlDevice_t)[1:3], gi["serial"]))

    def nvmlDeviceGetGpuInstances(self, device: Any, profileId: int, gpuInstancesRef: Any, countRef: Any) -> int:
        gpu = self._mig_on(device)
        found = self._profile_by_id(gpu, profileId)
        count = _out(countRef, ctypes.c_uint)
        if count is None or gpuInstancesRef is None:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        mine = sorted((g for g in gpu.mig["instances"] if g["profile"] == found.id), key=lambda g: g["id"])
        self._fill(gpuInstancesRef, [self._gi_handle(device, g) for g in mine])
        count.value = len(mine)
        return self.NVML_SUCCESS

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> Any:
        gpu = self._mig_on(device)
        gi = next((g for g in gpu.mig["instances"] if g["id"] == gpuInstanceId), None)
        if gi is None:
            raise self.NVMLError(self.NVML_ERROR_NOT_FOUND)
        return self._gi_handle(device, gi)

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> c_nvmlGpuInstanceInfo_t:
        gpu, gi = self._gi(gpuInstance)
        key = self._key(gpuInstance, c_nvmlGpuInstance_t)
        info = c_nvmlGpuInstanceInfo_t()
        info.device = self._handle(c_nvmlDevice_t, ("gpu", key[1], key[2]))
        info.id, info.profileId = gi["id"], gi["profile"]
        info.placement = c_nvmlGpuInstancePlacement_t(gi["start"], gi["size"])
        return info

    def nvmlGpuInstanceDestroy(self, gpuInstance: Any) -> int:
        gpu, gi = self._gi(gpuInstance)
        if gi["cis"] or any(at[0] == gi["id"] for at in gpu.placed.values()):
            raise self.NVMLError(self.NVML_ERROR_IN_USE)
        gpu.mig["instances"].remove(gi)
        self._remove_caps(gpu, gi)
        self._changed()
        return self.NVML_SUCCESS

    # -- pynvml: compute instances ---------------------------------------------------------------------------

    def _ci_profile(self, gpu: Any, gi: dict, profile: Any) -> tuple[int, int]:
        """(slices, instance count) of a compute instance profile index on a GPU instance."""
        if not isinstance(profile, int) or not 0 <= profile < CI_PROFILE_COUNT:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        slices = self._profile_by_id(gpu, gi["profile"]).slices
        size = CI_SLICES.get(profile)
        if size not in CI_SIZES.get(slices, ()):
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return size, slices // size

    def nvmlGpuInstanceGetComputeInstanceProfileInfo(
        self, device: Any, profile: int, engProfile: int, version: int = 2
    ) -> c_nvmlComputeInstanceProfileInfo_v2_t:
        gpu, gi = self._gi(device)  # pynvml names the GPU instance ``device`` here
        if version != 2:
            raise self.NVMLError(self.NVML_ERROR_FUNCTION_NOT_FOUND)
        if engProfile != self.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        size, count = self._ci_profile(gpu, gi, profile)
        found = self._profile_by_id(gpu, gi["profile"])
        info = c_nvmlComputeInstanceProfileInfo_v2_t()
        info.version, info.id, info.sliceCount, info.instanceCount = 0x2000088, profile, size, count
        info.multiprocessorCount = found.sms * size // found.slices
        (info.sharedCopyEngineCount, info.sharedDecoderCount, info.sharedEncoderCount) = found.engines[:3]
        info.sharedJpegCount, info.sharedOfaCount = found.engines[3:]
        info.name = f"MIG {found.name}" if size == found.slices else f"MIG {size}c.{found.name}"
        return info

    nvmlGpuInstanceGetComputeInstanceProfileInfoV = nvmlGpuInstanceGetComputeInstanceProfileInfo

    def nvmlGpuInstanceCreateComputeInstance(self, gpuInstance: Any, profileId: int) -> Any:
        gpu, gi = self._gi(gpuInstance)
        size, _count = self._ci_profile(gpu, gi, profileId)
        slices = self._profile_by_id(gpu, gi["profile"]).slices
        start = next(
            (s for s in range(0, slices - size + 1, size) if not any(_overlap(s, size, *c["at"]) for c in gi["cis"])),
            None,
        )
        if start is None:
            raise self.NVMLError(self.NVML_ERROR_INSUFFICIENT_RESOURCES)
        gpu.mig["serial"] += 1
        ci_id = min(set(range(8)) - {c["id"] for c in gi["cis"]})
        name = f"{gpu.uuid}/{gi['id']}/{ci_id}/{gpu.mig['serial']}"
        ci = {"id": ci_id, "profile": profileId, "at": [start, size], "serial": gpu.mig["serial"]}
        ci["uuid"] = f"MIG-{uuid.uuid5(uuid.NAMESPACE_URL, name)}"
        gi["cis"].append(ci)
        self._write_caps(gpu, gi, ci)
        self._changed()
        return self._handle(
            c_nvmlComputeInstance_t, ("ci", *self._key(gpuInstance, c_nvmlGpuInstance_t)[1:], ci["serial"])
        )

    def nvmlGpuInstanceGetComputeInstances(
        self, gpuInstance: Any, profileId: int, computeInstancesRef: Any, countRef: Any
    ) -> int:
        gpu, gi = self._gi(gpuInstance)
        self._ci_profile(gpu, gi, profileId)
        count = _out(countRef, ctypes.c_uint)
        if count is None or computeInstancesRef is None:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        key = self._key(gpuInstance, c_nvmlGpuInstance_t)
        mine = sorted((c for c in gi["cis"] if c["profile"] == profileId), key=lambda c: c["id"])
        self._fill(
            computeInstancesRef, [self._handle(c_nvmlComputeInstance_t, ("ci", *key[1:], c["serial"])) for c in mine]
        )
        count.value = len(mine)
        return self.NVML_SUCCESS

    def nvmlComputeInstanceGetInfo(self, computeInstance: Any) -> c_nvmlComputeInstanceInfo_t:
        _gpu, gi, ci = self._ci(computeInstance)
        key = self._key(computeInstance, c_nvmlComputeInstance_t)
        info = c_nvmlComputeInstanceInfo_t()
        info.device = self._handle(c_nvmlDevice_t, ("gpu", key[1], key[2]))
        info.gpuInstance = self._handle(c_nvmlGpuInstance_t, ("gi", *key[1:4]))
        info.id, info.profileId = ci["id"], ci["profile"]
        info.placement = c_nvmlComputeInstancePlacement_t(*ci["at"])
        return info

    def nvmlComputeInstanceDestroy(self, computeInstance: Any) -> int:
        gpu, gi, ci = self._ci(computeInstance)
        if any(at == [gi["id"], ci["id"]] for at in gpu.placed.values()):
            raise self.NVMLError(self.NVML_ERROR_IN_USE)
        gi["cis"].remove(ci)
        self._remove_caps(gpu, gi, ci)
        self._changed()
        return self.NVML_SUCCESS

    # -- pynvml: MIG devices ------------------------------------------------------------------------------

    def _mig_devices(self, gpu: Any) -> list[tuple[dict, dict]]:
        return [(g, c) for g in sorted(gpu.mig["instances"], key=lambda g: g["id"]) for c in g["cis"]]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        gpu = self._gpu(device)
        if not MODELS[gpu.model].profiles:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return MAX_MIG_DEVICES

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:
        gpu = self._gpu(device)
        if not MODELS[gpu.model].profiles:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        if not isinstance(index, int) or not 0 <= index < MAX_MIG_DEVICES:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        devices = self._mig_devices(gpu) if gpu.mig["current"] else []
        if index >= len(devices):
            raise self.NVMLError(self.NVML_ERROR_NOT_FOUND)
        gi, ci = devices[index]
        return self._handle(
            c_nvmlDevice_t, ("mig", *self._key(device, c_nvmlDevice_t)[1:3], gi["serial"], ci["serial"])
        )

    def nvmlDeviceIsMigDeviceHandle(self, device: Any) -> ctypes.c_uint:
        _gpu, gi, _ci = self._device(device)
        return ctypes.c_uint(int(gi is not None))  # as pynvml: the c_uint itself, not its value

    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        _gpu, gi, _ci = self._device(device)
        if gi is None:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return gi["id"]

    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        _gpu, _gi, ci = self._device(device)
        if ci is None:
            raise self.NVMLError(self.NVML_ERROR_NOT_SUPPORTED)
        return ci["id"]

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, migDevice: Any) -> Any:
        _gpu, gi, _ci = self._device(migDevice)
        if gi is None:
            raise self.NVMLError(self.NVML_ERROR_INVALID_ARGUMENT)
        key = self._key(migDevice, c_nvmlDevice_t)
        return self._handle(c_nvmlDevice_t, ("gpu", key[1], key[2]))


for _name, _value in list(CONSTANTS.items()) + list(globals().items()):
    if _name.startswith(("NVML_", "c_nvml")):
        setattr(MigNvml, _name, _value)
