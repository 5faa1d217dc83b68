# SPDX-License-Identifier: Apache-2.0
"""The ``site_report`` stage: the site report's pages built from what the earlier stages wrote, and written.

:func:`run` takes the module's parameters: the pages are built
(:func:`pages.build_reports`) from ``output_dir`` and each page whose bytes
changed is written through a temporary file and ``atomic_move`` (the module's,
which keeps the file's context; in the controller's process one that keeps its mode), nothing in check mode.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import os
import tempfile

from ansible_collections.aligned.dra.plugins.module_utils.controller.report.pages import ReportError, build_reports
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError
from ansible_collections.aligned.dra.plugins.module_utils.dra.model import DeviceModelError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

# The module's arguments: its AnsibleModule's, and its action's in the controller's process.
MODULE_SPEC: dict[str, Any] = {
    "argument_spec": {
        "output_dir": {"type": "path", "required": True},
        "sites": {"type": "list", "elements": "str"},
        "warn_levels": {
            "type": "list",
            "elements": "str",
            "default": ["SYS"],
            "choices": ["PIX", "PXB", "PHB", "NODE", "SYS"],
        },
        "device_options": {"type": "dict", "default": {}},
        "templates": {"type": "dict"},
        # each host's aligned_dra_mig (the filter aligned.dra.mig_settings): the static MIG layouts drawn
        "mig": {"type": "dict", "default": {}},
    },
}


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _built(params: Mapping[str, Any], output_dir: str) -> dict[str, Any]:
    try:
        return build_reports(
            output_dir,
            params["sites"],
            params["warn_levels"],
            device_options=params["device_options"],
            templates=params["templates"],
            mig=params.get("mig") or {},
        )
    except DeviceModelError as exc:
        message = str(exc)
        raise StageError(message if message.startswith("device_options") else f"device_options: {message}") from None
    except ReportError as exc:
        message = str(exc)
        # Everything else the report reads lies in output_dir: say so.
        if not message.startswith(("warn_levels", "sites", "templates", "mig")):
            message = f"output_dir: {message}"
        raise StageError(message) from None


def run(
    params: Mapping[str, Any], check_mode: bool, diff: bool, atomic_move: Callable[[str, str], None]
) -> dict[str, Any]:
    """The module's result: ``changed``, ``index``, ``files`` (the pages written), ``sites``, and ``diff`` (the
    pages' sizes before and after) when ``diff`` is asked and a page changes."""
    output_dir = os.path.normpath(params["output_dir"])
    index = os.path.join(output_dir, "index.json")
    if check_mode and not os.path.isfile(index):
        # A first run in check mode: the earlier stages did not write what the report reads.
        return {
            "changed": True,
            "index": os.path.join(output_dir, "index.html"),
            "files": [],
            "sites": {},
            "msg": f"{index} is not written yet (check mode on a first run): the report would be written from it",
        }
    if not os.path.isdir(output_dir):
        raise StageError(f"output_dir: {output_dir} is not a directory")
    built = _built(params, output_dir)
    changed_files = []
    before_lines = []
    after_lines = []
    for rel, html in sorted(built["files"].items()):
        path = os.path.join(output_dir, rel)
        data = html.encode("utf-8")
        old = _read(path)
        if old == data:
            continue
        changed_files.append(path)
        before_lines.append(f"{rel}: {'absent' if old is None else f'{len(old)} bytes'}")
        after_lines.append(f"{rel}: {len(data)} bytes")
        if check_mode:
            continue
        try:
            # A site listed in index.json whose directory is not there yet gets one.
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".report-", dir=os.path.dirname(path))
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        except OSError as exc:
            raise StageError(
                f"output_dir: cannot write {path}: {exc.strerror or exc}", changed=bool(changed_files[:-1])
            ) from None
        os.chmod(tmp, 0o644)
        atomic_move(tmp, path)
    result = {
        "changed": bool(changed_files),
        "index": os.path.join(output_dir, "index.html"),
        "files": changed_files,
        "sites": built["sites"],
    }
    if diff and changed_files:
        result["diff"] = {
            "before_header": output_dir,
            "after_header": output_dir,
            "before": "\n".join(before_lines) + "\n",
            "after": "\n".join(after_lines) + "\n",
        }
    return result
