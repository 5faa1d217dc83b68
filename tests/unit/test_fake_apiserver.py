# SPDX-License-Identifier: Apache-2.0
"""The strict fake API server, driven through the official kubernetes client."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import urllib.error
import urllib.request

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from ansible_collections.aligned.dra.tests.fake_apiserver import (
    ApiError,
    FakeApiServer,
    match_label_selector,
    merge,
    qualified_name_problem,
    schema_error,
)

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}


def slice_obj(name: str = "node-a-slice", devices: int = 1, **spec: object) -> dict:
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": "dra.aligned.dev",
            "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-a",
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"resource.kubernetes.io/pciBusID": {"string": "0000:17:00.0"}}}
                for i in range(devices)
            ],
        },
    }
    body["spec"].update(spec)
    return body


def claim_obj(uid_results: list[dict] | None = None) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "claim", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.aligned.dev"}}]}},
        "status": {
            "allocation": {
                "devices": {
                    "results": uid_results
                    or [{"request": "gpu", "driver": "dra.aligned.dev", "pool": "node-a", "device": "gpu-0"}]
                }
            }
        },
    }


@pytest.fixture
def api():
    with FakeApiServer(minor="1.35") as server:
        server.create(NODE)
        yield server


@pytest.fixture
def resource_api(api):
    client = api.api_client()
    yield kubernetes.client.ResourceV1Api(client)
    client.close()


def test_create_list_and_field_selector(api, resource_api):
    resource_api.create_resource_slice(slice_obj())
    resource_api.create_resource_slice(slice_obj("other", nodeName=None, allNodes=True))
    found = resource_api.list_resource_slice(field_selector="spec.nodeName=node-a,spec.driver=dra.aligned.dev")
    assert [item.metadata.name for item in found.items] == ["node-a-slice"]
    assert len(api.list("resourceslices")) == 2


def post(api: FakeApiServer, path: str, body: dict) -> tuple[int, dict]:
    """Raw POST: the kubernetes client itself refuses unknown fields before sending."""
    request = urllib.request.Request(
        api.url + path, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def test_unknown_field_is_refused(api):
    body = slice_obj()
    body["spec"]["devices"][0]["bogus"] = True
    code, answer = post(api, "/apis/resource.k8s.io/v1/resourceslices", body)
    assert code == 422
    assert answer["kind"] == "Status" and answer["reason"] == "Invalid"
    assert "bogus" in answer["message"]
    assert api.list("resourceslices") == []
    assert api.rejections and api.rejections[0][2] == 422


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda s: s["spec"].update(devices=slice_obj(devices=129)["spec"]["devices"]), "at most 128"),
        (lambda s: s["spec"]["devices"][0].update(name="GPU_0"), "DNS label"),
        (lambda s: s["spec"]["devices"][0]["attributes"].update({"bad-name": {"string": "x"}}), "C identifier"),
        (lambda s: s["spec"]["devices"][0]["attributes"].update({"long": {"string": "x" * 65}}), "64"),
        (lambda s: s["spec"]["devices"][0]["attributes"].update({"two": {"string": "x", "int": 1}}), "exactly one"),
        (lambda s: s["spec"]["devices"][0]["attributes"].update({"v": {"version": "1.2"}}), "semantic"),
        (lambda s: s["spec"].update(allNodes=True), "exactly one of nodeName"),
        (lambda s: s["spec"].update(driver="Bad_Driver"), "spec.driver"),
        (
            lambda s: s["spec"]["devices"][0].update(
                attributes={f"a{i}": {"int": i} for i in range(33)},
            ),
            "Too many",
        ),
        (
            lambda s: s["spec"]["devices"][0].update(
                capacity={"memory": {"value": "1Gi", "requestPolicy": {"default": "1Gi"}}}
            ),
            "allowMultipleAllocations",
        ),
    ],
)
def test_dra_limits(resource_api, mutate, needle):
    body = slice_obj()
    mutate(body)
    with pytest.raises(ApiException) as caught:
        resource_api.create_resource_slice(body)
    assert caught.value.status == 422
    assert needle in json.loads(caught.value.body)["message"]


def test_gated_fields_are_dropped_when_the_gate_is_off():
    body = slice_obj()
    body["spec"]["devices"][0].update(
        allowMultipleAllocations=True,
        capacity={"memory": {"value": "80Gi", "requestPolicy": {"default": "1Gi"}}},
    )
    with FakeApiServer(minor="1.35") as old, FakeApiServer(minor="1.36") as new:
        stored_old = old.create(body)["spec"]["devices"][0]
        stored_new = new.create(body)["spec"]["devices"][0]
    assert "allowMultipleAllocations" not in stored_old
    assert "requestPolicy" not in stored_old["capacity"]["memory"]
    assert stored_new["allowMultipleAllocations"] is True
    assert stored_new["capacity"]["memory"]["requestPolicy"] == {"default": "1Gi"}


def tainted_slice(**taint: object) -> dict:
    body = slice_obj()
    body["spec"]["devices"][0]["taints"] = [dict({"key": "dra.aligned.dev/unhealthy", "effect": "NoSchedule"}, **taint)]
    return body


def test_device_taints_are_dropped_without_the_gate_and_kept_with_a_time_with_it():
    with FakeApiServer(minor="1.35") as old, FakeApiServer(minor="1.36") as new:
        assert "taints" not in old.create(tainted_slice(value="gone"))["spec"]["devices"][0]
        (kept,) = new.create(tainted_slice(value="gone"))["spec"]["devices"][0]["taints"]
        assert kept["value"] == "gone" and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", kept["timeAdded"])
        new.delete("resourceslices", "node-a-slice")
        # a time the client sent in another offset form is stored as the API server writes it
        stored = new.create(tainted_slice(timeAdded="2026-11-23T20:41:01+02:00"))["spec"]["devices"][0]["taints"]
        assert stored[0]["timeAdded"] == "2026-11-23T18:41:01Z"


@pytest.mark.parametrize(
    ("taint", "message"),
    [
        ({"key": "not a key"}, "must be a qualified label name"),
        ({"value": "-bad-"}, "must be a label value"),
        ({"effect": "PreferNoSchedule"}, "Unsupported value 'PreferNoSchedule'"),
    ],
)
def test_bad_device_taints_are_refused_where_the_gate_is_on(taint, message):
    with FakeApiServer(minor="1.36") as new:
        with pytest.raises(ApiError, match=message):
            new.create(tainted_slice(**taint))


def device_class(extended_resource_name: str, name: str = "gpu") -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"extendedResourceName": extended_resource_name},
    }


def test_device_class_extended_resource_name_is_checked_and_dropped_when_the_gate_is_off():
    with FakeApiServer(minor="1.35") as old, FakeApiServer(minor="1.36") as new:
        assert "extendedResourceName" not in old.create(device_class("example.com/gpu"))["spec"]
        assert new.create(device_class("example.com/gpu"))["spec"]["extendedResourceName"] == "example.com/gpu"
        for bad in ("gpu", "deviceclass.resource.kubernetes.io/gpu", "requests.example.com/gpu", "example.com/a/b"):
            code, answer = post(new, "/apis/resource.k8s.io/v1/deviceclasses", device_class(bad, "refused"))
            assert code == 422 and "must be a valid extended resource name" in answer["message"], bad


def test_update_conflict_and_immutable_fields(resource_api):
    created = resource_api.create_resource_slice(slice_obj())
    body = slice_obj()
    body["metadata"]["resourceVersion"] = created.metadata.resource_version
    body["spec"]["pool"]["generation"] = 2
    updated = resource_api.replace_resource_slice("node-a-slice", body)
    assert updated.spec.pool.generation == 2
    with pytest.raises(ApiException) as caught:
        resource_api.replace_resource_slice("node-a-slice", body)  # stale resourceVersion
    assert caught.value.status == 409
    body["metadata"].pop("resourceVersion")
    body["spec"]["nodeName"] = "node-b"
    with pytest.raises(ApiException) as caught:
        resource_api.replace_resource_slice("node-a-slice", body)
    assert caught.value.status == 422


def test_dry_run_and_generate_name(api, resource_api):
    body = slice_obj()
    body["metadata"] = {"generateName": "node-a-dra.aligned.dev-"}
    resource_api.create_resource_slice(body, dry_run="All")
    assert api.list("resourceslices") == []
    created = resource_api.create_resource_slice(body)
    assert created.metadata.name.startswith("node-a-dra.aligned.dev-")


def test_status_subresource_and_server_side_apply(api, resource_api):
    api.create(claim_obj())
    status = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "claim", "namespace": "default"},
        "status": {
            "devices": [
                {
                    "driver": "dra.aligned.dev",
                    "pool": "node-a",
                    "device": "gpu-0",
                    "networkData": {"interfaceName": "net1", "ips": ["10.0.0.2/24"]},
                }
            ]
        },
    }
    resource_api.patch_namespaced_resource_claim_status(
        "claim", "default", status, field_manager="test", force=True, _content_type="application/apply-patch+yaml"
    )
    stored = api.get("resourceclaims", "claim", "default")
    assert stored["status"]["devices"][0]["networkData"]["interfaceName"] == "net1"
    assert stored["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-0"
    # a device that is not allocated is refused
    status["status"]["devices"][0]["device"] = "gpu-9"
    with pytest.raises(ApiException) as caught:
        resource_api.patch_namespaced_resource_claim_status(
            "claim", "default", status, field_manager="test", _content_type="application/apply-patch+yaml"
        )
    assert caught.value.status == 422
    # apply without a field manager is refused
    with pytest.raises(ApiException) as caught:
        resource_api.patch_namespaced_resource_claim_status(
            "claim", "default", status, _content_type="application/apply-patch+yaml"
        )
    assert caught.value.status == 422


def test_main_resource_write_keeps_status(api, resource_api):
    api.create(claim_obj())
    resource_api.patch_namespaced_resource_claim(
        "claim", "default", {"metadata": {"labels": {"a": "b"}}}, _content_type="application/merge-patch+json"
    )
    stored = api.get("resourceclaims", "claim", "default")
    assert stored["metadata"]["labels"] == {"a": "b"}
    assert stored["status"]["allocation"]


def test_node_deletion_collects_owned_slices(api, resource_api):
    node = api.get("nodes", "node-a")
    body = slice_obj()
    body["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Node", "name": "node-a", "uid": node["metadata"]["uid"], "controller": True}
    ]
    resource_api.create_resource_slice(body)
    kubernetes.client.CoreV1Api(resource_api.api_client).delete_node("node-a")
    assert api.list("resourceslices") == []


def test_fault_injection_and_not_found(api, resource_api):
    api.fail_next("GET", r"/resourceslices$", code=500)
    with pytest.raises(ApiException) as caught:
        resource_api.list_resource_slice()
    assert caught.value.status == 500
    assert resource_api.list_resource_slice().items == []
    with pytest.raises(ApiException) as caught:
        resource_api.read_namespaced_resource_claim("nope", "default")
    assert caught.value.status == 404


@pytest.mark.parametrize("minor", ["1.34", "1.35", "1.36", "1.37"])
def test_every_minor_validates_a_slice(minor):
    with FakeApiServer(minor=minor) as api:
        assert api.create(slice_obj())["spec"]["pool"]["name"] == "node-a"


def test_helpers():
    assert qualified_name_problem("resource.kubernetes.io/pcieRoot") is None
    assert qualified_name_problem("x" * 33) is not None
    assert match_label_selector({"a": "1"}, "a in (1,2),!b")
    assert not match_label_selector({"a": "1"}, "a notin (1)")
    live = {"status": {"devices": [{"driver": "d", "pool": "p", "device": "x", "data": 1}]}}
    patch = {"status": {"devices": [{"driver": "d", "pool": "p", "device": "y"}]}}
    assert len(merge(live, patch)["status"]["devices"]) == 2


def test_discovery_for_dynamic_clients(api):
    client = api.api_client()
    try:
        groups = kubernetes.client.ApisApi(client).get_api_versions()
        assert groups.groups[0].name == "resource.k8s.io"
        version = kubernetes.client.VersionApi(client).get_code()
        assert version.minor == "35"
    finally:
        client.close()


@pytest.mark.parametrize("minor", ["1.34", "1.37"])
def test_cached_schema_check_agrees_with_kubernetes_validate(minor):
    import kubernetes_validate

    good = slice_obj()
    bad = slice_obj()
    bad["spec"]["devices"][0]["bogus"] = 1
    wrong_type = slice_obj()
    wrong_type["spec"]["pool"]["generation"] = "one"
    assert schema_error(good, minor) is None
    kubernetes_validate.validate(good, f"{minor}.0", strict=True)
    for obj in (bad, wrong_type):
        with pytest.raises(kubernetes_validate.ValidationError) as caught:
            kubernetes_validate.validate(obj, f"{minor}.0", strict=True)
        mine = schema_error(obj, minor)
        assert mine is not None
        assert list(mine.path) == list(caught.value.path)


# -- what a node rollout needs: Pods, evictions, PodDisruptionBudgets, DaemonSet/ReplicaSet owners ----------


def owner(api: FakeApiServer, kind: str, name: str, app: str) -> dict:
    """A stored ReplicaSet or DaemonSet (nothing runs it: it only owns pods)."""
    spec = {
        "selector": {"matchLabels": {"app": app}},
        "template": {"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}},
    }
    return api.create(
        {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"}, "spec": spec}
    )


def pod_obj(name: str, node: str, controller: dict | None, app: str, ready: bool = True) -> dict:
    meta = {"name": name, "namespace": "default", "labels": {"app": app}}
    if controller is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": controller["kind"],
                "name": controller["metadata"]["name"],
                "uid": controller["metadata"]["uid"],
                "controller": True,
            }
        ]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def pdb_obj(name: str, app: str, **spec: object) -> dict:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": app}}, **spec},
    }


@pytest.fixture
def workload(api):
    """node-a runs web-1 (ReplicaSet) and agent-node-a (DaemonSet); node-b runs web-2."""
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}})
    web = owner(api, "ReplicaSet", "web", "web")
    agent = owner(api, "DaemonSet", "agent", "agent")
    api.create(pod_obj("web-1", "node-a", web, "web"))
    api.create(pod_obj("web-2", "node-b", web, "web"))
    api.create(pod_obj("agent-node-a", "node-a", agent, "agent"))
    return api


@pytest.fixture
def core_api(api):
    client = api.api_client()
    yield kubernetes.client.CoreV1Api(client)
    client.close()


def evict(core: kubernetes.client.CoreV1Api, name: str, **kwargs: object) -> None:
    body = kubernetes.client.V1Eviction(metadata=kubernetes.client.V1ObjectMeta(name=name, namespace="default"))
    core.create_namespaced_pod_eviction(name, "default", body, **kwargs)


def test_pods_listed_by_node_and_labels(workload, core_api):
    on_a = core_api.list_pod_for_all_namespaces(field_selector="spec.nodeName=node-a")
    assert sorted(p.metadata.name for p in on_a.items) == ["agent-node-a", "web-1"]
    web_on_a = core_api.list_namespaced_pod("default", field_selector="spec.nodeName=node-a", label_selector="app=web")
    assert [p.metadata.name for p in web_on_a.items] == ["web-1"]
    assert web_on_a.items[0].metadata.owner_references[0].kind == "ReplicaSet"
    assert web_on_a.items[0].status.phase == "Running"
    with pytest.raises(ApiException) as caught:
        core_api.list_pod_for_all_namespaces(field_selector="spec.bogus=x")
    assert caught.value.status == 400 and "field label not supported: spec.bogus" in caught.value.body


def test_pods_are_validated_and_their_spec_is_immutable(workload, core_api):
    body = pod_obj("bad", "node-a", None, "web")
    body["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    code, answer = post(workload, "/api/v1/namespaces/default/pods", body)
    assert code == 422 and "imagePullPolcy" in answer["message"]
    created = core_api.create_namespaced_pod("default", pod_obj("new", "node-a", None, "web"))
    assert created.status.phase == "Pending"  # a client cannot write status on create
    core_api.patch_namespaced_pod("new", "default", {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}})
    assert workload.get("pods", "new", "default")["spec"]["containers"] == [{"name": "c", "image": "busybox:2"}]
    with pytest.raises(ApiException) as caught:
        core_api.patch_namespaced_pod("new", "default", {"spec": {"nodeName": "node-b"}})
    assert caught.value.status == 422 and "pod updates may not change fields" in caught.value.body


def test_controllers_refuse_a_selector_that_misses_the_template(api):
    body = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "template": {
                "metadata": {"labels": {"app": "other"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }
    code, answer = post(api, "/apis/apps/v1/namespaces/default/daemonsets", body)
    assert code == 422 and "does not match template" in answer["message"]


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


def test_discovery_lists_the_rollout_groups(api):
    client = api.api_client()
    try:
        groups = {g.name for g in kubernetes.client.ApisApi(client).get_api_versions().groups}
        assert {"resource.k8s.io", "apps", "policy"} <= groups
        core = kubernetes.client.CoreV1Api(client).get_api_resources()
        eviction = next(r for r in core.resources if r.name == "pods/eviction")
        assert (eviction.group, eviction.version, eviction.kind, eviction.verbs) == (
            "policy",
            "v1",
            "Eviction",
            ["create"],
        )
        assert "poddisruptionbudgets" in {
            r.name for r in kubernetes.client.PolicyV1Api(client).get_api_resources().resources
        }
    finally:
        client.close()


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


def test_daemon_workload_options(api):
    from ansible_collections.aligned.dra.tests.fake_apiserver_daemon import create_workload

    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-b"}})
    create_workload(api, ["node-a", "node-b"], ["node-a/default/web-1"], ["kube-system/agent"])
    pods = {p["metadata"]["name"]: p for p in api.list("pods")}
    assert sorted(pods) == ["agent-node-a", "agent-node-b", "web-1"]
    assert pods["web-1"]["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet"
    assert pods["agent-node-b"]["spec"]["nodeName"] == "node-b"
    assert (
        pods["agent-node-b"]["metadata"]["ownerReferences"][0]["uid"]
        == api.get("daemonsets", "agent", "kube-system")["metadata"]["uid"]
    )
    with pytest.raises(SystemExit, match="NODE/NAMESPACE/NAME"):
        create_workload(api, [], ["web-1"], [])


# -- what the driver role's credentials and the teams role apply ----------------------------------------------


def test_namespaces_default_like_a_real_server_and_take_their_objects_along(api):
    stored = api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert stored["spec"] == {"finalizers": ["kubernetes"]} and stored["status"] == {"phase": "Active"}
    assert stored["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "team-a"}})
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "sa", "namespace": "default"}})
    api.delete("namespaces", "team-a")
    assert [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in api.list("serviceaccounts")] == [
        ("default", "sa")
    ]


def test_secrets_fold_string_data_and_check_base64(api):
    base = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}}
    stored = api.create({**base, "stringData": {"a": "hello"}})
    assert stored["data"] == {"a": "aGVsbG8="} and "stringData" not in stored
    code, answer = post(
        api, "/api/v1/namespaces/default/secrets", {**base, "metadata": {"name": "t"}, "data": {"a": "%%"}}
    )
    assert code == 422 and "illegal base64" in answer["message"]
    client = api.api_client()
    try:
        with pytest.raises(ApiException) as caught:
            kubernetes.client.CoreV1Api(client).patch_namespaced_secret("s", "default", {"type": "Opaque2"})
        assert caught.value.status == 422 and "type: Invalid value: field is immutable" in caught.value.body
    finally:
        client.close()


def test_config_maps_are_served_checked_and_applied_like_a_real_server(api, core_api):
    base = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rails", "namespace": "aligned-dra"}}
    stored = api.create({**base, "data": {"rails.json": "{}\n"}})
    assert "status" not in stored and stored["metadata"]["uid"]
    # the dynamic client (kubernetes.core.k8s) finds it through discovery, and reads it back
    assert core_api.read_namespaced_config_map("rails", "aligned-dra").data == {"rails.json": "{}\n"}
    core_api.patch_namespaced_config_map("rails", "aligned-dra", {"data": {"rails.json": '{"version": 1}\n'}})
    assert api.get("configmaps", "rails", "aligned-dra")["data"] == {"rails.json": '{"version": 1}\n'}
    for body, message in (
        (
            {**base, "metadata": {"name": "k"}, "data": {"a/b": "x"}},
            "data[a/b]: Invalid value: 'a/b': a valid config key",
        ),
        (
            {**base, "metadata": {"name": "b"}, "binaryData": {"k": "%%"}},
            "binaryData[k]: Invalid value: illegal base64",
        ),
        ({**base, "metadata": {"name": "d"}, "data": {"k": "x"}, "binaryData": {"k": "eA=="}}, "duplicate of key"),
        ({**base, "metadata": {"name": "n"}, "data": {"k": 1}}, "ConfigMap data.k"),  # the schema: strings only
        ({**base, "metadata": {"name": "s"}, "data": {"k": "x" * (1024 * 1024)}}, "must have at most 1048576 bytes"),
    ):
        code, answer = post(api, "/api/v1/namespaces/aligned-dra/configmaps", body)
        assert code == 422 and message in answer["message"], answer
    api.create(
        {**base, "metadata": {"name": "frozen", "namespace": "aligned-dra"}, "data": {"k": "x"}, "immutable": True}
    )
    with pytest.raises(ApiException) as caught:
        core_api.patch_namespaced_config_map("frozen", "aligned-dra", {"data": {"k": "y"}})
    assert caught.value.status == 422 and "field is immutable when `immutable` is set" in caught.value.body
    core_api.delete_namespaced_config_map("rails", "aligned-dra")
    assert api.get("configmaps", "rails", "aligned-dra") is None
    assert "configmaps" in [r["name"] for r in core_api.get_api_resources().to_dict()["resources"]]


def test_the_token_controller_fills_service_account_token_secrets(api):
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": {
            "name": "node-a-token",
            "namespace": "aligned-dra",
            "annotations": {"kubernetes.io/service-account.name": "node-a"},
        },
    }
    api.create(secret)
    assert "data" not in api.get("secrets", "node-a-token", "aligned-dra")  # no ServiceAccount yet
    account = api.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "node-a", "namespace": "aligned-dra"}}
    )
    filled = api.get("secrets", "node-a-token", "aligned-dra")
    assert base64.b64decode(filled["data"]["token"]).startswith(b"fake-token.aligned-dra.node-a.")
    assert base64.b64decode(filled["data"]["namespace"]) == b"aligned-dra"
    assert filled["metadata"]["annotations"]["kubernetes.io/service-account.uid"] == account["metadata"]["uid"]
    unnamed = dict(secret, metadata={"name": "x", "namespace": "aligned-dra"})
    code, answer = post(api, "/api/v1/namespaces/aligned-dra/secrets", unnamed)
    assert code == 422 and "service-account.name" in answer["message"]


def test_rbac_admission_policies_and_priority_classes(api):
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "r"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
    }
    api.create(role)
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "r"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
    }
    api.create(binding)
    client = api.api_client()
    try:
        rbac = kubernetes.client.RbacAuthorizationV1Api(client)
        with pytest.raises(ApiException) as caught:
            rbac.patch_cluster_role_binding("r", {"roleRef": {"name": "other"}})
        assert caught.value.status == 422 and "roleRef" in caught.value.body
        scheduling = kubernetes.client.SchedulingV1Api(client)
        scheduling.create_priority_class(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}, "value": 10}
        )
        with pytest.raises(ApiException) as caught:
            scheduling.patch_priority_class("p", {"value": 11})
        assert caught.value.status == 422 and "value: Invalid value: field is immutable" in caught.value.body
        groups = {g.name for g in kubernetes.client.ApisApi(client).get_api_versions().groups}
        assert {"rbac.authorization.k8s.io", "admissionregistration.k8s.io", "scheduling.k8s.io"} <= groups
    finally:
        client.close()
    reserved = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "system-mine"},
        "value": 1,
    }
    code, answer = post(api, "/apis/scheduling.k8s.io/v1/priorityclasses", reserved)
    assert code == 422 and "reserved" in answer["message"]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "v"},
        "spec": {"validations": [{"expression": "true", "mesage": "typo"}]},
    }
    code, answer = post(api, "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", policy)
    assert code == 422 and "mesage" in answer["message"]


def test_kueue_objects_are_checked_against_kueue_crds(api):
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "team"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["aligned.dev/aligned-gpu"],
                    "flavors": [{"name": "f", "resources": [{"name": "aligned.dev/aligned-gpu", "nominalQuota": 4}]}],
                }
            ]
        },
    }
    code, _answer = post(api, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", queue)
    assert code == 201 and api.get("clusterqueues", "team") is not None
    bad = json.loads(json.dumps(queue))
    bad["metadata"]["name"] = "bad"
    bad["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["bogus"] = 1
    code, answer = post(api, "/apis/kueue.x-k8s.io/v1beta2/clusterqueues", bad)
    assert code == 422 and "bogus" in answer["message"] and "Kueue v0.19.2 CRD" in answer["message"]
    assert api.get("clusterqueues", "bad") is None
    # only the served version is routed; discovery names it
    code, _answer = post(api, "/apis/kueue.x-k8s.io/v1/clusterqueues", queue)
    assert code == 404
    client = api.api_client()
    try:
        groups = {
            g.name: g.preferred_version.version for g in kubernetes.client.ApisApi(client).get_api_versions().groups
        }
        assert groups["kueue.x-k8s.io"] == "v1beta2" and groups["resource.k8s.io"] == "v1"
    finally:
        client.close()
