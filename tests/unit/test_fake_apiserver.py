# SPDX-License-Identifier: Apache-2.0
"""The strict fake API server, driven through the official kubernetes client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from ansible_collections.aligned.dra.tests.fake_apiserver import (
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
