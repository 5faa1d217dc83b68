# SPDX-License-Identifier: Apache-2.0
"""Topology snapshots: archives of a node's ``sys/`` and ``proc/`` trees.

A snapshot is a ``.tar.gz`` (or any compression ``tarfile`` reads) whose top
holds ``sys/`` and ``proc/``, or one directory that holds them. The
``topology_capture`` module writes them (:func:`write_archive`, deterministic
bytes: sorted entries, fixed times, owners and modes, no gzip name or time), and
the controller turns one back into a sysfs/procfs root pair that
``topology_info`` can probe (:func:`materialize_snapshot`):

- extraction is safe: members with absolute paths or ``..``, links that are
  absolute or point outside the archive, hard links, devices and FIFOs make
  the whole archive refused (:class:`SnapshotError`), never half-extracted;
- the tree is built in a temporary directory next to the target and renamed
  into place, so a reader never sees a half-built tree;
- a stamp (``.materialized.json``) records a checksum of the archive; when it
  matches, nothing is done.

No Ansible imports, no collection imports; Python >= 3.9.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import posixpath
import shutil
import tarfile
import tempfile
import zlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Union

    # archive name -> ("dir",) | ("file", content) | ("link", target)
    Entry = Union[tuple[str], tuple[str, bytes], tuple[str, str]]

STAMP = ".materialized.json"
# Bump when the way trees are produced changes (forces a rebuild everywhere).
FORMAT_VERSION = 1
# Fixed metadata of every archive member: the same tree gives the same bytes.
MEMBER_MTIME = 0
DIR_MODE = 0o755
FILE_MODE = 0o644
LINK_MODE = 0o777


class SnapshotError(Exception):
    """The archive is not a usable snapshot; the message says why."""


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def _sort_key(name: str) -> list[str]:
    # Component-wise, so a directory always comes right before its contents.
    return name.split("/")


def write_archive(entries: dict[str, Entry]) -> bytes:
    """The ``.tar.gz`` bytes of ``entries`` (archive name -> entry).

    Entries are ``("dir",)``, ``("file", content)`` or ``("link", target)``
    with a relative target. Parent directories missing from ``entries`` are
    added. The same entries always give the same bytes.
    """
    names = set(entries)
    for name in entries:
        parent = posixpath.dirname(name)
        while parent and parent not in names:
            names.add(parent)
            parent = posixpath.dirname(parent)
    raw = io.BytesIO()
    # No file name and time 0 in the gzip header, a fixed level.
    with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as gz:
        with tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for name in sorted(names, key=_sort_key):
                entry = entries.get(name, ("dir",))
                info = tarfile.TarInfo(name)
                info.mtime = MEMBER_MTIME
                info.uid = info.gid = 0
                info.uname = info.gname = ""
                if entry[0] == "dir":
                    info.type = tarfile.DIRTYPE
                    info.mode = DIR_MODE
                    tar.addfile(info)
                elif entry[0] == "link":
                    info.type = tarfile.SYMTYPE
                    info.mode = LINK_MODE
                    info.linkname = str(entry[1])
                    tar.addfile(info)
                elif entry[0] == "file":
                    content = entry[1]
                    if not isinstance(content, bytes):
                        raise TypeError(f"{name}: file content must be bytes")
                    info.type = tarfile.REGTYPE
                    info.mode = FILE_MODE
                    info.size = len(content)
                    tar.addfile(info, io.BytesIO(content))
                else:
                    raise ValueError(f"{name}: unknown entry kind {entry[0]!r}")
    return raw.getvalue()


# --------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------


def file_sha256(path: str | os.PathLike[str], prefix: bytes = b"") -> str:
    """SHA-256 of ``prefix`` followed by the content of ``path``."""
    digest = hashlib.sha256(prefix)
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _check_member(member: tarfile.TarInfo) -> None:
    """Refuse a member that could write outside the destination or is not data."""
    name = member.name
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise SnapshotError(f"member {name!r} has an absolute path")
    if ".." in parts:
        raise SnapshotError(f"member {name!r} has '..' in its path")
    if not parts:
        if member.isdir():
            return  # "./" itself
        raise SnapshotError(f"member {name!r} has an empty path")
    if member.isdir() or member.isreg():
        return
    if member.issym():
        target = member.linkname
        if not target or target.startswith("/"):
            raise SnapshotError(f"link {name!r} -> {target!r} is absolute")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname("/".join(parts)), target))
        if resolved == ".." or resolved.startswith("../"):
            raise SnapshotError(f"link {name!r} -> {target!r} points outside the snapshot")
        return
    kind = "hard link" if member.islnk() else "device or FIFO"
    raise SnapshotError(f"member {name!r} is a {kind}; a snapshot holds directories, files and symlinks only")


def make_owner_usable(root: str | os.PathLike[str]) -> None:
    """Give the owner rwx on dirs and rw on files (some snapshots ship 0500/0400)."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o700)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode | 0o600)


def _extract_all(tar: tarfile.TarFile, members: list[tarfile.TarInfo], dest: str) -> None:
    if hasattr(tarfile, "data_filter"):
        # The "data" filter checks everything again, and extracts without
        # owners and special mode bits.
        tar.extractall(dest, members=members, filter="data")
        return
    uid, gid = os.getuid(), os.getgid()
    for member in members:  # Python without extraction filters (3.9 before 3.9.17)
        member.uid, member.gid, member.uname, member.gname = uid, gid, "", ""
        member.mode &= 0o755
    tar.extractall(dest, members=members)  # every member was checked above


def _top_holds_sys(names: list[str]) -> bool:
    """Whether member ``names`` have ``sys/`` at the top or in the single top-level directory."""
    tops = {n.split("/")[0] for n in names if n not in ("", ".")}
    if "sys" in tops:
        return True
    return len(tops) == 1 and any(n.split("/")[1:2] == ["sys"] for n in names)


def check_archive(archive: str | os.PathLike[str]) -> None:
    """Raise :class:`SnapshotError` unless ``archive`` can be extracted safely and holds ``sys/``."""
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise SnapshotError(f"cannot read {os.fspath(archive)}: {exc}") from exc
    for member in members:
        _check_member(member)
    names = ["/".join(p for p in m.name.split("/") if p not in ("", ".")) for m in members]
    if not _top_holds_sys(names):
        raise SnapshotError(f"{os.fspath(archive)}: no sys/ directory at the top (nor in a single top-level directory)")


def extract_snapshot(archive: str | os.PathLike[str], dest: str | os.PathLike[str]) -> str:
    """Extract ``archive`` into the new directory ``dest``; return the directory with ``sys/``.

    That is ``dest`` itself, or the single top-level directory of the archive
    when it holds ``sys/`` (hwloc-gather-topology archives are wrapped so).
    ``proc/`` is created when the archive has none. Raises
    :class:`SnapshotError` for an unsafe or unusable archive, before anything
    is written.
    """
    dest = os.fspath(dest)
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            for member in members:
                _check_member(member)
            try:
                os.makedirs(dest)
            except OSError as exc:
                raise SnapshotError(f"cannot create {dest}: {exc.strerror or exc}") from exc
            _extract_all(tar, members, dest)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise SnapshotError(f"cannot extract {os.fspath(archive)}: {exc}") from exc
    make_owner_usable(dest)
    tree = dest
    if not os.path.isdir(os.path.join(dest, "sys")):
        top = os.listdir(dest)
        if len(top) == 1 and os.path.isdir(os.path.join(dest, top[0], "sys")):
            tree = os.path.join(dest, top[0])
    sys_dir = os.path.join(tree, "sys")
    if os.path.islink(sys_dir) or not os.path.isdir(sys_dir):
        raise SnapshotError(f"{os.fspath(archive)}: no sys/ directory at the top (nor in a single top-level directory)")
    proc_dir = os.path.join(tree, "proc")
    if os.path.islink(proc_dir):
        raise SnapshotError(f"{os.fspath(archive)}: proc is a link")
    os.makedirs(proc_dir, exist_ok=True)
    return tree


# --------------------------------------------------------------------------
# Trees in a cache directory
# --------------------------------------------------------------------------


def stamp_matches(target: str | os.PathLike[str], checksum: str) -> bool:
    """Whether ``target`` holds a tree built from sources with ``checksum``."""
    try:
        with open(os.path.join(target, STAMP), encoding="utf-8") as handle:
            stamp = json.load(handle)
    except (OSError, ValueError):
        return False
    return isinstance(stamp, dict) and stamp.get("sha256") == checksum


def replace_tree(
    target: str | os.PathLike[str],
    checksum: str,
    build: Callable[[str], str],
    record: dict[str, object] | None = None,
) -> tuple[str, bool]:
    """Make ``target`` the tree ``build`` produces, unless its stamp matches ``checksum``.

    ``build(workdir)`` makes the tree somewhere inside the empty directory
    ``workdir`` and returns its path; the tree gets the stamp (``record`` adds
    fields to it) and is renamed to ``target``, replacing what was there.
    Returns ``(target, changed)``. A ``target`` that is a non-empty directory
    without a stamp is never replaced (:class:`SnapshotError`).
    """
    target = os.path.abspath(os.fspath(target))
    if stamp_matches(target, checksum):
        return target, False
    if os.path.isdir(target) and not os.path.islink(target) and os.listdir(target):
        if not os.path.isfile(os.path.join(target, STAMP)):
            # Never replace a directory this code did not make (a home, a project).
            raise SnapshotError(f"{target} is not empty and holds no {STAMP}: not a tree made from a snapshot")
    parent, base = os.path.split(target)
    os.makedirs(parent, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix=f".{base}.build-", dir=parent)
    trash = None
    try:
        tree = build(workdir)
        stamp = dict(record or {})
        stamp.update({"name": base, "sha256": checksum, "format": FORMAT_VERSION})
        with open(os.path.join(tree, STAMP), "w", encoding="utf-8") as handle:
            json.dump(stamp, handle, indent=1, sort_keys=True)
            handle.write("\n")
        if os.path.lexists(target):
            trash = tempfile.mkdtemp(prefix=f".{base}.old-", dir=parent)
            os.rename(target, os.path.join(trash, "old"))
        try:
            os.rename(tree, target)
        except OSError:
            # Someone else put a tree there meanwhile; accept it if it is current.
            if stamp_matches(target, checksum):
                return target, False
            raise
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
    return target, True


def snapshot_checksum(archive: str | os.PathLike[str]) -> str:
    """The checksum a tree materialized from ``archive`` is stamped with."""
    return file_sha256(archive, f"aligned.dra snapshot v{FORMAT_VERSION}\0".encode())


def materialize_snapshot(archive: str | os.PathLike[str], target: str | os.PathLike[str]) -> tuple[str, bool]:
    """Make ``target`` a directory with the ``sys/`` and ``proc/`` of ``archive``.

    Returns ``(target, changed)``; nothing is done (``changed`` false) when
    ``target`` was made from an archive with the same bytes.
    """
    try:
        checksum = snapshot_checksum(archive)
    except OSError as exc:
        raise SnapshotError(f"cannot read {os.fspath(archive)}: {exc.strerror or exc}") from exc
    return replace_tree(
        target,
        checksum,
        lambda workdir: extract_snapshot(archive, os.path.join(workdir, "unpack")),
        {"source": os.path.basename(os.fspath(archive))},
    )
