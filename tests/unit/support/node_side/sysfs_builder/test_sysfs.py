# SPDX-License-Identifier: Apache-2.0
"""Links as kernfs writes them: relative, resolving inside the tree, class links to their device (tests/support/node_side/sysfs_builder/sysfs.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import (
    DANGLING_OK,
    LAYOUTS,
    pci_functions,
    read,
)


@pytest.mark.parametrize("name", LAYOUTS)
def test_every_symlink_is_relative_and_resolves_inside_the_tree(trees: dict[str, Path], name: str) -> None:
    root = trees[name].resolve()
    count = 0
    for dirpath, dirnames, filenames in os.walk(root):
        for entry in dirnames + filenames:
            path = Path(dirpath) / entry
            if not path.is_symlink():
                continue
            count += 1
            target = os.readlink(path)
            assert not os.path.isabs(target), path
            if entry in DANGLING_OK:
                continue
            resolved = path.resolve()
            assert resolved.exists(), f"{path} -> {target} dangles"
            assert root in resolved.parents, f"{path} leaves the tree"
            # kernfs style: the last component names the target, never "..".
            assert os.path.basename(target) == resolved.name, (path, target)
    assert count > 0


@pytest.mark.parametrize("name", LAYOUTS)
def test_class_links_resolve_to_their_device(trees: dict[str, Path], name: str) -> None:
    root = trees[name]
    sys_class = root / "sys" / "class"
    functions = set(pci_functions(root).values())
    net = list((sys_class / "net").iterdir())
    assert "lo" in {n.name for n in net}
    assert read(sys_class / "net" / "lo" / "type") == "772"
    for link in net:
        ndir = link.resolve()
        assert ndir.is_dir() and ndir.name == link.name and ndir.parent.name == "net"
        assert read(ndir / "type") in {"1", "32", "772"}
        if link.name != "lo":
            owner = (ndir / "device").resolve()
            assert owner in functions or owner.parent in functions  # virtio0 sits below its function
    for cls in ("infiniband", "infiniband_verbs", "infiniband_mad", "drm", "nvme"):
        if not (sys_class / cls).is_dir():
            continue
        for link in (sys_class / cls).iterdir():
            if link.name == "abi_version":
                continue
            resolved = link.resolve()
            assert resolved.is_dir() and resolved.name == link.name
            assert resolved.parent.name == cls
            assert resolved.parent.parent in functions
    for link in (sys_class / "infiniband_verbs").glob("uverbs*") if (sys_class / "infiniband_verbs").is_dir() else []:
        ibdev = read(link / "ibdev")
        assert (sys_class / "infiniband" / ibdev).resolve().parent.parent == link.resolve().parent.parent
