# SPDX-License-Identifier: Apache-2.0
"""The kinds the fake API server serves and its store: the jobs resources (Services, batch/v1 Jobs and the
minor's Workload API), the status subresource, dry runs, owners, Namespaces, Secrets, ConfigMaps, RBAC,
PriorityClasses.

The objects are the jobs renderer's golden output per minor (tests/unit/.../controller/jobs/golden),
so what the placement role creates is what the fake is checked with.
"""

from __future__ import annotations

import base64
import copy
import json
import urllib.error
import urllib.request
from pathlib import Path

import kubernetes.client
import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import WORKLOAD_API, FakeApiServer
from ansible_collections.aligned.dra.tests.support.sites.apiserver_objects import claim_obj, post, slice_obj

GOLDEN = Path(__file__).resolve().parents[3] / "plugins" / "module_utils" / "controller" / "jobs" / "golden"
PLURALS = {"Service": "services", "Job": "jobs", "Workload": "workloads", "PodGroup": "podgroups"}


def rendered(minor: str) -> list[dict]:
    """Every object of the golden file of ``minor`` (its render headers left out), renamed so none collide."""
    found = []
    for number, doc in enumerate(yaml.safe_load_all(GOLDEN.joinpath(f"jobs-{minor}.golden").read_text())):
        if isinstance(doc, dict) and doc.get("kind") in PLURALS:
            obj = copy.deepcopy(doc)
            obj["metadata"]["name"] = f"{obj['metadata']['name']}-{number}"
            found.append(obj)
    return found


def path_of(obj: dict) -> str:
    group_version = obj["apiVersion"]
    prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    return f"{prefix}/namespaces/{obj['metadata']['namespace']}/{PLURALS[obj['kind']]}"


def request(api: FakeApiServer, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    sent = urllib.request.Request(
        api.url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(sent) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


@pytest.mark.parametrize("minor", sorted(WORKLOAD_API))
def test_every_rendered_job_object_is_served_for_its_minor(minor):
    objects = rendered(minor)
    kinds = {obj["kind"] for obj in objects}
    assert {"Service", "Job", "Workload"} <= kinds
    with FakeApiServer(minor=minor) as api:
        for obj in objects:
            code, answer = request(api, "POST", path_of(obj), obj)
            assert code == 201, (obj["kind"], obj["metadata"]["name"], answer.get("message"))
        for obj in objects:
            code, answer = request(api, "GET", f"{path_of(obj)}/{obj['metadata']['name']}")
            assert code == 200 and answer["kind"] == obj["kind"]


def test_the_workload_api_is_the_minors_own():
    workload = next(obj for obj in rendered("1.36") if obj["kind"] == "Workload")
    pod_group = next(obj for obj in rendered("1.36") if obj["kind"] == "PodGroup")
    with FakeApiServer(minor="1.35") as api:
        # 1.35 serves v1alpha1 and has no PodGroup resource
        code, answer = request(api, "POST", path_of(workload), workload)
        assert code == 404, answer
        code, answer = request(api, "GET", "/apis/scheduling.k8s.io/v1alpha1/namespaces/default/podgroups")
        assert code == 404, answer
        code, answer = request(api, "GET", "/apis/scheduling.k8s.io/v1alpha1/namespaces/default/workloads")
        assert code == 200 and answer["items"] == []
    with FakeApiServer(minor="1.34") as api:
        code, _answer = request(api, "GET", "/apis/scheduling.k8s.io/v1alpha1/namespaces/default/workloads")
        assert code == 404
    with FakeApiServer(minor="1.36") as api:
        assert request(api, "POST", path_of(pod_group), pod_group)[0] == 201
        # the priority classes of scheduling.k8s.io v1 stay served next to the Workload version
        assert request(api, "GET", "/apis/scheduling.k8s.io/v1/priorityclasses")[0] == 200


def test_job_objects_are_checked_against_the_schema():
    with FakeApiServer(minor="1.37") as api:
        for obj in rendered("1.37"):
            wrong = copy.deepcopy(obj)
            wrong["spec"]["noSuchField"] = 1
            code, answer = request(api, "POST", path_of(wrong), wrong)
            assert code in (400, 422) and "noSuchField" in answer["message"], (obj["kind"], answer)


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
