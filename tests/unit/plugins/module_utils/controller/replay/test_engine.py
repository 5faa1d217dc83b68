# SPDX-License-Identifier: Apache-2.0
"""The replay's placement rules on hand-worked traces, and the engine against a brute force on random ones.

Every rule of docs/replay.md ("Semantics") has a trace small enough to work
out by hand. The brute force reads every node for every pod and applies the
rules literally; the engine's buckets must give the same placements, the same
first pod left out and the same series on random small traces.
"""

from __future__ import annotations

import random

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import engine
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.nodes import NodeSpec
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import Pod


def pod(name, t=0, end=None, gpus=0, milli=None, cpu=0, mem=0, models=None) -> Pod:
    milli = (1000 if gpus else 0) if milli is None else milli
    return Pod(name, 2, cpu, mem, gpus, milli, tuple(models.split("|")) if models else None, t, end)


def node(name, gpus, cpu=None, mem=None, model=None) -> NodeSpec:
    return NodeSpec(name, cpu, mem, gpus, model)


def where(outcome: engine.Outcome) -> dict[str, str]:
    return {name: placed[0] for name, placed in outcome.placed.items()}


# ---------------------------------------------------------------- whole and fractional


def test_whole_rounds_a_share_up_to_one_gpu():
    pods = [pod("p1", gpus=1, milli=500), pod("p2", gpus=1, milli=500)]
    whole = engine.saturation(pods, [node("a", 1)], "whole", "pack")
    assert where(whole) == {"p1": "a"} and whole.first_unplaced[0].name == "p2"
    assert (whole.taken, whole.requested, whole.capacity) == (1000, 500, 1000)
    fractional = engine.saturation(pods, [node("a", 1)], "fractional", "pack")
    assert fractional.placed == {"p1": ("a", [(0, 500)]), "p2": ("a", [(0, 500)])}
    assert fractional.first_unplaced is None and (fractional.taken, fractional.requested) == (1000, 1000)


def test_fractional_shares_only_one_gpu_pods_below_1000():
    # two GPUs at half: whole GPUs each, asked for 2 x 500; one GPU at 1000 milli is a whole GPU
    pods = [pod("a-share", gpus=1, milli=300), pod("b-two-halves", gpus=2, milli=500), pod("c-full", gpus=1)]
    out = engine.saturation(pods, [node("n", 4)], "fractional", "pack")
    assert out.placed == {
        "a-share": ("n", [(0, 300)]),
        "b-two-halves": ("n", [(1, 1000), (2, 1000)]),
        "c-full": ("n", [(3, 1000)]),
    }
    assert (out.taken, out.requested) == (3300, 2300)
    assert engine.need_of(pods[1], "fractional").whole == 2


# ---------------------------------------------------------------- what a pod needs on a node


def test_a_pod_needs_its_cpu_and_memory_on_the_node():
    nodes = [node("a", 1, cpu=4000, mem=8192), node("b", 2, cpu=16000, mem=8192), node("c", 4, cpu=16000, mem=65536)]
    pods = [pod("big-cpu", gpus=1, cpu=8000, mem=4096), pod("big-mem", gpus=1, cpu=1000, mem=32768)]
    out = engine.saturation(pods, nodes, "whole", "pack")
    # pack would pick a (least free GPU) for both: CPU sends the first to b, memory the second to c
    assert where(out) == {"big-cpu": "b", "big-mem": "c"}


def test_gpu_spec_names_the_models_a_pod_accepts():
    nodes = [node("t4", 1, model="T4"), node("v100", 8, model="V100M32")]
    pods = [
        pod("any", t=0, gpus=1),
        pod("picky", t=1, gpus=1, models="V100M16|V100M32"),
        pod("t4", t=2, gpus=1, models="T4"),
    ]
    out = engine.saturation(pods, nodes, "whole", "pack")
    assert where(out) == {"any": "t4", "picky": "v100"}
    assert out.first_unplaced[0].name == "t4" and "a GPU model among T4" in out.first_unplaced[1]
    # a plan names no model: the spec is not applied
    unmatched = engine.saturation(pods, [node("x", 3)], "whole", "pack", models=False)
    assert len(unmatched.placed) == 3


# ---------------------------------------------------------------- pack and spread


def test_pack_takes_the_fullest_node_then_least_free_cpu_then_name():
    nodes = [node("c", 8, cpu=9000), node("b", 2, cpu=9000), node("a", 4, cpu=9000)]
    out = engine.saturation([pod("p1", gpus=1, cpu=1000)], nodes, "whole", "pack")
    assert where(out) == {"p1": "b"}  # 1000 milli free after, the least
    tied = [node("y", 2, cpu=8000), node("x", 2, cpu=9000), node("w", 2, cpu=8000)]
    out = engine.saturation([pod("p1", gpus=1, cpu=1000), pod("p2", gpus=1, cpu=1000)], tied, "whole", "pack")
    # p1: the same GPUs free everywhere, least CPU: w and y, then the name: w; p2: w is the fullest now
    assert where(out) == {"p1": "w", "p2": "w"}


def test_spread_takes_the_emptiest_node_then_most_free_cpu_then_name():
    nodes = [node("a", 4, cpu=9000), node("b", 2, cpu=9000), node("c", 8, cpu=9000)]
    out = engine.saturation([pod("p1", gpus=1), pod("p2", gpus=1)], nodes, "whole", "spread")
    assert where(out) == {"p1": "c", "p2": "c"}  # 7000 free after p1, still the most
    tied = [node("y", 2, cpu=8000), node("x", 2, cpu=9000), node("w", 2, cpu=9000)]
    out = engine.saturation([pod("p1", gpus=1, cpu=1000), pod("p2", gpus=1, cpu=1000)], tied, "whole", "spread")
    # p1: most CPU: w and x, then the name: w; p2: x and y have more GPU free than w now, x more CPU
    assert where(out) == {"p1": "w", "p2": "x"}


def test_pack_and_spread_take_cpu_only_pods_by_the_same_rule():
    nodes = [node("cpu", 0, cpu=8000), node("gpu", 2, cpu=8000)]
    assert where(engine.saturation([pod("c", cpu=1000)], nodes, "whole", "pack")) == {"c": "cpu"}
    assert where(engine.saturation([pod("c", cpu=1000)], nodes, "whole", "spread")) == {"c": "gpu"}


def test_on_the_node_the_fullest_gpu_that_fits_ties_by_index():
    pods = [
        pod("p1", t=1, gpus=1, milli=700),  # all GPUs free: GPU 0
        pod("p2", t=2, gpus=1, milli=500),  # GPU 0 has 300: GPU 1
        pod("p3", t=3, gpus=1, milli=200),  # 300 on GPU 0 is the fullest that fits
        pod("p4", t=4, gpus=1, milli=400),  # 500 on GPU 1
        pod("p5", t=5, gpus=1),  # a whole GPU: only GPU 2 is whole
    ]
    out = engine.saturation(pods, [node("n", 3)], "fractional", "pack")
    assert {name: pieces for name, (_node, pieces) in out.placed.items()} == {
        "p1": [(0, 700)],
        "p2": [(1, 500)],
        "p3": [(0, 200)],
        "p4": [(1, 400)],
        "p5": [(2, 1000)],
    }


def test_a_share_skips_a_gpu_just_short_of_it():
    # GPU 0 of "a" keeps 120 free (after 880), "b" keeps 130: a 125 share fits b only, though pack prefers a
    pods = [pod("fill-a", t=0, gpus=1, milli=880, models="A"), pod("fill-b", t=1, gpus=1, milli=870, models="B")]
    pods.append(pod("share", t=2, gpus=1, milli=125))
    out = engine.saturation(pods, [node("a", 1, model="A"), node("b", 1, model="B")], "fractional", "pack")
    assert out.placed["share"] == ("b", [(0, 125)])


# ---------------------------------------------------------------- saturation


def test_saturation_goes_in_creation_order_ties_by_name_and_stops_at_the_first_gpu_pod_left_out():
    pods = [
        pod("z-late", t=9, gpus=1),
        pod("b", t=0, gpus=1),
        pod("a", t=0, gpus=1),
        pod("cpu-too-big", t=1, cpu=99000),
        pod("c", t=2, gpus=1),
        pod("d", t=3, gpus=1),
        pod("cpu-after", t=4, cpu=1),
    ]
    out = engine.saturation(pods, [node("n", 2, cpu=10000)], "whole", "pack")
    assert list(out.placed) == ["a", "b"]
    assert out.cpu_skipped == ["cpu-too-big"]  # skipped, the replay goes on
    assert out.first_unplaced[0].name == "c" and out.not_tried == 3  # d, cpu-after and z-late never tried
    assert out.first_unplaced[1] == "1 whole GPU(s), 0 CPU milli, 0 MiB"


def test_saturation_ignores_deletion_times():
    pods = [pod("a", t=0, end=1, gpus=1), pod("b", t=2, gpus=1)]
    assert engine.saturation(pods, [node("n", 1)], "whole", "pack").first_unplaced[0].name == "b"


# ---------------------------------------------------------------- timeline


def test_timeline_pods_leave_before_pods_arrive_and_a_pod_that_does_not_fit_never_starts():
    pods = [
        pod("first", t=0, end=10, gpus=1),
        pod("blocked", t=5, end=30, gpus=1),  # the GPU is taken at 5; it never retries
        pod("next", t=10, end=20, gpus=1),  # created when first leaves: first's GPU is free for it
        pod("short", t=5, end=8, cpu=99),  # CPU-only, no CPU limit: runs
    ]
    out = engine.timeline(pods, [node("n", 1)], "whole", "pack")
    assert where(out) == {"first": "n", "next": "n", "short": "n"}
    assert out.unstarted == ["blocked"] and out.unstarted_gpu == 1 and out.first_unplaced[0].name == "blocked"
    # one point per instant whose figures change: 10 (first leaves, next arrives) changes nothing
    assert (out.times, out.occupied, out.asked, out.end) == ([0, 20], [1000, 0], [1000, 0], 30)


def test_timeline_cpu_pods_that_cannot_start_are_skipped_not_first_unplaced():
    pods = [pod("cpu", t=0, end=5, cpu=5000), pod("cpu2", t=1, end=5, cpu=5000), pod("g", t=2, end=3, gpus=1)]
    out = engine.timeline(pods, [node("n", 1, cpu=8000)], "whole", "pack")
    assert out.cpu_skipped == ["cpu2"] and out.unstarted == ["cpu2"] and out.first_unplaced is None


def test_timeline_pods_without_end_run_on_and_pods_of_no_time_count_without_a_point():
    pods = [pod("forever", t=0, gpus=1, milli=250), pod("blink", t=4, end=4, gpus=1, milli=500)]
    out = engine.timeline(pods, [node("n", 1)], "fractional", "pack")
    assert sorted(out.placed) == ["blink", "forever"]
    assert (out.times, out.occupied, out.asked, out.end) == ([0], [250], [250], 4)
    assert (out.taken, out.requested) == (250, 250)


def test_timeline_shares_change_with_the_policy():
    pods = [pod("a", t=0, end=10, gpus=1, milli=500), pod("b", t=5, end=10, gpus=1, milli=500)]
    whole = engine.timeline(pods, [node("n", 1)], "whole", "pack")
    fractional = engine.timeline(pods, [node("n", 1)], "fractional", "pack")
    assert (whole.times, whole.occupied, whole.asked) == ([0, 10], [1000, 0], [500, 0])
    assert whole.unstarted == ["b"]
    assert (fractional.times, fractional.occupied, fractional.asked) == ([0, 5, 10], [500, 1000, 0], [500, 1000, 0])


# ---------------------------------------------------------------- against a brute force


def _brute_arrive(state, p, policy, order, models):
    """The node and GPU pieces a pod gets by the rules read literally, or None."""
    share = policy == "fractional" and p.num_gpu == 1 and p.gpu_milli < 1000
    whole = 0 if share else p.num_gpu
    taken = p.gpu_milli if share else 1000 * whole
    best = None
    for n in state:
        if n["cpu"] is not None and (n["cpu"] < p.cpu_milli or n["mem"] < p.memory_mib):
            continue
        if models and p.models and n["model"] not in p.models:
            continue
        if whole and sum(1 for g in n["gpus"] if g == 1000) < whole:
            continue
        if share and not any(g >= p.gpu_milli for g in n["gpus"]):
            continue
        free = sum(n["gpus"]) - taken
        cpu = 0 if n["cpu"] is None else n["cpu"] - p.cpu_milli
        key = (free, cpu, n["name"]) if order == "pack" else (-free, -cpu, n["name"])
        if best is None or key < best[0]:
            best = (key, n)
    if best is None:
        return None
    n = best[1]
    if share:
        pieces = [(sorted((g, i) for i, g in enumerate(n["gpus"]) if g >= p.gpu_milli)[0][1], p.gpu_milli)]
    else:
        pieces = [(i, 1000) for i in [i for i, g in enumerate(n["gpus"]) if g == 1000][:whole]]
    return n, pieces


def _brute_move(n, p, pieces, sign):
    for i, milli in pieces:
        n["gpus"][i] -= sign * milli
    if n["cpu"] is not None:
        n["cpu"] -= sign * p.cpu_milli
        n["mem"] -= sign * p.memory_mib


def brute(pods, specs, policy, order, mode, models=True):
    """The rules applied literally: every node read for every pod, every GPU for every request."""
    state = [
        {"name": s.name, "cpu": s.cpu_milli, "mem": s.memory_mib, "model": s.model, "gpus": [1000] * s.gpus}
        for s in specs
    ]
    events = []
    for index, p in enumerate(pods):
        events.append((p.created, 1, p.name, index))
        if mode == "timeline" and p.deleted is not None:
            events.append((p.deleted, 0 if p.deleted > p.created else 2, p.name, index))
    events.sort()
    found = {"placed": {}, "first": None, "skipped": [], "unstarted": [], "not_tried": 0, "points": []}
    running, asked = {}, 0
    for position, (time, phase, _name, index) in enumerate(events):
        p = pods[index]
        if phase == 1:
            got = _brute_arrive(state, p, policy, order, models)
            if got is None and mode == "saturation" and p.gpu:
                found["first"], found["not_tried"] = p.name, len(events) - position - 1
                break
            if got is None:
                found["unstarted" if mode == "timeline" else "skipped"].append(p.name)
                if mode == "timeline" and p.gpu and found["first"] is None:
                    found["first"] = p.name
            else:
                _brute_move(got[0], p, got[1], 1)
                found["placed"][p.name] = (got[0]["name"], got[1])
                running[index] = got
                asked += p.requested_milli
        elif index in running:
            n, pieces = running.pop(index)
            _brute_move(n, p, pieces, -1)
            asked -= p.requested_milli
        if mode == "timeline" and (position + 1 == len(events) or events[position + 1][0] != time):
            occupied = sum(len(n["gpus"]) * 1000 - sum(n["gpus"]) for n in state)
            if not found["points"] or found["points"][-1][1:] != (occupied, asked):
                found["points"].append((time, occupied, asked))
    return found


def random_case(rng: random.Random) -> tuple[list[Pod], list[NodeSpec]]:
    limited = rng.random() < 0.7  # else like a plan: no CPU or memory limit
    specs = []
    for index in range(rng.randint(1, 5)):
        cpu = rng.choice((2000, 4000, 8000)) if limited else None
        mem = rng.choice((4096, 16384)) if limited else None
        specs.append(node(f"n{rng.randint(0, 3)}{index}", rng.randint(0, 4), cpu, mem, rng.choice(("A", "B", None))))
    pods = []
    for index in range(rng.randint(1, 25)):
        kind = rng.random()
        if kind < 0.2:
            gpus, milli = 0, 0
        elif kind < 0.65:
            gpus, milli = 1, rng.choice((30, 60, 100, 120, 130, 250, 260, 330, 500, 700, 950, 1000))
        else:
            gpus, milli = rng.choice((1, 2, 3)), rng.choice((500, 1000))
        created = rng.randint(0, 12)
        end = rng.choice((None, created, created + rng.randint(1, 10)))
        models = rng.choice((None, None, "A", "B|A", "C"))
        cpu, mem = rng.choice((0, 1000, 2000)), rng.choice((0, 2048, 8192))
        pods.append(pod(f"p{rng.randint(0, 9)}{index}", created, end, gpus, milli, cpu, mem, models))
    return pods, specs


@pytest.mark.parametrize("seed", range(60))
def test_the_engine_places_like_the_brute_force(seed):
    rng = random.Random(seed)
    for _case in range(5):
        pods, specs = random_case(rng)
        for policy in ("whole", "fractional"):
            for order in ("pack", "spread"):
                for mode in ("saturation", "timeline"):
                    models = rng.random() < 0.8
                    out = engine.replay(pods, specs, policy, order, mode, models)
                    want = brute(pods, specs, policy, order, mode, models)
                    context = (policy, order, mode, models, pods, specs)
                    assert out.placed == want["placed"], context
                    assert (out.first_unplaced[0].name if out.first_unplaced else None) == want["first"], context
                    if mode == "saturation":
                        assert (out.cpu_skipped, out.not_tried) == (want["skipped"], want["not_tried"]), context
                    else:
                        assert out.unstarted == want["unstarted"], context
                        assert list(zip(out.times, out.occupied, out.asked, strict=True)) == want["points"], context


def test_the_brute_force_sees_a_wrong_order():
    """The cross-check can fail: pack and spread differ on a trace the brute force works out."""
    pods = [pod("p", gpus=1)]
    specs = [node("a", 1), node("b", 2)]
    assert (
        brute(pods, specs, "whole", "pack", "saturation")["placed"]
        != brute(pods, specs, "whole", "spread", "saturation")["placed"]
    )
    assert (
        engine.saturation(pods, specs, "whole", "spread").placed
        == brute(pods, specs, "whole", "spread", "saturation")["placed"]
    )
