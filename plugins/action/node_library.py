# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.node_library``: the collection's node library, zipped here and copied as one file.

The zip is built in the controller's process from this collection's own
``module_utils`` (:mod:`plugin_utils.library_zip`, byte-identical for the same
files) and handed to ``ansible.builtin.copy``, which compares checksums and
replaces the node's file atomically: one transfer per node at most, where a
copy per module took a worker round each.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from ansible import constants as C
from ansible.plugins.action import ActionBase

from ansible_collections.aligned.dra.plugins.plugin_utils.library_zip import LibraryError, library_zip

# This collection's module_utils, beside this plugin's own folder.
MODULE_UTILS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "module_utils")
# What plugins/modules/node_library.py documents (a test keeps them equal).
ARGUMENT_SPEC = {
    "dest": {"type": "path", "required": True},
    "files": {"type": "list", "elements": "str", "required": True},
    "owner": {"type": "str"},
    "group": {"type": "str"},
    "mode": {"type": "raw", "default": "0644"},
}


class ActionModule(ActionBase):
    _VALID_ARGS = frozenset(("dest", "files", "owner", "group", "mode"))
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)[1]
        try:
            content = library_zip(MODULE_UTILS, args["files"])
        except LibraryError as exc:
            result.update(failed=True, msg=str(exc))
            return result
        local = tempfile.mkdtemp(dir=C.DEFAULT_LOCAL_TMP)
        try:
            source = os.path.join(local, os.path.basename(args["dest"]))
            with open(source, "wb") as handle:
                handle.write(content)
            copy_task = self._task.copy()
            copy_task.args = {key: value for key, value in args.items() if key != "files" and value is not None}
            copy_task.args["src"] = source
            copy = self._shared_loader_obj.action_loader.get(
                "ansible.legacy.copy",
                task=copy_task,
                connection=self._connection,
                play_context=self._play_context,
                loader=self._loader,
                templar=self._templar,
                shared_loader_obj=self._shared_loader_obj,
            )
            copied = copy.run(task_vars=task_vars)
        finally:
            shutil.rmtree(local, ignore_errors=True)
        copied["files"] = len(args["files"])
        return copied
