# SPDX-License-Identifier: Apache-2.0
"""The RDMA subsystem's system settings through NETLINK_RDMA.

``rdma system show netns`` / ``rdma system set netns shared|exclusive`` from
iproute2, without iproute2: the ``RDMA_NLDEV_CMD_SYS_GET`` and
``RDMA_NLDEV_CMD_SYS_SET`` requests of the ``NETLINK_RDMA`` family, built on
pyroute2's netlink message and socket classes (pyroute2 ships no class for
this family).

Numbers come from the kernel's ``include/uapi/rdma/rdma_netlink.h``:

- ``NETLINK_RDMA`` is netlink family 20 (``include/uapi/linux/netlink.h``).
- The message type is ``RDMA_NL_GET_TYPE(client, op) = (client << 10) + op``
  with client ``RDMA_NL_NLDEV`` (5) and op ``RDMA_NLDEV_CMD_SYS_GET`` (6) or
  ``RDMA_NLDEV_CMD_SYS_SET`` (7).
- NLDEV messages carry no family header: attributes follow the netlink
  header directly.
- ``RDMA_NLDEV_SYS_ATTR_NETNS_MODE`` (66, u8) is 1 for shared, 0 for
  exclusive; ``RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK`` (93, u8, read-only) and
  ``RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE`` (96, u8) come with a SYS_GET
  answer on newer kernels.

The kernel (``nldev_set_sys_set_doit`` -> ``rdma_compatdev_set``) refuses to
change the mode with ``EBUSY`` while network namespaces other than the
initial one exist; the mode then changes only through the ``ib_core`` module
option ``netns_mode`` at the next load of ``ib_core`` (usually a reboot).

Runs on nodes (Python >= 3.9); imports pyroute2 only when a socket is opened.
"""

from __future__ import annotations

import errno
import os
import struct

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NETLINK_RDMA = 20

RDMA_NL_NLDEV = 5

RDMA_NLDEV_CMD_GET = 1
RDMA_NLDEV_CMD_SYS_GET = 6
RDMA_NLDEV_CMD_SYS_SET = 7

RDMA_NLDEV_ATTR_DEV_INDEX = 1
RDMA_NLDEV_ATTR_DEV_NAME = 2
RDMA_NLDEV_SYS_ATTR_NETNS_MODE = 66
RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK = 93
RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE = 96

NLM_F_REQUEST = 0x01
NLM_F_ACK = 0x04

NETNS_MODES = {"shared": 1, "exclusive": 0}
NETNS_MODE_NAMES = {1: "shared", 0: "exclusive"}


def rdma_nl_get_type(client: int, op: int) -> int:
    """``RDMA_NL_GET_TYPE`` from the uapi header."""
    return (client << 10) + op


SYS_GET_TYPE = rdma_nl_get_type(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_SYS_GET)
SYS_SET_TYPE = rdma_nl_get_type(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_SYS_SET)

_NLA_MAP = (
    (0, "RDMA_NLDEV_ATTR_UNSPEC", "none"),
    (RDMA_NLDEV_ATTR_DEV_INDEX, "RDMA_NLDEV_ATTR_DEV_INDEX", "uint32"),
    (RDMA_NLDEV_ATTR_DEV_NAME, "RDMA_NLDEV_ATTR_DEV_NAME", "asciiz"),
    (RDMA_NLDEV_SYS_ATTR_NETNS_MODE, "RDMA_NLDEV_SYS_ATTR_NETNS_MODE", "uint8"),
    (RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK, "RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK", "uint8"),
    (RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE, "RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE", "uint8"),
)


class RdmaNetlinkError(Exception):
    """A NETLINK_RDMA request failed; ``errno`` is the kernel's error number."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.errno = code


_CLASSES: dict[str, Any] = {}


def _classes() -> dict[str, Any]:
    """pyroute2 classes for the NLDEV messages, built on first use."""
    if _CLASSES:
        return _CLASSES
    from pyroute2.netlink import nlmsg
    from pyroute2.netlink.marshal import Marshal
    from pyroute2.netlink.nlsocket import AsyncNetlinkSocket, NetlinkSocket

    class rdma_nldev_msg(nlmsg):
        """An NLDEV message: netlink header, then attributes (no family header)."""

        prefix = "RDMA_NLDEV_"
        fields = ()
        nla_map = _NLA_MAP

    class MarshalRdma(Marshal):
        msg_map = {SYS_GET_TYPE: rdma_nldev_msg, SYS_SET_TYPE: rdma_nldev_msg}

    class AsyncRdmaSocket(AsyncNetlinkSocket):
        marshal_class = MarshalRdma

    class RdmaSocket(NetlinkSocket):
        async_class = AsyncRdmaSocket

        def __init__(self) -> None:
            super().__init__(family=NETLINK_RDMA)

    _CLASSES.update(msg=rdma_nldev_msg, socket=RdmaSocket)
    return _CLASSES


def encode_request(msg_type: int, attrs: list[tuple[str, Any]], seq: int = 1, pid: int = 0) -> bytes:
    """Bytes of an NLDEV request with NLM_F_REQUEST | NLM_F_ACK."""
    msg = _classes()["msg"]()
    msg["header"]["type"] = msg_type
    msg["header"]["flags"] = NLM_F_REQUEST | NLM_F_ACK
    msg["header"]["sequence_number"] = seq
    msg["header"]["pid"] = pid
    msg["attrs"] = attrs
    msg.encode()
    return bytes(msg.data)


def sys_get_request(seq: int = 1, pid: int = 0) -> bytes:
    """``rdma system show``: a SYS_GET request without attributes."""
    return encode_request(SYS_GET_TYPE, [], seq, pid)


def sys_set_netns_request(mode: str, seq: int = 1, pid: int = 0) -> bytes:
    """``rdma system set netns MODE``."""
    if mode not in NETNS_MODES:
        raise ValueError(f"netns_mode must be one of {sorted(NETNS_MODES)}, got {mode!r}")
    return encode_request(SYS_SET_TYPE, [("RDMA_NLDEV_SYS_ATTR_NETNS_MODE", NETNS_MODES[mode])], seq, pid)


def decode_sys(data: bytes) -> dict[str, Any]:
    """The settings in a SYS_GET answer (bytes of one netlink message)."""
    if len(data) < 16:
        raise RdmaNetlinkError(f"short netlink message ({len(data)} bytes)")
    length, msg_type = struct.unpack_from("=IH", data, 0)
    if msg_type != SYS_GET_TYPE:
        raise RdmaNetlinkError(f"unexpected message type {msg_type:#x} (expected {SYS_GET_TYPE:#x})")
    msg = _classes()["msg"](data[:length])
    msg.decode()
    return sys_settings(msg)


def sys_settings(msg: Any) -> dict[str, Any]:
    """Mode and flags from a decoded SYS_GET answer."""
    raw = msg.get_attr("RDMA_NLDEV_SYS_ATTR_NETNS_MODE")
    if raw is None:
        raise RdmaNetlinkError("the kernel's answer has no RDMA_NLDEV_SYS_ATTR_NETNS_MODE")
    fork = msg.get_attr("RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK")
    qkey = msg.get_attr("RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE")
    return {
        "netns_mode": NETNS_MODE_NAMES.get(raw, f"unknown ({raw})"),
        "copy_on_fork": None if fork is None else bool(fork),
        "privileged_qkey": None if qkey is None else bool(qkey),
    }


class RdmaSystem:
    """Read and set the RDMA subsystem's settings of the running kernel."""

    def __init__(self) -> None:
        self._sock: Any = None

    def _socket(self) -> Any:
        if self._sock is None:
            try:
                self._sock = _classes()["socket"]()
            except OSError as exc:
                if exc.errno == errno.EPROTONOSUPPORT:
                    raise RdmaNetlinkError(
                        "NETLINK_RDMA is not available: the RDMA core (ib_core) is not loaded in this kernel",
                        exc.errno,
                    ) from exc
                raise RdmaNetlinkError(f"cannot open a NETLINK_RDMA socket: {exc}", exc.errno) from exc
        return self._sock

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> RdmaSystem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, msg_type: int, attrs: list[tuple[str, Any]]) -> list[Any]:
        from pyroute2.netlink.exceptions import NetlinkError

        msg = _classes()["msg"]()
        msg["attrs"] = attrs
        try:
            return list(self._socket().nlm_request(msg, msg_type=msg_type, msg_flags=NLM_F_REQUEST | NLM_F_ACK))
        except NetlinkError as exc:
            raise RdmaNetlinkError(f"{os.strerror(exc.code)} (errno {exc.code})", exc.code) from exc

    def get(self) -> dict[str, Any]:
        """``{"netns_mode": "shared"|"exclusive", "copy_on_fork": bool|None, ...}``."""
        for msg in self._request(SYS_GET_TYPE, []):
            if msg["header"]["type"] == SYS_GET_TYPE:
                return sys_settings(msg)
        raise RdmaNetlinkError("the kernel did not answer RDMA_NLDEV_CMD_SYS_GET")

    def set_netns_mode(self, mode: str) -> None:
        """Set the mode; ``RdmaNetlinkError`` with errno EBUSY when the kernel refuses now."""
        if mode not in NETNS_MODES:
            raise ValueError(f"netns_mode must be one of {sorted(NETNS_MODES)}, got {mode!r}")
        self._request(SYS_SET_TYPE, [("RDMA_NLDEV_SYS_ATTR_NETNS_MODE", NETNS_MODES[mode])])
