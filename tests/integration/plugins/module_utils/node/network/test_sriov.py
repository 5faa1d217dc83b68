# SPDX-License-Identifier: Apache-2.0
"""SR-IOV settings on a PF whose interface is a real veth in a network namespace: its MTU through real
rtnetlink (pyroute2's NetNS, a forked process), the rest of the node the fake tree and kernel.

Everything else about sriov is tests/unit/plugins/module_utils/node/network/test_sriov.py's.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.network import sriov
from ansible_collections.aligned.dra.tests.support.node_side.fake_sysfs_sriov import FakeSriovKernel
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout

LAYOUT = Path(__file__).resolve().parents[5] / "fixtures" / "network" / "sriov-lab.yml"
CX0 = "0000:01:00.0"


@pytest.fixture
def node(tmp_path):
    """The sriov-lab tree, its fake kernel and the driver's state directory."""
    root = build_tree(load_layout(LAYOUT), tmp_path / "node")
    state = tmp_path / "state"
    state.mkdir()
    return SimpleNamespace(root=root, kernel=FakeSriovKernel(str(root / "sys")), state=state)


@pytest.fixture
def pf_veth(node):
    """The fake tree's PF interface enp1s0f0np0 as a real veth in a namespace (rtnetlink is real)."""
    import uuid

    from pyroute2 import NetNS, netns

    ns = f"adra-{uuid.uuid4().hex[:6]}"
    netns.create(ns)
    with NetNS(ns) as ipr:
        ipr.link("add", ifname="enp1s0f0np0", kind="veth", peer="peer0")
    try:
        yield ns
    finally:
        netns.remove(ns)


@pytest.mark.netns
def test_pf_mtu_through_real_netlink(node, pf_veth):
    from ansible_collections.aligned.dra.plugins.module_utils.node.network.netlink_link import Links

    def apply(pfs):
        return sriov.apply(
            pfs,
            sysfs_root=str(node.root / "sys"),
            driver_state_dir=str(node.state),
            writer=node.kernel,
            links_factory=lambda: Links(pf_veth),
        )

    first = apply([{"pci_address": CX0, "mtu": 9000}])
    assert first["changed"] and first["pfs"][0]["before"]["mtu"] == 1500
    with Links(pf_veth) as links:
        assert links.get("enp1s0f0np0")["mtu"] == 9000
    assert not apply([{"pci_address": CX0, "mtu": 9000}])["changed"]
    # A veth reports no VFs through netlink: the user learns which field could not be applied.
    with pytest.raises(sriov.SriovError, match=r"^pfs\[0\]\.vfs: enp1s0f0np0 does not report VF 0 through netlink"):
        apply([{"pci_address": CX0, "numvfs": 1, "vf_defaults": {"trust": True}}])
