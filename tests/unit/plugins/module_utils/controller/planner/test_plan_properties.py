# SPDX-License-Identifier: Apache-2.0
"""Property tests of the planner on random small nodes and templates.

1. No planned allocation violates a selector, a count (``ExactCount`` or
   ``All``) or a constraint, and no device is handed to two claims.
2. Whenever the planner says a claim does not fit (on an empty node, or after
   the claims it placed), an exhaustive search over every assignment agrees.
3. On random topologies, the rendered ``gpu-nic-pair-N`` templates fit exactly
   the number of claims counted by hand from the host bridges.

The selectors used here have a plain-Python twin (``matches``) so the check
does not trust the CEL path it is checking.
"""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.tests.support.fuzzing import profiles as fuzz_profiles

DOMAIN = "dra.aligned.dev"
ROOT = "resource.kubernetes.io/pcieRoot"
NUMA = "resource.kubernetes.io/numaNode"

CLASSES = [
    {
        "metadata": {"name": k},
        "spec": {"selectors": [{"cel": {"expression": f'device.attributes["{DOMAIN}"].kind == "{k}"'}}]},
    }
    for k in ("gpu", "nic")
]


@st.composite
def devices(draw):
    count = draw(st.integers(1, 6))
    found = []
    for i in range(count):
        attributes = {f"{DOMAIN}/kind": {"string": draw(st.sampled_from(["gpu", "nic"]))}}
        if draw(st.booleans()) or i == 0:
            attributes[ROOT] = {"string": draw(st.sampled_from(["pci0000:00", "pci0000:40", "pci0000:80"]))}
        if draw(st.integers(0, 4)):
            attributes[NUMA] = {"int": draw(st.integers(0, 1))}
        found.append({"name": f"d{i}", "driver": DOMAIN, "pool": "n", "attributes": attributes})
    return found


@st.composite
def alternatives(draw, name):
    cls = draw(st.sampled_from(["gpu", "nic"]))
    numa = draw(st.sampled_from([None, 0, 1]))
    if draw(st.integers(0, 4)) == 0:
        spec = {"deviceClassName": cls, "allocationMode": "All"}
    else:
        spec = {"deviceClassName": cls, "count": draw(st.integers(1, 2))}
    if numa is not None:
        # has() first: a device without the attribute is skipped instead of aborting
        spec["selectors"] = [
            {
                "cel": {
                    "expression": f'has(device.attributes["resource.kubernetes.io"].numaNode) && '
                    f'device.attributes["resource.kubernetes.io"].numaNode == {numa}'
                }
            }  # fmt: skip
        ]
    spec["name"] = name
    return spec


@st.composite
def templates(draw):
    n = draw(st.integers(1, 3))
    requests = []
    names = []
    for i in range(n):
        if draw(st.integers(0, 3)) == 0:
            subs = [draw(alternatives(f"a{j}")) for j in range(draw(st.integers(2, 3)))]
            requests.append({"name": f"r{i}", "firstAvailable": subs})
            names += [f"r{i}"] + [f"r{i}/{s['name']}" for s in subs]
        else:
            spec = draw(alternatives(f"r{i}"))
            spec.pop("name")
            requests.append({"name": f"r{i}", "exactly": spec})
            names.append(f"r{i}")
    constraints = []
    for position in range(draw(st.integers(0, 2))):  # noqa: B007 - how many, not which
        kind = draw(st.sampled_from(["matchAttribute", "distinctAttribute"]))
        attribute = draw(st.sampled_from([ROOT, NUMA]))
        chosen = draw(st.lists(st.sampled_from(names), max_size=3, unique=True))
        entry = {kind: attribute}
        if chosen:
            entry["requests"] = chosen
        constraints.append(entry)
    return {"metadata": {"name": "t"}, "spec": {"devices": {"requests": requests, "constraints": constraints}}}


def value(device, attribute):
    entry = device["attributes"].get(attribute)
    return None if entry is None else next(iter(entry.values()))


def matches(device, spec):
    if value(device, f"{DOMAIN}/kind") != spec["deviceClassName"]:
        return False
    for selector in spec.get("selectors") or []:
        wanted = int(selector["cel"]["expression"].rsplit("==", 1)[1])
        if value(device, NUMA) != wanted:
            return False
    return True


def alternative_list(request):
    if "firstAvailable" in request:
        return [(f"{request['name']}/{s['name']}", s) for s in request["firstAvailable"]]
    return [(request["name"], request["exactly"])]


def satisfies(template, chosen, node_devices):
    """``chosen``: {request: (alternative name, [devices])}; True when every rule holds."""
    used = [d["name"] for _alt, devs in chosen.values() for d in devs]
    if len(used) != len(set(used)):
        return False
    for request in template["spec"]["devices"]["requests"]:
        alt_name, devs = chosen[request["name"]]
        spec = dict(alternative_list(request))[alt_name]
        if not all(matches(d, spec) for d in devs):
            return False
        if spec.get("allocationMode") == "All":
            if not devs or len(devs) != sum(1 for d in node_devices if matches(d, spec)):
                return False
        elif len(devs) != spec.get("count", 1):
            return False
    for constraint in template["spec"]["devices"]["constraints"]:
        names = constraint.get("requests")
        pool = [
            d
            for request, (alt_name, devs) in chosen.items()
            if names is None or request in names or alt_name in names
            for d in devs
        ]
        attribute = constraint.get("matchAttribute") or constraint.get("distinctAttribute")
        values = [value(d, attribute) for d in pool]
        if any(v is None for v in values):
            return False
        if "matchAttribute" in constraint and len(set(values)) > 1:
            return False
        if "distinctAttribute" in constraint and len(set(values)) != len(values):
            return False
    return True


def exhaustive_fits(template, node_devices, in_use=frozenset()):
    """Whether any assignment of the devices not in use satisfies the template."""
    requests = template["spec"]["devices"]["requests"]
    free = [d for d in node_devices if d["name"] not in in_use]
    per_request = []
    for request in requests:
        options = []
        for alt_name, spec in alternative_list(request):
            if spec.get("allocationMode") == "All":
                wanted = [d for d in node_devices if matches(d, spec)]
                if wanted and not any(d["name"] in in_use for d in wanted):
                    options.append((alt_name, wanted))
                continue
            for combo in itertools.combinations(free, spec.get("count", 1)):
                options.append((alt_name, list(combo)))
        per_request.append(options)
    for choice in itertools.product(*per_request):
        if satisfies(template, {r["name"]: c for r, c in zip(requests, choice, strict=True)}, node_devices):
            return True
    return False


@settings(max_examples=fuzz_profiles.examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(devices(), templates())
def test_planned_allocations_obey_every_rule_and_no_fit_means_none_exists(node_devices, template):
    result = planner.plan("s", {"n": {"devices": node_devices, "links": {}}}, CLASSES, [template])
    entry = result["templates"][0]
    assert entry["errors"] == []  # the selectors guard with has(): nothing aborts
    node = entry["nodes"]["n"]
    by_name = {d["name"]: d for d in node_devices}
    handed_out = []
    for allocation in node["allocations"]:
        chosen = {}
        for request in template["spec"]["devices"]["requests"]:
            names = allocation["devices"][request["name"]]
            sub = (allocation.get("subrequests") or {}).get(request["name"])
            alt_name = f"{request['name']}/{sub}" if sub else request["name"]
            chosen[request["name"]] = (alt_name, [by_name[n] for n in names])
            handed_out += names
        assert satisfies(template, chosen, node_devices), allocation
    assert len(handed_out) == len(set(handed_out))
    # after the last claim it placed, nothing fits among the devices left
    assert not exhaustive_fits(template, node_devices, frozenset(handed_out))
    if node["fits"] == 0:
        assert not exhaustive_fits(template, node_devices)


@st.composite
def topologies(draw):
    """GPUs and RDMA NICs spread over a few host bridges and two sockets."""
    roots = [f"pci0000:{0x10 * r:02x}" for r in range(1, draw(st.integers(1, 4)) + 1)]
    socket_of = {root: draw(st.integers(0, 1)) for root in roots}
    devices = []
    for kind, prefix in (("gpu", 0x01), ("rdma", 0x81)):
        for i in range(draw(st.integers(0, 5))):
            root = draw(st.sampled_from(roots))
            device = {
                "pci_address": f"0000:{prefix + i:02x}:00.0",
                "kind": kind,
                "pcie_root": root,
                "numa_node": socket_of[root],
            }
            if kind == "rdma":
                device["rdma_devices"] = [f"mlx5_{i}"]
            devices.append(device)
    gpus = [d for d in devices if d["kind"] == "gpu"]
    nics = [d for d in devices if d["kind"] == "rdma"]
    links = {
        g["pci_address"]: {
            n["pci_address"]: "PIX"
            if g["pcie_root"] == n["pcie_root"]
            else ("NODE" if g["numa_node"] == n["numa_node"] else "SYS")
            for n in nics
        }
        for g in gpus
    }
    return {"devices": devices, "links": links}


@settings(max_examples=fuzz_profiles.examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topologies(), st.integers(1, 3))
def test_pair_templates_on_random_topologies_match_the_hand_count(topology, pairs):
    """``gpu-nic-pair-N`` fits floor(sum over roots of min(GPUs, NICs) / N) claims, all PIX."""
    from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims

    rendered = claims.render({"templates": {"pairs": {"counts": [pairs]}}}, "s", "1.36")
    classes = [o for o in rendered["objects"] if o["kind"] == "DeviceClass"]
    template = next(o for o in rendered["objects"] if o["metadata"]["name"] == f"gpu-nic-pair-{pairs}")
    result = planner.plan("s", planner.nodes_from_topologies({"n": topology}), classes, [template])
    node = result["templates"][0]["nodes"]["n"]
    per_root: dict[str, list[int]] = {}
    for device in topology["devices"]:
        per_root.setdefault(device["pcie_root"], [0, 0])[0 if device["kind"] == "gpu" else 1] += 1
    aligned_pairs = sum(min(g, n) for g, n in per_root.values())
    assert node["fits"] == aligned_pairs // pairs
    assert all(a["aligned_level"] == "PIX" for a in node["allocations"])
    if node["fits"] == 0:
        assert "reason" in node
