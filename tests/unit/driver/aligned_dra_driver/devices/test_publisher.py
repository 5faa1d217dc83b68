# SPDX-License-Identifier: Apache-2.0
"""Slice building and the publication protocol (generations, counts, owner) against the fake API server."""

from __future__ import annotations

import pytest
from aligned_dra_driver.devices import publisher
from aligned_dra_driver.kube import ApiError, Kube

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


# -- the API server's minor: asked again on a refusal and at an interval (control-plane upgrades) ------------

PARTITIONABLE = {"DRAPartitionableDevices": True}  # the gate a cluster with dynamic MIG has on


def mig_pool(gpus: int = 2, duplicate: bool = False) -> tuple[list[dict], list[dict]]:
    """``gpus`` GPUs of three partitions each (two halves and the whole), a counter set each, and a NIC."""
    found, sets = [], []
    for index in range(gpus):
        gpu = f"gpu-{index}"
        sets.append({"name": f"{gpu}-counters", "counters": {f"memory-slice-{i}": {"value": "1"} for i in range(8)}})
        for start, size in ((0, 4), (4, 4), (0, 8)):
            counters = {f"memory-slice-{i}": {"value": "1"} for i in range(start, start + size)}
            name = gpu if size == 8 else f"{gpu}-mig-{start}"
            found.append({"name": name, "consumesCounters": [{"counterSet": f"{gpu}-counters", "counters": counters}]})
    if duplicate:  # a second partition under the name of the first
        found.insert(2, dict(found[1], name=found[0]["name"]))
    found.append({"name": "nic-0"})
    return found, sets


def shape(api) -> str:
    """The minor whose shape the stored pool has: counter sets with their devices (1.34) or apart (1.35+)."""
    specs = [s["spec"] for s in api.list("resourceslices")]
    if any(s.get("sharedCounters") and s.get("devices") is not None for s in specs):
        return "1.34"
    assert any(s.get("sharedCounters") for s in specs), specs
    return "1.35"


def versions_asked(api) -> int:
    return sum(1 for method, path, _type in api.requests if (method, path.rstrip("/")) == ("GET", "/version"))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def upgraded():
    """A 1.34 API server with the pool published in its shape, and a publisher with a clock of its own."""
    with FakeApiServer("1.34", gates=PARTITIONABLE) as server:
        server.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}})
        client = server.api_client()
        clock = Clock()
        pub = publisher.Publisher(Kube(client, "dra.aligned.dev/node-a"), "node-a", "dra.aligned.dev", clock=clock)
        assert pub.publish(*mig_pool()) is True
        assert (pub.minor, shape(server), versions_asked(server)) == ("1.34", "1.34", 1)
        server.upgrade("1.35", gates=PARTITIONABLE)
        yield server, pub, clock
        client.close()


def test_a_refused_write_asks_the_minor_again_and_the_pool_takes_the_new_shape(upgraded, caplog):
    api, pub, clock = upgraded
    first = api.list("resourceslices")[0]["metadata"]["name"]
    api.delete("resourceslices", first)  # the kubelet deleted a slice: the pool is written again
    clock.now += 1
    assert pub.publish(*mig_pool()) is True
    assert [r[2] for r in api.rejections] == [422]  # the old shape, refused once
    assert "only one of `sharedCounters` or `devices` is allowed" in api.rejections[0][3]
    assert (pub.minor, shape(api), versions_asked(api)) == ("1.35", "1.35", 2)
    items = api.list("resourceslices")
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in items} == {len(items)}
    assert len({s["spec"]["pool"]["generation"] for s in items}) == 1
    assert pub.last_error is None
    assert "Kubernetes 1.35 now (was 1.34)" in caplog.text
    assert "refused ResourceSlice" not in caplog.text  # the upgrade explained it: no refusal to report


def test_the_minor_is_asked_again_at_the_interval_without_a_refusal(upgraded):
    api, pub, clock = upgraded
    clock.now += publisher.MINOR_INTERVAL - 1
    assert pub.publish(*mig_pool()) is False  # nothing changed, and the minor is not due yet
    assert (versions_asked(api), shape(api)) == (1, "1.34")
    clock.now += 1
    assert pub.publish(*mig_pool()) is True
    assert (pub.minor, shape(api), versions_asked(api), api.rejections) == ("1.35", "1.35", 2, [])
    assert pub.publish(*mig_pool()) is False and versions_asked(api) == 2


def test_an_unreadable_version_at_the_interval_keeps_the_shape_and_is_asked_again_soon(upgraded, caplog):
    api, pub, clock = upgraded
    clock.now += publisher.MINOR_INTERVAL
    api.fail_next("GET", r"^/version/?$", code=503)
    assert pub.publish(*mig_pool()) is False  # published as before
    assert (pub.minor, shape(api)) == ("1.34", "1.34") and "version is not readable" in caplog.text
    clock.now += publisher.MINOR_REASK_AFTER
    assert pub.publish(*mig_pool()) is True and shape(api) == "1.35"


def test_a_refusal_the_minor_does_not_explain_is_logged_once_and_not_retried_in_a_loop(caplog):
    with FakeApiServer("1.36") as api:
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}})
        client = api.api_client()
        clock = Clock()
        pub = publisher.Publisher(Kube(client, "dra.aligned.dev/node-a"), "node-a", "dra.aligned.dev", clock=clock)
        for _attempt in range(3):  # the caller's backoff retries: the same refusal each time
            with pytest.raises(ApiError) as caught:
                pub.publish(*mig_pool(duplicate=True))
            assert caught.value.status == 422
            clock.now += 1
        assert versions_asked(api) == 2  # the first read and one read again: not one per attempt
        clock.now += publisher.MINOR_REASK_AFTER
        with pytest.raises(ApiError):
            pub.publish(*mig_pool(duplicate=True))
        assert versions_asked(api) == 3  # at most once per MINOR_REASK_AFTER
        logged = [r.getMessage() for r in caplog.records if "refused ResourceSlice" in r.getMessage()]
        assert len(logged) == 1, logged
        assert 'device gpu-0-mig-0 (spec.devices[2]: Duplicate value: "gpu-0-mig-0")' in logged[0]
        assert "node-a-dra-aligned-dev-1" in logged[0] and "pool node-a" in logged[0]
        assert pub.publish(*mig_pool()) is True  # fixed: published, and a new refusal would be logged again
        client.close()


def test_a_refused_pool_without_counter_sets_names_its_devices_and_never_asks_the_minor(api, pub, caplog):
    twice = devices(3) + [dict(devices(1)[0])]
    with pytest.raises(ApiError):
        pub.publish(twice)
    assert versions_asked(api) == 0
    assert 'device vf-0000 (spec.devices[3]: Duplicate value: "vf-0000")' in caplog.text
    assert "ResourceSlice node-a-dra-aligned-dev-0 of pool node-a" in caplog.text


def test_refused_items_reads_the_message_when_the_status_has_no_causes():
    item = publisher.build_slices("n", "dra.aligned.dev", devices(2), 1, None)[0]
    bare = ApiError(422, '422 ResourceSlice "n-0" is invalid: spec.devices[1].name: Invalid value: "vf-0001"')
    assert publisher.refused_items(item, bare) == [f"device vf-0001 ({bare})"]
    assert publisher.refused_items(item, ApiError(422, "422 spec: Invalid value")) == []
