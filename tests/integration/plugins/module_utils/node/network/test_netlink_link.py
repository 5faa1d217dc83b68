# SPDX-License-Identifier: Apache-2.0
"""Links and VF settings: real rtnetlink on veth pairs in network namespaces.

The kernel of the test machines supports veths and namespaces but has no
SR-IOV device; the VF message encoding is therefore checked against the bytes
include/uapi/linux/if_link.h defines, and decoded from a message built the
way the kernel builds IFLA_VFINFO_LIST.
"""

from __future__ import annotations

import errno
import struct
import sys
import uuid

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.network import netlink_link as nl


@pytest.fixture
def veth():
    """A veth pair in the test's own namespace ``ns`` plus a second namespace ``peer_ns``."""
    from pyroute2 import NetNS, netns

    tag = uuid.uuid4().hex[:6]
    ns, peer_ns = f"adra-{tag}-a", f"adra-{tag}-b"
    netns.create(ns)
    netns.create(peer_ns)
    with NetNS(ns) as ipr:
        ipr.link("add", ifname="va0", kind="veth", peer="vb0")
    try:
        yield ns, peer_ns
    finally:
        netns.remove(ns)
        netns.remove(peer_ns)


pytestmark = pytest.mark.netns


def test_mtu_state_and_read_back(veth):
    ns, _peer = veth
    with nl.Links(ns) as links:
        assert links.get("va0")["mtu"] == 1500
        links.set_mtu("va0", 9000)
        links.set_state("va0", "up")
        link = links.get("va0", vfs=True)
        assert (link["mtu"], link["state"], link["vfs"]) == (9000, "up", [])
        links.set_state("va0", "down")
        assert links.get("va0")["state"] == "down"


def test_rename_and_move_to_another_namespace(veth):
    ns, peer_ns = veth
    with nl.Links(ns) as links:
        links.rename("vb0", "pod0")
        links.move_to_netns("pod0", peer_ns)
        with pytest.raises(nl.LinkError) as info:
            links.get("pod0")
        assert info.value.errno == errno.ENODEV
    with nl.Links(peer_ns) as other:
        assert other.get("pod0")["ifname"] == "pod0"


def test_kernel_errors_name_the_operation(veth):
    ns, _peer = veth
    with nl.Links(ns) as links:
        with pytest.raises(nl.LinkError, match="set MTU 70000 on va0: Invalid argument") as info:
            links.set_mtu("va0", 70000)
        assert info.value.errno == errno.EINVAL
        # veths have no VFs: the kernel refuses VF settings.
        with pytest.raises(nl.LinkError, match="set VF 0 of va0: Operation not supported"):
            links.set_vf("va0", 0, {"mac": "02:00:00:00:00:01"})
        with pytest.raises(ValueError, match="unknown VF properties"):
            links.set_vf("va0", 0, {"colour": "red"})


def test_vf_request_keeps_pairs_together():
    spec = nl.vf_request(3, {"qos": 2, "max_tx_rate": 500}, {"vlan": 10, "qos": 0, "min_tx_rate": 100})
    assert spec == {"vf": 3, "vlan": {"vlan": 10, "qos": 2}, "rate": {"min_tx_rate": 100, "max_tx_rate": 500}}
    assert nl.vf_request(0, {"spoofchk": False, "trust": True, "link_state": "disable"}) == {
        "vf": 0,
        "spoofchk": 0,
        "trust": 1,
        "link_state": 2,
    }


@pytest.mark.skipif(sys.byteorder != "little", reason="expected bytes are little-endian")
def test_vf_settings_encode_as_the_uapi_says():
    """IFLA_VFINFO_LIST (22) > IFLA_VF_INFO (1) > IFLA_VF_MAC (1, {u32 vf; u8 mac[32]}),
    IFLA_VF_VLAN (2, {u32 vf, vlan, qos}), IFLA_VF_TRUST (9, {u32 vf, setting})."""
    from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg
    from pyroute2.requests.link import LinkIPRouteFilter

    spec = nl.vf_request(1, {"mac": "02:00:00:00:00:01", "vlan": 100, "qos": 3, "trust": True})
    msg = ifinfmsg()
    msg["attrs"] = list(LinkIPRouteFilter("set").set_vf({}, spec).items())
    msg.encode()
    mac = struct.pack("=HH", 40, 1) + struct.pack("=I", 1) + bytes([2, 0, 0, 0, 0, 1]) + bytes(26)
    vlan = struct.pack("=HHIII", 16, 2, 1, 100, 3)
    trust = struct.pack("=HHII", 12, 9, 1, 1)
    # pyroute2 puts the VLAN first; the kernel looks attributes up by type (nla_parse), order is free.
    info = struct.pack("=HH", 4 + len(mac + vlan + trust), 1) + vlan + mac + trust
    vflist = struct.pack("=HH", 4 + len(info), 22) + info
    assert bytes(msg.data[32:]) == vflist  # after struct nlmsghdr and struct ifinfomsg


def test_vf_entries_decode_like_ip_link_shows_them():
    """A PF's answer as the kernel builds it (rtnl_fill_vfinfo), decoded by pyroute2 and vf_entry."""
    from pyroute2.netlink.rtnl.ifinfmsg import ifinfmsg

    def vf(index, mac, vlan, qos, spoof, trust, state, low, high):
        return (
            struct.pack("=HHI", 40, 1, index)
            + bytes(mac)
            + bytes(32 - len(mac))
            + struct.pack("=HHIII", 16, 2, index, vlan, qos)
            + struct.pack("=HHII", 12, 4, index, spoof)
            + struct.pack("=HHII", 12, 5, index, state)
            + struct.pack("=HHIII", 16, 6, index, low, high)
            + struct.pack("=HHII", 12, 9, index, trust)
        )

    infos = b""
    for args in ((0, [2, 0, 0, 0, 0, 16], 100, 3, 0, 1, 1, 0, 1000), (1, [0] * 6, 0, 0, 1, 0xFFFFFFFF, 0, 0, 0)):
        body = vf(*args)
        infos += struct.pack("=HH", 4 + len(body), 1) + body
    attrs = struct.pack("=HH", 4 + len(infos), 22) + infos
    header = struct.pack("=IHHII", 16 + 16 + len(attrs), 16, 0, 1, 0) + struct.pack("=BxHiII", 0, 1, 5, 0, 0)
    msg = ifinfmsg(header + attrs)
    msg.decode()
    entries = [nl.vf_entry(info) for info in msg.get_attr("IFLA_VFINFO_LIST").get_attrs("IFLA_VF_INFO")]
    assert entries == [
        {
            "vf": 0,
            "mac": "02:00:00:00:00:10",
            "vlan": 100,
            "qos": 3,
            "spoofchk": False,
            "trust": True,
            "link_state": "enable",
            "min_tx_rate": 0,
            "max_tx_rate": 1000,
        },
        {
            "vf": 1,
            "mac": "00:00:00:00:00:00",
            "vlan": 0,
            "qos": 0,
            "spoofchk": True,
            "trust": None,
            "link_state": "auto",
            "min_tx_rate": 0,
            "max_tx_rate": 0,
        },
    ]


def test_devlink_without_the_family_is_a_clear_error():
    try:
        mode = nl.Devlink().eswitch_mode("0000:ff:1f.7")
    except nl.LinkError as exc:
        assert "devlink" in str(exc) and "0000:ff:1f.7" in str(exc) or "not available" in str(exc)
    else:  # a kernel with devlink but no such device answers with an error too
        pytest.fail(f"devlink reported mode {mode} for a device that does not exist")


@pytest.mark.skipif(sys.byteorder != "little", reason="expected bytes are little-endian")
def test_eswitch_set_request_bytes():
    """include/uapi/linux/devlink.h: DEVLINK_CMD_ESWITCH_SET = 30, DEVLINK_ATTR_BUS_NAME = 1,
    DEVLINK_ATTR_DEV_NAME = 2, DEVLINK_ATTR_ESWITCH_MODE = 25 (u16), DEVLINK_ESWITCH_MODE_SWITCHDEV = 1."""
    msg = nl.Devlink.message("0000:19:00.0", "DEVLINK_CMD_ESWITCH_SET", [("DEVLINK_ATTR_ESWITCH_MODE", 1)])
    msg.encode()
    body = bytes(msg.data[16:])  # after struct nlmsghdr (its type is the family id the kernel assigns)
    expected = (
        bytes([30, 1, 0, 0])  # struct genlmsghdr: cmd, version, reserved
        + struct.pack("=HH", 8, 1)
        + b"pci\x00"
        + struct.pack("=HH", 17, 2)
        + b"0000:19:00.0\x00"
        + b"\x00" * 3
        + struct.pack("=HHH", 6, 25, 1)
        + b"\x00" * 2
    )
    assert body == expected
