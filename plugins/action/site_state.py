# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.site_state``: the check or the record in the controller's process.

In the controller's process the stage (:func:`module_utils.controller.stages.site_state.run`)
reads the collection's files as installed, so a new release of the collection
renders every site again.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, site_state


class ActionModule(ActionBase):
    _VALID_ARGS = frozenset(site_state.ARGUMENT_SPEC)
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars or {})
        args = self.validate_argument_spec(argument_spec=site_state.ARGUMENT_SPEC)[1]
        try:
            result.update(site_state.run(args, bool(self._task.check_mode)))
        except StageError as exc:
            result.update(exc.fields, failed=True, msg=str(exc))
        return result
