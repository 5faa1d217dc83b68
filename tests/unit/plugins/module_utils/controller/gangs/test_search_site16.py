# SPDX-License-Identifier: Apache-2.0
"""The job planner on its acceptance site (``tests/support/sites/site16.py``: 16 nodes in 4 racks of 2
blocks, and its jobs). Every worker is checked against the site itself: its domain, its node's free devices,
its GPUs and NICs on one root, and its rails.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.tests.support.sites.site16 import (
    FACTS,
    HELD,
    HOSTS,
    JOBS,
    RESULT,
    place,
)


def check_workers(entry: dict, level: str) -> None:
    """Every worker on a node of its job's domains, with free devices no other worker has, each GPU-NIC pair
    on one root, and all its NICs on the job's rails."""
    used = set()
    assert [w["index"] for w in entry["workers"]] == list(range(entry["worker_count"]))
    domains = {d["name"] for d in entry["domains"]}
    position = 0 if level == "rack" else 1
    for worker in entry["workers"]:
        host = worker["node"]
        assert HOSTS[host][position] in domains
        labels = [label for group in worker["devices"].values() for label in group]
        assert not set(labels) & HELD.get(host, set()), "a held device"
        assert not {(host, label) for label in labels} & used, "a device of two workers"
        used |= {(host, label) for label in labels}
        facts = [FACTS[(host, label)] for label in labels]
        gpus = sorted(f[1] for f in facts if f[0] == "gpu")
        nics = sorted(f[1] for f in facts if f[0] == "nic")
        assert gpus and (nics == gpus or not nics), "a GPU-NIC pair on two roots"
        rails = sorted(f[3] for f in facts if f[0] == "nic")
        assert sorted(worker["rails"]) == rails and rails == (entry["rails"] or [])
    per_domain = {}
    for worker in entry["workers"]:
        per_domain[HOSTS[worker["node"]][position]] = per_domain.get(HOSTS[worker["node"]][position], 0) + 1
    assert entry["domains"] == [{"level": level, "name": d, "workers": n} for d, n in sorted(per_domain.items())]
    assert entry["fits"] is True and len(entry["workers"]) == entry["worker_count"]


def test_a_job_that_fits_in_one_rack():
    train = RESULT["train"]
    # one worker per node with NICs on rails 0 and 1, each on its GPU's root: r1 3 (n01's are held), r2 and r3 4,
    # r4 none (no NIC on a GPU's root); r2 and r3 take four nodes and leave nothing over: by name
    assert train["capacity"]["domains"] == {"r2": 4, "r3": 4, "r1": 3, "r4": 0}
    assert train["domain"] == {"level": "rack", "name": "r2"} and train["rails"] == [0, 1] and train["rails_pinned"]
    assert [w["node"] for w in train["workers"]] == ["n05", "n06", "n07", "n08"]
    # the pairs share a socket on r2: the worst pair of a worker is NODE
    assert train["worst_level"] == "NODE" and {w["worst_level"] for w in train["workers"]} == {"NODE"}
    check_workers(train, "rack")


def test_a_job_that_only_fits_across_racks_takes_the_fewest():
    wide = RESULT["wide"]
    # one worker per node and rail; rail 0: r1 3 (n01's rail-0 GPU is held), r2 and r3 4 (r3's rail 0 is its
    # fourth pair), r4 none. Ten need three racks; rails 0 and 1 leave the least over (1), 0 before 1.
    assert wide["fits"] is True and wide["domain"] is None and wide["rails"] == [0]
    assert wide["capacity"]["domains"] == {"r2": 4, "r3": 4, "r1": 3, "r4": 0} and wide["capacity"]["site"] == 11
    assert wide["domains"] == [{"level": "rack", "name": "r1", "workers": 3}, {"level": "rack", "name": "r2", "workers": 4},
                               {"level": "rack", "name": "r3", "workers": 3}]  # fmt: skip
    assert [w["node"] for w in wide["workers"]] == [
        "n02",
        "n03",
        "n04",
        "n05",
        "n06",
        "n07",
        "n08",
        "n09",
        "n10",
        "n11",
    ]
    assert {tuple(w["devices"]["nic-0"]) for w in wide["workers"] if HOSTS[w["node"]][0] == "r3"} == {
        ("nic-0000-42-00-0",)
    }
    assert wide["worst_level"] == "PIX" and wide["rails_pinned"] is False
    check_workers(wide, "rack")


def test_jobs_that_do_not_fit_say_why_with_numbers():
    one_rack = RESULT["wide-one-rack"]
    assert one_rack["fits"] is False and one_rack["workers"] == [] and one_rack["domains"] == []
    # rails 2 and 3 hold 12 on the site, 4 in each of r1, r2, r3; without the same rails: 14 + 16 + 16
    assert one_rack["reason"] == (
        "no rack holds 10 workers: the most is rack r1 with 4 (rails [2]); the site holds 12; "
        "with its workers on different rails the site would hold 46"
    )
    big = RESULT["big"]
    # four pairs on rails 0-3, each on its root: n02-n04 and r2 (block b1: 7), r3 (b2: 4)
    assert big["fits"] is False and big["rails"] == [0, 1, 2, 3]
    assert (
        big["reason"] == "no block holds 8 workers: the most is block b1 with 7 (rails [0, 1, 2, 3]); the site holds 11"
    )
    assert big["capacity"]["domains"] == {"b1": 7, "b2": 4}


def test_several_workers_on_a_node_best_fit_after_held_devices():
    infer = RESULT["infer"]
    # 16 GPUs per rack, 15 in r1: three nodes anywhere, r1 leaves the least over
    assert infer["domain"] == {"level": "rack", "name": "r1"} and infer["rails"] is None
    assert [w["node"] for w in infer["workers"]] == ["n02"] * 4 + ["n03"] * 4 + ["n04"] * 4
    check_workers(infer, "rack")


def test_the_job_that_fits_in_a_block_is_placed_there_aligned():
    fits = place([dict(JOBS[3], name="big7", workers=7)])["big7"]
    assert fits["domain"] == {"level": "block", "name": "b1"}
    assert sorted(w["node"] for w in fits["workers"]) == ["n02", "n03", "n04", "n05", "n06", "n07", "n08"]
    # two pairs per socket on r2: each GPU's pair is PIX, but the worker's worst pair crosses sockets
    assert {w["worst_level"] for w in fits["workers"] if HOSTS[w["node"]][0] == "r2"} == {"SYS"}
    assert fits["worst_level"] == "SYS" and fits["worst_level_exact"] is True
    check_workers(fits, "block")
