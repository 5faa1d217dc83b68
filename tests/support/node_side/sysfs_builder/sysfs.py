# SPDX-License-Identifier: Apache-2.0
"""Writing a sysfs-shaped tree: attribute files, directories, kernfs-style relative symlinks."""

from __future__ import annotations

import os
from typing import Any

from .layouts import LayoutError


def bdf(domain: int, bus: int, dev: int, fn: int) -> str:
    """A PCI address as sysfs names it (``0000:1a:00.0``, ``10000:e1:00.0``)."""
    return f"{domain:04x}:{bus:02x}:{dev:02x}.{fn:x}"


class TreeWriter:
    """Creates files, directories and relative symlinks; remembers the directories it made."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._dirs: set[str] = set()

    def mkdir(self, path: str) -> None:
        if path not in self._dirs:
            os.makedirs(path, exist_ok=True)
            self._dirs.add(path)

    def write(self, path: str, text: str) -> None:
        """Write a sysfs attribute: the text plus the kernel's trailing newline."""
        self.write_bytes(path, (text if text.endswith("\n") or text == "" else text + "\n").encode("ascii"))

    @staticmethod
    def write_bytes(path: str, data: bytes) -> None:
        # os.open/os.write: the builder writes ~30k small files for sriov-8x64.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def files(self, directory: str, items: dict[str, Any]) -> None:
        self.mkdir(directory)
        for name, value in items.items():
            self.write(os.path.join(directory, name), str(value))

    def link(self, link_path: str, target: str) -> None:
        """Symlink ``link_path`` to absolute ``target`` with a relative path.

        Like kernfs, the path climbs to the *target's parent* and descends
        again, so a link to an ancestor reads ``../../../0000:82:00.0`` rather
        than ``../..``: its last component always names the target.
        """
        link_dir = os.path.dirname(link_path)
        self.mkdir(link_dir)
        up = os.path.relpath(os.path.dirname(target), link_dir)
        name = os.path.basename(target)
        os.symlink(name if up == "." else f"{up}/{name}", link_path)

    def raw_link(self, link_path: str, rel_target: str) -> None:
        self.mkdir(os.path.dirname(link_path))
        if os.path.isabs(rel_target):
            raise LayoutError(f"symlink targets must be relative: {rel_target!r}")
        os.symlink(rel_target, link_path)
