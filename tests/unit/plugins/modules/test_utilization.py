# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.utilization: recorded files, a cluster (the strict fake API server), JSON written once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims_lib
from ansible_collections.aligned.dra.plugins.modules import utilization
from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer

SET = Path(__file__).resolve().parents[3] / "fixtures" / "utilization" / "ai-lab"
TEAMS = {
    "teams": [
        {"name": "llm-training", "namespaces": ["llm-train"]},
        {"name": "vision-research", "namespaces": ["vision"]},
    ]
}


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        utilization.main()
    return json.loads(capsys.readouterr().out)


def device_classes() -> list[dict]:
    rendered = claims_lib.render({"drivers": ["dra.aligned.dev", "gpu.nvidia.com", "dra.net"]}, "ai-lab", "1.36")
    return [o for o in rendered["objects"] if o["kind"] == "DeviceClass"]


def test_files_with_topologies_write_the_json_once(capsys, tmp_path):
    dest = tmp_path / "utilization.json"
    args = {"site": "ai-lab", "slice_files": [str(SET / "slices.yaml")], "claim_files": [str(SET / "claims.yaml")],
            "classes": device_classes(), "teams": TEAMS, "topology_dir": str(SET / "topologies"),
            "dest": str(dest)}  # fmt: skip
    result = run(capsys, dict(args, _ansible_check_mode=True, _ansible_diff=True))
    assert result["changed"] and "diff" in result and not dest.exists()
    result = run(capsys, args)
    used = result["utilization"]
    assert used["totals"]["published"] == 14 and used["totals"]["allocated"] == 10
    assert used["teams"]["llm-training"]["levels"] == {"PIX": 1, "NODE": 1}
    assert json.loads(dest.read_text()) == used
    assert run(capsys, args)["changed"] is False


def test_from_cluster_reads_slices_claims_and_classes(capsys, tmp_path):
    with FakeApiServer(minor="1.36") as api:
        for obj in device_classes():
            api.create(obj)
        for name in ("slices.yaml", "claims.yaml"):
            for obj in yaml.safe_load((SET / name).read_text())["items"]:
                api.create(obj)
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        result = run(capsys, {"site": "ai-lab", "from_cluster": True, "kubeconfig": str(kubeconfig), "teams": TEAMS})
    used = result["utilization"]
    assert used["classes"]["aligned-gpu"] == {"published": 6, "allocated": 5, "idle": 1, "utilization": 0.833}
    assert used["claims"]["pending"] == 1 and used["claims"]["admin_access_results"] == 2
    # no topologies: levels decided (attributes) or bounded (bound) by pcieRoot and numaNode only
    assert used["alignment"]["level_source"] == ["attributes", "bound"]
    assert used["shared"][0]["capacity"]["memory"]["share"] == 0.75


def test_cluster_errors_and_missing_input_fail(capsys, tmp_path):
    result = run(capsys, {"site": "s", "claim_files": [str(SET / "claims.yaml")]})
    assert result["failed"] and "slices or slice_files" in result["msg"]
    with FakeApiServer(minor="1.36") as api:
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
        api.fail_next("GET", r"resourceslices", code=500)
        result = run(capsys, {"site": "s", "from_cluster": True, "kubeconfig": str(kubeconfig)})
    assert result["failed"] and "cannot list the DRA objects" in result["msg"]


def test_cluster_and_files_together_are_refused(capsys):
    result = run(capsys, {"site": "s", "from_cluster": True, "slice_files": [str(SET / "slices.yaml")]})
    assert result["failed"] and "slice_files cannot be given with it" in result["msg"]


def test_a_broken_node_file_in_topology_dir_fails_on_the_option(capsys, tmp_path):
    (tmp_path / "gpu-01.json").write_text("[")
    result = run(capsys, {"site": "s", "slice_files": [str(SET / "slices.yaml")], "topology_dir": str(tmp_path)})
    assert result["failed"] and result["msg"].startswith(f"topology_dir: cannot read {tmp_path / 'gpu-01.json'}")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"claims": [{"metadata": {"name": "c"}, "status": {"allocation": {"devices": {"results": 5}}}}]},
         "claims[0].status.allocation.devices.results: must be a list"),
        ({"classes": [{"metadata": {"name": "x"}, "spec": 5}]}, "classes[0].spec: must be a mapping (got int)"),
        ({"classes": [{"metadata": {"name": "x"}, "spec": {"selectors": [{"cel": {"expression": "1 +"}}]}}]},
         "classes: "),
    ],
)  # fmt: skip
def test_inputs_of_the_wrong_shape_fail_naming_the_path(capsys, args, message):
    result = run(capsys, dict({"site": "s", "slice_files": [str(SET / "slices.yaml")]}, **args))
    assert result["failed"] and result["msg"].startswith(message)


def test_slices_of_the_wrong_shape_fail_naming_the_path(capsys):
    slices = [{"spec": {"nodeName": "n", "driver": "d", "devices": [{"name": "g", "attributes": 5}]}}]
    result = run(capsys, {"site": "s", "slices": slices})
    assert result["failed"] and result["msg"] == "slices[0].spec.devices[0].attributes: must be a mapping (got int)"


@pytest.mark.parametrize(
    ("teams", "message"),
    [
        ({"teams": "a"}, "aligned_dra_teams.teams must be a list"),
        ({"teams": ["a"]}, "aligned_dra_teams.teams[0] must be a mapping with a name"),
        (
            {"teams": [{"name": "a", "namespaces": "ns"}]},
            "aligned_dra_teams.teams[0].namespaces must be a list of namespace names",
        ),
    ],
)
def test_teams_of_the_wrong_shape_fail_naming_them(capsys, teams, message):
    result = run(capsys, {"site": "s", "slice_files": [str(SET / "slices.yaml")], "teams": teams})
    assert result["failed"] and result["msg"] == message
