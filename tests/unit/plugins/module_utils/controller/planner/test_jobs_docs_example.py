# SPDX-License-Identifier: Apache-2.0
"""The two-rack example of docs/jobs.md, placed: what the page says is what the planner gives.

Four nodes of eight aligned GPU+NIC pairs (NIC i on rail i), racks r1 (gpu-01, gpu-02) and r2
(gpu-03, gpu-04) of block b1; ``pretrain`` (two workers of eight rails, required rack), ``sweep``
(three rail-0 workers, preferred rack) and the same required.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import jobs
from ansible_collections.aligned.dra.tests.plan_inputs import (
    NIC_NAME_RULE,
    aligned_node,
    rail_objects,
    rail_planner_nodes,
    site_placement,
    split_objects,
)

RACKS = {"gpu-01": "r1", "gpu-02": "r1", "gpu-03": "r2", "gpu-04": "r2"}
RULE = dict(NIC_NAME_RULE, count=8)
JOBS = [
    {"name": "pretrain", "workers": 2, "template": "gpu-nic-rails-8-0", "placement": {"level": "rack", "mode": "required"}},
    {"name": "sweep", "workers": 3, "template": "gpu-nic-rail-0", "placement": {"level": "rack", "mode": "preferred"}},
    {"name": "sweep-rack", "workers": 3, "template": "gpu-nic-rail-0", "placement": {"level": "rack", "mode": "required"}},
]  # fmt: skip


def test_the_pages_example():
    nodes, problems = rail_planner_nodes({h: aligned_node(8) for h in RACKS}, {h: RULE for h in RACKS})
    assert problems == []
    classes, templates = split_objects(rail_objects({"gpu-01": RULE}))
    placement = site_placement(["block", "rack"], {h: {"block": "b1", "rack": r} for h, r in RACKS.items()})
    placed = jobs.place_jobs("west", JOBS, nodes, classes, templates, placement, kubernetes_version="1.36")
    assert placed["free_devices"] == "empty site"
    pretrain, sweep, required = placed["jobs"]
    assert pretrain["fits"] and pretrain["domain"] == {"level": "rack", "name": "r1"}
    assert [(w["index"], w["node"]) for w in pretrain["workers"]] == [(0, "gpu-01"), (1, "gpu-02")]
    assert pretrain["rails"] == list(range(8))
    # every GPU of a worker against every NIC: the pairs share a NUMA node, not all a root
    assert (pretrain["worst_level"], pretrain["worst_level_exact"]) == ("NODE", True)
    # each GPU's own NIC is on its root: aligned PIX, per worker and for the job
    assert all((w["aligned_level"], w["aligned_level_exact"]) == ("PIX", True) for w in pretrain["workers"])
    assert (pretrain["aligned_level"], pretrain["aligned_level_exact"]) == ("PIX", True)
    assert sweep["fits"] and sweep["domain"] is None and sweep["rails"] == [0]
    assert sweep["domains"] == [
        {"level": "rack", "name": "r1", "workers": 2},
        {"level": "rack", "name": "r2", "workers": 1},
    ]
    assert (sweep["worst_level"], sweep["worst_level_exact"]) == ("PIX", True)
    assert not required["fits"] and required["workers"] == []
    assert required["reason"] == "no rack holds 3 workers: the most is rack r1 with 2 (rails [0]); the site holds 4"
