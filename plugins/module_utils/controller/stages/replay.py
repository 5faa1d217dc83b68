# SPDX-License-Identifier: Apache-2.0
"""The ``replay`` stage: a workload trace replayed on the site's devices, the result written to ``dest``.

:func:`run` takes the module's parameters (:func:`replay_result.replay_policies` does
the replay, on measured use too when ``usage`` is given; ``dest`` is written only when its content changes, not
in check mode). With ``policies`` every policy is replayed in this one process on the trace and nodes read
once, and ``dest`` is the site's ``replay.json`` (``schema_version``, ``site``, ``policies``).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import (
    ReplayError,
    mig_result,
    thin_result,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import result as replay_result
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, write_dest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# The module's arguments: its AnsibleModule's, and its action's in the controller's process.
MODULE_SPEC: dict[str, Any] = {
    "argument_spec": {
        "trace": {"type": "path", "required": True},
        "trace_format": {"type": "str", "choices": ["openb", "csv"], "default": "openb"},
        "nodes": {"type": "path"},
        "plan": {"type": "path"},
        "gpu_class": {"type": "str", "default": "aligned-gpu"},
        "fractional_template": {"type": "str", "default": "fractional-gpu"},
        "policy": {"type": "str", "choices": ["whole", "fractional", "thin", "mig"], "default": "whole"},
        "policies": {"type": "list", "elements": "str", "choices": ["whole", "fractional", "thin", "mig"]},
        # the policy mig: each host's aligned_dra_mig (aligned.dra.mig_settings) and the nodes' probes
        "mig": {"type": "dict", "default": {}},
        "topology_dir": {"type": "path"},
        # the policy mig: headroom kept free of a measured peak, first fit's seeded random tie-breaks
        "mig_headroom": {"type": "float", "default": 0.05},
        "seed": {"type": "int", "default": 0},
        "draws": {"type": "int", "default": 10},
        "site": {"type": "str"},
        "order": {"type": "str", "choices": ["pack", "spread"], "default": "pack"},
        "mode": {"type": "str", "choices": ["saturation", "timeline"], "default": "saturation"},
        "usage": {"type": "path"},
        "gpu_memory": {"type": "raw"},
        "gpu_reserve": {"type": "raw", "default": 0},
        "thin_request": {"type": "str", "default": "request"},
        "thin_limit": {"type": "raw", "default": "max"},
        "reclaim_margin": {"type": "float", "default": 5},
        "on_evict": {"type": "str", "choices": ["drop", "requeue"], "default": "drop"},
        "burst_factors": {"type": "list", "elements": "float"},
        "dest": {"type": "path"},
    },
    "mutually_exclusive": [("nodes", "plan"), ("policy", "policies")],
    "required_one_of": [("nodes", "plan")],
}


# replay.json of a site: every policy's result (docs/replay.md, "The result")
FILE_SCHEMA_VERSION = 1


def run(params: Mapping[str, Any], check_mode: bool, diff: bool) -> dict[str, Any]:
    """The module's result: ``changed``, ``replay`` (one ``policy``) or ``replays`` (``policies``, with the
    trace and the nodes read once), and ``diff`` of ``dest`` when ``diff`` is asked and it changes."""
    policies = params.get("policies")
    try:
        replays = replay_result.replay_policies(
            params["trace"],
            [params["policy"]] if policies is None else policies,
            trace_format=params["trace_format"],
            nodes=params["nodes"],
            plan=params["plan"],
            order=params["order"],
            mode=params["mode"],
            gpu_class=params["gpu_class"],
            fractional_template=params["fractional_template"],
            usage=params.get("usage"),
            mig=params.get("mig") or {},
            topology_dir=params.get("topology_dir"),
            **{name: params[name] for name in mig_result.DEFAULTS if params.get(name) is not None},
            **{name: params[name] for name in thin_result.DEFAULTS if params.get(name) is not None},
        )
    except ReplayError as exc:
        raise StageError(str(exc)) from None
    if policies is not None:
        document = {"schema_version": FILE_SCHEMA_VERSION, "site": params.get("site"), "policies": replays}
        response = {"replays": replays}
    else:
        document = replays[params["policy"]]
        response = {"replay": document}
    changed, file_diff = write_dest(params["dest"], document, check_mode)
    response["changed"] = changed
    if diff and file_diff:
        response["diff"] = file_diff
    return response
