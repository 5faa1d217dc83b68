# SPDX-License-Identifier: Apache-2.0
"""ResourceSlices: devices cut into slices at the API's limits, read back per node, and validated."""

from __future__ import annotations

import copy

import kubernetes_validate
import pytest

from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices


def test_slices_split_at_the_limit(layouts):
    devices = dra.devices_from_topology(layouts("sriov-8x64"))
    assert len(devices) == 528
    slices = dra_slices.resource_slices("sriov-gpu-01", devices, generation=3)
    assert [len(s["spec"]["devices"]) for s in slices] == [128, 128, 128, 128, 16]
    for index, item in enumerate(slices):
        spec = item["spec"]
        assert spec["pool"] == {"name": "sriov-gpu-01", "generation": 3, "resourceSliceCount": 5}
        assert spec["nodeName"] == "sriov-gpu-01"
        assert spec["driver"] == dra.DRIVER_NAME
        assert item["metadata"]["name"] == f"sriov-gpu-01-dra-aligned-dev-{index}"
    assert [d for s in slices for d in s["spec"]["devices"]] == devices


def test_empty_node_gets_one_empty_slice():
    (item,) = dra_slices.resource_slices("n1", [])
    assert item["spec"]["devices"] == [] and item["spec"]["pool"]["resourceSliceCount"] == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"node_name": "Bad_Node"}, "node_name"),
        ({"driver": "UPPER.dev"}, "driver"),
        ({"generation": -1}, "generation"),
        ({"max_devices": 129}, "max_devices"),
    ],
)
def test_bad_slice_arguments(kwargs, message):
    args = {"node_name": "n1", "devices": []}
    args.update(kwargs)
    with pytest.raises(dra.DeviceModelError, match=message):
        dra_slices.resource_slices(**args)


def test_devices_from_slices_keeps_the_newest_generation():
    old = dra_slices.resource_slices("n1", [{"name": "a", "attributes": {}, "capacity": {}}], generation=1)
    new = dra_slices.resource_slices("n1", [{"name": "b", "attributes": {}, "capacity": {}}], generation=2)
    other = dra_slices.resource_slices("n2", [{"name": "c", "attributes": {}}], driver="gpu.nvidia.com")
    grouped = dra_slices.devices_from_slices(old + new + other)
    assert [d["name"] for d in grouped["n1"]] == ["b"]
    assert grouped["n2"] == [{"name": "c", "attributes": {}, "driver": "gpu.nvidia.com", "pool": "n2"}]


# -- validation ---------------------------------------------------------------------


def test_validate_device_finds_each_problem():
    good = {"name": "gpu-0", "attributes": {"dra.aligned.dev/kind": {"string": "gpu"}}, "capacity": {}}
    assert dra_slices.validate_device(good) == []
    bad_name = dict(good, name="GPU_0")
    assert "not a DNS label" in dra_slices.validate_device(bad_name)[0]
    too_many = copy.deepcopy(good)
    too_many["attributes"] = {f"a{i}": {"int": i} for i in range(30)}
    too_many["capacity"] = {f"c{i}": {"value": "1"} for i in range(3)}
    assert "33 attributes and capacities, limit 32" in dra_slices.validate_device(too_many)[0]
    long_value = copy.deepcopy(good)
    long_value["attributes"]["dra.aligned.dev/model"] = {"string": "x" * 65}
    assert "at most 64" in dra_slices.validate_device(long_value)[0]
    two_types = copy.deepcopy(good)
    two_types["attributes"]["x"] = {"string": "a", "int": 1}
    assert "exactly one" in dra_slices.validate_device(two_types)[0]
    bad_key = copy.deepcopy(good)
    bad_key["attributes"]["dra.aligned.dev/9lives"] = {"int": 9}
    assert "not a qualified name" in dra_slices.validate_device(bad_key)[0]


def test_slice_with_too_many_devices_is_refused():
    devices = [{"name": f"d{i}", "attributes": {}, "capacity": {}} for i in range(129)]
    item = {"metadata": {"name": "s"}, "spec": {"devices": devices}}
    assert "129 devices, limit 128" in dra_slices.validate_slice(item)[0]
    item["spec"]["devices"] = devices[:2] + [devices[0]]
    assert "appears twice" in dra_slices.validate_slice(item)[0]


# -- list-typed attributes (DRAListTypeAttributes) ----------------------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({"ints": []}, "non-empty list"),
        ({"ints": [0, "1"]}, "must hold integers"),
        ({"bools": [True, 1]}, "must hold booleans"),
        ({"strings": ["x" * 65]}, "at most 64 characters"),
        ({"ints": list(range(48))}, "49 attribute values"),  # plus the device's scalar
        ({"floats": [1.0]}, "exactly one of"),
    ],
)
def test_list_values_are_validated(value, problem):
    device = {"name": "cpu-0", "attributes": {"socket": {"int": 0}, "numa": value}}
    assert any(problem in message for message in dra_slices.validate_device(device)), dra_slices.validate_device(device)


def test_list_values_within_the_limits_are_valid():
    device = {"name": "cpu-0", "attributes": {"socket": {"int": 0}, "numa": {"ints": list(range(47))}}}
    assert dra_slices.validate_device(device) == []


def test_slices_with_list_attributes_hold_at_most_64_devices():
    devices = [{"name": f"cpu-{i}", "attributes": {"numa": {"ints": [0, 1]}}} for i in range(65)]
    slices = dra_slices.resource_slices("node-1", devices)
    assert [len(s["spec"]["devices"]) for s in slices] == [64, 1]
    too_big = copy.deepcopy(slices[0])
    too_big["spec"]["devices"] = devices
    assert any("65 devices, limit 64" in p for p in dra_slices.validate_slice(too_big))


# -- partitionable devices (MIG dynamic): the pool's shape per minor --------------------------------------


def _partitioned_pool(gpus: int) -> tuple[list[dict], list[dict]]:
    """``gpus`` GPUs of 4 partitions each (slices 0-1, 2-3, 4-7 and the whole), a counter set each, and a NIC."""
    devices, sets = [], []
    for index in range(gpus):
        gpu = f"gpu-0000-{index:02x}-00-0"
        sets.append({"name": f"{gpu}-counters", "counters": {f"memory-slice-{i}": {"value": "1"} for i in range(8)}})
        for start, size in ((0, 2), (2, 2), (4, 4), (0, 8)):
            name = gpu if size == 8 else f"{gpu}-mig-{size}g-{start}"
            counters = {f"memory-slice-{i}": {"value": "1"} for i in range(start, start + size)}
            devices.append(
                {"name": name, "consumesCounters": [{"counterSet": f"{gpu}-counters", "counters": counters}]}
            )
    devices.append({"name": "nic-0000-99-00-0"})
    return devices, sets


@pytest.mark.parametrize("minor", ["1.35", "1.36", "1.37"])
def test_from_1_35_counter_sets_have_slices_of_their_own_at_most_eight_each(minor):
    devices, sets = _partitioned_pool(20)  # 20 sets, 80 counter devices, a NIC
    pool = dra_slices.partitioned_slices("node-1", devices, sets, minor)
    counter_slices = [s for s in pool if s["spec"].get("sharedCounters")]
    assert [len(s["spec"]["sharedCounters"]) for s in counter_slices] == [8, 8, 4]
    assert all("devices" not in s["spec"] for s in counter_slices)
    device_slices = [s["spec"]["devices"] for s in pool if s["spec"].get("devices")]
    assert [len(d) for d in device_slices] == [64, 16, 1]  # a GPU's four never split; the NIC alone
    assert [d["name"] for chunk in device_slices for d in chunk] == [d["name"] for d in devices]  # order kept
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in pool} == {len(pool)}
    assert len({s["metadata"]["name"] for s in pool}) == len(pool)
    for item in pool:
        assert dra_slices.validate_slice(item) == []
        kubernetes_validate.validate(item, minor + ".0", strict=True)


def test_on_1_34_each_counter_set_shares_its_slice_with_the_devices_that_consume_it():
    devices, sets = _partitioned_pool(3)
    pool = dra_slices.partitioned_slices("node-1", devices, sets, "1.34")
    assert len(pool) == 4
    for gpu_slice, counter_set in zip(pool[:3], sets, strict=True):
        assert gpu_slice["spec"]["sharedCounters"] == [counter_set]
        assert {c["counterSet"] for d in gpu_slice["spec"]["devices"] for c in d["consumesCounters"]} == {
            counter_set["name"]
        }
    assert [d["name"] for d in pool[3]["spec"]["devices"]] == ["nic-0000-99-00-0"]
    for item in pool:
        kubernetes_validate.validate(item, "1.34.0", strict=True)


def test_a_device_of_an_unknown_set_or_a_set_over_64_devices_is_refused():
    devices, sets = _partitioned_pool(1)
    with pytest.raises(dra.DeviceModelError, match="unknown or several sets"):
        dra_slices.partitioned_slices("node-1", devices, [], "1.36")
    many = [dict(devices[0], name=f"gpu-mig-{i}") for i in range(65)]
    with pytest.raises(dra.DeviceModelError, match="65 devices, at most 64"):
        dra_slices.partitioned_slices("node-1", many, sets, "1.36")
