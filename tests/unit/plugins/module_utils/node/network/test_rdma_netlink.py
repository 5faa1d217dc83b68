# SPDX-License-Identifier: Apache-2.0
"""NETLINK_RDMA messages, checked byte by byte against the kernel's uapi.

Expected bytes are written by hand from include/uapi/linux/netlink.h
(struct nlmsghdr: u32 len, u16 type, u16 flags, u32 seq, u32 pid; struct
nlattr: u16 len, u16 type, value padded to 4 bytes) and
include/uapi/rdma/rdma_netlink.h (RDMA_NL_NLDEV = 5, RDMA_NLDEV_CMD_SYS_GET
= 6, RDMA_NLDEV_CMD_SYS_SET = 7, RDMA_NLDEV_SYS_ATTR_NETNS_MODE = 66,
RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK = 93, RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE
= 96), little-endian host order.
"""

from __future__ import annotations

import errno
import struct
import sys

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.network import rdma_netlink as rn


def test_numbers_match_the_uapi_header():
    assert rn.NETLINK_RDMA == 20
    assert rn.SYS_GET_TYPE == (5 << 10) + 6 == 0x1406
    assert rn.SYS_SET_TYPE == (5 << 10) + 7 == 0x1407
    assert rn.RDMA_NLDEV_SYS_ATTR_NETNS_MODE == 66
    assert rn.RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK == 93
    assert rn.RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE == 96


@pytest.mark.skipif(sys.byteorder != "little", reason="expected bytes are little-endian")
def test_sys_get_request_bytes():
    # nlmsghdr only: len 16, type 0x1406, flags REQUEST|ACK, seq 1, pid 0
    expected = bytes.fromhex("10000000 0614 0500 01000000 00000000")
    assert rn.sys_get_request(seq=1) == expected


@pytest.mark.skipif(sys.byteorder != "little", reason="expected bytes are little-endian")
@pytest.mark.parametrize(("mode", "value"), [("exclusive", 0), ("shared", 1)])
def test_sys_set_netns_request_bytes(mode, value):
    expected = (
        bytes.fromhex("18000000 0714 0500 07000000 2a000000")  # len 24, SYS_SET, seq 7, pid 42
        + bytes.fromhex("0500 4200")  # nla_len 5 (4 header + u8), nla_type 66
        + bytes([value])
        + b"\x00\x00\x00"  # padding to 4 bytes, counted in nlmsg_len
    )
    assert rn.sys_set_netns_request(mode, seq=7, pid=42) == expected


def test_set_request_refuses_unknown_mode():
    with pytest.raises(ValueError, match="netns_mode"):
        rn.sys_set_netns_request("private")


def kernel_answer(mode: int, copy_on_fork: int | None = 1, qkey: int | None = 0) -> bytes:
    """What nldev_sys_get_doit puts in its reply, built with struct only."""
    attrs = struct.pack("=HHB3x", 5, 66, mode)
    if copy_on_fork is not None:
        attrs += struct.pack("=HHB3x", 5, 93, copy_on_fork)
    if qkey is not None:
        attrs += struct.pack("=HHB3x", 5, 96, qkey)
    return struct.pack("=IHHII", 16 + len(attrs), 0x1406, 0, 3, 1234) + attrs


@pytest.mark.parametrize(("raw", "name"), [(0, "exclusive"), (1, "shared")])
def test_decode_sys_get_answer(raw, name):
    assert rn.decode_sys(kernel_answer(raw)) == {"netns_mode": name, "copy_on_fork": True, "privileged_qkey": False}


def test_decode_answer_of_an_older_kernel_without_flags():
    assert rn.decode_sys(kernel_answer(1, None, None)) == {
        "netns_mode": "shared",
        "copy_on_fork": None,
        "privileged_qkey": None,
    }


def test_decode_refuses_other_messages_and_missing_mode():
    wrong_type = struct.pack("=IHHII", 16, 0x1401, 0, 1, 0)
    with pytest.raises(rn.RdmaNetlinkError, match="unexpected message type"):
        rn.decode_sys(wrong_type)
    no_mode = struct.pack("=IHHII", 16, 0x1406, 0, 1, 0)
    with pytest.raises(rn.RdmaNetlinkError, match="NETNS_MODE"):
        rn.decode_sys(no_mode)
    with pytest.raises(rn.RdmaNetlinkError, match="short"):
        rn.decode_sys(b"\x00" * 8)


def _rdma_netlink_available() -> bool:
    import socket

    try:
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 20).close()
    except OSError:
        return False
    return True


@pytest.mark.skipif(_rdma_netlink_available(), reason="this kernel has the RDMA core loaded")
def test_kernel_without_rdma_core_gives_a_clear_error():
    with pytest.raises(rn.RdmaNetlinkError, match="ib_core") as info:
        rn.RdmaSystem().get()
    assert info.value.errno == errno.EPROTONOSUPPORT


@pytest.mark.skipif(not _rdma_netlink_available(), reason="this kernel has no RDMA core (NETLINK_RDMA)")
def test_real_kernel_reports_a_mode():
    with rn.RdmaSystem() as system:
        assert system.get()["netns_mode"] in ("shared", "exclusive")
