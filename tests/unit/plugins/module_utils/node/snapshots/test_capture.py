# SPDX-License-Identifier: Apache-2.0
"""capture: a probe of a captured snapshot returns what a probe of the node returns.

The trees are real machines' snapshots and synthetic layouts
(tests/fixtures/materialize.py); each is captured, written as an archive,
materialized again with the collection's own extraction, and both are probed.
A trace of every path the probe touches on the original proves the capture
copies all of it, so a new read in the probe without a PROBE_READS entry fails
here.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node import topology
from ansible_collections.aligned.dra.plugins.module_utils.node.snapshots import archive as snapshot
from ansible_collections.aligned.dra.plugins.module_utils.node.snapshots import capture
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import sysfs as topology_sysfs
from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize
from ansible_collections.aligned.dra.tests.support.fuzzing import profiles as fuzz_profiles

ROUND_TRIP = [
    "dgx-h100",
    "dgx-h100-acs",
    "hwloc-32intel64-8ve",
    "hwloc-32em64t-mic",
    "hwloc-fakepcilocalities",
    "ghw-nvidia-p100",
    "ghw-westmere-vfs",
    "mi300x",
    "hyperv-ndv4",
    "pci-domain-5digit",
    "vm-flat",
]


# The trees scripts/test.sh materialized before the run (materialize() only checks their stamp then); the
# tests read them and never write there.
TREES = Path(__file__).resolve().parents[6] / ".cache" / "sysfs"


@pytest.fixture(scope="module")
def trees():
    return lambda name: materialize(name, TREES)


def comparable(found: dict, root: Path) -> dict:
    """The probe's result without the root it was given (in the field and in warnings)."""
    found = dict(found)
    assert found.pop("sysfs_root") == str(root / "sys")
    found["warnings"] = [w.replace(str(root), "<root>") for w in found["warnings"]]
    return found


def probe(root: Path) -> dict:
    return comparable(topology.probe(str(root / "sys"), str(root / "proc")), root)


def round_trip(tree: Path, work: Path, redact: bool = False) -> tuple[Path, dict]:
    data, info = capture.capture_archive(str(tree / "sys"), str(tree / "proc"), redact)
    archive = work / "node.tar.gz"
    archive.write_bytes(data)
    root, changed = snapshot.materialize_snapshot(archive, work / "node")
    assert changed
    return Path(root), info


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_probe_of_the_snapshot_equals_probe_of_the_tree(name, trees, tmp_path):
    tree = trees(name)
    root, info = round_trip(tree, tmp_path)
    original = probe(tree)
    assert original["devices"], name  # a tree with nothing in it would prove nothing
    assert probe(root) == original
    assert info["counts"]["files"] > 0


def test_what_decides_gpudirect_survives_the_capture(trees, tmp_path):
    """4 KiB config spaces, IOMMU groups, modules, kernel: the copy reads as the node does."""
    tree = trees("dgx-h100-acs")
    root, _info = round_trip(tree, tmp_path)
    original, copied = probe(tree), probe(root)
    assert all(b["acs"] is not None for b in original["bridges"])
    assert original["p2p"]["0000:9a:00.0"]["0000:9d:00.0"]["path"] == "host_bridge"
    assert original["gpudirect"]["iommu"]["mode"] == "passthrough"
    assert original["gpudirect"]["peer_memory"]["method"] == "dma_buf"
    for key in ("bridges", "devices", "p2p", "gpudirect"):
        assert copied[key] == original[key], key


def test_an_iommu_that_is_off_survives_the_capture(tmp_path):
    tree = small_tree(tmp_path / "tree")
    (tree / "sys/kernel/iommu_groups").mkdir(parents=True)
    (tree / "sys/module").mkdir()
    root, _info = round_trip(tree, tmp_path)
    block = probe(root)["gpudirect"]
    assert (block["iommu"]["mode"], block["peer_memory"]["nvidia_peermem"]) == ("off", False)


@pytest.mark.slow
@fuzz_profiles.full_only("the round trip of VFs runs on ghw-westmere-vfs in every tier")
def test_a_big_sriov_node_round_trips(trees, tmp_path):
    tree = trees("sriov-8x64")
    root, _info = round_trip(tree, tmp_path)
    original = probe(tree)
    assert original["counts"]["vfs"] == 512
    assert probe(root) == original


class Trace:
    """Every path the probe opens (as a file), reads as a link, or tests as a directory."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: set[tuple[str, str]] = set()
        real_open, real_readlink, real_isdir = os.open, os.readlink, os.path.isdir

        def where(path, dir_fd):
            if dir_fd is None:
                return os.fspath(path)
            return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), os.fspath(path))

        def traced_open(path, flags, mode=0o777, *, dir_fd=None):
            self.paths.add(("open", where(path, dir_fd)))
            return real_open(path, flags, mode, dir_fd=dir_fd)

        def traced_readlink(path, *, dir_fd=None):
            self.paths.add(("readlink", where(path, dir_fd)))
            return real_readlink(path, dir_fd=dir_fd)

        def traced_isdir(path):
            self.paths.add(("isdir", os.fspath(path)))
            return real_isdir(path)

        # The probe's system calls are all in its sysfs part, bound there once for speed.
        monkeypatch.setattr(topology_sysfs, "_os_open", traced_open)
        monkeypatch.setattr(topology_sysfs, "_os_readlink", traced_readlink)
        monkeypatch.setattr(os, "open", traced_open)
        monkeypatch.setattr(os, "readlink", traced_readlink)
        monkeypatch.setattr(os.path, "isdir", traced_isdir)


def what_the_probe_sees(op: str, path: str, top: str) -> tuple:
    """What operation ``op`` on ``path`` gives the probe (links as targets relative to ``top``)."""
    if op == "readlink":
        if not os.path.islink(path):
            return ("no link",)
        target = os.path.normpath(os.path.join(os.path.dirname(path), os.readlink(path)))
        return ("link", os.path.relpath(target, top))
    if op == "isdir":
        return ("dir", os.path.isdir(path))
    if os.path.isdir(path):
        return ("dir",)
    if os.path.isfile(path):
        with open(path, "rb") as handle:
            return ("file", handle.read())
    return ("missing",)


def left_out_by_design(rel: str, seen: tuple) -> bool:
    """Interfaces of no PCI function (``lo``): the probe reads their link and drops them."""
    parts = rel.split("/")
    if parts[:2] != ["sys", "class"] or parts[2] not in topology.PROBE_READS["class_pci_only"] or len(parts) != 4:
        return False
    return seen[0] == "link" and not any(capture._BDF_RE.match(p) for p in seen[1].split("/")[:-1])


@pytest.mark.parametrize("name", ["dgx-h100-acs", "hwloc-32em64t-mic", "ghw-westmere-vfs", "mi300x"])
def test_everything_the_probe_touches_is_captured(name, trees, tmp_path, monkeypatch):
    tree = trees(name)
    root, _info = round_trip(tree, tmp_path)
    with monkeypatch.context() as patched:
        trace = Trace(patched)
        topology.probe(str(tree / "sys"), str(tree / "proc"))
    touched = sorted((op, p) for op, p in trace.paths if p.startswith(str(tree) + "/"))
    assert len(touched) > 50
    missing = []
    for op, path in touched:
        rel = path[len(str(tree)) + 1 :]
        before = what_the_probe_sees(op, path, str(tree))
        if before in (("missing",), ("no link",)) or left_out_by_design(rel, before):
            continue  # optional attributes the tree does not have, plain files in class dirs
        if before != what_the_probe_sees(op, str(root / rel), str(root)):
            missing.append(f"{op} {rel}")
    assert missing == [], f"read by the probe, not captured (add them to topology.PROBE_READS): {missing[:20]}"


def test_capture_is_deterministic(trees):
    tree = trees("hwloc-32intel64-8ve")
    first, _first_info = capture.capture_archive(str(tree / "sys"), str(tree / "proc"))
    second, _second_info = capture.capture_archive(str(tree / "sys"), str(tree / "proc"))
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names, key=lambda n: n.split("/"))
    assert {n.split("/")[0] for n in names} == {"sys", "proc"}
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members} == {(0, 0, 0, "", "")}
    # Only what the probe reads: no resources, no DMI, no cpuinfo (config space, as far as readable, is read).
    assert not [n for n in names if n.rsplit("/", 1)[-1] in ("resource", "resource0", "cpuinfo")]
    # Links stay links, relative.
    links = [m for m in members if m.issym()]
    assert links and all(not m.linkname.startswith("/") for m in links)


def test_redaction_leaves_out_addresses_and_guids(trees, tmp_path):
    tree = trees("hwloc-32em64t-mic")  # ib0 with a MAC, mlx4_0 with a node GUID
    original = probe(tree)
    assert any(n["address"] for d in original["devices"] for n in d["netdevs"])
    assert any(r["node_guid"] for r in original["rdma_devices"])
    root, _info = round_trip(tree, tmp_path, redact=True)
    redacted = probe(root)
    assert all(n["address"] is None for d in redacted["devices"] for n in d["netdevs"])
    assert all(r["node_guid"] is None for r in redacted["rdma_devices"])
    for device in original["devices"]:
        for netdev in device["netdevs"]:
            netdev["address"] = None
    for rdma in original["rdma_devices"]:
        rdma["node_guid"] = None
    assert redacted == original  # nothing else is lost


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def small_tree(root: Path) -> Path:
    """One NUMA node, one NIC with an interface, a virtual interface, odd links."""
    write(root / "sys/devices/system/node/node0/cpulist", "0-3\n")
    write(root / "sys/devices/system/node/node0/distance", "10\n")
    write(root / "sys/devices/system/node/possible", "0\n")  # not read by the probe
    nic = root / "sys/devices/pci0000:00/0000:00:03.0"
    for name, value in {"class": "0x020000", "vendor": "0x8086", "device": "0x1521", "numa_node": "0"}.items():
        write(nic / name, value + "\n")
    (nic / "config").write_bytes(b"\x86\x80\x21\x15" + b"\0" * 60)
    write(nic / "net/eth0/address", "52:54:00:12:34:56\n")
    write(nic / "net/eth0/type", "1\n")
    write(root / "sys/devices/virtual/net/lo/address", "00:00:00:00:00:00\n")
    (root / "sys/bus/pci/devices").mkdir(parents=True)
    # An absolute link into the tree, as a copy made with absolute links has it.
    (root / "sys/bus/pci/devices/0000:00:03.0").symlink_to(root / "sys/devices/pci0000:00/0000:00:03.0")
    (nic / "driver").symlink_to("/lib/modules/igb")  # outside the tree
    (root / "sys/class/net").mkdir(parents=True)
    (root / "sys/class/net/eth0").symlink_to("../../devices/pci0000:00/0000:00:03.0/net/eth0")
    (root / "sys/class/net/lo").symlink_to("../../devices/virtual/net/lo")
    write(root / "proc/sys/kernel/hostname", "node1\n")
    write(root / "proc/cpuinfo", "processor : 0\n")  # not read by the probe
    return root


def test_capture_reads_only_what_the_probe_needs(tmp_path):
    tree = small_tree(tmp_path / "tree")
    result = capture.capture(str(tree / "sys"), str(tree / "proc"))
    entries = result["entries"]
    assert entries["sys/bus/pci/devices/0000:00:03.0"] == ("link", "../../../devices/pci0000:00/0000:00:03.0")
    assert entries["sys/class/net/eth0"] == ("link", "../../devices/pci0000:00/0000:00:03.0/net/eth0")
    assert entries["sys/devices/pci0000:00/0000:00:03.0/net/eth0/address"] == ("file", b"52:54:00:12:34:56\n")
    assert entries["proc/sys/kernel/hostname"] == ("file", b"node1\n")
    # Binary, as read (64 bytes: what a capture without root gets of a real config file).
    assert entries["sys/devices/pci0000:00/0000:00:03.0/config"] == ("file", b"\x86\x80\x21\x15" + b"\0" * 60)
    for absent in (
        "sys/class/net/lo",  # belongs to no PCI function
        "sys/devices/virtual/net/lo/address",
        "sys/devices/pci0000:00/0000:00:03.0/driver",  # points outside the tree
        "sys/devices/system/node/possible",
        "proc/cpuinfo",
    ):
        assert absent not in entries, absent
    assert result["left_out"] == [
        "sys/devices/pci0000:00/0000:00:03.0/driver: link to /lib/modules/igb outside the sysfs root"
    ]
    counts = result["counts"]
    assert sum(counts.values()) == len(entries)
    assert counts["links"] == 2


def test_files_are_copied_by_reading_them_not_by_their_size(tmp_path):
    # procfs and sysfs report sizes that are not the content's (0 and 4096): a
    # copy by size would be empty or padded. /proc/self/stat is read here.
    proc = tmp_path / "proc"
    (proc / "sys/kernel").mkdir(parents=True)
    (proc / "sys/kernel/hostname").symlink_to("/proc/sys/kernel/hostname")
    assert os.stat("/proc/sys/kernel/hostname").st_size == 0
    sys_root = tmp_path / "sys"
    sys_root.mkdir()
    entries = capture.capture(str(sys_root), str(proc))["entries"]
    with open("/proc/sys/kernel/hostname", "rb") as handle:
        assert entries["proc/sys/kernel/hostname"] == ("file", handle.read())


def test_this_machines_own_sys_round_trips(tmp_path):
    """The live /sys and /proc of the test machine: real sysfs files (size 4096, short reads)."""
    if not os.path.isdir("/sys/bus/pci/devices"):
        pytest.skip("no /sys/bus/pci on this machine")
    data, _info = capture.capture_archive("/sys", "/proc")
    archive = tmp_path / "live.tar.gz"
    archive.write_bytes(data)
    root, _changed = snapshot.materialize_snapshot(archive, tmp_path / "live")
    live = topology.probe("/sys", "/proc")
    copied = topology.probe(str(Path(root) / "sys"), str(Path(root) / "proc"))
    for found in (live, copied):
        found.pop("sysfs_root")
        found.pop("warnings")  # "cannot read" of root-only files is not reproduced
        for device in found["devices"]:
            for netdev in device["netdevs"]:
                # Live values that may change between the two probes.
                netdev["operstate"] = netdev["speed_mbps"] = None
    assert copied == live


def test_a_root_that_is_no_directory_is_refused(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(capture.CaptureError, match="^sysfs_root: "):
        capture.capture(str(tmp_path / "afile"), str(tmp_path))
    with pytest.raises(capture.CaptureError, match="^procfs_root: "):
        capture.capture(str(tmp_path), str(tmp_path / "missing"))
