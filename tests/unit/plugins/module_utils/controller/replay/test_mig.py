# SPDX-License-Identifier: Apache-2.0
"""The replay's ``mig`` policy: pods rounded up to the smallest profile, placed by the driver's device order
(first fit) and by a fragmentation-aware order, stranded slices, every placement listed."""

from __future__ import annotations

import itertools
import random

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import mig as mig_engine
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import result as replay_result
from ansible_collections.aligned.dra.tests.support.sites import mig_slices as nvidia_published
from ansible_collections.aligned.dra.tests.support.sites import replay_mig
from ansible_collections.aligned.dra.tests.support.sites.replay_mig import A100_40, DYNAMIC, GIB, H100

_topology, _mig = replay_mig.topology, replay_mig.replay_mig


def _where(order: dict) -> list[tuple]:
    return [(p["pod"], p["node"], p["gpu"], p["profile"], p["start"]) for p in order["placements"]]


def test_a_share_is_rounded_up_to_the_smallest_profile_by_memory_else_by_compute(tmp_path):
    rows = [
        "by-memory,0,,0.1,15Gi",  # 15 GiB: 1g.20gb, whatever its share
        "by-compute,1,,0.25,",  # a quarter of 7 compute slices: 2 slices, 2g.20gb
        "tenth,2,,0.1,",  # 0.7 slice: 1g.10gb
        "half,3,,0.5,",  # 3.5 slices: 4g.40gb
        "big-memory,4,,0.1,30Gi",  # 3g.40gb: fewer memory slices than 4g.40gb
    ]
    run = _mig(tmp_path, rows, {"n1": (H100, 4, 0)}, {"n1": DYNAMIC})
    placed = {p["pod"]: (p["profile"], p["sized_by"]) for p in run["mig"]["orders"]["first_fit"]["placements"]}
    assert placed == {
        "by-memory": ("1g.20gb", "gpu_memory"),
        "by-compute": ("2g.20gb", "compute_share"),
        "tenth": ("1g.10gb", "compute_share"),
        "half": ("4g.40gb", "compute_share"),
        "big-memory": ("3g.40gb", "gpu_memory"),
    }
    assert run["mig"]["orders"]["first_fit"]["sized_by"] == {"compute_share": 3, "gpu_memory": 2}


def test_measured_peak_use_sizes_a_pod_before_its_gpu_memory(tmp_path):
    (tmp_path / "usage.csv").write_text("pod,timestamp,memory_used_bytes\na,0,4294967296\na,5,34359738368\n")
    run = _mig(
        tmp_path,
        ["a,0,10,0.1,5Gi", "b,0,10,0.1,5Gi"],
        {"n1": (H100, 1, 0)},
        {"n1": DYNAMIC},
        mode="timeline",
        usage=str(tmp_path / "usage.csv"),
        gpu_memory="80Gi",
    )
    placed = {p["pod"]: (p["profile"], p["sized_by"]) for p in run["mig"]["orders"]["first_fit"]["placements"]}
    assert placed == {"a": ("3g.40gb", "measured"), "b": ("1g.10gb", "gpu_memory")}  # a's peak: 32 GiB
    assert run["mig"]["sizing"]["measured_pods"] == 1


def test_first_fit_follows_the_drivers_order_so_a_4g_still_fits_after_three_1g(tmp_path):
    rows = ["a,0,,0.1,4Gi", "b,1,,0.1,4Gi", "c,2,,0.1,4Gi", "d,3,,0.1,20Gi"]
    run = _mig(tmp_path, rows, {"n1": (A100_40, 1, 0)}, {"n1": DYNAMIC})
    where = _where(run["mig"]["orders"]["first_fit"])
    assert where == [
        ("a", "n1", "0000:07:00.0", "1g.5gb", 6),
        ("b", "n1", "0000:07:00.0", "1g.5gb", 5),
        ("c", "n1", "0000:07:00.0", "1g.5gb", 4),
        ("d", "n1", "0000:07:00.0", "3g.20gb", 0),  # 20 GiB: the smallest, 3g.20gb, at the only free start
    ]
    first = run["mig"]["orders"]["first_fit"]["placements"][0]
    assert first["device"] == "gpu-0000-07-00-0-mig-1g-5gb-6"
    assert run["pods_placed"] == 4 and run["first_unplaced"] is None and run["gpus_total"] == 1


def test_fragmentation_aware_keeps_a_free_gpu_whole_where_first_fit_strands_it(tmp_path):
    # two H100s on one node; x and y fill GPU 0, z takes a 1g on GPU 1; x and y leave; w (1g) comes, then v
    # needs a GPU whole: first fit put w on GPU 0 (the first in order), fragmentation-aware beside z
    rows = [
        "x,0,30,0.55,",  # 4g.40gb
        "y,1,30,0.4,",  # 3g.40gb
        "z,2,,0.1,",  # 1g.10gb
        "w,40,,0.1,",
        "v,50,,1,",
    ]
    run = _mig(tmp_path, rows, {"n1": (H100, 2, 0)}, {"n1": DYNAMIC}, mode="timeline")
    first, aware = run["mig"]["orders"]["first_fit"], run["mig"]["orders"]["fragmentation_aware"]
    # docs/replay.md's worked example: x and y fill GPU 0, z on GPU 1 at the driver's first 1g placement
    for order in (first, aware):
        assert _where(order)[:3] == [
            ("x", "n1", "0000:07:00.0", "4g.40gb", 0),
            ("y", "n1", "0000:07:00.0", "3g.40gb", 4),
            ("z", "n1", "0000:08:00.0", "1g.10gb", 6),
        ]
    assert ("w", "n1", "0000:07:00.0", "1g.10gb", 6) in _where(first)
    assert ("w", "n1", "0000:08:00.0", "1g.10gb", 5) in _where(aware)
    assert ("v", "n1", "0000:07:00.0", None, 0) in _where(aware)
    assert first["gpu_pods_placed"] == 4 and aware["gpu_pods_placed"] == 5
    assert [p["pod"] for p in first["not_placed"]] == ["v"]
    # stranded: when v found no GPU whole, 7 memory slices free on each GPU
    assert first["stranded"] == {"pod": "v", "time": 50, "slices": 14, "gpus": 2}
    assert aware["stranded"] is None and aware["not_placed"] == []
    assert "no free GPU whole device (14 memory slices free on 2 GPUs)" == first["not_placed"][0]["reason"]
    assert run["first_unplaced"]["name"] == "v" and run["timeline"]["unstarted"] == ["v"]
    assert first["gpus_needed"]["peak"] == 2 and aware["gpus_needed"]["peak"] == 2


def test_fragmentation_aware_takes_a_static_instance_before_cutting_a_dynamic_gpu(tmp_path):
    static = {
        "mode": "static",
        "layout": "small",
        "mig_configs": {"small": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]},
    }
    rows = ["small,0,,0.1,", "whole,1,,1,"]
    run = _mig(tmp_path, rows, {"a": (H100, 1, 0), "b": (H100, 1, 0)}, {"a": DYNAMIC, "b": static})
    first, aware = run["mig"]["orders"]["first_fit"], run["mig"]["orders"]["fragmentation_aware"]
    assert _where(first) == [("small", "a", "0000:07:00.0", "1g.10gb", 6)]
    assert first["not_placed"][0]["pod"] == "whole" and first["pods_not_tried"] == 0
    # a's 7 free slices and b's 7 free 1g instances
    assert first["stranded"] == {"pod": "whole", "time": 1, "slices": 14, "gpus": 2}
    assert _where(aware) == [("small", "b", "0000:07:00.0", "1g.10gb", 0), ("whole", "a", "0000:07:00.0", None, 0)]
    assert aware["profiles"] == {"1g.10gb": 1, "GPU whole": 1}
    assert run["mig"]["gpu_models"] == {"H100-SXM5-80GB (dynamic)": 1, "H100-SXM5-80GB (static)": 1}


def test_a_static_gpu_takes_only_its_instances_and_no_whole_gpu(tmp_path):
    static = {
        "mode": "static",
        "layout": "half",
        "mig_configs": {"half": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}]},
    }
    rows = ["a,0,,0.1,", "b,1,,0.4,", "c,2,,2,"]
    run = _mig(tmp_path, rows, {"n1": (A100_40, 2, 0)}, {"n1": static}, mode="timeline")
    first = run["mig"]["orders"]["first_fit"]
    assert _where(first) == [("b", "n1", "0000:07:00.0", "3g.20gb", 0)]
    reasons = {p["pod"]: p["reason"] for p in first["not_placed"]}
    assert reasons["a"].startswith("no free 1g.5gb device")  # the layout has no 1g instance
    assert reasons["c"] == (
        "a pod of whole GPUs needs the GPU whole, which only dynamic MIG GPUs of Hopper and newer publish"
    )


def test_a_dynamic_a100_takes_no_pod_whole_where_an_h100_does(tmp_path):
    """Ampere changes MIG mode only with a reset: its GPU whole is not published, so whole-GPU pods and shares
    no profile holds go to the H100; on an A100-only site they are not placed, with the reason."""
    rows = ["whole,0,,1,", "small,1,,0.1,"]
    run = _mig(tmp_path, rows, {"a": (A100_40, 1, 0), "h": (H100, 1, 0)}, {"a": DYNAMIC, "h": DYNAMIC})
    first = run["mig"]["orders"]["first_fit"]
    assert _where(first) == [("whole", "h", "0000:07:00.0", None, 0), ("small", "a", "0000:07:00.0", "1g.5gb", 6)]
    assert first["not_placed"] == []
    alone = tmp_path / "alone"
    alone.mkdir()
    rows = ["whole,0,,1,", "big,1,,0.5,45Gi", "small,2,,0.1,"]
    run = _mig(alone, rows, {"a": (A100_40, 2, 0)}, {"a": DYNAMIC}, mode="timeline")
    first = run["mig"]["orders"]["first_fit"]
    reasons = {p["pod"]: p["reason"] for p in first["not_placed"]}
    assert reasons == {
        "whole": "a pod of whole GPUs needs the GPU whole, which only dynamic MIG GPUs of Hopper and newer publish",
        "big": "larger than every profile and every memory of a GPU published whole",
    }
    assert _where(first) == [("small", "a", "0000:07:00.0", "1g.5gb", 6)]
    assert "GPU whole" not in first["profiles"]


def test_whole_gpu_pods_take_dynamic_gpus_whole_on_one_node_and_each_is_listed(tmp_path):
    rows = ["pair,0,,2,", "big,1,,0.5,60Gi", "huge,2,,0.5,90Gi"]
    run = _mig(tmp_path, rows, {"n1": (H100, 3, 0)}, {"n1": DYNAMIC})
    first = run["mig"]["orders"]["first_fit"]
    assert _where(first) == [
        ("pair", "n1", "0000:07:00.0", None, 0),
        ("pair", "n1", "0000:08:00.0", None, 0),
        ("big", "n1", "0000:09:00.0", "7g.80gb", 0),
    ]
    assert all(p["size"] == 8 for p in first["placements"])
    assert [p["pod"] for p in first["not_placed"]] == ["huge"] and run["first_unplaced"]["name"] == "huge"
    assert run["pods_placed"] == 2 and run["shares_of"]["allocated_milli"] == 3000


def test_a_share_larger_than_every_profile_and_the_gpu_is_not_placed_with_the_reason(tmp_path):
    run = _mig(tmp_path, ["huge,0,,0.5,90Gi"], {"n1": (H100, 1, 0)}, {"n1": DYNAMIC})
    first = run["mig"]["orders"]["first_fit"]
    assert first["not_placed"][0]["reason"] == "larger than every profile and every memory of a GPU published whole"
    assert run["first_unplaced"]["needs"].startswith(
        "90 GiB of memory (gpu_memory) and 500 milli of a GPU's compute: nothing on H100-SXM5-80GB"
    )


def test_gpus_without_mig_are_not_used_and_said(tmp_path):
    run = _mig(tmp_path, ["a,0,,0.1,"], {"n1": (H100, 2, 2), "cpu": (H100, 0, 0), "n2": (H100, 0, 4)}, {"n1": DYNAMIC})
    assert run["gpus_total"] == 2 and run["mig"]["gpus"] == 2 and run["mig"]["gpus_without_mig"] == 6
    assert "policy mig: 6 GPU(s) of the site without MIG are not used (MIG GPUs only)" in run["nodes"]["notes"]
    assert run["mig"]["sources"] == {"documented": 2}


def test_mig_needs_settings_and_a_plan(tmp_path):
    with pytest.raises(ReplayError, match="no host of mig has aligned_dra_mig"):
        _mig(tmp_path, ["a,0,,0.1,"], {"n1": (H100, 1, 0)}, {"n1": {"mode": "off"}})
    trace = str(tmp_path / "trace.csv")
    (tmp_path / "nodes.csv").write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,1000,1000,1,\n")
    with pytest.raises(ReplayError, match="not on an openb node list"):
        replay_result.replay(trace, "csv", "mig", nodes=str(tmp_path / "nodes.csv"), mig={"n1": DYNAMIC})


# NVIDIA's MIG user guide ("Supported MIG Profiles", and ``nvidia-smi mig -lgipp`` as the GPUs answer it), as
# tests/support/sites/mig_slices.py writes it out (no code of the collection): per profile its compute slices, its
# memory in GiB (the figure of its name, as the documented geometry gives it) and its placements (starts, size in
# memory slices). ``whole``: whether the driver publishes the GPU whole in dynamic MIG (Hopper changes MIG mode
# live; Ampere only with a GPU reset).
NVIDIA = {
    model: {
        "whole": not ampere,
        "profiles": {
            p.name: (p.compute_slices, int(p.name.split(".")[1].split("gb")[0]), p.starts, p.size) for p in profiles
        },
    }
    for model, (ampere, profiles) in (
        ("A100-SXM4-40GB", nvidia_published.PROFILES[nvidia_published.A100_40GB]),
        ("H100-SXM5-80GB", nvidia_published.PROFILES[nvidia_published.H100_80GB]),
    )
}
SLICES = 8
HEADROOM = 0.05


def _profile_for(model: str, sizing: tuple) -> str | None | bool:
    """The rule of docs/replay.md, from the table: the smallest profile (memory slices, then compute slices; no
    media extension) with the memory (a measured peak leaving the headroom free) and the compute slices; else
    the GPU whole where it is published and the memory fits; else False. None: the GPU whole."""
    table = NVIDIA[model]
    basis, memory, milli = sizing
    if basis == "whole":
        return None if table["whole"] else False
    room = HEADROOM if basis == "measured" else 0.0
    slices_needed = -(-milli * 7 // 1000)
    ranked = sorted(
        (size, slices, gib, name) for name, (slices, gib, _starts, size) in table["profiles"].items() if "+" not in name
    )
    for _size, slices, gib, name in ranked:
        if (memory is None or memory <= gib * GIB * (1 - room)) and slices >= slices_needed:
            return name
    largest = max(gib for _slices, gib, _starts, _size in table["profiles"].values())
    if table["whole"] and (memory is None or memory <= largest * GIB * (1 - room)):
        return None
    return False


def _preferred(model: str, name: str) -> list[int]:
    """docs/replay.md: a profile's placements, those under the fewest placements of larger profiles first, ties
    by the higher start."""
    table = NVIDIA[model]["profiles"]
    _slices, _gib, starts, size = table[name]
    larger = [(s, z) for _c, _g, others, z in table.values() if z > size for s in others]

    def under(start: int) -> int:
        return sum(1 for s, z in larger if s < start + size and start < s + z)

    return sorted(starts, key=lambda start: (under(start), -start))


def _most_disjoint(free: set[int], size: int, starts: set[int]) -> int:
    """The most placements of ``size`` at ``starts`` that fit on the ``free`` slices at once, every subset tried."""
    fitting = [start for start in sorted(starts) if set(range(start, start + size)) <= free]
    best = 0
    for count in range(1, len(fitting) + 1):
        for chosen in itertools.combinations(fitting, count):
            cells = [c for start in chosen for c in range(start, start + size)]
            if len(cells) == len(set(cells)):
                best = count
    return best


class _World:
    """The site as the test sees it, apart from the replay's own model: per GPU its model, mode, used slices
    (dynamic) or static instances with a used mark."""

    def __init__(self, nodes: list[tuple[str, list[dict]]]) -> None:
        self.gpus = []
        for _node, gpus in nodes:
            for gpu in gpus:
                instances = sorted(gpu["instances"] or [], key=lambda i: (i["start"], i["profile"]))
                self.gpus.append(
                    {
                        "node": _node,
                        "model": gpu["model"],
                        "mode": gpu["mode"],
                        "used": set(),
                        "instances": [dict(i, used=False) for i in instances],
                    }
                )

    def devices(self, gpu: dict, target: str | None) -> list[tuple[int, str | None, int, int]]:
        """The free devices of ``target`` on ``gpu`` in the driver's order: ``(position, profile, start, size)``."""
        if gpu["mode"] == "static":
            found = [
                (i, x["profile"], x["start"], x["size"])
                for i, x in enumerate(gpu["instances"])
                if x["profile"] == target and not x["used"]
            ]
            return found
        if target is None:
            return [(0, None, 0, SLICES)] if not gpu["used"] else []
        size = NVIDIA[gpu["model"]]["profiles"][target][3]
        return [
            (i, target, start, size)
            for i, start in enumerate(_preferred(gpu["model"], target))
            if not set(range(start, start + size)) & gpu["used"]
        ]

    def counts(self, gpu: dict, used: set[int], instances_used: set[int]) -> tuple[int, ...]:
        """Per size, largest first: the disjoint devices still to be had (static: free instances)."""
        if gpu["mode"] == "static":
            return tuple(
                sum(1 for i, x in enumerate(gpu["instances"]) if x["size"] == size and i not in instances_used)
                for size in (8, 4, 2, 1)
            )
        free = set(range(SLICES)) - used
        table = NVIDIA[gpu["model"]]["profiles"]
        out = []
        for size in (8, 4, 2, 1):
            starts = {s for _c, _g, starts, z in table.values() if z == size for s in starts}
            out.append(_most_disjoint(free, size, starts))
        return tuple(out)

    def expected(self, sizing: tuple, order: str) -> tuple[int, str | None, int] | None:
        """``(GPU position, profile, start)`` the pod takes, reading every GPU and device."""
        found = None
        for position, gpu in enumerate(self.gpus):
            target = _profile_for(gpu["model"], sizing)
            if target is False:
                continue
            for index, profile, start, size in self.devices(gpu, target):
                if order == mig_engine.FIRST_FIT:
                    key = (position, index)
                else:
                    used_now = {i for i, x in enumerate(gpu["instances"]) if x["used"]}
                    cells = set(range(start, start + size))
                    after_used = gpu["used"] | cells if gpu["mode"] == "dynamic" else gpu["used"]
                    after_instances = used_now | ({index} if gpu["mode"] == "static" else set())
                    before = self.counts(gpu, gpu["used"], used_now)
                    after = self.counts(gpu, after_used, after_instances)
                    loss = tuple(b - a for b, a in zip(before, after, strict=True))
                    if gpu["mode"] == "dynamic":
                        free_after = SLICES - len(after_used)
                    else:
                        free_after = sum(x["size"] for i, x in enumerate(gpu["instances"]) if i not in after_instances)
                    key = (loss, free_after, position, index)
                if found is None or key < found[0]:
                    found = (key, (position, profile, start, size))
        return None if found is None else found[1]

    def take(self, where: tuple, sign: bool) -> None:
        position, profile, start, size = where
        gpu = self.gpus[position]
        if gpu["mode"] == "static":
            instance = next(x for x in gpu["instances"] if x["start"] == start and x["profile"] == profile)
            instance["used"] = sign
        elif sign:
            gpu["used"] |= set(range(start, start + size))
        else:
            gpu["used"] -= set(range(start, start + size))


def _sizing(rng: random.Random) -> tuple:
    milli = rng.choice([100, 143, 250, 400, 550, 571, 800, 999])
    memory = rng.choice([3, 4.8, 5, 9.6, 10, 15, 19, 20, 38, 40, 45, 76, 79]) * GIB
    return rng.choice(
        [
            ("compute_share", None, milli),
            ("gpu_memory", int(memory), milli),
            ("measured", int(memory), milli),
            ("whole", None, 1),
        ]
    )


@pytest.mark.parametrize("seed", range(8))
def test_the_search_places_as_nvidias_placement_rules_read_by_brute_force(seed):
    """The independent side: profiles, placements and sizes from NVIDIA's table above (not the replay's
    ``Kind``), every GPU and every device read per pod, the disjoint devices per size counted by trying every
    subset of placements. Mixed: dynamic A100 (no GPU whole), a static A100 layout, dynamic H100."""
    rng = random.Random(seed)
    static = {
        "mode": "static",
        "layout": "mixed",
        "mig_configs": {"mixed": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 3, "2g.10gb": 2}}]},
    }
    shapes = [(A100_40, DYNAMIC), (A100_40, static), (H100, DYNAMIC), (H100, DYNAMIC)]
    nodes = [(f"n{i}", mig_model.node_gpus(_topology(*[shapes[i][0], 2]), shapes[i][1])) for i in range(4)]
    site, world = mig_engine.Site(nodes, HEADROOM), _World(nodes)
    held = []
    for step in range(150):
        if held and rng.random() < 0.35:
            (gpu, slot), where = held.pop(rng.randrange(len(held)))
            site.give_back(gpu, slot)
            world.take(where, False)
            continue
        sizing = _sizing(rng)
        order = rng.choice(mig_engine.ORDERS)
        found, expected = site.find_one(sizing, order), world.expected(sizing, order)
        assert (found is None) == (expected is None), (step, sizing, order)
        if found is not None:
            gpu, slot = found
            assert (gpu.position, slot.profile, slot.start, slot.size) == expected, (step, sizing, order)
            site.take(gpu, slot)
            world.take(expected, True)
            held.append((found, expected))
    assert site.gpus_in_use() == len({gpu.position for (gpu, _slot), _where in held})
    free = sum(gpu.kind.free_slices(gpu.state) for gpu in site.gpus)
    assert site.free_slices() == (free, sum(1 for g in site.gpus if g.kind.free_slices(g.state)))


def test_the_brute_force_tables_agree_with_the_loss_the_docs_work_out():
    """The table side of the brute force on docs/replay.md's worked example: on an H100 cut by a 1g at slice 6,
    a 1g at slice 5 loses one 2-slice device and one 1-slice device, a 1g on an empty GPU its 8-slice device."""
    world = _World([("n", [{"model": "H100-SXM5-80GB", "mode": "dynamic", "instances": []}])])
    gpu = world.gpus[0]
    assert world.counts(gpu, {6}, set()) == (0, 1, 3, 6)
    assert world.counts(gpu, {5, 6}, set()) == (0, 1, 2, 5)
    assert world.counts(gpu, set(), set()) == (1, 2, 4, 7)
    assert world.counts(gpu, {6}, set())[0] < world.counts(gpu, set(), set())[0]
