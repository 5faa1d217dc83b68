# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action of ``aligned.dra.preflight``: reads the inventory and checks the controller.

The settings of every host and the collections are read here, in the controller
process; the Python packages of the interpreter that runs modules are checked
by the module, run on the task's host (``localhost``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.release import __version__ as ansible_version

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import preflight
from ansible_collections.aligned.dra.plugins.plugin_utils.inventory import node_hosts

DEFAULT_MINOR = "1.36"  # roles/claims/defaults/main.yml


def collection_version(name: str) -> str | None:
    """Version of an installed collection as the controller's loader finds it; None when it is absent."""
    try:
        spec = importlib.util.find_spec(f"ansible_collections.{name}")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        root = Path(location)
        manifest = root / "MANIFEST.json"
        if manifest.is_file():
            return str(json.loads(manifest.read_text())["collection_info"]["version"])
        galaxy = root / "galaxy.yml"
        if galaxy.is_file():
            return str((yaml.safe_load(galaxy.read_text()) or {}).get("version") or "")
    return ""


class ActionModule(ActionBase):
    _VALID_ARGS = frozenset(("stages", "hosts"))
    _supports_check_mode = True

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = self.validate_argument_spec(
            argument_spec={
                "stages": {"type": "list", "elements": "str", "required": True},
                "hosts": {"type": "list", "elements": "str", "default": []},
            }
        )[1]
        hostvars = task_vars["hostvars"]
        hosts = node_hosts(task_vars, args["hosts"])

        def lookup(host: str, variable: str, default: Any) -> Any:
            return hostvars[host].get(variable, default)

        try:
            reasons = preflight.features(hosts, lookup, args["stages"])
            minors = {str(lookup(host, "aligned_dra_kubernetes_version", DEFAULT_MINOR)) for host in hosts}
            wanted = preflight.requirements_for(reasons, minors if "render" in reasons else ())
        except preflight.PreflightError as exc:
            raise AnsibleActionFail(str(exc)) from exc

        in_modules = [item for item in wanted["python"] if item["interpreter"] == "modules"]
        in_playbook = preflight.check_python(item for item in wanted["python"] if item["interpreter"] == "playbook")
        checked = self._execute_module(
            module_name="aligned.dra.preflight",
            module_args={"stages": args["stages"], "hosts": hosts, "python": in_modules},
            task_vars=task_vars,
        )
        if checked.get("failed"):
            return dict(result, **checked)
        python = checked["python"] + in_playbook
        collections = [
            preflight.check_collection(item, collection_version(item["name"])) for item in wanted["collections"]
        ]
        core = {"name": "ansible-core", "version": preflight.ANSIBLE_CORE, "found": ansible_version, "features": []}
        core["problem"] = (
            None
            if preflight.satisfies(ansible_version, preflight.ANSIBLE_CORE)
            else f"version {ansible_version} is too old"
        )
        interpreters = {"modules": checked["interpreter"], "playbook": sys.executable}
        result.update(
            changed=False, features=reasons, python=python, collections=collections, interpreters=interpreters
        )
        message = preflight.report(python, collections, reasons, interpreters)
        if core["problem"]:
            line = f"ansible-core {preflight.ANSIBLE_CORE} is needed, this controller runs {ansible_version}"
            message = f"{message}\n- {line}" if message else f"aligned.dra preflight: {line}; nothing was changed."
        if message:
            result.update(failed=True, msg=message)
        return result
