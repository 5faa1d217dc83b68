# SPDX-License-Identifier: Apache-2.0
"""The driver's reclaim calls against the strict fake API server: pods read, evicted (a PodDisruptionBudget's
429 is a refusal, not an error) and Events (which the fake does not serve: a failure is one ApiError)."""

from __future__ import annotations

import time

import pytest
from aligned_dra_driver.kube import ApiError, Kube
from aligned_dra_driver.usage.reclaim import event_body

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses import driver as h
from ansible_collections.aligned.dra.tests.support.sites.apiserver_objects import pdb_obj, pod_obj


@pytest.fixture
def api():
    with FakeApiServer("1.36") as server:
        yield server


@pytest.fixture
def kube(api):
    return Kube(api.api_client(), h.DRIVER, timeout=2.0)


def test_an_eviction_deletes_the_pod_and_a_second_finds_it_gone(api, kube):
    uid = api.create(pod_obj("p", h.NODE, None, "train"))["metadata"]["uid"]
    assert kube.get_pod("default", "p")["metadata"]["uid"] == uid
    assert kube.evict_pod("default", "p", uid=uid) == "evicted"
    assert api.get("pods", "p", "default") is None
    assert kube.evict_pod("default", "p", uid=uid) == "gone"
    with pytest.raises(ApiError) as caught:
        kube.get_pod("default", "p")
    assert caught.value.status == 404


def test_a_disruption_budget_refuses_and_the_pod_stays(api, kube):
    uid = api.create(pod_obj("p", h.NODE, None, "train"))["metadata"]["uid"]
    api.create(pdb_obj("train", "train", minAvailable=1))
    assert kube.evict_pod("default", "p", uid=uid) == "refused"
    assert api.get("pods", "p", "default") is not None


def test_other_failures_are_errors_and_the_deadline_bounds_them(api, kube):
    api.create(pod_obj("p", h.NODE, None, "train"))
    api.fail_next("POST", r"/pods/p/eviction$", code=500)
    with pytest.raises(ApiError) as caught:
        kube.evict_pod("default", "p")
    assert caught.value.status == 500
    with pytest.raises(ApiError) as caught:
        kube.evict_pod("default", "p", deadline=time.monotonic())
    assert caught.value.status == 0 and "no time left" in str(caught.value)
    assert api.get("pods", "p", "default") is not None


def test_an_event_the_server_does_not_serve_is_one_api_error(api, kube):
    involved = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "0c6f1fd2-5a3c-4b8e-9d2e-1f2a3b4c5d6e"}
    body = event_body("default", involved, "GPU gpu-0 short of memory", h.DRIVER, h.NODE)
    with pytest.raises(ApiError) as caught:
        kube.create_event("default", body)
    assert caught.value.status == 404  # sent (the client took the body), not served by the fake
    assert any(path == "/api/v1/namespaces/default/events" for _method, path, _ctype in api.requests)
    with pytest.raises(ApiError) as caught:  # a body the client's own check refuses is an ApiError too
        kube.create_event("default", {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}})
    assert caught.value.status == 400


def test_a_refused_write_carries_the_causes_of_the_status(api, kube):
    """A duplicate device name: 422 Invalid, one cause per wrong field, as the real API server answers."""
    devices = [{"name": "gpu-0"}, {"name": "gpu-1"}, {"name": "gpu-0"}]
    pool = {"name": h.NODE, "generation": 1, "resourceSliceCount": 1}
    body = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s-0"},
        "spec": {"driver": h.DRIVER, "nodeName": h.NODE, "pool": pool, "devices": devices},
    }
    with pytest.raises(ApiError) as caught:
        kube.create_slice(body)
    assert caught.value.status == 422 and not caught.value.transient
    assert caught.value.causes == [
        {"field": "spec.devices[2]", "message": 'Duplicate value: "gpu-0"', "reason": "FieldValueDuplicate"}
    ]
    api.fail_next("GET", r"/resourceslices$", code=500)
    with pytest.raises(ApiError) as caught:
        kube.list_slices(h.NODE, h.DRIVER)
    assert caught.value.causes == []  # a Status without details
