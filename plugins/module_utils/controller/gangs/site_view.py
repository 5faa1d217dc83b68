# SPDX-License-Identifier: Apache-2.0
"""The site the placement search places on: the planner's nodes joined to the placement's hosts.

The placement (the ``aligned.dra.placement`` filter) names every inventory
host of the site, its domains and its Kubernetes node name. The planner's
nodes come from the probed topologies (named by host) or from the cluster's
ResourceSlices (named by Kubernetes node). :func:`planner_site` keeps only the
nodes of the site's hosts (a topology file of a host no longer in the
inventory is not a node of the site) and, with slices, names the placement's
hosts by their node names, so that both sides use one name.
:func:`check_shape` checks the placement's shape first (once, by the jobs
module's runner); :func:`domains_of_nodes` is every host's domains, for the
report's picture.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


def planner_site(
    placement: Mapping[str, Any], nodes: Mapping[str, Any], from_slices: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(placement, nodes)`` named alike: by host, or by Kubernetes node name when the nodes are slices'.

    Without hosts in the placement (an empty site) every node is kept. ``placement`` is of the
    ``aligned.dra.placement`` filter's shape (:func:`check_shape`).
    """
    domains = dict(placement.get("domains") or {})
    names = dict(placement.get("node_names") or {})
    if from_slices:
        domains = {names.get(host, host): row for host, row in domains.items()}
        names = {name: name for name in domains}
    joined = dict(placement, domains=domains, node_names=names)
    if not domains:
        return joined, dict(nodes)
    return joined, {name: data for name, data in nodes.items() if name in domains}


class PlacementShapeError(ValueError):
    """A placement that is not what the ``aligned.dra.placement`` filter gives; the message names the field."""


def check_shape(placement: Mapping[str, Any]) -> None:
    """``levels`` a list of mappings, ``domains`` host -> mapping of level -> domain, ``node_names`` host -> name."""
    levels = placement.get("levels") or []
    if not isinstance(levels, list) or not all(isinstance(level, dict) for level in levels):
        raise PlacementShapeError("placement.levels: must be a list of levels ({name, label})")
    domains = placement.get("domains") or {}
    if not isinstance(domains, dict) or not all(isinstance(row, dict) for row in domains.values()):
        raise PlacementShapeError("placement.domains: must map each host to its {level: domain}")
    names = placement.get("node_names") or {}
    if not isinstance(names, dict) or not all(isinstance(name, str) for name in names.values()):
        raise PlacementShapeError("placement.node_names: must map each host to its Kubernetes node name")


def domains_of_nodes(placement: Mapping[str, Any]) -> dict[str, Any]:
    """``{"levels": [names widest first], "nodes": {host: [domain or None per level]}}``."""
    names = [level["name"] for level in placement.get("levels") or []]
    rows = placement.get("domains") or {}
    return {"levels": names, "nodes": {host: [rows[host].get(n) for n in names] for host in sorted(rows)}}
