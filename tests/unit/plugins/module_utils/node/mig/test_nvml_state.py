# SPDX-License-Identifier: Apache-2.0
"""node/mig/nvml_state.py reads a GPU's MIG state from NVML (the strict fake: tests/support/fakes/nvml.py) in
the contract's shape, and says why where NVML cannot read a GPU."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state
from ansible_collections.aligned.dra.tests.support.fakes.nvml import NVML_ERROR_UNKNOWN, FakeNvml, NVMLError
from ansible_collections.aligned.dra.tests.support.fakes.nvml_lab import A100, H100, L40S, three_gpus

KEYS = {
    "pci_address", "uuid", "name", "architecture", "minor", "mig_capable", "mig_mode", "memory_bytes",
    "profiles", "memory_slices", "instances", "processes", "error",
}  # fmt: skip


@pytest.fixture
def nvml():
    return three_gpus(init=False)


def test_a_partitioned_a100_reads_in_the_contract_s_shape(nvml):
    nvml.enable_mig(A100)
    big = nvml.create(A100, "4g.20gb", start=0)
    small = nvml.create(A100, "1g.5gb", start=6)
    nvml.run(A100, 4242, 1 << 30, gpu_instance=small)
    (entry,) = nvml_state.read_node(nvml, [A100])
    assert set(entry) == KEYS and entry["error"] is None
    assert entry["name"] == "NVIDIA A100-SXM4-40GB" and entry["architecture"] == "ampere"
    assert (entry["minor"], entry["uuid"], entry["memory_bytes"]) == (0, nvml.uuid_of(A100), 40960 << 20)
    assert entry["mig_capable"] and entry["mig_mode"] == {"current": True, "pending": True}
    assert entry["memory_slices"] == 8
    assert [p["name"] for p in entry["profiles"]] == ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]
    one = entry["profiles"][0]
    assert one == {
        "id": 19, "name": "1g.5gb", "slices": 1, "memory_bytes": 4864 << 20, "multiprocessors": 14,
        "copy_engines": 1, "decoders": 0, "encoders": 0, "jpeg_engines": 0, "ofa_engines": 0, "instance_count": 7,
        "placements": [{"start": s, "size": 1} for s in range(7)],
    }  # fmt: skip
    assert entry["profiles"][-1]["slices"] == 7 and entry["profiles"][-1]["placements"] == [{"start": 0, "size": 8}]
    assert entry["instances"] == [
        {
            "gpu_instance": big, "profile_id": 5, "profile": "4g.20gb", "placement": {"start": 0, "size": 4},
            "compute_instances": [{"id": 0, "profile_id": 3}], "uuid": nvml.mig_uuid(A100, big), "processes": [],
        },
        {
            "gpu_instance": small, "profile_id": 19, "profile": "1g.5gb", "placement": {"start": 6, "size": 1},
            "compute_instances": [{"id": 0, "profile_id": 0}], "uuid": nvml.mig_uuid(A100, small),
            "processes": [4242],
        },
    ]  # fmt: skip
    assert entry["processes"] == [4242]
    assert nvml.init_count == 0  # read_node shut NVML down again


def test_mig_off_capable_and_not_capable_gpus(nvml):
    nvml.nvmlInit()
    nvml.run(L40S, 7, 1 << 20)
    handle = nvml.nvmlDeviceGetHandleByPciBusId(A100)
    nvml.nvmlDeviceSetMigMode(handle, 1)  # Ampere: pending until a reset
    a100, h100, l40s = (nvml_state.read_gpu(nvml, bus) for bus in (A100, H100, L40S))
    assert a100["mig_mode"] == {"current": False, "pending": True} and a100["profiles"] is None
    assert (a100["memory_slices"], a100["instances"], a100["error"]) == (None, [], None)
    assert h100["architecture"] == "hopper" and h100["mig_capable"] and h100["name"] == "NVIDIA H100 80GB HBM3"
    assert l40s["mig_capable"] is False and l40s["mig_mode"] is None and l40s["architecture"] == "ada"
    assert (l40s["processes"], l40s["instances"], l40s["error"]) == ([7], [], None)


def test_h100_profiles_include_the_media_extension_profile(nvml):
    nvml.enable_mig(H100)
    nvml.nvmlInit()
    entry = nvml_state.read_gpu(nvml, H100)
    names = [p["name"] for p in entry["profiles"]]
    assert names == ["1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "1g.10gb+me", "1g.20gb"]
    me = entry["profiles"][names.index("1g.10gb+me")]
    assert (me["id"], me["instance_count"], me["ofa_engines"], len(me["placements"])) == (20, 1, 1, 7)


def test_a_gpu_nvml_cannot_read_is_an_entry_that_says_why(nvml):
    nvml.nvmlInit()
    missing = nvml_state.read_gpu(nvml, "0000:99:00.0")
    assert set(missing) == KEYS
    assert missing["error"] == "nvmlDeviceGetHandleByPciBusId: Not Found (NVML error 6)"
    assert missing["uuid"] is None and missing["instances"] is None and missing["architecture"] == "unknown"
    nvml.failing = True
    assert "Unknown Error (NVML error 999)" in nvml_state.read_gpu(nvml, A100)["error"]
    nvml.failing = False
    nvml.enable_mig(A100)
    calls = nvml.nvmlDeviceGetMaxMigDeviceCount

    def broken(handle):
        raise NVMLError(NVML_ERROR_UNKNOWN)

    nvml.nvmlDeviceGetMaxMigDeviceCount = broken
    entry = nvml_state.read_gpu(nvml, A100)
    assert entry["error"].startswith("nvmlDeviceGetMaxMigDeviceCount: ") and entry["profiles"]  # read before
    nvml.nvmlDeviceGetMaxMigDeviceCount = calls


def test_no_library_gives_every_entry_the_reason():
    entries = nvml_state.read_node(FakeNvml(library=False), [A100, H100])
    assert [e["pci_address"] for e in entries] == [A100, H100]
    assert {e["error"] for e in entries} == {"nvmlInit: NVML Shared Library Not Found (NVML error 12)"}


NODE_SIDE = "ansible_collections.aligned.dra.plugins.module_utils.node."  # the collection's own node side


def test_the_package_is_node_side_standard_library_only():
    package = Path(nvml_state.__file__).parent
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                module = node.module or ""
                assert module == "__future__" or module.startswith(NODE_SIDE) or "ansible" not in module, path
            if isinstance(node, ast.Import):
                assert all("ansible" not in alias.name for alias in node.names), path


@pytest.mark.parametrize("error", ["NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_INVALID_ARGUMENT"])
def test_mig_mode_on_without_a_profile_is_an_error_never_no_instance(nvml, error):
    nvml.enable_mig(A100)
    nvml.create(A100, "3g.20gb", start=4)
    nvml.nvmlInit()
    nvml.inject("nvmlDeviceGetGpuInstanceProfileInfo", getattr(nvml, error), times=None, bus_id=A100)
    entry = nvml_state.read_gpu(nvml, A100)
    assert entry["error"] == (
        "nvmlDeviceGetGpuInstanceProfileInfo: LookupError: no MIG profile while MIG mode is on"
    ), entry
    assert entry["instances"] is None  # never [] while the partition is live
