# SPDX-License-Identifier: Apache-2.0
"""The ``replay`` stage: a workload trace replayed on the site's devices, the result written to ``dest``.

:func:`run` takes the module's parameters (:func:`replay_result.replay` does
the replay, on measured use too when ``usage`` is given; ``dest`` is written only when its content changes, not
in check mode).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError, thin_result
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import result as replay_result
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, write_dest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def run(params: Mapping[str, Any], check_mode: bool, diff: bool) -> dict[str, Any]:
    """The module's result: ``changed``, ``replay``, and ``diff`` of ``dest`` when ``diff`` is asked and it changes."""
    try:
        replay = replay_result.replay(
            params["trace"],
            trace_format=params["trace_format"],
            nodes=params["nodes"],
            plan=params["plan"],
            policy=params["policy"],
            order=params["order"],
            mode=params["mode"],
            gpu_class=params["gpu_class"],
            fractional_template=params["fractional_template"],
            usage=params.get("usage"),
            **{name: params[name] for name in thin_result.DEFAULTS if params.get(name) is not None},
        )
    except ReplayError as exc:
        raise StageError(str(exc)) from None
    changed, file_diff = write_dest(params["dest"], replay, check_mode)
    response = {"changed": changed, "replay": replay}
    if diff and file_diff:
        response["diff"] = file_diff
    return response
