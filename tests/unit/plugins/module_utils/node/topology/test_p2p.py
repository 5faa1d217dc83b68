# SPDX-License-Identifier: Apache-2.0
"""ACS and the peer-to-peer path: config-space walks and the kernel's rule (drivers/pci/p2pdma.c)."""

from __future__ import annotations

import struct

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import p2p


def config_space(size=4096, standard=(), extended=(), status_caps=True):
    """A config space: ``standard`` [(id, offset, body)], ``extended`` [(id, offset, body)], linked in order."""
    space = bytearray(size)
    struct.pack_into("<HH", space, 0, 0x15B3, 0x1021)
    if standard and status_caps:
        struct.pack_into("<H", space, 0x06, 0x10)
    for index, (cap_id, offset, body) in enumerate(standard):
        following = standard[index + 1][1] if index + 1 < len(standard) else 0
        if index == 0:
            space[0x34] = offset
        space[offset], space[offset + 1] = cap_id, following
        space[offset + 2 : offset + 2 + len(body)] = body
    for index, (cap_id, offset, body) in enumerate(extended):
        following = extended[index + 1][1] if index + 1 < len(extended) else 0
        struct.pack_into("<I", space, offset, cap_id | (1 << 16) | (following << 20))
        space[offset + 4 : offset + 4 + len(body)] = body
    return bytes(space[:size])


def acs_body(control):
    return struct.pack("<HH", 0x005F, control)  # capability (SV TB RR CR UF EC DT), then control


AER, ARI = 0x0001, 0x000E


@pytest.mark.parametrize(
    ("control", "redirect"),
    [(0x0000, False), (0x0001 | 0x0010, False), (0x0004, True), (0x0008, True), (0x0020, True), (0x005D, True)],
)
def test_acs_state_reads_the_redirect_bits_after_other_capabilities(control, redirect):
    space = config_space(
        extended=[(AER, 0x100, b"\0" * 40), (ARI, 0x148, b"\0" * 4), (0x000D, 0x150, acs_body(control))]
    )
    assert p2p.acs_state(space) == {"capability": True, "control": control, "redirect": redirect}
    assert p2p.acs_control_offset(space) == 0x156


def test_a_short_config_space_is_unknown_and_a_function_without_acs_does_not_redirect():
    assert p2p.acs_state(config_space(size=64)) is None
    assert p2p.acs_state(config_space(size=256)) is None
    assert p2p.acs_state(config_space(extended=[(AER, 0x100, b"")])) == {
        "capability": False,
        "control": None,
        "redirect": False,
    }
    assert p2p.acs_state(config_space()) == {"capability": False, "control": None, "redirect": False}


@pytest.mark.parametrize(
    ("header_at_0x100", "message"),
    [
        (0x000D_FFFF | (0x040 << 20), "points to 0x040"),  # next below 0x100
        (0x0001 | (0x100 << 20), "loops at 0x100"),  # next is itself
        (0xFFFF_FFFF, "reads all ones"),
    ],
)
def test_a_malformed_extended_list_raises_naming_the_offset(header_at_0x100, message):
    space = bytearray(4096)
    struct.pack_into("<I", space, 0x100, header_at_0x100)
    with pytest.raises(p2p.CapabilityListError, match=message):
        p2p.acs_state(bytes(space))


def test_a_two_entry_loop_is_found():
    space = bytearray(4096)
    struct.pack_into("<I", space, 0x100, 0x0001 | (0x200 << 20))
    struct.pack_into("<I", space, 0x200, 0x0002 | (0x100 << 20))
    with pytest.raises(p2p.CapabilityListError, match="loops at 0x100"):
        p2p.extended_capability(bytes(space), 0x000D)
    with pytest.raises(ValueError, match="needs 4096"):
        p2p.extended_capability(bytes(256), 0x000D)


def test_acs_cleared_keeps_every_other_bit():
    assert p2p.acs_cleared(0x007F) == 0x0053
    assert p2p.acs_cleared(0x0000) == 0x0000
    assert p2p.acs_cleared(0xFF2C) == 0xFF00


@pytest.mark.parametrize(
    ("devctl", "expected"),
    [
        (0x5010, {"max_read_request": 4096, "relaxed_ordering": True}),
        (0x2000, {"max_read_request": 512, "relaxed_ordering": False}),
        (0x0010, {"max_read_request": 128, "relaxed_ordering": True}),
        (0x7000, {"max_read_request": None, "relaxed_ordering": False}),  # a reserved encoding
    ],
)
def test_device_control_from_the_pci_express_capability(devctl, expected):
    pcie = struct.pack("<HIH", 0x0002, 0, devctl)  # PCIe capabilities, Device Capabilities, Device Control
    space = config_space(size=256, standard=[(0x01, 0x40, b"\0" * 6), (0x10, 0x60, pcie)])
    assert p2p.device_control(space) == expected


def test_device_control_unknown_without_the_space_or_the_capability():
    assert p2p.device_control(bytes(64)) is None
    assert p2p.device_control(config_space(size=256, standard=[(0x01, 0x40, b"")])) is None
    assert p2p.device_control(config_space(size=256, standard=[(0x10, 0x40, b"")], status_caps=False)) is None
    looping = bytearray(config_space(size=256, standard=[(0x01, 0x40, b"")]))
    looping[0x41] = 0x40
    with pytest.raises(p2p.CapabilityListError, match="loops at 0x40"):
        p2p.device_control(bytes(looping))
    header = bytearray(config_space(size=256, standard=[(0x01, 0x40, b"")]))
    header[0x41] = 0x20
    with pytest.raises(p2p.CapabilityListError, match="into the header"):
        p2p.device_control(bytes(header))


CLEAR = {"capability": True, "control": 0x0001, "redirect": False}
REDIRECT = {"capability": True, "control": 0x001D, "redirect": True}
NONE = {"capability": False, "control": None, "redirect": False}
# root port 10:01.0 -> switch upstream 11:00.0 -> downstream ports 12:00.0 (GPU 13:00.0) and 12:01.0 (NIC 14:00.0)
GPU_CHAIN = ["0000:10:01.0", "0000:11:00.0", "0000:12:00.0"]
NIC_CHAIN = ["0000:10:01.0", "0000:11:00.0", "0000:12:01.0"]
GPU, NIC = "0000:13:00.0", "0000:14:00.0"


def states(**overrides):
    acs = {bdf: CLEAR for bdf in {*GPU_CHAIN, *NIC_CHAIN}}
    acs.update({GPU: NONE, NIC: NONE})
    acs.update({bdf.replace("_", ":").replace("x", "."): state for bdf, state in overrides.items()})
    return acs


def test_a_clean_switch_is_direct_and_the_root_port_above_the_common_bridge_is_not_checked():
    acs = states()
    acs["0000:10:01.0"] = REDIRECT  # above 11:00.0, the common bridge: off the way
    assert p2p.p2p_path(GPU, GPU_CHAIN, NIC, NIC_CHAIN, acs) == {
        "path": "direct",
        "redirected_at": [],
        "unread": [],
    }


@pytest.mark.parametrize(
    ("redirecting", "expected"),
    [
        (["0000:12:00.0"], ["0000:12:00.0"]),  # the GPU's downstream port
        (["0000:11:00.0"], ["0000:11:00.0"]),  # the common bridge itself
        (["0000:12:01.0", GPU], [GPU, "0000:12:01.0"]),  # an endpoint too: a's side first
        ([NIC], [NIC]),
    ],
)
def test_any_redirect_on_the_way_sends_the_pair_through_the_host_bridge(redirecting, expected):
    acs = states()
    acs.update({bdf: REDIRECT for bdf in redirecting})
    entry = p2p.p2p_path(GPU, GPU_CHAIN, NIC, NIC_CHAIN, acs)
    assert entry == {"path": "host_bridge", "redirected_at": expected, "unread": []}


def test_an_unread_function_makes_the_path_unknown_unless_another_redirects():
    acs = states()
    acs["0000:12:01.0"] = None
    del acs[GPU]  # missing counts as unread
    assert p2p.p2p_path(GPU, GPU_CHAIN, NIC, NIC_CHAIN, acs) == {
        "path": "unknown",
        "redirected_at": [],
        "unread": [GPU, "0000:12:01.0"],
    }
    acs["0000:12:00.0"] = REDIRECT
    assert p2p.p2p_path(GPU, GPU_CHAIN, NIC, NIC_CHAIN, acs)["path"] == "host_bridge"


def test_no_common_bridge_goes_through_the_host_bridge_whatever_the_acs_state():
    other = ["0000:20:01.0"]
    assert p2p.p2p_path(GPU, GPU_CHAIN, "0000:21:00.0", other, {}) == {
        "path": "host_bridge",
        "redirected_at": [],
        "unread": [],
    }
    assert p2p.p2p_path(GPU, [], NIC, [], {})["path"] == "host_bridge"  # both on a root bus (a VM)


def test_two_functions_of_one_device_share_their_bridge():
    acs = {"0000:12:00.0": CLEAR, "0000:13:00.0": NONE, "0000:13:00.1": NONE}
    chain = ["0000:12:00.0"]
    assert p2p.p2p_path("0000:13:00.0", chain, "0000:13:00.1", chain, acs)["path"] == "direct"


def test_path_to_a_switch_stops_at_it():
    acs = states(**{"0000_10_01x0": REDIRECT})
    assert p2p.path_to(GPU, GPU_CHAIN, "0000:11:00.0", acs) == {"redirected_at": [], "unread": []}
    assert p2p.path_to(GPU, GPU_CHAIN, "0000:99:00.0", acs)["redirected_at"] == ["0000:10:01.0"]
    acs["0000:12:00.0"] = None
    assert p2p.path_to(GPU, GPU_CHAIN, "0000:11:00.0", acs) == {"redirected_at": [], "unread": ["0000:12:00.0"]}


@pytest.mark.parametrize(
    ("level", "path", "expected"),
    [
        ("PIX", "host_bridge", "PHB"),
        ("PXB", "host_bridge", "PHB"),
        ("PHB", "host_bridge", "PHB"),
        ("NODE", "host_bridge", "NODE"),
        ("SYS", "host_bridge", "SYS"),
        ("PIX", "direct", "PIX"),
        ("PXB", "unknown", "PXB"),
        ("PIX", None, "PIX"),
        (None, "host_bridge", None),
    ],
)
def test_flowing_level(level, path, expected):
    entry = {"path": path, "redirected_at": [], "unread": []} if path else None
    assert p2p.flowing_level(level, entry) == expected
