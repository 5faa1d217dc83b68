# SPDX-License-Identifier: Apache-2.0
"""Placement levels that GPU clouds already publish: the providers' stacks, coarse to fine, as presets.

A preset names a whole stack of levels (``aligned_dra_placement_levels:
{preset: gke}``); each of its levels is a level entry as
:mod:`controller.domains.level_specs` checks it (``name``, ``source``,
``key`` or ``driver`` and ``attribute``). The keys and attribute names are
the providers' own (2026 documentation):

- ``gke``: GKE node labels ``cloud.google.com/gce-topology-block`` →
  ``-subblock`` (the NVLink domain on A4X) → ``-host``;
- ``eks``: EKS node labels ``topology.k8s.aws/network-node-layer-1`` → ``-2``
  → ``-3`` (``-4`` exists on 4-layer instance types only: add it as a level);
- ``oke``: OKE node labels ``oci.oraclecloud.com/rdma.hpc_island_id`` →
  ``rdma.network_block_id`` → ``rdma.local_block_id`` (hashed values);
- ``nebius``: ``topology.nebius.com/gpu-cluster-id`` → ``tier-2`` → ``tier-1``
  (``tier-0``, multi-node NVLink, is set only on nodes that have it);
- ``coreweave``: ``backend.coreweave.cloud/fabric`` → ``ib.coreweave.cloud/superpod``
  → ``backend.coreweave.cloud/leafgroup`` → ``node.coreweave.cloud/rack``;
- ``topograph``: NVIDIA topograph v1.0's ``fabric.topograph.run/tier-2`` →
  ``tier-1`` → ``tier-0`` (tier 0 is the switch closest to the node);
- ``azure-dranet``: DRANET's device attributes ``azure.dra.net/interconnectGroupId``
  → ``interconnectSubgroupId`` (AKS has no topology node labels);
- ``oke-dranet``: DRANET's ``oke.dra.net/hpcIslandId`` → ``networkBlockId`` →
  ``localBlockId`` → ``rackId``.

Each preset also says which key carries its NVLink domain where the provider
publishes one (:data:`NVLINK_ALTERNATIVES`); ``nvidia.com/gpu.clique``
(:data:`CLIQUE_LABEL`, set by GPU Feature Discovery and NVIDIA's DRA driver
once the NVLink fabric is ready) serves on any of them.

:func:`known_rank` gives, for a key or attribute of these stacks, its family
and how coarse it is, so that levels listed fine before coarse are refused.

Controller-side; no Ansible imports.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

NODE_LABEL = "node_label"
DEVICE_ATTRIBUTE = "device_attribute"
INVENTORY = "inventory"
# DRANET's driver name (kubernetes-sigs/dranet): its ResourceSlices carry the cloud's topology attributes
DRANET_DRIVER = "dra.net"
# GPU Feature Discovery / NVIDIA's DRA driver: <clusterUUID>.<cliqueID>, set only once the fabric is ready
CLIQUE_LABEL = "nvidia.com/gpu.clique"
NVLINK_LEVEL = "nvlink"
# Device attributes that carry an NVLink domain: a missing value means the fabric is not ready either.
NVLINK_ATTRIBUTES = ("oke.dra.net/gpuMemoryFabricId",)


def _labels(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"name": name, "source": NODE_LABEL, "key": key} for name, key in pairs]


def _attributes(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"name": name, "source": DEVICE_ATTRIBUTE, "driver": DRANET_DRIVER, "attribute": a} for name, a in pairs]


PRESETS: dict[str, list[dict[str, Any]]] = {
    "gke": _labels(
        ("block", "cloud.google.com/gce-topology-block"),
        ("subblock", "cloud.google.com/gce-topology-subblock"),
        ("host", "cloud.google.com/gce-topology-host"),
    ),
    "eks": _labels(
        ("layer-1", "topology.k8s.aws/network-node-layer-1"),
        ("layer-2", "topology.k8s.aws/network-node-layer-2"),
        ("layer-3", "topology.k8s.aws/network-node-layer-3"),
    ),
    "oke": _labels(
        ("hpc-island", "oci.oraclecloud.com/rdma.hpc_island_id"),
        ("network-block", "oci.oraclecloud.com/rdma.network_block_id"),
        ("local-block", "oci.oraclecloud.com/rdma.local_block_id"),
    ),
    "nebius": _labels(
        ("gpu-cluster", "topology.nebius.com/gpu-cluster-id"),
        ("tier-2", "topology.nebius.com/tier-2"),
        ("tier-1", "topology.nebius.com/tier-1"),
    ),
    "coreweave": _labels(
        ("fabric", "backend.coreweave.cloud/fabric"),
        ("superpod", "ib.coreweave.cloud/superpod"),
        ("leafgroup", "backend.coreweave.cloud/leafgroup"),
        ("rack", "node.coreweave.cloud/rack"),
    ),
    "topograph": _labels(
        ("tier-2", "fabric.topograph.run/tier-2"),
        ("tier-1", "fabric.topograph.run/tier-1"),
        ("tier-0", "fabric.topograph.run/tier-0"),
    ),
    "azure-dranet": _attributes(
        ("interconnect-group", "azure.dra.net/interconnectGroupId"),
        ("interconnect-subgroup", "azure.dra.net/interconnectSubgroupId"),
    ),
    "oke-dranet": _attributes(
        ("hpc-island", "oke.dra.net/hpcIslandId"),
        ("network-block", "oke.dra.net/networkBlockId"),
        ("local-block", "oke.dra.net/localBlockId"),
        ("rack", "oke.dra.net/rackId"),
    ),
}

# Where ``nvlink: true`` goes in a preset's stack: after this level (None: last, the finest).
# On GKE the subblock is the NVLink domain of A4X, and a host is finer than a clique.
# On CoreWeave an NVL72 rack is the NVLink domain: the clique goes right above the rack level.
NVLINK_AFTER: dict[str, str | None] = dict.fromkeys(PRESETS) | {"gke": "subblock", "coreweave": "leafgroup"}

# The provider's own NVLink domain, for ``nvlink: {...}`` instead of the clique label.
NVLINK_ALTERNATIVES: dict[str, dict[str, Any]] = {
    "coreweave": {"source": NODE_LABEL, "key": "ds.coreweave.com/nvlink.domain"},
    "nebius": {"source": NODE_LABEL, "key": "topology.nebius.com/tier-0"},
    "topograph": {"source": NODE_LABEL, "key": "accelerator.topograph.run/domain"},
    "oke-dranet": {"source": DEVICE_ATTRIBUTE, "driver": DRANET_DRIVER, "attribute": "oke.dra.net/gpuMemoryFabricId"},
}

# Keys whose number says how coarse they are: (family, pattern, rank of the number, the chain as said).
_NUMBERED = (
    ("eks", re.compile(r"^topology\.k8s\.aws/network-node-layer-(\d+)$"), 1, "layer-1 → layer-2 → layer-3 → layer-4"),
    ("topograph", re.compile(r"^fabric\.topograph\.run/tier-(\d+)$"), -1, "tier-N → ... → tier-1 → tier-0"),
    ("nebius", re.compile(r"^topology\.nebius\.com/tier-(\d+)$"), -1, "gpu-cluster-id → tier-2 → tier-1 → tier-0"),
)
_FIRST = {"topology.nebius.com/gpu-cluster-id": ("nebius", -1000)}
# The stacks with no numbers in their keys: the key of each preset level, by position.
_ORDERED = ("gke", "oke", "coreweave", "azure-dranet", "oke-dranet")
_GCE_DRANET = ("gce.dra.net/block", "gce.dra.net/subBlock", "gce.dra.net/host")


def preset_levels(name: str) -> list[dict[str, Any]]:
    """A copy of preset ``name``'s levels, coarse to fine (KeyError for an unknown preset)."""
    return [dict(level) for level in PRESETS[name]]


def source_key(spec: dict[str, Any]) -> str | None:
    """What a level reads: its node label key, or its device attribute's qualified name."""
    if spec.get("source") == NODE_LABEL:
        return spec.get("key")
    if spec.get("source") == DEVICE_ATTRIBUTE:
        return qualified(spec.get("driver"), spec.get("attribute"))
    return None


def qualified(driver: Any, attribute: Any) -> str | None:
    """A device attribute's fully qualified name: ``driver/name`` where the name has no domain (DRA's rule)."""
    if not isinstance(attribute, str) or not isinstance(driver, str):
        return None
    return attribute if "/" in attribute else f"{driver}/{attribute}"


def _chain(preset: str) -> str:
    return " → ".join(str(source_key(level)).rpartition("/")[2] for level in PRESETS[preset])


def known_rank(key: str | None) -> tuple[str, int, str] | None:
    """``(family, rank, chain)`` of a provider key whose coarseness is known (lower rank: coarser), or None."""
    if key is None:
        return None
    if key in _FIRST:
        family, rank = _FIRST[key]
        return family, rank, _NUMBERED[2][3]
    for family, pattern, sign, chain in _NUMBERED:
        match = pattern.match(key)
        if match:
            return family, sign * int(match.group(1)), chain
    for preset in _ORDERED:
        keys = [source_key(level) for level in PRESETS[preset]]
        if key in keys:
            return preset, keys.index(key), _chain(preset)
    if key in _GCE_DRANET:
        return "gce-dranet", _GCE_DRANET.index(key), "block → subBlock → host"
    return None


def provider_keys() -> set[str]:
    """Every node label key a provider publishes (the collection never writes one)."""
    keys = {CLIQUE_LABEL}
    for levels in PRESETS.values():
        keys.update(level["key"] for level in levels if level["source"] == NODE_LABEL)
    keys.update(alt["key"] for alt in NVLINK_ALTERNATIVES.values() if alt["source"] == NODE_LABEL)
    return keys
