# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: topologies and sites for the site report's tests and benchmark.

Topologies come from the real probe run on the fixture trees (``materialize``
into ``.cache/sysfs``, the same trees the demo uses). ``identical_site`` makes
a large site of machines built the same way but with their own identifiers
(hostname, MACs, GUIDs, GPU UUIDs, memory size, link state), as real fleets
look. Never shipped.
"""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import probe
from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize

REPO = Path(__file__).resolve().parents[3]
TREES = REPO / ".cache" / "sysfs"

# The fixtures the demo's nodes are made of (their pictures and matrices are tested one by one).
DEMO_FIXTURES = ("dgx-h100", "mi300x", "sriov-8x64", "hyperv-ndv4", "vm-flat", "pci-domain-5digit")

_CACHE: dict[str, dict[str, Any]] = {}


class Elements(HTMLParser):
    """Every start tag with its attributes (the page must parse as HTML)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def parse(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Elements()
    parser.feed(html)
    return parser.tags


def topology_of(fixture: str) -> dict[str, Any]:
    """The probe's topology of one fixture tree (probed once per process; copy before editing)."""
    if fixture not in _CACHE:
        root = materialize(fixture, TREES)
        _CACHE[fixture] = probe(str(root / "sys"), str(root / "proc"))
    return copy.deepcopy(_CACHE[fixture])


def with_identity(topology: dict[str, Any], index: int) -> dict[str, Any]:
    """A copy of ``topology`` as another machine of the same model would report it."""
    other = copy.deepcopy(topology)
    other["hostname"] = f"node-{index:04d}"
    other["sysfs_root"] = f"/sys-of-node-{index}"
    for device in other["devices"]:
        for position, netdev in enumerate(device.get("netdevs") or []):
            netdev["address"] = f"02:{index // 256:02x}:{index % 256:02x}:00:{position:02x}:01"
            netdev["operstate"] = "down" if index % 7 == 0 else netdev.get("operstate")
        if device.get("gpu") and device["gpu"].get("uuid"):
            device["gpu"]["uuid"] = f"GPU-{index:08x}-0000-0000-0000-{device['pci_address'][5:7]}0000000000"
    for rdma in other.get("rdma_devices", []):
        rdma["node_guid"] = f"{index:04x}:0000:0000:{len(rdma['name']):04x}"
    for node in other.get("numa_nodes", []):
        if node.get("memory_kb"):
            node["memory_kb"] -= index * 4
    return other


def identical_site(fixture: str, count: int, prefix: str = "gpu") -> dict[str, dict[str, Any]]:
    """``count`` nodes of the same layout, named ``<prefix>-0001`` ..."""
    base = topology_of(fixture)
    return {f"{prefix}-{i:04d}": with_identity(base, i) for i in range(1, count + 1)}


def write_site(output_dir: Path, site: str, nodes: dict[str, dict[str, Any]]) -> None:
    """Lay out ``nodes`` the way the topology role does (node files and index.json)."""
    node_dir = output_dir / site / "nodes"
    node_dir.mkdir(parents=True, exist_ok=True)
    for host, topology in nodes.items():
        (node_dir / f"{host}.json").write_text(json.dumps(topology))
    index_path = output_dir / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {"sites": []}
    index["sites"] = [s for s in index["sites"] if s["site"] != site]
    index["sites"].append({"site": site, "node_files": [f"{site}/nodes/{host}.json" for host in sorted(nodes)]})
    index_path.write_text(json.dumps(index))


def plan_for(site: str, nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A plan.json in the planner's contract shape (docs: plan-contract), built by hand for tests."""
    hosts = sorted(nodes)
    return {
        "schema_version": 1,
        "site": site,
        "kubernetes_version": "1.36",
        "driver": "dra.aligned.dev",
        "templates": [
            {
                "name": "gpu-nic-pair-1",
                "required": True,
                "fits_total": 8 * len(hosts),
                "worst_level": "PXB",
                "satisfiable": True,
                "errors": [],
                "nodes": {
                    h: {
                        "fits": 8,
                        "worst_level": "PXB",
                        "allocations": [
                            {
                                "devices": {"gpu": ["gpu-0000-1a-00-0"], "nic": ["nic-0000-1d-00-0"]},
                                "worst_level": "PXB",
                            }
                        ],
                    }
                    for h in hosts
                },
            },
            {
                "name": "eight-gpus-one-root",
                "required": False,
                "fits_total": 0,
                "worst_level": None,
                "satisfiable": False,
                "reason": "a selector fails to evaluate (see errors), which aborts allocation",
                "errors": [
                    {
                        "node": hosts[0],
                        "device": "gpu-0000-1a-00-0",
                        "request": "gpu",
                        "expression": "device.attributes['dra.aligned.dev'].model.startsWith(1)",
                        "message": "no matching overload for 'startsWith' applied to '(string, int)'",
                    }
                ],
                "nodes": {h: {"fits": 0, "worst_level": None, "allocations": []} for h in hosts},
            },
        ],
    }
