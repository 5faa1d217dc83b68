# SPDX-License-Identifier: Apache-2.0
"""snapshot: deterministic archives, safe extraction, atomic and idempotent trees."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.snapshots import archive as snapshot

ENTRIES = {
    "sys/devices/pci0000:00/0000:00:03.0/vendor": ("file", b"0x8086\n"),
    "sys/bus/pci/devices/0000:00:03.0": ("link", "../../../devices/pci0000:00/0000:00:03.0"),
    "proc": ("dir",),
}


def test_archives_are_deterministic_and_complete():
    first = snapshot.write_archive(ENTRIES)
    assert first == snapshot.write_archive(dict(reversed(list(ENTRIES.items()))))
    assert first[:2] == b"\x1f\x8b" and first[4:8] == b"\0\0\0\0"  # gzip, no time in the header
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        vendor = tar.extractfile("sys/devices/pci0000:00/0000:00:03.0/vendor").read()
    # Parents are added, every directory comes before what it holds.
    assert list(members) == [
        "proc",
        "sys",
        "sys/bus",
        "sys/bus/pci",
        "sys/bus/pci/devices",
        "sys/bus/pci/devices/0000:00:03.0",
        "sys/devices",
        "sys/devices/pci0000:00",
        "sys/devices/pci0000:00/0000:00:03.0",
        "sys/devices/pci0000:00/0000:00:03.0/vendor",
    ]
    assert vendor == b"0x8086\n"
    link = members["sys/bus/pci/devices/0000:00:03.0"]
    assert link.issym() and link.linkname == "../../../devices/pci0000:00/0000:00:03.0"
    assert {(m.mtime, m.uid, m.gid, m.uname, m.gname) for m in members.values()} == {(0, 0, 0, "", "")}
    assert members["sys"].mode == 0o755 and members["sys/devices/pci0000:00/0000:00:03.0/vendor"].mode == 0o644


def test_a_change_changes_the_bytes():
    changed = dict(ENTRIES)
    changed["sys/devices/pci0000:00/0000:00:03.0/vendor"] = ("file", b"0x15b3\n")
    assert snapshot.write_archive(changed) != snapshot.write_archive(ENTRIES)


def archive_with(path: Path, *members: tuple[str, str, str]) -> Path:
    """A .tar.gz with (name, kind, link target) members plus a valid sys/."""
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, target in (("sys", "dir", ""), *members):
            info = tarfile.TarInfo(name)
            info.type = {
                "dir": tarfile.DIRTYPE,
                "file": tarfile.REGTYPE,
                "sym": tarfile.SYMTYPE,
                "hard": tarfile.LNKTYPE,
                "chr": tarfile.CHRTYPE,
                "fifo": tarfile.FIFOTYPE,
            }[kind]
            info.linkname = target
            tar.addfile(info, io.BytesIO(b"") if kind == "file" else None)
    return path


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (("/etc/passwd", "file", ""), "absolute path"),
        (("sys/../../evil", "file", ""), "'..'"),
        (("sys/abs", "sym", "/etc/passwd"), "is absolute"),
        (("sys/up", "sym", "../../outside"), "outside the snapshot"),
        (("sys/deep/up", "sym", "../../../outside"), "outside the snapshot"),
        (("sys/hard", "hard", "sys"), "hard link"),
        (("sys/null", "chr", ""), "device or FIFO"),
        (("sys/pipe", "fifo", ""), "device or FIFO"),
    ],
)
def test_unsafe_archives_are_refused_before_anything_is_written(tmp_path, member, reason):
    archive = archive_with(tmp_path / "bad.tar.gz", member)
    with pytest.raises(snapshot.SnapshotError, match=reason):
        snapshot.check_archive(archive)
    with pytest.raises(snapshot.SnapshotError, match=reason):
        snapshot.extract_snapshot(archive, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with pytest.raises(snapshot.SnapshotError, match=reason):
        snapshot.materialize_snapshot(archive, tmp_path / "cache" / "node")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == []  # no build leftovers


def test_links_inside_the_snapshot_are_fine(tmp_path):
    archive = archive_with(
        tmp_path / "ok.tar.gz",
        ("sys/devices", "dir", ""),
        ("sys/class", "dir", ""),
        ("sys/class/up", "sym", "../devices"),
        ("sys/class/dangling", "sym", "../devices/gone"),
    )
    snapshot.check_archive(archive)
    tree = Path(snapshot.extract_snapshot(archive, tmp_path / "out"))
    assert tree == tmp_path / "out"
    assert os.readlink(tree / "sys/class/up") == "../devices"
    assert (tree / "proc").is_dir()  # created when the archive has none


def test_one_top_level_directory_is_unwrapped(tmp_path):
    archive = tmp_path / "wrapped.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in ("node17", "node17/sys", "node17/proc"):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            info.mode = 0o500  # read-only directories, as some real snapshots have
            tar.addfile(info)
    snapshot.check_archive(archive)
    tree = Path(snapshot.extract_snapshot(archive, tmp_path / "out"))
    assert tree == tmp_path / "out" / "node17"
    assert os.access(tree / "sys", os.W_OK | os.X_OK)  # usable, so the cache can be replaced


@pytest.mark.parametrize("names", [("a/sys", "b/sys"), ("proc",), ("node/proc",)])
def test_an_archive_without_sys_is_refused(tmp_path, names):
    archive = tmp_path / "nosys.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
    with pytest.raises(snapshot.SnapshotError, match="no sys/"):
        snapshot.check_archive(archive)
    with pytest.raises(snapshot.SnapshotError, match="no sys/"):
        snapshot.extract_snapshot(archive, tmp_path / "out")


@pytest.mark.parametrize("content", [b"", b"not an archive at all\n", b"\x1f\x8b\x08\x00garbage"])
def test_garbage_is_refused(tmp_path, content):
    archive = tmp_path / "garbage.tar.gz"
    archive.write_bytes(content)
    with pytest.raises(snapshot.SnapshotError, match="cannot read"):
        snapshot.check_archive(archive)


def test_materialize_is_idempotent_and_replaces_on_change(tmp_path):
    archive = tmp_path / "node.tar.gz"
    archive.write_bytes(snapshot.write_archive(ENTRIES))
    target = tmp_path / "cache" / "node"
    root, changed = snapshot.materialize_snapshot(archive, target)
    assert (Path(root), changed) == (target, True)
    vendor = target / "sys/devices/pci0000:00/0000:00:03.0/vendor"
    assert vendor.read_text() == "0x8086\n"
    assert (target / "sys/bus/pci/devices/0000:00:03.0" / "vendor").read_text() == "0x8086\n"
    stamp = json.loads((target / snapshot.STAMP).read_text())
    assert stamp == {
        "format": snapshot.FORMAT_VERSION,
        "name": "node",
        "sha256": snapshot.snapshot_checksum(archive),
        "source": "node.tar.gz",
    }
    inode = target.stat().st_ino
    assert snapshot.materialize_snapshot(archive, target) == (str(target), False)
    assert target.stat().st_ino == inode  # untouched

    changed_entries = dict(ENTRIES)
    changed_entries["sys/devices/pci0000:00/0000:00:03.0/vendor"] = ("file", b"0x15b3\n")
    archive.write_bytes(snapshot.write_archive(changed_entries))
    assert snapshot.materialize_snapshot(archive, target) == (str(target), True)
    assert vendor.read_text() == "0x15b3\n"
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["node"]  # no build or old trees left


def test_a_directory_it_did_not_make_is_never_replaced(tmp_path):
    archive = tmp_path / "node.tar.gz"
    archive.write_bytes(snapshot.write_archive(ENTRIES))
    home = tmp_path / "home"
    home.mkdir()
    (home / "precious").write_text("keep me\n")
    with pytest.raises(snapshot.SnapshotError, match="holds no"):
        snapshot.materialize_snapshot(archive, home)
    assert (home / "precious").read_text() == "keep me\n"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert snapshot.materialize_snapshot(archive, empty) == (str(empty), True)


def test_a_failed_build_leaves_the_old_tree(tmp_path):
    target = tmp_path / "node"
    snapshot.replace_tree(target, "one", lambda work: work)

    def broken(work: str) -> str:
        (Path(work) / "half").write_text("x")
        raise RuntimeError("build failed")

    with pytest.raises(RuntimeError):
        snapshot.replace_tree(target, "two", broken)
    assert snapshot.stamp_matches(target, "one")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node"]
