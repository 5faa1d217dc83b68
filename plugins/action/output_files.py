# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.output_files``: a directory of rendered files, written in the controller process.

Each entry of ``files`` is rendered here (its ``content``, or the role's
``template`` with the entry as ``item``, exactly as ``ansible.builtin.template``
renders it: the same search path, ``ansible_managed`` and ``trim_blocks``), and
the directory is written by :mod:`module_utils.output_files`. A role's rendered
objects cost one task and no module process, instead of a worker round and two
module runs per object.
"""

from __future__ import annotations

import os
from typing import Any

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase
from ansible.template import generate_ansible_template_vars, trust_as_template

from ansible_collections.aligned.dra.plugins.module_utils import output_files


class ActionModule(ActionBase):
    _VALID_ARGS = frozenset(output_files.argument_spec())
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(argument_spec=output_files.argument_spec())[1]
        try:
            contents = output_files.file_contents(
                args["files"],
                lambda entry, where: self._render(entry, os.path.join(args["dest"], entry["name"]), task_vars, where),
            )
            result.update(output_files.write_files(args, contents, self._task.check_mode, self._task.diff))
        except (ValueError, output_files.OutputFileError) as exc:
            result.update(failed=True, msg=str(exc))
        return result

    def _render(self, entry: dict[str, Any], dest: str, task_vars: dict[str, Any], where: str) -> str:
        """``entry['template']`` rendered as ``ansible.builtin.template`` renders it, with ``item`` = the entry."""
        try:
            source = self._find_needle("templates", entry["template"])
        except AnsibleError as exc:
            raise ValueError(f"{where}: template: {exc}") from None
        searchpath = []
        for path in [*task_vars.get("ansible_search_path", []), self._loader._basedir, os.path.dirname(source)]:
            searchpath += [os.path.join(path, "templates"), path]
        variables = dict(task_vars)
        # ansible_managed and the template_* variables, as ansible.builtin.template sets them (ansible-core
        # marks this helper for deprecation in 2.23: then these variables are set here)
        template_vars = generate_ansible_template_vars(path=entry["template"], fullpath=source, dest_path=dest)
        if "ansible_managed" in task_vars:  # a user's own ansible_managed wins, as with the template module
            template_vars.pop("ansible_managed", None)
        variables.update(template_vars)
        variables["item"] = entry
        templar = self._templar.copy_with_new_env(searchpath=searchpath, available_variables=variables)
        text = trust_as_template(self._loader.get_text_file_contents(source))
        try:
            rendered = templar.template(text, escape_backslashes=False, overrides={"trim_blocks": True})
        except AnsibleError as exc:
            raise ValueError(f"{where}: template {entry['template']}: {exc}") from None
        return "" if rendered is None else str(rendered)
