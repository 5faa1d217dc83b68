# SPDX-License-Identifier: Apache-2.0
"""The fake API server's checks of a write: strict schemas, the DRA limits, feature gates, kinds' own rules."""

from __future__ import annotations

import json
import re

import kubernetes.client
import pytest
from kubernetes.client.exceptions import ApiException

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import (
    ApiError,
    FakeApiServer,
    match_label_selector,
    merge,
    qualified_name_problem,
    schema_error,
)
from ansible_collections.aligned.dra.tests.support.sites.apiserver_objects import (
    pod_obj,
    post,
    slice_obj,
)


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
