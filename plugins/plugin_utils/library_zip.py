# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The collection's node library as one zip file, for the boot-time units (``aligned.dra.node_library``).

Python imports packages from a zip on ``PYTHONPATH`` (zipimport), so a node
gets its whole library as one file: one copy, one checksum to compare, replaced
atomically, instead of a transfer per module. The archive is byte-for-byte the
same for the same files (sorted entries, fixed timestamps and modes), so an
unchanged library is never copied again.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Iterable

# Where module_utils sits in the import path the units use (python3 -m ansible_collections.aligned.dra...).
PACKAGE_PREFIX = "ansible_collections/aligned/dra/plugins/module_utils"
# A fixed timestamp: zip's earliest, so the bytes depend on the files' content only.
EPOCH = (1980, 1, 1, 0, 0, 0)


class LibraryError(ValueError):
    """A file of the library is not a module of the collection's module_utils; the message names it."""


def library_zip(module_utils: str, files: Iterable[str]) -> bytes:
    """A zip of ``files`` (paths under ``module_utils``, ``node/network/netconf.py``) under ``PACKAGE_PREFIX``.

    Every package directory above a file gets its ``__init__.py``, listed or not
    (the checkout's own, empty where the checkout has none): zipimport needs
    regular packages. Raises :class:`LibraryError`
    for a path that leaves ``module_utils``, is not a ``.py`` file or does not exist.
    """
    entries: dict[str, bytes] = {}
    for name in files:
        parts = name.split("/")
        if not name.endswith(".py") or name.startswith("/") or any(part in ("", ".", "..") for part in parts):
            raise LibraryError(f"files: {name!r} is not a Python module under module_utils")
        path = os.path.join(module_utils, *parts)
        try:
            with open(path, "rb") as handle:
                entries[f"{PACKAGE_PREFIX}/{name}"] = handle.read()
        except OSError as exc:
            raise LibraryError(f"files: cannot read {name} ({exc.strerror or exc})") from None
    for member in list(entries):
        package = member.rsplit("/", 1)[0]
        while package:
            init = f"{package}/__init__.py"
            if init not in entries:
                entries[init] = _package_init(module_utils, package)
            package = package.rpartition("/")[0]
    # Stored, not deflated: the bytes do not depend on the controller's zlib, and a node's Python
    # without zlib imports it too.
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for member in sorted(entries):
            info = zipfile.ZipInfo(member, date_time=EPOCH)
            info.external_attr = 0o644 << 16
            archive.writestr(info, entries[member])
    return buffer.getvalue()


def _package_init(module_utils: str, package: str) -> bytes:
    """A package's ``__init__.py``: the checkout's own (a package's vocabulary lives there), or an empty
    one above ``module_utils`` and wherever the checkout has none (zipimport needs regular packages)."""
    if not package.startswith(PACKAGE_PREFIX + "/"):
        return b""
    path = os.path.join(module_utils, *package[len(PACKAGE_PREFIX) + 1 :].split("/"), "__init__.py")
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return b""
