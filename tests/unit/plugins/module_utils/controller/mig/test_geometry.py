# SPDX-License-Identifier: Apache-2.0
"""controller/mig/geometry.py: the documented MIG geometry per PCI device ID, and NVML's where the probe has it."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import geometry
from ansible_collections.aligned.dra.plugins.module_utils.node.mig import packing


@pytest.mark.parametrize("text", ["0x20B0", "20b0", "0x20B010DE", " 0x20b0 "])
def test_device_ids_are_read_in_every_form_a_layout_file_writes(text):
    assert geometry.device_id(text) == "0x20b0"


@pytest.mark.parametrize("text", ["0x20B0XX", "nvidia", "", "0x20B01002"])
def test_what_is_no_device_id_is_none(text):
    assert geometry.device_id(text) is None


def test_the_a100_40gb_has_the_guides_profiles_counts_and_placements():
    geo = geometry.documented("0x20B0")
    assert geo["source"] == "documented" and geo["memory_slices"] == 8
    profiles = {p["name"]: p for p in geo["profiles"]}
    assert sorted(profiles) == ["1g.10gb", "1g.5gb", "1g.5gb+me", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"]
    assert profiles["1g.5gb"]["instance_count"] == 7
    assert [p["start"] for p in profiles["2g.10gb"]["placements"]] == [0, 2, 4]
    assert profiles["3g.20gb"]["placements"] == [{"start": 0, "size": 4}, {"start": 4, "size": 4}]
    assert profiles["7g.40gb"]["placements"] == [{"start": 0, "size": 8}]


@pytest.mark.parametrize("device_id", sorted(geometry.MODELS))
def test_the_me_profiles_and_the_full_profile_have_the_one_ofa_engine(device_id):
    """The guide's "Supported MIG Profiles": one OFA for +me and the full profile (A30: 4g.24gb), none elsewhere."""
    profiles = geometry.documented(device_id)["profiles"]
    full = max(profiles, key=lambda p: p["placements"][0]["size"])["name"]
    assert {p["name"] for p in profiles if p["ofa_engines"] == 1} == {
        p["name"] for p in profiles if "+me" in p["name"]
    } | {full}
    assert all(p["ofa_engines"] in (0, 1) for p in profiles)
    assert full == ("4g.24gb" if device_id == "0x20b7" else profiles[-1]["name"])


@pytest.mark.parametrize(
    ("device_id", "largest", "smallest"),
    [
        ("0x20b7", "4g.24gb", "1g.6gb"),
        ("0x20b2", "7g.80gb", "1g.10gb"),
        ("0x2330", "7g.80gb", "1g.10gb"),
        ("0x2321", "7g.94gb", "1g.12gb"),
        ("0x2335", "7g.141gb", "1g.18gb"),
        ("0x2901", "7g.180gb", "1g.23gb"),
    ],
)
def test_each_documented_model_names_its_whole_and_its_smallest_profile(device_id, largest, smallest):
    names = [p["name"] for p in geometry.documented(device_id)["profiles"]]
    assert names[0] == smallest and largest in names


def test_every_documented_model_packs_its_largest_layouts():
    for device_id, (_model, _architecture, slices, _profiles) in geometry.MODELS.items():
        geo = geometry.documented(device_id)
        ones = geo["profiles"][0]  # the smallest, at its full count: 7 (4 on an A30)
        assert len(packing.pack(geo["profiles"], [], {ones["name"]: ones["instance_count"]})) == ones["instance_count"]
        whole = geo["profiles"][-1]
        assert packing.pack(geo["profiles"], [], {whole["name"]: 1})[0]["size"] == slices


def test_a_gpu_without_a_table_entry_and_no_nvml_has_no_geometry():
    assert geometry.documented("0x26b9") is None  # L40S
    assert geometry.of_gpu({"device_id": "0x26b9"}) is None


def test_nvmls_profiles_from_the_probe_come_before_the_table():
    nvml = [{"id": 0, "name": "1g.5gb", "slices": 1, "instance_count": 7, "placements": [{"start": 0, "size": 1}]}]
    device = {
        "device_id": "0x20b0",
        "mig": {"readable": True, "mig_capable": True, "profiles": nvml, "memory_slices": 8},
    }
    assert geometry.of_gpu(device)["source"] == "nvml"
    assert geometry.of_gpu(device)["profiles"] == nvml


def test_mig_mode_off_or_an_unreadable_entry_falls_back_to_the_table_and_no_mig_to_none():
    off = {"device_id": "0x20b0", "mig": {"readable": True, "mig_capable": True, "profiles": None}}
    unreadable = {"device_id": "0x20b0", "mig": {"readable": False, "reason": "no pynvml"}}
    incapable = {"device_id": "0x20b0", "mig": {"readable": True, "mig_capable": False}}
    assert geometry.of_gpu(off)["source"] == geometry.of_gpu(unreadable)["source"] == "documented"
    assert geometry.of_gpu(incapable) is None
