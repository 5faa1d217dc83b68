# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.jobs on a site whose levels the cluster publishes: a job in one NVLink domain (GKE A4X).

The placement is the one the ``aligned.dra.placement`` filter passes (``levels``, ``domains``,
``node_names``, ``sources``, ``problems``, ``label_objects``), read from the GKE fixture's node labels;
``jobs.json`` names the clique the job is placed in and where each level comes from, the rendered
objects keep the workers together on ``nvidia.com/gpu.clique``, and malformed ``sources`` are refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.tests.support.harnesses.jobs_module import run
from ansible_collections.aligned.dra.tests.support.sites.nvlink_site import (
    CLIQUE,
    CLIQUES,
    HOSTS,
    RULES,
    gke_placement,
)
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import aligned_node

TRAIN = {
    "name": "train",
    "workers": 2,
    "template": "gpu-nic-rail-0",
    "placement": {"level": "nvlink", "mode": "required"},
}


def args(tmp_path: Path, **change) -> dict:
    placement, problems = gke_placement()
    nodes = tmp_path / "nodes"
    nodes.mkdir(exist_ok=True)
    for host in HOSTS:
        (nodes / f"{host}.json").write_text(json.dumps(aligned_node(2)))
    found = {
        "site": "a4x",
        "kubernetes_version": "1.36",
        "jobs": [TRAIN],
        "placement": dict(placement, problems=problems, label_objects=[]),
        "objects": claims.render({}, "a4x", "1.36", rail_rules=RULES)["objects"],
        "topology_dir": str(nodes),
        "rail_rules": RULES,
        "dest": str(tmp_path / "jobs.json"),
    }
    found.update(change)
    return found


def test_jobs_json_names_the_clique_and_the_source_of_every_level(capsys, tmp_path):
    result = run(capsys, args(tmp_path))
    written = json.loads(Path(tmp_path / "jobs.json").read_text())
    assert written == result["placement"]
    (train,) = written["jobs"]
    assert train["fits"] and train["domain"]["level"] == "nvlink" and train["domain"]["name"] in CLIQUES
    assert sorted(w["node"] for w in train["workers"]) == CLIQUES[train["domain"]["name"]]
    assert [(s["name"], s["source"], s.get("key")) for s in written["level_sources"]] == [
        ("block", "node_label", "cloud.google.com/gce-topology-block"),
        ("subblock", "node_label", "cloud.google.com/gce-topology-subblock"),
        ("nvlink", "node_label", CLIQUE),
        ("host", "node_label", "cloud.google.com/gce-topology-host"),
    ]
    assert {row[2] for row in written["domains_of_nodes"]["nodes"].values()} == set(CLIQUES)
    # 1.36 without the Workload API's gates: the pods keep to the first worker's clique by a required affinity
    objects = {f["name"]: f["object"] for f in result["files"]}
    affinity = objects["train-job.yaml"]["spec"]["template"]["spec"]["affinity"]["podAffinity"]
    assert [t["topologyKey"] for t in affinity["requiredDuringSchedulingIgnoredDuringExecution"]] == [CLIQUE]
    rendered = json.dumps(objects)
    assert not any(value in rendered for value in CLIQUES)


def test_a_job_no_clique_holds_says_which_came_closest(capsys, tmp_path):
    result = run(capsys, args(tmp_path, jobs=[dict(TRAIN, workers=3)]))
    (train,) = result["placement"]["jobs"]
    assert not train["fits"]
    assert train["reason"].startswith("no nvlink holds 3 workers: the most is nvlink ")
    assert train["reason"].endswith(" with 2 (rails [0]); the site holds 8")


@pytest.mark.parametrize(
    ("sources", "message"),
    [
        ("nvlink", "placement.sources: must be a list of level entries (got str)"),
        ([{"source": "node_label", "key": CLIQUE}], "placement.sources: [0] must be a level entry with a name"),
        ([{"name": "nvlink", "source": "label"}], "placement.sources: [0] (nvlink): source 'label' is not one of"),
        (
            [{"name": "nvlink", "source": "node_label"}],
            "placement.sources: [0] (nvlink): a node_label level needs its key",
        ),
        (
            [{"name": "rack", "source": "device_attribute", "driver": "dra.net"}],
            "placement.sources: [0] (rack): a device_attribute level needs its attribute",
        ),
    ],
)
def test_sources_of_the_wrong_shape_are_refused_and_nothing_is_written(capsys, tmp_path, sources, message):
    module_args = args(tmp_path)
    module_args["placement"]["sources"] = sources
    assert message in run(capsys, module_args, fails=True)["msg"]
    assert not Path(module_args["dest"]).exists()


def test_a_placement_whose_fabric_is_not_ready_is_refused_naming_the_nodes(capsys, tmp_path):
    placement, problems = gke_placement(("gke-a4x-pool-7",))
    module_args = args(tmp_path, placement=dict(placement, problems=problems, label_objects=[]))
    message = run(capsys, module_args, fails=True)["msg"]
    assert message.startswith("placement: host gke-a4x-pool-7: level nvlink (node label nvidia.com/gpu.clique)")
    assert "the NVLink fabric is not ready on this node" in message
