# SPDX-License-Identifier: Apache-2.0
"""Peer-to-peer DMA between a GPU and a NIC: PCIe ACS, the path the kernel sees, the level traffic flows at.

A bridge (or an endpoint) with ACS P2P Request Redirect, Completion Redirect or
Egress Control set sends every peer-to-peer request up to the root complex:
a pair that sits below one PCIe switch then moves its data through the host
bridge. The rule is the Linux kernel's own (``drivers/pci/p2pdma.c``,
``calc_map_type_and_dist`` and ``pci_bridge_has_acs_redir``): every function
on the two paths up to their common upstream bridge, the endpoints and the
common bridge included, is checked; without a common bridge the traffic goes
through the host bridge anyway.

Reads come from a function's ``config`` file: the extended capability list
starts at 0x100, so a config space shorter than 4096 bytes (a probe without
root, which the kernel gives 64 bytes, or a capture of one) has no ACS state
to read: ``None`` here, "unknown" in a path, never "does not redirect".
Node-side code: Python 3.9.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

ACS_CAP_ID = 0x000D
ACS_CONTROL = 0x06  # the ACS Control register (u16) inside the capability
ACS_REQUEST_REDIRECT = 0x04
ACS_COMPLETION_REDIRECT = 0x08
ACS_EGRESS_CONTROL = 0x20
# The bits pci_bridge_has_acs_redir() tests and pci=disable_acs_redir= clears.
ACS_REDIRECT = ACS_REQUEST_REDIRECT | ACS_COMPLETION_REDIRECT | ACS_EGRESS_CONTROL

PCIE_CAP_ID = 0x10
PCIE_DEVICE_CONTROL = 0x08  # Device Control (u16) inside the PCI Express capability
DEVCTL_RELAXED_ORDERING = 0x0010
DEVCTL_READ_REQUEST_SHIFT = 12

CONFIG_HEADER_SIZE = 64
CONFIG_SIZE = 256  # the conventional space: the standard capability list lives in 0x40..0xFF
EXTENDED_CONFIG_SIZE = 4096
_STATUS = 0x06
_STATUS_CAP_LIST = 0x10
_CAP_POINTER = 0x34
_STANDARD_TTL = 48  # the kernel's PCI_FIND_CAP_TTL
_EXTENDED_TTL = (EXTENDED_CONFIG_SIZE - CONFIG_SIZE) // 8  # at least 8 bytes per extended capability

PATH_DIRECT = "direct"
PATH_HOST_BRIDGE = "host_bridge"
PATH_UNKNOWN = "unknown"
_BEYOND_HOST_BRIDGE = ("NODE", "SYS")


class CapabilityListError(ValueError):
    """A capability list that cannot be walked (a loop, a pointer out of range, all ones)."""


def _u16(config: bytes, offset: int) -> int:
    return config[offset] | (config[offset + 1] << 8)


def _u32(config: bytes, offset: int) -> int:
    return _u16(config, offset) | (_u16(config, offset + 2) << 16)


def capability(config: bytes, cap_id: int) -> int | None:
    """Offset of capability ``cap_id`` in the standard list, or None when the function has none.

    Needs the conventional 256 bytes (ValueError otherwise); raises
    :class:`CapabilityListError` for a list that points below 0x40, past the
    space or around in a loop.
    """
    if len(config) < CONFIG_SIZE:
        raise ValueError(f"config space of {len(config)} bytes: the capability list needs {CONFIG_SIZE}")
    if not _u16(config, _STATUS) & _STATUS_CAP_LIST:
        return None
    position = config[_CAP_POINTER] & 0xFC
    seen = set()
    for _hop in range(_STANDARD_TTL):
        if position == 0:
            return None
        if position < CONFIG_HEADER_SIZE:
            raise CapabilityListError(f"capability pointer 0x{position:02x} points into the header")
        if position in seen:
            raise CapabilityListError(f"capability list loops at 0x{position:02x}")
        seen.add(position)
        found = config[position]
        if found == 0xFF:
            return None
        if found == cap_id:
            return position
        position = config[position + 1] & 0xFC
    raise CapabilityListError(f"capability list longer than {_STANDARD_TTL} entries")


def extended_capability(config: bytes, cap_id: int) -> int | None:
    """Offset of extended capability ``cap_id`` (walked from 0x100), or None when the function has none.

    Needs the whole 4096 bytes (ValueError otherwise); raises
    :class:`CapabilityListError` for a header that reads all ones, a next
    pointer below 0x100 or past the space, or a loop.
    """
    if len(config) < EXTENDED_CONFIG_SIZE:
        raise ValueError(f"config space of {len(config)} bytes: the extended list needs {EXTENDED_CONFIG_SIZE}")
    position = CONFIG_SIZE
    header = _u32(config, position)
    if header == 0:  # no extended capabilities at all
        return None
    seen = set()
    for _hop in range(_EXTENDED_TTL):
        if header == 0xFFFFFFFF:
            raise CapabilityListError(f"extended capability header at 0x{position:03x} reads all ones")
        if header & 0xFFFF == cap_id:
            return position
        following = (header >> 20) & 0xFFC
        if following == 0:
            return None
        if following < CONFIG_SIZE:
            raise CapabilityListError(f"extended capability at 0x{position:03x} points to 0x{following:03x}")
        if following in seen or following == position:
            raise CapabilityListError(f"extended capability list loops at 0x{following:03x}")
        seen.add(position)
        position = following
        header = _u32(config, position)
    raise CapabilityListError(f"extended capability list longer than {_EXTENDED_TTL} entries")


def acs_state(config: bytes) -> dict[str, Any] | None:
    """``{"capability", "control", "redirect"}`` of one function, or None when its extended space is not readable.

    A function without the ACS capability does not redirect (the kernel's
    test finds no capability); raises :class:`CapabilityListError`.
    """
    if len(config) < EXTENDED_CONFIG_SIZE:
        return None
    position = extended_capability(config, ACS_CAP_ID)
    if position is None:
        return {"capability": False, "control": None, "redirect": False}
    control = _u16(config, position + ACS_CONTROL)
    return {"capability": True, "control": control, "redirect": bool(control & ACS_REDIRECT)}


def acs_control_offset(config: bytes) -> int | None:
    """Where the ACS Control register sits in ``config`` (None: no ACS); raises as :func:`extended_capability`."""
    position = extended_capability(config, ACS_CAP_ID)
    return None if position is None else position + ACS_CONTROL


def acs_cleared(control: int) -> int:
    """``control`` with Request Redirect, Completion Redirect and Egress Control cleared, every other bit kept."""
    return control & ~ACS_REDIRECT & 0xFFFF


def device_control(config: bytes) -> dict[str, Any] | None:
    """A PCI Express function's Max Read Request (bytes) and Relaxed Ordering, from its Device Control.

    None when fewer than 256 bytes are readable or the function has no PCI
    Express capability; raises :class:`CapabilityListError`.
    """
    if len(config) < CONFIG_SIZE:
        return None
    position = capability(config, PCIE_CAP_ID)
    if position is None or position + PCIE_DEVICE_CONTROL + 2 > CONFIG_SIZE:
        return None
    control = _u16(config, position + PCIE_DEVICE_CONTROL)
    encoded = (control >> DEVCTL_READ_REQUEST_SHIFT) & 0x7
    return {
        "max_read_request": 128 << encoded if encoded <= 5 else None,  # 6 and 7 are reserved encodings
        "relaxed_ordering": bool(control & DEVCTL_RELAXED_ORDERING),
    }


def _upward(bdf: str, chain: list[str]) -> list[str]:
    """The function, then its bridges from the nearest to the root port (a probe's chain is root first)."""
    return [bdf, *reversed(chain)]


def _checked(functions: list[str], acs: Mapping[str, dict[str, Any] | None]) -> tuple[list[str], list[str]]:
    redirected, unread = [], []
    for bdf in functions:
        state = acs.get(bdf)
        if state is None or state.get("redirect") is None:
            unread.append(bdf)
        elif state["redirect"]:
            redirected.append(bdf)
    return redirected, unread


def p2p_path(
    a: str, a_chain: list[str], b: str, b_chain: list[str], acs: Mapping[str, dict[str, Any] | None]
) -> dict[str, Any]:
    """How peer-to-peer traffic between functions ``a`` and ``b`` goes, by the kernel's rule.

    ``{"path", "redirected_at", "unread"}``: ``direct`` when the two share an
    upstream bridge and nothing on the way redirects; ``host_bridge`` without
    a common bridge (``redirected_at`` empty) or when some function on the
    way redirects (listed, ``a``'s side first); ``unknown`` when nothing is
    known to redirect but some function's ACS state is not readable (listed
    in ``unread``). A function missing from ``acs`` counts as unreadable.
    """
    up_a = _upward(a, a_chain)
    up_b = _upward(b, b_chain)
    on_b = set(up_b)
    common = next((bdf for bdf in up_a if bdf in on_b), None)
    if common is None:
        return {"path": PATH_HOST_BRIDGE, "redirected_at": [], "unread": []}
    way = up_a[: up_a.index(common) + 1] + up_b[: up_b.index(common)]
    redirected, unread = _checked(way, acs)
    if redirected:
        return {"path": PATH_HOST_BRIDGE, "redirected_at": redirected, "unread": unread}
    if unread:
        return {"path": PATH_UNKNOWN, "redirected_at": [], "unread": unread}
    return {"path": PATH_DIRECT, "redirected_at": [], "unread": []}


def path_to(bdf: str, chain: list[str], top: str, acs: Mapping[str, dict[str, Any] | None]) -> dict[str, list[str]]:
    """The functions from ``bdf`` up to bridge ``top`` (included) that redirect, and those unreadable.

    ``top`` not on the function's chain: every function up to the root port is taken.
    """
    up = _upward(bdf, chain)
    if top in up:
        up = up[: up.index(top) + 1]
    redirected, unread = _checked(up, acs)
    return {"redirected_at": redirected, "unread": unread}


def flowing_level(level: str | None, entry: Mapping[str, Any] | None) -> str | None:
    """The level the traffic of a pair flows at: PHB when its path goes through the host bridge.

    ``level`` is the physical one (``nvidia-smi topo -m``'s); a pair already
    at NODE or SYS keeps it, and an unknown path keeps the physical level.
    """
    if level is None or not entry or entry.get("path") != PATH_HOST_BRIDGE:
        return level
    if level in _BEYOND_HOST_BRIDGE:
        return level
    return "PHB"
