# SPDX-License-Identifier: Apache-2.0
"""The report's GPUDirect RDMA: per node ready or not and why, per aligned pair its path, the site's counts.

What it shows comes from the site summary (:func:`gpudirect.node_gpudirect`
and :func:`gpudirect.site_gpudirect`, controller/topology/gpudirect.py):
nodes whose facts predate the probe's ``p2p`` and ``gpudirect`` are shown as
unknown, and a site where no node has them shows no GPUDirect section at all
(its page is the one it was). In the level matrix, a cell keeps the physical
level (``nvidia-smi topo -m``'s) and adds the level the traffic flows at and
the pair's path (:func:`path_cell`).
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import gpudirect
from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

# Pairs listed per node (the aligned pairs that are not direct); the rest are counted.
MAX_PAIRS = 8
STATE_WORDS = {True: "ready", False: "not ready", None: "unknown"}


def path_cell(matrix: Mapping[str, Any], gpu: str, nic: str) -> dict[str, Any]:
    """The path of one matrix cell (``{}`` for a layout without ``p2p``).

    ``{"flowing", "path", "path_text"}``: the level the traffic flows at
    (PHB through the host bridge), the path, and the path in words.
    """
    paths = matrix.get("paths")
    if paths is None:
        return {}
    entry = (paths.get(gpu) or {}).get(nic)
    level = (matrix["cells"].get(gpu) or {}).get(nic)
    flowing = device_model.pair_level({gpu: {nic: level}}, gpu, nic, {gpu: {nic: entry}} if entry else None)
    return {"flowing": flowing, "path": device_model.path_of(entry), "path_text": gpudirect.path_text(entry)}


def gpudirect_view(summary: Mapping[str, Any]) -> dict[str, Any] | None:
    """The site page's GPUDirect RDMA section, from :func:`topology.site_summary`; ``None`` without one.

    ``{"nodes", "pairs", "rows"}``: the site's counts of nodes (ready, not
    ready, unknown) and of pairs aligned on paper (direct, through the host
    bridge, unverified), and a row per node: its state and reasons, the
    IOMMU mode and peer memory method, its pairs per path and the first
    :data:`MAX_PAIRS` pairs that are not direct with their path.
    """
    site = summary.get("gpudirect")
    if not site:
        return None
    rows = []
    for host, node in summary["per_node"].items():
        entry = node.get("gpudirect")
        if entry is None:
            rows.append(
                {"host": host, "state": "unknown", "ready": "unknown", "reasons": "not probed (older facts)",
                 "iommu": "unknown", "peer_memory": "unknown", "paths": None, "pairs": [], "more": 0}
            )  # fmt: skip
            continue
        odd = [p for p in entry["pairs"] if p["path"] != device_model.PATH_DIRECT]
        rows.append(
            {
                "host": host,
                "state": STATE_WORDS[entry["ready"]],
                "ready": {True: "yes", False: "no"}.get(entry["ready"], "unknown"),
                "reasons": "; ".join(entry["reasons"]) or "-",
                "iommu": entry["iommu"] or "unknown",
                "peer_memory": entry["peer_memory"] or "unknown",
                "paths": entry["paths"],
                "pairs": [
                    {
                        "gpu": p["gpu"],
                        "nic": p["nic"],
                        "text": f"{p['label']} \u2013 {p['nic']}: {p['physical_level']}"
                        + (f" \u2192 {p['level']}" if p["level"] != p["physical_level"] else "")
                        + f", {p['text']}",
                        "path": p["path"],
                    }
                    for p in odd[:MAX_PAIRS]
                ],
                "more": max(len(odd) - MAX_PAIRS, 0),
            }
        )
    return {"nodes": site["nodes"], "pairs": site["pairs"], "rows": rows}
