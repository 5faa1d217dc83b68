# SPDX-License-Identifier: Apache-2.0
"""DRM cards and render nodes of AMD GPUs (tests/support/node_side/sysfs_builder/gpus.py)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import pci_functions, read


def test_mi300x_gpu_and_nic_share_a_host_bridge(trees: dict[str, Path]) -> None:
    root = trees["mi300x"]
    funcs = pci_functions(root)
    gpus = sorted(b for b, d in funcs.items() if read(d / "device") == "0x74a1")
    nics = sorted(b for b, d in funcs.items() if read(d / "device") == "0x1760")
    assert len(gpus) == len(nics) == 8
    for i, gpu in enumerate(gpus):
        nic = nics[i]
        assert funcs[gpu].parent.parent == funcs[nic].parent.parent  # same pciDDDD:BB
        assert funcs[gpu].parent != funcs[nic].parent  # different root ports
        assert (funcs[gpu] / "drm" / f"card{i}" / "dev").read_text() == f"226:{i}\n"
        assert (funcs[gpu] / "drm" / f"renderD{128 + i}").is_dir()
        assert (root / "sys" / "class" / "drm" / f"renderD{128 + i}").resolve().parent.parent == funcs[gpu]
        assert read(funcs[gpu] / "class") == "0x120000"
