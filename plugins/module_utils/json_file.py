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

from ansible_collections.aligned.dra.plugins.module_utils.output_files import OutputFileError, write_text_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class JsonFileError(OutputFileError):
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
    try:
        return write_text_file(dest, content, check_mode, field=field)
    except OutputFileError as exc:
        raise JsonFileError(str(exc)) from None


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


def write_node_files(
    output_dir: str,
    nodes: dict[str, tuple[str, Any]],
    sites: list[str],
    check_mode: bool,
    load: Callable[[str, Any], Any] | None = None,
) -> list[str]:
    """Write each node's facts to ``<output_dir>/<site>/nodes/<node>.json``.

    ``nodes`` maps a node to its site and facts; every site of ``sites`` gets
    its ``nodes`` directory (one whose nodes all failed too: its summary lists
    them). One call on the controller for a whole play, so the run does not
    spend a worker round per node on its output. Returns the directories
    (ending in ``/``) and files that were (in check mode: would be) created or
    written; unchanged files are left alone.
    """
    written = []
    for site in sorted(set(sites) | {site for site, _facts in nodes.values()}):
        directory = os.path.join(output_dir, site, "nodes")
        if not os.path.isdir(directory):
            written.append(directory + "/")
        if not check_mode:
            try:
                os.makedirs(directory, exist_ok=True)
            except (OSError, ValueError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                raise JsonFileError(f"output_dir: cannot create {directory}: {reason}") from None
    for node in sorted(nodes):
        site, facts = nodes[node]
        if load is not None:
            facts = load(node, facts)
        dest = os.path.join(output_dir, site, "nodes", node + ".json")
        changed, _diff = write_json_file(dest, facts, check_mode, field="output_dir")
        if changed:
            written.append(dest)
    return written


def node_entries(nodes: Any, sites: list[str]) -> tuple[dict[str, tuple[str, Any]], str | None]:
    """``{node: (site, topology)}`` from ``{node: {site, topology}}``, or the problem, naming the input.

    Sites become directory names: letters, digits, ``.``, ``_`` and ``-``
    (the site pattern). A node name becomes a file name: no ``/``, not
    starting with a dot.
    """
    entries: dict[str, tuple[str, Any]] = {}
    for site in sites:
        if not _is_name(site):
            return {}, f"sites: {site!r} is not a usable directory name (letters, digits, '.', '_', '-')"
    for node, entry in sorted((nodes or {}).items()):
        if not node or node.startswith(".") or "/" in node or "\x00" in node:
            return {}, f"nodes: {node!r} is not a usable file name (no '/', not starting with '.')"
        if not isinstance(entry, dict) or not isinstance(entry.get("topology"), dict):
            return {}, f"nodes.{node}: must be a dict with site and topology (a dict)"
        site = str(entry.get("site", "default"))
        if not _is_name(site):
            return {}, f"nodes.{node}.site: {site!r} is not a usable directory name (letters, digits, '.', '_', '-')"
        entries[node] = (site, entry["topology"])
    return entries, None


def _is_name(value: Any) -> bool:
    text = str(value)
    return bool(text) and text[0] != "." and all((ch.isalnum() and ch.isascii()) or ch in "._-" for ch in text)
