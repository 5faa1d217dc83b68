# SPDX-License-Identifier: Apache-2.0
"""The probe's ACS states and p2p map (plugins/module_utils/node/topology/gpudirect.py, pci_walk.py).

Trees from tests/unit/plugins/module_utils/node/topology/gpudirect_trees.py;
expected paths worked out by hand from the kernel's rule: every function from
the GPU and the NIC up to their common bridge (it included) is checked.
"""

from __future__ import annotations

import struct

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import sysfs as topology_sysfs
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree
from ansible_collections.aligned.dra.tests.unit.plugins.module_utils.node.topology.gpudirect_trees import (
    FAR_NIC,
    FAR_PORT,
    GPU,
    GPU_PORT,
    NIC,
    NIC_PORT,
    ROOT_PORT,
    UPSTREAM,
    VFS,
    build_and_probe,
    function_dir,
    layout,
    probed,
)

PATH = [GPU, GPU_PORT, UPSTREAM, NIC, NIC_PORT]  # GPU side up to the common bridge, then the NIC side


def bridge(topology: dict, bdf: str) -> dict:
    return next(b for b in topology["bridges"] if b["pci_address"] == bdf)


def device(topology: dict, bdf: str) -> dict:
    return next(d for d in topology["devices"] if d["pci_address"] == bdf)


def test_readable_acs_and_a_direct_path(tmp_path):
    topology = build_and_probe(tmp_path, layout(extended_config=True))
    assert bridge(topology, GPU_PORT)["acs"] == {"capability": True, "control": 0, "redirect": False}
    assert device(topology, GPU)["acs"] == {"capability": False, "control": None, "redirect": False}
    assert topology["p2p"][GPU][NIC] == {"path": "direct", "redirected_at": [], "unread": []}
    assert topology["links"][GPU][NIC] == "PIX"  # links keep the physical level (one switch)
    assert topology["warnings"] == []


def test_a_redirecting_port_sends_the_pair_through_the_host_bridge(tmp_path):
    topology = build_and_probe(tmp_path, layout({"acs": 0x1D}, extended_config=True))
    assert bridge(topology, GPU_PORT)["acs"] == {"capability": True, "control": 0x1D, "redirect": True}
    assert topology["p2p"][GPU][NIC] == {"path": "host_bridge", "redirected_at": [GPU_PORT], "unread": []}
    # Upstream Forwarding and Source Validation alone (0x11) are not redirection.
    other = build_and_probe(tmp_path / "uf", layout({"acs": 0x11}, extended_config=True))
    assert other["p2p"][GPU][NIC]["path"] == "direct"


def test_64_byte_configs_leave_the_path_unknown_with_one_warning(tmp_path):
    topology = build_and_probe(tmp_path, layout())
    assert all(b["acs"] is None for b in topology["bridges"])
    assert all(d["acs"] is None for d in topology["devices"])
    assert topology["p2p"][GPU][NIC] == {"path": "unknown", "redirected_at": [], "unread": PATH}
    acs_warnings = [w for w in topology["warnings"] if w.startswith("ACS not readable")]
    assert acs_warnings == [
        "ACS not readable (config space shorter than 4096 bytes, missing or malformed: a capture or probe"
        f" without root gives 64 bytes) on {', '.join(sorted(PATH))}; GPU x NIC paths through them are unverified"
    ]
    assert ROOT_PORT not in acs_warnings[0]  # above the common bridge


def test_a_known_redirect_wins_over_unread_functions(tmp_path):
    # Only the GPU's port has a 4096-byte config (acs implies it); the rest stay 64 bytes.
    topology = build_and_probe(tmp_path, layout({"acs": 0x04}))
    entry = topology["p2p"][GPU][NIC]
    assert entry["path"] == "host_bridge" and entry["redirected_at"] == [GPU_PORT]
    assert sorted(entry["unread"]) == sorted(set(PATH) - {GPU_PORT})
    assert not [w for w in topology["warnings"] if w.startswith("ACS not readable")]  # the path is decided


def test_no_common_bridge_is_the_host_bridge_without_names(tmp_path):
    topology = build_and_probe(tmp_path, layout())
    assert topology["links"][GPU][FAR_NIC] == "NODE"
    assert topology["p2p"][GPU][FAR_NIC] == {"path": "host_bridge", "redirected_at": [], "unread": []}
    assert FAR_PORT not in " ".join(topology["warnings"])


def test_vfs_take_their_pfs_entry_and_their_config_is_not_read(tmp_path, monkeypatch):
    root = build_tree(layout({"acs": 0x1D}, extended_config=True), tmp_path)
    opened = []
    real_open = topology_sysfs._os_open

    def counting_open(path, flags, mode=0o777, *, dir_fd=None):
        if path.endswith("config"):
            opened.append(path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(topology_sysfs, "_os_open", counting_open)
    topology = probed(root)
    assert set(topology["p2p"][GPU]) == set(topology["links"][GPU]) == {NIC, *VFS, FAR_NIC}
    for vf in VFS:
        assert topology["p2p"][GPU][vf] is topology["p2p"][GPU][NIC]
        assert device(topology, vf)["acs"] is None
    # One read per function that is not a VF: five bridges, the GPU and two NICs.
    functions = [b["pci_address"] for b in topology["bridges"]] + [
        d["pci_address"] for d in topology["devices"] if not d["physfn"]
    ]
    assert len(opened) == len(functions) == 8


def corrupt(root, bdf: str, offset: int, header: int) -> None:
    """Write one extended capability header into a function's config, as a write at an offset on sysfs."""
    with open(function_dir(root, bdf) / "config", "r+b") as handle:
        handle.seek(offset)
        handle.write(struct.pack("<I", header))


@pytest.mark.parametrize(
    ("offset", "header", "said"),
    [
        (0x148, 0x000E | (0x148 << 20), "extended capability list loops at 0x148"),  # ARI pointing to itself
        (0x100, 0x0001 | (0x0C0 << 20), "extended capability at 0x100 points to 0x0c0"),  # below 0x100
    ],
)
def test_a_malformed_capability_list_gives_none_and_a_warning(tmp_path, offset, header, said):
    root = build_tree(layout(extended_config=True), tmp_path)
    corrupt(root, UPSTREAM, offset, header)
    topology = probed(root)
    assert bridge(topology, UPSTREAM)["acs"] is None
    assert bridge(topology, GPU_PORT)["acs"]["capability"] is True  # only that function
    assert (
        f"{UPSTREAM}: malformed extended capability list in config space ({said}); its ACS is unknown"
        in (topology["warnings"])
    )
    assert topology["p2p"][GPU][NIC] == {"path": "unknown", "redirected_at": [], "unread": [UPSTREAM]}


def test_an_unreadable_config_is_a_warning(tmp_path):
    root = build_tree(layout(extended_config=True), tmp_path)
    config = function_dir(root, NIC_PORT) / "config"
    config.unlink()
    config.mkdir()  # opens, but reading fails (EISDIR), as a file the kernel refuses
    topology = probed(root)
    assert bridge(topology, NIC_PORT)["acs"] is None
    assert any(
        w.startswith("cannot read ") and w.endswith(f"{NIC_PORT}/config: Is a directory") for w in topology["warnings"]
    )
    assert topology["p2p"][GPU][NIC]["unread"] == [NIC_PORT]
