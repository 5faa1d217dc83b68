# SPDX-License-Identifier: Apache-2.0
"""The job planner against a brute force of its own, on a few hundred random small sites.

The brute force never calls the allocator: it knows each device's PCIe root, NUMA node and rail from
the site it generated, enumerates per node every tuple of free devices that one claim of the template
may take (its own reading of the template's constraints), the most pairwise-disjoint tuples of each
rail signature (the worker's NICs' sorted rails), and then every assignment of the job's workers to
nodes within those counts. It agrees with the planner on whether each job fits, on the figures that
decide it, and checks every placement: the level (one rack when required, as few racks as any
assignment when preferred), and the whole order of the choice: of every valid assignment, on every
rail signature, the planner's has the fewest domains, then the fewest nodes, then the least capacity
left over in its domains, then the first names (natural order), then the first signature; each
worker's devices (a valid tuple, free, not shared with another worker), and one signature for all
workers.

The templates are ones whose greedy count (claims placed one after another, as the planner and the
scheduler place them) is the most disjoint tuples, so the two must agree: in each, the devices a
claim may combine fall into groups (a PCIe root, a NUMA node, the whole node) inside which any free
devices of the right kinds do, so a packing that cannot take one more claim is a biggest one:

- ``pair``: a GPU and a NIC on one PCIe root (``matchAttribute`` pcieRoot);
- ``nic``: one NIC;
- ``gpu-2nic``: one GPU and two NICs, anywhere on the node;
- ``numa``: two GPUs and a NIC on one NUMA node (``matchAttribute`` numaNode over all three);
- ``rail-1``: a GPU and a NIC of rail 1 (a selector on the rail, as the rail templates pin it);
- ``gpu``: one GPU (no NIC: no rail constraint);
- ``any-2``: two devices of a class that takes GPUs and NICs alike, so a worker has 0, 1 or 2 NICs (its
  rail signature ``[]``, ``[r]`` or ``[r, s]``); within one signature any free devices of its kinds do.
"""

from __future__ import annotations

import itertools
import random

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.levels import natural_key
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import place as jobs
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.tests.support.fuzzing import profiles as fuzz_profiles
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    CLASSES,
    KIND,
    device_class,
    exactly,
    site_placement,
    template,
)

RAIL_1 = 'has(device.attributes["dra.aligned.dev"].rail) && device.attributes["dra.aligned.dev"].rail == 1'
ROOT, NUMA = "resource.kubernetes.io/pcieRoot", "resource.kubernetes.io/numaNode"
TEMPLATES = [
    template("pair", [exactly("gpu", "gpu"), exactly("nic", "nic")], [{"matchAttribute": ROOT}]),
    template("nic", [exactly("nic", "nic")]),
    template("gpu-2nic", [exactly("gpu", "gpu"), exactly("nic", "nic", count=2)]),
    template("numa", [exactly("gpu", "gpu", count=2), exactly("nic", "nic")], [{"matchAttribute": NUMA}]),
    template("rail-1", [exactly("gpu", "gpu"), exactly("nic", "nic", selectors=[{"cel": {"expression": RAIL_1}}])]),
    template("gpu", [exactly("gpu", "gpu")]),
    template("any-2", [exactly("two", "gpu-or-nic", count=2)]),
]
BRUTE_CLASSES = CLASSES + [device_class("gpu-or-nic", f'{KIND} == "gpu" || {KIND} == "nic"')]
ROOTS = {"pci0000:a0": 0, "pci0000:b0": 0, "pci0000:c0": 1}  # root -> NUMA node
# Random sites per kind: the full suite's counts, a share of them in the quick tier (fuzzing profiles).
CASES = fuzz_profiles.examples(500)
SPANNING_CASES = fuzz_profiles.examples(150)
UNEVEN_CASES = fuzz_profiles.examples(150)
UNEVEN_RACKS = ["r2", "r10", "r9", "r11"]  # plain and natural order differ


# -- the random site -------------------------------------------------------------------------------


def random_site(rng: random.Random, kind: str = "any") -> dict:
    """2-6 nodes in 1-3 racks (a node now and then without one), 1-4 GPUs and 1-4 NICs each on random roots,
    NICs on rails 0-2 (mostly 0 and 1) or of unknown rail, some devices held; one job of 1-6 workers (1-8
    preferred). ``kind`` ``spanning``: a preferred job of 4-10 workers, which often needs more than one rack;
    ``uneven``: a preferred job of 4-12 workers on 3-6 nodes in 3-4 racks named r2, r10, r9, r11, whose nodes
    hold different numbers of workers (which racks and nodes take the job is then a real choice)."""
    site = {"nodes": {}, "racks": {}, "held": {}}
    spanning = kind != "any"
    racks = [f"r{i}" for i in range(rng.randint(1, 3))]
    if kind == "uneven":
        racks = UNEVEN_RACKS[: rng.randint(3, 4)]
    for index in range(rng.randint(3 if kind == "uneven" else 2, 6)):
        name = f"n{index}"
        devices = []
        for position in range(rng.randint(1, 4)):
            devices.append({"kind": "gpu", "bdf": f"0000:{0x10 + position:02x}:00.0", "root": rng.choice(list(ROOTS))})
        for position in range(rng.randint(1, 4)):
            rail = rng.choice([0, 1, 2, None] if rng.random() < 0.2 else [0, 0, 1, 1, 2])
            devices.append({"kind": "nic", "bdf": f"0000:{0x40 + position:02x}:00.0", "root": rng.choice(list(ROOTS)),
                            "rail": rail})  # fmt: skip
        for device in devices:
            device["numa"] = ROOTS[device["root"]]
            device["label"] = f"{device['kind']}-{device['bdf'].replace(':', '-').replace('.', '-')}"
        site["nodes"][name] = devices
        if rng.random() > 0.1:
            site["racks"][name] = rng.choice(racks)
        held = [d["label"] for d in devices if rng.random() < 0.2]
        if held:
            site["held"][name] = held
    if rng.random() < 0.2:  # a site without rails
        for devices in site["nodes"].values():
            for device in devices:
                device["rail"] = None
    mode = "preferred" if spanning else rng.choice([None, "required", "preferred"])
    # preferred jobs a little bigger: more of them need more than one rack
    workers = rng.randint(4, 10) if spanning else rng.randint(1, 8 if mode == "preferred" else 6)
    name = rng.choice(TEMPLATES)["metadata"]["name"]
    if kind == "uneven":
        workers, name = rng.randint(4, 12), rng.choice(["gpu", "pair", "any-2", "nic"])
    site["job"] = {"name": "j", "workers": workers, "template": name}
    if mode:
        site["job"]["placement"] = {"level": "rack", "mode": mode}
    site["use_held"] = rng.random() < 0.7
    return site


def planner_nodes(site: dict) -> dict:
    topologies, rails = {}, {}
    for name, devices in site["nodes"].items():
        gpus = [d for d in devices if d["kind"] == "gpu"]
        nics = [d for d in devices if d["kind"] == "nic"]
        topology_devices = [
            {"pci_address": d["bdf"], "kind": "gpu", "pcie_root": d["root"], "numa_node": d["numa"], "vendor_id": "0x10de"}
            for d in gpus
        ] + [
            {"pci_address": d["bdf"], "kind": "rdma", "pcie_root": d["root"], "numa_node": d["numa"],
             "rdma_devices": [f"mlx5_{i}"], "netdevs": [{"name": f"nic{i}"}]}
            for i, d in enumerate(nics)
        ]  # fmt: skip
        links = {
            g["bdf"]: {
                n["bdf"]: "PIX" if g["root"] == n["root"] else "NODE" if g["numa"] == n["numa"] else "SYS" for n in nics
            }
            for g in gpus
        }
        topologies[name] = {"devices": topology_devices, "links": links}
        rails[name] = {d["bdf"]: d["rail"] for d in nics if d["rail"] is not None}
    return planner.nodes_from_topologies(topologies, rails=rails)


# -- the brute force -------------------------------------------------------------------------------


def claim_tuples(name: str, devices: list[dict]) -> list[tuple[frozenset, tuple | None]]:
    """Every ``(labels, rail signature)`` one claim of template ``name`` may take from ``devices``."""
    gpus = [d for d in devices if d["kind"] == "gpu"]
    nics = [d for d in devices if d["kind"] == "nic"]
    found = []

    def add(chosen):
        rails = [d["rail"] for d in chosen if d["kind"] == "nic"]
        signature = None if None in rails else tuple(sorted(rails))
        found.append((frozenset(d["label"] for d in chosen), signature))

    if name == "pair":
        for g, n in itertools.product(gpus, nics):
            if g["root"] == n["root"]:
                add([g, n])
    elif name == "nic":
        for n in nics:
            add([n])
    elif name == "gpu-2nic":
        for g, (n1, n2) in itertools.product(gpus, itertools.combinations(nics, 2)):
            add([g, n1, n2])
    elif name == "numa":
        for (g1, g2), n in itertools.product(itertools.combinations(gpus, 2), nics):
            if g1["numa"] == g2["numa"] == n["numa"]:
                add([g1, g2, n])
    elif name == "rail-1":
        for g, n in itertools.product(gpus, nics):
            if n["rail"] == 1:
                add([g, n])
    elif name == "any-2":
        for chosen in itertools.combinations(gpus + nics, 2):
            add(list(chosen))
    else:
        for g in gpus:
            add([g])
    return found


def most_disjoint(tuples: list[frozenset], cap: int) -> int:
    """The most pairwise-disjoint tuples, at most ``cap``: a search over every packing."""
    best = 0

    def grow(start, taken, count):
        nonlocal best
        best = max(best, count)
        if best >= cap:
            return
        for index in range(start, len(tuples)):
            if taken.isdisjoint(tuples[index]):
                grow(index + 1, taken | tuples[index], count + 1)

    grow(0, frozenset(), 0)
    return best


def brute_capacities(site: dict, name: str, workers: int, held: dict) -> tuple[bool, dict]:
    """``(rails_on, {signature: {node: workers}})``; the signature None without a rail constraint."""
    has_rails = any(d["kind"] == "nic" and d["rail"] is not None for ds in site["nodes"].values() for d in ds)
    nic_wanted = {"pair": True, "nic": True, "gpu-2nic": True, "numa": True, "gpu": False, "any-2": True}
    takes_nics = nic_wanted.get(name) if name != "rail-1" else any(
        d["kind"] == "nic" and d["rail"] == 1 for ds in site["nodes"].values() for d in ds
    )  # fmt: skip
    rails_on = has_rails and takes_nics
    per_signature: dict = {}
    for node, devices in site["nodes"].items():
        free = [d for d in devices if d["label"] not in set(held.get(node, ()))]
        tuples = claim_tuples(name, free)
        signatures = {s for _t, s in tuples if s is not None} if rails_on else {None}
        for signature in signatures:
            chosen = [t for t, s in tuples if s == signature or not rails_on]
            per_signature.setdefault(signature, {})[node] = most_disjoint(chosen, workers)
    return rails_on, per_signature


def assignments(caps: dict[str, int], workers: int):
    """Every ``{node: workers}`` with ``workers`` in all, each node within its capacity."""
    names = sorted(n for n, c in caps.items() if c)

    def extend(position, left, so_far):
        if left == 0:
            yield dict(so_far)
            return
        if position == len(names):
            return
        node = names[position]
        for count in range(min(caps[node], left), -1, -1):
            if count:
                so_far[node] = count
            yield from extend(position + 1, left - count, so_far)
            so_far.pop(node, None)

    yield from extend(0, workers, {})


def brute_force(site: dict) -> dict:
    """Whether the job fits, the fewest racks and nodes of its valid assignments, and the smallest key of the
    planner's order over all of them: ``(racks, nodes, capacity left over in its racks, rack names, signature)``
    (one "rack" and no names without a placement)."""
    job = site["job"]
    placement = job.get("placement") or {}
    held = site["held"] if site["use_held"] else {}
    rails_on, per_signature = brute_capacities(site, job["template"], job["workers"], held)
    best = {"fits": False, "racks": None, "nodes": None, "key": None, "rails_on": rails_on, "caps": per_signature}
    for signature, caps in per_signature.items():
        if placement:
            caps = {n: c for n, c in caps.items() if n in site["racks"]}
        totals: dict = {}
        for node, count in caps.items():
            totals[site["racks"].get(node)] = totals.get(site["racks"].get(node), 0) + count
        for assignment in assignments(caps, job["workers"]):
            racks = {site["racks"].get(n) for n in assignment}
            if placement.get("mode") == "required" and len(racks) > 1:
                continue
            best["fits"] = True
            best["racks"] = min(best["racks"] or 99, len(racks))
            best["nodes"] = min(best["nodes"] or 99, len(assignment))
            if placement:
                left = sum(totals[r] for r in racks) - job["workers"]
                key = (len(racks), len(assignment), left, sorted(racks, key=natural_key), signature or ())
            else:
                key = (1, len(assignment), sum(totals.values()) - job["workers"], [], signature or ())
            best["key"] = key if best["key"] is None else min(best["key"], key, key=sort_key)
    return best


def sort_key(key: tuple) -> tuple:
    """A choice key with its names in natural order."""
    return (*key[:3], [natural_key(name) for name in key[3]], key[4])


# -- the comparison -------------------------------------------------------------------------------


def check_placement(site: dict, entry: dict, brute: dict) -> None:
    job = site["job"]
    placement = job.get("placement") or {}
    held = site["held"] if site["use_held"] else {}
    devices = {(n, d["label"]): d for n, ds in site["nodes"].items() for d in ds}
    workers = entry["workers"]
    assert [w["index"] for w in workers] == list(range(job["workers"]))
    taken = set()
    for worker in workers:
        node = worker["node"]
        labels = frozenset(label for group in worker["devices"].values() for label in group)
        chosen = [devices[(node, label)] for label in labels]
        valid = {t for t, _s in claim_tuples(job["template"], chosen)}
        assert labels in valid, (worker, job["template"])
        assert not labels & set(held.get(node, ())), "a held device given to a worker"
        assert not {(node, label) for label in labels} & taken, "a device given to two workers"
        taken |= {(node, label) for label in labels}
        rails = [d["rail"] for d in chosen if d["kind"] == "nic"]
        assert sorted(worker["rails"], key=str) == sorted(rails, key=str)
        if brute["rails_on"]:
            assert None not in rails and sorted(rails) == entry["rails"], (worker, entry["rails"])
    if not brute["rails_on"]:
        assert entry["rails"] is None
    nodes = [w["node"] for w in workers]
    # consecutive on a node, in rack then node order (node order without a placement), both natural
    order = (lambda n: (natural_key(site["racks"][n]), natural_key(n))) if placement else natural_key
    assert nodes == sorted(nodes, key=order), "indexes out of rack and node order"
    racks = {site["racks"].get(n) for n in nodes}
    if placement:
        assert None not in racks, "a worker on a host without a rack"
        assert sorted(racks, key=natural_key) == [d["name"] for d in entry["domains"]]
    if placement.get("mode") == "preferred":
        assert len(racks) == brute["racks"]
    else:
        assert len(set(nodes)) == brute["nodes"], (nodes, brute)
    if placement.get("mode") == "required":
        assert entry["domain"] == {"level": "rack", "name": next(iter(racks))}
    # the whole order: nothing valid comes before the planner's choice
    capacity = entry["capacity"]
    if placement:
        left = sum(capacity["domains"][r] for r in racks) - job["workers"]
        key = (len(racks), len(set(nodes)), left, sorted(racks, key=natural_key), tuple(entry["rails"] or ()))
    else:
        key = (1, len(set(nodes)), capacity["site"] - job["workers"], [], tuple(entry["rails"] or ()))
    assert key == brute["key"], (key, brute["key"])


def check_figures(site: dict, entry: dict, brute: dict) -> None:
    """The capacity the planner reports is the brute force's, for the rails it names."""
    signature = tuple(entry["rails"]) if entry["rails"] is not None else None
    caps = brute["caps"].get(signature, {}) if brute["rails_on"] or signature is None else {}
    in_scope = [n for n in site["nodes"] if n in site["racks"] or not site["job"].get("placement")]
    assert entry["capacity"]["site"] == sum(caps.get(n, 0) for n in in_scope)
    if site["job"].get("placement"):
        totals = {}
        for node in in_scope:
            totals[site["racks"][node]] = totals.get(site["racks"][node], 0) + caps.get(node, 0)
        assert entry["capacity"]["domains"] == totals


CASES_BY_KIND = (
    [(seed, "any") for seed in range(CASES)]
    + [(seed, "spanning") for seed in range(SPANNING_CASES)]
    + [(seed, "uneven") for seed in range(UNEVEN_CASES)]
)


@pytest.mark.parametrize(("seed", "kind"), CASES_BY_KIND)
def test_the_planner_agrees_with_the_brute_force(seed, kind):
    rng = random.Random(seed)
    site = random_site(rng, kind)
    placement = site_placement(
        ["rack"], {n: ({"rack": site["racks"][n]} if n in site["racks"] else {}) for n in site["nodes"]}
    )
    held = {n: set(labels) for n, labels in site["held"].items()} if site["use_held"] else None
    result = jobs.place_jobs("s", [site["job"]], planner_nodes(site), BRUTE_CLASSES, TEMPLATES, placement, held=held)
    (entry,) = result["jobs"]
    brute = brute_force(site)
    assert entry["fits"] is brute["fits"], (site, entry["reason"], brute)
    assert entry["capacity_exact"] is True and entry["notes"] == []
    check_figures(site, entry, brute)
    if brute["fits"]:
        assert entry["reason"] is None
        check_placement(site, entry, brute)
    else:
        assert entry["workers"] == [] and entry["reason"]
