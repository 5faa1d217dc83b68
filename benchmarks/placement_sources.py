#!/usr/bin/env python
# SPDX-License-Identifier: Apache-2.0
"""How long does reading placement levels from 1,000 Nodes and their ResourceSlices take?

The site: 1,000 nodes in 10 GKE blocks of 10 subblocks of 10 hosts, each Node
with the GKE topology labels (``cloud.google.com/gce-topology-block``,
``-subblock``, ``-host``) and ``nvidia.com/gpu.clique``, and one DRANET
ResourceSlice per node (driver ``dra.net``, 8 NICs, each with
``gce.dra.net/block``, ``subBlock`` and ``host`` under
``attributes.<name>.string`` and the other attributes DRANET publishes).

Printed, medians of ``--repeats`` runs, each a whole
``levels.site_placement`` (levels checked, every node's domains read and
checked, nesting, node names):

- ``inventory`` (the baseline): the same domains from each host's
  ``aligned_dra_placement``, as before this change;
- ``node labels``: ``{preset: gke, nvlink: true}`` from the Node objects;
- ``device attributes``: the same three levels from the slices' attributes;
- ``files``: the Nodes and slices read from JSON and from YAML files
  (``source: files``; ``sources.load_files``), then the device attribute
  placement.

Target (from the project's issue): reading 1,000 Nodes and their slices adds
at most 2 s to the placement stage; the added time is the slowest of the
sourced runs minus the baseline, said apart for objects or JSON files and for
YAML files (parsed by ``controller/inputs/site.load_documents`` with PyYAML's
pure-Python loader, timed once). Reading from an API server is not measured
here (no cluster): its list calls add the network.
Run: ``.venv/bin/python benchmarks/placement_sources.py``; ``--nodes`` makes
the site smaller or larger (the target is for 1,000).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / ".cache" / "collections"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from jobs import timed  # noqa: E402 - benchmarks/jobs.py: the median of repeated calls

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels, sources  # noqa: E402

TARGET_SECONDS = 2.0
NODES = 1000
DEVICES = 8
GKE = ("block", "subblock", "host")
KEYS = {level: f"cloud.google.com/gce-topology-{level}" for level in GKE}
ATTRIBUTES = {"block": "gce.dra.net/block", "subblock": "gce.dra.net/subBlock", "host": "gce.dra.net/host"}
DRANET = [
    {"name": level, "source": "device_attribute", "driver": "dra.net", "attribute": ATTRIBUTES[level]} for level in GKE
]
INVENTORY = [{"name": level, "label": f"aligned.dev/{level}"} for level in GKE]


def domains(index: int) -> dict[str, str]:
    """Node ``index``'s block, subblock and host (10 hosts a subblock, 10 subblocks a block)."""
    return {
        "block": f"b{index // 100:03d}",
        "subblock": f"b{index // 100:03d}-s{index // 10:04d}",
        "host": f"h{index:05d}",
    }


def site(count: int) -> tuple[dict, list, list]:
    """``(per_host, nodes, slices)`` of ``count`` nodes."""
    per_host, nodes, slices = {}, [], []
    for index in range(count):
        name, row = f"gke-a4x-{index:05d}", domains(index)
        per_host[name] = row
        labels = {KEYS[level]: row[level] for level in GKE} | {
            "kubernetes.io/hostname": name,
            "nvidia.com/gpu.clique": f"2b8f9a3c-1d4e-4f6a-9c1a-{index // 10:012d}.1",
        }
        nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
        common = {ATTRIBUTES[level]: {"string": row[level]} for level in GKE}
        common |= {"gce.dra.net/networkName": {"string": "rdma-net"}, "dra.net/rdma": {"bool": True}}
        devices = [
            {
                "name": f"pci-0000-{0x18 + 0x20 * d:02x}-00-0",
                "attributes": {"dra.net/ifName": {"string": f"gpu{d}rdma0"}, **common},
            }
            for d in range(DEVICES)
        ]
        slices.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-dra.net"},
                "spec": {
                    "driver": "dra.net",
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1},
                    "devices": devices,
                },
            }
        )
    return per_host, nodes, slices


def reader(files: dict, hosts: dict):
    """A run that reads the Nodes and slices from ``files``, then places the device attribute levels."""

    def run():
        read_nodes, read_slices = sources.load_files(files)
        return levels.site_placement(DRANET, hosts, {}, nodes=read_nodes, slices=read_slices)

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=NODES, help=f"nodes of the site (default {NODES})")
    args = parser.parse_args()
    if args.repeats < 1 or args.nodes < 1:
        parser.error("--repeats and --nodes must be at least 1")
    per_host, nodes, slices = site(args.nodes)
    hosts = dict.fromkeys(per_host)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"nodes: {args.nodes}, one DRANET slice each with {DEVICES} devices; CPUs: {cpus}; repeats: {args.repeats}")
    runs = {
        "inventory (baseline)": lambda: levels.site_placement(INVENTORY, per_host, {}),
        "node labels": lambda: levels.site_placement({"preset": "gke", "nvlink": True}, hosts, {}, nodes=nodes),
        "device attributes": lambda: levels.site_placement(DRANET, hosts, {}, nodes=nodes, slices=slices),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for suffix, dump in (("json", json.dumps), ("yaml", yaml.safe_dump)):
            files = {"node_files": [f"{tmp}/nodes.{suffix}"], "slice_files": [f"{tmp}/slices.{suffix}"]}
            Path(files["node_files"][0]).write_text(dump({"apiVersion": "v1", "kind": "List", "items": nodes}))
            Path(files["slice_files"][0]).write_text(dump({"apiVersion": "v1", "kind": "List", "items": slices}))
            runs[f"files ({suffix}) + device attributes"] = reader(files, hosts)
        measured = {}
        print(f"{'read':<36} {'s':>8}  {'x baseline':>10}  problems")
        for name, call in runs.items():
            # YAML is slow to parse (PyYAML's pure-Python loader): timed once
            seconds, (placement, problems) = timed(1 if "yaml" in name else args.repeats, call)
            measured[name] = seconds
            base = measured["inventory (baseline)"]
            assert placement["domains"][next(iter(per_host))]["host"] == "h00000"
            print(f"{name:<36} {seconds:>8.3f}  {seconds / base:>10.1f}  {len(problems)}")
    base = measured.pop("inventory (baseline)")
    yaml_added = measured.pop("files (yaml) + device attributes") - base
    for what, added in (("objects or JSON files", max(measured.values()) - base), ("YAML files", yaml_added)):
        verdict = "meets" if added <= TARGET_SECONDS else "MISSES"
        if args.nodes != NODES:
            verdict = f"not compared: the {TARGET_SECONDS:.0f} s target is for {NODES} nodes"
        else:
            verdict = f"{verdict} the {TARGET_SECONDS:.0f} s target"
        print(f"added over the inventory path, {what}: {added:.3f} s, {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
