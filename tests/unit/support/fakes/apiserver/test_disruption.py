# SPDX-License-Identifier: Apache-2.0
"""What a node rollout meets in the fake API server: cordons, evictions, PodDisruptionBudgets.

kubernetes.core.k8s_drain run against it (an ansible process) is
tests/integration/support/fakes/apiserver/test_disruption.py's.
"""

from __future__ import annotations

import json

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from ansible_collections.aligned.dra.tests.support.sites.apiserver_objects import (
    pdb_obj,
    pod_obj,
    post,
)


def evict(core: kubernetes.client.CoreV1Api, name: str, **kwargs: object) -> None:
    body = kubernetes.client.V1Eviction(metadata=kubernetes.client.V1ObjectMeta(name=name, namespace="default"))
    core.create_namespaced_pod_eviction(name, "default", body, **kwargs)


def test_cordon_is_a_strategic_merge_patch_and_false_is_not_stored(api, core_api):
    core_api.patch_node("node-a", {"spec": {"unschedulable": True}})
    assert api.get("nodes", "node-a")["spec"] == {"unschedulable": True}
    assert ("PATCH", "/api/v1/nodes/node-a", "application/strategic-merge-patch+json") in api.requests
    core_api.patch_node("node-a", {"spec": {"unschedulable": False}})
    assert api.get("nodes", "node-a")["spec"] == {}
    assert core_api.read_node("node-a").spec.unschedulable is None


def test_eviction_deletes_the_pod(workload, core_api):
    evict(core_api, "web-1")
    assert workload.get("pods", "web-1", "default") is None
    with pytest.raises(ApiException) as caught:
        evict(core_api, "web-1")
    assert caught.value.status == 404
    evict(core_api, "web-2", dry_run="All")
    assert workload.get("pods", "web-2", "default") is not None


def test_eviction_body_is_checked(workload):
    path = "/api/v1/namespaces/default/pods/web-1/eviction"
    code, answer = post(workload, path, {"metadata": {"name": "web-2", "namespace": "default"}})
    assert code == 400 and "does not match" in answer["message"]
    code, answer = post(
        workload, path, {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-1"}, "x": 1}
    )
    assert code == 422 and "'x'" in answer["message"]
    code, answer = post(workload, "/api/v1/namespaces/default/pods/nope/eviction", {"metadata": {"name": "nope"}})
    assert code == 404
    assert workload.get("pods", "web-1", "default") is not None


def test_disruption_budget_allows_one_then_answers_429(workload, core_api):
    workload.create(pdb_obj("web", "web", minAvailable=1))
    status = workload.get("poddisruptionbudgets", "web", "default")["status"]
    assert (status["disruptionsAllowed"], status["currentHealthy"], status["expectedPods"]) == (1, 2, 2)
    evict(core_api, "web-1")
    assert workload.get("poddisruptionbudgets", "web", "default")["status"]["disruptionsAllowed"] == 0
    with pytest.raises(ApiException) as caught:
        evict(core_api, "web-2")
    assert caught.value.status == 429
    answer = json.loads(caught.value.body)
    assert answer["reason"] == "TooManyRequests"
    assert answer["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert "needs 1 healthy pods and has 1 currently" in answer["details"]["causes"][0]["message"]
    assert workload.get("pods", "web-2", "default") is not None


def test_disruption_budget_percentages_unhealthy_and_overlapping(workload, core_api):
    workload.create(pdb_obj("web", "web", maxUnavailable="50%"))
    status = workload.get("poddisruptionbudgets", "web", "default")["status"]
    assert (status["desiredHealthy"], status["disruptionsAllowed"]) == (1, 1)
    # an unready pod goes without using the budget while the budget holds
    workload.create(pod_obj("web-3", "node-a", None, "web", ready=False))
    evict(core_api, "web-3")
    assert workload.get("poddisruptionbudgets", "web", "default")["status"]["disruptionsAllowed"] == 1
    # a second budget over the same pods: the real server refuses to choose
    workload.create(pdb_obj("web-too", "web", minAvailable=0))
    with pytest.raises(ApiException) as caught:
        evict(core_api, "web-1")
    assert caught.value.status == 500 and "more than one PodDisruptionBudget" in caught.value.body
    code, answer = post(
        workload,
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        pdb_obj("x", "web", minAvailable=1, maxUnavailable=1),
    )
    assert code == 422 and "cannot be both set" in answer["message"]
