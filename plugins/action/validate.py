# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.validate``: the whole site's input, checked in the controller process.

Each host's variables are read once from ``hostvars`` (templated, wherever
they were set: inventory, group_vars, host_vars, facts, extra vars); the
stage itself is :func:`module_utils.controller.validation.stage.run`, which the module runs too.
"""

from __future__ import annotations

from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import stage, validate
from ansible_collections.aligned.dra.plugins.plugin_utils.inventory import node_hosts


class ActionModule(ActionBase):
    _VALID_ARGS = frozenset(("stages", "hosts"))
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(
            argument_spec={
                "stages": {"type": "list", "elements": "str", "required": True, "choices": list(validate.STAGES)},
                "hosts": {"type": "list", "elements": "str", "default": []},
            }
        )[1]
        hostvars = task_vars["hostvars"]
        hosts = node_hosts(task_vars, args["hosts"])

        # hostvars[host] computes the host's variables each time: once per host.
        views: dict[str, Any] = {}

        def view(host: str) -> Any:
            if host not in views:
                views[host] = hostvars[host]
            return views[host]

        def names(host: str) -> list[str]:
            return [name for name in view(host) if str(name).startswith(validate.PREFIX)]

        def setting(host: str, name: str, default: Any) -> Any:
            return view(host).get(name, default)

        checked, message = stage.run(hosts, names, setting, args["stages"])
        result.update(checked)
        if message:
            result.update(failed=True, msg=message)
        return result
