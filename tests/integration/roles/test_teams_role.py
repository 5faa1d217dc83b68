# SPDX-License-Identifier: Apache-2.0
"""The teams and utilization roles through real ansible-playbook runs (no probe: plan.json is given)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
RECORDED = REPO / "tests" / "fixtures" / "utilization" / "ai-lab"
TEAMS = {
    "teams": [
        {"name": "train", "namespaces": ["train-a", "train-b"], "tier": "production",
         "templates": ["gpu-nic-pair-1"], "quotas": {"gpu": 3, "nic": 2}},
        {"name": "mon", "tier": "opportunistic", "admin_access": True, "quotas": {"gpu": 8}},
    ]
}  # fmt: skip


def setup(tmp_path: Path, teams: dict, gpus: int = 8, **extra) -> tuple[Path, Path]:
    output = tmp_path / "out"
    (output / "west").mkdir(parents=True, exist_ok=True)
    plan = {"schema_version": 1, "classes": {"aligned-gpu": {"devices": gpus}, "aligned-nic": {"devices": 4}}}
    (output / "west" / "plan.json").write_text(json.dumps(plan))
    inventory = {
        "aligned_dra_nodes": {
            "hosts": {"n1": {}, "n2": {}},
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                "aligned_dra_output_dir": str(output),
                "aligned_dra_site": "west",
                "aligned_dra_kubernetes_version": "1.35",
                "aligned_dra_teams": teams,
                **extra,
            },
        }
    }
    path = tmp_path / "hosts.yml"
    path.write_text(yaml.safe_dump(inventory))
    play = tmp_path / "play.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {"ansible.builtin.import_playbook": str(REPO / "playbooks" / "teams.yml")},
                {"ansible.builtin.import_playbook": str(REPO / "playbooks" / "utilization.yml")},
            ]
        )
    )
    return path, play


def playbook(inventory: Path, play: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["ansible-playbook", "-i", str(inventory), str(play), *args], capture_output=True, text=True, check=False
    )


def recap_changed(stdout: str) -> int:
    return sum(int(n) for n in re.findall(r"changed=(\d+)", stdout.split("PLAY RECAP")[-1]))


def test_writes_teams_shows_quotas_and_is_idempotent(tmp_path):
    inventory, play = setup(tmp_path, TEAMS)
    first = playbook(inventory, play)
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
    second = playbook(inventory, play)
    assert second.returncode == 0 and recap_changed(second.stdout) == 0, second.stdout


def test_quota_above_capacity_is_refused_before_anything_is_written(tmp_path):
    inventory, play = setup(tmp_path, TEAMS, gpus=5)
    result = playbook(inventory, play)
    assert result.returncode != 0
    assert "guaranteed quotas add up to 6 devices, the site has 5" in result.stdout
    assert not (tmp_path / "out" / "west" / "teams").exists()
    assert not (tmp_path / "out" / "west" / "teams.json").exists()


def test_a_removed_team_loses_its_files_and_utilization_reads_files(tmp_path):
    inventory, play = setup(tmp_path, TEAMS)
    assert playbook(inventory, play).returncode == 0
    files = {
        "aligned_dra_utilization_source": "files",
        "aligned_dra_utilization_slice_files": [str(RECORDED / "slices.yaml")],
        "aligned_dra_utilization_claim_files": [str(RECORDED / "claims.yaml")],
    }
    inventory, play = setup(tmp_path, {"teams": TEAMS["teams"][:1]}, **files)
    result = playbook(inventory, play)
    assert result.returncode == 0, result.stdout + result.stderr
    names = {p.name for p in (tmp_path / "out" / "west" / "teams").iterdir()}
    assert "namespace-mon.yaml" not in names and "namespace-train-a.yaml" in names
    used = json.loads((tmp_path / "out" / "west" / "utilization.json").read_text())
    assert used["classes"]["aligned-gpu"]["allocated"] == 5 and used["teams"]["(no team)"]["claims"] == 7
    assert "west: aligned-gpu: 5 of 6 allocated, 1 idle" in result.stdout
