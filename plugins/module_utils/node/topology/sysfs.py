# SPDX-License-Identifier: Apache-2.0
"""Reading sysfs and procfs: small, fast file and link access collecting warnings.

Every read tolerates missing files, unreadable files and dangling symlinks:
the result becomes ``None`` and, where the file should have been there, a
warning is recorded instead of an exception. All the probe's system calls go
through this module (tests trace them by patching its ``_os_*`` names).
"""

from __future__ import annotations

import os

# Bound once: the probe makes thousands of these calls on big nodes.
_os_open = os.open
_os_read = os.read
_os_close = os.close
_os_readlink = os.readlink
_O_RDONLY = os.O_RDONLY
_O_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY


class Reader:
    """Small, fast file access under a root, collecting warnings."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        # Directory descriptors kept open for the whole probe: the hundreds of
        # VFs of a PF are siblings, and a lookup relative to their common
        # directory spares the kernel most of every path walk.
        self._dirs: dict[str, int] = {}

    def dir_fd(self, path: str) -> int:
        """A descriptor of directory ``path`` kept until :meth:`close`; -1 if it cannot be opened."""
        fd = self._dirs.get(path)
        if fd is None:
            try:
                fd = _os_open(path, _O_DIRECTORY)
            except OSError:
                fd = -1  # reads by full path then report what is wrong
            self._dirs[path] = fd
        return fd

    def close(self) -> None:
        for fd in self._dirs.values():
            if fd >= 0:
                _os_close(fd)
        self._dirs.clear()

    def read_under(self, directory: str, name: str, expected: bool = False) -> str | None:
        """:meth:`read` of ``directory/name``, relative to a kept descriptor of ``directory``."""
        # Written out rather than through read and _drain: this runs for
        # every VF, and each Python call level costs as much as the read.
        dir_fd = self._dirs.get(directory)
        if dir_fd is None:
            dir_fd = self.dir_fd(directory)
        if dir_fd < 0:
            return self.read(directory + "/" + name, expected)
        try:
            fd = _os_open(name, _O_RDONLY, dir_fd=dir_fd)
        except OSError as exc:
            return self._open_failed(directory + "/" + name, exc, expected)
        try:
            return _os_read(fd, 65536).decode("utf-8", "replace").strip()
        except OSError as exc:
            return self._read_failed(directory + "/" + name, exc)
        finally:
            _os_close(fd)

    def readlink_under(self, directory: str, name: str) -> str | None:
        """:meth:`readlink` of ``directory/name``, relative to a kept descriptor of ``directory``."""
        fd = self._dirs.get(directory)
        if fd is None:
            fd = self.dir_fd(directory)
        if fd < 0:
            return self.readlink(directory + "/" + name)
        try:
            return _os_readlink(name, dir_fd=fd)
        except OSError as exc:
            return self._readlink_failed(directory + "/" + name, exc)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def read(self, path: str, expected: bool = False) -> str | None:
        """Return the stripped content of ``path`` or ``None``.

        A missing file is normal for optional attributes; ``expected`` files
        that are missing, and any file that exists but cannot be read, add a
        warning.
        """
        try:
            fd = _os_open(path, _O_RDONLY)
        except OSError as exc:
            return self._open_failed(path, exc, expected)
        return self._drain(fd, path)

    def _open_failed(self, path: str, exc: OSError, expected: bool) -> None:
        if not isinstance(exc, FileNotFoundError):
            self.warn(f"cannot open {path}: {exc.strerror or exc}")
        elif expected:
            self.warn(f"missing file {path}")

    def _drain(self, fd: int, path: str, name: str = "") -> str | None:
        try:
            return _os_read(fd, 65536).decode("utf-8", "replace").strip()
        except OSError as exc:
            return self._read_failed(path + name, exc)
        finally:
            _os_close(fd)

    def _read_failed(self, path: str, exc: OSError) -> None:
        # sysfs answers EINVAL for e.g. the speed of a link that is down.
        if exc.errno not in (22, 19, 95):  # EINVAL, ENODEV, EOPNOTSUPP
            self.warn(f"cannot read {path}: {exc.strerror or exc}")

    def directory(self, path: str) -> _Dir:
        return _Dir(self, path)

    def readlink(self, path: str) -> str | None:
        try:
            return _os_readlink(path)
        except OSError as exc:
            return self._readlink_failed(path, exc)

    def _readlink_failed(self, path: str, exc: OSError) -> None:
        # ENOENT: an optional link (driver, physfn); EINVAL: not a symlink.
        if exc.errno not in (2, 22):
            self.warn(f"cannot read link {path}: {exc.strerror or exc}")

    def listdir(self, path: str, expected: bool = False) -> list[str]:
        try:
            return os.listdir(path)
        except FileNotFoundError:
            if expected:
                self.warn(f"missing directory {path}")
            return []
        except OSError as exc:
            self.warn(f"cannot list {path}: {exc.strerror or exc}")
            return []

    def class_links(self, class_dir: str, keep_plain: bool = False, expected: bool = False) -> list[tuple[str, str]]:
        """(name, absolute target) of every link in ``class_dir``, sorted by name.

        One tight loop per directory: it runs for every PCI function, netdev,
        RDMA device and character device of every VF. Entries that are not
        links (``abi_version``) are left out, or kept as they are with
        ``keep_plain``.
        """
        links = []
        up = base = None  # the "../../" every link of a class directory starts with
        strip = 0
        names = sorted(self.listdir(class_dir, expected))
        dir_fd = self.dir_fd(class_dir) if names else -1
        for name in names:
            try:
                target = _os_readlink(name, dir_fd=dir_fd) if dir_fd >= 0 else _os_readlink(class_dir + "/" + name)
            except OSError as exc:
                if exc.errno != 22:  # EINVAL: not a symlink
                    self.warn(f"cannot read link {class_dir}/{name}: {exc.strerror or exc}")
                elif keep_plain:
                    links.append((name, class_dir + "/" + name))
                continue
            if up is None:
                rest = target.lstrip("./")
                strip = len(target) - len(rest)
                if strip and strip % 3 == 0 and target[:strip] == "../" * (strip // 3):
                    up, base = target[:strip], class_dir.rsplit("/", strip // 3)[0] + "/"
            if up is not None and target.startswith(up):
                rest = target[strip:]
                if "/." not in rest:
                    links.append((name, base + rest))
                    continue
            links.append((name, join_link(class_dir, target)))
        return links

    def link_target(self, directory: str, name: str) -> str | None:
        """Absolute target of link ``directory/name``; the path itself where it is a directory (some trees)."""
        try:
            return join_link(directory, _os_readlink(directory + "/" + name))
        except OSError as exc:
            if exc.errno == 22:  # EINVAL: not a link but the directory itself
                return directory + "/" + name
            if exc.errno != 2:
                self.warn(f"cannot read link {directory}/{name}: {exc.strerror or exc}")
            return None


class _Dir:
    """Reads the files of one directory through a directory descriptor.

    Opening ``uevent`` relative to the device's directory spares the kernel a
    walk down a deep sysfs path for every attribute; that halves the probe time
    of nodes with hundreds of VFs.
    """

    __slots__ = ("fd", "path", "reader", "where")

    def __init__(self, reader: Reader, path: str) -> None:
        self.reader = reader
        self.path = path
        self.where = path + "/"
        try:
            self.fd: int | None = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            self.fd = None  # reads by path then report what is wrong

    def read(self, name: str, expected: bool = False) -> str | None:
        if self.fd is None:
            return self.reader.read(self.where + name, expected)
        try:
            fd = _os_open(name, _O_RDONLY, dir_fd=self.fd)
        except OSError as exc:
            return self.reader._open_failed(self.where + name, exc, expected)
        return self.reader._drain(fd, self.where, name)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> _Dir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def join_link(directory: str, target: str) -> str:
    """Absolute path of a symlink's ``target`` found in ``directory``.

    String surgery instead of ``normpath(join())``: it runs for every PCI
    function, netdev, RDMA device and character device of every VF.
    """
    if target.startswith("/"):
        return os.path.normpath(target)
    rest = target.lstrip("./")
    ups = (len(target) - len(rest)) // 3
    if target[: ups * 3] == "../" * ups and len(target) - len(rest) == ups * 3:
        if ups:
            directory = directory.rsplit("/", ups)[0]
        target = rest
    path = directory + "/" + target
    return os.path.normpath(path) if "/." in path or "//" in path else path
