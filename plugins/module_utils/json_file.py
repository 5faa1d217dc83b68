# SPDX-License-Identifier: Apache-2.0
"""JSON files of a site on disk: write a result file only when its content
changes (``plan.json``, ``teams.json``, ``utilization.json``), and read a
directory of per-node facts (``<node>.json``, as the topology role writes them).

No Ansible imports; Python >= 3.9.
"""

from __future__ import annotations

import glob
import json
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class JsonFileError(Exception):
    """The file cannot be read or written; the message names the option."""


def write_json_file(dest: str, data: Any, check_mode: bool, field: str = "dest") -> tuple[bool, dict[str, str]]:
    """Write ``data`` to ``dest`` as indented JSON with sorted keys.

    Returns ``(changed, diff)``; the diff is in Ansible's before/after form
    and empty when nothing changes. In check mode nothing is written. The file
    is replaced atomically, so a reader never sees half of it. A path that
    cannot be read or written (a directory, a file where a directory should
    be, no permission) raises :class:`JsonFileError` naming ``field``, in check
    mode too, and leaves no temporary file behind.
    """
    content = json.dumps(data, indent=2, sort_keys=True) + "\n"
    old = None
    try:
        if os.path.isdir(dest):
            raise IsADirectoryError(21, "Is a directory")
        if os.path.exists(dest):
            with open(dest, encoding="utf-8") as handle:
                old = handle.read()
        if old == content:
            return False, {}
        parent = os.path.dirname(os.path.abspath(dest))
        if os.path.exists(parent) and not os.path.isdir(parent):
            raise NotADirectoryError(20, "Not a directory")
        if not check_mode:
            os.makedirs(parent, exist_ok=True)
            tmp = dest + ".tmp"
            try:
                with open(tmp, "w", encoding="utf-8") as handle:
                    handle.write(content)
                os.replace(tmp, dest)
            except BaseException:
                if os.path.lexists(tmp):
                    os.unlink(tmp)
                raise
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise JsonFileError(f"{field}: cannot write {dest}: {reason}") from None
    return True, {"before": old or "", "after": content, "before_header": dest, "after_header": dest}


def read_json_dir(directory: str) -> dict[str, Any]:
    """Load every ``*.json`` in ``directory``, keyed by file name without ``.json``.

    Raises ``ValueError`` naming the directory or the file that is wrong (not a
    directory, unreadable, not JSON), so a module can fail on its option.
    """
    if not os.path.isdir(directory):
        raise ValueError(f"{directory} is not a directory")
    found = {}
    for path in sorted(glob.glob(os.path.join(glob.escape(directory), "*.json"))):
        try:
            with open(path, encoding="utf-8") as handle:
                found[os.path.basename(path)[: -len(".json")]] = json.load(handle)
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read {path}: {exc}") from exc
    return found
