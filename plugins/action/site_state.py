# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.site_state``: the check or the record in the controller's process.

In the controller's process the stage (:func:`module_utils.controller.stages.site_state.run`)
reads the collection's files as installed, so a new release of the collection
renders every site again. With ``state: nodes`` a node is converged only where
the network plan this run's probe kept for it changes nothing and warns of
nothing (:func:`unsettled`).
"""

from __future__ import annotations

import json
from typing import Any

from ansible.plugins.action import ActionBase

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, site_state
from ansible_collections.aligned.dra.plugins.plugin_utils import topology_store


def unsettled(host: str) -> str | None:
    """Why the network plan this run's probe kept for ``host`` is not a converged node's: none kept, refused,
    something to change or a warning; None when it changes nothing (the file is left to ``network_plan``)."""
    try:
        with open(topology_store.network_plan_path_for(host), encoding="utf-8") as handle:
            kept = json.load(handle)
    except (OSError, ValueError):
        return "no network plan of this run's probe"
    if not isinstance(kept, dict) or "refused" in kept or not isinstance(kept.get("result"), dict):
        return "its network plan was refused"
    if kept["result"].get("pending") or kept.get("warnings"):
        return "its network plan has something to change or a warning"
    return None


class ActionModule(ActionBase):
    _VALID_ARGS = frozenset(site_state.ARGUMENT_SPEC)
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars or {})
        args = self.validate_argument_spec(argument_spec=site_state.ARGUMENT_SPEC)[1]
        try:
            result.update(site_state.run(args, bool(self._task.check_mode), unsettled=unsettled))
        except StageError as exc:
            result.update(exc.fields, failed=True, msg=str(exc))
        return result
