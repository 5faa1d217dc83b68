# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The action of a controller stage's module: the stage run in ansible-playbook's own process.

A controller stage (``plan``, ``jobs``, ``replay``, ...) is a module whose
work is Python on the controller's files. Run as a module, each call starts
an interpreter, unpacks the module and imports the stage again; a site's
stages then cost a process each before any work. Where the module would run
on the controller anyway - the task's connection is ``local``, without
``become``, and the interpreter it would use is ansible-playbook's own - the
action runs the stage here instead: the same arguments checked by the same
argument spec (:class:`ModuleArgumentSpecValidator`, the messages
``AnsibleModule`` fails with), the same ``run``, the same result, passed
through JSON as a module's is. Anywhere else (another host, another
interpreter, ``become``) the module runs as before.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ansible.module_utils.common.arg_spec import ModuleArgumentSpecValidator
from ansible.module_utils.common.json import Direction, get_module_encoder
from ansible.module_utils.errors import UnsupportedError
from ansible.plugins.action import ActionBase

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import model_store
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError
from ansible_collections.aligned.dra.plugins.plugin_utils import topology_store


def same_interpreter(interpreter: Any) -> bool:
    """Whether ``interpreter`` (a path, or none: not set) is this process's own Python."""
    if not isinstance(interpreter, str) or not interpreter.strip():
        return False
    try:
        return os.path.samefile(interpreter.strip(), sys.executable)
    except OSError:
        return False


class StageAction(ActionBase):
    """Subclasses set ``MODULE`` (the module's full name), ``SPEC`` (its AnsibleModule arguments) and
    ``STAGE`` (``run(params, check_mode, diff)`` returning the module's result or raising StageError)."""

    MODULE: str
    SPEC: Mapping[str, Any]
    STAGE: Callable[[Mapping[str, Any], bool, bool], dict[str, Any]]
    _supports_check_mode = True
    _supports_async = False

    def _in_controller(self, task_vars: Mapping[str, Any]) -> bool:
        """Whether the module would run here: a local connection, no become, ansible-playbook's interpreter."""
        if self._connection.transport != "local" or self._play_context.become:
            return False
        host_vars = task_vars
        if self._task.delegate_to:
            host_vars = (task_vars.get("ansible_delegated_vars") or {}).get(self._task.delegate_to) or {}
        interpreter = host_vars.get("ansible_python_interpreter")
        if interpreter is None:
            return False
        return same_interpreter(self._templar.template(interpreter))

    def stage_args(self) -> dict[str, Any]:
        """The module's arguments: the task's (a subclass adds what only the controller can give)."""
        return dict(self._task.args)

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self.stage_args()
        if not self._in_controller(task_vars):
            result.update(self._execute_module(module_name=self.MODULE, module_args=args, task_vars=task_vars))
            return result
        result.update(self.run_here(args, bool(self._task.check_mode), bool(self._task.diff)))
        return result

    def run_here(self, args: dict[str, Any], check_mode: bool, diff: bool) -> dict[str, Any]:
        """The module's result for ``args``, computed in this process."""
        # the arguments as a module receives them: JSON, so plain strings, lists and dicts
        encoder = get_module_encoder("legacy", Direction.CONTROLLER_TO_MODULE)
        args = json.loads(json.dumps(args, cls=encoder))
        validated = ModuleArgumentSpecValidator(**self.SPEC).validate(args)
        if validated.error_messages:
            message = validated.errors.msg
            if isinstance(validated.errors[0], UnsupportedError):
                message = f"Unsupported parameters for ({self.MODULE}) module: {message}"
            return {"failed": True, "msg": message}
        params = validated.validated_parameters
        try:
            # the site model an earlier stage of this run built from the same inputs is taken from the run's store
            with model_store.using(topology_store.store_dir()):
                outcome = type(self).STAGE(params, check_mode, diff)
        except StageError as exc:
            outcome = dict(exc.fields, failed=True, msg=str(exc))
        # what a module returns has been JSON: tuples are lists, keys are strings
        return json.loads(json.dumps(outcome))
