# SPDX-License-Identifier: Apache-2.0
"""The ``claims_render`` stage: a site's DeviceClasses and ResourceClaimTemplates rendered and checked.

:func:`run` takes the module's parameters and returns its result; the
burstable template comes after the fractional one (:func:`burst.render`).
Where the site's hosts run MIG (``mig``: host -> ``aligned_dra_mig``), the
MIG classes and templates (claims/mig.py) come from the profiles their
probed topologies offer: ``topologies`` inline, or one file per host
(``topology_files``, else ``<topology_dir>/<host>.json``), read for the MIG
hosts only.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import json
import os

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import mig as claims_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs import site as site_inputs
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
        "mig": {"type": "dict", "default": {}},
        "topologies": {"type": "dict"},
        "topology_files": {"type": "dict"},
        "topology_dir": {"type": "path"},
    },
}


def mig_topologies(params: Mapping[str, Any]) -> dict[str, Any]:
    """The probed topology of each MIG host that has one (none without MIG: nothing is read).

    ``topologies`` where given (the files are then not read), else ``topology_files``, else
    ``<topology_dir>/<host>.json``; a host with none is left to :func:`claims_mig.render` to say.
    """
    hosts = claims_mig.hosts_with_mig(params.get("mig"))
    inline = params.get("topologies")
    if not hosts:
        return {}
    if inline is not None:
        found = {host: inline[host] for host in hosts if inline.get(host) is not None}
        _check(found, "topologies")
        return found
    files = params.get("topology_files") or {}
    found = {}
    for host in hosts:
        path = files.get(host)
        if path is None and params.get("topology_dir"):
            path = os.path.join(params["topology_dir"], f"{host}.json")
            if not os.path.isfile(path):
                continue  # not probed: said in left_out (its GPUs' profiles are unknown)
        if path is None:
            continue
        option = f"topology_files.{host}" if host in files else "topology_dir"
        if not isinstance(path, str) or not path:
            raise StageError(f"{option}: must be the path of the host's topology file (got {path!r})")
        try:
            with open(path, encoding="utf-8") as handle:
                found[host] = json.load(handle)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise StageError(f"{option}: cannot read {path} ({host}): {reason}") from None
        _check({host: found[host]}, option if option == "topology_dir" else "topology_files")
    return found


def _check(topologies: dict[str, Any], field: str) -> None:
    """The shape the MIG model reads (devices with a PCI address and kind); the message names the option."""
    try:
        site_inputs.check_topologies(topologies, field)
    except site_inputs.InputError as exc:
        raise StageError(str(exc)) from None


def run(params: Mapping[str, Any]) -> dict[str, Any]:
    """The module's result: ``changed`` (never), ``files``, ``objects``, ``left_out``, ``required``, ``minor``,
    ``rails``, ``warnings``; :class:`StageError` when the settings cannot be rendered or render invalid objects."""
    topologies = mig_topologies(params)
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
            mig=params.get("mig") or {},
            topologies=topologies,
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
        "warnings": rendered["warnings"],
    }
