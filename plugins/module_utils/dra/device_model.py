# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""One model of a node's devices, shared by the planner, the site summary and the report.

What counts as an accelerator and as an RDMA NIC is what the driver publishes
and the planner allocates: :func:`dra.devices_from_topology` decides it (with
the same ``device_options``), and this module only reads its answer. An
accelerator's family (GPU, NEC Vector Engine, other accelerator) names it in
labels (``GPU0``, ``VE0 · NEC SX-Aurora``); the level of a pair is the probe's
``links`` entry as the traffic flows (:func:`pair_level`: PHB where the probe's
``p2p`` says the pair's peer-to-peer path goes through the host bridge), the
same one the planner reads for an allocation's levels.

Pure Python (>= 3.9), no Ansible imports.
"""

from __future__ import annotations

import re

from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.node import topology as topology_lib
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import p2p as p2p_lib

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


# The paths of a pair's peer-to-peer traffic (node/topology/p2p.py), and what the plan and report call them.
PATH_DIRECT = p2p_lib.PATH_DIRECT
PATH_HOST_BRIDGE = p2p_lib.PATH_HOST_BRIDGE
PATH_UNKNOWN = p2p_lib.PATH_UNKNOWN
PATHS = (PATH_DIRECT, PATH_HOST_BRIDGE, PATH_UNKNOWN)


def pair_path(p2p: Mapping[str, Mapping[str, Any]] | None, a: str, b: str) -> dict[str, Any] | None:
    """The probe's ``p2p`` entry of accelerator ``a`` and NIC ``b`` (``{"path", "redirected_at", "unread"}``).

    ``None`` when the topology has no ``p2p`` map (facts of a probe before
    GPUDirect was read) or no entry for the pair: the path is unknown.
    """
    if not p2p:
        return None
    entry = (p2p.get(a) or {}).get(b)
    return entry if isinstance(entry, dict) else None


def pair_level(
    links: Mapping[str, Mapping[str, str]], a: str, b: str, p2p: Mapping[str, Mapping[str, Any]] | None = None
) -> str | None:
    """Level from accelerator ``a`` to NIC ``b`` as the planner reads it: the level its traffic flows at.

    The probe's ``links[a][b]`` (``nvidia-smi topo -m``'s physical level),
    PHB where the probe's ``p2p`` (given as ``p2p``) says the pair's
    peer-to-peer path goes through the host bridge (a function on the way
    redirects, :func:`p2p.flowing_level`); an unknown path keeps the physical
    level. The one reading of a pair's level for the plan, the site summary
    and the report. ``None`` when the probe has no level for the pair (``a``
    is not an accelerator, or ``b`` not a NIC, of that node).
    """
    return p2p_lib.flowing_level((links.get(a) or {}).get(b), pair_path(p2p, a, b))


def path_of(entry: Mapping[str, Any] | None) -> str:
    """``direct``, ``host_bridge`` or ``unknown`` of a :func:`pair_path` entry (``None``: unknown)."""
    path = (entry or {}).get("path")
    return path if path in PATHS else PATH_UNKNOWN


def node_devices(topology: Mapping[str, Any], device_options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The accelerators and RDMA NICs of one node as the planner sees them.

    Returns ``{"accelerators": [{"pci_address", "name", "kind", "family",
    "label", "model"}], "rdma_nics": [{"pci_address", "name", "rdma_devices",
    "netdevs"}], "vfs": n, "nearest": {accelerator: {"level", "nics"}},
    "counts": {...}}``. ``rdma_nics`` are the physical NICs the driver
    publishes (with the default options: the PFs that own an RDMA device);
    ``nearest`` is each published accelerator's best level to one of them
    as the traffic flows (:func:`pair_level`; ``None`` when the node has none). Which functions count is
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
    p2p = topology.get("p2p")
    nearest: dict[str, dict[str, Any]] = {}
    for acc in accelerators:
        ranked = []
        for nic in nics:
            level = pair_level(links, acc["pci_address"], nic["pci_address"], p2p)
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


# -- published devices joined to the probe ---------------------------------------------------
#
# Other drivers publish a device's PCI address under their own attribute names,
# or only its PCIe root and NUMA node. The join below finds the probed PCI
# function behind a published device through any of them; where no address is
# published, the level of a pair is bounded from the root and NUMA node.
# Sources of the names: docs/devices.md ("Levels for other drivers' devices").

# Attributes whose value is the device's PCI address, in the order tried.
ADDRESS_ATTRIBUTES = (
    dra.ATTR_PCI_BUS_ID,  # standard; ours, NVIDIA (from v25.12), Intel GPU
    "gpu.nvidia.com/pcieBusID",  # NVIDIA DRA GPU driver up to v25.8
    "dra.net/pciAddress",  # DRANET
    "gpu.amd.com/pciAddr",  # AMD GPU DRA driver, whole GPUs
    "gpu.amd.com/parentPciAddr",  # AMD GPU DRA driver, partitions (the parent GPU's address)
    "gpu.intel.com/pciAddress",  # Intel GPU DRA driver (deprecated twin of pciBusID)
)
# Older DRANET releases publish the address in four parts.
DRANET_ADDRESS_PARTS = (
    "dra.net/pciAddressDomain",
    "dra.net/pciAddressBus",
    "dra.net/pciAddressDevice",
    "dra.net/pciAddressFunction",
)
ROOT_ATTRIBUTES = (dra.ATTR_PCIE_ROOT,)
NUMA_ATTRIBUTES = (dra.ATTR_NUMA_NODE, "dra.net/numaNode", "gpu.nvidia.com/numa")

# Where a pair's level comes from: the probe's links (exact), the published or
# probed PCIe roots and NUMA nodes (exact where they decide the level: other
# roots on one NUMA node are NODE, other NUMA nodes SYS), the same with a NUMA
# node inferred from another device on the same root (exact, and named: see
# infer_root_numa), an upper bound (one root: PHB at worst; one NUMA node,
# roots unknown: NODE at worst), or nothing.
LEVEL_SOURCES = ("topology", "attributes", "inferred", "bound", "unknown")

_ADDRESS_RE = re.compile(r"^(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])$")
_ROOT_RE = re.compile(r"^pci([0-9a-f]{4,8}):([0-9a-f]{2})$")


def flat_attributes(device: Mapping[str, Any], driver: str) -> dict[str, Any]:
    """``{"domain/name": value}`` of a ResourceSlice device (typed values unwrapped).

    Names without a domain belong to ``driver`` (the API's rule); a value
    already flat (a list, a number) is kept.
    """
    found: dict[str, Any] = {}
    for name, value in (device.get("attributes") or {}).items():
        domain, ident = dra.split_qualified_name(name, driver)
        if isinstance(value, dict):
            value = next(iter(value.values())) if value else None
        found[f"{domain}/{ident}"] = value
    return found


def normalize_pci_address(value: Any) -> str | None:
    """``dddd:bb:dd.f`` in lower case from the forms drivers publish, or ``None``.

    Accepts a missing domain (``1b:00.0`` is domain 0000), NVML's eight-digit
    domain (``00000000:1B:00.0``) and upper case; domains wider than four
    digits keep their significant digits (VMD domains such as ``10000``).
    """
    if not isinstance(value, str):
        return None
    match = _ADDRESS_RE.match(value.strip().lower())
    if match is None:
        return None
    domain, bus, slot, function = match.groups()
    domain = (domain or "0").lstrip("0").rjust(4, "0")
    return f"{domain}:{bus.rjust(2, '0')}:{slot.rjust(2, '0')}.{function}"


def _values(value: Any) -> list[Any]:
    """Scalars of a value that may be a list (of lists): a device local to several roots or NUMA nodes."""
    if value is None:
        return []
    if isinstance(value, (list, tuple, set, frozenset)):
        return [item for member in value for item in _values(member)]
    return [value]


def _roots(value: Any) -> frozenset[str]:
    found = set()
    for item in _values(value):
        if isinstance(item, str):
            match = _ROOT_RE.match(item.strip().lower())
            if match:
                found.add(f"pci{match.group(1).lstrip('0').rjust(4, '0')}:{match.group(2)}")
    return frozenset(found)


def _numas(value: Any) -> frozenset[int]:
    found = set()
    for item in _values(value):
        if isinstance(item, bool):
            continue
        if isinstance(item, int) and item >= 0:
            found.add(item)
        elif isinstance(item, str) and item.strip().isdigit():
            found.add(int(item))
    return frozenset(found)


# The collection driver's own kind attribute, qualified by its domain whatever the driver name.
ATTR_KIND = f"{dra.DRIVER_NAME}/kind"
# The kind of a MIG device (dra/mig.KIND): a partition of a GPU that carries its parent's PCI address, root and
# NUMA node, so it joins the parent's probed function and pairs with a NIC as the GPU does.
MIG_KIND = "mig"
# The kinds that are accelerators for the GPU-NIC levels: a MIG device stands for its parent GPU.
ACCELERATOR_KINDS = ("gpu", "accelerator", MIG_KIND)


def collection_device(driver: str, attributes: Mapping[str, Any]) -> bool:
    """A device of the collection's driver: published as ``dra.aligned.dev``, or by the split GPU driver.

    Run split by kind (``device_options.split_gpu_driver``), the driver
    publishes its GPUs (and their MIG devices) under another name; their attributes stay under
    ``dra.aligned.dev/``, so the ``kind`` attribute tells them, not the name.
    ``attributes`` as :func:`flat_attributes` gives them.
    """
    return driver == dra.DRIVER_NAME or attributes.get(ATTR_KIND) in (*dra.DEVICE_KINDS, MIG_KIND)


def published_kind(driver: str, attributes: Mapping[str, Any]) -> str | None:
    """gpu, accelerator, mig, nic, vf or ``None``, from what a driver publishes.

    The collection driver's ``kind`` (under its main name or a split GPU
    driver's: :func:`collection_device`); ``gpu.nvidia.com`` types gpu, mig,
    migdyn and vfio; every ``dra.net`` device is a NIC; ``gpu.amd.com`` and
    ``gpu.intel.com`` devices are GPUs, ``gaudi.intel.com`` ones accelerators.
    """
    if collection_device(driver, attributes):
        return attributes.get(ATTR_KIND)
    if driver == "gpu.nvidia.com":
        return "gpu" if attributes.get("gpu.nvidia.com/type") in ("gpu", "mig", "migdyn", "vfio") else None
    if driver == "dra.net":
        return "nic"
    if driver in ("gpu.amd.com", "gpu.intel.com"):
        return "gpu"
    if driver == "gaudi.intel.com":
        return "accelerator"
    return None


def probed_node(topology: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """What the join needs of one node's probe: ``{"devices": {address: device}, "links", "addresses"}``.

    Each device keeps only the keys :func:`join_device` reads (``kind``,
    ``pcie_root``, ``numa_node``, ``numa_node_inferred``, ``physfn``).

    ``addresses`` are the node's PCI functions, ``None`` for a topology reduced
    to its ``links`` (which name accelerators and NICs, not every function a
    device may be published by). ``None`` without a probe (or an empty one).
    """
    if not topology:
        return None
    devices = {}
    for device in topology.get("devices") or []:
        address = normalize_pci_address(device.get("pci_address"))
        if address:
            # only what join_device reads: a site's plan keeps this for every node at once
            devices[address] = {
                "kind": device.get("kind"),
                "pcie_root": device.get("pcie_root"),
                "numa_node": device.get("numa_node"),
                "numa_node_inferred": {"node": _probed_numa(device)} if device.get("numa_node_inferred") else None,
                "physfn": device.get("physfn"),
            }
    links = topology.get("links") or {}
    if not devices and not links:
        return None
    # NUMA nodes of each PCIe root, for devices that publish a root and no NUMA node
    root_numa: dict[str, set[int]] = {}
    for device in devices.values():
        numa = _numas(_probed_numa(device))
        for root in _roots(device.get("pcie_root")):
            root_numa.setdefault(root, set()).update(numa)
    return {
        "devices": devices,
        "links": links,
        "addresses": set(devices) if devices else None,
        "root_numa": {root: frozenset(numa) for root, numa in root_numa.items() if numa},
    }


def _probed_numa(device: Mapping[str, Any]) -> Any:
    numa = device.get("numa_node")
    if numa is None:
        numa = (device.get("numa_node_inferred") or {}).get("node")
    return numa


def _published_address(attributes: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """``(address, attribute, raw value)``: the first address attribute present."""
    for name in ADDRESS_ATTRIBUTES:
        raw = attributes.get(name)
        if raw is not None and raw != "":
            return normalize_pci_address(raw), name, str(raw)
    parts = [attributes.get(name) for name in DRANET_ADDRESS_PARTS]
    if all(isinstance(p, str) and p for p in parts):
        raw = f"{parts[0]}:{parts[1]}:{parts[2]}.{parts[3]}"
        return normalize_pci_address(raw), "dra.net/pciAddress{Domain,Bus,Device,Function}", raw
    return None, None, None


def join_device(
    driver: str, attributes: Mapping[str, Any], probed: Mapping[str, Any] | None, label: str | None = None
) -> dict[str, Any]:
    """Join one published device to the probe of its node.

    ``attributes`` as :func:`flat_attributes` gives them; ``probed`` is
    :func:`probed_node` of the node (``None`` without a probe). Returns
    ``{"address", "via", "kind", "role", "roots", "numa", "physfn", "reason"}``:
    ``address`` is the probed PCI function (``None`` when no address is
    published or it is not on the node), ``via`` the attribute it came from,
    ``role`` ``accelerator``, ``nic`` or ``None``, ``roots`` and ``numa`` the
    PCIe roots and NUMA nodes known for the device (the probe's where joined,
    else the published ones; a set, for devices local to several),
    ``physfn`` the probed parent port of a VF, and ``reason`` why a published
    address could not be used (then no level is read for the device at all:
    the probe and the cluster disagree about the node). ``numa_from`` stays
    ``None`` here: :func:`infer_root_numa` sets it on the devices whose NUMA
    node it takes from another device of the node.
    """
    name = label or "device"
    kind = published_kind(driver, attributes)
    address, via, raw = _published_address(attributes)
    roots = _roots([attributes.get(a) for a in ROOT_ATTRIBUTES])
    numa = _numas([attributes.get(a) for a in NUMA_ATTRIBUTES])
    joined = {"address": None, "via": via, "kind": kind, "roots": roots, "numa": numa, "physfn": None, "reason": None,
              "numa_from": None}  # fmt: skip
    parent = normalize_pci_address(attributes.get(f"{dra.DRIVER_NAME}/sriovParent"))
    if via is not None and address is None:
        joined["reason"] = f"{name}: {via} {raw!r} is not a PCI address"
    elif address is not None and probed is not None:
        if probed["addresses"] is not None and address not in probed["addresses"]:
            joined["reason"] = f"{name}: {via} {address} is not a PCI function of the probed node"
        else:
            joined["address"] = address
            device = probed["devices"].get(address)
            if device is not None:
                joined["roots"] = _roots(device.get("pcie_root")) or roots
                joined["numa"] = _numas(_probed_numa(device)) or numa
                parent = normalize_pci_address(device.get("physfn")) or parent
                if kind is None:
                    probed_kind = device.get("kind")
                    kind = "accelerator" if probed_kind in topology_lib.GPU_KINDS else None
                    kind = "nic" if probed_kind in topology_lib.NIC_KINDS else kind
                    joined["kind"] = kind
    elif address is not None:
        joined["address"] = address  # no probe: kept for the links of nodes planned without devices
    if not joined["numa"] and joined["roots"] and probed is not None and not joined["reason"]:
        # a root and no NUMA node published: the probe knows the root's NUMA node
        joined["numa"] = frozenset(n for r in joined["roots"] for n in probed["root_numa"].get(r, ()))
    joined["physfn"] = parent
    # a MIG device is its parent GPU's accelerator: same probed function, same levels to the node's NICs
    joined["role"] = "accelerator" if kind in ACCELERATOR_KINDS else ("nic" if kind in ("nic", "vf") else None)
    return joined


def infer_root_numa(joined: Iterable[tuple[str, dict[str, Any]]]) -> None:
    """NUMA nodes of a node's devices that publish a PCIe root and no NUMA node, from the node's other devices.

    ``joined``: ``(label, join)`` of every published device of one node, each
    from :func:`join_device`. A PCIe root complex belongs to one NUMA node, so a
    device on a root shares the NUMA node of any other device on that root
    that has one (published, or the probe's). Donors are devices with one
    root and one NUMA node of their own; a root whose donors disagree gives
    nothing, and a device on several roots gets NUMA nodes only when every
    one of its roots has them. The receivers' ``numa`` is set, and
    ``numa_from`` names the donor (``"gpu-4: numaNode 1 from nic-x (same
    pcieRoot pci0000:04)"``); devices whose join has a ``reason`` neither give
    nor take.
    """
    joined = sorted(joined, key=lambda item: item[0])
    donors: dict[str, dict[int, str]] = {}  # root: {NUMA node: first donor}
    for label, join in joined:
        if join.get("reason") or join.get("numa_from") or len(join["roots"]) != 1 or len(join["numa"]) != 1:
            continue
        (root,) = join["roots"]
        (numa,) = join["numa"]
        donors.setdefault(root, {}).setdefault(numa, label)
    for label, join in joined:
        if join.get("reason") or join["numa"] or not join["roots"]:
            continue
        found = [(root, donors.get(root) or {}) for root in sorted(join["roots"])]
        if any(len(numas) != 1 for _root, numas in found):
            continue  # a root without donors, or donors that disagree: nothing is inferred
        notes = []
        for root, numas in found:
            ((numa, donor),) = numas.items()
            notes.append(f"numaNode {numa} from {donor} (same pcieRoot {root})")
        join["numa"] = frozenset(numa for _root, numas in found for numa in numas)
        join["numa_from"] = f"{label}: " + "; ".join(notes)


def device_rail(
    driver: str, attributes: Mapping[str, Any], join: Mapping[str, Any], rule_rails: Mapping[str, int] | None
) -> tuple[int | None, str | None]:
    """``(rail, note)`` of one published NIC or VF (``None`` for other devices, and where unknown).

    ``attributes`` as :func:`flat_attributes` gives them, ``join`` from
    :func:`join_device`; ``rule_rails`` is the node's PCI address -> rail
    under the site's rule (``node/topology/rails.assign``, VFs included).
    The bundled driver (:func:`collection_device`) publishes
    ``dra.aligned.dev/rail``: that is what the
    scheduler selects on, so it wins, and ``note`` says where the rule gives
    another rail. Other drivers' NICs have the rail of the probed function
    they are joined to (none without a join). A NIC of the bundled driver
    that publishes no rail gets the rule's, with a note: the rail templates
    cannot select it. Never a guess: without either, ``None``.
    """
    if join.get("role") != "nic":
        return None, None
    address = join.get("address")
    ruled = (rule_rails or {}).get(address) if address else None
    if not collection_device(driver, attributes):
        return ruled, None
    published = attributes.get(dra.ATTR_RAIL)
    if isinstance(published, bool) or not isinstance(published, int):
        published = None
    if published is None:
        if ruled is None:
            return None, None
        return ruled, (
            f"publishes no {dra.ATTR_RAIL}; the site's rule puts {address} on rail {ruled} "
            "(rail templates cannot select it: does the driver have the site's rails file?)"
        )
    if ruled is not None and ruled != published:
        return published, (
            f"publishes {dra.ATTR_RAIL} {published}, the site's rule puts {address} on rail {ruled}; "
            "the published rail is planned (the scheduler selects on it)"
        )
    return published, None


def joined_pair_level(
    accelerator: Mapping[str, Any],
    nic: Mapping[str, Any],
    links: Mapping[str, Mapping[str, str]],
    p2p: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Level of one accelerator and one NIC of a node, both from :func:`join_device`.

    Returns ``{"level", "exact", "source"}`` (and ``reason`` when unknown).
    ``level`` of a bound is its worst case: the pair is at that level or better.
    Where a NUMA node that :func:`infer_root_numa` inferred decides the level,
    the source is ``inferred`` (``bound`` for a bound) and ``inferred`` lists
    the devices' ``numa_from``.

    A level from the probe is the one the traffic flows at (:func:`pair_level`
    with the node's ``p2p``). Where the node's probe has a ``p2p`` map, the
    result adds ``path`` (``direct``, ``host_bridge`` or ``unknown``: a pair
    the probe did not verify, and a pair joined without a probed address)
    and, for a pair the host bridge moves to PHB, ``physical_level``; without
    a ``p2p`` map (older facts) the result is what it was before paths were
    read.
    """
    for side in (accelerator, nic):
        if side.get("reason"):
            found = {"level": None, "exact": False, "source": "unknown", "reason": side["reason"]}
            return _with_path(found, p2p, None)
    if accelerator.get("address"):
        for address in (nic.get("address"), nic.get("physfn")):
            physical = (links.get(accelerator["address"]) or {}).get(address) if address else None
            if physical in topology_lib.LEVEL_RANK:
                entry = pair_path(p2p, accelerator["address"], address)
                found = {"level": p2p_lib.flowing_level(physical, entry), "exact": True, "source": "topology"}
                if p2p and found["level"] != physical:
                    found["physical_level"] = physical
                return _with_path(found, p2p, entry or {"path": PATH_UNKNOWN})
    return _with_path(_unprobed_pair_level(accelerator, nic), p2p, None)


def _with_path(found: dict[str, Any], p2p: Mapping[str, Any] | None, entry: Mapping[str, Any] | None) -> dict[str, Any]:
    """``found`` with the pair's ``path`` where the node's probe has a ``p2p`` map.

    A pair between host bridges (exactly NODE or SYS) goes through them; any
    other pair without a probed entry is unverified.
    """
    if not p2p:
        return found
    if entry is None:
        beyond = found.get("exact") and found.get("level") in ("NODE", "SYS")
        entry = {"path": PATH_HOST_BRIDGE if beyond else PATH_UNKNOWN}
    found["path"] = path_of(entry)
    return found


def _unprobed_pair_level(accelerator: Mapping[str, Any], nic: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`joined_pair_level` of a pair the probe's ``links`` do not give: from roots and NUMA nodes."""
    a_roots, b_roots = accelerator.get("roots") or frozenset(), nic.get("roots") or frozenset()
    a_numa, b_numa = accelerator.get("numa") or frozenset(), nic.get("numa") or frozenset()
    if a_roots & b_roots:
        return {"level": "PHB", "exact": False, "source": "bound"}
    if a_numa and b_numa:
        inferred = [side["numa_from"] for side in (accelerator, nic) if side.get("numa_from")]
        decided = {"source": "inferred", "inferred": inferred} if inferred else {"source": "attributes"}
        if not a_numa & b_numa:
            return {"level": "SYS", "exact": True, **decided}
        if a_roots and b_roots and len(a_numa) == len(b_numa) == 1:
            # other host bridges on one NUMA node: NODE by definition
            return {"level": "NODE", "exact": True, **decided}
        bound = {"level": "NODE", "exact": False, "source": "bound"}
        return dict(bound, inferred=inferred) if inferred else bound
    return {
        "level": None,
        "exact": False,
        "source": "unknown",
        "reason": "no PCI address on the probed node, no shared pcieRoot and no numaNode on both devices",
    }


def _ranked(levels: Iterable[tuple[str | None, bool]]) -> tuple[list[tuple[int, bool]], bool]:
    """``([(rank, exact)], any unknown)`` of ``(level, exact)`` pairs.

    ``(None, False)`` is an unknown level; ``(None, True)`` is nothing to
    summarise (an allocation without an accelerator-NIC pair, a node where no
    claim fits) and is left out.
    """
    known, unknown = [], False
    for level, exact in levels:
        if level in topology_lib.LEVEL_RANK:
            known.append((topology_lib.LEVEL_RANK[level], bool(exact)))
        elif level is not None or not exact:
            unknown = True
    return known, unknown


def worst_level(levels: Iterable[tuple[str | None, bool]]) -> tuple[str | None, bool]:
    """``(level, exact)``: the worst of ``(level, exact)`` pairs; never better than any of them.

    Exact when an exact level reaches the worst rank: a bound there only says
    "this or better". One unknown level (``(None, False)``) makes the worst
    unknown, ``(None, False)``, unless an exact SYS is among them: nothing is
    worse than SYS, so the worst is SYS whatever the unknown ones are.
    ``(None, True)`` entries are nothing to summarise and are left out; with
    nothing else the result is ``(None, True)``.
    """
    known, unknown = _ranked(levels)
    sys_rank = len(topology_lib.LEVELS) - 1
    if any(r == sys_rank and exact for r, exact in known):
        return topology_lib.LEVELS[sys_rank], True
    if unknown:
        return None, False
    if not known:
        return None, True
    rank = max(r for r, _exact in known)
    return topology_lib.LEVELS[rank], any(exact for r, exact in known if r == rank)


def best_level(levels: Iterable[tuple[str | None, bool]]) -> tuple[str | None, bool]:
    """``(level, exact)``: the best of ``(level, exact)`` pairs, a claim that one at least this good exists.

    An unknown pair cannot make that claim false (the best is the known best
    or better), so it is left out of the level; but it could be better than
    the known best, so it makes the result a bound, as a bound does: exact
    only when every pair is known and exact, or the best is PIX and exact.
    Unknown, ``(None, False)``, when no pair is known; ``(None, True)`` with
    nothing to summarise.
    """
    known, unknown = _ranked(levels)
    if not known:
        return None, not unknown
    rank = min(r for r, _exact in known)
    exact = (not unknown and all(e for _r, e in known)) or (rank == 0 and any(e for r, e in known if r == 0))
    return topology_lib.LEVELS[rank], exact


def level_text(level: str | None, exact: bool = True) -> str:
    """``NODE``, ``≤ NODE`` for a bound, ``unknown``."""
    if level is None:
        return "unknown"
    return level if exact else f"\u2264 {level}"


def summary_level_text(level: str | None, exact: bool) -> str:
    """:func:`level_text` of a summary (:func:`worst_level`): ``none`` when there was nothing to summarise."""
    if level is None and exact:
        return "none"
    return level_text(level, exact)
