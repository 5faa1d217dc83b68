# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.site_report``: the collection's report templates handed to the stage, run in
ansible-playbook's process where the module would run on the controller anyway, else the module
(:mod:`plugin_utils.stage_action`).

Modules travel as one zip (AnsiballZ) that holds Python files only, so the
Jinja2 templates of the pages (``roles/report/templates/report/``) cannot be
found by the module itself. This action reads them from the installed
collection and passes their text as the module's ``templates`` option.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from ansible.errors import AnsibleActionFail

from ansible_collections.aligned.dra.plugins.module_utils.controller.report.pages import ReportError, load_templates
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import site_report
from ansible_collections.aligned.dra.plugins.plugin_utils.stage_action import StageAction


def replace_keeping_mode(src: str, dest: str) -> None:
    """``src`` renamed over ``dest`` with the permissions ``dest`` had, a new file's from the umask (as the
    module's ``atomic_move``)."""
    try:
        mode = stat.S_IMODE(os.stat(dest).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(src, mode)
    os.replace(src, dest)


class ActionModule(StageAction):
    MODULE = "aligned.dra.site_report"
    SPEC = site_report.MODULE_SPEC
    STAGE = staticmethod(
        lambda params, check_mode, diff: site_report.run(params, check_mode, diff, replace_keeping_mode)
    )

    def stage_args(self) -> dict[str, Any]:
        args = dict(self._task.args)
        if "templates" not in args:
            try:
                args["templates"] = load_templates()
            except ReportError as exc:
                raise AnsibleActionFail(str(exc)) from exc
        return args
