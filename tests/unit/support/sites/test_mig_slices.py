# SPDX-License-Identifier: Apache-2.0
"""The fixture of MIG GPUs as NVIDIA publishes them (tests/support/sites/mig_slices.py), and the collection's
devices checked against it: the independent side of the planner's and allocator's MIG tests."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.dra import mig
from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml
from ansible_collections.aligned.dra.tests.support.fakes.nvml_models import MODELS
from ansible_collections.aligned.dra.tests.support.sites import mig_slices as nvidia

FAKE_MODEL = {nvidia.A100_40GB: "A100-SXM4-40GB", nvidia.H100_80GB: "H100-SXM5-80GB"}
BUS = "0000:18:00.0"


@pytest.mark.parametrize("device_id", sorted(FAKE_MODEL))
def test_the_table_and_the_nvml_fake_transcribe_nvidias_figures_alike(device_id):
    """Two transcriptions of NVIDIA's tables, kept apart: every profile both list has the same figures."""
    fake = {p.name: p for p in MODELS[FAKE_MODEL[device_id]].profiles}
    both = [p for p in nvidia.PROFILES[device_id][1] if p.name in fake]
    assert len(both) >= 5
    for mine in both:
        theirs = fake[mine.name]
        engines = (mine.copy_engines, mine.decoders, mine.encoders, mine.jpeg_engines, mine.ofa_engines)
        assert (mine.id, mine.compute_slices, mine.instances, mine.multiprocessors) == (
            theirs.id,
            theirs.slices,
            theirs.instances,
            theirs.sms,
        ), mine.name
        assert (engines, mine.memory_mib, mine.size, mine.starts) == (
            theirs.engines,
            theirs.memory_mib,
            theirs.size,
            theirs.starts,
        ), mine.name


def test_nvidias_names_counters_and_order():
    counter_set, devices = nvidia.gpu_devices(0, nvidia.H100_80GB, order="nvidia")
    names = [d["name"] for d in devices]
    assert names[0] == "gpu-0"  # by name, the GPU whole sorts first
    assert names[1:4] == ["gpu-0-mig-1g10gb-19-0", "gpu-0-mig-1g10gb-19-1", "gpu-0-mig-1g10gb-19-2"]
    assert "gpu-0-mig-1g10gb-me-20-6" in names
    assert counter_set["name"] == "gpu-0-counter-set"
    assert counter_set["counters"]["memory"] == {"value": str(81152 << 20)}
    assert counter_set["counters"]["multiprocessors"] == {"value": "132"}
    assert sorted(c for c in counter_set["counters"] if c.startswith("memory-slice-")) == [
        f"memory-slice-{i}" for i in range(8)
    ]
    three_g = next(d for d in devices if d["name"] == "gpu-0-mig-3g40gb-9-4")
    consumed = three_g["consumesCounters"][0]["counters"]
    assert sorted(c for c in consumed if c.startswith("memory-slice-")) == [f"memory-slice-{i}" for i in (4, 5, 6, 7)]
    assert consumed["multiprocessors"] == {"value": "60"}
    ampere = [d["name"] for d in nvidia.gpu_devices(0, nvidia.A100_40GB)[1]]
    assert "gpu-0" not in ampere and len(ampere) == 7 + 7 + 4 + 3 + 2 + 1 + 1  # no GPU whole on Ampere in MIG mode
    with pytest.raises(ValueError):
        nvidia.gpu_devices(0, nvidia.A100_40GB, order="by-size")


def test_the_preference_order_from_first_principles():
    """docs/mig.md's worked example on an A100 40GB, from the fixture's own rule."""
    order = nvidia.preference(nvidia.PROFILES[nvidia.A100_40GB][1])
    by_profile: dict[str, list[int]] = {}
    for profile, start in order:
        by_profile.setdefault(profile.name, []).append(start)
    assert list(by_profile) == ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]
    assert by_profile["1g.5gb"] == [6, 5, 4, 3, 2, 1, 0]
    assert by_profile["2g.10gb"] == [4, 2, 0]
    assert by_profile["3g.20gb"] == [4, 0]


@pytest.mark.parametrize("device_id", sorted(FAKE_MODEL))
def test_the_collections_devices_come_in_the_documented_order_and_spend_nvidias_slices(device_id):
    """The collection's driver publishes the profiles NVML offers as (profile, start) in the preference order
    the fixture derives independently, each consuming exactly the memory slices NVIDIA's placement has."""
    fake = FakeNvml()
    fake.add_gpu(BUS, model=FAKE_MODEL[device_id])
    fake.enable_mig(BUS)
    fake.nvmlInit()
    state = nvml_state.read_gpu(fake, BUS)
    device = {"name": "gpu-0000-18-00-0", "attributes": {}, "capacity": {}}
    published = [d for d in mig.dynamic_devices(device, state) if "dra.aligned.dev/profile" in d["attributes"]]
    offered = {p["name"] for p in state["profiles"]}
    expected = nvidia.preference(tuple(p for p in nvidia.PROFILES[device_id][1] if p.name in offered))
    assert [
        (d["attributes"]["dra.aligned.dev/profile"]["string"], d["attributes"]["dra.aligned.dev/placementStart"]["int"])
        for d in published
    ] == [(p.name, start) for p, start in expected]
    for item, (profile, start) in zip(published, expected, strict=True):
        counters = item["consumesCounters"][0]["counters"]
        assert {c for c in counters if c.startswith("memory-slice-")} == {
            f"memory-slice-{i}" for i in nvidia.slices_of(profile, start)
        }
