# SPDX-License-Identifier: Apache-2.0
"""The DRA object model shared by the bundled driver and the allocation planner.

One place says which devices a node publishes (:func:`devices_from_topology`,
built on the topology library's ``probe()`` output) and with which attributes,
how devices and attributes are named, and which ``resource.k8s.io/v1`` limits
apply (:data:`LIMITS`). The driver publishes exactly what this module returns and
the planner simulates allocation on exactly the same devices, so the two cannot
disagree. ``slices`` cuts the devices into ResourceSlices and checks them against
the limits; ``gates`` says which fields each Kubernetes minor serves.

The code runs on nodes (Python >= 3.9) and imports nothing from Ansible.
"""

from __future__ import annotations

import fnmatch
import re

# The part itself, not the package: AnsiballZ ships only the topology parts a module imports.
from ansible_collections.aligned.dra.plugins.module_utils.node.topology.p2p import path_to
from ansible_collections.aligned.dra.plugins.module_utils.node.topology.parsers import parse_cpulist

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

DRIVER_NAME = "dra.aligned.dev"
API_VERSION = "resource.k8s.io/v1"
STANDARD_DOMAIN = "resource.kubernetes.io"

# Standard attributes (published by every driver that knows them).
ATTR_PCIE_ROOT = STANDARD_DOMAIN + "/pcieRoot"
ATTR_PCI_BUS_ID = STANDARD_DOMAIN + "/pciBusID"
ATTR_NUMA_NODE = STANDARD_DOMAIN + "/numaNode"
# The driver's rail attribute (its domain + "/rail"): an RDMA NIC's or VF's rail
# under the site's rule (node/topology/rails.py); absent without a rule.
RAIL_ATTRIBUTE = "rail"
ATTR_RAIL = DRIVER_NAME + "/" + RAIL_ATTRIBUTE
# The driver's GPUDirect attribute (its domain + "/gpudirectRDMA"): on every GPU, whether GPUDirect RDMA is
# ready on its node (the probe's gpudirect.ready); absent where that is unknown.
GPUDIRECT_ATTRIBUTE = "gpudirectRDMA"

# -- resource.k8s.io/v1 limits (k8s.io/api/resource/v1 types.go) -------------

LIMITS = {
    # ResourceSlice
    "slice_max_devices": 128,  # ResourceSliceMaxDevices
    "slice_max_devices_with_counters": 64,  # devices with taints, consumesCounters or list attributes
    "device_max_attributes_and_capacities": 32,
    "device_attribute_max_value_length": 64,  # string and version values
    "device_max_id_length": 32,  # the C identifier after the domain
    "device_max_domain_length": 63,
    "driver_name_max_length": 63,
    "pool_name_max_length": 253,
    "dns_label_max_length": 63,
    "dns_subdomain_max_length": 253,
    # ResourceClaim / ResourceClaimTemplate / DeviceClass
    "claim_max_requests": 32,  # DeviceRequestsMaxSize
    "claim_max_constraints": 32,  # DeviceConstraintsMaxSize
    "claim_max_config": 32,  # DeviceConfigMaxSize
    "request_max_selectors": 32,  # DeviceSelectorsMaxSize (also per class)
    "class_max_selectors": 32,
    "class_max_config": 32,
    "first_available_max_subrequests": 8,  # FirstAvailableDeviceRequestMaxSize
    "allocation_max_devices": 32,  # AllocationResultsMaxSize
    "cel_expression_max_length": 10 * 1024,  # CELSelectorExpressionMaxLength
    "cel_expression_max_cost": 1000000,  # CELSelectorExpressionMaxCost
    "opaque_parameters_max_length": 10 * 1024,
    "tolerations_max_length": 16,
    # DRAListTypeAttributes (KEP-5491): the values of all attributes of one
    # device together, each list element counting once
    "device_max_attribute_values": 48,  # ResourceSliceMaxAttributeValuesPerDevice
}

# Value fields of a DeviceAttribute: the scalar ones, and the list ones of
# DRAListTypeAttributes with the scalar type of their elements.
SCALAR_VALUE_FIELDS = ("string", "int", "bool", "version")
LIST_VALUE_FIELDS = {"strings": "string", "ints": "int", "bools": "bool", "versions": "version"}

# -- device model ---------------------------------------------------------------

# Device kinds this driver publishes, and the prefix of their names.
DEVICE_KINDS = ("gpu", "accelerator", "nic", "vf")
NAME_PREFIX = {"gpu": "gpu", "accelerator": "acc", "nic": "nic", "vf": "vf"}
# The kinds a split GPU driver (option split_gpu_driver) publishes; the main
# driver (DRIVER_NAME) keeps the others.
SPLIT_GPU_KINDS = ("gpu", "accelerator")

DEFAULT_OPTIONS = {
    # which functions become devices
    "gpus": True,  # topology kind gpu
    "accelerators": True,  # topology kind accelerator
    "rdma_nics": True,  # NICs that own an RDMA device (PFs)
    "plain_nics": False,  # NICs without an RDMA device
    "vfs": True,  # SR-IOV virtual functions of a published or filtered PF kind
    # fnmatch patterns; a function matching any of them (PCI address, netdev or
    # RDMA device name) is never published, nor are the VFs of a matching PF:
    # keep management NICs out
    "exclude": [],
    # the domain of the driver's own attributes
    "domain": DRIVER_NAME,
    # publish numaNode as a list where a device is local to several NUMA nodes
    # (see local_numa_nodes); needs DRAListTypeAttributes on in the cluster,
    # which the driver cannot see: the validation stage checks it per site
    "list_attributes": False,
    # run the driver split by kind: the GPUs and accelerators under this driver
    # name (a DNS subdomain of at most 63 characters that contains "gpu", so
    # that KAI Scheduler counts them), the NICs and VFs under DRIVER_NAME;
    # attributes stay under the domain either way. None (or ''): one driver for all
    "split_gpu_driver": None,
}

_DNS_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_C_IDENTIFIER_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_K8S_PCIE_ROOT_RE = re.compile(r"pci[0-9a-f]{4}:[0-9a-f]{2}")
_K8S_BDF_RE = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
_MEMORY_IN_MODEL_RE = re.compile(r"(?<![0-9])([0-9]{1,4})\s?GB\b", re.IGNORECASE)


class DeviceModelError(ValueError):
    """Options or input that cannot produce a valid device list."""


def is_dns_label(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(_DNS_LABEL_RE.fullmatch(value))


def is_dns_subdomain(value: object) -> bool:
    return isinstance(value, str) and len(value) <= 253 and bool(_DNS_SUBDOMAIN_RE.fullmatch(value))


def is_qualified_name(value: object) -> bool:
    """An attribute or capacity name: ``identifier`` or ``domain/identifier``."""
    if not isinstance(value, str):
        return False
    domain, sep, ident = value.rpartition("/")
    if sep and not (len(domain) <= LIMITS["device_max_domain_length"] and is_dns_subdomain(domain)):
        return False
    return len(ident) <= LIMITS["device_max_id_length"] and bool(_C_IDENTIFIER_RE.fullmatch(ident))


def split_qualified_name(name: str, driver: str = DRIVER_NAME) -> tuple[str, str]:
    """``(domain, id)`` of an attribute name; a bare id belongs to ``driver``."""
    domain, sep, ident = name.rpartition("/")
    return (domain if sep else driver), ident


def device_name(kind: str, pci_address: str) -> str:
    """Stable DNS-label name of a device: ``gpu-0000-1b-00-0``."""
    if kind not in NAME_PREFIX:
        raise DeviceModelError(f"kind {kind!r} is not one of {', '.join(DEVICE_KINDS)}")
    name = NAME_PREFIX[kind] + "-" + pci_address.lower().replace(":", "-").replace(".", "-")
    if not is_dns_label(name):
        raise DeviceModelError(f"pci_address {pci_address!r} gives {name!r}, which is not a DNS label")
    return name


def _options(options: dict[str, Any] | None) -> dict[str, Any]:
    if options is not None and not isinstance(options, dict):
        raise DeviceModelError("device_options must be a mapping")
    merged = dict(DEFAULT_OPTIONS)
    for key, value in (options or {}).items():
        if key not in DEFAULT_OPTIONS:
            raise DeviceModelError(f"device_options: unknown key {key!r} (known: {', '.join(sorted(DEFAULT_OPTIONS))})")
        merged[key] = value
    if not isinstance(merged["exclude"], (list, tuple)) or not all(isinstance(p, str) for p in merged["exclude"]):
        raise DeviceModelError("device_options.exclude must be a list of fnmatch patterns")
    if not is_dns_subdomain(merged["domain"]) or len(merged["domain"]) > LIMITS["device_max_domain_length"]:
        raise DeviceModelError(
            f"device_options.domain {merged['domain']!r} is not a DNS subdomain of at most 63 characters"
        )
    for key in ("gpus", "accelerators", "rdma_nics", "plain_nics", "vfs", "list_attributes"):
        if not isinstance(merged[key], bool):
            raise DeviceModelError(f"device_options.{key} must be a boolean")
    problem = split_gpu_driver_problem(merged["split_gpu_driver"])
    if problem:
        raise DeviceModelError(f"device_options.split_gpu_driver {merged['split_gpu_driver']!r}: {problem}")
    return merged


def split_gpu_driver_problem(name: object) -> str | None:
    """Why ``name`` cannot be the split GPU driver's name (``None`` or ``''``: no split, fine), or None."""
    if name is None or name == "":
        return None
    if not is_dns_subdomain(name) or len(str(name)) > LIMITS["driver_name_max_length"]:
        return f"a driver name must be a DNS subdomain of at most {LIMITS['driver_name_max_length']} characters"
    if "gpu" not in str(name):
        return "the name must contain 'gpu': KAI Scheduler counts the devices of drivers whose name does"
    if name == DRIVER_NAME:
        return f"it is the main driver's name; the split GPU driver needs a name of its own (not {DRIVER_NAME})"
    return None


def driver_of_kind(kind: str, options: dict[str, Any] | None = None) -> str:
    """The driver name a published device of ``kind`` has under ``options``.

    ``split_gpu_driver`` for the GPU kinds (:data:`SPLIT_GPU_KINDS`) when the
    options set it, else :data:`DRIVER_NAME`; the one rule the planner's
    devices and the claims' DeviceClasses follow.
    """
    if kind not in DEVICE_KINDS:
        raise DeviceModelError(f"kind {kind!r} is not one of {', '.join(DEVICE_KINDS)}")
    split = _options(options)["split_gpu_driver"]
    return split if split and kind in SPLIT_GPU_KINDS else DRIVER_NAME


def kind_of_name(name: str) -> str | None:
    """The kind of a published device from its name (:func:`device_name`'s prefix), or None."""
    prefix = str(name).partition("-")[0]
    return next((kind for kind, known in NAME_PREFIX.items() if known == prefix), None)


def _excluded(device: dict[str, Any], patterns: Iterable[str]) -> bool:
    names = [device.get("pci_address") or ""]
    names += [n.get("name") or "" for n in device.get("netdevs") or []]
    names += list(device.get("rdma_devices") or [])
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns for name in names if name)


def _truncate(value: str) -> str:
    return value[: LIMITS["device_attribute_max_value_length"]]


def _link_speed_gbps(device: dict[str, Any], rdma_ports: dict[str, list[dict[str, Any]]]) -> int | None:
    """Port speed in Gb/s: the first netdev's speed, else the RDMA port's rate."""
    for netdev in device.get("netdevs") or []:
        speed = netdev.get("speed_mbps")
        if isinstance(speed, (int, float)) and speed > 0:
            return int(round(speed / 1000))
    for rdma in device.get("rdma_devices") or []:
        for port in rdma_ports.get(rdma, []):
            rate = port.get("rate_gbps")
            if isinstance(rate, (int, float)) and rate > 0:
                return int(round(rate))
    return None


def _link_type(device: dict[str, Any], rdma_ports: dict[str, list[dict[str, Any]]]) -> str | None:
    for rdma in device.get("rdma_devices") or []:
        for port in rdma_ports.get(rdma, []):
            layer = port.get("link_layer")
            if layer:
                return str(layer).lower()
    for netdev in device.get("netdevs") or []:
        if netdev.get("type"):
            return str(netdev["type"])
    return None


def gpu_memory_gib(model: str | None) -> int | None:
    """GiB of memory stated in a GPU's model name ("NVIDIA H100 80GB HBM3" -> 80)."""
    if not model:
        return None
    match = _MEMORY_IN_MODEL_RE.search(model)
    return int(match.group(1)) if match and int(match.group(1)) > 0 else None


def _published_kind(device: dict[str, Any], opts: dict[str, Any], by_bdf: dict[str, dict[str, Any]]) -> str | None:
    kind = device.get("kind")
    if kind == "gpu":
        return "gpu" if opts["gpus"] else None
    if kind == "accelerator":
        return "accelerator" if opts["accelerators"] else None
    if kind not in ("nic", "rdma"):
        return None
    if device.get("physfn"):
        parent = by_bdf.get(device["physfn"])
        if not opts["vfs"] or (parent is not None and _excluded(parent, opts["exclude"])):
            return None
        return "vf"
    if kind == "rdma":
        return "nic" if opts["rdma_nics"] else None
    return "nic" if opts["plain_nics"] else None


def devices_from_topology(
    topology: dict[str, Any], options: dict[str, Any] | None = None, rails: dict[str, int] | None = None
) -> list[dict[str, Any]]:
    """The ``resource.k8s.io/v1`` Device dicts a node publishes, sorted by name.

    ``topology`` is the output of the topology library's ``probe()``.
    ``options`` (see :data:`DEFAULT_OPTIONS`) select the kinds and keep
    management NICs out. Every device carries the standard
    ``resource.kubernetes.io/`` attributes that apply and the driver's own
    attributes; see docs/devices.md for the table. ``rails`` (PCI address ->
    rail, from ``node/topology/rails.assign``) gives NICs and VFs the
    ``<domain>/rail`` attribute.

    Peer-to-peer DMA (the probe's ``acs`` and ``gpudirect``): a function has
    no ``pcieSwitch`` when a function on its path up to that switch (itself
    included) redirects peer-to-peer requests to the host bridge, so that a
    template matching ``pcieSwitch`` never lands on a pair whose traffic
    goes through the host bridge (an unknown ACS state keeps it); every GPU
    has ``<domain>/gpudirectRDMA`` with the node's ``gpudirect.ready``
    (absent when that is unknown).
    """
    opts = _options(options)
    domain = opts["domain"]
    devices = topology.get("devices") or []
    by_bdf = {d.get("pci_address"): d for d in devices}
    rdma_ports = {r.get("name"): r.get("ports") or [] for r in topology.get("rdma_devices") or []}
    gpu_order: dict[str, int] = {}
    for kind in ("gpu", "accelerator"):
        same = sorted(d["pci_address"] for d in devices if d.get("kind") == kind)
        gpu_order.update({bdf: index for index, bdf in enumerate(same)})

    numa_nodes = (topology.get("numa_nodes") or []) if opts["list_attributes"] else []
    peer = {"acs": acs_states(topology), "ready": (topology.get("gpudirect") or {}).get("ready")}
    published = [
        _device(device, kind, domain, by_bdf, rdma_ports, gpu_order, numa_nodes, rails or {}, peer)
        for device, kind in _published(devices, opts)
    ]
    published.sort(key=lambda d: d["name"])
    return published


def published_kinds(topology: dict[str, Any], options: dict[str, Any] | None = None) -> dict[str, str]:
    """``{pci_address: kind}`` of the functions :func:`devices_from_topology` publishes (same decision, no attributes).

    Kinds are :data:`DEVICE_KINDS`: ``gpu``, ``accelerator``, ``nic`` (a
    physical NIC) and ``vf``.
    """
    return {
        device["pci_address"]: kind for device, kind in _published(topology.get("devices") or [], _options(options))
    }


def _published(devices: list[dict[str, Any]], opts: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """The functions a node publishes, with the kind each is published as."""
    by_bdf = {d.get("pci_address"): d for d in devices}
    found = []
    for device in devices:
        if not device.get("pci_address"):
            continue
        kind = _published_kind(device, opts, by_bdf)
        if kind is None or _excluded(device, opts["exclude"]):
            continue
        found.append((device, kind))
    return found


def acs_states(topology: dict[str, Any]) -> dict[str, dict[str, Any] | None]:
    """``{pci_address: acs}`` of the probe's bridges and devices (``None`` or absent: not read)."""
    found: dict[str, dict[str, Any] | None] = {}
    for entry in (topology.get("bridges") or []) + (topology.get("devices") or []):
        address = entry.get("pci_address")
        if address and isinstance(entry.get("acs"), dict):
            found[address] = entry["acs"]
    return found


def switch_redirects(device: dict[str, Any], acs: dict[str, dict[str, Any] | None]) -> list[str]:
    """The functions on ``device``'s path up to its ``pcieSwitch`` (the first of ``switches``) that redirect."""
    switches = device.get("switches") or []
    if not switches:
        return []
    return path_to(device["pci_address"], list(device.get("bridges") or []), switches[0], acs)["redirected_at"]


def local_numa_nodes(node: int, local_cpulist: str | None, numa_nodes: list[dict[str, Any]]) -> list[int]:
    """The NUMA nodes a device on ``node`` is local to: ``node`` first, then the others by id.

    The list form of ``resource.kubernetes.io/numaNode`` (KEP-6072) is the
    device's node followed by the nodes of its socket at the smallest SLIT
    distance from it. The probe records each node's CPUs and SLIT distances,
    but not the socket of a node, so "same socket" is taken from the kernel's
    own locality statement instead: another node counts when it has CPUs,
    all of them are in the device's ``local_cpulist``, and (where the probe
    read distances) it lies at the smallest distance from ``node``. A
    ``local_cpulist`` that covers every CPU of the machine says "no
    affinity" (the kernel's answer for ``numa_node`` -1) and adds nothing,
    and so does one that does not even cover ``node``'s own CPUs.
    """
    local = set(parse_cpulist(local_cpulist) or ())
    by_id = {entry.get("id"): entry for entry in numa_nodes}
    own = by_id.get(node)
    every_cpu = set()
    for entry in numa_nodes:
        every_cpu.update(entry.get("cpus") or ())
    if own is None or not local or local >= every_cpu or not set(own.get("cpus") or ()) <= local:
        return [node]
    distances = own.get("distances") or {}
    remote = [d for other, d in distances.items() if other != str(node) and isinstance(d, int)]
    nearest = min(remote) if remote else None
    found = [node]
    for other_id in sorted(i for i in by_id if isinstance(i, int) and i != node):
        cpus = set(by_id[other_id].get("cpus") or ())
        if not cpus or not cpus <= local:
            continue
        if distances and distances.get(str(other_id)) != nearest:
            continue
        found.append(other_id)
    return found


def attribute_value_set(value: Any) -> frozenset | None:
    """A DeviceAttribute value as the set that matchAttribute/distinctAttribute compare (KEP-5491).

    A scalar is a one-element set, a list the set of its elements; elements
    are ``(type, value)`` so that values of different types never meet (an
    int 1 is not a bool true, a string never equals a version). ``None`` for
    anything that is not a DeviceAttribute value.
    """
    if not isinstance(value, dict) or len(value) != 1:
        return None
    ((field, raw),) = value.items()
    if field in SCALAR_VALUE_FIELDS:
        return frozenset(((field, raw),))
    kind = LIST_VALUE_FIELDS.get(field)
    if kind is None or not isinstance(raw, list):
        return None
    return frozenset((kind, item) for item in raw)


def _device(
    device: dict[str, Any],
    kind: str,
    domain: str,
    by_bdf: dict[str, dict[str, Any]],
    rdma_ports: dict[str, list[dict[str, Any]]],
    gpu_order: dict[str, int],
    numa_nodes: list[dict[str, Any]],
    rails: dict[str, int],
    peer: dict[str, Any],
) -> dict[str, Any]:
    """One Device dict; ``numa_nodes`` (the probe's) is given only when list attributes are published.

    ``peer``: ``{"acs": acs_states(...), "ready": gpudirect.ready}`` of the node.
    """
    bdf = device["pci_address"]
    attrs: dict[str, dict[str, Any]] = {}
    capacity: dict[str, dict[str, str]] = {}

    def put(name: str, value: Any) -> None:
        if value is None or value == "":
            return
        if isinstance(value, bool):
            attrs[name] = {"bool": value}
        elif isinstance(value, int):
            attrs[name] = {"int": value}
        else:
            attrs[name] = {"string": _truncate(str(value))}

    own = domain + "/"
    root = device.get("pcie_root")
    if root and _K8S_PCIE_ROOT_RE.fullmatch(root):
        put(ATTR_PCIE_ROOT, root)
    if _K8S_BDF_RE.fullmatch(bdf):
        put(ATTR_PCI_BUS_ID, bdf)
    numa = device.get("numa_node")
    inferred = device.get("numa_node_inferred") or {}
    if numa is None and isinstance(inferred.get("node"), int):
        numa = inferred["node"]
        put(own + "numaNodeInferred", True)
    if isinstance(numa, int) and numa >= 0:
        local = local_numa_nodes(numa, device.get("local_cpulist"), numa_nodes) if numa_nodes else [numa]
        if len(local) > 1:
            attrs[ATTR_NUMA_NODE] = {"ints": local}
        else:
            put(ATTR_NUMA_NODE, numa)

    put(own + "kind", kind)
    put(own + "vendorID", device.get("vendor_id"))
    put(own + "deviceID", device.get("device_id"))
    gpu = device.get("gpu") or {}
    model = gpu.get("model") or device.get("device_name")
    put(own + "model", model or f"{device.get('vendor_id')}:{device.get('device_id')}")
    put(own + "driver", device.get("driver"))
    switches = device.get("switches") or []
    if switches and not switch_redirects(device, peer["acs"]):
        put(own + "pcieSwitch", switches[0])

    if kind in ("gpu", "accelerator"):
        put(own + "gpuIndex", gpu_order.get(bdf))
        if isinstance(gpu.get("minor"), int):
            put(own + "minor", gpu["minor"])
        put(own + "uuid", gpu.get("uuid"))
        put(own + "card", gpu.get("card"))
        if kind == "gpu" and isinstance(peer["ready"], bool):
            put(own + GPUDIRECT_ATTRIBUTE, peer["ready"])
        memory = gpu_memory_gib(gpu.get("model"))
        if memory:
            capacity["memory"] = {"value": f"{memory}Gi"}
    else:
        netdevs = device.get("netdevs") or []
        if netdevs:
            put(own + "netdev", netdevs[0].get("name"))
        rdma = device.get("rdma_devices") or []
        put(own + "rdma", bool(rdma))
        if rdma:
            put(own + "rdmaDevice", rdma[0])
        speed = _link_speed_gbps(device, rdma_ports)
        if speed is None and device.get("physfn") in by_bdf:
            speed = _link_speed_gbps(by_bdf[device["physfn"]], rdma_ports)
        if speed:
            put(own + "linkSpeed", speed)
            capacity["bandwidth"] = {"value": f"{speed}G"}
        put(own + "linkType", _link_type(device, rdma_ports))
        put(own + RAIL_ATTRIBUTE, rails.get(bdf))
        sriov = device.get("sriov") or {}
        if kind == "vf":
            put(own + "sriovRole", "vf")
            put(own + "sriovParent", device.get("physfn"))
        elif sriov.get("totalvfs"):
            put(own + "sriovRole", "pf")
            put(own + "sriovNumVFs", sriov.get("numvfs") or 0)

    return {"name": device_name(kind, bdf), "attributes": attrs, "capacity": capacity}


# -- shareable GPUs (consumable capacity) -------------------------------------


def _whole_gib(quantity: str) -> int | None:
    if quantity.endswith("Gi") and quantity[:-2].isdigit():
        return int(quantity[:-2])
    return None


def make_shareable(device: dict[str, Any]) -> dict[str, Any]:
    """A copy of a published GPU that several claims may allocate, with memory and compute capacities.

    What the bundled driver publishes on clusters with consumable capacity
    (``--fractional-gpus``) and what the planner plans on there:
    ``allowMultipleAllocations: true``, ``memory`` (when stated in whole GiB)
    with a request policy in 1 GiB steps up to the memory size, and
    ``compute`` (percent) 1..100. Both policies have a default, which the
    scheduler consumes for a claim that does not request the capacity: a
    claim without a ``compute`` request takes all of it (100).
    """
    shared = dict(device)
    capacity = {k: dict(v) for k, v in (device.get("capacity") or {}).items()}
    memory = capacity.get("memory")
    if memory and _whole_gib(memory["value"]):
        memory["requestPolicy"] = {
            "default": "1Gi",
            "validRange": {"min": "1Gi", "max": memory["value"], "step": "1Gi"},
        }
    capacity["compute"] = {
        "value": "100",
        "requestPolicy": {"default": "100", "validRange": {"min": "1", "max": "100", "step": "1"}},
    }
    shared["capacity"] = capacity
    shared["allowMultipleAllocations"] = True
    return shared
