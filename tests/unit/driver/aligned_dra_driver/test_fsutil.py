# SPDX-License-Identifier: Apache-2.0
"""Atomic writes: a fresh temporary file, never a leftover or a link, with exactly the mode asked for.

A full disk (a real tmpfs, mounted) is tests/integration/driver/aligned_dra_driver/test_fsutil.py's.
"""

from __future__ import annotations

import os

import pytest
from aligned_dra_driver import fsutil


@pytest.fixture
def umask():
    def set_umask(value):
        previous.append(os.umask(value))

    previous = []
    yield set_umask
    for value in reversed(previous):
        os.umask(value)


def _mode(path):
    return os.stat(path).st_mode & 0o7777


@pytest.mark.parametrize("mask", [0o000, 0o022, 0o077, 0o777])
@pytest.mark.parametrize("mode", [0o600, 0o644])
def test_the_mode_does_not_depend_on_the_umask(tmp_path, umask, mask, mode):
    umask(mask)
    target = tmp_path / "file"
    fsutil.atomic_write(str(target), b"data", mode=mode)
    assert _mode(target) == mode
    assert target.read_bytes() == b"data"
    assert [p.name for p in tmp_path.iterdir()] == ["file"]


def test_a_leftover_temporary_file_is_replaced_not_reused(tmp_path):
    target = tmp_path / "checkpoint.json"
    leftover = tmp_path / ".checkpoint.json.tmp"
    leftover.write_bytes(b"half-written and much longer than the new data")
    leftover.chmod(0o666)
    fsutil.atomic_write(str(target), b"new", mode=0o600)
    assert target.read_bytes() == b"new"
    assert _mode(target) == 0o600
    assert not leftover.exists()


def test_a_link_in_place_of_the_temporary_file_is_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    victim.chmod(0o600)
    target = tmp_path / "spec.json"
    os.symlink(victim, tmp_path / ".spec.json.tmp")
    fsutil.atomic_write(str(target), b"{}", mode=0o644)
    assert victim.read_bytes() == b"keep me"
    assert _mode(victim) == 0o600
    assert target.read_bytes() == b"{}" and not target.is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.json", "victim"]


def test_a_dangling_link_in_place_of_the_temporary_file_creates_nothing_at_its_target(tmp_path):
    target = tmp_path / "spec.json"
    os.symlink(tmp_path / "elsewhere", tmp_path / ".spec.json.tmp")
    fsutil.atomic_write(str(target), b"{}")
    assert not (tmp_path / "elsewhere").exists()
    assert target.read_bytes() == b"{}"


def test_an_existing_file_is_replaced_whole(tmp_path):
    target = tmp_path / "file"
    target.write_bytes(b"old contents, longer")
    target.chmod(0o666)
    fsutil.atomic_write(str(target), b"new", mode=0o600, durable=False)
    assert target.read_bytes() == b"new"
    assert _mode(target) == 0o600


def test_a_failing_rename_leaves_no_temporary_file(tmp_path, monkeypatch):
    def refuse(src, dst):
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(fsutil.os, "rename", refuse)
    with pytest.raises(OSError, match="Read-only"):
        fsutil.atomic_write(str(tmp_path / "f"), b"data")
    assert list(tmp_path.iterdir()) == []
