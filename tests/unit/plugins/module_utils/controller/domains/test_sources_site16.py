# SPDX-License-Identifier: Apache-2.0
"""The 16-node acceptance site (tests/support/sites/site16.py) with its blocks and racks read from the nodes'
labels instead of the inventory: the same site placement, and every job placed as before."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import place as jobs
from ansible_collections.aligned.dra.tests.support.sites import site16
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    NIC_NAME_RULE,
    rail_objects,
    rail_planner_nodes,
    split_objects,
)

KEYS = {"block": "aligned.dev/block", "rack": "aligned.dev/rack"}  # as an earlier run of the collection labelled them
DOMAINS = {host: {"block": block, "rack": rack} for host, (rack, block) in site16.HOSTS.items()}
NODES = [
    {"apiVersion": "v1", "kind": "Node", "metadata": {"name": host, "labels": {KEYS[k]: v for k, v in row.items()}}}
    for host, row in DOMAINS.items()
]


def place(placement: dict) -> dict:
    nodes, problems = rail_planner_nodes(site16.TOPOLOGIES, site16.RULES)
    assert problems == []
    classes, templates = split_objects(rail_objects({"n01": dict(NIC_NAME_RULE, count=4)}))
    result = jobs.place_jobs(
        "acceptance", site16.JOBS, nodes, classes, templates, placement, held=site16.HELD, kubernetes_version="1.36"
    )
    return {entry["name"]: entry for entry in result["jobs"]}


def test_the_acceptance_site_places_every_job_the_same_with_levels_from_node_labels():
    inventory = [{"name": name, "label": key} for name, key in KEYS.items()]
    from_inventory, problems = levels.site_placement(inventory, DOMAINS, {})
    assert problems == []
    labelled = [{"name": name, "source": "node_label", "key": key} for name, key in KEYS.items()]
    from_labels, problems = levels.site_placement(labelled, dict.fromkeys(DOMAINS), {}, nodes=NODES)
    assert problems == []
    assert {k: v for k, v in from_labels.items() if k != "sources"} == from_inventory
    placed = place(from_labels)
    assert placed == place(from_inventory) == site16.RESULT
    assert placed["train"]["fits"] and not placed["big"]["fits"]
