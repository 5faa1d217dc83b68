# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""One model of a node's devices, shared by the planner, the site summary and the report.

What counts as an accelerator and as an RDMA NIC is what the driver publishes
and the planner allocates: :func:`dra.devices_from_topology` decides it (with
the same ``device_options``), and this module only reads its answer. An
accelerator's family (GPU, NEC Vector Engine, other accelerator) names it in
labels (``GPU0``, ``VE0 · NEC SX-Aurora``); the level of a pair is the probe's
``links`` entry, the same one the planner reads for an allocation's levels.

Pure Python (>= 3.9), no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils import dra
from ansible_collections.aligned.dra.plugins.module_utils import topology as topology_lib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

# Families of accelerators, in the order the report lists them: (key, label
# prefix, what the family is called in counts, singular and plural).
FAMILIES = (
    ("gpu", "GPU", ("GPU", "GPUs")),
    ("ve", "VE", ("Vector Engine", "Vector Engines")),
    ("accelerator", "ACC", ("other accelerator", "other accelerators")),
)
FAMILY_PREFIX = {key: prefix for key, prefix, _names in FAMILIES}
FAMILY_NAMES = {key: names for key, _prefix, names in FAMILIES}

# PCI vendors whose processing accelerators are known by family name, when
# the probe found no model (no pci.ids, no driver information).
_VENDOR_FAMILIES = {
    # vendor ID: (family key, model text)
    "0x1bcf": ("ve", "NEC SX-Aurora"),  # NEC Vector Engine (class 0x0b40 co-processor)
    "0x1002": ("gpu", "AMD Instinct"),  # AMD Instinct (class 0x1200 processing accelerator)
}
_VENDOR_NAMES = {"0x10de": "NVIDIA", "0x1002": "AMD", "0x8086": "Intel", "0x1bcf": "NEC"}


def accelerator_family(device: Mapping[str, Any]) -> tuple[str, str]:
    """``(family key, model text)`` of a GPU or accelerator of the probe's output."""
    gpu = device.get("gpu") or {}
    known = _VENDOR_FAMILIES.get(str(device.get("vendor_id") or "").lower())
    if device.get("kind") == "gpu":
        family = "gpu"
    elif known is not None:
        family = known[0]
    else:
        family = "accelerator"
    model = gpu.get("model") or device.get("gpu_model") or device.get("device_name")
    if not model and known is not None:
        model = known[1]
    if not model:
        vendor = _VENDOR_NAMES.get(str(device.get("vendor_id") or ""), device.get("vendor_id") or "?")
        model = f"{vendor} {device.get('device_id') or '?'}".strip()
    return family, str(model)


def accelerator_labels(devices: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """``{pci_address: {"family", "label", "model"}}`` for every GPU and accelerator.

    Labels count per family in PCI address order: ``GPU0``..., ``VE0``...,
    ``ACC0``...
    """
    found = []
    for device in devices:
        if device.get("kind") in topology_lib.GPU_KINDS:
            family, model = accelerator_family(device)
            found.append((device["pci_address"], family, model))
    labels: dict[str, dict[str, str]] = {}
    seen: dict[str, int] = {}
    for bdf, family, model in sorted(found):
        index = seen.get(family, 0)
        seen[family] = index + 1
        labels[bdf] = {"family": family, "label": f"{FAMILY_PREFIX[family]}{index}", "model": model}
    return labels


def pair_level(links: Mapping[str, Mapping[str, str]], a: str, b: str) -> str | None:
    """Level from accelerator ``a`` to NIC ``b`` as the planner reads it: the probe's ``links[a][b]``.

    ``None`` when the probe has no level for the pair (``a`` is not an
    accelerator, or ``b`` not a NIC, of that node).
    """
    return (links.get(a) or {}).get(b)


def node_devices(topology: Mapping[str, Any], device_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The accelerators and RDMA NICs of one node as the planner sees them.

    Returns ``{"accelerators": [{"pci_address", "name", "kind", "family",
    "label", "model"}], "rdma_nics": [{"pci_address", "name", "rdma_devices",
    "netdevs"}], "vfs": n, "nearest": {accelerator: {"level", "nics"}},
    "counts": {...}}``. ``rdma_nics`` are the physical NICs the driver
    publishes (with the default options: the PFs that own an RDMA device);
    ``nearest`` is each published accelerator's best level to one of them
    (``None`` when the node has none). Which functions count is
    :func:`dra.published_kinds`, the decision :func:`dra.devices_from_topology`
    takes for the driver and the planner.
    """
    topo_devices = [d for d in topology.get("devices") or [] if d.get("pci_address")]
    by_bdf = {d["pci_address"]: d for d in topo_devices}
    published = dra.published_kinds(dict(topology), dict(device_options) if device_options else None)
    labels = accelerator_labels(topo_devices)
    accelerators: list[dict[str, Any]] = []
    nics: list[dict[str, Any]] = []
    vfs = 0
    for bdf, kind in published.items():
        device = by_bdf[bdf]
        name = dra.device_name(kind, bdf)
        if kind in ("gpu", "accelerator"):
            accelerators.append({"pci_address": bdf, "name": name, "kind": device["kind"], **labels[bdf]})
        elif kind == "nic":
            nics.append(
                {
                    "pci_address": bdf,
                    "name": name,
                    "rdma_devices": list(device.get("rdma_devices") or []),
                    "netdevs": [n.get("name") for n in device.get("netdevs") or []],
                }
            )
        elif kind == "vf":
            vfs += 1
    accelerators.sort(key=lambda a: a["pci_address"])
    nics.sort(key=lambda n: n["pci_address"])
    links = topology.get("links") or {}
    nearest: dict[str, dict[str, Any]] = {}
    for acc in accelerators:
        ranked = []
        for nic in nics:
            level = pair_level(links, acc["pci_address"], nic["pci_address"])
            if level in topology_lib.LEVEL_RANK:
                ranked.append((topology_lib.LEVEL_RANK[level], nic["pci_address"]))
        if ranked:
            best = min(rank for rank, _bdf in ranked)
            nearest[acc["pci_address"]] = {
                "level": topology_lib.LEVELS[best],
                "nics": sorted(b for r, b in ranked if r == best),
            }
        else:
            nearest[acc["pci_address"]] = {"level": None, "nics": []}
    counts = {key: sum(1 for a in accelerators if a["family"] == key) for key, _prefix, _names in FAMILIES}
    counts.update(accelerators=len(accelerators), rdma_nics=len(nics), vfs=vfs)
    return {"accelerators": accelerators, "rdma_nics": nics, "vfs": vfs, "nearest": nearest, "counts": counts}


def family_counts_text(counts: Mapping[str, int]) -> list[str]:
    """``["8 GPUs", "1 Vector Engine"]``: the non-zero accelerator families, with plurals."""
    return [plural(counts.get(key, 0), *FAMILY_NAMES[key]) for key, _prefix, _names in FAMILIES if counts.get(key, 0)]


def plural(count: int, singular: str, many: str | None = None) -> str:
    """``1 node``, ``2 nodes``, ``0 nodes``."""
    return f"{count} {singular if count == 1 else (many or singular + 's')}"
