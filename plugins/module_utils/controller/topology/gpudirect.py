# SPDX-License-Identifier: Apache-2.0
"""GPUDirect RDMA of a node and a site, as the probe read it: readiness, and the path of each aligned pair.

A GPU x NIC pair that ``nvidia-smi topo -m`` calls PIX or PXB is aligned on
paper; its traffic flows that way only when its peer-to-peer path is
``direct`` (the probe's ``p2p``: no function on the way redirects to the host
bridge). A pair whose path goes through the host bridge counts at PHB
(:func:`device_model.pair_level`); a pair whose path the probe could not read
(no root, a captured tree without the extended config space, facts from
before the probe read it) keeps its physical level and is unverified, never
GPUDirect-ready. The node's ``gpudirect.ready`` (IOMMU, peer memory) is
``True``, ``False`` or unknown (``None``, and facts without it).

Controller side; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import GPU_KINDS, LEVEL_RANK, LEVELS, NIC_KINDS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

# Physical levels at which a pair is aligned on paper: below a common PCIe bridge, the host bridge not crossed.
ALIGNED_ON_PAPER = ("PIX", "PXB")
# The counts of pairs by path, in the order the report shows them.
PATH_COUNTS = ("direct", "host_bridge", "unknown", "rerouted")


def has_gpudirect_facts(topology: Mapping[str, Any]) -> bool:
    """Whether a node's facts come from a probe that read peer-to-peer paths or GPUDirect (``p2p``, ``gpudirect``)."""
    return "p2p" in topology or "gpudirect" in topology


def path_text(entry: Mapping[str, Any] | None) -> str:
    """A pair's path in words: ``direct``, ``host bridge (ACS redirect at ...)``, ``unverified (...)``."""
    path = device_model.path_of(entry)
    if path == device_model.PATH_DIRECT:
        return "direct"
    if path == device_model.PATH_HOST_BRIDGE:
        redirected = list((entry or {}).get("redirected_at") or [])
        return (
            "host bridge (" + (f"ACS redirect at {', '.join(redirected)}" if redirected else "no common bridge") + ")"
        )
    unread = list((entry or {}).get("unread") or [])
    return "unverified (" + (f"ACS not readable at {', '.join(unread)}" if unread else "path not probed") + ")"


def paths_count(pairs: Iterable[Mapping[str, Any]]) -> dict[str, int] | None:
    """``{"direct", "host_bridge", "unknown", "rerouted"}`` of :func:`device_model.joined_pair_level` results.

    ``rerouted``: pairs aligned on paper (physically PIX or PXB) whose traffic
    goes through the host bridge (also counted in ``host_bridge``). ``None``
    when no pair has a path (a node whose facts have no ``p2p`` map).
    """
    counts = dict.fromkeys(PATH_COUNTS, 0)
    seen = False
    for pair in pairs:
        if "path" not in pair:
            continue
        seen = True
        counts[device_model.path_of(pair)] += 1
        if pair.get("physical_level") in ALIGNED_ON_PAPER:
            counts["rerouted"] += 1
    return counts if seen else None


def flowing_nearest(topology: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Each GPU's nearest physical NICs as the probe's ``nearest_nics`` gives them, at the level traffic flows at.

    Without a ``p2p`` map the probe's ``nearest_nics`` as they are; with one,
    worked out again from ``links`` through :func:`device_model.pair_level`
    (a pair through the host bridge is PHB).
    """
    p2p = topology.get("p2p")
    if not p2p:
        return dict(topology.get("nearest_nics") or {})
    links = topology.get("links") or {}
    devices = topology.get("devices") or []
    physical = [d["pci_address"] for d in devices if d.get("kind") in NIC_KINDS and not d.get("physfn")]
    nearest: dict[str, dict[str, Any]] = {}
    for gpu in devices:
        if gpu.get("kind") not in GPU_KINDS:
            continue
        bdf = gpu["pci_address"]
        ranked = []
        for nic in physical:
            level = device_model.pair_level(links, bdf, nic, p2p)
            if level in LEVEL_RANK:
                ranked.append((LEVEL_RANK[level], nic))
        if ranked:
            best = min(rank for rank, _nic in ranked)
            nearest[bdf] = {"level": LEVELS[best], "nics": sorted(n for r, n in ranked if r == best)}
        else:
            nearest[bdf] = {"level": None, "nics": []}
    return nearest


def node_gpudirect(topology: Mapping[str, Any], device_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """GPUDirect RDMA of one node: ``{"ready", "reasons", "iommu", "peer_memory", "pairs", "paths"}``.

    ``ready``: the probe's ``gpudirect.ready`` (``None``: unknown, and facts
    without it); ``reasons`` why not (or why unknown); ``iommu`` the IOMMU
    mode and ``peer_memory`` the peer memory method (``None``: unknown).
    ``pairs``: the published accelerator x RDMA NIC pairs
    (:func:`device_model.node_devices`) aligned on paper, each
    ``{"gpu", "nic", "physical_level", "level", "path", "redirected_at", "unread", "text", "ready"}``
    (``level`` the one traffic flows at; ``ready`` only for a direct pair on
    a ready node). ``paths`` counts those pairs per path
    (:data:`PATH_COUNTS`; ``aligned``: all of them).
    """
    facts = topology.get("gpudirect") if isinstance(topology.get("gpudirect"), dict) else {}
    ready = facts.get("ready") if isinstance(facts.get("ready"), bool) else None
    reasons = [str(r) for r in facts.get("reasons") or []]
    if not facts:
        reasons = ["not probed (facts from a probe that did not read GPUDirect RDMA)"]
    model = device_model.node_devices(topology, device_options)
    labels = {a["pci_address"]: a["label"] for a in model["accelerators"]}
    links = topology.get("links") or {}
    p2p = topology.get("p2p") or {}
    pairs = []
    for acc in model["accelerators"]:
        for nic in model["rdma_nics"]:
            a, b = acc["pci_address"], nic["pci_address"]
            physical = (links.get(a) or {}).get(b)
            if physical not in ALIGNED_ON_PAPER:
                continue
            entry = device_model.pair_path(p2p, a, b)
            path = device_model.path_of(entry)
            pairs.append(
                {
                    "gpu": a,
                    "label": labels[a],
                    "nic": b,
                    "physical_level": physical,
                    "level": device_model.pair_level(links, a, b, p2p),
                    "path": path,
                    "redirected_at": list((entry or {}).get("redirected_at") or []),
                    "unread": list((entry or {}).get("unread") or []),
                    "text": path_text(entry),
                    "ready": ready is True and path == device_model.PATH_DIRECT,
                }
            )
    paths = dict.fromkeys(PATH_COUNTS, 0)
    for pair in pairs:
        paths[pair["path"]] += 1
        paths["rerouted"] += pair["path"] == device_model.PATH_HOST_BRIDGE
    paths["aligned"] = len(pairs)
    return {
        "ready": ready,
        "reasons": reasons,
        "iommu": (facts.get("iommu") or {}).get("mode"),
        "peer_memory": (facts.get("peer_memory") or {}).get("method"),
        "pairs": pairs,
        "paths": paths,
    }


def site_gpudirect(per_node: Mapping[str, Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """The site's counts of :func:`node_gpudirect` entries (``None`` entries: nodes with older facts).

    ``{"nodes": {"ready", "not_ready", "unknown"}, "pairs": {"aligned", "direct", "host_bridge",
    "rerouted", "unknown"}}``; ``None`` when no node has an entry.
    """
    entries = [entry for entry in per_node.values() if entry is not None]
    if not entries:
        return None
    nodes = {"ready": 0, "not_ready": 0, "unknown": 0}
    pairs = dict.fromkeys(("aligned", *PATH_COUNTS), 0)
    for entry in entries:
        nodes["ready" if entry["ready"] is True else "not_ready" if entry["ready"] is False else "unknown"] += 1
        for key in pairs:
            pairs[key] += entry["paths"].get(key, 0)
    # nodes with older facts: nothing is known of them
    nodes["unknown"] += len(per_node) - len(entries)
    return {"nodes": nodes, "pairs": pairs}
