# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.jobs: check mode and diff, this run's utilization joined by node name, the site's hosts only,
bounds said where held devices are uncertain, errors that name the input and write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.tests.support.harnesses.jobs_module import run
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import NIC_NAME_RULE, aligned_node

RULE = dict(NIC_NAME_RULE, count=8)
RACKS = {"gpu-01": "r1", "gpu-02": "r1", "gpu-03": "r2", "gpu-04": "r2"}
LEVELS = [{"name": "rack", "label": "aligned.dev/rack"}]
# the Kubernetes node names differ from the inventory hosts: the measurement uses them
PLACEMENT = {
    "levels": LEVELS,
    "domains": {host: {"rack": rack} for host, rack in RACKS.items()},
    "node_names": {host: f"k8s-{host}" for host in RACKS},
    "problems": [],
    "label_objects": [],
}
SWEEP = {
    "name": "sweep",
    "workers": 3,
    "template": "gpu-nic-rail-0",
    "placement": {"level": "rack", "mode": "preferred"},
}


def site(tmp_path: Path, extra_nodes: tuple[str, ...] = ()) -> dict:
    nodes = tmp_path / "nodes"
    nodes.mkdir(exist_ok=True)
    for host in (*RACKS, *extra_nodes):
        (nodes / f"{host}.json").write_text(json.dumps(aligned_node(8)))
    objects = claims.render({}, "west", "1.36", rail_rules={h: RULE for h in RACKS})["objects"]
    return {
        "site": "west",
        "kubernetes_version": "1.36",
        "jobs": [SWEEP],
        "placement": PLACEMENT,
        "objects": objects,
        "topology_dir": str(nodes),
        "rail_rules": {host: RULE for host in (*RACKS, *extra_nodes)},
        "dest": str(tmp_path / "jobs.json"),
    }


def test_check_mode_predicts_then_jobs_json_is_written_once(capsys, tmp_path):
    args = site(tmp_path)
    dest = Path(args["dest"])
    checked = run(capsys, dict(args, _ansible_check_mode=True, _ansible_diff=True))
    assert checked["changed"] and checked["diff"]["before"] == "" and not dest.exists()
    written = run(capsys, dict(args, _ansible_diff=True))
    assert written["changed"] and json.loads(dest.read_text()) == written["placement"] == checked["placement"]
    (sweep,) = written["placement"]["jobs"]
    assert sweep["fits"] and [d["workers"] for d in sweep["domains"]] == [2, 1]
    assert written["placement"]["free_devices"] == "empty site"
    assert written["placement"]["domains_of_nodes"] == {
        "levels": ["rack"],
        "nodes": {"gpu-01": ["r1"], "gpu-02": ["r1"], "gpu-03": ["r2"], "gpu-04": ["r2"]},
    }
    assert {f["name"] for f in written["files"]} >= {"sweep-job.yaml", "sweep-service.yaml"}
    again = run(capsys, dict(args, _ansible_diff=True))
    assert again["changed"] is False and "diff" not in again


def test_the_measurement_is_joined_by_kubernetes_node_name(capsys, tmp_path):
    args = site(tmp_path)
    measured = tmp_path / "utilization.json"
    # rail 0's NIC of two nodes is held: one rack holds no rail-0 worker, the site two
    held = [{"claim": f"ns/c{i}", "node": f"k8s-gpu-0{i}", "devices": {"nic": ["nic-0000-12-00-0"]}} for i in (1, 2)]
    measured.write_text(json.dumps({"allocations": held}))
    result = run(capsys, dict(args, utilization_file=str(measured)))
    (sweep,) = result["placement"]["jobs"]
    assert result["placement"]["free_devices"] == "utilization"
    assert not sweep["fits"] and "holds 2 of 3 workers" in sweep["reason"]


def test_held_devices_of_no_one_node_make_the_figures_bounds(capsys, tmp_path):
    args = site(tmp_path)
    measured = tmp_path / "utilization.json"
    measured.write_text(json.dumps({"allocations": [{"claim": "ns/x", "node": None, "devices": {"nic": ["n"]}}]}))
    result = run(capsys, dict(args, utilization_file=str(measured)))
    assert result["placement"]["held_spanning"] == 1
    (sweep,) = result["placement"]["jobs"]
    assert sweep["capacity_exact"] is False


def test_a_topology_of_a_host_not_in_the_site_is_not_placed_on(capsys, tmp_path):
    args = site(tmp_path, extra_nodes=("gone-01",))
    result = run(capsys, dict(args, jobs=[dict(SWEEP, workers=4, placement=None)]))
    (sweep,) = result["placement"]["jobs"]
    assert sweep["fits"] and {w["node"] for w in sweep["workers"]} == set(RACKS)
    five = run(capsys, dict(args, jobs=[dict(SWEEP, workers=5, placement=None)]))
    assert not five["placement"]["jobs"][0]["fits"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"placement": dict(PLACEMENT, problems=["gpu-01: no rack"])}, "placement: gpu-01: no rack"),
        ({"jobs": [dict(SWEEP, template="gpu-nic-rail-9")]}, "'gpu-nic-rail-9' is not a claim template"),
        ({"jobs": [dict(SWEEP, placement={"level": "row"})]}, "placement.level: 'row' is not a level of the site"),
        ({"utilization_file": "/nonexistent/utilization.json"}, "utilization_file: cannot read"),
    ],
)
def test_bad_input_names_the_option_and_writes_nothing(capsys, tmp_path, change, message):
    args = dict(site(tmp_path), **change)
    result = run(capsys, args, fails=True)
    assert message in result["msg"]
    assert not Path(args["dest"]).exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"placement": dict(PLACEMENT, domains={"gpu-01": "r1"})}, "placement.domains: must map each host"),
        ({"placement": dict(PLACEMENT, node_names=["k8s-gpu-01"])}, "placement.node_names: must map each host"),
        ({"feature_gates": {"GangSchedulin": True}}, "feature_gates: unknown gate 'GangSchedulin'"),
        ({"teams_settings": {"teams": [{"name": "t", "namespaces": "ml"}]}}, "aligned_dra_teams.teams[0].namespaces"),
        ({"teams_settings": {"teams": "t"}}, "aligned_dra_teams.teams: must be a list"),
    ],
)
def test_input_of_the_wrong_shape_names_the_field(capsys, tmp_path, change, message):
    args = dict(site(tmp_path), **change)
    assert message in run(capsys, args, fails=True)["msg"]
    assert not Path(args["dest"]).exists()


def test_a_measurement_row_of_the_wrong_shape_names_the_row(capsys, tmp_path):
    measured = tmp_path / "utilization.json"
    measured.write_text(json.dumps({"allocations": [{"node": "k8s-gpu-01", "devices": {"gpu": 5}}]}))
    result = run(capsys, dict(site(tmp_path), utilization_file=str(measured)), fails=True)
    assert "utilization_file: allocations[0].devices" in result["msg"]
