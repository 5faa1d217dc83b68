# SPDX-License-Identifier: Apache-2.0
"""tests/support/fakes/nvml_models.py and the MIG mode of nvml_mig.py: profile variants of one size (RTX PRO 6000
Blackwell), an Ampere GPU in MIG mode, ``nvmlDeviceSetMigMode``'s activation status, and handles that change
after an effective MIG mode change."""

from __future__ import annotations

import ctypes
import inspect

import pynvml
import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state
from ansible_collections.aligned.dra.tests.support.fakes import nvml_models
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

A100, H100, RTX = "0000:18:00.0", "0000:2a:00.0", "0000:c1:00.0"


@pytest.fixture
def fake(tmp_path):
    nvml = FakeNvml(procfs=tmp_path / "proc")
    nvml.add_gpu(A100, model="A100-SXM4-40GB")
    nvml.add_gpu(H100, model="H100-SXM5-80GB")
    nvml.add_gpu(RTX, model="RTX-PRO-6000-96GB")
    nvml.nvmlInit()
    return nvml


def code(call, *args):
    try:
        call(*args)
    except Exception as exc:
        assert "NVMLError" in [kind.__name__ for kind in type(exc).__mro__]
        return exc.value
    return 0


def test_the_rtx_pro_6000_offers_every_variant_of_a_size_as_nvml_lists_them(fake):
    fake.enable_mig(RTX)
    entry = nvml_state.read_gpu(fake, RTX)
    assert entry["error"] is None and entry["architecture"] == "blackwell" and entry["memory_slices"] == 12
    by_name = {p["name"]: p for p in entry["profiles"]}
    assert {name: p["id"] for name, p in by_name.items()} == {
        "1g.24gb": 14,
        "2g.48gb": 5,
        "4g.96gb": 0,
        "1g.24gb+me": 21,
        "1g.24gb+gfx": 47,
        "2g.48gb+gfx": 35,
        "4g.96gb+gfx": 32,
        "1g.24gb-me": 67,
        "2g.48gb-me": 66,
        "1g.24gb+me.all": 65,
        "2g.48gb+me.all": 64,
    }
    assert by_name["1g.24gb-me"]["placements"] == [{"start": s, "size": 3} for s in (0, 3, 6, 9)]
    assert by_name["2g.48gb+me.all"]["placements"] == [{"start": 0, "size": 6}, {"start": 6, "size": 6}]
    assert (by_name["1g.24gb+me.all"]["decoders"], by_name["1g.24gb+me.all"]["instance_count"]) == (4, 1)
    assert (by_name["1g.24gb-me"]["decoders"], by_name["1g.24gb-me"]["ofa_engines"]) == (0, 0)
    handle = fake.nvmlDeviceGetHandleByPciBusId(RTX)
    asked = {  # pynvml's own profile constants name the variants
        pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_NO_ME: "MIG 1g.24gb-me",
        pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME: "MIG 1g.24gb+me.all",
        pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX: "MIG 1g.24gb+gfx",
        pynvml.NVML_GPU_INSTANCE_PROFILE_2_SLICE_NO_ME: "MIG 2g.48gb-me",
        pynvml.NVML_GPU_INSTANCE_PROFILE_4_SLICE_GFX: "MIG 4g.96gb+gfx",
        pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1: "MIG 1g.24gb+me",
    }
    assert {i: fake.nvmlDeviceGetGpuInstanceProfileInfo(handle, i).name for i in asked} == asked


def test_variants_share_the_slices_and_once_per_gpu_profiles_are_refused_a_second_time(fake):
    fake.enable_mig(RTX)
    assert fake.create(RTX, "1g.24gb+me", start=9) == 6  # swizzle ID on 12 units: 3 + start / 3
    assert fake.create(RTX, "1g.24gb-me", start=6) == 5
    handle = fake.nvmlDeviceGetHandleByPciBusId(RTX)
    placement = fake.c_nvmlGpuInstancePlacement_t(3, 3)
    assert code(fake.nvmlDeviceCreateGpuInstanceWithPlacement, handle, 21, ctypes.byref(placement)) == (
        pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES  # +me: once per GPU
    )
    assert code(fake.nvmlDeviceCreateGpuInstanceWithPlacement, handle, 14, ctypes.byref(placement)) == 0
    assert fake.create(RTX, "1g.24gb+gfx", start=0) == 3
    assert code(fake.create, RTX, "2g.48gb", 6) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES  # its slices are taken
    assert [(i["profile"], i["start"]) for i in fake.instances(RTX)] == [
        ("1g.24gb+gfx", 0),
        ("1g.24gb", 3),
        ("1g.24gb-me", 6),
        ("1g.24gb+me", 9),
    ]
    assert nvml_models.gi_id(12, 0, 12) == 0 and nvml_models.gi_id(6, 6, 12) == 2


def test_an_ampere_gpu_in_mig_mode_keeps_it_until_a_reset_and_says_so_in_the_activation_status(fake):
    fake.enable_mig(A100)  # as booted with MIG mode on
    handle = fake.nvmlDeviceGetHandleByPciBusId(A100)
    assert fake.nvmlDeviceGetMigMode(handle) == [1, 1]
    assert nvml_state.read_gpu(fake, A100)["architecture"] == "ampere"
    assert fake.nvmlDeviceSetMigMode(handle, 0) == pynvml.NVML_ERROR_RESET_REQUIRED  # returned, not raised
    assert fake.nvmlDeviceGetMigMode(handle) == [1, 0]  # pending only: the handle stays valid
    fake.reset(A100)
    assert code(fake.nvmlDeviceGetMigMode, handle) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert fake.nvmlDeviceGetMigMode(fake.nvmlDeviceGetHandleByPciBusId(A100)) == [0, 0]


def test_set_mig_mode_returns_the_activation_status_as_pynvml_does(fake):
    source = inspect.getsource(pynvml.nvmlDeviceSetMigMode)
    assert "return c_activationStatus.value" in source  # the real binding: the status is returned, not raised
    handle = fake.nvmlDeviceGetHandleByPciBusId(H100)
    fake.run(H100, 4242, 1 << 30)
    status = fake.nvmlDeviceSetMigMode(handle, 1)
    assert status == pynvml.NVML_ERROR_IN_USE and isinstance(status, int)  # not idle: the mode stays off
    assert fake.nvmlDeviceGetMigMode(handle) == [0, 1]


def test_handles_taken_before_an_effective_mode_change_are_invalid_and_a_gpu_off_the_bus_is_lost(fake):
    fake.enable_mig(H100)
    gi = fake.create(H100, "1g.10gb", start=6)
    handle = fake.nvmlDeviceGetHandleByPciBusId(H100)
    instance = fake.nvmlDeviceGetGpuInstanceById(handle, gi)
    ci = fake.nvmlDeviceGetMigDeviceHandleByIndex(handle, 0)
    fake.nvmlComputeInstanceDestroy(_ci(fake, instance))
    fake.nvmlGpuInstanceDestroy(instance)
    assert fake.nvmlDeviceSetMigMode(handle, 0) == pynvml.NVML_SUCCESS  # idle Hopper: off at once
    for call in (fake.nvmlDeviceGetMigMode, fake.nvmlDeviceGetUUID, fake.nvmlDeviceGetMaxMigDeviceCount):
        assert code(call, handle) == pynvml.NVML_ERROR_INVALID_ARGUMENT  # not GPU_IS_LOST: the GPU is there
    assert code(fake.nvmlDeviceGetUUID, ci) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    new = fake.nvmlDeviceGetHandleByPciBusId(H100)
    assert fake.nvmlDeviceGetMigMode(new) == [0, 0] and fake.nvmlDeviceGetUUID(new) == fake.uuid_of(H100)
    assert fake.nvmlDeviceSetMigMode(new, 0) == pynvml.NVML_SUCCESS  # no change in effect: the handle stays
    assert fake.nvmlDeviceGetMigMode(new) == [0, 0]
    fake.remove_gpu(H100)
    assert code(fake.nvmlDeviceGetMigMode, new) == pynvml.NVML_ERROR_GPU_IS_LOST


def _ci(nvml, gi):
    count, cis = ctypes.c_uint(), (nvml.c_nvmlComputeInstance_t * 1)()
    nvml.nvmlGpuInstanceGetComputeInstances(gi, 0, cis, ctypes.byref(count))
    return cis[0]
