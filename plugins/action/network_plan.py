# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.network_plan``: the plan this run's probe made, or the module on the node.

The validation probe (``aligned.dra.topology_info`` with ``network_plan`` and
``fact``) plans the node's network in its own round and keeps the plan in
this run's store with the options it was made for. When this task's options
are exactly those, the kept plan is returned (once: the file is removed) as
the module would return it - changed, warnings, diff, or the same failure -
and the node is not read a second time. Otherwise the module runs.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.aligned.dra.plugins.plugin_utils import topology_store


def take_kept_plan(host: str, options: dict[str, Any]) -> dict[str, Any] | None:
    """The plan the probe kept for ``host`` with exactly ``options``, removed from the store; else ``None``."""
    path = topology_store.network_plan_path_for(host)
    try:
        with open(path, encoding="utf-8") as handle:
            kept = json.load(handle)
        os.unlink(path)
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("options") != json.loads(json.dumps(options)):
        return None
    return kept


class ActionModule(ActionBase):
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        kept = take_kept_plan(str(task_vars.get("inventory_hostname")), dict(self._task.args))
        if kept is None:
            result.update(
                self._execute_module(
                    module_name="aligned.dra.network_plan", module_args=self._task.args, task_vars=task_vars
                )
            )
            return result
        result["invocation"] = {"module_args": kept["module_args"]}
        if "refused" in kept:
            result.update(failed=True, msg=kept["refused"])
            return result
        result.update(kept["result"])
        result["changed"] = bool(kept["result"]["pending"])
        if kept["warnings"]:
            result["warnings"] = list(kept["warnings"])
        if self._task.diff and kept["diffs"]:
            result["diff"] = kept["diffs"]
        return result
