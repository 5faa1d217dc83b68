# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: a site whose levels the cluster publishes, NVLink domains included, for the jobs, module and report tests.

The eight GKE A4X nodes of ``tests/fixtures/placement_sources/gke-nodes.yaml`` (``{preset: gke,
nvlink: true}``: block → subblock → nvlink, read from ``nvidia.com/gpu.clique`` → host), each two
GPU-NIC pairs on rails 0-1 (``tests/support/sites/plan_inputs.py``): four cliques of two nodes, so a clique holds two
workers of ``gpu-nic-rail-0`` (one rail-0 NIC per node) and the site eight. Clique values are
``<clusterUUID>.<cliqueID>``: they hold a '.'.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels, presets, sources
from ansible_collections.aligned.dra.plugins.module_utils.controller.gangs import site_view
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import place as jobs_place
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    NIC_NAME_RULE,
    aligned_node,
    rail_objects,
    rail_planner_nodes,
    split_objects,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "placement_sources"
GKE_NVLINK = {"preset": "gke", "nvlink": True}
CLIQUE = presets.CLIQUE_LABEL
HOSTS = [f"gke-a4x-pool-{i}" for i in range(8)]
# the cliques as the fixture sets them, two nodes each
CLIQUES = {
    "371c8081-f252-4f6e-9c1a-930589f7f5d6.1": HOSTS[0:2],
    "bd15cf0f-1869-4f6e-9c1a-41cabe6d8967.1": HOSTS[2:4],
    "13c7fa65-43e1-4f6e-9c1a-f56f9bff2bfb.1": HOSTS[4:6],
    "32dd8d57-6068-4f6e-9c1a-2680af9a9503.1": HOSTS[6:8],
}
RULES = {host: dict(NIC_NAME_RULE, count=2) for host in HOSTS}


def gke_nodes(without_clique: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """The fixture's Node objects; the nodes of ``without_clique`` lose their clique label (fabric not ready)."""
    nodes, _slices = sources.load_files({"node_files": [str(FIXTURES / "gke-nodes.yaml")]})
    nodes = copy.deepcopy(nodes)
    for node in nodes:
        if node["metadata"]["name"] in without_clique:
            del node["metadata"]["labels"][CLIQUE]
    return nodes


def gke_placement(without_clique: tuple[str, ...] = ()) -> tuple[dict[str, Any], list[str]]:
    """The site placement read from the fixture's labels, as the placement filter's library gives it."""
    return levels.site_placement(GKE_NVLINK, dict.fromkeys(HOSTS), {}, nodes=gke_nodes(without_clique))


def nvlink_job(name: str, workers: int, mode: str | None = "required", template: str = "gpu-nic-rail-0") -> dict:
    found = {"name": name, "workers": workers, "template": template, "namespace": "ml"}
    if mode is not None:
        found["placement"] = {"level": "nvlink", "mode": mode}
    return found


def place(job_list: list[dict], placement: dict[str, Any] | None = None) -> dict[str, Any]:
    """jobs.json of the GKE site as the jobs module writes it (``domains_of_nodes`` added)."""
    if placement is None:
        placement, problems = gke_placement()
        assert problems == []
    nodes, problems = rail_planner_nodes({host: aligned_node(2) for host in HOSTS}, RULES)
    assert problems == []
    classes, templates = split_objects(rail_objects(RULES))
    result = jobs_place.place_jobs("a4x", job_list, nodes, classes, templates, placement, kubernetes_version="1.36")
    result["domains_of_nodes"] = site_view.domains_of_nodes(placement)
    return result
