# SPDX-License-Identifier: Apache-2.0
"""The walk on measured use: hand-worked evictions, drop and requeue, the GPU reserve and memory passed, the
sizing rules, the page's worked example, and the walk against a replay that recomputes every pod and GPU at every
step."""

from __future__ import annotations

import math
import random
import re
from bisect import bisect_left, bisect_right
from fractions import Fraction
from itertools import accumulate
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import (
    engine,
    result,
    thin_result,
    thin_walk,
    trace,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.nodes import NodeSpec
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import Pod
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.usage import Usage, read_usage

PAGE = Path(__file__).resolve().parents[6] / "docs" / "replay.md"
GI = 2**30
ONE_GPU = (NodeSpec("n1", None, None, 1, None),)
# Two pods on one GPU of 1000 bytes (a byte is a milli): a (priority 10) and b (priority 0) ask for 400 each.
PAIR = "name,submit,end,gpus,priority\na,0,100,0.4,10\nb,0,100,0.4,0\n"
PAIR_USE = "pod,timestamp,memory_used_bytes\na,0,300\nb,0,300\na,10,500\nb,10,460\na,20,300\nb,20,300\n"


def files(tmp_path: Path, text: str, used: str) -> tuple[trace.Trace, Usage]:
    (tmp_path / "trace.csv").write_text(text)
    (tmp_path / "usage.csv").write_text(used)
    pods = trace.read_trace(str(tmp_path / "trace.csv"), "csv")
    return pods, read_usage(str(tmp_path / "usage.csv"), pods, pods.time_kind)


def walk(pods, samples, rules, specs=ONE_GPU, gpu_memory=1000) -> thin_walk.Walk:
    return thin_walk.walk(pods, specs, "pack", True, samples, gpu_memory, rules)


def test_the_lower_priority_pod_is_evicted_when_the_gpu_runs_short_and_dropped(tmp_path):
    pods, samples = files(tmp_path, PAIR, PAIR_USE)
    done = walk(pods, samples, thin_walk.Rules("thin"))
    # at 10 s: 500 + 460 = 960 bytes used, above the mark 950 (5 % of 1000 kept free); both use more than their
    # request (400), a by 100 and b by 60: b goes, priority 0 before 10, although a is further above
    assert done.evictions == [
        {
            "time": 10,
            "node": "n1",
            "gpu": 0,
            "pod": "b",
            "used_bytes": 460,
            "request_bytes": 400,
            "limit_bytes": 460,
            "priority": 0,
            "gpu_used_bytes": 960,
        }
    ]
    assert done.times == [0, 10, 20, 100]
    assert list(done.used) == [600, 500, 300, 0]
    assert list(done.requested) == [800, 400, 400, 0]
    assert list(done.promised) == [500 + 460, 500, 500, 0]  # limits: the largest samples
    assert list(done.busy) == [1, 1, 1, 0]
    assert done.placements == [("a", 0, "n1", [0]), ("b", 0, "n1", [0])]
    assert (done.placed, done.requeued, done.waiting, done.unstarted) == (2, 0, [], [])
    assert done.dropped == ["b"] and thin_result.figures(done)["pods_dropped"] == 1


def test_requeue_places_the_evicted_pod_again_at_the_next_step_for_the_time_it_had_left(tmp_path):
    pods, samples = files(tmp_path, PAIR, PAIR_USE)
    done = walk(pods, samples, thin_walk.Rules("thin", on_evict="requeue"))
    assert [(e["time"], e["pod"]) for e in done.evictions] == [(10, "b")]
    # b had 90 s left at 10 s: placed again at 20 s, it would end at 110 s, after the last step (100 s): it runs to
    # the end, using its last sample there
    assert done.placements == [("a", 0, "n1", [0]), ("b", 0, "n1", [0]), ("b", 20, "n1", [0])]
    assert list(done.used) == [600, 500, 600, 300]
    assert list(done.requested) == [800, 400, 800, 400]
    assert (done.placed, done.requeued, done.waiting) == (2, 1, [])
    assert done.dropped == []  # evicted, but it ran again: not dropped


def test_a_requeued_pod_goes_before_arrivals_bursts_again_and_keeps_the_time_it_had_left(tmp_path):
    # b, evicted at 10 s, is placed again at the next step (15 s) before c arrives there, so c finds no room and
    # never starts; b's use there is still its 460 of 10 s: evicted again at 15 s, placed again at 20 s (300). It
    # had 90 s left: it leaves at the first step at or after 110 s (200 s, d's end)
    text = PAIR + "c,15,30,0.5,0\nd,0,200,0,0\n"
    pods, samples = files(tmp_path, text, PAIR_USE)
    done = walk(pods, samples, thin_walk.Rules("thin", on_evict="requeue"))
    assert [(e["time"], e["pod"], e["used_bytes"]) for e in done.evictions] == [(10, "b", 460), (15, "b", 460)]
    assert [(name, time) for name, time, _node, _gpus in done.placements] == [("a", 0), ("b", 0), ("b", 15), ("b", 20)]
    assert done.unstarted == ["c"] and done.times == [0, 10, 15, 20, 30, 100, 200]
    assert list(done.requested) == [800, 400, 400, 800, 800, 400, 0]
    assert list(done.busy) == [1, 1, 1, 1, 1, 1, 0]
    assert (done.requeued, done.waiting) == (2, [])
    dropped = walk(pods, samples, thin_walk.Rules("thin"))
    assert [p[0] for p in dropped.placements] == ["a", "b", "c"] and dropped.requeued == 0


def test_a_pod_evicted_at_the_last_step_is_still_waiting_at_the_end(tmp_path):
    text = "name,submit,end,gpus,priority\na,0,,0.4,10\nb,0,,0.4,0\n"
    used = "pod,timestamp,memory_used_bytes\na,0,300\nb,0,300\na,20,500\nb,20,460\n"
    pods, samples = files(tmp_path, text, used)
    done = walk(pods, samples, thin_walk.Rules("thin", on_evict="requeue"))
    assert [(e["time"], e["pod"]) for e in done.evictions] == [(20, "b")]
    assert (done.requeued, done.waiting, done.times) == (0, ["b"], [0, 20])
    assert done.dropped == ["b"]  # it never ran again


# -- the GPU reserve and memory passed -----------------------------------------------------------------------------


def test_the_reserve_counts_in_the_trigger_so_a_gpu_that_fits_without_it_evicts_with_it(tmp_path):
    # at 10 s a uses 500 and b 420 (requests 400): 920 bytes, under the mark 950 - no eviction by the pods alone; with
    # 40 bytes of the MPS server and contexts the GPU holds 960, as NVML would say: b goes (priority 0 before 10)
    used = "pod,timestamp,memory_used_bytes\na,0,300\nb,0,300\na,10,500\nb,10,420\na,20,300\nb,20,300\n"
    pods, samples = files(tmp_path, PAIR, used)
    assert walk(pods, samples, thin_walk.Rules("thin")).evictions == []
    done = walk(pods, samples, thin_walk.Rules("thin", reserve=40))
    assert [(e["time"], e["pod"], e["used_bytes"], e["gpu_used_bytes"]) for e in done.evictions] == [
        (10, "b", 420, 920)
    ]
    # after b: 500 + 40 = 540, under the mark; the pods' use per step leaves the reserve out
    assert list(done.used) == [600, 500, 300, 0] and done.over_memory == []
    figures = thin_result.figures(done)
    assert "evictions_bound" not in figures and figures["over_memory"]["evictions"] == 0
    assert thin_result.figures(walk(pods, samples, thin_walk.Rules("thin")))["evictions_bound"] == "lower"


# a bursts to 700 at 20 s; at 10 s both use 495, within their requests (500), so nothing can be evicted then
HALVES = "name,submit,end,gpus,priority\na,0,100,0.5,0\nb,0,100,0.5,10\n"
HALVES_USE = "pod,timestamp,memory_used_bytes\n" + "".join(
    f"a,{t},{a}\nb,{t},{b}\n" for t, a, b in ((0, 300, 300), (10, 495, 495), (20, 700, 300), (30, 300, 300))
)


def test_a_gpu_over_its_memory_after_the_evictions_is_counted(tmp_path):
    pods, samples = files(tmp_path, HALVES, HALVES_USE)
    done = walk(pods, samples, thin_walk.Rules("thin", reserve=40))
    # 10 s: 990 + 40 = 1030, above the mark (950) and the memory (1000), and no pod above its request: over memory
    # until the next step (20 s), both pods on the GPU. 20 s: 1000 + 40 above the mark: a goes (700 above 500); the
    # GPU held 1000 of the pods' before it, above 1000 - 40: an allocation would have failed before the reclaim
    assert done.over_memory == [(1, 0)] and done.over_memory_pods == {"a", "b"}
    assert [(e["time"], e["pod"], e["gpu_used_bytes"]) for e in done.evictions] == [(20, "a", 1000)]
    assert thin_result.figures(done)["over_memory"] == {"steps": 1, "gpu_seconds": 10, "pods": 2, "evictions": 1}
    # without the reserve: 990 and 1000 fit the GPU (a still goes at 20 s, 1000 being above the mark)
    bare = thin_result.figures(walk(pods, samples, thin_walk.Rules("thin")))
    assert bare["over_memory"] == {"steps": 0, "gpu_seconds": 0, "pods": 0, "evictions": 0} and bare["evictions"] == 1


def test_pods_that_never_burst_can_still_pass_the_memory_with_the_reserve(tmp_path):
    # fractional sizes each pod at its peak, so nothing is ever evicted: 700 + 300 = 1000 milli fit one GPU, and
    # at 20 s their 1000 bytes and the 40 of the reserve do not fit its 1000; a whole GPU each never shares
    pods, samples = files(tmp_path, HALVES, HALVES_USE.replace("b,10,495", "b,10,300"))
    done = walk(pods, samples, thin_walk.Rules("fractional", reserve=40))
    assert [p[3] for p in done.placements] == [[0], [0]] and done.evictions == []
    assert done.over_memory == [(2, 0)] and thin_result.figures(done)["over_memory"]["gpu_seconds"] == 10
    assert walk(pods, samples, thin_walk.Rules("fractional")).over_memory == []
    two = [NodeSpec("n1", None, None, 2, None)]
    assert walk(pods, samples, thin_walk.Rules("whole", reserve=999), two).over_memory == []


def test_a_percentile_request_packs_more_and_evicts_on_it(tmp_path):
    # x and y ask for 0.6 of a GPU each in the trace: one GPU apiece; their p50 (300) fits both on one
    text = "name,submit,end,gpus\nx,0,100,0.6\ny,0,100,0.6\n"
    rows = [f"{pod},{t},{v}" for pod in "xy" for t, v in ((0, 300), (10, 300), (20, 700), (30, 200))]
    pods, samples = files(tmp_path, text, "pod,timestamp,memory_used_bytes\n" + "\n".join(rows) + "\n")
    two = [NodeSpec("n1", None, None, 2, None)]
    by_request = walk(pods, samples, thin_walk.Rules("thin"), two)
    assert [p[3] for p in by_request.placements] == [[0], [1]] and by_request.evictions == []
    p50 = walk(pods, samples, thin_walk.Rules("thin", request=Fraction(50)), two)
    assert [p[3] for p in p50.placements] == [[0], [0]]
    # at 20 s both use 700 (limit: their largest sample) on one GPU of 1000: x goes (same priority and use above
    # the request, by name); y's 700 is under the mark
    assert [(e["time"], e["pod"], e["request_bytes"], e["used_bytes"]) for e in p50.evictions] == [(20, "x", 300, 700)]
    assert list(p50.busy) == [1, 1, 1, 1, 0]


def test_a_factor_limit_is_capped_at_the_gpus_memory_and_caps_the_use(tmp_path):
    text = "name,submit,end,gpus\nsolo,0,100,0.4\n"
    pods, samples = files(tmp_path, text, "pod,timestamp,memory_used_bytes\nsolo,0,100\nsolo,50,1100\n")
    sized = thin_walk.size(pods[0], samples, 1000, thin_walk.Rules("thin", limit=Fraction(3)))
    assert (sized[0].share, sized[1], sized[2]) == (400, 400, 1000)  # 3 x 400, at most the GPU's 1000
    done = walk(pods, samples, thin_walk.Rules("thin", limit=Fraction(3)))
    # its 1100 is capped at 1000, above the mark 950: alone on its GPU, it goes
    assert [(e["time"], e["used_bytes"], e["limit_bytes"]) for e in done.evictions] == [(50, 1000, 1000)]
    assert list(done.used) == [100, 0, 0]
    narrow = walk(pods, samples, thin_walk.Rules("thin", limit=Fraction(2)))
    assert narrow.evictions == [] and list(narrow.used) == [100, 800, 0]  # capped at 2 x 400


def test_sizing_under_each_policy(tmp_path):
    text = "name,submit,end,gpus,gpu_memory\ns,0,9,0.25,\nm,0,9,0.25,100\nw,0,9,2,\nq,0,9,0.5,\ncpu,0,9,0,\n"
    pods, samples = files(tmp_path, text, "pod,timestamp,memory_used_bytes\ns,0,50\ns,1,700\nw,0,1\n")
    s, m, w, q, cpu = pods
    whole = thin_walk.Rules("whole")
    assert [(n.whole, n.share, r, lim) for n, r, lim in (thin_walk.size(p, samples, 1000, whole) for p in (s, w))] == [
        (1, 0, 1000, 1000),
        (2, 0, 2000, 2000),
    ]
    fractional = thin_walk.Rules("fractional")
    assert thin_walk.size(s, samples, 1000, fractional)[1:] == (700, 700)  # the peak use
    assert thin_walk.size(q, samples, 1000, fractional)[1:] == (500, 500)  # no samples: the trace's request
    assert thin_walk.size(w, samples, 1000, fractional)[0].whole == 2  # whole GPUs stay whole
    thin = thin_walk.Rules("thin")
    assert thin_walk.size(m, samples, 1000, thin)[1:] == (100, 100)  # the trace's gpu_memory, no samples
    assert thin_walk.size(s, samples, 1000, thin)[1:] == (250, 700)
    assert thin_walk.size(s, samples, 1000, thin_walk.Rules("thin", request=Fraction(50)))[1:] == (50, 700)
    tiny = thin_walk.size(s, samples, 10**6, thin_walk.Rules("thin", request=Fraction(1)))
    assert (tiny[0].share, tiny[1]) == (1, 50)  # at least a milli
    full = thin_walk.size(s, samples, 600, thin_walk.Rules("fractional"))
    assert (full[0].whole, full[0].share, full[1], full[2]) == (1, 0, 600, 600)  # a peak above the GPU: one GPU
    assert thin_walk.size(cpu, samples, 1000, thin)[1:] == (0, 0)


def test_a_pod_that_lives_no_time_is_placed_and_gone(tmp_path):
    text = "name,submit,end,gpus\na-flash,5,5,0.5\nc-late,5,9,0.5\nb-big,5,9,0.6\n"
    pods, samples = files(tmp_path, text, "pod,timestamp,memory_used_bytes\n")
    done = walk(pods, samples, thin_walk.Rules("thin"))
    # at 5 s a-flash takes 500 and leaves after the arrivals: b-big (600) does not fit then, c-late does
    assert [p[0] for p in done.placements] == ["a-flash", "c-late"] and done.unstarted == ["b-big"]
    assert (done.placed, list(done.requested), list(done.busy)) == (2, [500, 0], [1, 0])


# -- the page's worked example -----------------------------------------------------------------------------


def example(tmp_path: Path) -> dict[str, str]:
    """The worked example's trace, usage and node list, as docs/replay.md gives them."""
    section = PAGE.read_text().split("### Worked example on measured use", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```csv\n(.*?)```", section, re.S)
    assert len(blocks) == 2, "docs/replay.md: the worked example on measured use has a trace and a usage CSV"
    node = re.search(r"\(`(n1,[^`]*)` in an openb node list\)", section)
    assert node, "docs/replay.md: the worked example names its node"
    paths = {}
    for name, text in (
        ("trace", blocks[0]),
        ("usage", blocks[1]),
        ("nodes", f"sn,cpu_milli,memory_mib,gpu,model\n{node.group(1)}\n"),
    ):
        paths[name] = str(tmp_path / f"{name}.csv")
        Path(paths[name]).write_text(text)
    return paths


def replayed(paths: dict[str, str], policy: str, **options) -> dict:
    return result.replay(
        paths["trace"], "csv", nodes=paths["nodes"], policy=policy, mode="timeline", usage=paths["usage"],
        gpu_memory="80Gi", **options,
    )  # fmt: skip


def test_the_pages_worked_example(tmp_path):
    paths = example(tmp_path)
    whole, fractional = (replayed(paths, policy)["measured"] for policy in ("whole", "fractional"))
    assert (whole["gpus_needed"]["peak"], whole["evictions"], whole["all_placed"]) == (4, 0, True)
    assert (fractional["gpus_needed"]["peak"], fractional["evictions"]) == (2, 0)
    assert [(p["pod"], p["gpus"]) for p in fractional["placements"]] == [("a", [0]), ("b", [0]), ("c", [1]), ("d", [1])]
    thin = replayed(paths, "thin", burst_factors=[1.0, 1.5, 2.0])
    run = thin["measured"]
    assert run["rules"] == {
        "policy": "thin",
        "request": "request",
        "limit": "max",
        "reclaim_margin": 5.0,
        "gpu_reserve_bytes": 0,
        "on_evict": "drop",
    }
    assert run["gpu_memory"] == {"bytes": 80 * GI, "source": "gpu_memory", "plan_bytes": None}
    assert run["gpus_needed"] == {"peak": 1, "at": 0, "mean": 1.0}
    assert [
        (e["time"], e["pod"], e["used_bytes"], e["request_bytes"], e["gpu_used_bytes"]) for e in run["evicted"]
    ] == [
        (1800, "b", 30 * GI, 20 * GI, 110 * GI),
        (1800, "c", 30 * GI, 20 * GI, 80 * GI),
    ]
    assert (run["evictions"], run["evictions_per_day"], run["pods_evicted"]) == (2, 48.0, 2)
    # 110 GiB of use on an 80 GiB GPU before b goes: on the GPU an allocation fails first; after the evictions it fits
    assert run["over_memory"] == {"steps": 0, "gpu_seconds": 0, "pods": 0, "evictions": 1}
    assert (run["evictions_bound"], run["pods_dropped"]) == ("lower", 2)
    memory = run["memory"]
    assert memory["used_bytes"] == {"peak": 60 * GI, "at": 0, "mean": 50 * GI}
    assert memory["promised_bytes"]["peak"] == 115 * GI and memory["capacity_bytes"] == 320 * GI
    assert memory["used_share"] == 50 / 320 and round(memory["used_share"] * 100, 1) == 15.6
    assert run["window"] == {"start": 0, "end": 3600, "seconds": 3600} and run["basis"] == "time-weighted mean"
    factors = [
        (f["factor"], f["gpus"], f["gpus_fractional"], f["gpus_saved"], f["evictions"], f["evictions_per_day"])
        for f in thin["thin_factors"]
    ]
    assert factors == [(1.0, 1, 2, 1, 0, 0.0), (1.5, 1, 2, 1, 1, 24.0), (2.0, 1, 2, 1, 2, 48.0)]
    assert [(f["all_placed"], f["pods_dropped"]) for f in thin["thin_factors"]] == [(True, 0), (True, 1), (True, 2)]
    assert list(thin["thin_factors"][0])[3:6] == ["gpus_saved", "all_placed", "pods_dropped"]
    assert [[e["pod"] for e in f["evicted"]] for f in thin["thin_factors"]] == [[], ["b"], ["b", "c"]]
    requeued = replayed(paths, "thin", on_evict="requeue")["measured"]
    assert [(p["pod"], p["time"]) for p in requeued["placements"]][4:] == [("b", 2700), ("c", 2700)]
    assert (requeued["requeued"], requeued["evictions"], requeued["waiting_at_end"]) == (2, 2, [])
    assert requeued["pods_dropped"] == 0
    # 2 GiB of the MPS server and contexts: the pods' 60 GiB at 0 s and 50 at the end stay under the mark (76 GiB)
    # with it; at 1800 s 110 + 2: b and c go as before, and x1.0's 75 + 2 passes the mark with no pod above its
    # request: nothing to evict, and 77 GiB fit the GPU
    reserved = replayed(paths, "thin", gpu_reserve="2Gi", burst_factors=[1.0])
    assert [e["pod"] for e in reserved["measured"]["evicted"]] == ["b", "c"]
    assert (
        reserved["measured"]["rules"]["gpu_reserve_bytes"] == 2 * GI and "evictions_bound" not in reserved["measured"]
    )
    assert reserved["thin_factors"][0]["evictions"] == 0 and reserved["thin_factors"][0]["over_memory"]["steps"] == 0


def test_evictions_listed_are_the_evictions_counted(tmp_path):
    paths = example(tmp_path)
    for on_evict in ("drop", "requeue"):
        thin = replayed(paths, "thin", on_evict=on_evict, burst_factors=[1.5, 2.0, 3], thin_request="p50")
        for run in [thin["measured"], *thin["thin_factors"]]:
            assert run["evictions"] == len(run["evicted"]) > 0
            assert run["pods_evicted"] == len({e["pod"] for e in run["evicted"]})
            assert run["evictions_per_day"] == run["evictions"] * 86400 / run["window"]["seconds"]
            assert all(e["used_bytes"] > e["request_bytes"] and e["gpu_used_bytes"] > 76 * GI for e in run["evicted"])


# -- the walk against a replay that recomputes everything at every step ---------------------------------------------


def naive(pods, specs, samples, gpu_memory, rules) -> dict:
    """Every step of the grid: each pod's use from its samples, each GPU's sum, the eviction rule as written."""
    cluster = engine.Cluster(specs, "pack")
    offsets = list(accumulate((s.gpus for s in specs), initial=0))
    times = sorted(
        {p.created for p in pods}
        | {p.deleted for p in pods if p.deleted is not None}
        | {t for ts, _v in samples.series.values() for t in ts}
    )
    mark = math.floor(gpu_memory * (100 - rules.margin) / 100)
    reserve = rules.reserve
    sized = [thin_walk.size(p, samples, gpu_memory, rules) for p in pods]
    running, queue, out = (
        {},
        [],
        {"placements": [], "evictions": [], "used": [], "requested": [], "promised": [], "busy": []},
    )
    out.update(over=[], over_pods=set(), dropped=[])

    def use(i: int, t: float) -> int:
        ts, values = samples.series.get(pods[i].name, ((), ()))
        at = bisect_right(ts, t)
        return min(values[at - 1] if at else 0, sized[i][2])

    def place(i: int, k: int, stop: int, end) -> bool:
        node = cluster.best(pods[i], sized[i][0])
        if node is None:
            return False
        pieces = cluster.place(node, pods[i], sized[i][0])
        running[i] = (node, pieces, [offsets[node.index] + g for g, _m in pieces], stop, end)
        if pods[i].gpu:
            out["placements"].append((pods[i].name, times[k], node.name, [g for g, _m in pieces]))
        return True

    for k, t in enumerate(times):
        for i in [i for i in running if running[i][3] == k]:
            cluster.release(running[i][0], pods[i], running.pop(i)[1])
        waiting = []
        for i, left in queue:
            stop, end = (len(times), None) if left is None else (bisect_left(times, t + left), t + left)
            if not place(i, k, stop, end):
                waiting.append((i, left))
        queue = waiting
        arriving = sorted((i for i, p in enumerate(pods) if p.created == t), key=lambda i: pods[i].name)
        placed = [
            i
            for i in arriving
            if place(i, k, len(times) if pods[i].deleted is None else times.index(pods[i].deleted), pods[i].deleted)
        ]
        for i in placed:
            if pods[i].deleted == t:
                cluster.release(running[i][0], pods[i], running.pop(i)[1])
        for gpu in range(offsets[-1]):
            held = sorted(i for i in running if running[i][2] == [gpu])
            used = sum(use(i, t) for i in held)
            above = sorted(
                (i for i in held if use(i, t) > sized[i][1]),
                key=lambda i: (pods[i].priority, sized[i][1] - use(i, t), pods[i].name),
            )
            for i in above if used + reserve > mark else ():
                if used + reserve <= mark:
                    break
                node, _pieces, _ids, _stop, end = running[i]
                out["evictions"].append(
                    {
                        "time": t,
                        "node": node.name,
                        "gpu": gpu - offsets[node.index],
                        "pod": pods[i].name,
                        "used_bytes": use(i, t),
                        "request_bytes": sized[i][1],
                        "limit_bytes": sized[i][2],
                        "priority": pods[i].priority,
                        "gpu_used_bytes": used,
                    }
                )
                used -= use(i, t)
                cluster.release(node, pods[i], running.pop(i)[1])
                if rules.on_evict == "requeue":
                    queue.append((i, None if end is None else end - t))
                else:
                    out["dropped"].append(pods[i].name)
            left = [i for i in held if i in running]
            if left and sized[left[0]][0].share and used + reserve > gpu_memory:
                out["over"].append((k, gpu))
                out["over_pods"].update(pods[i].name for i in left)
        gpu_pods = [i for i in running if pods[i].gpu]
        out["used"].append(sum(use(i, t) for i in gpu_pods))
        out["requested"].append(sum(sized[i][1] for i in gpu_pods))
        out["promised"].append(sum(sized[i][2] for i in gpu_pods))
        out["busy"].append(len({g for i in gpu_pods for g in running[i][2]}))
    if rules.on_evict == "requeue":
        out["dropped"] = [pods[i].name for i, _left in queue]
    return out


def random_case(rng: random.Random) -> tuple[list[Pod], Usage, list[NodeSpec], thin_walk.Rules]:
    specs = [
        NodeSpec(f"n{i}", rng.choice((None, 4000)), None, rng.randrange(1, 4), None) for i in range(rng.randrange(1, 3))
    ]
    pods, series = [], {}
    for index in range(rng.randrange(1, 9)):
        gpus = rng.choice((0, 100, 250, 400, 600, 900, 1000, 1000, 2000))
        num, milli = (gpus // 1000, 1000) if gpus >= 1000 else ((1, gpus) if gpus else (0, 0))
        created = rng.randrange(12)
        deleted = rng.choice((None, created, created + rng.randrange(1, 15)))
        pod = Pod(f"p{index}", index + 2, rng.choice((0, 1000)), 0, num, milli, None, created, deleted)
        pod.priority = rng.choice((0, 0, 5))
        pods.append(pod)
        life = range(created, deleted if deleted is not None else 30)
        stamps = sorted(rng.sample(life, min(len(life), rng.randrange(0, 8)))) if num else []
        if stamps:
            series[pod.name] = (stamps, [rng.randrange(0, 1100) for _t in stamps])
    policy = rng.choice(("thin", "thin", "thin", "fractional", "whole"))
    request = rng.choice(("request", Fraction(50), Fraction(90)))
    limit = rng.choice(("max", Fraction(1), Fraction(3, 2), Fraction(3)))
    rules = thin_walk.Rules(
        policy,
        request,
        limit,
        rng.choice((5, 20, Fraction(25, 2))),
        rng.choice(("drop", "requeue")),
        rng.choice((0, 0, 40, 150)),
    )
    return pods, Usage(series), specs, rules


@pytest.mark.parametrize("seed", range(4))
def test_the_walk_matches_a_replay_that_recomputes_every_step(seed, monkeypatch):
    rng = random.Random(seed)
    evicted = over = 0
    for _case in range(150):
        monkeypatch.setattr(thin_walk, "CHUNK", rng.choice((1, 2, 3, 256)))  # scans that stop and go on
        pods, samples, specs, rules = random_case(rng)
        done = thin_walk.walk(pods, specs, "pack", True, samples, 1000, rules)
        expected = naive(pods, specs, samples, 1000, rules)
        assert done.evictions == expected["evictions"], (pods, samples.series)
        assert done.placements == expected["placements"]
        for key in ("used", "requested", "promised", "busy"):
            assert list(getattr(done, key)) == expected[key], key
        assert sorted(done.over_memory) == sorted(expected["over"]) and done.over_memory_pods == expected["over_pods"]
        assert done.dropped == expected["dropped"]
        evicted += len(done.evictions)
        over += len(done.over_memory)
    assert evicted > 0 and over > 0  # the cases do evict, and do pass the memory
