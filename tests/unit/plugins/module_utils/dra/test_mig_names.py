# SPDX-License-Identifier: Apache-2.0
"""MIG device names (dra/mig.py): one token per profile NVML can offer, DNS labels, and a GPU whose profiles
would still collide refused by name before anything is published."""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.dra import mig
from ansible_collections.aligned.dra.plugins.module_utils.dra.model import DeviceModelError, is_dns_label
from ansible_collections.aligned.dra.plugins.module_utils.dra.slices import validate_device

BUS = "0000:18:00.0"
GPU = "gpu-0000-18-00-0"
# every form NVML names a GPU instance profile with: plain, media extensions (+me), none (-me), all of them
# (+me.all), graphics (+gfx), several attributes, and a compute instance's <C>c. prefix
TOKENS = {
    "1g.10gb": "1g-10gb",
    "1g.10gb+me": "1g-10gb-me",
    "1g.10gb-me": "1g-10gb-nome",
    "1g.10gb+me.all": "1g-10gb-meall",
    "1g.10gb+gfx": "1g-10gb-gfx",
    "2g.20gb+me,gfx": "2g-20gb-me-gfx",
    "1c.2g.10gb": "1c-2g-10gb",
    "7g.80gb": "7g-80gb",
    "4g.96gb+gfx": "4g-96gb-gfx",
    "1g.24gb-me": "1g-24gb-nome",
    "1g.186gb+me.all": "1g-186gb-meall",
}


def gpu_device() -> dict:
    return {
        "name": GPU,
        "attributes": {
            "resource.kubernetes.io/pciBusID": {"string": BUS},
            "dra.aligned.dev/kind": {"string": "gpu"},
        },
    }


def profile(name: str, index: int, size: int = 1, starts: tuple[int, ...] = (0, 1)) -> dict:
    return {
        "id": index,
        "name": name,
        "slices": size,
        "memory_bytes": size * (10 << 30),
        "instance_count": len(starts),
        "ofa_engines": 1 if "+me" in name else 0,
        "placements": [{"start": start, "size": size} for start in starts],
    }


def state(*profiles: dict, instances: list | None = None) -> dict:
    return {
        "pci_address": BUS,
        "architecture": "hopper",
        "mig_mode": {"current": True, "pending": True},
        "memory_slices": 8,
        "profiles": list(profiles),
        "instances": instances or [],
    }


@pytest.mark.parametrize(("name", "token"), TOKENS.items())
def test_each_profile_form_has_its_token(name, token):
    assert mig.profile_token(name) == token


def test_todays_names_of_plain_and_me_profiles_stay_as_they_were():
    """What docs, plans and the demo's expected outputs name: ``.`` and ``+me`` as ``-``."""
    assert mig.device_name(GPU, "1g.10gb", 6) == "gpu-0000-18-00-0-mig-1g-10gb-6"
    assert mig.device_name(GPU, "1g.10gb+me", 0) == "gpu-0000-18-00-0-mig-1g-10gb-me-0"
    assert mig.device_name(GPU, "3g.40gb", 4) == "gpu-0000-18-00-0-mig-3g-40gb-4"


def test_every_variant_of_one_size_gets_its_own_token_and_a_dns_label():
    names = list(TOKENS)
    for first, second in itertools.combinations(names, 2):
        assert mig.profile_token(first) != mig.profile_token(second), (first, second)
    longest = "gpu-0000-ff-1f-7"  # a GPU name of the longest PCI address form
    for name in names:
        assert is_dns_label(mig.device_name(longest, name, 7)), name


def test_variants_of_one_size_on_one_gpu_publish_distinct_valid_devices():
    """``1g.20gb+me`` and ``1g.20gb-me`` once gave one device name, and the API server refused the whole pool."""
    gpu_state = state(
        profile("1g.20gb", 0),
        profile("1g.20gb+me", 1),
        profile("1g.20gb-me", 2),
        profile("1g.20gb+me.all", 3),
        profile("1g.20gb+gfx", 4),
    )
    devices = mig.dynamic_devices(gpu_device(), gpu_state)
    names = [d["name"] for d in devices]
    assert len(names) == len(set(names)) == 5 * 2 + 1
    assert {f"{GPU}-mig-1g-20gb{suffix}-1" for suffix in ("", "-me", "-nome", "-meall", "-gfx")} <= set(names)
    for device in devices:
        assert validate_device(device) == [], device["name"]


@pytest.mark.parametrize(
    ("first", "second"),
    [("1g.20gb+me", "1g.20gb_me"), ("1g.20gb+me.all", "1g.20gb+meall"), ("1g.20gb-me", "1g.20gb+nome")],
)
def test_two_profiles_folding_to_one_token_refuse_the_gpu_naming_both(first, second):
    """A future suffix the fold does not know still cannot publish a duplicate: the GPU is refused, by name."""
    gpu_state = state(profile("1g.20gb", 0), profile(first, 1), profile(second, 2))
    with pytest.raises(DeviceModelError) as caught:
        mig.dynamic_devices(gpu_device(), gpu_state)
    message = str(caught.value)
    assert BUS in message and GPU in message
    assert f"{first} (ID 1)" in message and f"{second} (ID 2)" in message
    assert repr(mig.profile_token(first)) in message
    instances = [
        {"profile": first, "profile_id": 1, "placement": {"start": 0, "size": 1}, "uuid": "MIG-a"},
        {"profile": second, "profile_id": 2, "placement": {"start": 1, "size": 1}, "uuid": "MIG-b"},
    ]
    with pytest.raises(DeviceModelError, match=f"GPU {BUS}"):
        mig.static_devices(gpu_device(), state(instances=instances))


def test_one_name_under_two_profile_ids_is_a_collision_too():
    """An old NVML without named profiles names them from their figures: a ``+me`` profile as its plain twin."""
    with pytest.raises(DeviceModelError, match=r"1g\.10gb \(ID 0\) and 1g\.10gb \(ID 7\)"):
        mig.dynamic_devices(gpu_device(), state(profile("1g.10gb", 0), profile("1g.10gb", 7)))


def test_a_static_instance_of_a_profile_nvml_no_longer_lists_is_checked_with_the_others():
    instances = [{"profile": "1g.10gb_me", "profile_id": 9, "placement": {"start": 0, "size": 1}, "uuid": "MIG-a"}]
    with pytest.raises(DeviceModelError, match=r"1g\.10gb\+me \(ID 1\) and 1g\.10gb_me \(ID 9\)"):
        mig.static_devices(gpu_device(), state(profile("1g.10gb+me", 1), instances=instances))
    plain = state(profile("1g.10gb+me", 1), instances=[dict(instances[0], profile="1g.10gb+me", profile_id=1)])
    assert [d["name"] for d in mig.static_devices(gpu_device(), plain)] == [f"{GPU}-mig-1g-10gb-me-0"]


def test_a_name_past_63_characters_is_refused_before_publishing():
    with pytest.raises(DeviceModelError, match="not a DNS label"):
        mig.device_name(GPU, "1g.10gb+" + "x" * 40, 0)
    with pytest.raises(DeviceModelError, match="has no name"):
        mig.profile_token("+.")
