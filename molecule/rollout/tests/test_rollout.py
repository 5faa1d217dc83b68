# SPDX-License-Identifier: Apache-2.0
"""From the controller: a VF change rolled one node at a time stops at the node that fails verification.

The tests run in file order and build on each other. Converge rolled the
baseline (2 VFs) through all three nodes; here 4 VFs are rolled with
``serial: 1``. roll-node2's fake kernel drops any count above 2 a second after
creating it (test fault), so roll-node2 passes the apply step and fails the
verification after it: the run must fail naming roll-node2, roll-node1 must be
done and uncordoned, roll-node2 cordoned and drained (its DaemonSet pod left),
roll-node3 untouched (its VFs, its Node object and its pods as they were).
The Nodes and Pods are read from the strict fake API server over HTTP with the
scenario's kubeconfig. Then the fault goes away and the same command finishes
the rollout.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import kubernetes
import pytest
import testinfra

PROJECT = os.environ["MOLECULE_PROJECT_DIRECTORY"]
EPHEMERAL = os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]
INVENTORY = os.path.join(EPHEMERAL, "inventory")
KUBECONFIG = os.path.join(EPHEMERAL, "apiserver", "kubeconfig")
PF = "/fixture/sys/bus/pci/devices/0000:01:00.0"
NODES = ("roll-node1", "roll-node2", "roll-node3")
OUTPUT = Path(PROJECT) / "tests" / "output" / "rollout"
ROLLOUT = {"aligned_dra_sriov_pfs": [{"pci_address": "0000:01:00.0", "numvfs": 4}], "aligned_dra_network_serial": 1}


def rollout() -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["ANSIBLE_COLLECTIONS_PATH"] = os.path.join(PROJECT, ".cache", "collections")
    env.setdefault("ANSIBLE_CONFIG", os.path.join(PROJECT, "ansible.cfg"))
    env.update(ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_PIPELINING="1")
    cmd = [
        "ansible-playbook",
        "-i",
        INVENTORY,
        os.path.join(PROJECT, "playbooks", "network.yml"),
        "-e",
        json.dumps(ROLLOUT),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    # Task errors go to stderr; the YAML callback wraps long messages.
    proc.output = " ".join((proc.stdout + proc.stderr).split())
    return proc


def node(name: str):
    return testinfra.get_host(f"podman://{name}")


def numvfs(name: str) -> int:
    return int(node(name).file(f"{PF}/sriov_numvfs").content_string.strip())


def virtfns(name: str) -> int:
    result = node(name).run(f"ls {PF} | grep -c '^virtfn' || true")
    return int(result.stdout.strip() or 0)


@pytest.fixture(scope="module")
def core():
    client = kubernetes.config.new_client_from_config(config_file=KUBECONFIG)
    yield kubernetes.client.CoreV1Api(client)
    client.close()


def cordoned(core, name: str) -> bool:
    return bool(core.read_node(name).spec.unschedulable)


def pods_on(core, name: str) -> list[str]:
    return sorted(
        p.metadata.name for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name}").items
    )


def start_web_pod(core, name: str) -> None:
    """A running pod of a ReplicaSet on node ``name``, written as a client and the kubelet would."""
    apps = kubernetes.client.AppsV1Api(core.api_client)
    app = f"web2-{name}"
    owner = apps.create_namespaced_replica_set(
        "default",
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": app},
            "spec": {
                "selector": {"matchLabels": {"app": app}},
                "template": {
                    "metadata": {"labels": {"app": app}},
                    "spec": {"containers": [{"name": "c", "image": "pause"}]},
                },
            },
        },
    )
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": app,
            "labels": {"app": app},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": app,
                    "uid": owner.metadata.uid,
                    "controller": True,
                }
            ],
        },
        "spec": {"nodeName": name, "containers": [{"name": "c", "image": "pause"}]},
    }
    core.create_namespaced_pod("default", pod)
    core.patch_namespaced_pod_status(
        app, "default", {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    )


def test_baseline_was_rolled_through_every_node(core):
    for name in NODES:
        assert (numvfs(name), virtfns(name)) == (2, 2), name
        assert not cordoned(core, name), name
        # converge drained each node in turn: the ReplicaSet pods were evicted, the DaemonSet's stay
        assert pods_on(core, name) == [f"node-agent-{name}"], name


@pytest.fixture(scope="module")
def stopped(core):
    for name in NODES:
        start_web_pod(core, name)
    before = core.read_node("roll-node3").metadata.resource_version
    proc = rollout()
    # Kept for reading (docs/network.md shows what a stopped rollout looks like).
    OUTPUT.mkdir(parents=True, exist_ok=True)
    (OUTPUT / "stopped.txt").write_text(proc.stdout + proc.stderr)
    return proc, before


def test_the_rollout_stops_at_the_node_that_fails_verification(stopped):
    proc, _before = stopped
    assert proc.returncode != 0, proc.output
    assert "SR-IOV verification failed on roll-node2: still to do sriov_numvfs=4." in proc.output
    assert "The node stays cordoned." in proc.output
    # serial 1, max_fail_percentage 0: never reached (the validation play before it only probed, read-only)
    network = proc.output.split("PLAY [Configure RDMA and SR-IOV on every GPU/RDMA node]", 1)[1]
    assert "[roll-node3]" not in network  # no task ran there (the recap still lists it)


def test_the_first_node_is_done_and_uncordoned(core, stopped):
    assert (numvfs("roll-node1"), virtfns("roll-node1")) == (4, 4)
    assert not cordoned(core, "roll-node1")
    assert pods_on(core, "roll-node1") == ["node-agent-roll-node1"]


def test_the_failed_node_stays_cordoned_and_drained(core, stopped):
    assert cordoned(core, "roll-node2")
    # the PF lost its VFs after the apply step (the test fault): what verification caught
    assert (numvfs("roll-node2"), virtfns("roll-node2")) == (0, 0)
    assert pods_on(core, "roll-node2") == ["node-agent-roll-node2"]


def test_the_third_node_is_untouched(core, stopped):
    _proc, before = stopped
    assert (numvfs("roll-node3"), virtfns("roll-node3")) == (2, 2)
    assert not cordoned(core, "roll-node3")
    assert core.read_node("roll-node3").metadata.resource_version == before  # never written
    assert pods_on(core, "roll-node3") == ["node-agent-roll-node3", "web2-roll-node3"]


def test_the_same_command_finishes_the_rollout_once_the_node_is_fixed(core, stopped):
    fixed = node("roll-node2").run(
        "sed -i 's/ --drop-vfs-above.*$//' /etc/systemd/system/fake-sriov-kernel.service"
        " && systemctl daemon-reload && systemctl restart fake-sriov-kernel.service"
    )
    assert fixed.rc == 0, fixed.stderr
    proc = rollout()
    assert proc.returncode == 0, proc.output
    # the node finished before the stop is planned, found converged and left out of the rollout:
    # neither drained nor changed again; the two others roll
    # one play header per batch (serial 1)
    batches = [
        part.split("PLAY [", 1)[0]
        for part in proc.output.split("PLAY [Configure RDMA and SR-IOV on every GPU/RDMA node]")[1:]
    ]
    rolled = " ".join(batches)
    assert "roll-node1" not in rolled
    assert "[roll-node2" in batches[0] and "[roll-node3" in batches[1], "inventory order"
    for name in NODES:
        assert (numvfs(name), virtfns(name)) == (4, 4), name
        assert not cordoned(core, name), name
        assert pods_on(core, name) == [f"node-agent-{name}"], name
