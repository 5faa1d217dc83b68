# SPDX-License-Identifier: Apache-2.0
"""The job planner's site: the placement's hosts joined to the planner's nodes, by host or by node name."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.gangs import site_view as jobs_site

PLACEMENT = {
    "levels": [{"name": "rack", "label": "aligned.dev/rack"}],
    "domains": {"h1": {"rack": "r1"}, "h2": {"rack": "r2"}},
    "node_names": {"h1": "k8s-1", "h2": "k8s-2"},
}


def test_topologies_are_named_by_host_and_only_the_sites_hosts_are_kept():
    placement, nodes = jobs_site.planner_site(PLACEMENT, {"h1": 1, "h2": 2, "old-host": 3}, from_slices=False)
    assert nodes == {"h1": 1, "h2": 2}
    assert placement["domains"] == PLACEMENT["domains"] and placement["node_names"] == PLACEMENT["node_names"]


def test_slices_are_named_by_node_so_the_placement_is_too():
    placement, nodes = jobs_site.planner_site(PLACEMENT, {"k8s-1": 1, "k8s-2": 2, "k8s-9": 9}, from_slices=True)
    assert nodes == {"k8s-1": 1, "k8s-2": 2}
    assert placement["domains"] == {"k8s-1": {"rack": "r1"}, "k8s-2": {"rack": "r2"}}
    assert placement["node_names"] == {"k8s-1": "k8s-1", "k8s-2": "k8s-2"}


def test_a_site_without_hosts_keeps_every_node_and_the_picture_has_every_host():
    assert jobs_site.planner_site({}, {"a": 1}, from_slices=False)[1] == {"a": 1}
    assert jobs_site.domains_of_nodes(PLACEMENT) == {"levels": ["rack"], "nodes": {"h1": ["r1"], "h2": ["r2"]}}
    assert jobs_site.domains_of_nodes({}) == {"levels": [], "nodes": {}}
