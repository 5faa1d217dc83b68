# SPDX-License-Identifier: Apache-2.0
"""GPU sharing edits: MPS limits set to the share's limit, whole GPUs untouched."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from aligned_dra_driver.config import ConfigError
from aligned_dra_driver.sharing import fractional as sharing

GIB = 2**30
UUID = "GPU-11111111-2222-3333-4444-555555555555"
TOPO = {"vendor_id": "0x10de", "pci_address": "0000:18:00.0", "gpu": {"uuid": UUID}}


@pytest.fixture
def edits(monkeypatch, tmp_path):
    """gpu_sharing_edits with the MPS daemon's start replaced (no nvidia-cuda-mps-control here)."""
    started = []

    def ensure(mps_root, pci_address, uuid):
        started.append(pci_address)
        return str(tmp_path / "mps")

    monkeypatch.setattr(sharing, "ensure_mps_daemon", ensure)

    def run(result, cfg):
        return sharing.gpu_sharing_edits(SimpleNamespace(mps_root=str(tmp_path)), TOPO, "uid", result, cfg, {})

    run.started = started
    return run


def mps_env(found):
    return [e for e in found["env"] if e.startswith("CUDA_MPS_") and "PIPE" not in e]


def test_the_mps_limits_are_the_limit_when_limits_are_given(edits):
    result = {"consumedCapacity": {"memory": "10Gi", "compute": "25"}}
    cfg = {"sharing": {"strategy": "MPS", "mps": {"limits": {"memory": 40 * GIB, "compute": 80}}}}
    found = edits(result, cfg)
    assert mps_env(found) == [
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=80",
        f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={UUID}=40960M",
    ]
    assert found["mounts"][0]["containerPath"] == "/run/nvidia-mps"
    assert edits.started == ["0000:18:00.0"]


def test_without_limits_the_mps_limits_are_the_request_as_before(edits):
    found = edits({"consumedCapacity": {"memory": "10Gi", "compute": "25"}}, {})
    assert mps_env(found) == [
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25",
        f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={UUID}=10240M",
    ]


def test_a_gpu_config_share_takes_each_limit_key_on_its_own(edits):
    cfg = {
        "sharing": {
            "strategy": "MPS",
            "mps": {"activeThreadPercentage": 30, "pinnedDeviceMemoryLimit": 8 * GIB, "limits": {"memory": 12 * GIB}},
        }
    }
    assert mps_env(edits({}, cfg)) == [
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30",
        f"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT={UUID}=12288M",
    ]


def test_mps_without_a_share_of_its_own_sets_no_limits_as_before(edits):
    found = edits({}, {"sharing": {"strategy": "MPS"}})
    assert "ALIGNED_DRA_GPU_SHARING=MPS" in found["env"] and mps_env(found) == []
    assert edits.started == ["0000:18:00.0"]


def test_a_whole_gpu_gets_no_sharing_edits(edits):
    assert edits({}, {}) == {}
    assert edits({}, {"sharing": {"strategy": "TimeSlicing"}}) == {
        "env": ["ALIGNED_DRA_GPU_SHARING=TimeSlicing/Default"]
    }
    assert edits.started == []


def test_limits_on_a_time_sliced_gpu_are_refused_before_anything_starts(edits):
    cfg = {"sharing": {"strategy": "TimeSlicing", "mps": {"limits": {"compute": 50}}}}
    with pytest.raises(ConfigError, match="not shared"):
        edits({}, cfg)
    assert edits.started == []
