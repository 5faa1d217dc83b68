# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The rail rules of every host of a site, as the driver, claims and teams roles hand them on."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs.site import kubernetes_node_name, site_of

RULE = "aligned_dra_rails"


def rail_rules(hostvars: Mapping[str, Any], hosts: Iterable[str], site: str | None = None) -> dict[str, Any]:
    """Each site's rail rules: ``{site: {"rules": {host: rule}, "node_names": {host: node name}}}``.

    ``hosts``: every inventory host of the sites, not only the play's (a run
    with ``--limit`` still reads the rules of the whole site: the rails file
    and the rail templates are the site's). A host is listed where it sets
    ``aligned_dra_rails`` (not null, not empty); its node name is its
    Kubernetes node name (``aligned_dra_driver_node_name``, else the host),
    which a per-node map and the driver's rails file are keyed by. Sites
    without a rule are left out. With ``site``: that site's entry (empty
    ``rules`` and ``node_names`` when it has no rule).
    """
    if isinstance(hosts, (str, bytes)) or not isinstance(hosts, Iterable):
        raise AnsibleFilterError(f"rail_rules: hosts must be a list of inventory host names (got {hosts!r})")
    sites: dict[str, dict[str, dict[str, Any]]] = {}
    for host in sorted(set(hosts)):
        if host not in hostvars:
            raise AnsibleFilterError(f"rail_rules: {host!r} is not an inventory host")
        variables = hostvars[host]
        host_site = site_of(variables)
        rule = variables.get(RULE)
        if (site is not None and host_site != site) or rule is None or rule == {}:
            continue
        entry = sites.setdefault(host_site, {"rules": {}, "node_names": {}})
        entry["rules"][host] = rule
        entry["node_names"][host] = kubernetes_node_name(host, variables)
    if site is not None:
        return sites.get(site, {"rules": {}, "node_names": {}})
    return dict(sorted(sites.items()))


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"rail_rules": rail_rules}
