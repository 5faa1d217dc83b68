# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Each host's ``aligned_dra_mig``, as the claims, teams, utilization and replay stages hand it on."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import checks

VARIABLE = "aligned_dra_mig"


def mig_settings(hostvars: Mapping[str, Any], hosts: Iterable[str], base: str | None = None) -> dict[str, Any]:
    """``{host: aligned_dra_mig}`` for the hosts whose mode is ``static`` or ``dynamic``.

    A ``mig_configs_file`` is read here, on the controller, and handed on inline (``mig_configs``): the
    stages run as modules and read no inventory file. A relative path is read from ``base`` (default: the
    directory ansible-playbook runs in, as the mig role reads it). Hosts with mode ``off`` (the default) are
    left out, so a site without MIG gets ``{}`` and its outputs do not change.
    """
    if isinstance(hosts, (str, bytes)) or not isinstance(hosts, Iterable):
        raise AnsibleFilterError(f"mig_settings: hosts must be a list of inventory host names (got {hosts!r})")
    found: dict[str, Any] = {}
    for host in sorted(set(hosts)):
        if host not in hostvars:
            raise AnsibleFilterError(f"mig_settings: {host!r} is not an inventory host")
        settings = hostvars[host].get(VARIABLE)
        if not isinstance(settings, Mapping) or settings.get("mode", "off") in ("off", False, None):
            continue
        settings = dict(settings)
        if settings.get("mig_configs_file"):
            try:
                configs = checks.configs_of(settings, base or os.getcwd())
            except checks.MigSettingsError as exc:
                raise AnsibleFilterError(f"mig_settings: {host}: {VARIABLE}: {exc}") from None
            settings.pop("mig_configs_file")
            settings["mig_configs"] = configs
        found[host] = settings
    return found


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"mig_settings": mig_settings}
