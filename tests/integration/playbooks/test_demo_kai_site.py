# SPDX-License-Identifier: Apache-2.0
"""The demo's KAI Scheduler site (inventories/demo, group kai_north) from probe to applied jobs.

Two DGX H100 snapshots, the collection's driver split by kind (GPUs under
``gpu.aligned.dev``), engine ``kai`` with four teams in a department and
two jobs: the stages validate, probe, claims, teams, utilization (the
usage file the demo ships, read from next to the inventory) and placement run with
ansible-playbook against tests/support/fakes/apiserver/ (Kubernetes 1.35's schemas,
KAI Scheduler's kinds from its CRDs, unknown fields refused): check mode
shows the diff and writes nothing to the cluster, the apply lands every
object, and a second run changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    REPO,
    recap,
    run_playbook,
    write_imports,
)

DEMO = REPO / "inventories" / "demo"
STAGES = ("validate.yml", "probe.yml", "claims.yml", "teams.yml", "utilization.yml", "placement.yml")
KAI_KINDS = {
    ("scheduling.run.ai/v2", "Queue"): "queues",
    ("kai.scheduler/v1alpha1", "Topology"): "topologies.kai.scheduler",
    ("scheduling.run.ai/v2alpha2", "PodGroup"): "podgroups.scheduling.run.ai",
}


@pytest.fixture
def api():
    with FakeApiServer(minor="1.35") as server:
        yield server


def run(tmp_path: Path, kubeconfig: Path, *args: str):
    play = write_imports(tmp_path / "stages.yml", [PLAYBOOKS / stage for stage in STAGES])
    settings = {
        "aligned_dra_output_dir": str(tmp_path / "out"),
        "aligned_dra_teams_apply": True,
        "aligned_dra_teams_kubeconfig": str(kubeconfig),
        "aligned_dra_jobs_apply": True,
        "aligned_dra_placement_kubeconfig": str(kubeconfig),
    }
    return run_playbook(DEMO, play, "--limit", "kai_north", *args, extra_vars=settings, cwd=REPO)


def written(tmp_path: Path, stage: str) -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted((tmp_path / "out" / "kai-north" / stage).glob("*.yaml"))]


@pytest.mark.slow
def test_the_demo_kai_site_shows_its_diff_then_lands_whole_and_once(api, tmp_path):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    checked = run(tmp_path, kubeconfig, "--check", "--diff")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert api.list("queues") == [] and api.list("namespaces") == [] and api.list("jobs") == []
    assert "kind: Queue" in checked.stdout and "kind: PodGroup" in checked.stdout  # the dry runs' diffs

    first = run(tmp_path, kubeconfig)
    assert first.returncode == 0, first.stdout + first.stderr
    assert api.rejections == []
    out = tmp_path / "out" / "kai-north"
    # KAI counts every GPU the split driver publishes
    plan = json.loads((out / "plan.json").read_text())
    assert plan["gpu_counts"] == {n: {"published": 8, "counted_by_kai": 8} for n in ("kai-dgx-01", "kai-dgx-02")}
    classes = {o["metadata"]["name"]: o for o in written(tmp_path, "claims") if o["kind"] == "DeviceClass"}
    gpu_selector = " ".join(s["cel"]["expression"] for c in classes.values() for s in c["spec"]["selectors"])
    assert 'device.driver == "gpu.aligned.dev"' in gpu_selector
    # the queue tree, the policies and the Topology, stored as rendered
    objects = written(tmp_path, "teams") + written(tmp_path, "jobs")
    for obj in [o for o in objects if (o.get("apiVersion"), o.get("kind")) in KAI_KINDS]:
        plural, name = KAI_KINDS[(obj["apiVersion"], obj["kind"])], obj["metadata"]["name"]
        stored = api.get(plural, name, obj["metadata"].get("namespace") or "")
        assert stored is not None and stored["spec"] == obj["spec"], name
    queues = {q["metadata"]["name"]: q["spec"] for q in api.list("queues")}
    assert sorted(queues) == ["aligned-kai-north", "aligned-kai-north-llm", "batch", "finetune", "pretrain", "vision"]
    assert queues["finetune"]["resources"]["gpu"] == {"quota": 4, "limit": 8, "overQuotaWeight": 2}
    policies = sorted(p["metadata"]["name"] for p in api.list("validatingadmissionpolicies"))
    assert policies == [f"aligned-kai-north-kai-{p}" for p in ("podgroups", "queues", "scheduler")]
    # each job: a KAI PodGroup on its team's queue, its Job on KAI's scheduler
    groups = {g["metadata"]["name"]: g["spec"] for g in api.list("podgroups.scheduling.run.ai")}
    queues_of_groups = {name: spec["queue"] for name, spec in groups.items()}
    assert queues_of_groups == {"pretrain-2x8": "pretrain", "finetune-sweep": "finetune"}
    assert groups["pretrain-2x8"]["minMember"] == 2
    # kube-scheduler's gang objects are not rendered for a KAI job; the Job skips KAI's pod grouper
    assert api.list("podgroups") == [] and api.list("workloads") == []
    job = {j["metadata"]["name"]: j for j in api.list("jobs")}["pretrain-2x8"]
    assert job["metadata"]["annotations"]["kai.scheduler/skip-podgrouper"] == "true"
    assert job["spec"]["template"]["spec"]["schedulerName"] == "kai-scheduler"
    assert job["spec"]["template"]["metadata"]["annotations"]["pod-group-name"] == "pretrain-2x8"
    assert json.loads((out / "jobs.json").read_text())["gangs"]["pretrain-2x8"]["mechanism"] == "kai"
    # the demo's usage file, read relative to the inventory: used versus allocated per team, and the advice
    usage = json.loads((out / "utilization.json").read_text())["usage"]
    assert usage["teams"]["pretrain"]["gpu_hours"]["idle"] == 12.0 and usage["totals"]["claims_unknown"] == 1
    assert usage["advice"]["inventory_snippet"]["aligned_dra_claims"]["templates"]["fractional_gpu"]["memory"] == "28Gi"
    said = " ".join(first.stdout.split())  # the callback wraps long messages
    assert "kai-north: pretrain: 48.0 GPU-hours allocated, 36.0 active, 12.0 idle, 0.0 unknown; 0 of 8" in said
    assert (
        "kai-north: vision: 6.0 GPU-hours allocated, 6.0 active, 0.0 idle, 0.0 unknown; 1 of 2 claims without "
        "samples (6.0 claim-hours unknown); 6.0 claim-hours of claims of unknown size, not in the GPU-hours"
    ) in said
    teams = json.loads((out / "teams.json").read_text())
    assert (
        sum(teams["kai"]["what_if"]["fair_share"][t]["gpu"] for t in ("pretrain", "finetune", "vision", "batch")) == 16
    )

    second = run(tmp_path, kubeconfig)
    assert second.returncode == 0, second.stdout + second.stderr
    assert recap(second.stdout) == {"changed": 0, "failed": 0}
