# SPDX-License-Identifier: Apache-2.0
"""The ``claims_render`` stage: a site's DeviceClasses and ResourceClaimTemplates rendered and checked.

:func:`run` takes the module's parameters and returns its result; the
burstable template comes after the fractional one (:func:`burst.render`).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.cel import CelError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# The module's arguments: its AnsibleModule's, and its action's in the controller's process.
MODULE_SPEC: dict[str, Any] = {
    "argument_spec": {
        "site": {"type": "str", "required": True},
        "kubernetes_version": {"type": "str", "required": True},
        "feature_gates": {"type": "dict", "default": {}},
        "settings": {"type": "dict", "default": {}},
        "tolerations": {"type": "list", "elements": "dict", "default": []},
        "rail_rules": {"type": "dict", "default": {}},
        "device_options": {"type": "dict", "default": {}},
        "fractional_burst": {"type": "dict", "default": {}},
    },
}


def run(params: Mapping[str, Any]) -> dict[str, Any]:
    """The module's result: ``changed`` (never), ``files``, ``objects``, ``left_out``, ``required``, ``minor``,
    ``rails``; :class:`StageError` when the settings cannot be rendered or render invalid objects."""
    try:
        rendered = burst.render(
            params["settings"],
            params["site"],
            params["kubernetes_version"],
            params["feature_gates"],
            tolerations=params["tolerations"],
            rail_rules=params["rail_rules"],
            device_options=params["device_options"],
            fractional_burst=params["fractional_burst"],
        )
        problems = claims.validate_all(rendered["objects"], rendered["minor"], params["feature_gates"])
    except (claims.ClaimsError, dra.DeviceModelError, CelError) as exc:
        raise StageError(str(exc)) from None
    if problems:
        # The objects come from the settings (selectors, classes, templates): say so.
        raise StageError("settings: rendered objects are not valid: " + " | ".join(problems), problems=problems)
    files = [{"name": claims.file_name(o), "object": o} for o in rendered["objects"]]
    return {
        "changed": False,
        "files": files,
        "objects": rendered["objects"],
        "left_out": rendered["skipped"],
        "required": rendered["required"],
        "minor": rendered["minor"],
        "rails": rendered["rails"],
    }
