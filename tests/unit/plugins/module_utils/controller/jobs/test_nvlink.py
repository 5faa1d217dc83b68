# SPDX-License-Identifier: Apache-2.0
"""A job in one NVLink domain on a site whose levels the cluster publishes (GKE A4X, ``nvidia.com/gpu.clique``).

The site (``tests/support/sites/nvlink_site.py``): eight nodes, four cliques of two, each node one rail-0 NIC. Placed: in one
clique, or, where none holds the job, the reason names the clique that came closest; ``jobs.json``
names the clique and where each level comes from. Rendered: every scheduler reads the clique key
(Kueue's Topology and annotation, kube-scheduler's Workload/PodGroup constraint or the pod affinity,
KAI's Topology and PodGroup), and no clique value (``<clusterUUID>.<cliqueID>``) is ever part of a
name or selector.
"""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.gangs import search
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import render as jobs
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import workload
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import gangs as kai_gang
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import objects as kai
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import objects as kueue
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import TOPOLOGY_ANNOTATIONS
from ansible_collections.aligned.dra.tests.support.sites.nvlink_site import (
    CLIQUE,
    CLIQUES,
    GKE_NVLINK,
    gke_placement,
    nvlink_job,
    place,
)
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import site_placement

GKE_KEYS = [f"cloud.google.com/gce-topology-{level}" for level in ("block", "subblock")]
HOST_KEY = "cloud.google.com/gce-topology-host"
ALL_GATES = dict.fromkeys(
    (workload.GENERIC_WORKLOAD, workload.GANG_SCHEDULING, workload.TOPOLOGY, workload.PREEMPTION), True
)
TEAM = {"name": "llm", "namespaces": ["ml"], "templates": ["gpu-nic-rail-0"]}
CLOSEST = "13c7fa65-43e1-4f6e-9c1a-f56f9bff2bfb.1"  # four cliques of 2: the first in natural order


def test_a_job_required_in_one_nvlink_domain_is_placed_in_one_clique():
    result = place([nvlink_job("two", 2)])
    (two,) = result["jobs"]
    assert two["fits"] is True and two["reason"] is None
    assert two["domain"] == {"level": "nvlink", "name": CLOSEST}
    assert two["domains"] == [{"level": "nvlink", "name": CLOSEST, "workers": 2}]
    assert sorted(w["node"] for w in two["workers"]) == CLIQUES[CLOSEST]
    assert result["levels"] == ["block", "subblock", "nvlink", "host"]
    assert result["level_sources"][2] == {"name": "nvlink", "label": CLIQUE, "source": "node_label", "key": CLIQUE}
    # every clique value, '.' and all, is a domain of the picture's map
    assert {row[2] for row in result["domains_of_nodes"]["nodes"].values()} == set(CLIQUES)


def test_when_no_clique_holds_the_job_the_reason_names_the_closest_and_why():
    (three,) = place([nvlink_job("three", 3)])["jobs"]
    assert three["fits"] is False and three["workers"] == [] and three["domain"] is None
    assert (
        three["reason"]
        == f"no nvlink holds 3 workers: the most is nvlink {CLOSEST} with 2 (rails [0]); the site holds 8"
    )
    assert three["capacity"]["level"] == "nvlink"
    assert three["capacity"]["domains"] == dict.fromkeys(sorted(CLIQUES, key=search.choice.name_key), 2)


def test_a_preferred_job_spans_the_fewest_cliques():
    (spread,) = place([nvlink_job("spread", 3, mode="preferred")])["jobs"]
    assert spread["fits"] is True and spread["domain"] is None
    assert [d["workers"] for d in spread["domains"]] == [2, 1]
    for domain in spread["domains"]:
        assert domain["level"] == "nvlink" and domain["name"] in CLIQUES


def test_nodes_whose_nvlink_fabric_is_not_ready_are_refused_by_the_placement_and_left_out_by_the_search():
    not_ready = ("gke-a4x-pool-6", "gke-a4x-pool-7")
    placement, problems = gke_placement(not_ready)
    assert problems == [
        "2 hosts (gke-a4x-pool-6, gke-a4x-pool-7): level nvlink (node label nvidia.com/gpu.clique) = (not set): the "
        "NVLink fabric is not ready on this node (nvidia.com/gpu.clique is set once it is)"
    ]
    # the jobs module refuses such a placement; the search, given it, leaves the nodes out and says why
    three, two = place([nvlink_job("three", 3), nvlink_job("two", 2)], placement)["jobs"]
    assert three["reason"] == (
        f"no nvlink holds 3 workers: the most is nvlink {CLOSEST} with 2 (rails [0]); the site holds 6; 2 hosts have "
        "no nvlink (nvidia.com/gpu.clique not set: the NVLink fabric is not ready) and are left out"
    )
    assert three["capacity"]["hosts_without_domain"] == 2 and len(three["capacity"]["domains"]) == 3
    assert two["fits"] and not {w["node"] for w in two["workers"]} & set(not_ready)


def test_no_host_with_a_clique_says_the_fabric_is_not_ready():
    placement, _problems = gke_placement(tuple(host for hosts in CLIQUES.values() for host in hosts))
    (two,) = place([nvlink_job("two", 2)], placement)["jobs"]
    assert two["reason"] == "no host has a nvlink (nvidia.com/gpu.clique not set: the NVLink fabric is not ready)"


def test_level_sources_say_where_each_level_comes_from_and_an_inventory_site_has_none():
    placement = {
        "levels": [{"name": n, "label": f"aligned.dev/{n}"} for n in ("pod", "rack", "nvlink")],
        "domains": {},
        "node_names": {},
        "sources": [
            {"name": "rack", "source": "device_attribute", "driver": "dra.net", "attribute": "rackId"},
            {"name": "nvlink", "source": "device_attribute", "driver": "dra.net", "attribute": "oke.dra.net/gpuMemoryFabricId"},
        ],
    }  # fmt: skip
    assert search.level_sources(placement) == [
        {"name": "pod", "label": "aligned.dev/pod", "source": "inventory"},
        {"name": "rack", "label": "aligned.dev/rack", "source": "device_attribute", "driver": "dra.net",
         "attribute": "dra.net/rackId"},
        {"name": "nvlink", "label": "aligned.dev/nvlink", "source": "device_attribute", "driver": "dra.net",
         "attribute": "oke.dra.net/gpuMemoryFabricId"},
    ]  # fmt: skip
    assert search.missing_text(search.level_sources(placement)[2]) == (
        " (device attribute oke.dra.net/gpuMemoryFabricId not set: the NVLink fabric is not ready)"
    )
    assert search.missing_text(search.level_sources(placement)[0]) == ""
    inventory = site_placement(["rack"], {"a": {"rack": "r1"}})
    assert "level_sources" not in place([], inventory)


# -- what the schedulers read ----------------------------------------------------------------------


def _render(teams: dict, gates: dict | None = None, mode: str = "required") -> dict:
    placement, _problems = gke_placement()
    return jobs.render_jobs(
        "a4x",
        [nvlink_job("train", 2, mode=mode)],
        "1.36",
        gates,
        placement["levels"],
        {},
        copy.deepcopy(teams),
        {"gpu-nic-rail-0": [0]},
    )


def _objects(result: dict) -> dict[str, dict]:
    return {("KaiPodGroup" if kai_gang.is_kai_group(o) else o["kind"]): o for o in result["objects"]}


def _no_clique_value_in(result: dict) -> None:
    text = json.dumps(result["objects"])
    assert not any(value in text for value in CLIQUES)


@pytest.mark.parametrize("mode", ["required", "preferred"])
def test_kueue_annotation_names_the_clique_key(mode):
    result = _render({"engine": "kueue", "teams": [TEAM]}, ALL_GATES, mode)
    template = _objects(result)["Job"]["spec"]["template"]
    assert template["metadata"]["annotations"][TOPOLOGY_ANNOTATIONS[mode]] == CLIQUE
    _no_clique_value_in(result)


def test_kube_scheduler_gang_constrains_to_the_clique_key_or_keeps_to_it_by_affinity():
    found = _objects(_render({"engine": "resourcequota", "teams": [TEAM]}, ALL_GATES))
    groups = [found["Workload"]["spec"]["podGroupTemplates"][0], found["PodGroup"]["spec"]]
    assert all(g["schedulingConstraints"]["topology"] == [{"key": CLIQUE}] for g in groups)
    without = _render({"engine": "resourcequota", "teams": [TEAM]}, dict(ALL_GATES, **{workload.TOPOLOGY: False}))
    affinity = _objects(without)["Job"]["spec"]["template"]["spec"]["affinity"]["podAffinity"]
    assert [t["topologyKey"] for t in affinity["requiredDuringSchedulingIgnoredDuringExecution"]] == [CLIQUE]
    assert "topology constraint on nvidia.com/gpu.clique left out" in without["left_out"][0]["reason"]
    _no_clique_value_in(without)


def test_kai_pod_group_requires_the_clique_key_on_the_site_topology():
    teams = {"engine": "kai", "teams": [TEAM]}
    result = _render(teams)
    group = _objects(result)["KaiPodGroup"]
    assert group["spec"]["topologyConstraint"] == {"topology": "a4x-topology", "requiredTopologyLevel": CLIQUE}
    _no_clique_value_in(result)


@pytest.mark.parametrize("render_topology", [kueue.topology, kai.topology])
def test_the_site_topology_has_the_clique_key_between_subblock_and_host(render_topology):
    expected = [*GKE_KEYS, CLIQUE, HOST_KEY, "kubernetes.io/hostname"]
    placement, _problems = gke_placement()
    for levels in (placement["levels"], GKE_NVLINK):  # the filter's levels, or the inventory's setting as it is
        found = render_topology("a4x", levels)
        assert found["metadata"]["name"] == "a4x-topology"
        assert [level["nodeLabel"] for level in found["spec"]["levels"]] == expected
