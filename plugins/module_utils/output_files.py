# SPDX-License-Identifier: Apache-2.0
"""Text files of a site's output directory, written only when they change.

``write_text_file`` replaces one file atomically (a reader never sees half of
it) and reports Ansible's before/after diff; ``write_directory`` makes a whole
directory hold exactly the files given (the objects a role rendered and their
``kustomization.yaml``): it writes what changed and removes the files that
match its prune patterns and are no longer given. One call per directory, so a
role's output costs no worker round (and no module process) per file.

No Ansible imports; Python >= 3.9.
"""

from __future__ import annotations

import fnmatch
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def argument_spec() -> dict[str, Any]:
    """The options of ``aligned.dra.output_files``, for the module and its action plugin alike (a new
    copy each call: Ansible's validation may fill it in)."""
    return {
        "dest": {"type": "path", "required": True},
        "files": {"type": "list", "elements": "dict", "required": True},
        "prune": {"type": "list", "elements": "str", "default": []},
        "mode": {"type": "raw", "default": "0644"},
        "directory_mode": {"type": "raw", "default": "0755"},
    }


class OutputFileError(Exception):
    """A file or directory cannot be read or written; the message names the option."""


def _reason(exc: BaseException) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def _read_text(path: str) -> str | None:
    """The text of the regular file at ``path``; ``None`` where there is none (nothing, or a symbolic
    link: a link is replaced by a file, never written through)."""
    if os.path.islink(path) or not os.path.lexists(path):
        return None
    if os.path.isdir(path):
        raise IsADirectoryError(21, "Is a directory")
    # a file of other bytes reads as different content (and is replaced), as with the template module;
    # newline="": a \r or \r\n on disk is a difference, not a line end to translate
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        return handle.read()


def write_text_file(
    dest: str, content: str, check_mode: bool, field: str = "dest", mode: int | None = None
) -> tuple[bool, dict[str, str]]:
    """Make ``dest`` hold ``content`` (UTF-8) and, when given, permissions ``mode``.

    Returns ``(changed, diff)``: the diff in Ansible's before/after form, empty
    when nothing changes (a mode that alone changes has an empty diff too). In
    check mode nothing is written. The file is replaced atomically, so a reader
    never sees half of it. A path that cannot be read or written (a directory,
    a file where a directory should be, no permission) raises
    :class:`OutputFileError` naming ``field``, in check mode too, and leaves no
    temporary file behind.
    """
    try:
        old = _read_text(dest)
        same_mode = mode is None or old is None or stat.S_IMODE(os.stat(dest).st_mode) == mode
        if old == content and same_mode:
            return False, {}
        parent = os.path.dirname(os.path.abspath(dest))
        if os.path.exists(parent) and not os.path.isdir(parent):
            raise NotADirectoryError(20, "Not a directory")
        if not check_mode:
            if old == content:
                os.chmod(dest, mode)  # type: ignore[arg-type]  # same_mode is False only with a mode
            else:
                _replace(dest, content, mode)
    except (OSError, ValueError) as exc:
        raise OutputFileError(f"{field}: cannot write {dest}: {_reason(exc)}") from None
    if old == content:
        return True, {}
    return True, {"before": old or "", "after": content, "before_header": dest, "after_header": dest}


def _replace(dest: str, content: str, mode: int | None) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(dest)), exist_ok=True)
    if mode is None and os.path.isfile(dest) and not os.path.islink(dest):
        mode = stat.S_IMODE(os.stat(dest).st_mode)  # no mode given: the file keeps its own
    tmp = dest + ".tmp"
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as handle:
            handle.write(content)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise


def parse_mode(value: Any, field: str) -> int | None:
    """An octal mode given as text (``"0644"``) or a number; ``None`` or ``preserve`` read as ``None``:
    what exists keeps its mode, also when its content is replaced (a new directory or file gets the
    umask's).

    Raises ``ValueError`` naming ``field``."""
    if value is None or value == "preserve":
        return None
    try:
        mode = int(value, 8) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        mode = -1
    if not 0 <= mode <= 0o7777 or isinstance(value, (bool, float)):
        raise ValueError(f"{field}: {value!r} is not an octal mode such as '0644'")
    return mode


def is_file_name(name: Any) -> bool:
    """A plain file name: no directory part, not ``.``/``..``, no NUL."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and "/" not in name
        and "\0" not in name
        and not name.endswith(".tmp")
    )


def write_directory(
    directory: str,
    files: dict[str, str],
    check_mode: bool,
    prune: list[str] | None = None,
    mode: int | None = None,
    directory_mode: int | None = None,
) -> dict[str, Any]:
    """Make ``directory`` hold ``files`` (name to content); remove the other files matching ``prune``.

    The directory is created (with ``directory_mode``) when missing. Files
    whose content and mode are already right are left alone; a file matching a
    ``prune`` pattern (shell-style, on the name) that is not in ``files`` is
    removed; nothing else in the directory is touched. Returns ``written``
    (the directory, ending in ``/``, when created, and the files written),
    ``removed`` (files removed) and ``diff`` (Ansible's before/after per file
    whose content changes). In check mode the same is reported and nothing
    changes. Raises :class:`OutputFileError` naming ``dest`` or ``files``.
    """
    bad = sorted(str(name) for name in files if not is_file_name(name))
    if bad:
        raise OutputFileError(f"files: not a plain file name: {', '.join(bad)}")
    if not check_mode:
        # Every problem that can be seen before writing is seen first: a refused directory leaves
        # every file as it was, not the first half of it written.
        write_directory(directory, files, True, prune, mode, directory_mode)
    written: list[str] = []
    removed: list[str] = []
    diffs: list[dict[str, str]] = []
    try:
        if os.path.lexists(directory) and not os.path.isdir(directory):
            raise NotADirectoryError(20, "Not a directory")
        if not os.path.isdir(directory):
            written.append(directory.rstrip("/") + "/")
            if not check_mode:
                os.makedirs(directory, exist_ok=True)
                if directory_mode is not None:
                    os.chmod(directory, directory_mode)
        elif directory_mode is not None and stat.S_IMODE(os.stat(directory).st_mode) != directory_mode:
            written.append(directory.rstrip("/") + "/")
            if not check_mode:
                os.chmod(directory, directory_mode)
        present = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    except (OSError, ValueError) as exc:
        raise OutputFileError(f"dest: cannot create {directory}: {_reason(exc)}") from None
    for name in sorted(files):
        dest = os.path.join(directory, name)
        changed, diff = write_text_file(dest, files[name], check_mode, field="files", mode=mode)
        if changed:
            written.append(dest)
        if diff:
            diffs.append(diff)
    for name in present:
        path = os.path.join(directory, name)
        if name in files or not any(fnmatch.fnmatchcase(name, pattern) for pattern in prune or []):
            continue
        # only regular files that are not hidden, as ansible.builtin.find matches them by default
        if name.startswith(".") or os.path.islink(path) or not os.path.isfile(path):
            continue
        try:
            before = _read_text(path)
        except (OSError, ValueError):
            before = ""  # an unreadable stale file is removed all the same; the diff cannot show it
        try:
            if not check_mode:
                os.unlink(path)
        except OSError as exc:
            raise OutputFileError(f"prune: cannot remove {path}: {_reason(exc)}") from None
        removed.append(path)
        diffs.append({"before": before or "", "after": "", "before_header": path, "after_header": path + " (removed)"})
    return {"written": written, "removed": removed, "diff": diffs}


def file_contents(files: list[Any], render: Callable[[dict[str, Any], str], str] | None = None) -> dict[str, str]:
    """The ``files`` option as name to content, checked entry by entry before anything is written.

    An entry gives ``content``, or a ``template`` that ``render(entry, where)`` renders (the
    action plugin; without one, a template is refused). Raises ``ValueError`` naming the entry.
    """
    contents: dict[str, str] = {}
    for index, entry in enumerate(files):
        name = entry.get("name") if isinstance(entry, dict) else None
        where = f"files[{index}]" + (f" ({name})" if isinstance(name, str) else "")
        if not is_file_name(name):
            raise ValueError(f"{where}: name must be a plain file name, got {name!r}")
        if name in contents:
            raise ValueError(f"{where}: {name} is given twice")
        if ("content" in entry) == ("template" in entry):
            raise ValueError(f"{where}: give exactly one of content and template")
        if "content" in entry:
            if not isinstance(entry["content"], str):
                raise ValueError(f"{where}: content must be text")
            contents[name] = entry["content"]
        elif not isinstance(entry["template"], str) or not entry["template"]:
            raise ValueError(f"{where}: template must be the name of a template file")
        elif render is None:
            raise ValueError(f"{where}: a template is rendered by the action plugin only; give content")
        else:
            contents[name] = render(entry, where)
    return contents


def write_files(params: dict[str, Any], contents: dict[str, str], check_mode: bool, diff: bool) -> dict[str, Any]:
    """The module's work once ``contents`` is known: the modes read, the directory written, the result
    shaped (``changed``, ``written``, ``removed``, ``files``, and ``diff`` when asked for). Raises
    ``ValueError`` or :class:`OutputFileError` naming the option."""
    outcome = write_directory(
        params["dest"],
        contents,
        check_mode,
        params["prune"],
        parse_mode(params["mode"], "mode"),
        parse_mode(params["directory_mode"], "directory_mode"),
    )
    result: dict[str, Any] = {
        "changed": bool(outcome["written"] or outcome["removed"]),
        "written": outcome["written"],
        "removed": outcome["removed"],
        "files": len(contents),
    }
    if outcome["diff"] and diff:
        result["diff"] = outcome["diff"]
    return result
