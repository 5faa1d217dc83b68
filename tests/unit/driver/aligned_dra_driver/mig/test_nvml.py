# SPDX-License-Identifier: Apache-2.0
"""The driver's NVML calls against nvidia-ml-py itself (requirements-dev.txt pins it): every ``nvml…`` function
and constant the MIG code, the usage poll and the XID drain use exists in the real ``pynvml``, and each call's
arguments bind to the real function's signature; and mig_nvml against the strict fake, step by step."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pynvml  # nvidia-ml-py, pinned in requirements-dev.txt
import pytest
from aligned_dra_driver.mig import mode as mig_mode
from aligned_dra_driver.mig import nvml as mig_nvml
from aligned_dra_driver.mig import prepare as mig_prepare
from aligned_dra_driver.mig import restore as mig_restore
from aligned_dra_driver.usage import watcher as usage

from ansible_collections.aligned.dra.tests.support.fakes import nvml as fake_nvml

BUS = "0000:18:00.0"


def nvml_calls(module) -> list[tuple[str, int, int]]:
    """(name, positional arguments, line) of each ``<anything>.nvml…(…)`` call in the module's source."""
    tree = ast.parse(Path(module.__file__).read_text())
    return [
        (node.func.attr, len(node.args), node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("nvml")
    ]


@pytest.mark.parametrize("module", [mig_nvml, mig_prepare, mig_mode, mig_restore, usage], ids=lambda m: m.__name__)
def test_every_nvml_call_is_the_real_library_s_with_arguments_it_takes(module):
    calls = nvml_calls(module)
    assert calls
    for name, count, line in calls:
        assert hasattr(pynvml, name), f"{module.__name__}:{line}: pynvml has no {name}"
        inspect.signature(getattr(pynvml, name)).bind(*[None] * count)  # TypeError: not a call pynvml takes


def test_the_constants_and_types_it_falls_back_on_are_the_real_library_s():
    assert pynvml.NVML_DEVICE_ARCH_HOPPER == mig_prepare.HOPPER
    assert pynvml.nvmlEventTypeXidCriticalError == usage.XID_CRITICAL
    assert pynvml.NVML_ERROR_TIMEOUT == usage.NVML_ERROR_TIMEOUT
    for name, value in mig_nvml.ERRORS.items():
        assert getattr(pynvml, f"NVML_ERROR_{name}") == value
    for name in ("c_nvmlGpuInstance_t", "c_nvmlComputeInstance_t", "c_nvmlGpuInstancePlacement_t"):
        assert hasattr(pynvml, name)
    assert pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED == 0


def test_instances_are_made_found_listed_and_destroyed_on_the_strict_fake(tmp_path):
    fake = fake_nvml.FakeNvml(procfs=tmp_path)
    fake.add_gpu(BUS, model="A100-SXM4-40GB")
    fake.enable_mig(BUS)
    fake.nvmlInit()
    nvml = mig_nvml.Nvml(fake)
    handle = nvml.handle(BUS)
    assert (nvml.mig_mode(handle), nvml.architecture(handle)) == (True, 7)
    info = nvml.profile(handle, "2g.10gb", BUS)
    nvml.create(handle, info, 2, 2)
    (made,) = nvml.instances(handle)
    assert (made.profile, made.start, made.size, made.slices, made.cis) == ("2g.10gb", 2, 2, 2, [])
    ci = nvml.create_ci(made.gi, made.slices)
    (made,) = nvml.instances(handle)
    assert [c[1] for c in made.cis] == [ci] and nvml.mig_uuid(handle, made.id, ci) == fake.mig_uuid(BUS, made.id)
    fake.run(BUS, 4242, 1 << 30, gpu_instance=made.id)
    assert nvml.processes(handle, made.id) == [4242]
    with pytest.raises(fake.NVMLError) as busy:
        nvml.destroy(made)
    assert nvml.is_error(busy.value, "IN_USE")
    fake.end(BUS, 4242)
    nvml.destroy(mig_nvml.at(nvml.instances(handle), 2, 2))
    assert nvml.instances(handle) == []
    with pytest.raises(fake.NVMLError) as refused:
        nvml.create(handle, info, 1, 2)  # not a placement of 2g.10gb
    assert nvml.is_error(refused.value, "INVALID_ARGUMENT")
    with pytest.raises(mig_prepare.PrepareError, match="no MIG profile '9g.99gb'"):
        nvml.profile(handle, "9g.99gb", BUS)


def test_only_not_supported_and_invalid_argument_mean_not_there_when_listing(tmp_path):
    fake = fake_nvml.FakeNvml(procfs=tmp_path)
    fake.add_gpu(BUS, model="H100-SXM5-80GB")
    fake.enable_mig(BUS)
    fake.create(BUS, "2g.20gb", start=0)
    fake.nvmlInit()
    nvml = mig_nvml.Nvml(fake)
    handle = nvml.handle(BUS)
    (made,) = nvml.instances(handle)  # the profile indices the H100 lacks answer NOT_SUPPORTED: skipped
    calls = [
        "nvmlDeviceGetGpuInstanceProfileInfo",
        "nvmlDeviceGetGpuInstances",
        "nvmlGpuInstanceGetComputeInstanceProfileInfo",
        "nvmlGpuInstanceGetComputeInstances",
    ]
    for call in calls:
        for error in (fake.NVML_ERROR_UNKNOWN, fake.NVML_ERROR_NOT_FOUND, fake.NVML_ERROR_NO_PERMISSION):
            fake.inject(call, error)
            with pytest.raises(fake.NVMLError) as failed:
                nvml.instances(handle)
            assert failed.value.value == error, call
    fake.inject("nvmlDeviceGetMigDeviceHandleByIndex", fake.NVML_ERROR_UNKNOWN)
    with pytest.raises(fake.NVMLError):
        nvml.mig_uuid(handle, made.id, 0)
    assert nvml.mig_uuid(handle, made.id, 0) == fake.mig_uuid(BUS, made.id)  # NOT_FOUND past the last: absent


def test_a_mode_change_is_read_back_and_a_refused_one_leaves_nothing_pending(tmp_path):
    fake = fake_nvml.FakeNvml(procfs=tmp_path)
    fake.add_gpu(BUS, model="H100-SXM5-80GB")
    fake.add_gpu("0000:2a:00.0", model="A100-SXM4-40GB")
    fake.nvmlInit()
    nvml = mig_nvml.Nvml(fake)
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cmdline").write_bytes(b"/usr/bin/dcgm-exporter\0-f\0")  # no comm: cmdline's first word
    fake.run(BUS, 4242, 1 << 30)
    with pytest.raises(mig_mode.ModeRefused, match=r"MIG mode stays off: process 4242 \(dcgm-exporter\) holds"):
        mig_mode.set_mode(nvml, BUS, nvml.handle(BUS), True, str(tmp_path))
    assert fake.nvmlDeviceGetMigMode(nvml.handle(BUS)) == [0, 0]
    fake.end(BUS, 4242)
    handle = mig_mode.set_mode(nvml, BUS, nvml.handle(BUS), True, str(tmp_path))
    assert nvml.mig_mode(handle) is True and fake.nvmlDeviceGetMigMode(handle) == [1, 1]
    ampere = nvml.handle("0000:2a:00.0")
    with pytest.raises(mig_mode.ModeRefused, match="stays off: the change needs a GPU reset"):
        mig_mode.set_mode(nvml, "0000:2a:00.0", ampere, True, str(tmp_path))
    assert fake.nvmlDeviceGetMigMode(nvml.handle("0000:2a:00.0")) == [0, 0]
