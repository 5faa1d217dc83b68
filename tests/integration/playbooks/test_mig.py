# SPDX-License-Identifier: Apache-2.0
"""playbooks/mig.yml on two local nodes, each a DGX H100-like sysfs tree whose NVML is the fake one (its
``pynvml.py`` on the node module's PYTHONPATH, through the node's own interpreter wrapper, so each node has
its own GPUs): a check run shows node-a's change with a diff and changes nothing; the rollout changes
node-a only (node-b has the layout already); a re-run changes nothing; a process on one of node-b's
instances refuses a new layout in the plan, naming the GPU, the instance and the process, and no node
changes. One module-scoped site, four ansible-playbook runs in a row; then an Ampere node not drained (no
kubeconfig): its MIG mode needs a GPU reset, which only a drained node's GPUs get, so the GPUs are left as
they are, the node is reported with what to do, and the run fails. Against a cluster (the fake API server), two
nodes and two runs: the Hopper node is drained, its GPU clients (systemd units that run, DaemonSet pods by a node
label) stopped and started again, and uncordoned, and the rollout goes on to the next node; the Ampere node, whose
reset fails, stays cordoned, its clients started again, and the rollout stops; then the first failing node stays
cordoned and the node after it is untouched, while a unit of its that fails to start keeps no other client back
(the run names it) and a DaemonSet label left paused by a run cut short is put back."""

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml
from ansible_collections.aligned.dra.tests.support.fakes.systemctl import read_state
from ansible_collections.aligned.dra.tests.support.harnesses.mig_nodes import (
    DCGM,
    EXPORTER_LABEL,
    PAUSE_LABEL,
    RECORD,
    SEVEN_1G,
    TWO_3G,
    UNITS,
    changed,
    cluster,
    cluster_site,
    gpu_state,
    instances,
    node,
    node_writes,
    pods_on,
)
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    recap,
    run_playbook,
    write_inventory,
)

pytestmark = pytest.mark.slow

HOSTS = ("node-a", "node-b")
PID = 4242


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("mig-site")
    hosts, states = {}, {}
    for name in HOSTS:
        hosts[name], states[name], addresses = node(root, name)
    # node-b has the layout already: MIG on, two 3g.40gb per GPU
    nvml = FakeNvml.from_state_file(states["node-b"])
    for address in addresses:
        nvml.enable_mig(address)
        nvml.create(address, "3g.40gb", start=0)
        nvml.create(address, "3g.40gb", start=4)
    variables = {
        "aligned_dra_site": "lab",
        "aligned_dra_output_dir": str(root / "output"),
        # every GPU is MIG: no fractional template on this site
        "aligned_dra_claims": {"templates": {"fractional_gpu": {"enabled": False}}},
        "aligned_dra_mig": {"mode": "static", "mig_configs": {**TWO_3G, **SEVEN_1G}, "layout": "two-3g"},
    }
    # node-c gave MIG up (mode off said in the inventory): only an earlier boot-time unit would go
    off, states["node-c"], _gpus = node(root, "node-c")
    hosts["node-c"] = {**off, "aligned_dra_mig": {"mode": "off"}}
    # node-d's layouts belong to another tool (configure_nodes false): the same
    mine_no_more, states["node-d"], _gpus = node(root, "node-d")
    static = {"mode": "static", "mig_configs": TWO_3G, "layout": "two-3g", "configure_nodes": False}
    hosts["node-d"] = {**mine_no_more, "aligned_dra_mig": static}
    inventory = write_inventory(root / "hosts.yml", hosts, variables)
    return inventory, states, addresses


def test_check_rollout_rerun_and_a_gpu_in_use(site):
    inventory, states, addresses = site
    converged = {a: [("3g.40gb", 0), ("3g.40gb", 4)] for a in addresses}
    assert instances(states["node-a"], addresses) == {a: [] for a in addresses}

    check = run_playbook(inventory, PLAYBOOKS / "mig.yml", "--check", "--diff")
    assert check.returncode == 0, check.output
    assert "3g.40gb" in check.output  # the diff: node-a's instances to create
    assert instances(states["node-a"], addresses) == {a: [] for a in addresses}

    rollout = run_playbook(inventory, PLAYBOOKS / "mig.yml")
    assert rollout.returncode == 0, rollout.output
    assert re.search(r"MIG \| Apply the layout\] \*+ changed: \[node-a\]", rollout.output), rollout.output
    assert changed(rollout.stdout, "node-b") == 0  # node-b had the layout: it did not roll
    # node-c (mode off) and node-d (configure_nodes false) are visited only to remove a boot-time unit (none
    # on a test host): nothing changes
    given_up = rollout.output.split("PLAY [MIG - no boot-time apply on the nodes whose MIG mode is off]")[1]
    given_up = given_up.split("PLAY [")[0]
    assert "node-c" in given_up and "node-d" in given_up and "node-a" not in given_up, given_up
    for host in ("node-c", "node-d"):
        assert changed(rollout.stdout, host) == 0
        assert instances(states[host], addresses) == {a: [] for a in addresses}
    assert instances(states["node-a"], addresses) == converged == instances(states["node-b"], addresses)

    again = run_playbook(inventory, PLAYBOOKS / "mig.yml")
    assert again.returncode == 0, again.output
    assert recap(again.stdout)["changed"] == 0

    # a process on one of node-b's instances: a new layout is refused in the plan, before any change
    nvml = FakeNvml.from_state_file(states["node-b"])
    busy = next(i for i in nvml.instances(addresses[0]) if i["start"] == 0)
    nvml.run(addresses[0], PID, 1 << 30, gpu_instance=busy["id"])
    seven = {"mode": "static", "mig_configs": {**TWO_3G, **SEVEN_1G}, "layout": "seven-1g"}
    refused = run_playbook(inventory, PLAYBOOKS / "mig.yml", "-e", json.dumps({"aligned_dra_mig": seven}))
    assert refused.returncode != 0, refused.output
    assert addresses[0] in refused.output and str(PID) in refused.output
    assert "MIG | Apply the layout" not in refused.output  # the rollout never started
    assert instances(states["node-a"], addresses) == converged == instances(states["node-b"], addresses)


def test_an_ampere_node_that_needs_a_reset_stops_the_rollout(tmp_path):
    host, state, addresses = node(tmp_path, "node-c", model="A100-SXM4-40GB")
    # MIG mode on, no instances: a layout the validation's documented geometry (the tree's H100 IDs) passes too
    mig = {"mode": "static", "mig_configs": {"mig-on": [{"devices": "all", "mig-enabled": True, "mig-devices": {}}]}}
    variables = {
        "aligned_dra_site": "lab",
        "aligned_dra_output_dir": str(tmp_path / "output"),
        "aligned_dra_claims": {"templates": {"fractional_gpu": {"enabled": False}}},
        "aligned_dra_mig": {**mig, "layout": "mig-on"},
    }
    result = run_playbook(write_inventory(tmp_path / "hosts.yml", {"node-c": host}, variables), PLAYBOOKS / "mig.yml")
    assert result.returncode != 0, result.output
    assert "node-c needs a reboot for the MIG mode of" in result.output and addresses[0] in result.output
    assert "so its GPUs were left as they are: give aligned_dra_kubeconfig" in result.output
    assert "The rollout stops here." in result.output and "MIG | Uncordon the node" not in result.output
    nvml = FakeNvml.from_state_file(state)
    handle = (nvml.nvmlInit(), nvml.nvmlDeviceGetHandleByPciBusId(addresses[0]))[1]
    assert nvml.nvmlDeviceGetMigMode(handle) == [0, 0]  # left as it was: only a drained node's GPUs are reset


# -- against a cluster -------------------------------------------------------------------------------------


def test_the_rollout_against_a_cluster(tmp_path):
    hosts, states, systemd = {}, {}, {}
    for name, model in (("node-a", "H100-SXM5-80GB"), ("node-c", "A100-SXM4-40GB")):
        hosts[name], states[name], addresses = node(tmp_path, name, model=model, units=dict(UNITS))
        systemd[name] = tmp_path / name / "systemd.json"
    with FakeApiServer(minor="1.35") as api:
        cluster(api, list(hosts))
        variables = cluster_site(api, tmp_path)
        inventory = write_inventory(tmp_path / "hosts.yml", hosts, variables)

        # node-a rolls, and the rollout goes on; node-c (Ampere) needs a GPU reset that fails: it stays cordoned,
        # the run stops
        first = run_playbook(inventory, PLAYBOOKS / "mig.yml")
        assert first.returncode != 0, first.output
        converged = {a: [("3g.40gb", 0), ("3g.40gb", 4)] for a in addresses}
        assert instances(states["node-a"], addresses) == converged
        assert re.search(r"MIG \| Apply the layout\] \*+ changed: \[node-a\]", first.output), first.output
        stored = api.get("nodes", "node-a")
        assert not stored["spec"].get("unschedulable")  # uncordoned
        assert stored["metadata"]["labels"] == {EXPORTER_LABEL: "true"}  # the labels as they were
        assert pods_on(api, "node-a") == []  # the exporter and the driver were made to leave (the fake runs no
        # DaemonSet controller to bring them back once the labels are)
        # the units that ran stopped, the last in the list first, and started again in the list's order;
        # the driver's unit was not running: neither stopped nor started
        assert read_state(systemd["node-a"])["calls"] == [
            ["stop", "dcgm-exporter.service"],
            ["stop", "nvidia-dcgm.service"],
            ["start", "nvidia-dcgm.service"],
            ["start", "dcgm-exporter.service"],
        ]
        assert read_state(systemd["node-a"])["units"] == UNITS
        # each pause was a label the DaemonSet excludes, written before its pods were deleted, and put back after
        written = [
            (m, p.split("?")[0]) for m, p, _t in api.requests if m in ("PATCH", "DELETE", "POST") and "node-a" in p
        ]
        # each step recorded on the Node (its annotation RECORD) before it is taken, the record removed at the end
        # (the record's content, and the runs cut after each step: test_mig_cut.py)
        node_a = ("PATCH", "/api/v1/nodes/node-a")
        assert written[-9:] == [
            node_a,  # recorded: not unschedulable before
            node_a,  # cordoned
            node_a,  # recorded: the labels' values before, the units that run
            node_a,  # paused
            ("DELETE", "/api/v1/namespaces/gpu-operator/pods/nvidia-dcgm-exporter-node-a"),
            ("DELETE", "/api/v1/namespaces/aligned-dra/pods/aligned-dra-driver-node-a"),
            node_a,  # put back
            node_a,  # uncordoned
            node_a,  # the record removed
        ], written
        assert RECORD not in stored["metadata"].get("annotations", {})
        assert "node-c needs a reboot for the MIG mode of" in first.output
        assert "It stays cordoned and drained: reboot it (or set aligned_dra_mig_reboot: true)" in first.output
        assert api.get("nodes", "node-c")["spec"].get("unschedulable") is True
        assert api.get("nodes", "node-c")["metadata"]["labels"] == {EXPORTER_LABEL: "true"}
        assert [c[0] for c in read_state(systemd["node-c"])["calls"]] == ["stop", "stop", "start", "start"]
        # the failed node keeps its record: the next run uncordons it once it is done
        assert json.loads(api.get("nodes", "node-c")["metadata"]["annotations"][RECORD]) == {
            "unschedulable_before": False,
            "labels": {EXPORTER_LABEL: "true", PAUSE_LABEL: None},
            "units": [DCGM, "dcgm-exporter.service"],  # those that ran, in the list's order
        }

        # a new layout; node-a's first destroy is refused IN_USE by a client NVML does not list: node-a fails and
        # stays cordoned with its clients started again, node-c (after it) is untouched
        untouched = gpu_state(states["node-c"], addresses)
        nvml = FakeNvml.from_state_file(states["node-a"])
        nvml.inject("nvmlGpuInstanceDestroy", nvml.NVML_ERROR_IN_USE)
        for name in hosts:
            systemd[name].write_text(json.dumps({"units": dict(UNITS), "calls": []}))
        # node-a's host DCGM does not start again; and an earlier run cut short (a host unreachable) left the
        # driver's DaemonSet paused on node-a, with no pod there any more
        systemd["node-a"].write_text(json.dumps({"units": dict(UNITS), "calls": [], "fail_start": [DCGM]}))
        merge = {"Content-Type": "application/merge-patch+json"}
        left_paused = {"metadata": {"labels": {PAUSE_LABEL: "paused-for-mig-change"}}}
        api.handle("PATCH", "/api/v1/nodes/node-a", {}, merge, json.dumps(left_paused).encode())
        del api.requests[:]
        seven = {"mode": "static", "mig_configs": {**TWO_3G, **SEVEN_1G}, "layout": "seven-1g"}
        second = run_playbook(inventory, PLAYBOOKS / "mig.yml", "-e", json.dumps({"aligned_dra_mig": seven}))
        assert second.returncode != 0, second.output
        assert (
            "nvmlGpuInstanceDestroy: " in second.output and "NVML lists no compute process on the GPU" in second.output
        )
        assert api.get("nodes", "node-a")["spec"].get("unschedulable") is True
        # every client got its start: the exporter's unit after DCGM's failed one, and the labels (the one left
        # paused removed, as the node had none); the run names what did not come back
        assert read_state(systemd["node-a"])["calls"] == [
            ["stop", "dcgm-exporter.service"],
            ["stop", DCGM],
            ["start", DCGM],
            ["start", "dcgm-exporter.service"],
        ]
        assert read_state(systemd["node-a"])["units"] == {**UNITS, DCGM: "failed"}
        assert api.get("nodes", "node-a")["metadata"]["labels"] == {EXPORTER_LABEL: "true"}
        assert f"GPU clients that did not come back on node-a: systemd unit {DCGM} (Unable to start" in second.output
        assert "MIG | Uncordon the node" not in second.output
        assert node_writes(api, "node-c") == []
        assert read_state(systemd["node-c"])["calls"] == []
        assert gpu_state(states["node-c"], addresses) == untouched  # its GPUs: MIG mode and instances as they were
