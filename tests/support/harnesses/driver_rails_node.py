# SPDX-License-Identifier: Apache-2.0
"""TEST HARNESS: a node with two RDMA NICs for the driver's rails (tests only, never shipped).

The driver harness's node (``harnesses.driver.layout``: one GPU, the RoCE NIC
``aldnic0``/``mlx5_0`` at 0000:19:00.0 with one VF, the management NIC
``eno1``) plus a second RoCE NIC ``aldnic1``/``mlx5_1`` at 0000:1a:00.0, and
the moves a pod makes: :func:`to_pod` takes a NIC's interface (and in RDMA
exclusive mode its RDMA device) out of the tree as the kernel takes them out
of the host's view, :func:`back` puts them back.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

NIC_A, NIC_B = h.NIC_BDF, "0000:1a:00.0"
VF_A = "0000:19:00.1"
DEV_A, DEV_B, DEV_VF = h.NIC, "nic-0000-1a-00-0", "vf-0000-19-00-1"


def layout() -> dict[str, Any]:
    spec = copy.deepcopy(h.layout(totalvfs=2))
    children = spec["hostbridges"][0]["children"]
    children[-1]["children"][0]["sriov"]["numvfs"] = 1
    second = copy.deepcopy(children[-1])
    second["addr"] = f"{len(children) + 1:02x}.0"
    nic = second["children"][0]
    nic.pop("sriov")
    nic["netdevs"] = [dict(nic["netdevs"][0], name="aldnic1")]
    nic["rdma"] = dict(nic["rdma"], name="mlx5_1")
    children.append(second)
    return spec


def build(root: Path) -> h.NodeTree:
    """The node's tree under ``root`` (as ``harnesses.driver.NodeTree.build``, with the layout above)."""
    h.sysfs_builder.build(layout(), root)
    tree = h.NodeTree(root)
    for directory in (tree.cdi, tree.state, tree.kubelet, tree.vendor_cdi):
        directory.mkdir(parents=True, exist_ok=True)
    names = ["nvidiactl", "nvidia-uvm", "nvidia0", "infiniband/rdma_cm"]
    for kind in ("uverbs", "umad"):  # one of each per RDMA device (the VF's too) and port
        names += [f"infiniband/{kind}{index}" for index in range(3)]
    for name in names:
        path = tree.dev / name
        path.parent.mkdir(parents=True, exist_ok=True)
        h.make_char_device(path)
    return tree


def write_rails(path: Path, rule: dict[str, Any] | None, node: str = h.NODE) -> None:
    """A rails file as the driver role writes it: one rule for ``node`` (none: the node is not in it)."""
    document = {"version": 1, "rules": [rule] if rule else [], "nodes": {node: 0} if rule else {}}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(document))
    tmp.rename(path)  # replaced whole, as the role's copy does


def _function(tree: h.NodeTree, bdf: str) -> Path:
    return (tree.sys / "bus" / "pci" / "devices" / bdf).resolve()


def to_pod(tree: h.NodeTree, bdf: str, netdev: str, rdma: str | None = None) -> None:
    """The NIC's interface (and RDMA device: exclusive mode) leave the host's view, as a move into a pod does."""
    parked = tree.root / "in-pod" / bdf
    parked.mkdir(parents=True)
    function = _function(tree, bdf)
    shutil.move(str(function / "net" / netdev), str(parked / netdev))
    (tree.sys / "class" / "net" / netdev).unlink()
    if rdma:
        shutil.move(str(function / "infiniband" / rdma), str(parked / rdma))
        (tree.sys / "class" / "infiniband" / rdma).unlink()


def back(tree: h.NodeTree, bdf: str, netdev: str, rdma: str | None = None) -> None:
    """The pod is gone: the interface (and RDMA device) are in the host's view again."""
    parked = tree.root / "in-pod" / bdf
    function = _function(tree, bdf)
    shutil.move(str(parked / netdev), str(function / "net" / netdev))
    (tree.sys / "class" / "net" / netdev).symlink_to(function / "net" / netdev)
    if rdma:
        shutil.move(str(parked / rdma), str(function / "infiniband" / rdma))
        (tree.sys / "class" / "infiniband" / rdma).symlink_to(function / "infiniband" / rdma)
    parked.rmdir()
