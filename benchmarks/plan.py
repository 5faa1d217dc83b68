#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""How fast is the allocation planner on a big site?

A synthetic site of N nodes with 16 devices each (8 GPUs and 8 RDMA NICs, one
pair per host bridge, four pairs per socket; every fourth node has all its
NICs on socket 1, every seventh lacks two NICs, GPU UUIDs differ per node) is
planned with the 10 claim templates the claims role renders for a 1.36 site
with pairs 1/2/4/8, fallback pairs 1/2, a fractional GPU, NIC only, GPU only
and VF only. The devices come from the topologies through the driver's device
model, as in the role.

Printed per N (100, 250, 500, 1000): the median wall time of
``plan.nodes_from_topologies`` + ``plan.plan`` over the repeats, the time per
node, and the ratio to N=100 scaled by node count (1.0 = perfectly linear).

The site has four node shapes (aligned or NICs on socket 1, with or without
the two missing NICs): the planner searches once per shape and template and
reuses the plan for identical nodes (``--no-shape-cache`` searches every node,
to measure the search itself).

Baseline, measured in the same run: one CEL evaluation of every class and
request selector on every device of the 1000-node site, without the planner's
memoisation (what a planner that simply evaluates every selector would pay
before searching anything).

Target (from the project's issue): 1,000 nodes x 16 devices x 10 templates in
<= 5 s on one core, growing linearly with nodes. The planner is single-threaded.
Run: ``.venv/bin/python benchmarks/plan.py``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".cache" / "collections"))

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel  # noqa: E402
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates  # noqa: E402

MINOR = "1.36"  # the site's minor: the claims rendered for it, its GPUs shared by capacity

TARGET_SECONDS = 5.0
SIZES = (100, 250, 500, 1000)


def node_topology(index: int) -> dict:
    """8 GPUs + 8 RDMA NICs; the layout varies with the node's index."""
    all_nics_on_socket_1 = index % 4 == 3
    missing_nics = 2 if index % 7 == 6 else 0
    devices, links = [], {}
    gpus, nics = [], []
    for slot in range(8):
        socket = slot // 4
        bus = 0x10 + 0x20 * slot
        root = f"pci0000:{bus - 1:02x}"
        gpu = f"0000:{bus:02x}:00.0"
        devices.append(
            {
                "pci_address": gpu,
                "kind": "gpu",
                "vendor_id": "0x10de",
                "device_id": "0x2330",
                "pcie_root": root,
                "numa_node": socket,
                "gpu": {"minor": slot, "uuid": f"GPU-{index:06d}-{slot}", "model": "NVIDIA H100 80GB HBM3"},
            }
        )
        gpus.append((gpu, root, socket))
        if slot >= 8 - missing_nics:
            continue
        nic_socket = 1 if all_nics_on_socket_1 else socket
        nic_root = root if nic_socket == socket else f"pci0000:{0xE0 + slot:02x}"
        nic = f"0000:{bus + 1:02x}:00.0"
        devices.append(
            {
                "pci_address": nic,
                "kind": "rdma",
                "vendor_id": "0x15b3",
                "device_id": "0x1021",
                "pcie_root": nic_root,
                "numa_node": nic_socket,
                "rdma_devices": [f"mlx5_{slot}"],
                "netdevs": [{"name": f"ibp{bus + 1}s0", "speed_mbps": 400000, "type": "infiniband"}],
            }
        )
        nics.append((nic, nic_root, nic_socket))
    for gpu, groot, gsock in gpus:
        links[gpu] = {
            nic: ("PXB" if groot == nroot else "NODE" if gsock == nsock else "SYS") for nic, nroot, nsock in nics
        }
    return {"devices": devices, "links": links}


def site(nodes: int) -> dict:
    return {f"node-{i:04d}": node_topology(i) for i in range(nodes)}


def objects() -> list:
    settings = {"templates": {"pairs": {"counts": [1, 2, 4, 8]}, "pairs_fallback": {"counts": [1, 2]}}}
    rendered = claims.render(settings, "bench", MINOR)
    templates = [o for o in rendered["objects"] if o["kind"] == "ResourceClaimTemplate"]
    assert len(templates) == 10, [t["metadata"]["name"] for t in templates]
    return rendered["objects"]


def run_plan(topologies: dict, objs: list, shape_cache: bool = True) -> tuple[float, dict]:
    classes = [o for o in objs if o["kind"] == "DeviceClass"]
    templates = [o for o in objs if o["kind"] == "ResourceClaimTemplate"]
    start = time.perf_counter()
    # the GPUs as the driver publishes them on 1.36: shareable
    nodes = planner.nodes_from_topologies(topologies, shareable_gpus=dra_gates.shares_gpus(MINOR))
    result = planner.plan("bench", nodes, classes, templates, kubernetes_version=MINOR, shape_cache=shape_cache)
    return time.perf_counter() - start, result


def baseline(topologies: dict, objs: list) -> float:
    """Every selector of the catalogue on every device, no memo."""
    expressions = sorted(
        {
            s["cel"]["expression"]
            for o in objs
            for s in (o.get("spec") or {}).get("selectors") or []
            if o["kind"] == "DeviceClass"
        }
    )
    programs = [dra_cel.environment().compile(e) for e in expressions]
    nodes = planner.nodes_from_topologies(topologies, shareable_gpus=dra_gates.shares_gpus(MINOR))
    views = [
        dra_cel.cel_device(d, d["driver"], dra_cel.referenced_domains(expressions))
        for n in nodes.values()
        for d in n["devices"]
    ]
    start = time.perf_counter()
    for view in views:
        activation = dra_cel.environment().Activation({"device": view["cel"]})
        for program in programs:
            program.eval(activation)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--no-shape-cache",
        action="store_true",
        help="plan every node on its own, even when an identical node was planned already",
    )
    args = parser.parse_args()
    cache = not args.no_shape_cache
    objs = objects()
    print(
        f"templates: 10, devices per node: 16 (8 GPU + 8 NIC, fewer on every seventh node), "
        f"repeats: {args.repeats}, shape cache: {'on' if cache else 'off'}"
    )
    results = {}
    for size in SIZES:
        topologies = site(size)
        times = []
        for repeat in range(args.repeats):  # noqa: B007 - the count is what matters
            elapsed, plan_result = run_plan(topologies, objs, cache)
            times.append(elapsed)
        results[size] = statistics.median(times)
        fits = {t["name"]: t["fits_total"] for t in plan_result["templates"]}
        if size == SIZES[-1]:
            print("fits at 1000 nodes: " + ", ".join(f"{k}={v}" for k, v in fits.items()))
    big_site = site(SIZES[-1])
    base_time = statistics.median([baseline(big_site, objs) for repeat in range(args.repeats)])
    first = SIZES[0]
    print(f"{'nodes':>6} {'plan s':>8} {'ms/node':>8} {'linearity':>9}")
    for size in SIZES:
        linearity = (results[size] / results[first]) / (size / first)
        print(f"{size:>6} {results[size]:>8.3f} {1000 * results[size] / size:>8.3f} {linearity:>9.2f}")
    total = results[SIZES[-1]]
    print(f"baseline (every class selector on every device, no memo, 1000 nodes): {base_time:.3f} s")
    print(f"plan / baseline: {total / base_time:.2f}")
    verdict = "meets" if total <= TARGET_SECONDS else "MISSES"
    print(f"1000 nodes: {total:.3f} s, {verdict} the {TARGET_SECONDS:.0f} s target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
