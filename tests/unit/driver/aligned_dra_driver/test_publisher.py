# SPDX-License-Identifier: Apache-2.0
"""Slice building and the publication protocol (generations, counts, owner) against the fake API server."""

from __future__ import annotations

import pytest
from aligned_dra_driver import publisher
from aligned_dra_driver.kube import Kube

from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer


def devices(count: int, prefix: str = "vf") -> list[dict]:
    return [
        {"name": f"{prefix}-{i:04d}", "attributes": {"dra.aligned.dev/index": {"int": i}}, "capacity": {}}
        for i in range(count)
    ]


@pytest.fixture
def api():
    with FakeApiServer("1.35") as server:
        server.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}})
        yield server


@pytest.fixture
def pub(api):
    client = api.api_client()
    yield publisher.Publisher(Kube(client, "dra.aligned.dev/node-a"), "node-a", "dra.aligned.dev")
    client.close()


def pool(api):
    items = api.list("resourceslices")
    return sorted(
        (
            s["metadata"]["name"],
            s["spec"]["pool"]["generation"],
            s["spec"]["pool"]["resourceSliceCount"],
            len(s["spec"]["devices"]),
        )
        for s in items
    )


def test_512_devices_split_at_128(api, pub):
    assert pub.publish(devices(512)) is True
    assert [entry[1:] for entry in pool(api)] == [(1, 4, 128)] * 4
    assert api.rejections == []
    node_uid = api.get("nodes", "node-a")["metadata"]["uid"]
    assert all(s["metadata"]["ownerReferences"][0]["uid"] == node_uid for s in api.list("resourceslices"))


def test_unchanged_devices_write_nothing(api, pub):
    pub.publish(devices(3))
    writes = [r for r in api.requests if r[0] != "GET"]
    assert pub.publish(devices(3)) is False
    assert [r for r in api.requests if r[0] != "GET"] == writes


def test_change_moves_every_slice_to_the_next_generation_and_drops_the_surplus(api, pub):
    pub.publish(devices(300))
    assert [entry[1:] for entry in pool(api)] == [(1, 3, 128), (1, 3, 128), (1, 3, 44)]
    pub.publish(devices(130))
    assert [entry[1:] for entry in pool(api)] == [(2, 2, 128), (2, 2, 2)]
    pub.publish([])
    assert [entry[1:] for entry in pool(api)] == [(3, 1, 0)]


def test_slices_deleted_by_the_kubelet_come_back(api, pub):
    pub.publish(devices(2))
    for item in api.list("resourceslices"):
        api.delete("resourceslices", item["metadata"]["name"])
    assert pub.publish(devices(2)) is True
    assert [entry[1:] for entry in pool(api)] == [(1, 1, 2)]


def test_foreign_slices_of_the_pool_are_replaced(api, pub):
    stale = publisher.build_slices("node-a", "dra.aligned.dev", devices(1, "old"), 7, None)[0]
    stale["metadata"]["name"] = "node-a-leftover"
    api.create(stale)
    pub.publish(devices(1))
    assert pool(api) == [("node-a-dra-aligned-dev-0", 8, 1, 1)]


def test_devices_with_taints_split_at_64():
    tainted = devices(65)
    tainted[0]["taints"] = [{"key": "k", "effect": "NoSchedule"}]
    assert publisher.slice_limit(tainted) == 64
    assert len(publisher.build_slices("n", "dra.aligned.dev", tainted, 1, None)) == 2


def test_devices_with_list_attributes_split_at_64():
    listed = devices(65)
    listed[3]["attributes"] = dict(listed[3].get("attributes") or {}, numaNode={"ints": [0, 1]})
    assert publisher.slice_limit(devices(65)) == 128
    assert publisher.slice_limit(listed) == 64
    assert [len(s["spec"]["devices"]) for s in publisher.build_slices("n", "dra.aligned.dev", listed, 1, None)] == [
        64,
        1,
    ]


def test_api_errors_are_kept_for_the_health_endpoint(api, pub):
    api.fail_next("GET", r"/resourceslices$", code=500)
    from aligned_dra_driver.kube import ApiError

    with pytest.raises(ApiError):
        pub.publish(devices(1))
    assert "500" in pub.last_error
    pub.publish(devices(1))
    assert pub.last_error is None


UNHEALTHY = {"key": "dra.aligned.dev/unhealthy", "value": "gone", "effect": "NoExecute"}


def tainted(count: int) -> list[dict]:
    return [dict(d, taints=[dict(UNHEALTHY, timeAdded="2026-11-23T18:41:01Z")]) for d in devices(count)]


def test_taints_dropped_by_a_server_without_the_gate_are_noticed(pub, api):
    assert api.gates["DRADeviceTaints"] is False  # 1.35
    assert pub.publish(tainted(2)) is True
    assert pub.taints_dropped is True
    assert not any(d.get("taints") for s in api.list("resourceslices") for d in s["spec"]["devices"])
    pub.publish(devices(2))
    assert pub.taints_dropped is False


def test_taints_kept_by_a_server_with_the_gate_are_not_written_again():
    with FakeApiServer("1.36") as api:
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}})
        client = api.api_client()
        pub = publisher.Publisher(Kube(client, "dra.aligned.dev/node-a"), "node-a", "dra.aligned.dev")
        assert pub.publish(tainted(2)) is True and pub.taints_dropped is False
        stored = api.list("resourceslices")[0]["spec"]["devices"][0]["taints"]
        assert stored == [dict(UNHEALTHY, timeAdded="2026-11-23T18:41:01Z")]
        # the same taints again (the client sends the time as +00:00, the server answers Z): no write
        assert pub.publish(tainted(2)) is False
        # a later timeAdded is a change
        later = [dict(d, taints=[dict(UNHEALTHY, timeAdded="2026-11-23T18:42:00Z")]) for d in devices(2)]
        assert pub.publish(later) is True
        client.close()
