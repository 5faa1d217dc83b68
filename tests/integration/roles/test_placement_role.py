# SPDX-License-Identifier: Apache-2.0
"""The placement role through real ansible-playbook runs: 16 nodes in 4 racks, three jobs, node labels.

The nodes' probed topologies are written into ``<out>/west/nodes/`` (no probe:
the placement stage reads them as the claims stage does). The label apply
talks to tests/fake_apiserver.py (strict, in memory: no real kube-apiserver
runs here), which models server-side apply's ownership of label keys per
field manager (tests/fake_apiserver_apply.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.fake_apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.plan_inputs import NIC_NAME_RULE, aligned_node
from ansible_collections.aligned.dra.tests.playbook_runs import PLAYBOOKS, recap, run_playbook

LEVELS = [{"name": "block", "label": "aligned.dev/block"}, {"name": "rack", "label": "aligned.dev/rack"}]
# 16 nodes, 2 blocks x 2 racks x 4 nodes, each with 8 GPU+NIC pairs, NIC i on rail i.
HOSTS = {f"gpu-{i:02d}": {"block": f"b{i // 8 + 1}", "rack": f"r{i // 4 + 1}"} for i in range(16)}
JOBS = [
    # two workers of 8 rails each, one per node: every rack holds 4, the first by name is taken
    {"name": "pretrain", "workers": 2, "template": "gpu-nic-rails-8-0", "placement": {"level": "rack"}},
    # six workers of rail 0, one per node: no rack holds 6, the fewest racks that do are two
    {"name": "sweep", "workers": 6, "template": "gpu-nic-rail-0",
     "placement": {"level": "rack", "mode": "preferred"}},
    # the same, required in one rack: does not fit
    {"name": "sweep-rack", "workers": 6, "template": "gpu-nic-rail-0", "placement": {"level": "rack"}},
]  # fmt: skip


def setup(tmp_path: Path, jobs: list | None = None, levels: list | None = None, **extra) -> tuple[Path, Path]:
    output = tmp_path / "out"
    nodes = output / "west" / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    for host in HOSTS:
        (nodes / f"{host}.json").write_text(json.dumps(aligned_node(8)))
    inventory = {
        "aligned_dra_nodes": {
            "hosts": {host: {"aligned_dra_placement": domains} for host, domains in HOSTS.items()},
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                "aligned_dra_output_dir": str(output),
                "aligned_dra_site": "west",
                "aligned_dra_kubernetes_version": "1.36",
                "aligned_dra_feature_gates": {"GenericWorkload": True, "GangScheduling": True},
                "aligned_dra_rails": dict(NIC_NAME_RULE, count=8),
                "aligned_dra_placement_levels": LEVELS if levels is None else levels,
                "aligned_dra_jobs": JOBS if jobs is None else jobs,
                **extra,
            },
        }
    }
    if levels == []:
        for host in inventory["aligned_dra_nodes"]["hosts"].values():
            host.pop("aligned_dra_placement")
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    play = tmp_path / "play.yml"
    play.write_text(yaml.safe_dump([{"ansible.builtin.import_playbook": str(PLAYBOOKS / "placement.yml")}]))
    return path, play


def test_sixteen_nodes_four_racks_three_jobs_placed_rendered_and_idempotent(tmp_path):
    # a measurement of an earlier run: the placement run alone does not read it (nothing says it is now)
    inventory, play = setup(tmp_path, aligned_dra_utilization_source="cluster")
    (tmp_path / "out" / "west" / "utilization.json").write_text("not this run's")
    first = run_playbook(inventory, play)
    assert first.returncode == 0, first.stdout + first.stderr
    out = " ".join(first.stdout.split())
    assert (
        "west: levels block > rack, labels of 16 nodes written for GitOps (aligned_dra_placement_apply is off)" in out
    )
    assert "west: job pretrain: 2 workers of gpu-nic-rails-8-0 in rack r1 on 2 nodes, rails 0,1,2,3,4,5,6,7" in out
    assert "west: job sweep-rack: 6 workers of gpu-nic-rail-0 - DOES NOT FIT: no rack holds 6 workers" in out
    site = tmp_path / "out" / "west"
    document = json.loads((site / "jobs.json").read_text())
    assert document["free_devices"] == "empty site"
    placed = {job["name"]: job for job in document["jobs"]}
    pretrain, sweep, sweep_rack = placed["pretrain"], placed["sweep"], placed["sweep-rack"]
    assert pretrain["fits"] and pretrain["domain"] == {"level": "rack", "name": "r1"}
    assert {w["node"] for w in pretrain["workers"]} <= {f"gpu-0{i}" for i in range(4)}
    # every GPU against every NIC of the worker (plan.json's worst level): the pairs are on one NUMA node
    assert all(w["rails"] == list(range(8)) and w["worst_level"] == "NODE" for w in pretrain["workers"])
    assert sweep["fits"] and sweep["domain"] is None and len(sweep["domains"]) == 2
    assert len({w["node"] for w in sweep["workers"]}) == 6 and all(w["rails"] == [0] for w in sweep["workers"])
    assert [w["index"] for w in sweep["workers"]] == list(range(6))
    assert not sweep_rack["fits"] and sweep_rack["workers"] == []
    assert sweep_rack["reason"].startswith("no rack holds 6 workers: the most is rack r1 with 4 (rails [0])")
    # the objects of every job, for 1.36 with the gang gates: Job, Service, Workload, PodGroup
    files = sorted(p.name for p in (site / "jobs").iterdir())
    assert "pretrain-job.yaml" in files and "sweep-podgroup.yaml" in files and "kustomization.yaml" in files
    job = yaml.safe_load((site / "jobs" / "pretrain-job.yaml").read_text())
    assert job["spec"]["completions"] == 2 and job["spec"]["completionMode"] == "Indexed"
    labels = list(yaml.safe_load_all((site / "placement" / "node-labels.yaml").read_text()))
    assert len(labels) == 16 and labels[0]["metadata"]["labels"] == {
        "aligned.dev/block": "b1",
        "aligned.dev/rack": "r1",
        "aligned.dev/site": "west",
    }
    second = run_playbook(inventory, play)
    assert second.returncode == 0, second.stdout + second.stderr
    assert recap(second.stdout) == {"changed": 0, "failed": 0}


def test_a_rack_in_two_blocks_is_refused_before_anything_is_written(tmp_path):
    inventory, play = setup(tmp_path)
    data = yaml.safe_load(inventory.read_text())
    data["aligned_dra_nodes"]["hosts"]["gpu-05"]["aligned_dra_placement"] = {"block": "b2", "rack": "r1"}
    inventory.write_text(yaml.safe_dump(data))
    proc = run_playbook(inventory, play)
    assert proc.returncode != 0
    assert "rack r1" in proc.stdout and "gpu-05" in proc.stdout
    site = tmp_path / "out" / "west"
    assert not (site / "jobs.json").exists() and not (site / "placement").exists()


@pytest.fixture
def api():
    with FakeApiServer(minor="1.36") as server:
        for host in HOSTS:
            server.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": host, "labels": {"team": "x"}}})
        yield server


@pytest.mark.slow
def test_labels_applied_with_only_our_keys_removed_with_their_level(api, tmp_path):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    settings = {"aligned_dra_placement_apply": True, "aligned_dra_placement_kubeconfig": str(kubeconfig)}
    inventory, play = setup(tmp_path, jobs=[], **settings)
    checked = run_playbook(inventory, play, "--check", "--diff")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert api.get("nodes", "gpu-00")["metadata"]["labels"] == {"team": "x"}
    first = run_playbook(inventory, play)
    assert first.returncode == 0, first.stdout + first.stderr
    assert api.get("nodes", "gpu-09")["metadata"]["labels"] == {
        "team": "x",
        "aligned.dev/block": "b2",
        "aligned.dev/rack": "r3",
        "aligned.dev/site": "west",
    }
    # the block level removed: its label goes, the rack's and the other manager's stay
    inventory, play = setup(tmp_path, jobs=[], levels=[LEVELS[1]], **settings)
    data = yaml.safe_load(inventory.read_text())
    for host in data["aligned_dra_nodes"]["hosts"].values():
        host["aligned_dra_placement"].pop("block")
    inventory.write_text(yaml.safe_dump(data))
    second = run_playbook(inventory, play)
    assert second.returncode == 0, second.stdout + second.stderr
    assert api.get("nodes", "gpu-09")["metadata"]["labels"] == {
        "team": "x",
        "aligned.dev/rack": "r3",
        "aligned.dev/site": "west",
    }
    # a host gone from the site, no GitOps file written: the cluster's node still loses our keys
    inventory, play = setup(tmp_path, jobs=[], levels=[LEVELS[1]], aligned_dra_placement_write=False, **settings)
    data = yaml.safe_load(inventory.read_text())
    hosts = data["aligned_dra_nodes"]["hosts"]
    hosts.pop("gpu-15")
    for host in hosts.values():
        host["aligned_dra_placement"].pop("block")
    inventory.write_text(yaml.safe_dump(data))
    gone = run_playbook(inventory, play)
    assert gone.returncode == 0, gone.stdout + gone.stderr
    assert api.get("nodes", "gpu-15")["metadata"]["labels"] == {"team": "x"}
    assert api.get("nodes", "gpu-14")["metadata"]["labels"]["aligned.dev/rack"] == "r4"
    # every level removed: our keys go, the file says so for GitOps
    inventory, play = setup(tmp_path, jobs=[], levels=[], **settings)
    third = run_playbook(inventory, play)
    assert third.returncode == 0, third.stdout + third.stderr
    assert api.get("nodes", "gpu-09")["metadata"]["labels"] == {"team": "x"}
    written = list(yaml.safe_load_all((tmp_path / "out" / "west" / "placement" / "node-labels.yaml").read_text()))
    assert all(node["metadata"]["labels"] == {} for node in written)
