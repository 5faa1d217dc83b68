# SPDX-License-Identifier: Apache-2.0
"""Atomic file replacement: a reader (or a restart after kill -9) sees the old file or the new one."""

from __future__ import annotations

import os

TMP_SUFFIX = ".tmp"


def atomic_write(path: str, data: bytes, mode: int = 0o644, durable: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and ``rename``.

    With ``durable`` the new file's data reaches the disk (``fdatasync``) before the rename
    (after a power loss the file is the old or the new one, never empty or
    half-written; the kubelet's own checkpoints are written the same way);
    the directory itself is not flushed, which would double the cost, so the
    rename may be lost with the last few seconds of a power loss. Without
    ``durable`` only the rename's atomicity is kept (enough for a tmpfs like
    ``/var/run/cdi``).

    The file gets exactly ``mode`` (set with ``fchmod``, independent of the umask). When
    anything fails (``ENOSPC``, ``EIO``, a read-only file system) the temporary file is
    removed and the error raised: ``path`` is still the old file, or absent.
    """
    directory = os.path.dirname(path) or "."
    tmp = os.path.join(directory, "." + os.path.basename(path) + TMP_SUFFIX)
    # a temporary file left by a crash (or a link planted in its place) is removed, never opened:
    # the new one is created fresh, so it cannot follow a link or keep a leftover's owner and mode
    remove_if_present(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        try:
            os.fchmod(fd, mode)  # the mode asked for, whatever the umask
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if durable:
                os.fdatasync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except BaseException:
        # a full or failing disk leaves no half-written temporary file behind; the old file stays
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def remove_if_present(path: str) -> bool:
    """Remove a file; True when it existed."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True
