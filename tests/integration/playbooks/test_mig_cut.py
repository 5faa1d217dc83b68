# SPDX-License-Identifier: Apache-2.0
"""playbooks/mig.yml cut short at each step of a node's rollout, and the next run repairing every node, against
the fake API server (docs/mig.md "The rollout", "Failures and what to do").

Each cut is a real ansible-playbook run killed (SIGKILL, tests/support/harnesses/callbacks/cut_run.py) as the
named task is about to start, on a node of its own: after the cordon, after the GPU clients stopped, after the
verification (the apply done: a cut between the apply and the verification leaves the same), and after the
clients started again (persist's place, before the uncordon).
What each cut leaves is checked against the record the rollout wrote on the Node before each step (annotation
aligned.dra/mig-rollout). A check run then says what it would repair and changes nothing; one run repairs
every node, whatever its plan says (one whose MIG mode went off since included): uncordoned (never the node an admin cordoned before its rollout: it stays
so), its DaemonSet labels at their values before, its units started, its layout made, the record gone (so the
next run has nothing to repair). And a DaemonSet that does not exclude its node label brings its pod back
under a new name (the fake's DaemonSet controller): the wait names the DaemonSet and the change stops before
the apply."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.fakes.systemctl import read_state
from ansible_collections.aligned.dra.tests.support.harnesses.mig_nodes import (
    DCGM,
    EXPORTER_LABEL,
    PAUSE_LABEL,
    RECORD,
    TWO_3G,
    UNITS,
    cluster,
    cluster_site,
    instances,
    node,
)
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    environment,
    run_playbook,
    write_inventory,
)

pytestmark = pytest.mark.slow

CALLBACKS = Path(__file__).resolve().parents[2] / "support" / "harnesses" / "callbacks"
# node: the task at whose start its run is killed
CUTS = {
    "cut-cordoned": "MIG | Stop the node's GPU clients",
    "cut-stopped": "MIG | Apply the layout",
    "cut-verified": "MIG | Start the node's GPU clients again",
    "cut-started": "MIG | Uncordon the node",  # after persist's place (not on a test tree)
}
ADMIN = "cut-cordoned"  # cordoned by an admin before its rollout: it stays cordoned
RUNNING = [DCGM, "dcgm-exporter.service"]  # UNITS that run, in the list's order
BEFORE = {EXPORTER_LABEL: "true"}
PAUSED = {EXPORTER_LABEL: "paused-for-mig-change", PAUSE_LABEL: "paused-for-mig-change"}
STOPPED = {"unschedulable_before": False, "labels": {EXPORTER_LABEL: "true", PAUSE_LABEL: None}, "units": RUNNING}
QUICK = ("--skip-tags", "preflight,validate")  # only the rollout: the site's checks are tested elsewhere


def left(api: FakeApiServer, systemd: Path, name: str) -> tuple[bool, dict, dict | None, dict]:
    """What a node is left with: unschedulable, its labels, its record, its units."""
    stored = api.get("nodes", name)
    record = (stored["metadata"].get("annotations") or {}).get(RECORD)
    units = read_state(systemd)["units"]
    return bool(stored["spec"].get("unschedulable")), stored["metadata"]["labels"], json.loads(record or "null"), units


def test_a_run_cut_at_each_step_is_repaired_by_the_next(tmp_path):
    hosts, states, systemd = {}, {}, {}
    for name in CUTS:
        host, states[name], addresses = node(tmp_path, name, units=dict(UNITS))
        hosts[name] = {**host, "aligned_dra_mig_state_dir": str(tmp_path / name / "etc")}
        systemd[name] = tmp_path / name / "systemd.json"
    converged = {a: [("3g.40gb", 0), ("3g.40gb", 4)] for a in addresses}
    with FakeApiServer(minor="1.35") as api:
        cluster(api, list(hosts))
        merge = {"Content-Type": "application/merge-patch+json"}
        api.handle("PATCH", f"/api/v1/nodes/{ADMIN}", {}, merge, json.dumps({"spec": {"unschedulable": True}}).encode())
        variables = cluster_site(api, tmp_path)
        inventory = write_inventory(tmp_path / "hosts.yml", hosts, variables)

        for name, task in CUTS.items():
            env = environment(
                ANSIBLE_CALLBACK_PLUGINS=str(CALLBACKS), ANSIBLE_CALLBACKS_ENABLED="cut_run", ALIGNED_DRA_CUT_AT=task
            )
            cut = run_playbook(inventory, PLAYBOOKS / "mig.yml", "--limit", f"{name},localhost", *QUICK, env=env)
            assert cut.returncode == -9 and f"CUT: the run is killed at: {task}" in cut.stdout, cut.output
        # what each cut left: every step's undo was recorded before the step
        stopped = {**UNITS, **dict.fromkeys(RUNNING, "inactive")}
        assert left(api, systemd[ADMIN], ADMIN) == (True, BEFORE, {"unschedulable_before": True}, UNITS)
        for name in ("cut-stopped", "cut-verified"):
            assert left(api, systemd[name], name) == (True, PAUSED, STOPPED, stopped), name
        assert left(api, systemd["cut-started"], "cut-started") == (True, BEFORE, STOPPED, UNITS)
        assert instances(states["cut-stopped"], addresses) == {a: [] for a in addresses}
        assert instances(states["cut-verified"], addresses) == converged

        # the collection gave cut-verified's layouts up since (mode off): its GPUs are left as they are, but what
        # the cut run left is put back all the same
        hosts["cut-verified"]["aligned_dra_mig"] = {"mode": "off"}
        inventory = write_inventory(tmp_path / "hosts.yml", hosts, variables)
        # a check run says what each node would repair, and changes nothing
        calls = {name: read_state(systemd[name])["calls"] for name in hosts}
        del api.requests[:]
        check = run_playbook(inventory, PLAYBOOKS / "mig.yml", "--check", "--diff", *QUICK)
        assert check.returncode == 0, check.output
        for name in CUTS:
            assert f"{name}: a rollout of this collection was cut short here" in check.output, check.output
        assert "a run without --check repairs it: uncordon the node, give the node labels their values back" in (
            check.output
        )
        assert [r for r in api.requests if r[0] != "GET"] == []
        assert {name: read_state(systemd[name])["calls"] for name in hosts} == calls

        # the next run repairs every node; the admin's cordon stays
        repair = run_playbook(inventory, PLAYBOOKS / "mig.yml", *QUICK)
        assert repair.returncode == 0, repair.output
        for name in CUTS:
            assert left(api, systemd[name], name) == (name == ADMIN, BEFORE, None, UNITS), name
            assert instances(states[name], addresses) == converged, name
        # units that still ran were not started again; those the cuts left stopped were, once
        for name in ("cut-stopped", "cut-verified"):
            assert read_state(systemd[name])["calls"][-2:] == [["start", DCGM], ["start", "dcgm-exporter.service"]]
        assert read_state(systemd["cut-started"])["calls"] == calls["cut-started"]  # they still ran


def test_a_daemonset_that_brings_its_pod_back_under_a_new_name_stops_the_change(tmp_path):
    host, state, addresses = node(tmp_path, "node-a", units={})
    with FakeApiServer(minor="1.35") as api:
        # the exporter's DaemonSet selects every node: the paused label does not keep it off
        cluster(api, ["node-a"])
        api.run_daemonsets()
        variables = {
            "aligned_dra_mig": {"mode": "static", "mig_configs": TWO_3G, "layout": "two-3g"},
            "aligned_dra_kubeconfig": str(api.write_kubeconfig(tmp_path / "kubeconfig")),
            "aligned_dra_drain_timeout": 10,
            "aligned_dra_mig_gpu_clients_timeout": 1,
            "aligned_dra_mig_gpu_clients": {
                "daemonset_pods": [{"labels": {"app": "nvidia-dcgm-exporter"}, "node_label": EXPORTER_LABEL}],
                "bundled_driver": False,
            },
        }
        inventory = write_inventory(tmp_path / "hosts.yml", {"node-a": host}, variables)
        run = run_playbook(inventory, PLAYBOOKS / "mig.yml", *QUICK)
        assert run.returncode != 0, run.output
        back = re.search(
            r"the DaemonSets gpu-operator/nvidia-dcgm-exporter \(pod (nvidia-dcgm-exporter-\w{5})\)", run.output
        )
        assert back and "keep a pod on the node within 1 s: they do not exclude their node label" in run.output, (
            run.output
        )
        assert back.group(1) != "nvidia-dcgm-exporter-node-a"  # a new pod, not the one deleted
        assert "MIG | Apply the layout" not in run.output
        assert instances(state, addresses) == {a: [] for a in addresses}
        stored = api.get("nodes", "node-a")
        assert stored["spec"]["unschedulable"] is True and stored["metadata"]["labels"] == BEFORE


def test_a_node_not_drained_keeps_its_record_on_the_node(tmp_path):
    """No kubeconfig: the node is not drained and no label is paused, but its units stop; their record is a file
    on the node, and the run after the cut starts them and removes it."""
    host, state, addresses = node(tmp_path, "node-a", units=dict(UNITS))
    systemd, record = tmp_path / "node-a" / "systemd.json", tmp_path / "node-a" / "etc" / "mig-rollout.json"
    variables = {
        "aligned_dra_mig": {"mode": "static", "mig_configs": TWO_3G, "layout": "two-3g"},
        "aligned_dra_mig_state_dir": str(record.parent),
    }
    inventory = write_inventory(tmp_path / "hosts.yml", {"node-a": host}, variables)
    task = "MIG | Apply the layout"
    env = environment(
        ANSIBLE_CALLBACK_PLUGINS=str(CALLBACKS), ANSIBLE_CALLBACKS_ENABLED="cut_run", ALIGNED_DRA_CUT_AT=task
    )
    cut = run_playbook(inventory, PLAYBOOKS / "mig.yml", *QUICK, env=env)
    assert cut.returncode == -9 and f"CUT: the run is killed at: {task}" in cut.stdout, cut.output
    assert json.loads(record.read_text()) == {"units": RUNNING}
    assert oct(record.stat().st_mode & 0o777) == "0o600"
    assert read_state(systemd)["units"] == {**UNITS, **dict.fromkeys(RUNNING, "inactive")}

    repair = run_playbook(inventory, PLAYBOOKS / "mig.yml", *QUICK)
    assert repair.returncode == 0, repair.output
    assert f"node-a: a rollout of this collection was cut short here ({record})" in repair.output
    assert read_state(systemd)["units"] == UNITS and not record.exists()
    assert instances(state, addresses) == {a: [("3g.40gb", 0), ("3g.40gb", 4)] for a in addresses}


def test_an_api_that_refuses_the_nodes_list_or_the_record_changes_nothing(tmp_path):
    """The API server answers 500 to the plan's list of the Nodes (the records read first), then to the record
    written before the cordon: each run stops there, and the node is left as it was (not cordoned, its labels and
    units as they were, no record, no instance made): a step is never taken without its record."""
    host, state, addresses = node(tmp_path, "node-a", units=dict(UNITS))
    systemd = tmp_path / "node-a" / "systemd.json"
    with FakeApiServer(minor="1.35") as api:
        cluster(api, ["node-a"])
        inventory = write_inventory(tmp_path / "hosts.yml", {"node-a": host}, cluster_site(api, tmp_path))
        refusals = (
            ("GET", r"/api/v1/nodes$", "MIG | List the Nodes in Kubernetes for the rollouts' records"),
            ("PATCH", r"/api/v1/nodes/node-a$", "MIG | Write the rollout's record on the Node"),
        )
        for method, path, task in refusals:
            api.fail_next(method, path, code=500, times=20)  # every retry of the client's too
            run = run_playbook(inventory, PLAYBOOKS / "mig.yml", *QUICK)
            api.clear_faults()
            assert run.returncode != 0, run.output
            failed = run.output.split(task, 1)[1].split("TASK [", 1)[0]
            assert "fatal: [node-a" in failed, run.output
            assert left(api, systemd, "node-a") == (False, BEFORE, None, UNITS), task
            assert read_state(systemd)["calls"] == [], task
            assert instances(state, addresses) == {a: [] for a in addresses}, task
