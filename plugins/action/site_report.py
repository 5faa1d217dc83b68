# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.site_report``: hands the collection's report templates to the module.

Modules travel as one zip (AnsiballZ) that holds Python files only, so the
Jinja2 templates of the pages (``roles/report/templates/report/``) cannot be
found by the module itself. This action, which runs in the controller process,
reads them from the installed collection and passes their text as the
module's ``templates`` option; the module then renders and writes the pages
where the task runs (the controller, with ``delegate_to: localhost``).
"""

from __future__ import annotations

from typing import Any

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.aligned.dra.plugins.module_utils.controller.report.pages import ReportError, load_templates


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if "templates" not in args:
            try:
                args["templates"] = load_templates()
            except ReportError as exc:
                raise AnsibleActionFail(str(exc)) from exc
        result.update(
            self._execute_module(module_name="aligned.dra.site_report", module_args=args, task_vars=task_vars)
        )
        return result
