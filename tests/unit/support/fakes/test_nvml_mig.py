# SPDX-License-Identifier: Apache-2.0
"""tests/support/fakes/nvml.py's MIG part (nvml_mig.py) answers as NVML does, and offers only what the real
``pynvml`` of nvidia-ml-py has: the same functions with the same parameters, the same constants and errors."""

from __future__ import annotations

import ctypes
import dataclasses
import importlib.util
import inspect
import sys

import pynvml
import pytest

from ansible_collections.aligned.dra.tests.support.fakes import nvml_mig
from ansible_collections.aligned.dra.tests.support.fakes.nvml import (
    FakeNvml,
    GpuNode,
    Memory,
    MemoryV2,
    NVMLError,
    ProcessInfo,
    write_module,
)

A100, H100, L40S = "0000:18:00.0", "0000:2a:00.0", "0000:3b:00.0"


@pytest.fixture
def fake(tmp_path):
    nvml = FakeNvml(procfs=tmp_path / "proc")
    nvml.add_gpu(A100, model="A100-SXM4-40GB")
    nvml.add_gpu(H100, model="H100-SXM5-80GB")
    nvml.add_gpu(L40S, model="L40S")
    nvml.nvmlInit()
    return nvml


def code(call, *args):
    try:
        call(*args)
    except Exception as exc:  # this module's NVMLError, or the one of a stand-in loaded by its path
        assert NVMLError.__name__ in [kind.__name__ for kind in type(exc).__mro__]
        return exc.value
    return 0


def placements(nvml, handle, profile_id):
    count = ctypes.c_uint()
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, None, ctypes.byref(count))
    found = (nvml.c_nvmlGpuInstancePlacement_t * count.value)()
    nvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, found, ctypes.byref(count))
    return [(p.start, p.size) for p in found[: count.value]]


def gpu_instances(nvml, handle, profile_id, room=7):
    count = ctypes.c_uint()
    found = (nvml.c_nvmlGpuInstance_t * room)()
    nvml.nvmlDeviceGetGpuInstances(handle, profile_id, found, ctypes.byref(count))
    return [nvml.nvmlGpuInstanceGetInfo(found[i]) for i in range(count.value)]


def create(nvml, handle, profile_id, start, size):
    placement = nvml.c_nvmlGpuInstancePlacement_t(start, size)
    return nvml.nvmlDeviceCreateGpuInstanceWithPlacement(handle, profile_id, ctypes.byref(placement))


# -- conformance with the real library -----------------------------------------------------------------------


def offered(prefixes):
    return sorted(name for name in dir(FakeNvml) if name.startswith(prefixes))


def test_every_function_the_fake_offers_is_pynvml_s_with_the_same_parameters():
    functions = offered("nvml")
    assert len(functions) >= 35
    for name in functions:
        if isinstance(getattr(FakeNvml, name), type) or not callable(getattr(FakeNvml, name)):
            continue
        real = getattr(pynvml, name, None)
        assert real is not None, f"pynvml has no {name}"
        ours = inspect.signature(getattr(FakeNvml(), name))
        theirs = inspect.signature(real)
        assert [(p.name, p.default, p.kind) for p in ours.parameters.values()] == [
            (p.name, p.default, p.kind) for p in theirs.parameters.values()
        ], name


def test_every_constant_and_error_the_fake_offers_has_pynvml_s_value():
    constants = offered("NVML_")
    assert {"NVML_ERROR_IN_USE", "NVML_ERROR_RESET_REQUIRED", "NVML_DEVICE_ARCH_HOPPER"} <= set(constants)
    for name in constants:
        assert getattr(FakeNvml, name) == getattr(pynvml, name), name
    assert FakeNvml.nvmlMemory_v2 == pynvml.nvmlMemory_v2
    for name in offered("NVMLError_"):
        assert getattr(FakeNvml, name)._value == getattr(pynvml, name)(getattr(FakeNvml, name)._value).value, name
        assert issubclass(getattr(pynvml, name), pynvml.NVMLError)


def test_the_fake_s_answers_have_pynvml_s_fields():
    assert [f.name for f in dataclasses.fields(ProcessInfo)] == [f for f, _t in pynvml.c_nvmlProcessInfo_v3_t._fields_]
    assert [f.name for f in dataclasses.fields(Memory)] == [f for f, _t in pynvml.c_nvmlMemory_t._fields_]
    assert [f.name for f in dataclasses.fields(MemoryV2)] == [f for f, _t in pynvml.c_nvmlMemory_v2_t._fields_]


def test_every_ctypes_type_the_fake_offers_has_pynvml_s_layout():
    types = offered(("c_nvml", "nvmlPciInfo_t"))
    assert "c_nvmlGpuInstanceProfileInfo_v2_t" in types and "c_nvmlGpuInstance_t" in types
    for name in types:
        ours, theirs = getattr(FakeNvml, name), getattr(pynvml, name)
        assert ctypes.sizeof(ours) == ctypes.sizeof(theirs), name
        if hasattr(theirs, "_fields_"):
            assert [(f, ctypes.sizeof(t)) for f, t in ours._fields_] == [
                (f, ctypes.sizeof(t)) for f, t in theirs._fields_
            ], name


# -- MIG mode by architecture ------------------------------------------------------------------------------


def test_a_gpu_without_mig_says_not_supported(fake):
    handle = fake.nvmlDeviceGetHandleByPciBusId(L40S)
    assert fake.nvmlDeviceGetArchitecture(handle) == pynvml.NVML_DEVICE_ARCH_ADA
    assert fake.nvmlDeviceGetName(handle) == "NVIDIA L40S"
    assert code(fake.nvmlDeviceGetMigMode, handle) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert code(fake.nvmlDeviceSetMigMode, handle, 1) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert code(fake.nvmlDeviceGetGpuInstanceProfileInfo, handle, 0) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert fake.nvmlDeviceGetPciInfo(handle).pciDeviceId == 0x26B910DE


def test_ampere_mig_mode_waits_for_a_reset_and_profiles_answer_only_then(fake):
    handle = fake.nvmlDeviceGetHandleByPciBusId(A100)
    assert fake.nvmlDeviceGetArchitecture(handle) == pynvml.NVML_DEVICE_ARCH_AMPERE
    assert (fake.nvmlDeviceGetMinorNumber(handle), fake.nvmlDeviceGetPciInfo(handle).pciDeviceId) == (0, 0x20B010DE)
    assert fake.nvmlDeviceGetMigMode(handle) == [0, 0]
    assert fake.nvmlDeviceSetMigMode(handle, 1) == pynvml.NVML_ERROR_RESET_REQUIRED
    assert fake.nvmlDeviceGetMigMode(handle) == [0, 1]
    assert code(fake.nvmlDeviceGetGpuInstanceProfileInfo, handle, 0) == pynvml.NVML_ERROR_NOT_SUPPORTED
    fake.reset(A100)  # the pending mode applies: the handles taken before are no longer valid
    assert code(fake.nvmlDeviceGetMigMode, handle) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    handle = fake.nvmlDeviceGetHandleByPciBusId(A100)
    assert fake.nvmlDeviceGetMigMode(handle) == [1, 1]
    info = fake.nvmlDeviceGetGpuInstanceProfileInfo(handle, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    assert (info.id, info.name, info.sliceCount, info.instanceCount, info.memorySizeMB) == (
        19,
        "MIG 1g.5gb",
        1,
        7,
        4864,
    )
    assert code(fake.nvmlDeviceGetGpuInstanceProfileInfo, handle, 9) == pynvml.NVML_ERROR_NOT_SUPPORTED  # no 1g.10gb
    assert code(fake.nvmlDeviceGetGpuInstanceProfileInfo, handle, 18) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert placements(fake, handle, 19) == [(s, 1) for s in range(7)]
    assert placements(fake, handle, 14) == [(0, 2), (2, 2), (4, 2)]
    assert placements(fake, handle, 9) == [(0, 4), (4, 4)]
    assert placements(fake, handle, 5) == [(0, 4)]
    assert placements(fake, handle, 0) == [(0, 8)]


def test_hopper_mig_mode_changes_at_once_when_idle_and_is_pending_with_a_process(fake):
    handle = fake.nvmlDeviceGetHandleByPciBusId(H100)
    assert fake.nvmlDeviceSetMigMode(handle, 1) == pynvml.NVML_SUCCESS
    handle = fake.nvmlDeviceGetHandleByPciBusId(H100)  # the mode changed: a new handle
    assert fake.nvmlDeviceGetMigMode(handle) == [1, 1]
    assert fake.nvmlDeviceSetMigMode(handle, 0) == pynvml.NVML_SUCCESS
    handle = fake.nvmlDeviceGetHandleByPciBusId(H100)
    fake.run(H100, 77, 1 << 30)
    assert fake.nvmlDeviceSetMigMode(handle, 1) == pynvml.NVML_ERROR_IN_USE
    assert fake.nvmlDeviceGetMigMode(handle) == [0, 1]  # not idle: the mode stays, the handle too
    with pytest.raises(ValueError):
        fake.reset(H100)  # a process runs: no GPU reset
    fake.reset(H100, reboot=True)
    handle = fake.nvmlDeviceGetHandleByPciBusId(H100)
    assert fake.nvmlDeviceGetMigMode(handle) == [1, 1]
    assert fake.nvmlDeviceGetComputeRunningProcesses(handle) == []
    me = fake.nvmlDeviceGetGpuInstanceProfileInfo(handle, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1)
    assert (me.id, me.name, me.instanceCount, me.ofaCount) == (20, "MIG 1g.10gb+me", 1, 1)
    assert placements(fake, handle, 15) == [(0, 2), (2, 2), (4, 2), (6, 2)]


# -- instances ---------------------------------------------------------------------------------------------


def test_placements_are_checked_and_taken_slices_refused(fake):
    fake.enable_mig(A100)
    handle = fake.nvmlDeviceGetHandleByPciBusId(A100)
    assert code(create, fake, handle, 9, 2, 4) == pynvml.NVML_ERROR_INVALID_ARGUMENT  # 3g.20gb at 2: not offered
    assert code(create, fake, handle, 9, 4, 2) == pynvml.NVML_ERROR_INVALID_ARGUMENT  # the wrong size
    assert code(create, fake, handle, 77, 0, 1) == pynvml.NVML_ERROR_INVALID_ARGUMENT  # no such profile
    gi = create(fake, handle, 9, 4, 4)
    info = fake.nvmlGpuInstanceGetInfo(gi)
    assert (info.id, info.profileId, info.placement.start, info.placement.size) == (2, 9, 4, 4)
    assert code(create, fake, handle, 19, 5, 1) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    assert code(create, fake, handle, 0, 0, 8) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    assert fake.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, 19) == 4
    assert fake.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, 9) == 1
    assert fake.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, 5) == 1
    assert fake.nvmlDeviceGetGpuInstanceRemainingCapacity(handle, 0) == 0
    create(fake, handle, 5, 0, 4)
    assert code(create, fake, handle, 9, 0, 4) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    assert [i.id for i in gpu_instances(fake, handle, 9)] + [i.id for i in gpu_instances(fake, handle, 5)] == [2, 1]
    short = (fake.c_nvmlGpuInstance_t * 0)()
    assert code(fake.nvmlDeviceGetGpuInstances, handle, 9, short, ctypes.byref(ctypes.c_uint())) == 7


def test_nvml_s_own_pick_keeps_the_large_placements_free(fake):
    fake.enable_mig(A100)
    assert [fake.create(A100, "1g.5gb") for _copy in range(3)] == [13, 12, 11]  # starts 6, 5, 4: the 4g.20gb stays
    assert fake.create(A100, "2g.10gb") == 4  # 0 and 2 overlap as many larger ones: the higher start
    assert [i["start"] for i in fake.instances(A100)] == [2, 4, 5, 6]


def test_instances_in_use_are_kept_and_mig_devices_answer(fake, tmp_path):
    fake.enable_mig(H100)
    handle = fake.nvmlDeviceGetHandleByPciBusId(H100)
    gi_id = fake.create(H100, "3g.40gb", start=0)
    gi = fake.nvmlDeviceGetGpuInstanceById(handle, gi_id)
    assert code(fake.nvmlDeviceGetGpuInstanceById, handle, 2) == pynvml.NVML_ERROR_NOT_FOUND
    full = fake.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 2, 0)
    assert (full.sliceCount, full.instanceCount, full.multiprocessorCount, full.name) == (3, 1, 60, "MIG 3g.40gb")
    caps = tmp_path / "proc/driver/nvidia/capabilities/gpu1/mig"
    assert (caps / "gi1/access").read_text() == f"DeviceFileMinor: {3 + 135 + 9}\nDeviceFileMode: 292\n"
    assert (caps / "gi1/ci0/access").read_text().startswith(f"DeviceFileMinor: {3 + 135 + 10}\n")
    assert "237 nvidia-caps\n" in (tmp_path / "proc/devices").read_text()
    fake.run(H100, 4242, 1 << 30, gpu_instance=gi_id)
    mig = fake.nvmlDeviceGetMigDeviceHandleByIndex(handle, 0)
    assert code(fake.nvmlDeviceGetMigDeviceHandleByIndex, handle, 1) == pynvml.NVML_ERROR_NOT_FOUND
    assert fake.nvmlDeviceIsMigDeviceHandle(mig).value == 1
    assert fake.nvmlDeviceGetUUID(mig) == fake.mig_uuid(H100, gi_id) and fake.mig_uuid(H100, gi_id).startswith("MIG-")
    assert (fake.nvmlDeviceGetGpuInstanceId(mig), fake.nvmlDeviceGetComputeInstanceId(mig)) == (1, 0)
    assert code(fake.nvmlDeviceGetGpuInstanceId, handle) == pynvml.NVML_ERROR_NOT_SUPPORTED
    parent = fake.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
    assert ctypes.cast(parent, ctypes.c_void_p).value == ctypes.cast(handle, ctypes.c_void_p).value
    memory = fake.nvmlDeviceGetMemoryInfo(mig)
    assert (memory.total, memory.used) == (40448 << 20, 1 << 30)
    (process,) = fake.nvmlDeviceGetComputeRunningProcesses(mig)
    assert (process.pid, process.gpuInstanceId, process.computeInstanceId) == (4242, 1, 0)
    assert [p.pid for p in fake.nvmlDeviceGetComputeRunningProcesses(handle)] == [4242]
    count, cis = ctypes.c_uint(), (fake.c_nvmlComputeInstance_t * 1)()
    fake.nvmlGpuInstanceGetComputeInstances(gi, 2, cis, ctypes.byref(count))
    assert code(fake.nvmlComputeInstanceDestroy, cis[0]) == pynvml.NVML_ERROR_IN_USE
    assert code(fake.nvmlGpuInstanceDestroy, gi) == pynvml.NVML_ERROR_IN_USE  # its compute instance, its process
    assert code(fake.nvmlDeviceSetMigMode, handle, 0) == pynvml.NVML_ERROR_IN_USE
    assert fake.nvmlDeviceGetMigMode(handle) == [1, 1]
    fake.end(H100, 4242)
    fake.nvmlComputeInstanceDestroy(cis[0])
    assert not (caps / "gi1/ci0").exists()
    assert code(fake.nvmlComputeInstanceGetInfo, cis[0]) == pynvml.NVML_ERROR_INVALID_ARGUMENT  # destroyed
    assert fake.nvmlGpuInstanceDestroy(gi) == pynvml.NVML_SUCCESS
    assert not (caps / "gi1").exists() and fake.instances(H100) == []
    assert code(fake.nvmlGpuInstanceGetInfo, gi) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert code(fake.nvmlDeviceGetMemoryInfo, mig) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_mig_off_answers_not_supported_for_instances(fake):
    handle = fake.nvmlDeviceGetHandleByPciBusId(A100)
    assert code(placements, fake, handle, 19) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert code(create, fake, handle, 19, 0, 1) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert code(fake.nvmlDeviceCreateGpuInstance, handle, 19) == pynvml.NVML_ERROR_NOT_SUPPORTED
    assert code(fake.nvmlDeviceGetMigDeviceHandleByIndex, handle, 0) == pynvml.NVML_ERROR_NOT_FOUND
    with pytest.raises(ValueError):
        fake.enable_mig(L40S)


def test_a_driver_process_s_changes_are_written_back_to_the_state_file(fake, tmp_path):
    fake.enable_mig(A100)
    state = tmp_path / "nvml.json"
    fake.write_state(state)
    spec = importlib.util.spec_from_file_location("pynvml_stand_in", write_module(tmp_path, state))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    driver_side = sys.modules.pop("pynvml_stand_in")
    driver_side.nvmlInit()
    handle = driver_side.nvmlDeviceGetHandleByPciBusId(A100)
    placement = driver_side.c_nvmlGpuInstancePlacement_t(6, 1)
    gi = driver_side.nvmlDeviceCreateGpuInstanceWithPlacement(handle, 19, ctypes.byref(placement))
    driver_side.nvmlGpuInstanceCreateComputeInstance(gi, 0)
    test_side = FakeNvml.from_state_file(state)
    assert [(i["id"], i["profile"], i["cis"]) for i in test_side.instances(A100)] == [(13, "1g.5gb", [0])]
    assert (tmp_path / "proc/driver/nvidia/capabilities/gpu0/mig/gi13/ci0/access").exists()
    test_side.run(A100, 5, 1 << 20, gpu_instance=13)
    assert code(driver_side.nvmlGpuInstanceDestroy, gi) == pynvml.NVML_ERROR_IN_USE
    test_side.end(A100, 5)
    driver_side.nvmlComputeInstanceDestroy(_first_ci(driver_side, gi))
    driver_side.nvmlGpuInstanceDestroy(gi)
    test_side.failing = True  # a switch of the test side's own: kept until its next write_state
    assert test_side.instances(A100) == []  # the bound fake read the driver's destroy before answering
    test_side.write_state(state)
    assert code(driver_side.nvmlDeviceGetHandleByPciBusId, A100) == pynvml.NVML_ERROR_UNKNOWN


def _first_ci(nvml, gi):
    count, cis = ctypes.c_uint(), (nvml.c_nvmlComputeInstance_t * 1)()
    nvml.nvmlGpuInstanceGetComputeInstances(gi, 0, cis, ctypes.byref(count))
    return cis[0]


def test_a_node_s_pod_process_runs_on_a_mig_device(tmp_path):
    node = GpuNode(tmp_path / "proc")
    node.nvml.add_gpu(A100, model="A100-SXM4-40GB")
    node.nvml.enable_mig(A100)
    gi = node.nvml.create(A100, "2g.10gb")
    pid = node.process(A100, 2, "0::/kubepods.slice/x", mps_client=False, gpu_instance=gi)
    node.nvml.nvmlInit()
    (process,) = node.nvml.nvmlDeviceGetComputeRunningProcesses(node.nvml.nvmlDeviceGetHandleByPciBusId(A100))
    assert (process.pid, process.usedGpuMemory, process.gpuInstanceId) == (pid, 2 << 30, gi)
    with pytest.raises(ValueError, match="MIG mode is on"):
        node.process(A100, 1, "0::/kubepods.slice/y", mps_client=False)


def test_the_swizzle_ids_and_caps_minors():
    assert [nvml_mig.gi_id(8, 0), nvml_mig.gi_id(4, 4), nvml_mig.gi_id(2, 6), nvml_mig.gi_id(1, 6)] == [0, 2, 6, 13]
    assert nvml_mig.caps_minor(0, 0) == 3 and nvml_mig.caps_minor(0, 1, 0) == 13


def test_a_re_made_instance_gets_a_new_mig_uuid_as_nvml_gives_it(fake, tmp_path):
    """The same placement and IDs made again (after a destroy, a reboot, or by a driver process on the state
    file) is a new MIG device to NVML: a new UUID. A layout made half-way has a GPU instance without its CI."""
    fake.enable_mig(H100)
    first = fake.create(H100, "1g.10gb", start=6)
    seen = {fake.mig_uuid(H100, first)}
    fake.reset(H100, reboot=True)
    again = fake.create(H100, "1g.10gb", start=6)
    assert again == first and fake.mig_uuid(H100, again) not in seen
    seen.add(fake.mig_uuid(H100, again))
    state = tmp_path / "nvml.json"
    fake.write_state(state)
    bound = FakeNvml.from_state_file(state)
    bound.reset(H100)
    assert bound.create(H100, "1g.10gb", start=6, compute=False) == first
    assert [(i["id"], i["cis"]) for i in bound.instances(H100)] == [(first, [])]
    assert bound.create_compute(H100, first) == 0
    assert bound.mig_uuid(H100, first) not in seen
