# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: the acceptance site of the job planner: 16 nodes in 4 racks of 2 blocks, and its jobs.

- rack r1 (block b1): n01-n04, four aligned GPU-NIC pairs on rails 0-3; n01 runs a pod already (its
  GPU 0 and NIC 1 are held);
- rack r2 (block b1): n05-n08, four aligned pairs, two per socket, rails 0-3;
- rack r3 (block b2): n09-n12, four aligned pairs, their NICs on rails 3, 2, 1, 0 (a map rule);
- rack r4 (block b2): n13-n16, four GPUs and four NICs on roots of their own (one socket), rails 0-3.

Jobs: ``train`` (4 workers of ``gpu-nic-rails-2-0``, required rack) fits in one rack; ``wide`` (10
workers of ``gpu-nic-pair-1``, preferred rack) only fits across racks; the same job required, and
``big`` (8 workers of ``gpu-nic-rails-4-0``, required block) do not fit, with numbers; ``infer`` (12
one-GPU workers, required rack) puts several workers on a node.

``RESULT`` is what the job planner makes of ``JOBS`` on the site (``place``). Never shipped.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import place as jobs
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    NIC_NAME_RULE,
    aligned_node,
    rail_node,
    rail_objects,
    rail_planner_nodes,
    site_placement,
    split_objects,
)

RACKS = {"r1": ("b1", range(1, 5)), "r2": ("b1", range(5, 9)), "r3": ("b2", range(9, 13)), "r4": ("b2", range(13, 17))}


HOSTS = {f"n{i:02d}": (rack, block) for rack, (block, numbers) in RACKS.items() for i in numbers}


# n13-n16: the GPUs on roots 10-40, the NICs on roots 50-80, one socket
APART = rail_node(
    [(f"0000:{i}1:00.0", f"pci0000:{i}0", 0) for i in range(1, 5)],
    [(f"0000:{i + 4}2:00.0", f"pci0000:{i + 4}0", 0) for i in range(1, 5)],
)


REVERSED = {"by": "map", "map": {"0000:12:00.0": 3, "0000:22:00.0": 2, "0000:32:00.0": 1, "0000:42:00.0": 0}}


def topology(host: str):
    rack = HOSTS[host][0]
    return {"r1": aligned_node(4), "r2": aligned_node(4, numa_split=2), "r3": aligned_node(4), "r4": APART}[rack]


def rule(host: str):
    return REVERSED if HOSTS[host][0] == "r3" else dict(NIC_NAME_RULE, count=4)


TOPOLOGIES = {host: topology(host) for host in HOSTS}


RULES = {host: rule(host) for host in HOSTS}


HELD = {"n01": {"gpu-0000-11-00-0", "nic-0000-22-00-0"}}


def device_facts() -> dict:
    """``{(host, label): (kind, PCIe root, NUMA node, rail)}`` read from the site's own description."""
    facts = {}
    for host, topo in TOPOLOGIES.items():
        nics = [d for d in topo["devices"] if d["kind"] == "rdma"]
        for device in topo["devices"]:
            kind = "gpu" if device["kind"] == "gpu" else "nic"
            label = f"{kind}-{device['pci_address'].replace(':', '-').replace('.', '-')}"
            rail = None
            if kind == "nic":
                mapped = RULES[host].get("map")
                rail = mapped[device["pci_address"]] if mapped else nics.index(device)
            facts[(host, label)] = (kind, device["pcie_root"], device["numa_node"], rail)
    return facts


FACTS = device_facts()


def place(job_list):
    nodes, problems = rail_planner_nodes(TOPOLOGIES, RULES)
    assert problems == []
    classes, templates = split_objects(rail_objects({"n01": dict(NIC_NAME_RULE, count=4)}))
    placement = site_placement(["block", "rack"], {h: {"block": b, "rack": r} for h, (r, b) in HOSTS.items()})
    result = jobs.place_jobs(
        "acceptance", job_list, nodes, classes, templates, placement, held=HELD, kubernetes_version="1.36"
    )
    return {entry["name"]: entry for entry in result["jobs"]}


JOBS = [
    {
        "name": "train",
        "workers": 4,
        "template": "gpu-nic-rails-2-0",
        "placement": {"level": "rack", "mode": "required"},
    },
    {"name": "wide", "workers": 10, "template": "gpu-nic-pair-1", "placement": {"level": "rack", "mode": "preferred"}},
    {
        "name": "wide-one-rack",
        "workers": 10,
        "template": "gpu-nic-pair-1",
        "placement": {"level": "rack", "mode": "required"},
    },
    {"name": "big", "workers": 8, "template": "gpu-nic-rails-4-0", "placement": {"level": "block", "mode": "required"}},
    {"name": "infer", "workers": 12, "template": "gpu-only", "placement": {"level": "rack", "mode": "required"}},
]


RESULT = place(JOBS)
