# SPDX-License-Identifier: Apache-2.0
"""The placement role through real ansible-playbook runs: 16 nodes in 4 racks, three jobs, node labels.

The nodes' probed topologies are written into ``<out>/west/nodes/`` (no probe:
the placement stage reads them as the claims stage does). The label and job
applies talk to tests/support/fakes/apiserver/ (strict, in memory: no real
kube-apiserver runs here; it validates the jobs' Job, Service, Workload and
PodGroup against the 1.36 schemas), which models server-side apply's
ownership of label keys per field manager (tests/support/fakes/apiserver/apply.py).
One run goes through the utilization stage first, with a claim file holding
a NIC, as site.yml runs it; one through the claims stage first, whose claim
catalogue the placement takes instead of rendering it again.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    recap,
    run_playbook,
    write_imports,
    write_inventory,
)
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import NIC_NAME_RULE, aligned_node

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


def setup(
    tmp_path: Path,
    jobs: list | None = None,
    levels: list | None = None,
    plays: tuple[str, ...] = ("placement.yml",),
    **extra,
) -> tuple[Path, Path]:
    output = tmp_path / "out"
    nodes = output / "west" / "nodes"
    nodes.mkdir(parents=True, exist_ok=True)
    for host in HOSTS:
        (nodes / f"{host}.json").write_text(json.dumps(aligned_node(8)))
    variables = {
        "aligned_dra_output_dir": str(output),
        "aligned_dra_site": "west",
        "aligned_dra_kubernetes_version": "1.36",
        "aligned_dra_feature_gates": {"GenericWorkload": True, "GangScheduling": True},
        "aligned_dra_rails": dict(NIC_NAME_RULE, count=8),
        "aligned_dra_placement_levels": LEVELS if levels is None else levels,
        "aligned_dra_jobs": JOBS if jobs is None else jobs,
        **extra,
    }
    hosts = {host: ({} if levels == [] else {"aligned_dra_placement": domains}) for host, domains in HOSTS.items()}
    path = write_inventory(tmp_path / "hosts.yml", hosts, variables)
    play = write_imports(tmp_path / "play.yml", [PLAYBOOKS / name for name in plays])
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
    # every node holds one rail-0 worker (test_this_runs_utilization_... holds one of them)
    assert sweep["capacity"]["site"] == 16 and sweep["capacity"]["nodes"] == {"1": 16}
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


def held_nic_files(tmp_path: Path) -> dict:
    """The utilization role's ``files`` source: every node's ResourceSlice as the bundled driver publishes
    it, and one allocated claim that holds gpu-00's rail-0 NIC (``nic-0000-12-00-0``)."""
    devices = dra.devices_from_topology(aligned_node(8))
    slices = [item for host in HOSTS for item in dra_slices.resource_slices(host, devices)]
    request = {"name": "nic", "exactly": {"deviceClassName": "aligned-nic", "count": 1}}
    result = {"request": "nic", "driver": dra.DRIVER_NAME, "pool": "gpu-00", "device": "nic-0000-12-00-0"}
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "held", "namespace": "default"},
        "spec": {"devices": {"requests": [request]}},
        "status": {"allocation": {"devices": {"results": [result]}}},
    }
    (tmp_path / "slices.yaml").write_text(yaml.safe_dump_all(slices))
    (tmp_path / "claims.yaml").write_text(yaml.safe_dump(claim))
    return {
        "aligned_dra_utilization_source": "files",
        "aligned_dra_utilization_slice_files": [str(tmp_path / "slices.yaml")],
        "aligned_dra_utilization_claim_files": [str(tmp_path / "claims.yaml")],
    }


@pytest.mark.slow
def test_the_placement_starts_from_the_utilization_measured_in_the_same_run(tmp_path):
    # the claims, utilization and placement stages in one ansible-playbook run (as site.yml runs them)
    plays = ("claims.yml", "utilization.yml", "placement.yml")
    inventory, play = setup(tmp_path, plays=plays, **held_nic_files(tmp_path))
    proc = run_playbook(inventory, play)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the files source's DeviceClasses are the claims stage's (the render runs when the stage runs alone,
    # test_teams_role); the claim below is counted under its class with them
    assert task_results(proc.stdout, "aligned.dra.utilization : Measure | Render the site's DeviceClasses") == [
        "skipping"
    ]
    site = tmp_path / "out" / "west"
    measured = json.loads((site / "utilization.json").read_text())
    assert [(row["node"], row["devices"]) for row in measured["allocations"]] == [
        ("gpu-00", {"aligned-nic": ["nic-0000-12-00-0"]})
    ]
    document = json.loads((site / "jobs.json").read_text())
    assert document["free_devices"] == "utilization"
    placed = {job["name"]: job for job in document["jobs"]}
    sweep, sweep_rack = placed["sweep"], placed["sweep-rack"]
    # gpu-00 holds no rail-0 worker now: one fewer than the empty site's 16, rack r1 one fewer than its 4
    assert sweep["capacity"]["site"] == 15 and sweep["capacity"]["nodes"] == {"1": 15, "0": 1}
    assert sweep["capacity"]["domains"]["r1"] == 3 and "gpu-00" not in {w["node"] for w in sweep["workers"]}
    assert sweep_rack["reason"].startswith("no rack holds 6 workers: the most is rack r2 with 4 (rails [0])")
    # pretrain's eight rails fit on every other node of rack r1
    assert placed["pretrain"]["capacity"]["domains"]["r1"] == 3


RENDER_CATALOGUE = "aligned.dra.placement : Jobs | Render the site's claim catalogue"


def task_results(stdout: str, task: str) -> list[str]:
    """The first word of each host line (ok, skipping, changed, ...) under every TASK header starting with ``task``."""
    found, inside = [], False
    for line in stdout.splitlines():
        if line.startswith("TASK ["):
            inside = line.startswith(f"TASK [{task}")
        elif inside and line.split(":")[0] in ("ok", "skipping", "changed", "failed", "fatal"):
            found.append(line.split(":")[0])
    return found


@pytest.mark.slow
def test_the_catalogue_the_claims_stage_rendered_in_the_same_run_is_not_rendered_again(tmp_path):
    # site.yml's order: the claims stage renders and validates the catalogue, the placement stage takes it
    inventory, play = setup(tmp_path / "site", plays=("claims.yml", "placement.yml"))
    both = run_playbook(inventory, play)
    assert both.returncode == 0, both.stdout + both.stderr
    assert task_results(both.stdout, RENDER_CATALOGUE) == ["skipping"]
    # the placement alone renders it itself, and places and renders the jobs the same
    inventory, play = setup(tmp_path / "alone")
    alone = run_playbook(inventory, play)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert task_results(alone.stdout, RENDER_CATALOGUE) == ["ok"]
    site, alone_site = tmp_path / "site" / "out" / "west", tmp_path / "alone" / "out" / "west"
    assert (site / "jobs.json").read_text() == (alone_site / "jobs.json").read_text()
    files = sorted(p.name for p in (site / "jobs").iterdir())
    assert files == sorted(p.name for p in (alone_site / "jobs").iterdir())
    assert all((site / "jobs" / name).read_text() == (alone_site / "jobs" / name).read_text() for name in files)


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


@pytest.mark.slow
def test_labels_in_check_mode_show_the_diff_and_change_nothing(api, tmp_path):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    settings = {"aligned_dra_placement_apply": True, "aligned_dra_placement_kubeconfig": str(kubeconfig)}
    inventory, play = setup(tmp_path, jobs=[], **settings)
    before = api.list("nodes")
    owners = {host: api.label_owners.of(("nodes", "", host)) for host in HOSTS}
    checked = run_playbook(inventory, play, "--check", "--diff")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    out = " ".join(checked.stdout.split())
    # the API server's dry-run answer, node by node: the keys of the levels and the site, the others kept
    assert "west: labels of 16 nodes would change (check mode): gpu-00 [aligned.dev/block: - -> b1," in out
    assert "gpu-09 [aligned.dev/block: - -> b2, aligned.dev/rack: - -> r3, aligned.dev/site: - -> west];" in out
    assert "team" not in out.split("would change (check mode)")[1].split("TASK")[0]
    assert api.list("nodes") == before
    assert all(api.label_owners.of(("nodes", "", host)) == owners[host] for host in HOSTS)


# The jobs' objects for 1.36 with the gang gates, by the fake server's plural; every one is named like its job.
JOB_PLURALS = ("workloads", "podgroups", "services", "jobs")


def job_objects(api: FakeApiServer) -> dict[tuple[str, str], dict]:
    """Every object of the jobs' kinds the fake server stores, by (plural, name)."""
    return {(plural, obj["metadata"]["name"]): obj for plural in JOB_PLURALS for obj in api.list(plural)}


@pytest.mark.slow
def test_jobs_that_fit_are_created_group_objects_first_and_once(api, tmp_path):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    # an object of the job the cluster has already, not as the role renders it: left as it is
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "pretrain", "namespace": "default"}}
    kept = api.create(dict(service, spec={"clusterIP": "None", "selector": {"app": "other"}}))
    settings = {"aligned_dra_jobs_apply": True, "aligned_dra_placement_kubeconfig": str(kubeconfig)}
    # pretrain fits, sweep-rack does not; no GitOps files (the objects come from the jobs module's answer)
    inventory, play = setup(tmp_path, jobs=[JOBS[0], JOBS[2]], aligned_dra_jobs_write=False, **settings)
    created = "pretrain-workload.yaml, pretrain-podgroup.yaml, pretrain-job.yaml"
    unfit = (
        "west: job sweep-rack NOT CREATED (sweep-rack-workload.yaml, sweep-rack-service.yaml, "
        "sweep-rack-podgroup.yaml, sweep-rack-job.yaml): it does not fit on the empty site: "
        "no rack holds 6 workers: the most is rack r1 with 4 (rails [0]); the site holds 16"
    )
    left = "objects of the jobs exist and were left as they are (a changed job must be deleted first)"

    checked = run_playbook(inventory, play, "--check", "--diff")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    out = " ".join(checked.stdout.split())
    assert job_objects(api) == {("services", "pretrain"): kept}
    assert f"west: 3 objects of the jobs would be created (check mode): {created}" in out
    # the dry run's diff of each object, none of the job that does not fit
    diffs = out.split("Jobs | Create the objects the cluster does not have yet")[1].split("TASK [")[0]
    assert [kind for kind in ("Workload", "PodGroup", "Job", "Service") if f"+ kind: {kind} " in diffs] == [
        "Workload",
        "PodGroup",
        "Job",
    ]
    assert "+ name: pretrain " in diffs and "sweep-rack" not in diffs
    assert unfit in out and f"west: 1 {left}: pretrain-service.yaml" in out

    start = len(api.requests)
    first = run_playbook(inventory, play)
    assert first.returncode == 0, first.stdout + first.stderr
    out = " ".join(first.stdout.split())
    assert f"west: 3 objects of the jobs created: {created}" in out
    assert unfit in out and f"west: 1 {left}: pretrain-service.yaml" in out
    stored = job_objects(api)
    assert sorted(stored) == [(plural, "pretrain") for plural in sorted(JOB_PLURALS)]
    assert stored[("services", "pretrain")] == kept
    job = stored[("jobs", "pretrain")]
    assert job["spec"]["completions"] == 2 and job["spec"]["template"]["spec"]["schedulingGroup"] == {
        "podGroupName": "pretrain"
    }
    assert api.label_owners.of(("jobs", "default", "pretrain")) == {
        "aligned.dra (Apply)": sorted(job["metadata"]["labels"])
    }
    # server-side apply, the group objects before the Job (a pod waits for its PodGroup)
    writes = [(method, path.split("/")[-2]) for method, path, _type in api.requests[start:] if method != "GET"]
    assert writes == [("PATCH", "workloads"), ("PATCH", "podgroups"), ("PATCH", "jobs")]

    start = len(api.requests)
    second = run_playbook(inventory, play)
    assert second.returncode == 0, second.stdout + second.stderr
    out = " ".join(second.stdout.split())
    assert [method for method, _path, _type in api.requests[start:] if method != "GET"] == []
    assert job_objects(api) == stored and recap(second.stdout) == {"changed": 0, "failed": 0}
    every = ", ".join(f"pretrain-{kind}.yaml" for kind in ("service", "job", "workload", "podgroup"))
    assert f"west: 4 {left}: {every}" in out
    assert "objects of the jobs created" not in out and unfit in out


# On a KAI site (KAI PodGroups instead of kube-scheduler's gang objects): the demo's KAI site,
# tests/integration/playbooks/test_demo_kai_site.py.


# The same blocks and racks as GKE's node labels publish them (real keys; the values are the hosts' domains).
GKE_LEVELS = [
    {"name": "block", "source": "node_label", "key": "cloud.google.com/gce-topology-block"},
    {"name": "rack", "source": "node_label", "key": "cloud.google.com/gce-topology-subblock"},
]


def test_levels_read_from_node_labels_place_as_the_inventory_and_write_no_label_of_theirs(tmp_path):
    with FakeApiServer(minor="1.36") as api:
        for host, domains in HOSTS.items():
            labels = {"team": "x", GKE_LEVELS[0]["key"]: domains["block"], GKE_LEVELS[1]["key"]: domains["rack"]}
            api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": host, "labels": labels}})
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        settings = {
            "aligned_dra_placement_apply": True,
            "aligned_dra_placement_kubeconfig": kubeconfig,
            "aligned_dra_placement_cluster": {"source": "cluster", "kubeconfig": kubeconfig, "context": "fake"},
        }
        inventory, play = setup(tmp_path, levels=GKE_LEVELS, **settings)
        data = yaml.safe_load(inventory.read_text())
        for host in data["aligned_dra_nodes"]["hosts"].values():
            host.pop("aligned_dra_placement")
        inventory.write_text(yaml.safe_dump(data))
        run = run_playbook(inventory, play)
        assert run.returncode == 0, run.stdout + run.stderr
        out = " ".join(run.stdout.split())
        assert "west: levels block > rack (block, rack read from the cluster, labels used as they are)" in out
        # the cluster's keys are used as they are: only the site label (which Kueue's flavors select) is ours
        assert api.get("nodes", "gpu-09")["metadata"]["labels"] == {
            "team": "x",
            GKE_LEVELS[0]["key"]: "b2",
            GKE_LEVELS[1]["key"]: "r3",
            "aligned.dev/site": "west",
        }
        placed = {job["name"]: job for job in json.loads((tmp_path / "out" / "west" / "jobs.json").read_text())["jobs"]}
        assert placed["pretrain"]["domain"] == {"level": "rack", "name": "r1"}
        assert placed["sweep"]["fits"] and len(placed["sweep"]["domains"]) == 2
        assert placed["sweep-rack"]["reason"].startswith("no rack holds 6 workers: the most is rack r1 with 4")
        # a node whose label is gone is refused by the validation, naming node, level and key, before any change
        labels = dict(api.get("nodes", "gpu-05")["metadata"]["labels"])
        del labels[GKE_LEVELS[1]["key"]]
        api.delete("nodes", "gpu-05")
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-05", "labels": labels}})
        (tmp_path / "out" / "west" / "jobs.json").unlink()
        refused = run_playbook(inventory, play)
        assert refused.returncode != 0
        out = " ".join(refused.stdout.split())
        assert "gpu-05" in out and "cloud.google.com/gce-topology-subblock" in out, out[-3000:]
        assert not (tmp_path / "out" / "west" / "jobs.json").exists()
