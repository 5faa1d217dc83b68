# SPDX-License-Identifier: Apache-2.0
"""kubernetes.core.k8s_drain, run by ansible, against the fake API server: what a node rollout meets.

Cordons, evictions and PodDisruptionBudgets through the Python client are
tests/unit/support/fakes/apiserver/test_disruption.py's.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.sites.apiserver_objects import NODE, owner, pdb_obj, pod_obj


@pytest.fixture
def workload():
    """node-a runs web-1 (ReplicaSet) and agent-node-a (DaemonSet); node-b runs web-2."""
    with FakeApiServer(minor="1.35") as api:
        api.create(NODE)
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}})
        web = owner(api, "ReplicaSet", "web", "web")
        agent = owner(api, "DaemonSet", "agent", "agent")
        api.create(pod_obj("web-1", "node-a", web, "web"))
        api.create(pod_obj("web-2", "node-b", web, "web"))
        api.create(pod_obj("agent-node-a", "node-a", agent, "agent"))
        yield api


def k8s_drain(kubeconfig, node: str, state: str) -> subprocess.CompletedProcess:
    args = {
        "kubeconfig": str(kubeconfig),
        "name": node,
        "state": state,
        "delete_options": {"ignore_daemonsets": True, "delete_emptydir_data": True, "wait_timeout": 10},
    }
    return subprocess.run(
        ["ansible", "localhost", "-m", "kubernetes.core.k8s_drain", "-a", json.dumps(args)],
        capture_output=True,
        text=True,
        check=False,
    )


def test_kubernetes_core_k8s_drain_cordons_drains_and_uncordons(workload, tmp_path):
    kubeconfig = workload.write_kubeconfig(tmp_path / "kubeconfig")
    workload.create(pdb_obj("web", "web", minAvailable=1))
    drained = k8s_drain(kubeconfig, "node-a", "drain")
    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert "node node-a marked unschedulable. 1 Pod(s) deleted from node." in drained.stdout
    assert workload.get("nodes", "node-a")["spec"] == {"unschedulable": True}
    assert sorted(p["metadata"]["name"] for p in workload.list("pods")) == ["agent-node-a", "web-2"]
    # node-b's last web pod is protected by the budget: the drain fails and the node stays cordoned
    blocked = k8s_drain(kubeconfig, "node-b", "drain")
    assert blocked.returncode != 0
    assert "Failed to delete pod default/web-2 due to: Cannot evict pod" in blocked.stdout
    assert workload.get("nodes", "node-b")["spec"] == {"unschedulable": True}
    uncordoned = k8s_drain(kubeconfig, "node-a", "uncordon")
    assert uncordoned.returncode == 0 and "marked schedulable" in uncordoned.stdout
    assert workload.get("nodes", "node-a")["spec"] == {}
    assert workload.rejections == [
        (
            "POST",
            "/api/v1/namespaces/default/pods/web-2/eviction",
            429,
            "Cannot evict pod as it would violate the pod's disruption budget.",
        )
    ]
