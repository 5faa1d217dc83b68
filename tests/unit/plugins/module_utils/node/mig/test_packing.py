# SPDX-License-Identifier: Apache-2.0
"""node/mig/packing.py: placements for wanted instances, checked against a brute-force oracle on the fake
NVML's A100 and H100 geometry (read through nvml_state, as a node reads it), and the reasons it gives."""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.mig import nvml_state
from ansible_collections.aligned.dra.plugins.module_utils.node.mig.packing import PackingError, pack, placement_order
from ansible_collections.aligned.dra.tests.support.fakes.nvml import FakeNvml


def profiles_of(model):
    nvml = FakeNvml()
    nvml.add_gpu("0000:18:00.0", model=model)
    nvml.enable_mig("0000:18:00.0")
    nvml.nvmlInit()
    return nvml_state.read_gpu(nvml, "0000:18:00.0")["profiles"]


A100 = profiles_of("A100-SXM4-40GB")
H100 = profiles_of("H100-SXM5-80GB")


def existing(name, start, size):
    return {"profile": name, "placement": {"start": start, "size": size}}


def mask(start, size):
    return ((1 << size) - 1) << start


def fits(profiles, taken, wanted):
    """The oracle: some choice of offered placements, pairwise disjoint and disjoint from ``taken``."""
    items = [name for name, count in wanted.items() for _copy in range(count)]
    offered = {p["name"]: [mask(x["start"], x["size"]) for x in p["placements"]] for p in profiles}

    def go(index, used):
        if index == len(items):
            return True
        return any(not used & m and go(index + 1, used | m) for m in offered[items[index]])

    return go(0, taken)


def valid(profiles, olds, wanted, placed):
    by_name = {p["name"]: p for p in profiles}
    assert sorted(p["profile"] for p in placed) == sorted(n for n, c in wanted.items() for _copy in range(c))
    used = 0
    for old in olds:
        used |= mask(old["placement"]["start"], old["placement"]["size"])
    for p in placed:
        assert {"start": p["start"], "size": p["size"]} in by_name[p["profile"]]["placements"]
        assert p["profile_id"] == by_name[p["profile"]]["id"]
        assert not used & mask(p["start"], p["size"])
        used |= mask(p["start"], p["size"])


@pytest.mark.parametrize("profiles", [A100, H100], ids=["A100", "H100"])
def test_pack_places_exactly_what_fits_on_an_empty_gpu(profiles):
    names = [p["name"] for p in profiles]
    ranges = [range(min(p["instance_count"], 4) + 1) for p in profiles]
    checked = 0
    for counts in itertools.product(*ranges):
        wanted = dict(zip(names, counts, strict=True))
        if fits(profiles, 0, wanted):
            valid(profiles, [], wanted, pack(profiles, [], wanted))
            checked += 1
        else:
            with pytest.raises(PackingError):
                pack(profiles, [], wanted)
    assert checked > 20


@pytest.mark.parametrize("start", range(7))
def test_pack_works_around_an_existing_instance(start):
    olds = [existing("1g.5gb", start, 1)]
    for counts in itertools.product(range(4), range(3), range(2)):
        wanted = {"1g.5gb": counts[0], "2g.10gb": counts[1], "3g.20gb": counts[2]}
        if fits(A100, mask(start, 1), wanted):
            valid(A100, olds, wanted, pack(A100, olds, wanted))
        else:
            with pytest.raises(PackingError):
                pack(A100, olds, wanted)


def test_small_instances_leave_the_large_placements_free():
    assert [p["start"] for p in placement_order(A100, "1g.5gb")] == [6, 5, 4, 3, 2, 1, 0]
    assert [p["start"] for p in placement_order(A100, "3g.20gb")] == [4, 0]
    assert [p["start"] for p in placement_order(H100, "1g.20gb")][0] == 6
    for count in range(1, 4):
        small = pack(A100, [], {"1g.5gb": count})
        assert all(p["start"] >= 4 for p in small)
        olds = [existing("1g.5gb", p["start"], 1) for p in small]
        assert pack(A100, olds, {"4g.20gb": 1}) == [{"profile": "4g.20gb", "profile_id": 5, "start": 0, "size": 4}]
    assert [p["start"] for p in pack(H100, [], {"1g.10gb": 3})] == [4, 5, 6]


def test_the_reasons_name_what_was_wrong():
    with pytest.raises(PackingError, match=r"profile 2g.20gb is not one of this GPU's \(1g.5gb, 2g.10gb"):
        pack(A100, [], {"2g.20gb": 1})
    with pytest.raises(PackingError, match="none: MIG mode is off"):
        pack([], [], {"1g.5gb": 1})
    with pytest.raises(PackingError, match="whole number"):
        pack(A100, [], {"1g.5gb": -1})
    with pytest.raises(PackingError, match="3 3g.20gb wanted: the GPU holds at most 2"):
        pack(A100, [], {"3g.20gb": 3})
    with pytest.raises(PackingError, match="1 3g.20gb wanted beside 2 existing"):
        pack(A100, [existing("3g.20gb", 0, 4), existing("3g.20gb", 4, 4)], {"3g.20gb": 1})
    with pytest.raises(PackingError, match="need 9 memory slices, 8 of 8 are free"):
        pack(A100, [], {"3g.20gb": 2, "1g.5gb": 1})
    with pytest.raises(PackingError, match=r"no placement of 4g.20gb is free .*existing: 1g.5gb at 0 \(slices 0\)"):
        pack(A100, [existing("1g.5gb", 0, 1)], {"4g.20gb": 1})
    with pytest.raises(PackingError, match=r"at most 2 of the 3 .*2g.10gb only at slices 0-1, 2-3, 4-5"):
        pack(A100, [], {"4g.20gb": 1, "2g.10gb": 2})
