# SPDX-License-Identifier: Apache-2.0
"""Thin provisioning: a fractional GPU's request, its limit, and what is refused."""

from __future__ import annotations

import logging

import pytest
from aligned_dra_driver.config import ConfigError
from aligned_dra_driver.sharing import limits as share_limits

GIB = 2**30
WHERE = "results[0] (request 'gpu', device gpu-0000-18-00-0)"
GPU_80GI = {"name": "gpu-0000-18-00-0", "capacity": {"memory": {"value": "80Gi"}, "compute": {"value": "100"}}}


def mps(**values):
    return {"sharing": {"strategy": "MPS", "mps": values}}


def consumed(memory="10Gi", compute="25"):
    amounts = {k: v for k, v in (("memory", memory), ("compute", compute)) if v is not None}
    return {"consumedCapacity": amounts, "shareID": "s"}


def test_the_request_comes_from_consumed_capacity():
    share = share_limits.gpu_share(consumed(), {})
    assert share == {"request": {"memory": 10 * GIB, "compute": 25}, "limit": {"memory": 10 * GIB, "compute": 25}}


def test_the_request_comes_from_the_gpu_config_without_consumed_capacity():
    cfg = mps(pinnedDeviceMemoryLimit=8 * GIB, activeThreadPercentage=30, limits={"memory": 16 * GIB})
    assert share_limits.gpu_share({}, cfg) == {
        "request": {"memory": 8 * GIB, "compute": 30},
        "limit": {"memory": 16 * GIB, "compute": 30},
    }


def test_consumed_capacity_wins_per_key_and_a_key_it_lacks_comes_from_the_config():
    cfg = mps(pinnedDeviceMemoryLimit=8 * GIB, activeThreadPercentage=30)
    result = {"consumedCapacity": {"compute": "40"}}
    assert share_limits.gpu_share(result, cfg)["request"] == {"memory": 8 * GIB, "compute": 40}


def test_each_limit_key_stands_alone_and_unknown_keys_are_absent():
    share = share_limits.gpu_share(consumed(), mps(limits={"compute": 90}))
    assert share["limit"] == {"memory": 10 * GIB, "compute": 90}
    bare = share_limits.gpu_share({"consumedCapacity": {"compute": "10"}}, mps(limits={"memory": 4 * GIB}))
    assert bare == {"request": {"compute": 10}, "limit": {"memory": 4 * GIB, "compute": 10}}


@pytest.mark.parametrize(
    ("result", "cfg"),
    [
        ({}, {}),
        ({}, {"sharing": {"strategy": "TimeSlicing", "timeSlice": "Long"}}),
        ({}, {"sharing": {"strategy": "TimeSlicing", "mps": {"activeThreadPercentage": 50}}}),
        ({}, {"sharing": {"strategy": "MPS"}}),  # pods share the claim's GPU under MPS, no share of their own
        ({"consumedCapacity": {}}, {}),
    ],
)
def test_a_whole_gpu_has_no_share(result, cfg):
    assert share_limits.gpu_share(result, cfg) is None


@pytest.mark.parametrize("strategy", ["TimeSlicing", "MPS"])
def test_limits_on_a_whole_gpu_are_refused(strategy):
    cfg = {"sharing": {"strategy": strategy, "mps": {"limits": {"memory": 40 * GIB}}}}
    with pytest.raises(ConfigError) as info:
        share_limits.gpu_share({}, cfg, WHERE)
    assert str(info.value).startswith(f"{WHERE}: sharing.mps.limits is set, but this GPU is not shared")


@pytest.mark.parametrize(
    ("limits", "needle"),
    [
        ({"memory": 8 * GIB}, "sharing.mps.limits.memory 8Gi is below the request 10Gi"),
        ({"memory": 10 * GIB - 1}, f"sharing.mps.limits.memory {10 * GIB - 1} bytes is below the request 10Gi"),
        ({"memory": 512 * 2**20}, "sharing.mps.limits.memory 512Mi is below the request 10Gi"),
        ({"compute": 20}, "sharing.mps.limits.compute 20% is below the request 25%"),
    ],
)
def test_a_limit_below_the_request_is_refused(limits, needle):
    with pytest.raises(ConfigError) as info:
        share_limits.gpu_share(consumed(), mps(limits=limits), WHERE)
    assert str(info.value) == f"{WHERE}: {needle}; a limit is at least the request"


def test_a_limit_equal_to_the_request_is_accepted():
    share = share_limits.gpu_share(consumed(), mps(limits={"memory": 10 * GIB, "compute": 25}))
    assert share["limit"] == share["request"]


@pytest.mark.parametrize("compute", ["0", "101", "half", "2.5"])
def test_a_consumed_compute_that_is_no_percent_is_refused(compute):
    with pytest.raises(ConfigError, match=r"consumedCapacity\.compute"):
        share_limits.gpu_share(consumed(compute=compute), {})


def test_the_published_memory():
    assert share_limits.published_memory(GPU_80GI) == 80 * GIB
    assert share_limits.published_memory({"capacity": {"compute": {"value": "100"}}}) is None
    assert share_limits.published_memory({"capacity": {"memory": {"value": "1.5Ti"}}}) == 3 * 2**39
    assert share_limits.published_memory({"capacity": {"memory": {"value": "lots"}}}) is None
    assert share_limits.published_memory(None) is None


def test_a_memory_limit_within_the_gpu_is_accepted_up_to_all_of_it():
    cfg = mps(limits={"memory": 80 * GIB})
    share = share_limits.checked_share(consumed(), cfg, GPU_80GI, WHERE, "claim default/c (u)")
    assert share["limit"]["memory"] == 80 * GIB


def test_a_memory_limit_above_the_gpu_is_refused_naming_the_request():
    cfg = mps(limits={"memory": 96 * GIB})
    with pytest.raises(ConfigError) as info:
        share_limits.checked_share(consumed(), cfg, GPU_80GI, WHERE, "claim default/c (u)")
    assert str(info.value) == (f"{WHERE}: sharing.mps.limits.memory 96Gi (request 10Gi) is above the GPU's memory 80Gi")
    with pytest.raises(ConfigError, match=r"memory 96Gi is above the GPU's memory 80Gi$"):
        share_limits.checked_share(consumed(memory=None), cfg, GPU_80GI, WHERE, "claim default/c (u)")


def test_a_request_derived_limit_is_not_weighed_against_the_gpu():
    cfg = mps(pinnedDeviceMemoryLimit=96 * GIB)  # accepted before thin provisioning: unchanged
    assert share_limits.checked_share({}, cfg, GPU_80GI, WHERE, "c")["limit"] == {"memory": 96 * GIB}


def test_an_unknown_gpu_memory_is_said_and_only_the_provable_is_refused(caplog):
    unknown = {"name": "gpu-0000-18-00-0", "capacity": {"compute": {"value": "100"}}}
    cfg = mps(limits={"memory": 500 * GIB})
    with caplog.at_level(logging.WARNING, logger="aligned_dra_driver.sharing.limits"):
        share = share_limits.checked_share(consumed(), cfg, unknown, WHERE, "claim default/c (u)")
    assert share["limit"]["memory"] == 500 * GIB
    assert caplog.messages == [
        f"claim default/c (u): {WHERE}: the GPU's memory is not known (not published), so "
        "sharing.mps.limits.memory 500Gi is not checked against it"
    ]
    with pytest.raises(ConfigError, match="below the request"):
        share_limits.checked_share(consumed(), mps(limits={"memory": GIB}), unknown, WHERE, "c")


def test_checked_share_of_a_whole_gpu_is_none():
    assert share_limits.checked_share({}, {}, GPU_80GI, WHERE, "c") is None


def test_time_slicing_on_a_share_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match=r"^results\[0\].*sharing\.strategy is TimeSlicing.*consumedCapacity"):
        share_limits.gpu_share(consumed(), {"sharing": {"strategy": "TimeSlicing"}}, WHERE.split(" ", maxsplit=1)[0])
    # a whole GPU time-sliced is what TimeSlicing is for
    assert share_limits.gpu_share({}, {"sharing": {"strategy": "TimeSlicing", "timeSlice": "Long"}}) is None


def _claim(capacity=None, sub=False):
    request = {"deviceClassName": "aligned-gpu", **({"capacity": {"requests": capacity}} if capacity else {})}
    entry = (
        {"name": "gpu", "firstAvailable": [{"name": "big", **request}]} if sub else {"name": "gpu", "exactly": request}
    )
    return {"spec": {"devices": {"requests": [entry]}}}


@pytest.mark.parametrize(
    ("claim", "request_name", "field"),
    [
        (_claim({"compute": "25"}), "gpu", r"spec\.devices\.requests\[gpu\]\.exactly\.capacity\.requests\.memory"),
        (_claim(), "gpu", r"spec\.devices\.requests\[gpu\]\.exactly"),
        (_claim({"compute": "25"}, sub=True), "gpu/big", r"requests\[gpu\]\.firstAvailable\[big\]\.capacity"),
    ],
)
def test_a_share_that_asked_for_no_memory_is_refused_saying_to_ask(claim, request_name, field):
    result = {**consumed(memory="1Gi"), "request": request_name}
    with pytest.raises(ConfigError, match=field + r".*default of '1Gi'.*ask for the memory it needs"):
        share_limits.checked_share(result, {}, GPU_80GI, WHERE, "claim default/c (u)", claim)


def test_a_share_that_asked_for_memory_or_a_gpu_without_memory_capacity_is_prepared():
    asked = {**consumed(memory="1Gi"), "request": "gpu"}
    assert share_limits.checked_share(asked, {}, GPU_80GI, WHERE, "c", _claim({"memory": "1Gi"}))["request"] == {
        "memory": GIB,
        "compute": 25,
    }
    compute_only_gpu = {**consumed(memory=None), "request": "gpu"}  # no memory capacity published: none consumed
    assert share_limits.checked_share(compute_only_gpu, {}, None, WHERE, "c", _claim({"compute": "25"})) is not None
