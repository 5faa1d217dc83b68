# SPDX-License-Identifier: Apache-2.0
"""A MIG device's container edits: the parent's nodes, the two nvidia-caps nodes read from procfs, its MIG UUID."""

from __future__ import annotations

import pytest
from aligned_dra_driver.claims.container_edits import PrepareError, caps_nodes, mig_edits
from aligned_dra_driver.devices.inventory import Options

MIG = {"profile": "1g.10gb", "gpu_instance": 9, "compute_instance": 0, "uuid": "MIG-5c3a"}


@pytest.fixture
def opts(tmp_path):
    proc, dev = tmp_path / "proc", tmp_path / "dev"
    gi = proc / "driver" / "nvidia" / "capabilities" / "gpu1" / "mig" / "gi9"
    (gi / "ci0").mkdir(parents=True)
    (gi / "access").write_text("DeviceFileMinor: 219\nDeviceFileMode: 292\n")
    (gi / "ci0" / "access").write_text("DeviceFileMinor: 220\nDeviceFileMode: 292\n")
    (proc / "devices").write_text("Character devices:\n195 nvidia-frontend\n237 nvidia-caps\n\nBlock devices:\n")
    (dev / "nvidia-caps").mkdir(parents=True)
    for name in ("nvidia1", "nvidiactl", "nvidia-caps/nvidia-cap219"):
        (dev / name).write_text("")
    return Options(node_name="n", procfs_root=str(proc), dev_root=str(dev))


def test_a_mig_device_gets_its_parent_s_nodes_its_caps_nodes_and_its_uuid(opts):
    topo = {"pci_address": "0000:2a:00.0", "gpu": {"minor": 1, "uuid": "GPU-1"}}
    edits = mig_edits(opts, topo, MIG)
    assert [n["path"] for n in edits["deviceNodes"]] == [
        "/dev/nvidia1",
        "/dev/nvidiactl",
        "/dev/nvidia-caps/nvidia-cap219",
        "/dev/nvidia-caps/nvidia-cap220",
    ]
    gi_node, ci_node = edits["deviceNodes"][2:]
    assert gi_node == {
        "path": "/dev/nvidia-caps/nvidia-cap219",
        "type": "c",
        "major": 237,
        "minor": 219,
        "hostPath": f"{opts.dev_root}/nvidia-caps/nvidia-cap219",
    }
    assert "hostPath" not in ci_node and (ci_node["major"], ci_node["minor"]) == (237, 220)  # made by the runtime
    assert edits["env"] == ["ALIGNED_DRA_MIG_0000_2A_00_0_GI9=MIG-5c3a", "NVIDIA_VISIBLE_DEVICES=MIG-5c3a"]


def test_missing_caps_files_fail_the_claim_naming_the_file(opts, tmp_path):
    with pytest.raises(PrepareError, match=r"gi9/ci3/access"):
        caps_nodes(opts, 1, 9, 3)
    (tmp_path / "proc" / "devices").write_text("Character devices:\n195 nvidia-frontend\n")
    with pytest.raises(PrepareError, match="has no nvidia-caps line"):
        caps_nodes(opts, 1, 9, 0)
    with pytest.raises(PrepareError, match="no NVIDIA minor number"):
        mig_edits(opts, {"pci_address": "0000:2a:00.0", "gpu": {}}, MIG)
