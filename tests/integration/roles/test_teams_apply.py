# SPDX-License-Identifier: Apache-2.0
"""The teams role's apply step through real ansible-playbook runs, against the strict fake API server.

Every rendered object (Namespaces, ResourceQuotas, PriorityClasses,
ResourceClaimTemplates) goes through kubernetes.core.k8s server-side apply to
tests/fake_apiserver.py, which validates it against Kubernetes 1.35's schemas
and refuses unknown fields; a second run changes nothing.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.fake_apiserver import FakeApiServer

REPO = Path(__file__).resolve().parents[3]
TEAMS = {
    "teams": [
        {"name": "train", "namespaces": ["train-a", "train-b"], "tier": "production",
         "templates": ["gpu-nic-pair-1"], "quotas": {"gpu": 3, "nic": 2}},
        {"name": "mon", "tier": "opportunistic", "admin_access": True, "quotas": {"gpu": 8}},
    ]
}  # fmt: skip


@pytest.fixture
def api():
    with FakeApiServer(minor="1.35") as server:
        yield server


def run(tmp_path: Path, kubeconfig: Path, *args: str) -> subprocess.CompletedProcess:
    output = tmp_path / "out"
    (output / "west").mkdir(parents=True, exist_ok=True)
    plan = {"schema_version": 1, "classes": {"aligned-gpu": {"devices": 8}, "aligned-nic": {"devices": 4}}}
    (output / "west" / "plan.json").write_text(json.dumps(plan))
    inventory = {
        "aligned_dra_nodes": {
            "hosts": {"n1": {}},
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                "aligned_dra_output_dir": str(output),
                "aligned_dra_site": "west",
                "aligned_dra_kubernetes_version": "1.35",
                "aligned_dra_teams": TEAMS,
                "aligned_dra_teams_apply": True,
                "aligned_dra_teams_kubeconfig": str(kubeconfig),
            },
        }
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    return subprocess.run(
        ["ansible-playbook", "-i", str(tmp_path / "hosts.yml"), str(REPO / "playbooks" / "teams.yml"), *args],
        capture_output=True,
        text=True,
        check=False,
    )


def recap(stdout: str) -> dict[str, int]:
    return {k: int(v) for k, v in re.findall(r"(changed|failed)=(\d+)", stdout.split("PLAY RECAP")[-1])}


@pytest.mark.slow
def test_every_rendered_object_lands_and_a_second_run_changes_nothing(api, tmp_path):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    first = run(tmp_path, kubeconfig)
    assert first.returncode == 0, first.stdout + first.stderr
    assert api.rejections == []
    written = [yaml.safe_load(p.read_text()) for p in sorted((tmp_path / "out" / "west" / "teams").glob("*.yaml"))]
    objects = [o for o in written if o.get("kind") != "Kustomization"]
    assert len(objects) >= 6
    plurals = {"Namespace": "namespaces", "ResourceQuota": "resourcequotas", "PriorityClass": "priorityclasses",
               "ResourceClaimTemplate": "resourceclaimtemplates"}  # fmt: skip
    assert {o["kind"] for o in objects} <= set(plurals)
    for obj in objects:
        meta = obj["metadata"]
        stored = api.get(plurals[obj["kind"]], meta["name"], meta.get("namespace", ""))
        assert stored is not None, f"{obj['kind']} {meta['name']} was not applied"
        for key in set(obj) - {"metadata", "status"}:
            assert stored[key] == obj[key], (obj["kind"], meta["name"], key)
        assert (stored["metadata"].get("labels") or {}).items() >= (meta.get("labels") or {}).items()
    assert {n["metadata"]["name"] for n in api.list("namespaces")} >= {"train-a", "train-b"}
    quotas = {q["metadata"]["namespace"] for q in api.list("resourcequotas")}
    assert {"train-a", "train-b"} <= quotas
    second = run(tmp_path, kubeconfig)
    assert second.returncode == 0, second.stdout + second.stderr
    assert recap(second.stdout) == {"changed": 0, "failed": 0}


@pytest.mark.slow
def test_check_mode_applies_nothing(api, tmp_path):
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    proc = run(tmp_path, kubeconfig, "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert api.list("namespaces") == [] and api.list("priorityclasses") == []
