# SPDX-License-Identifier: Apache-2.0
"""The teams and utilization roles through real ansible-playbook runs (no probe: plan.json is given).

The apply tests send every rendered object (Namespaces, ResourceQuotas,
PriorityClasses, ResourceClaimTemplates; Kueue's and KAI Scheduler's objects)
through kubernetes.core.k8s server-side apply to tests/support/fakes/apiserver/, which
validates it against Kubernetes 1.35's schemas (the schedulers' against their
CRDs) and refuses unknown fields; a second run changes nothing.
"""

from __future__ import annotations

import json
import subprocess
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
    write_inventory,
)

RECORDED = REPO / "tests" / "fixtures" / "utilization" / "ai-lab"
TEAMS = {
    "teams": [
        {"name": "train", "namespaces": ["train-a", "train-b"], "tier": "production",
         "templates": ["gpu-nic-pair-1"], "quotas": {"gpu": 3, "nic": 2}},
        {"name": "mon", "tier": "opportunistic", "admin_access": True, "quotas": {"gpu": 8}},
    ]
}  # fmt: skip


# Engine kueue: the recorded site's team namespaces, each with a GPU quota of 3.
KUEUE = {
    "engine": "kueue",
    "teams": [
        {"name": "llm", "namespaces": ["llm-train"], "tier": "production", "templates": ["gpu-only"],
         "quotas": {"gpu": 3}, "lending_limit": {"gpu": 2}},
        {"name": "vision", "tier": "research", "templates": ["gpu-only"], "quotas": {"gpu": 3},
         "borrowing_limit": {"gpu": 1}},
    ],
}  # fmt: skip


def setup(
    tmp_path: Path,
    teams: dict,
    gpus: int = 8,
    hosts: tuple[str, ...] = ("n1", "n2"),
    plays: tuple[str, ...] = ("teams.yml", "utilization.yml"),
    **extra,
) -> tuple[Path, Path]:
    output = tmp_path / "out"
    (output / "west").mkdir(parents=True, exist_ok=True)
    plan = {"schema_version": 1, "classes": {"aligned-gpu": {"devices": gpus}, "aligned-nic": {"devices": 4}}}
    (output / "west" / "plan.json").write_text(json.dumps(plan))
    variables = {
        "aligned_dra_output_dir": str(output),
        "aligned_dra_site": "west",
        "aligned_dra_kubernetes_version": "1.35",
        "aligned_dra_teams": teams,
        **extra,
    }
    inventory = write_inventory(tmp_path / "hosts.yml", hosts, variables)
    play = write_imports(tmp_path / "play.yml", [PLAYBOOKS / name for name in plays])
    return inventory, play


def test_writes_teams_shows_quotas_and_is_idempotent(tmp_path):
    inventory, play = setup(tmp_path, TEAMS)
    first = run_playbook(inventory, play)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "west: aligned-gpu: guaranteed 6 of 8 devices (ok), opportunistic 8; train 6, mon 8" in " ".join(
        first.stdout.split()
    )
    assert "no utilization source" in first.stdout
    out = tmp_path / "out" / "west"
    files = sorted(p.name for p in (out / "teams").iterdir())
    assert "quota-train-b-aligned-dra-devices.yaml" in files and "namespace-mon.yaml" in files
    assert "claimtemplate-mon-aligned-gpu-admin-access.yaml" in files
    kustomization = yaml.safe_load((out / "teams" / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == sorted(f for f in files if f != "kustomization.yaml")
    quota = yaml.safe_load((out / "teams" / "quota-train-a-aligned-dra-devices.yaml").read_text())
    assert quota["spec"]["hard"] == {
        "aligned-gpu.deviceclass.resource.k8s.io/devices": "3",
        "aligned-nic.deviceclass.resource.k8s.io/devices": "2",
    }
    assert json.loads((out / "teams.json").read_text())["capacity"][0]["status"] == "ok"
    assert not (out / "utilization.json").exists()
    second = run_playbook(inventory, play)
    assert second.returncode == 0 and recap(second.stdout)["changed"] == 0, second.stdout


def test_quota_above_capacity_is_refused_before_anything_is_written(tmp_path):
    inventory, play = setup(tmp_path, TEAMS, gpus=5)
    result = run_playbook(inventory, play)
    assert result.returncode != 0
    assert "guaranteed quotas add up to 6 devices, the site has 5" in result.stdout
    assert not (tmp_path / "out" / "west" / "teams").exists()
    assert not (tmp_path / "out" / "west" / "teams.json").exists()


def test_a_removed_team_loses_its_files_and_utilization_reads_files(tmp_path):
    inventory, play = setup(tmp_path, TEAMS)
    assert run_playbook(inventory, play).returncode == 0
    files = {
        "aligned_dra_utilization_source": "files",
        "aligned_dra_utilization_slice_files": [str(RECORDED / "slices.yaml")],
        "aligned_dra_utilization_claim_files": [str(RECORDED / "claims.yaml")],
    }
    inventory, play = setup(tmp_path, {"teams": TEAMS["teams"][:1]}, **files)
    result = run_playbook(inventory, play)
    assert result.returncode == 0, result.stdout + result.stderr
    names = {p.name for p in (tmp_path / "out" / "west" / "teams").iterdir()}
    assert "namespace-mon.yaml" not in names and "namespace-train-a.yaml" in names
    used = json.loads((tmp_path / "out" / "west" / "utilization.json").read_text())
    assert used["classes"]["aligned-gpu"]["allocated"] == 5 and used["teams"]["(no team)"]["claims"] == 7
    assert "west: aligned-gpu: 5 of 6 allocated, 1 idle" in result.stdout


def test_kueue_engine_writes_queues_the_manager_configuration_and_idle_devices(tmp_path):
    files = {
        "aligned_dra_utilization_source": "files",
        "aligned_dra_utilization_slice_files": [str(RECORDED / "slices.yaml")],
        "aligned_dra_utilization_claim_files": [str(RECORDED / "claims.yaml")],
    }
    # as in site.yml: the utilization stage first, so the teams stage knows what each team holds now
    inventory, play = setup(tmp_path, KUEUE, plays=("utilization.yml", "teams.yml"), **files)
    result = run_playbook(inventory, play)
    assert result.returncode == 0, result.stdout + result.stderr
    out = tmp_path / "out" / "west"
    names = sorted(p.name for p in (out / "teams").iterdir())
    assert "kueue-clusterqueue-llm.yaml" in names and "kueue-localqueue-vision-vision.yaml" in names
    assert not [n for n in names if n.startswith("quota-")]  # engine kueue: no ResourceQuotas
    kustomization = yaml.safe_load((out / "teams" / "kustomization.yaml").read_text())
    assert sorted(kustomization["resources"]) == [n for n in names if n != "kustomization.yaml"]
    configuration = yaml.safe_load((out / "kueue-configuration.yaml").read_text())
    assert configuration["featureGates"]["KueueDRAIntegration"] is True
    assert configuration["resources"]["deviceClassMappings"] == [
        {"name": "aligned.dev/aligned-gpu", "deviceClassNames": ["aligned-gpu"]}
    ]
    used = json.loads((out / "utilization.json").read_text())["teams"]
    rows = {t["name"]: t for t in json.loads((out / "teams.json").read_text())["kueue"]["teams"]}
    # llm holds 2 GPUs of its 3 (recorded claims in llm-train): 1 idle, within its lending limit of 2;
    # vision holds 4, above its 3 (the recorded cluster had no queues): nothing idle
    assert used["llm"]["devices"]["aligned-gpu"] == 2 and used["vision"]["devices"]["aligned-gpu"] == 4
    assert rows["llm"]["idle"] == {"aligned-gpu": 1} and rows["vision"]["idle"] == {"aligned-gpu": 0}
    assert rows["vision"]["borrowable"] == {"aligned-gpu": 1} and rows["llm"]["lendable"] == {"aligned-gpu": 2}
    again = run_playbook(inventory, play)
    assert again.returncode == 0 and recap(again.stdout)["changed"] == 0, again.stdout
    # without a utilization source the old utilization.json says nothing about now: no idle figures
    inventory, play = setup(tmp_path, KUEUE, plays=("teams.yml",))
    assert run_playbook(inventory, play).returncode == 0
    assert (out / "utilization.json").exists()
    rows = json.loads((out / "teams.json").read_text())["kueue"]["teams"]
    assert all("idle" not in row for row in rows)
    # back to ResourceQuotas: the queues and the configuration fragment go
    plain = {"teams": [{k: v for k, v in t.items() if not k.endswith("_limit")} for t in KUEUE["teams"]]}
    inventory, play = setup(tmp_path, plain, plays=("teams.yml",))
    assert run_playbook(inventory, play).returncode == 0
    names = sorted(p.name for p in (out / "teams").iterdir())
    assert not [n for n in names if n.startswith("kueue-")] and "quota-llm-train-aligned-dra-devices.yaml" in names
    assert not (out / "kueue-configuration.yaml").exists()


def test_a_kueue_setting_kueue_cannot_count_is_refused_before_anything_is_written(tmp_path):
    refused = {"engine": "kueue", "teams": [{"name": "mon", "admin_access": True, "quotas": {"gpu": 1}}]}
    inventory, play = setup(tmp_path, refused, plays=("teams.yml",))
    result = run_playbook(inventory, play)
    assert result.returncode != 0
    assert "aligned_dra_teams.teams[mon]" in result.stdout and "admin" in result.stdout
    assert not (tmp_path / "out" / "west" / "teams").exists()
    assert not (tmp_path / "out" / "west" / "kueue-configuration.yaml").exists()


# -- apply to the strict fake API server ---------------------------------------


@pytest.fixture
def api():
    with FakeApiServer(minor="1.35") as server:
        yield server


def run_apply(
    tmp_path: Path, kubeconfig: Path, *args: str, teams: dict | None = None, **extra: object
) -> subprocess.CompletedProcess:
    """playbooks/teams.yml alone on one node, applying to the fake API server."""
    inventory, play = setup(
        tmp_path,
        teams or TEAMS,
        hosts=("n1",),
        plays=("teams.yml",),
        aligned_dra_teams_apply=True,
        aligned_dra_teams_kubeconfig=str(kubeconfig),
        **extra,
    )
    return run_playbook(inventory, play, *args)


PLURALS = {"Namespace": "namespaces", "ResourceQuota": "resourcequotas", "PriorityClass": "priorityclasses",
           "ResourceClaimTemplate": "resourceclaimtemplates", "ClusterQueue": "clusterqueues", "Cohort": "cohorts",
           "LocalQueue": "localqueues", "ResourceFlavor": "resourceflavors",
           "WorkloadPriorityClass": "workloadpriorityclasses", "Topology": "topologies"}  # fmt: skip
# A site with two placement levels, its one node in block b1, rack r1.
PLACED = {
    "aligned_dra_placement_levels": [
        {"name": "block", "label": "aligned.dev/block"},
        {"name": "rack", "label": "aligned.dev/rack"},
    ],
    "aligned_dra_placement": {"block": "b1", "rack": "r1"},
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("teams", "kinds", "extra"),
    [
        (TEAMS, {"Namespace", "ResourceQuota", "PriorityClass", "ResourceClaimTemplate"}, {}),
        # engine both: the ResourceQuotas and Kueue's objects, which the server checks against Kueue's CRDs
        (dict(KUEUE, engine="both"), set(PLURALS) - {"Topology"}, {}),
        # with placement levels: a Topology (Kueue's Topology CRD) that every flavor names
        (dict(KUEUE, engine="both"), set(PLURALS), PLACED),
    ],
    ids=["resourcequota", "both", "both-with-levels"],
)
def test_every_rendered_object_lands_and_a_second_run_changes_nothing(api, tmp_path, teams, kinds, extra):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    first = run_apply(tmp_path, kubeconfig, teams=teams, **extra)
    assert first.returncode == 0, first.stdout + first.stderr
    assert api.rejections == []
    written = [yaml.safe_load(p.read_text()) for p in sorted((tmp_path / "out" / "west" / "teams").glob("*.yaml"))]
    objects = [o for o in written if o.get("kind") != "Kustomization"]
    assert len(objects) >= 6
    plurals = PLURALS
    assert {o["kind"] for o in objects} == kinds
    for obj in objects:
        meta = obj["metadata"]
        stored = api.get(plurals[obj["kind"]], meta["name"], meta.get("namespace", ""))
        assert stored is not None, f"{obj['kind']} {meta['name']} was not applied"
        for key in set(obj) - {"metadata", "status"}:
            assert stored[key] == obj[key], (obj["kind"], meta["name"], key)
        assert (stored["metadata"].get("labels") or {}).items() >= (meta.get("labels") or {}).items()
    namespaces = {ns for t in teams["teams"] for ns in t.get("namespaces") or [t["name"]]}
    assert {n["metadata"]["name"] for n in api.list("namespaces")} >= namespaces
    assert {q["metadata"]["namespace"] for q in api.list("resourcequotas")} == namespaces
    if extra:
        (topology,) = api.list("topologies")
        assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
            "aligned.dev/block",
            "aligned.dev/rack",
            "kubernetes.io/hostname",
        ]
        flavors = api.list("resourceflavors")
        assert flavors and all(f["spec"]["topologyName"] == topology["metadata"]["name"] for f in flavors)
    second = run_apply(tmp_path, kubeconfig, teams=teams, **extra)
    assert second.returncode == 0, second.stdout + second.stderr
    assert recap(second.stdout) == {"changed": 0, "failed": 0}


# Engine kai (four teams, two jobs, applied with check mode and diff): the demo's KAI site,
# tests/integration/playbooks/test_demo_kai_site.py.


@pytest.mark.slow
def test_check_mode_applies_nothing(api, tmp_path):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    proc = run_apply(tmp_path, kubeconfig, "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert api.list("namespaces") == [] and api.list("priorityclasses") == []


def test_a_limited_run_knows_the_rail_templates_of_the_whole_site(tmp_path):
    teams = {"teams": [{"name": "train", "namespaces": ["train-a"], "tier": "production",
                        "templates": ["gpu-nic-rail-7"], "quotas": {"gpu": 1}}]}  # fmt: skip
    inventory, play = setup(tmp_path, teams, plays=("teams.yml",))
    data = yaml.safe_load(inventory.read_text())
    # n1's own rule declares rail 0 only; n2's declares rails 0-7, so the site renders gpu-nic-rail-7
    data["aligned_dra_nodes"]["hosts"] = {
        "n1": {"aligned_dra_rails": {"by": "map", "map": {"0000:1d:00.0": 0}}},
        "n2": {"aligned_dra_rails": {"by": "pci_order", "count": 8}},
    }
    inventory.write_text(yaml.safe_dump(data))
    # the role's own reading of the site (the validation play's cross-host check is skipped here)
    result = run_playbook(inventory, play, "--limit", "n1", "-e", "aligned_dra_validate_done=true")
    assert result.returncode == 0, result.stdout + result.stderr
    written = sorted(p.name for p in (tmp_path / "out" / "west" / "teams").iterdir())
    assert any("gpu-nic-rail-7" in name for name in written), written


def test_mig_quotas_in_gpu_memory_reach_the_kueue_configuration(tmp_path):
    """A site whose hosts run dynamic MIG (their topologies in <site>/nodes/, as the topology role writes
    them): the role hands the MIG settings on, Kueue counts GPU memory through the counter mapping of every
    MIG class, the quota is shown against the site's MIG memory, and above it nothing is written.

    The validation play is skipped (aligned_dra_checks_done, as site.yml's stage playbooks skip it after
    validating): it renders the catalogue without the site's MIG so far and refuses the MIG template."""
    from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

    mig_teams = {
        "engine": "kueue",
        "teams": [
            {"name": "llm", "tier": "production", "templates": ["mig-3g-40gb"], "quotas": {"mig": "160Gi"}},
        ],
    }
    inventory, play = setup(
        tmp_path, mig_teams, hosts=("n1",), plays=("teams.yml",), aligned_dra_kubernetes_version="1.36",
        aligned_dra_mig={"mode": "dynamic"},
    )  # fmt: skip
    nodes = tmp_path / "out" / "west" / "nodes"
    nodes.mkdir(parents=True)
    (nodes / "n1.json").write_text(json.dumps(topology_of("dgx-h100")))
    skip = {"aligned_dra_checks_done": True}
    result = run_playbook(inventory, play, extra_vars=skip)
    assert result.returncode == 0, result.stdout + result.stderr
    line = " ".join(result.stdout.split())
    assert (
        "west: mig.aligned.dev (aligned.dev/mig-memory): nominal 160Gi of 640Gi GPU memory (ok; the most Kueue "
        "charges on the site" in line  # the debug output doubles a quote
    )
    assert "the geometry NVIDIA documents (no NVML reading)); an upper bound" in line
    out = tmp_path / "out" / "west"
    configuration = yaml.safe_load((out / "kueue-configuration.yaml").read_text())
    assert configuration["featureGates"]["KueueDRAIntegrationPartitionableDevices"] is True
    (mapping,) = configuration["resources"]["deviceClassMappings"]
    assert mapping["name"] == "aligned.dev/mig-memory" and "mig-3g-40gb.aligned.dev" in mapping["deviceClassNames"]
    assert mapping["sources"][0]["counter"]["name"] == "memory"
    queue = yaml.safe_load((out / "teams" / "kueue-clusterqueue-llm.yaml").read_text())
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "aligned.dev/mig-memory", "nominalQuota": "160Gi"}
    ]
    assert json.loads((out / "teams.json").read_text())["mig"]["capacity"]["memory"] == "640Gi"
    # above the site's MIG memory: refused, nothing of it written
    mig_teams["teams"][0]["quotas"] = {"mig": "700Gi"}
    inventory, play = setup(
        tmp_path, mig_teams, hosts=("n1",), plays=("teams.yml",), aligned_dra_kubernetes_version="1.36",
        aligned_dra_mig={"mode": "dynamic"},
    )  # fmt: skip
    refused = run_playbook(inventory, play, extra_vars=skip)
    assert refused.returncode != 0
    assert "nominal GPU-memory quotas in cohort add up to 700Gi, the site's MIG GPUs hold 640Gi" in refused.stdout
    assert yaml.safe_load((out / "teams" / "kueue-clusterqueue-llm.yaml").read_text()) == queue
