# SPDX-License-Identifier: Apache-2.0
"""The driver's API calls against the strict fake API server: clearing a claim's status entries."""

from __future__ import annotations

import pytest
from aligned_dra_driver.kube import ApiError, Kube

from ansible_collections.aligned.dra.tests.support.harnesses import driver as h

STATUS_PATH = r"/resourceclaims/c/status$"
OURS = [{"driver": h.DRIVER, "pool": h.NODE, "device": h.GPU}, {"driver": h.DRIVER, "pool": h.NODE, "device": h.NIC}]
OTHER = {"driver": "gpu.example.com", "pool": "other-pool", "device": "other-0"}


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


# -- every failure is one ApiError, every request bounded ---------------------------------------------


@pytest.fixture
def proxied(api, tmp_path):
    from aligned_dra_driver.kube import load_client

    from ansible_collections.aligned.dra.tests.support.harnesses.fault_proxy import FaultProxy

    api.create(h.claim_object("c", [{"request": "gpu", "device": h.GPU}]))
    with FaultProxy(api.url) as proxy:
        # load_client as the driver does (retries off): the fault must reach the caller, not be retried away
        kube = Kube(load_client(str(proxy.write_kubeconfig(tmp_path / "kubeconfig"))), h.DRIVER, timeout=1.0)
        yield proxy, kube


@pytest.mark.parametrize(
    ("fault", "status", "needle"),
    [
        (dict(action="reset"), 0, "API server unreachable"),
        (dict(action="close"), 0, "API server unreachable"),
        (dict(action="hang"), 0, "timed out"),
        (dict(action="status", code=503), 503, "503"),
        (dict(action="status", code=500), 500, "500"),
    ],
)
def test_transport_and_server_failures_are_one_transient_api_error(proxied, fault, status, needle):
    proxy, kube = proxied
    rule = proxy.add("GET", r"/resourceclaims/c$", times=1, **fault)
    with pytest.raises(ApiError) as raised:
        kube.get_claim("default", "c")
    assert raised.value.status == status and raised.value.transient and needle in str(raised.value)
    assert "\n" not in str(raised.value) and rule.hits == 1
    proxy.release()
    assert kube.get_claim("default", "c")["metadata"]["name"] == "c"  # and the next call works


def test_a_refused_connection_is_a_transient_api_error(proxied):
    proxy, kube = proxied
    proxy.refuse()
    with pytest.raises(ApiError) as raised:
        kube.get_claim("default", "c")
    assert raised.value.status == 0 and raised.value.transient and "Connection refused" in str(raised.value)
    proxy.accept()
    assert kube.get_claim("default", "c")["metadata"]["name"] == "c"


def test_retry_after_is_read_and_a_refusal_is_not_transient(proxied):
    proxy, kube = proxied
    proxy.add("GET", r"/resourceclaims/c$", "status", code=429, retry_after=7, times=1)
    with pytest.raises(ApiError) as raised:
        kube.get_claim("default", "c")
    assert (raised.value.status, raised.value.retry_after, raised.value.transient) == (429, 7.0, True)
    with pytest.raises(ApiError) as raised:
        kube.get_claim("default", "absent")
    assert raised.value.status == 404 and not raised.value.transient


def test_a_request_is_cut_to_the_callers_deadline(proxied):
    import time

    proxy, kube = proxied
    kube.timeout = 30.0
    proxy.add("GET", r"/resourceclaims/c$", "hang", times=1)
    with pytest.raises(ApiError, match="timed out"):
        kube.get_claim("default", "c", deadline=time.monotonic() + 0.3)  # not the 30 s timeout
    with pytest.raises(ApiError, match="no time left"):
        kube.get_claim("default", "c", deadline=time.monotonic())


def test_a_status_apply_with_the_uid_precondition_never_lands_on_a_recreated_claim(api):
    old = api.create(h.claim_object("r", [{"request": "gpu", "device": h.GPU}]))
    api.delete("resourceclaims", "r", "default")
    api.create(h.claim_object("r", [{"request": "gpu", "device": h.GPU}]))
    kube = Kube(api.api_client(), h.DRIVER)
    with pytest.raises(ApiError) as raised:
        kube.apply_claim_status("default", "r", OURS, uid=old["metadata"]["uid"])
    assert raised.value.status == 409 and "Precondition failed" in str(raised.value)
    assert not (api.get("resourceclaims", "r", "default").get("status") or {}).get("devices")
