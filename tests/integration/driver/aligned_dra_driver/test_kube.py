# SPDX-License-Identifier: Apache-2.0
"""The driver's API calls against the strict fake API server: clearing a claim's status entries."""

from __future__ import annotations

import pytest
from aligned_dra_driver.kube import ApiError, Kube

from ansible_collections.aligned.dra.tests import driver_harness as h
from ansible_collections.aligned.dra.tests.fake_apiserver import FakeApiServer

STATUS_PATH = r"/resourceclaims/c/status$"
OURS = [{"driver": h.DRIVER, "pool": h.NODE, "device": h.GPU}, {"driver": h.DRIVER, "pool": h.NODE, "device": h.NIC}]
OTHER = {"driver": "gpu.example.com", "pool": "other-pool", "device": "other-0"}


@pytest.fixture
def api():
    with FakeApiServer("1.35") as server:
        yield server


@pytest.fixture
def claim(api):
    obj = h.claim_object("c", [{"request": "gpu", "device": h.GPU}, {"request": "nic", "device": h.NIC}])
    obj["status"]["allocation"]["devices"]["results"].append({"request": "gpu", **OTHER})
    stored = api.create(obj)
    kube = Kube(api.api_client(), h.DRIVER)
    kube.apply_claim_status("default", "c", OURS)
    kube.apply_claim_status("default", "c", [])  # SSA of an empty list keeps them (no ownership in the fake)
    return kube, stored["metadata"]["uid"]


def devices(api):
    return (api.get("resourceclaims", "c", "default").get("status") or {}).get("devices")


def test_only_this_drivers_entries_of_this_pool_go(api, claim):
    kube, uid = claim
    api.store[("resourceclaims", "default", "c")]["status"]["devices"].append(OTHER)
    assert kube.remove_claim_status("default", "c", uid, h.DRIVER, h.NODE) == "cleared"
    assert devices(api) == [OTHER]
    assert kube.remove_claim_status("default", "c", uid, h.DRIVER, h.NODE) == "clean"
    assert api.rejections == []


def test_the_last_entry_going_removes_the_list(api, claim):
    kube, uid = claim
    assert kube.remove_claim_status("default", "c", uid, h.DRIVER, h.NODE) == "cleared"
    assert devices(api) is None


def test_a_conflict_reads_again(api, claim):
    kube, uid = claim
    api.fail_next("PATCH", STATUS_PATH, code=409, times=2)
    assert kube.remove_claim_status("default", "c", uid, h.DRIVER, h.NODE) == "cleared"
    assert devices(api) is None


def test_conflicts_that_do_not_end_are_reported(api, claim):
    kube, uid = claim
    api.fail_next("PATCH", STATUS_PATH, code=409, times=3)
    with pytest.raises(ApiError) as caught:
        kube.remove_claim_status("default", "c", uid, h.DRIVER, h.NODE)
    assert caught.value.status == 409
    assert len(devices(api)) == 2


def test_a_write_between_read_and_patch_is_not_lost(api, claim):
    """The list is replaced whole: the resourceVersion read is a precondition of the patch (409, read again)."""
    kube, uid = claim
    real_get = kube.get_claim
    other_driver = Kube(api.api_client(), "gpu.example.com")

    def get_then_another_driver_writes(namespace, name):
        answer = real_get(namespace, name)
        if not devices(api) or OTHER not in devices(api):
            other_driver.apply_claim_status(namespace, name, [OTHER])
        return answer

    kube.get_claim = get_then_another_driver_writes
    assert kube.remove_claim_status("default", "c", uid, h.DRIVER, h.NODE) == "cleared"
    assert devices(api) == [OTHER]
    assert [code for _method, _path, code, _message in api.rejections] == [409]


def test_a_deleted_or_recreated_claim_is_left_alone(api, claim):
    kube, uid = claim
    assert kube.remove_claim_status("default", "c", "00000000-0000-4000-8000-000000000001", h.DRIVER, h.NODE) == (
        "replaced"
    )
    assert len(devices(api)) == 2
    api.delete("resourceclaims", "c", "default")
    assert kube.remove_claim_status("default", "c", uid, h.DRIVER, h.NODE) == "gone"
