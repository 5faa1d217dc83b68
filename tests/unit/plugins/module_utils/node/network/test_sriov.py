# SPDX-License-Identifier: Apache-2.0
"""SR-IOV desired state against a fake sysfs that behaves like the kernel.

The tree is tests/fixtures/network/sriov-lab.yml (two ConnectX-7 ports, one
with 2 VFs; an E810; an I210 without SR-IOV); tests/support/node_side/fake_sysfs_sriov.py plays
the kernel's side of sriov_numvfs writes and of rtnetlink for VF properties. A PF's MTU
through real rtnetlink is tests/integration/plugins/module_utils/node/network/test_sriov.py's.
"""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.network import sriov
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import probe
from ansible_collections.aligned.dra.tests.support.node_side.fake_sysfs_sriov import FakeLinks, FakeSriovKernel
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout

LAYOUT = Path(__file__).resolve().parents[5] / "fixtures" / "network" / "sriov-lab.yml"
CX0, CX1, E810, I210 = "0000:01:00.0", "0000:01:00.1", "0000:81:00.0", "0000:02:00.0"


@pytest.fixture
def node(tmp_path):
    root = build_tree(load_layout(LAYOUT), tmp_path / "node")
    kernel = FakeSriovKernel(str(root / "sys"))
    links = FakeLinks(kernel)
    state = tmp_path / "state"
    state.mkdir()

    def apply(pfs, check_mode=False, **kwarg):
        return sriov.apply(
            pfs,
            sysfs_root=str(root / "sys"),
            procfs_root=str(root / "proc"),
            check_mode=check_mode,
            driver_state_dir=str(state),
            writer=kernel,
            links_factory=lambda: links,
            devlink_factory=kwarg.pop("devlink_factory", None),
            settle_timeout=0.2,
            **kwarg,
        )

    class Node:
        pass

    n = Node()
    n.root, n.kernel, n.links, n.state, n.apply = root, kernel, links, state, apply
    n.topology = lambda: probe(str(root / "sys"), str(root / "proc"))
    n.snapshot = lambda: snapshot(root / "sys")
    return n


def snapshot(sys_root: Path) -> dict:
    """Every file and link under the tree with its content or target."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(sys_root):
        for name in filenames + dirnames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                out[path] = "-> " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as fh:
                    out[path] = fh.read()
    return out


def device(topology, address):
    return next(d for d in topology["devices"] if d["pci_address"] == address)


# -- the fake behaves like the kernel ----------------------------------------------------


def test_fake_kernel_creates_and_removes_vfs(node):
    pf = node.kernel.pf_dir(CX0)
    node.kernel.write(pf + "/sriov_numvfs", "3")
    assert sorted(n for n in os.listdir(pf) if n.startswith("virtfn")) == ["virtfn0", "virtfn1", "virtfn2"]
    topo = node.topology()
    assert device(topo, CX0)["sriov"]["vfs"] == ["0000:01:01.0", "0000:01:01.1", "0000:01:01.2"]
    vf = device(topo, "0000:01:01.2")
    assert (vf["physfn"], vf["driver"], vf["device_id"]) == (CX0, "mlx5_core", "0x101e")
    assert [n["name"] for n in vf["netdevs"]] == ["enp1s0f0np0v2"]
    assert topo["warnings"] == []
    node.kernel.write(pf + "/sriov_numvfs", "0")
    assert not [n for n in os.listdir(pf) if n.startswith("virtfn")]
    assert not os.path.exists(os.path.join(node.root, "sys/bus/pci/devices/0000:01:01.0"))
    assert device(node.topology(), CX0)["sriov"] == {"totalvfs": 8, "numvfs": 0, "vfs": []}


@pytest.mark.parametrize(
    ("address", "value", "code"),
    [(CX1, "4", errno.EBUSY), (CX0, "9", errno.ERANGE), (CX0, "two", errno.EINVAL)],
)
def test_fake_kernel_refuses_like_the_kernel(node, address, value, code):
    with pytest.raises(OSError) as info:
        node.kernel.write(node.kernel.pf_dir(address) + "/sriov_numvfs", value)
    assert info.value.errno == code


def test_fake_kernel_accepts_the_current_count(node):
    node.kernel.write(node.kernel.pf_dir(CX1) + "/sriov_numvfs", "2")
    assert device(node.topology(), CX1)["sriov"]["numvfs"] == 2


def test_autoprobe_off_leaves_vfs_unbound(node):
    pf = node.kernel.pf_dir(E810)
    node.kernel.write(pf + "/sriov_drivers_autoprobe", "0")
    node.kernel.write(pf + "/sriov_numvfs", "2")
    vf = device(node.topology(), "0000:81:02.0")
    assert vf["driver"] is None and vf["netdevs"] == []


# -- apply ---------------------------------------------------------------------------------------


def test_create_vfs_with_properties_then_no_change(node):
    pfs = [
        {
            "netdev": "enp1s0f0np0",
            "numvfs": 4,
            "mtu": 9000,
            "vf_defaults": {"trust": True, "spoofchk": False},
            "vfs": [{"index": 0, "mac": "02:00:00:00:00:10", "vlan": 100, "qos": 3, "max_tx_rate": 1000}],
        },
        {"vendor_id": "0x8086", "device_id": "1592", "index": 0, "numvfs": 3, "drivers_autoprobe": False},
    ]
    first = node.apply(pfs)
    assert first["changed"] and first["disruptive"]
    assert device(node.topology(), CX0)["sriov"]["numvfs"] == 4
    e810 = device(node.topology(), E810)
    assert e810["sriov"]["numvfs"] == 3 and device(node.topology(), "0000:81:02.0")["driver"] is None
    vf0 = node.links.get("enp1s0f0np0", vfs=True)["vfs"][0]
    assert vf0 == {
        "vf": 0,
        "mac": "02:00:00:00:00:10",
        "vlan": 100,
        "qos": 3,
        "spoofchk": False,
        "trust": True,
        "link_state": "auto",
        "min_tx_rate": 0,
        "max_tx_rate": 1000,
    }
    assert node.links.mtu["enp1s0f0np0"] == 9000
    cx = first["pfs"][0]
    assert cx["before"]["numvfs"] == 0 and cx["after"]["numvfs"] == 4
    assert cx["before"]["vfs"]["0"] == {
        "mac": "00:00:00:00:00:00",
        "vlan": 0,
        "qos": 0,
        "spoofchk": True,
        "trust": False,
        "max_tx_rate": 0,
    }
    assert set(cx["after"]["vfs"]) == {"0", "1", "2", "3"}
    writes = len(node.kernel.writes)
    calls = len(node.links.calls)
    second = node.apply(pfs)
    assert not second["changed"] and not second["disruptive"]
    assert all(pf["actions"] == [] for pf in second["pfs"])
    assert len(node.kernel.writes) == writes and len(node.links.calls) == calls


def test_check_mode_shows_the_plan_and_changes_nothing(node):
    before = node.snapshot()
    result = node.apply(
        [{"pci_address": CX1, "numvfs": 4, "vfs": [{"index": 3, "mac": "02:00:00:00:00:33"}]}], check_mode=True
    )
    assert result["changed"] and result["disruptive"]
    assert result["pfs"][0]["actions"][:2] == ["sriov_numvfs=0", "sriov_numvfs=4"]
    assert result["diff"]["before"][CX1]["numvfs"] == 2
    assert result["diff"]["after"][CX1]["numvfs"] == 4
    assert result["diff"]["after"][CX1]["vfs"]["3"] == {"mac": "02:00:00:00:00:33"}
    assert node.snapshot() == before and node.kernel.writes == [] and node.links.calls == []


def test_changing_a_nonzero_count_goes_through_zero(node):
    result = node.apply([{"pci_address": CX1, "numvfs": 5}])
    assert [w[1] for w in node.kernel.writes] == ["0", "5"]
    assert device(node.topology(), CX1)["sriov"]["numvfs"] == 5
    assert result["pfs"][0]["in_use"] == []


def test_vf_bound_to_vfio_blocks_the_change(node):
    node.kernel.bind("0000:01:02.1", "vfio-pci")
    before = node.snapshot()
    with pytest.raises(sriov.SriovError, match=r"^pfs\[0\]\.numvfs: .*VF 0000:01:02\.1 is bound to vfio-pci.*force"):
        node.apply([{"pci_address": CX1, "numvfs": 4}])
    assert node.snapshot() == before and node.kernel.writes == []
    node.apply([{"pci_address": CX1, "numvfs": 4, "force": True}])
    assert device(node.topology(), CX1)["sriov"]["numvfs"] == 4


def test_vf_interface_in_another_namespace_blocks_the_change(node):
    node.kernel.move_netdev_away("0000:01:02.0")
    with pytest.raises(sriov.SriovError, match="0000:01:02.0 has no network interface in this namespace"):
        node.apply([{"pci_address": CX1, "numvfs": 0}])
    assert device(node.topology(), CX1)["sriov"]["numvfs"] == 2


def test_vf_prepared_by_the_driver_blocks_the_change(node):
    checkpoint = {"claims": {"uid-1": {"devices": [{"pci_address": "0000:01:02.1", "other": 1}]}}, "version": 3}
    (node.state / "checkpoint.json").write_text(json.dumps(checkpoint))
    with pytest.raises(sriov.SriovError, match="0000:01:02.1 is prepared for claim uid-1"):
        node.apply([{"pci_address": CX1, "numvfs": 3}])
    # Other PFs are not affected by that claim.
    node.apply([{"pci_address": CX0, "numvfs": 2}])


def test_broken_checkpoint_is_not_guessed(node):
    (node.state / "checkpoint.json").write_text("{not json")
    with pytest.raises(sriov.SriovError, match="^driver_state_dir: cannot read"):
        node.apply([{"pci_address": CX0, "numvfs": 2}])
    (node.state / "checkpoint.json").write_text('{"claims": []}')
    with pytest.raises(sriov.SriovError, match="has no 'claims' mapping"):
        node.apply([{"pci_address": CX0, "numvfs": 2}])


def test_extra_default_driver(node):
    node.kernel.bind("0000:01:02.0", "mlx5_vfio_pci")
    with pytest.raises(sriov.SriovError, match="bound to mlx5_vfio_pci"):
        node.apply([{"pci_address": CX1, "numvfs": 1}])
    node.apply([{"pci_address": CX1, "numvfs": 1}], vf_drivers=("mlx5_vfio_pci",))


@pytest.mark.parametrize(
    ("pfs", "message"),
    [
        (
            [{"pci_address": "0000:09:00.0", "numvfs": 1}],
            r"^pfs\[0\]\.pci_address: no PCI address 0000:09:00.0 on this node",
        ),
        ([{"netdev": "eth9", "numvfs": 1}], r"^pfs\[0\]\.netdev: no network interface eth9"),
        ([{"pci_address": "01:00.0"}], r"^pfs\[0\]\.pci_address: '01:00.0' is not a PCI address"),
        ([{"pci_address": CX0, "numvfs": 9}], r"^pfs\[0\]\.numvfs: 9 is above sriov_totalvfs 8"),
        ([{"pci_address": I210, "numvfs": 1}], r"^pfs\[0\]\.numvfs: 0000:02:00.0 has no SR-IOV capability"),
        (
            [{"pci_address": "0000:01:02.0", "numvfs": 1}],
            r"^pfs\[0\]\.pci_address: PCI address 0000:01:02.0 is a VF of",
        ),
        (
            [{"pci_address": CX0, "numvfs": 2, "vfs": [{"index": 0, "mac": "02:00:00:00:00:zz"}]}],
            r"^pfs\[0\]\.vfs\[0\]\.mac: '02:00:00:00:00:zz' is not a MAC address",
        ),
        (
            [{"pci_address": CX0, "numvfs": 2, "vfs": [{"index": 0, "mac": "01:00:5e:00:00:01"}]}],
            r"^pfs\[0\]\.vfs\[0\]\.mac: 01:00:5e:00:00:01 is a multicast address",
        ),
        (
            [{"pci_address": CX0, "numvfs": 2, "vfs": [{"index": 1, "vlan": 4096}]}],
            r"^pfs\[0\]\.vfs\[0\]\.vlan: 4096 is out of range 0-4095",
        ),
        (
            [{"pci_address": CX0, "numvfs": 2, "vf_defaults": {"qos": 8, "vlan": 5}}],
            r"^pfs\[0\]\.vf_defaults\.qos: 8 is out of range 0-7",
        ),
        (
            [{"pci_address": CX0, "numvfs": 2, "vfs": [{"index": 2, "trust": True}]}],
            r"^pfs\[0\]\.vfs\[0\]\.index: VF 2 does not exist with numvfs 2",
        ),
        (
            [{"pci_address": CX0, "vfs": [{"index": 0, "trust": True}]}],
            r"^pfs\[0\]\.vfs: VF 0 does not exist on 0000:01:00.0 \(0 VFs\)",
        ),
        ([{"pci_address": CX0, "netdev": "x"}], r"^pfs\[0\]: select the PF with exactly one"),
        (
            [{"vendor_id": "0x15b3", "device_id": "0x1021", "index": 5, "numvfs": 1}],
            r"^pfs\[0\]\.index: no PF 5 with vendor",
        ),
        ([{"pci_address": CX0, "link_state": "up"}], r"^pfs\[0\]: unknown keys link_state"),
        ([{"pci_address": CX0, "numvfs": 2, "vf_defaults": {"link_state": "up"}}], r"link_state: must be one of"),
        ([{"pci_address": CX0, "eswitch_mode": "offload"}], r"^pfs\[0\]\.eswitch_mode: must be one of"),
        ([{"pci_address": CX0}, {"netdev": "enp1s0f0np0"}], r"^pfs\[1\]: selects 0000:01:00.0, already selected"),
    ],
)
def test_invalid_input_names_the_field_and_changes_nothing(node, pfs, message):
    # A valid first entry proves that a later bad one stops everything;
    # it moves the bad entries one place down the list.
    before = node.snapshot()
    shifted = re.sub(r"pfs\\\[(\d)\\\]", lambda m: f"pfs\\[{int(m.group(1)) + 1}\\]", message)
    with pytest.raises(sriov.SriovError, match=shifted):
        node.apply([{"pci_address": E810, "numvfs": 2}, *pfs])
    assert node.snapshot() == before and node.kernel.writes == [] and node.links.calls == []


def test_later_refusal_leaves_earlier_pfs_alone(node):
    node.kernel.bind("0000:01:02.1", "vfio-pci")
    with pytest.raises(sriov.SriovError, match=r"^pfs\[1\]\.numvfs"):
        node.apply([{"pci_address": E810, "numvfs": 2}, {"pci_address": CX1, "numvfs": 4}])
    assert node.kernel.writes == []


def test_missing_pf_can_be_skipped(node):
    result = node.apply([{"pci_address": "0000:09:00.0", "numvfs": 2, "missing": "skip"}])
    assert not result["changed"] and "no PCI address" in result["pfs"][0]["skipped"]


def test_vendor_device_index_selects_in_address_order(node):
    result = node.apply([{"vendor_id": "0x15b3", "device_id": "0x1021", "index": 1, "numvfs": 2}], check_mode=True)
    assert result["pfs"][0]["pci_address"] == CX1 and not result["changed"]


def test_captured_tree_without_netlink_warns(node):
    result = sriov.apply(
        [{"pci_address": CX1, "mtu": 9000, "vf_defaults": {"trust": True}, "eswitch_mode": "switchdev"}],
        sysfs_root=str(node.root / "sys"),
        procfs_root=str(node.root / "proc"),
        driver_state_dir=str(node.state),
        writer=node.kernel,
    )
    assert not result["changed"]
    assert any("not applied" in w and "captured tree" in w for w in result["warnings"])
    assert any("eswitch_mode not applied" in w for w in result["warnings"])


def test_vf_properties_on_existing_vfs_only_touch_what_differs(node):
    node.links.set_vf("enp1s0f1np0", 1, {"trust": True})
    node.links.calls.clear()
    result = node.apply([{"pci_address": CX1, "vf_defaults": {"trust": True}}])
    assert node.links.calls == [("vf", "enp1s0f1np0", 0, {"trust": True})]
    assert not result["disruptive"] and result["pfs"][0]["actions"] == ["vf 0 trust True"]


def test_recreated_vfs_lose_their_properties_and_get_them_back(node):
    pfs = [{"pci_address": CX1, "numvfs": 2, "vfs": [{"index": 1, "mac": "02:00:00:00:01:01"}]}]
    node.apply(pfs)
    node.links.reset_vfs("enp1s0f1np0")  # as after a reboot: VF properties are not persistent in the kernel
    result = node.apply(pfs)
    assert result["changed"] and result["pfs"][0]["actions"] == ["vf 1 mac 02:00:00:00:01:01"]


class FakeDevlink:
    """TEST FAKE of devlink eswitch get/set for one PF (switchdev needs no VFs, as older mlx5 wants)."""

    def __init__(self, kernel, mode="legacy"):
        self.kernel, self.mode, self.sets = kernel, mode, []

    def __call__(self):
        return self

    def close(self):
        return None

    def eswitch_mode(self, address):
        return self.mode

    def set_eswitch_mode(self, address, mode):
        numvfs = int(open(self.kernel.pf_dir(address) + "/sriov_numvfs").read())
        if numvfs:
            from ansible_collections.aligned.dra.plugins.module_utils.node.network.netlink_link import LinkError

            raise LinkError("Device or resource busy", errno.EBUSY)
        self.sets.append(mode)
        self.mode = mode


def test_eswitch_change_recreates_vfs_around_it(node):
    devlink = FakeDevlink(node.kernel)
    result = node.apply([{"pci_address": CX1, "eswitch_mode": "switchdev"}], devlink_factory=devlink)
    assert devlink.sets == ["switchdev"]
    assert result["pfs"][0]["actions"] == ["sriov_numvfs=0", "eswitch switchdev", "sriov_numvfs=2"]
    assert device(node.topology(), CX1)["sriov"]["numvfs"] == 2
    again = node.apply([{"pci_address": CX1, "eswitch_mode": "switchdev"}], devlink_factory=devlink)
    assert not again["changed"]


def test_kernel_that_never_shows_the_vfs_fails_clearly(node):
    class LazyKernel(FakeSriovKernel):
        def write(self, path, value):  # the write "succeeds" but no VF appears
            self.writes.append((path, value))

    lazy = LazyKernel(node.kernel.sys)
    with pytest.raises(sriov.SriovError, match=r"^pfs\[0\]\.numvfs: after writing 3 to sriov_numvfs"):
        sriov.apply(
            [{"pci_address": CX0, "numvfs": 3}],
            sysfs_root=str(node.root / "sys"),
            driver_state_dir=str(node.state),
            writer=lazy,
            settle_timeout=0.1,
        )


def test_checkpoint_written_by_the_bundled_driver_is_understood(node):
    """The driver's own Checkpoint class writes the file the sriov module reads."""
    checkpoint = pytest.importorskip("aligned_dra_driver.claims.checkpoint")
    cp = checkpoint.Checkpoint(str(node.state), driver="dra.aligned.dev", node="n1", durable=False)
    cp.claims["9f1c"] = {
        "namespace": "default",
        "name": "pair",
        "devices": [{"pool": "n1", "device": "nic-0000-01-02-1", "pci_address": "0000:01:02.1", "kind": "nic"}],
    }
    cp.save()
    with pytest.raises(sriov.SriovError, match="VF 0000:01:02.1 is prepared for claim 9f1c"):
        node.apply([{"pci_address": CX1, "numvfs": 0}])
    assert device(node.topology(), CX1)["sriov"]["numvfs"] == 2
