#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""How fast does the job planner place 64-worker jobs on a 1,000-node site?

The site: the 1,000 nodes of ``benchmarks/plan.py`` (8 GPUs and 8 RDMA NICs
each, one pair per host bridge; every fourth node has its NICs on socket 1,
every seventh lacks two NICs), their NICs on rails 0-7 in PCI order (the
``pci_order`` rule), in 10 blocks of 10 racks of 10 nodes. Templates: the
claims role's for a 1.36 site with pairs 1/2/4/8 and the rail templates.

Jobs, 64 workers each: ``pair8-block`` (``gpu-nic-pair-8``, required block),
``pair1-rack`` (``gpu-nic-pair-1``, preferred rack: one worker per node on one
rail, so it spans racks), ``rail0-block`` (``gpu-nic-rail-0``, required
block), ``gpu-rack`` (``gpu-only``, required rack: eight per node) and
``pair2-rack`` (``gpu-nic-pair-2``, required rack: does not fit, a rack holds
10 with one rail signature).

Printed: per job, the median wall time of ``jobs.place_jobs`` with that job
alone (everything included: the nodes' devices read, capacities counted,
the placement), on the empty site and with 30 % of the nodes running pods
(two GPUs and two NICs held, seeded), and all five jobs in one call.

Baseline, measured in the same run: ``plan.plan`` of the same five
templates on the same nodes (the claims role's plan of them); the ratio
says what placing the jobs costs next to planning their templates once.

Target (from the project's issue): one 64-worker job on 1,000 nodes in 100
racks in under 2 s (on 2 cores; the planner is single-threaded, and this
process is pinned to 2 CPUs where the system allows).
Run: ``.venv/bin/python benchmarks/jobs.py``. ``--nodes`` and ``--workers``
make the site and the jobs smaller (racks of 10 nodes, blocks of 10 racks
still; the smoke test, tests/integration/benchmarks/test_jobs.py, runs a
tiny one); the target is for the defaults.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".cache" / "collections"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import plan as plan_benchmark  # noqa: E402 - benchmarks/plan.py: the same 1,000 nodes

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import place as jobs  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import rails as plan_rails  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates  # noqa: E402

TARGET_SECONDS = 2.0
NODES = 1000
WORKERS = 64
RULE = {"by": "pci_order", "count": 8}
JOBS = [
    ("pair8-block", "gpu-nic-pair-8", "block", "required"),
    ("pair1-rack", "gpu-nic-pair-1", "rack", "preferred"),
    ("rail0-block", "gpu-nic-rail-0", "block", "required"),
    ("gpu-rack", "gpu-only", "rack", "required"),
    ("pair2-rack", "gpu-nic-pair-2", "rack", "required"),
]


def site(count: int = NODES) -> tuple[dict, list, list, dict]:
    """``(nodes, classes, templates, placement)`` of the site (1,000 nodes by default)."""
    topologies = plan_benchmark.site(count)
    rails = {node: plan_rails.node_rails(node, topology, RULE)[0] for node, topology in topologies.items()}
    shareable = dra_gates.shares_gpus(plan_benchmark.MINOR)  # the GPUs as the driver publishes them there
    nodes = planner.nodes_from_topologies(topologies, rails=rails, shareable_gpus=shareable)
    settings = {"templates": {"pairs": {"counts": [1, 2, 4, 8]}, "pairs_fallback": {"enabled": False}}}
    objects = claims.render(settings, "bench", plan_benchmark.MINOR, rail_rules=dict.fromkeys(topologies, RULE))[
        "objects"
    ]
    classes = [o for o in objects if o["kind"] == "DeviceClass"]
    templates = [o for o in objects if o["kind"] == "ResourceClaimTemplate"]
    domains = {name: {"block": f"b{i // 100:02d}", "rack": f"r{i // 10:03d}"} for i, name in enumerate(sorted(nodes))}
    levels = [{"name": "block", "label": "aligned.dev/block"}, {"name": "rack", "label": "aligned.dev/rack"}]
    return nodes, classes, templates, {"levels": levels, "domains": domains, "node_names": {n: n for n in nodes}}


def busy(nodes: dict) -> dict:
    """30 % of the nodes with two GPUs and two NICs held (seeded)."""
    rng = random.Random(35)
    held = {}
    for name in sorted(nodes):
        if rng.random() < 0.3:
            labels = [d["name"] for d in nodes[name]["devices"]]
            gpus = [label for label in labels if label.startswith("gpu-")]
            nics = [label for label in labels if label.startswith("nic-")]
            held[name] = set(rng.sample(gpus, 2) + rng.sample(nics, 2))
    return held


def job(name: str, template: str, level: str, mode: str, workers: int = WORKERS) -> dict:
    return {"name": name, "workers": workers, "template": template, "placement": {"level": level, "mode": mode}}


def place(job_list: list, nodes: dict, classes: list, templates: list, placement: dict, held: dict | None) -> dict:
    return jobs.place_jobs("bench", job_list, nodes, classes, templates, placement, held=held)


def timed(repeats: int, call) -> tuple[float, dict]:
    times, result = [], None
    for _repeat in range(repeats):
        start = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=NODES, help=f"nodes of the site (default {NODES})")
    parser.add_argument("--workers", type=int, default=WORKERS, help=f"workers of each job (default {WORKERS})")
    args = parser.parse_args()
    if args.repeats < 1 or args.nodes < 1 or args.workers < 1:
        parser.error("--repeats, --nodes and --workers must be at least 1")
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > 2:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:2])
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    nodes, classes, templates, placement = site(args.nodes)
    held = busy(nodes)
    blocks, racks = -(-args.nodes // 100), -(-args.nodes // 10)
    print(f"nodes: {args.nodes} in {blocks} blocks x {-(-racks // blocks)} racks, rails 0-7; busy: {len(held)} nodes "
          f"with 2 GPUs + 2 NICs held; CPUs: {cpus}; repeats: {args.repeats}; workers per job: {args.workers}")  # fmt: skip
    print(f"{'job':<12} {'template':<16} {'empty s':>8} {'busy s':>7}  result (empty site)")
    worst = 0.0
    for name, template, level, mode in JOBS:
        one = [job(name, template, level, mode, args.workers)]
        empty, result = timed(args.repeats, lambda one=one: place(one, nodes, classes, templates, placement, None))
        loaded, _busy = timed(args.repeats, lambda one=one: place(one, nodes, classes, templates, placement, held))
        worst = max(worst, empty, loaded)
        entry = result["jobs"][0]
        where = (entry["domain"] or {}).get("name") or f"{len(entry['domains'])} {level}s"
        said = f"fits in {where}, rails {entry['rails']}" if entry["fits"] else f"does not fit: {entry['reason']}"
        print(f"{name:<12} {template:<16} {empty:>8.3f} {loaded:>7.3f}  {said}")
    every = [job(*spec, args.workers) for spec in JOBS]
    all_jobs, _result = timed(args.repeats, lambda: place(every, nodes, classes, templates, placement, None))
    wanted = sorted({spec[1] for spec in JOBS})
    chosen = [t for t in templates if t["metadata"]["name"] in wanted]
    base, _plan = timed(args.repeats, lambda: planner.plan("bench", nodes, classes, chosen))
    print(f"all {len(JOBS)} jobs in one call: {all_jobs:.3f} s")
    print(f"baseline (plan.plan of the {len(chosen)} templates on the same nodes): {base:.3f} s")
    print(f"jobs / baseline: {all_jobs / base:.2f}")
    verdict = "meets" if worst <= TARGET_SECONDS else "MISSES"
    if (args.nodes, args.workers) != (NODES, WORKERS):
        verdict = f"not compared: the {TARGET_SECONDS:.0f} s target is for {WORKERS} workers on {NODES} nodes"
    else:
        verdict = f"{verdict} the {TARGET_SECONDS:.0f} s target"
    print(f"slowest single {args.workers}-worker job: {worst:.3f} s, {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
