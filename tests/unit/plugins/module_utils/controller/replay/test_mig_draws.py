# SPDX-License-Identifier: Apache-2.0
"""First fit with the scheduler's random tie-breaks: each pod's node drawn uniformly among the nodes that can take
it, the driver's order on the node; seeded draws give a range, the name order marked as the best case."""

from __future__ import annotations

import random
import statistics

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import mig as mig_engine
from ansible_collections.aligned.dra.tests.support.sites.replay_mig import (
    A100_40,
    DYNAMIC,
    H100,
    replay_mig,
    topology,
)


def _site(shapes: list[tuple[str, int]]) -> mig_engine.Site:
    return mig_engine.Site(
        [(f"n{i}", mig_model.node_gpus(topology(device, count), DYNAMIC)) for i, (device, count) in enumerate(shapes)]
    )


def test_each_node_that_can_take_the_pod_is_drawn_alike_and_the_node_decides_by_the_drivers_order():
    """Three nodes of 1, 2 and 4 H100s, n1's first GPU full: drawing a GPU alone would favour n2 four to one;
    the draw is per node. On the node, the first GPU in PCI order with a free device, its first placement."""
    site = _site([(H100, 1), (H100, 2), (H100, 4)])
    whole = ("whole", None, 1)
    site.take(site.gpus[1], site.gpus[1].kind.fit(0, None))  # n1's first GPU taken whole
    sizing = ("compute_share", None, 100)  # a 1g.10gb
    rng = random.Random(5)
    seen = {"n0": 0, "n1": 0, "n2": 0}
    for _draw in range(3000):
        gpu, slot = site.find_one(sizing, mig_engine.FIRST_FIT, rng)
        seen[gpu.node] += 1
        first = next(g for g in site.nodes[gpu.node_index][1] if g.state == 0 or g.kind.fit(g.state, "1g.10gb"))
        assert gpu is first and slot is gpu.kind.fit(gpu.state, "1g.10gb")
    assert all(900 <= count <= 1100 for count in seen.values()), seen
    # pods of whole GPUs: drawn among the nodes with enough GPUs whole, the node's first ones
    picked = {tuple(g.position for g, _s in site.find_whole(2, mig_engine.FIRST_FIT, rng)) for _i in range(200)}
    assert picked == {(3, 4)}  # n1 has one GPU whole left, n2 the first two of its four
    picked = {site.find_one(whole, mig_engine.FIRST_FIT, rng)[0].position for _i in range(300)}
    assert picked == {0, 2, 3}  # each node's first GPU whole
    assert site.find_whole(5, mig_engine.FIRST_FIT, rng) is None


def test_a_node_without_a_free_device_is_never_drawn():
    site = _site([(A100_40, 1), (H100, 1)])  # the A100 publishes no GPU whole (Ampere)
    rng = random.Random(1)
    assert {site.find_one(("whole", None, 1), mig_engine.FIRST_FIT, rng)[0].node for _i in range(50)} == {"n1"}
    site.take(site.gpus[1], site.gpus[1].kind.fit(0, None))
    assert site.find_one(("whole", None, 1), mig_engine.FIRST_FIT, rng) is None


def _rows() -> list[str]:
    """Shares and whole GPUs arriving and leaving on four nodes of two H100s: where the random draws cut a GPU
    the name order keeps whole, fewer whole-GPU pods start."""
    rng = random.Random(11)
    rows = []
    for index in range(60):
        gpus = rng.choice(["0.1", "0.25", "0.4", "1", "2"])
        start = index * 5
        rows.append(f"p{index:02d},{start},{start + rng.choice([20, 60, 200])},{gpus},")
    return rows


def test_the_draws_give_a_seeded_range_with_the_name_order_as_the_best_case(tmp_path):
    nodes = {f"n{i}": (H100, 2, 0) for i in range(4)}
    mig = {name: DYNAMIC for name in nodes}
    run = replay_mig(tmp_path, _rows(), nodes, mig, mode="timeline", seed=7, draws=12)
    spread = run["mig"]["first_fit_range"]
    first = run["mig"]["orders"]["first_fit"]
    assert spread["seed"] == 7 and spread["draws"] == 12 and len(spread["runs"]) == 12
    placed = [r["gpu_pods_placed"] for r in spread["runs"]]
    peaks = [r["gpus_needed_peak"] for r in spread["runs"]]
    assert spread["gpu_pods_placed"] == {
        "min": min(placed),
        "median": (sorted(placed)[5] + sorted(placed)[6]) / 2,  # 12 draws: the mean of the middle two
        "max": max(placed),
    }
    assert spread["gpus_needed_peak"]["min"] == min(peaks) and spread["gpus_needed_peak"]["max"] == max(peaks)
    assert all(r["gpus_needed_mean"] is not None for r in spread["runs"]) and spread["gpus_needed_mean"]
    best = spread["best_case"]
    assert best["gpu_pods_placed"] == first["gpu_pods_placed"] and best["node_order"] == "name"
    assert best["draws_placing_more"] == sum(1 for count in placed if count > first["gpu_pods_placed"])
    assert best["draws_needing_fewer_gpus"] == sum(1 for peak in peaks if peak < first["gpus_needed"]["peak"])
    # the draws scatter shares and strand GPUs whole: most place fewer; the case says whether any placed more
    assert min(placed) < first["gpu_pods_placed"] and statistics.median(placed) < first["gpu_pods_placed"]
    beaten = best["draws_placing_more"]
    assert first["case"] == (
        f"nodes in name order: not the best case here, {beaten} of 12 draws placed more GPU pods"
        if beaten
        else "nodes in name order: the best case, no draw of 12 placed more GPU pods"
    )
    # deterministic for a seed, another seed draws otherwise; the name order's figures do not change
    (tmp_path / "again").mkdir()
    again = replay_mig(tmp_path / "again", _rows(), nodes, mig, mode="timeline", seed=7, draws=12)
    assert again["mig"]["first_fit_range"] == spread
    (tmp_path / "other").mkdir()
    other = replay_mig(tmp_path / "other", _rows(), nodes, mig, mode="timeline", seed=8, draws=12)
    assert other["mig"]["first_fit_range"]["runs"] != spread["runs"]
    assert other["mig"]["orders"] == run["mig"]["orders"] and other["pods_placed"] == run["pods_placed"]


def test_no_draws_no_range_and_saturation_has_no_mean(tmp_path):
    nodes = {"n0": (H100, 2, 0), "n1": (H100, 2, 0)}
    mig = {name: DYNAMIC for name in nodes}
    none = replay_mig(tmp_path, ["a,0,,0.1,", "b,1,,1,"], nodes, mig, draws=0)
    assert none["mig"]["first_fit_range"] is None
    (tmp_path / "sat").mkdir()
    saturated = replay_mig(tmp_path / "sat", ["a,0,,0.1,", "b,1,,1,"], nodes, mig, draws=3)
    spread = saturated["mig"]["first_fit_range"]
    assert spread["basis"] == "at saturation" and spread["gpus_needed_mean"] is None
    assert spread["gpu_pods_placed"] == {"min": 2, "median": 2, "max": 2}


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("seed", -1, "seed: -1 is out of range (at least 0)"),
        ("seed", 1.5, "seed: 1.5 is not a whole number"),
        ("draws", 1001, "draws: 1001 is out of range (0 to 1000)"),
        ("draws", "many", "draws: 'many' is not a whole number"),
    ],
)
def test_bad_seeds_and_draws_are_refused_naming_the_setting(tmp_path, option, value, message):
    with pytest.raises(ReplayError) as raised:
        replay_mig(tmp_path, ["a,0,,0.1,"], {"n1": (H100, 1, 0)}, {"n1": DYNAMIC}, **{option: value})
    assert str(raised.value).startswith(message)


def test_where_a_draw_beats_the_name_order_the_result_says_it_is_not_the_best_case(tmp_path):
    """Node a has an H100, node b an A100 (no GPU whole: Ampere). By name the share goes to a, and the pod of a
    whole GPU finds none; a draw that puts the share on b leaves a whole for it."""
    nodes = {"a": (H100, 1, 0), "b": (A100_40, 1, 0)}
    run = replay_mig(tmp_path, ["share,0,,0.1,", "whole,1,,1,"], nodes, {"a": DYNAMIC, "b": DYNAMIC}, draws=10)
    spread, first = run["mig"]["first_fit_range"], run["mig"]["orders"]["first_fit"]
    assert first["gpu_pods_placed"] == 1 and spread["gpu_pods_placed"]["max"] == 2
    beaten = sum(1 for r in spread["runs"] if r["gpu_pods_placed"] == 2)
    assert 0 < beaten < 10 and spread["best_case"]["draws_placing_more"] == beaten
    assert first["case"] == f"nodes in name order: not the best case here, {beaten} of 10 draws placed more GPU pods"
