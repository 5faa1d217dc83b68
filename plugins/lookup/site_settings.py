# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""A site's settings, read from its first host, else the caller's defaults, never another host's
(``controller.inputs.site``)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: site_settings
version_added: 0.1.0
short_description: A site's settings, read once from its first host, else the role's defaults
description:
  - Returns a dictionary of the settings named in O(_terms), each the value that O(host) (the site's first
    host, whose variables carry the site group's group_vars) has; where it has none, the value in
    O(defaults), else the caller's own (the role's default, the play's or the role's vars), for every
    setting in one call.
  - The caller's own value is never the inventory or fact value of the host the task runs for (a per-site
    task runs once, for the play's first host, which may be of another site whose group_vars set the
    setting). Where the caller's value is that host's own, the setting is the calling role's default (its
    C(defaults/main.yml) or C(defaults/main/), templated for that host); outside a role, that host's value
    only when it is of the site (its C(aligned_dra_site)), else the lookup fails naming the setting (set it
    for the site, or pass O(defaults)). A play's or role's value equal to that host's counts as the host's.
  - A value that O(host) sets, even null or empty, is taken as it is; only a setting it does not set at all
    falls back.
  - A name that is not a known site setting, a name asked twice, a default for a name not asked for, a
    setting that has no value anywhere and one whose only value is another site's host's fail, naming the
    setting.
  - The roles read a site's settings with it once per site, on the controller (docs/inventory.md).
author:
  - aligned.dra maintainers (!UNKNOWN)
options:
  _terms:
    description:
      - The settings, by variable name (C(aligned_dra_claims), C(aligned_dra_feature_gates), ...).
      - The known ones are the site settings the roles document (C(aligned_dra_claims), C(aligned_dra_claims_plan_source),
        C(aligned_dra_claims_tolerations), C(aligned_dra_device_options), C(aligned_dra_feature_gates),
        C(aligned_dra_fractional_burst), C(aligned_dra_jobs), C(aligned_dra_kubernetes_version),
        C(aligned_dra_output_dir), C(aligned_dra_placement_levels), C(aligned_dra_rails), C(aligned_dra_replay),
        C(aligned_dra_teams), C(aligned_dra_usage), C(aligned_dra_utilization_claim_files),
        C(aligned_dra_utilization_context), C(aligned_dra_utilization_kubeconfig),
        C(aligned_dra_utilization_slice_files), C(aligned_dra_utilization_source)) and the fact the utilization
        stage sets (C(aligned_dra_utilization_measured)).
    type: list
    elements: str
    required: true
  host:
    description: The site's first inventory host (sorted by name).
    type: str
    required: true
  defaults:
    description:
      - A value per setting for when O(host) does not set it, instead of the caller's own (for a setting the
        role has no default of, or a play that has none; a playbook's task that reads a setting only some
        sites set passes one).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: The site's settings, once per site
  ansible.builtin.set_fact:
    lab_settings: >-
      {{ lookup('aligned.dra.site_settings', 'aligned_dra_kubernetes_version', 'aligned_dra_claims',
                'aligned_dra_placement_levels', host=lab_hosts[0],
                defaults={'aligned_dra_placement_levels': []}) }}
  delegate_to: localhost
  run_once: true

- name: Render the site's claims with them
  aligned.dra.claims_render:
    site: lab
    kubernetes_version: "{{ lab_settings.aligned_dra_kubernetes_version }}"
    settings: "{{ lab_settings.aligned_dra_claims }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
_raw:
  description: One dictionary, setting name to value, in the order of O(_terms).
  type: list
  elements: dict
"""

import os
from collections.abc import Iterator, Mapping
from typing import Any

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs.site import (
    Caller,
    SiteSettingError,
    own_names,
    read_site_settings,
    site_of,
)


class _Templated(Mapping):
    """Variables, each templated when read (a role default may be a template)."""

    def __init__(self, variables: Mapping[str, Any], template: Any) -> None:
        self._variables = variables
        self._template = template

    def __getitem__(self, name: str) -> Any:
        return self._template(self._variables[name])

    def __contains__(self, name: object) -> bool:
        return name in self._variables

    def __iter__(self) -> Iterator[str]:
        return iter(self._variables)

    def __len__(self) -> int:
        return len(self._variables)


class LookupModule(LookupBase):
    def run(self, terms: list[Any], variables: Mapping[str, Any] | None = None, **kwargs: Any) -> list[dict[str, Any]]:
        self.set_options(var_options=variables, direct=kwargs)
        host = self.get_option("host")
        variables = variables or {}
        hostvars = variables.get("hostvars", {})
        if not host or host not in hostvars:
            raise AnsibleLookupError(f"site_settings: host must be an inventory host (got {host!r})")
        try:
            settings = read_site_settings(
                terms, host, hostvars[host], self._caller(terms, host, variables), self.get_option("defaults")
            )
        except SiteSettingError as exc:
            raise AnsibleLookupError(str(exc)) from exc
        return [settings]

    def _caller(self, terms: list[Any], host: str, variables: Mapping[str, Any]) -> Caller:
        """The task's values; which of them are the inventory or facts of the host it runs for; the role's defaults."""
        hostvars = variables["hostvars"]
        current = variables.get("inventory_hostname", "")
        names = [name for name in terms if isinstance(name, str)] if isinstance(terms, list) else []
        raw_get = getattr(hostvars, "raw_get", None)
        own: frozenset[str] = frozenset()
        if current in hostvars and raw_get is not None:
            own = own_names(names, variables, raw_get(current))
        in_site = current in hostvars and site_of(hostvars[current]) == site_of(hostvars[host])
        role_path = variables.get("role_path")
        return Caller(
            _Templated(variables, self._templar.template),
            host=current,
            own=own,
            in_site=in_site,
            role_defaults=_Templated(self._role_defaults(role_path), self._templar.template) if role_path else None,
        )

    def _role_defaults(self, role_path: str) -> dict[str, Any]:
        """The defaults of the role at ``role_path`` as its files give them (defaults/main.yml or defaults/main/),
        raw: templated when read, for the host the task runs for."""
        defaults: dict[str, Any] = {}
        for path in self._loader.find_vars_files(os.path.join(role_path, "defaults"), "main"):
            data = self._loader.load_from_file(path, trusted_as_template=True)
            if isinstance(data, Mapping):
                defaults.update(data)
        return defaults
