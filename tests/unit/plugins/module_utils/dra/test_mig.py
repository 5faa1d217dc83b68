# SPDX-License-Identifier: Apache-2.0
"""The MIG device model (dra/mig.py) on the fake NVML's A100 40GB and H100 80GB, read as the driver reads them."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.dra import mig
from ansible_collections.aligned.dra.plugins.module_utils.dra.model import DeviceModelError
from ansible_collections.aligned.dra.plugins.module_utils.dra.slices import validate_device
from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml

A100, H100, L40S = "0000:18:00.0", "0000:2a:00.0", "0000:3b:00.0"
GIB = 1 << 30


def gpu_device(bus: str) -> dict:
    """A GPU as model.devices_from_topology publishes it (the attributes the MIG devices take over)."""
    name = "gpu-" + bus.replace(":", "-").replace(".", "-")
    return {
        "name": name,
        "attributes": {
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:15"},
            "resource.kubernetes.io/pciBusID": {"string": bus},
            "resource.kubernetes.io/numaNode": {"int": 0},
            "dra.aligned.dev/kind": {"string": "gpu"},
            "dra.aligned.dev/model": {"string": "NVIDIA GPU"},
            "dra.aligned.dev/uuid": {"string": "GPU-1234"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }


@pytest.fixture
def nvml(tmp_path):
    fake = FakeNvml(procfs=tmp_path / "proc")
    fake.add_gpu(A100, model="A100-SXM4-40GB")
    fake.add_gpu(H100, model="H100-SXM5-80GB")
    fake.add_gpu(L40S, model="L40S")
    fake.enable_mig(A100)
    fake.enable_mig(H100)
    fake.nvmlInit()
    return fake


def state(nvml: FakeNvml, bus: str) -> dict:
    return nvml_state.read_gpu(nvml, bus)


def starts(devices: list[dict], profile: str) -> list[int]:
    return [
        d["attributes"]["dra.aligned.dev/placementStart"]["int"]
        for d in devices
        if d["attributes"].get("dra.aligned.dev/profile", {}).get("string") == profile
    ]


def slices_of(device: dict) -> set[int]:
    (consumed,) = device["consumesCounters"]
    return {int(name.rsplit("-", 1)[1]) for name in consumed["counters"] if name.startswith("memory-slice-")}


def first_fit(devices: list[dict], wanted: list[str]) -> list[dict] | None:
    """The scheduler's choice, independently: per claim the first device of the profile whose slices are free."""
    taken: set[int] = set()
    chosen = []
    for profile in wanted:
        for device in devices:
            if device["attributes"].get("dra.aligned.dev/profile", {}).get("string") != profile:
                continue
            if not slices_of(device) & taken:
                taken |= slices_of(device)
                chosen.append(device)
                break
        else:
            return None
    return chosen


def test_a100_dynamic_devices_are_the_placements_nvml_offers_in_the_preferred_order_and_never_the_gpu_whole(nvml):
    """Ampere in MIG mode: Prepare could never turn MIG mode off (a GPU reset), so the GPU whole is left out."""
    devices = mig.dynamic_devices(gpu_device(A100), state(nvml, A100))
    assert [d["name"] for d in devices][:3] == [
        "gpu-0000-18-00-0-mig-1g-5gb-6",
        "gpu-0000-18-00-0-mig-1g-5gb-5",
        "gpu-0000-18-00-0-mig-1g-5gb-4",
    ]
    assert starts(devices, "1g.5gb") == [6, 5, 4, 3, 2, 1, 0]
    assert starts(devices, "2g.10gb") == [4, 2, 0]
    assert starts(devices, "3g.20gb") == [4, 0]
    assert starts(devices, "4g.20gb") == [0]
    assert starts(devices, "7g.40gb") == [0]
    assert devices[-1]["name"] == "gpu-0000-18-00-0-mig-7g-40gb-0"  # the largest profile last, no GPU whole
    assert len(devices) == 7 + 3 + 2 + 1 + 1
    assert "gpu-0000-18-00-0" not in {d["name"] for d in devices}
    for device in devices:
        assert validate_device(device) == [], device["name"]


def test_h100_dynamic_devices_end_with_the_gpu_whole(nvml):
    """Hopper changes MIG mode live: the GPU whole, after every partition, in the same order rule."""
    devices = mig.dynamic_devices(gpu_device(H100), state(nvml, H100))
    assert devices[-1]["name"] == "gpu-0000-2a-00-0" and devices[-1]["consumesCounters"]
    assert devices[-2]["name"] == "gpu-0000-2a-00-0-mig-7g-80gb-0"
    assert validate_device(devices[-1]) == []


@pytest.mark.parametrize(
    ("architecture", "live"),
    [("hopper", True), ("blackwell", True), ("ampere", False), ("ada", False), ("unknown", False),
     ("rubin", False), ("", False), (None, False), ("Hopper", False)],
)  # fmt: skip
def test_only_hopper_and_blackwell_change_mig_mode_live_anything_else_fails_closed(architecture, live):
    assert mig.mode_changes_live(architecture) is live


@pytest.mark.parametrize(
    ("architecture", "current", "whole"),
    [("ampere", True, False), ("ampere", False, True), ("unknown", True, False), ("hopper", True, True),
     ("blackwell", True, True), (None, True, False)],
)  # fmt: skip
def test_the_gpu_whole_is_published_where_the_driver_can_prepare_it(architecture, current, whole):
    """MIG mode off: the whole is what the GPU is. MIG mode on: only where Prepare can turn it off live."""
    gpu_state = {"architecture": architecture, "mig_mode": {"current": current, "pending": current}}
    assert mig.publishes_whole(gpu_state) is whole


def test_without_the_whole_the_counter_set_keeps_what_partitions_consume_and_the_order_is_unchanged(nvml):
    """An A100 has no video encoder: only the GPU whole consumed ``encoders`` (0), so the set drops it; every
    other counter (engines, memory, the eight memory slices) stays, and a partition's consumption is the same."""
    ampere = state(nvml, A100)
    as_hopper = dict(ampere, architecture="hopper")
    assert mig.capacities(ampere)["encoders"] == 0
    published = mig.counter_set(gpu_device(A100), ampere)["counters"]
    whole = mig.counter_set(gpu_device(A100), as_hopper)["counters"]
    assert set(whole) - set(published) == {"encoders"}
    assert all(published[name] == whole[name] for name in published)
    assert [f"memory-slice-{i}" for i in range(8)] == [n for n in published if n.startswith("memory-slice-")]
    ampere_devices = mig.dynamic_devices(gpu_device(A100), ampere)
    hopper_devices = mig.dynamic_devices(gpu_device(A100), as_hopper)
    assert hopper_devices[:-1] == ampere_devices and hopper_devices[-1]["name"] == "gpu-0000-18-00-0"
    for device in ampere_devices:  # every counter a partition consumes is in the published set
        assert set(device["consumesCounters"][0]["counters"]) <= set(published), device["name"]


def test_small_claims_in_published_order_leave_the_large_partitions_free(nvml):
    devices = mig.dynamic_devices(gpu_device(A100), state(nvml, A100))
    # three 1g then a 4g: the 4g still fits (by start the 1g would take 0, 1, 2)
    assert first_fit(devices, ["1g.5gb"] * 3 + ["4g.20gb"]) is not None
    # a 3g then a 4g: the 3g takes 4-7, the 4g 0-3
    assert first_fit(devices, ["3g.20gb", "4g.20gb"]) is not None
    # seven 1g fill the GPU (slice 7 holds no 1g placement)
    assert first_fit(devices, ["1g.5gb"] * 7) is not None
    assert first_fit(devices, ["1g.5gb"] * 8) is None
    # a 2g then two 3g: the 2g at 4 blocks 3g@4, so only one 3g fits; the model says so, nothing invented
    assert first_fit(devices, ["2g.10gb", "3g.20gb", "3g.20gb"]) is None


def test_counters_the_gpu_whole_takes_all_a_partition_its_profile_and_exactly_its_slices(nvml):
    gpu_state = dict(state(nvml, A100), architecture="hopper")  # an A100 that could change mode live
    counter_set = mig.counter_set(gpu_device(A100), gpu_state)
    assert counter_set["name"] == "gpu-0000-18-00-0-counters"
    counters = counter_set["counters"]
    assert [f"memory-slice-{i}" for i in range(8)] == sorted(n for n in counters if n.startswith("memory-slice-"))
    assert all(counters[f"memory-slice-{i}"] == {"value": "1"} for i in range(8))
    devices = mig.dynamic_devices(gpu_device(A100), gpu_state)
    whole = devices[-1]["consumesCounters"][0]
    assert whole == {"counterSet": counter_set["name"], "counters": counters}
    three_g = next(d for d in devices if d["name"].endswith("-mig-3g-20gb-4"))
    assert slices_of(three_g) == {4, 5, 6, 7}
    profile = next(p for p in gpu_state["profiles"] if p["name"] == "3g.20gb")
    consumed = three_g["consumesCounters"][0]["counters"]
    assert consumed["multiprocessors"] == {"value": str(profile["multiprocessors"])}
    assert consumed["memory"] == {"value": mig.quantity(profile["memory_bytes"])}


ENGINES = ("copy-engines", "decoders", "encoders", "jpeg-engines", "ofa-engines")


def layouts(gpu_state: dict):
    """Every set of placements that can exist at once (disjoint slices, each profile at most instance_count
    times), independently of the model's search: its counter sums."""
    pairs = mig.publish_order(gpu_state)

    def walk(index: int, taken: int, counts: dict, sums: dict):
        yield sums
        for i in range(index, len(pairs)):
            profile, placement = pairs[i]
            mask = ((1 << placement["size"]) - 1) << placement["start"]
            if mask & taken or counts.get(profile["name"], 0) >= profile["instance_count"]:
                continue
            counters = mig._profile_counters(profile)
            more = {k: sums.get(k, 0) + v for k, v in counters.items()}
            yield from walk(i + 1, taken | mask, {**counts, profile["name"]: counts.get(profile["name"], 0) + 1}, more)

    yield from walk(0, 0, {}, {})


@pytest.mark.parametrize("bus", [A100, H100])
def test_engine_capacities_are_the_exact_maximum_and_the_rest_never_refuse_a_layout_nvml_allows(nvml, bus):
    """Every layout NVML allows fits each non-slice counter; each engine's capacity is reached by one of them."""
    gpu_state = state(nvml, bus)
    capacity = mig.capacities(gpu_state)
    most: dict = {}
    checked = 0
    for sums in layouts(gpu_state):
        checked += 1
        assert all(value <= capacity[name] for name, value in sums.items()), sums
        most = {k: max(most.get(k, 0), v) for k, v in sums.items()}
    assert checked > 40
    assert {name: capacity[name] for name in ENGINES} == {name: most[name] for name in ENGINES}
    assert capacity["memory"] >= most["memory"] and capacity["multiprocessors"] >= most["multiprocessors"]


def test_a_second_me_partition_does_not_fit_the_counters(nvml):
    """H100: only 1g.10gb+me (once per GPU) and 7g have an OFA engine: one OFA, so one +me; the plain 1g
    profiles still fill the other six slices."""
    gpu_state = state(nvml, H100)
    capacity = mig.capacities(gpu_state)
    assert capacity["ofa-engines"] == 1
    assert (capacity["decoders"], capacity["jpeg-engines"], capacity["copy-engines"]) == (7, 7, 8)
    me = [d for d in mig.dynamic_devices(gpu_device(H100), gpu_state) if "-mig-1g-10gb-me-" in d["name"]]
    plain = [d for d in mig.dynamic_devices(gpu_device(H100), gpu_state) if "-mig-1g-10gb-" in d["name"]]
    plain = [d for d in plain if d not in me]

    def fits(devices: list) -> bool:
        spent: dict = {}
        for device in devices:
            for name, value in device["consumesCounters"][0]["counters"].items():
                if not name.startswith("memory"):
                    spent[name] = spent.get(name, 0) + int(value["value"])
        return all(value <= capacity[name] for name, value in spent.items())

    assert fits(me[:1] + plain[1:]) and not fits(me[:2])


def test_the_search_honours_instance_count_and_placements_past_the_slices():
    """A hand-made GPU: ``x`` (2 OFA) fits at 0-1 and 2-3 but exists once; ``y`` (1 OFA) anywhere."""
    profiles = [
        {"name": "x", "instance_count": 1, "ofa_engines": 2, "placements": [{"start": 0, "size": 2}, {"start": 2, "size": 2}]},
        {"name": "y", "instance_count": 4, "ofa_engines": 1, "placements": [{"start": s, "size": 1} for s in range(4)]},
    ]  # fmt: skip
    assert mig.engine_capacities(profiles, 4)["ofa-engines"] == 4  # x once (2) and y twice, or y four times
    profiles[1]["instance_count"] = 1
    assert mig.engine_capacities(profiles, 4)["ofa-engines"] == 3  # x and one y
    profiles[0]["instance_count"] = 0  # NVML gives none: every placement
    assert mig.engine_capacities(profiles, 4)["ofa-engines"] == 4


def test_mig_device_attributes_pair_it_with_its_parents_nic(nvml):
    devices = mig.dynamic_devices(gpu_device(H100), state(nvml, H100))
    device = devices[0]
    attributes = device["attributes"]
    assert attributes["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:15"}
    assert attributes["resource.kubernetes.io/pciBusID"] == {"string": H100}
    assert attributes["dra.aligned.dev/kind"] == {"string": "mig"}
    assert attributes["dra.aligned.dev/parentUUID"] == {"string": "GPU-1234"}
    assert "dra.aligned.dev/uuid" not in attributes and "dra.aligned.dev/migUUID" not in attributes
    assert device["capacity"]["memory"]["value"].endswith(("Mi", "Gi"))
    assert {d["attributes"]["dra.aligned.dev/profile"]["string"] for d in devices[:-1]} >= {"1g.10gb", "1g.10gb+me"}
    assert any(d["name"].endswith("-mig-1g-10gb-me-0") or "-mig-1g-10gb-me-" in d["name"] for d in devices)


def test_static_devices_are_the_instances_with_their_mig_uuid_and_never_the_partitioned_gpu_whole(nvml):
    nvml.create(A100, "3g.20gb", start=4)
    nvml.create(A100, "1g.5gb", start=0)
    devices = mig.static_devices(gpu_device(A100), state(nvml, A100))
    assert [d["name"] for d in devices] == ["gpu-0000-18-00-0-mig-1g-5gb-0", "gpu-0000-18-00-0-mig-3g-20gb-4"]
    uuids = {i["uuid"] for i in state(nvml, A100)["instances"]}
    assert all(uuid.startswith("MIG-") for uuid in uuids) and len(uuids) == 2
    assert {d["attributes"]["dra.aligned.dev/migUUID"]["string"] for d in devices} == uuids
    assert all("consumesCounters" not in d for d in devices)
    # MIG mode on and no instance: nothing to publish; MIG mode off: the GPU whole as always
    assert mig.static_devices(gpu_device(H100), state(nvml, H100)) == []
    off = {"pci_address": L40S, "mig_capable": False, "mig_mode": None}
    assert mig.static_devices(gpu_device(L40S), off) == [gpu_device(L40S)]


def test_a_gpu_nvml_offers_no_placements_for_is_refused_by_name():
    with pytest.raises(DeviceModelError, match="0000:18:00.0: NVML offers no MIG placement"):
        mig.dynamic_devices(gpu_device(A100), {"pci_address": A100, "profiles": None, "memory_slices": None})
    with pytest.raises(DeviceModelError, match="static or dynamic"):
        mig.mig_devices(gpu_device(A100), {}, "mps")


@pytest.mark.parametrize(
    ("value", "text"), [(40 * GIB, "40Gi"), (4864 << 20, "4864Mi"), (1536, "1536"), (3 << 10, "3Ki")]
)
def test_quantities_are_exact(value, text):
    assert mig.quantity(value) == text
