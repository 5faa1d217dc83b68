# SPDX-License-Identifier: Apache-2.0
"""Atomic file replacement: a reader (or a restart after kill -9) sees the old file or the new one."""

from __future__ import annotations

import os

TMP_SUFFIX = ".tmp"


def atomic_write(path: str, data: bytes, mode: int = 0o644, durable: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and ``rename``.

    With ``durable`` the file and the directory entry are flushed to disk before
    returning (what a checkpoint needs across power loss); without it only the
    rename's atomicity is kept (enough for tmpfs like ``/var/run/cdi``).
    """
    directory = os.path.dirname(path) or "."
    tmp = os.path.join(directory, "." + os.path.basename(path) + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    if durable:
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def remove_if_present(path: str) -> bool:
    """Remove a file; True when it existed."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
