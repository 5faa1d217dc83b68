# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The placement of one site: its levels, every host's domains and node name, and the nodes' label objects."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import level_specs, shared, sources
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels as placement

# A host's site and node name as rail_rules reads them: the placement and the rails of a site are
# read from the same hosts.
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs.site import kubernetes_node_name, site_of
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import SITE_LABEL


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _cluster_objects(raw_levels: Any, raw_setting: Any) -> tuple[list[Any] | None, list[Any] | None]:
    """The Nodes and ResourceSlices that levels read from the cluster need (files or the API server)."""
    if not placement.is_sourced(raw_levels):
        return None, None
    return sources.read_objects(raw_setting, level_specs.check_level_specs(raw_levels))


def placement_filter(hostvars: Mapping[str, Any], hosts: Iterable[str], site: str) -> dict[str, Any]:
    """Site ``site``'s placement: ``{"levels", "domains", "node_names", "problems", "label_objects"}``.

    ``hosts``: every inventory host of the site (others are skipped), not only
    the play's: the levels and the nodes' labels belong to the site. The
    levels are the site's first host's (sorted); ``domains`` and
    ``node_names`` are :func:`levels.site_placement`'s, the node name the one
    the driver and the rails use (``aligned_dra_driver_node_name``, else the
    host). ``problems`` lists what is wrong (a host whose levels differ from
    the first host's included); ``label_objects`` (:func:`levels.node_label_objects`,
    with the site label) is empty while there is a problem, so nothing is
    labelled from a wrong placement.
    """
    if isinstance(hosts, (str, bytes)) or not isinstance(hosts, Iterable):
        raise AnsibleFilterError(f"placement: hosts must be a list of inventory host names (got {hosts!r})")
    if not isinstance(site, str) or not site:
        raise AnsibleFilterError(f"placement: site must be a site name (got {site!r})")
    members: dict[str, Mapping[str, Any]] = {}
    for host in sorted(set(hosts)):
        if host not in hostvars:
            raise AnsibleFilterError(f"placement: {host!r} is not an inventory host")
        variables = hostvars[host]
        if site_of(variables) == site:
            members[host] = variables
    empty: dict[str, Any] = {"levels": [], "domains": {}, "node_names": {}, "problems": [], "label_objects": []}
    if not members:
        return empty
    first = next(iter(members))
    raw_levels = members[first].get(shared.LEVELS_VARIABLE)
    problems = []
    wanted = _key(raw_levels or [])
    differ = sorted(h for h, v in members.items() if _key(v.get(shared.LEVELS_VARIABLE) or []) != wanted)
    if differ:
        problems.append(
            f"{', '.join(differ[:3])}{' and more' if len(differ) > 3 else ''}: "
            f"{shared.LEVELS_VARIABLE} differs from the site's first host {first}; levels are per site"
        )
    try:
        nodes, slices = _cluster_objects(raw_levels, members[first].get(sources.CLUSTER_VARIABLE))
        result, found = placement.site_placement(
            raw_levels,
            {host: variables.get(shared.PLACEMENT_VARIABLE) for host, variables in members.items()},
            {host: kubernetes_node_name(host, variables) for host, variables in members.items()},
            nodes=nodes,
            slices=slices,
        )
    except shared.PlacementError as exc:
        return dict(empty, problems=[*problems, f"site {site}: {exc}"])
    problems += found
    if result["levels"]:
        label = placement.site_label_problem(site)
        if label:
            problems.append(f"site {site}: {label} ({SITE_LABEL})")
    result["problems"] = problems
    result["label_objects"] = [] if problems else placement.node_label_objects(result, site)
    return result


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {"placement": placement_filter}
