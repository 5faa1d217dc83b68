# SPDX-License-Identifier: Apache-2.0
"""PCIe/NUMA topology of a Linux node, read from sysfs and procfs.

This is the single source of truth for "which devices does this node have and
where are they": the ``topology_info`` module calls :func:`probe`, and the
bundled DRA driver and the allocation planner are to call nothing else, so
facts, published ResourceSlices and plans cannot disagree.

The probe runs on nodes (Python >= 3.9) and imports nothing from Ansible.
Every read tolerates missing files, unreadable files and dangling symlinks:
the field becomes ``None`` and, where the file should have been there, a
warning is recorded instead of an exception.

The package itself defines the vocabulary of a probe result (schema version,
device kinds, levels); its parts:

- ``reads``: :data:`PROBE_READS`, what the probe reads (for the capture);
- ``sysfs``: :class:`Reader`, file and link access collecting warnings;
- ``parsers``: the contents of sysfs and procfs files;
- ``pci``: addresses, :func:`classify`, pci.ids names;
- ``prober``: :func:`probe`, assembling its parts per device kind
  (``numa``, ``pci_walk``, ``netdevs``, ``rdma``, ``gpus``) and the GPU x NIC
  ``levels``;
- ``p2p``: PCIe ACS and Device Control read from a config space, the peer-to-peer path of a
  GPU x NIC pair by the kernel's rule, the level its traffic flows at;
- ``gpudirect``: whether GPUDirect RDMA can run on the node (IOMMU, peer memory, the NICs'
  Device Control, readiness);
- ``rails``: :func:`assign`, the rail of each RDMA NIC under a site's rule;
- ``rail_record``: the driver's record of the NICs it saw on the host (NICs out of the host's
  view read as last seen);
- ``addresses``: :func:`ipv4_addresses`, read on a live node (the ``subnet`` rule).

Node and site summaries and the accounting of failed nodes are controller
side: ``controller/topology/``.

Every name of every part can be used from the package (``topology.probe``,
``from ...module_utils.node.topology import compute_links``); the part is imported on
first use. Code that runs on nodes imports from the part instead
(``from ...module_utils.node.topology.prober import probe``): Ansible's module_utils
finder follows import statements, and ships to a node only the parts a
module's imports name. Inside the package, parts import each other relatively,
so the package needs nothing but the standard library and is vendored as it is
into the driver's wheel.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The vocabulary of a probe result, defined here so that every user of the
# package (the planner, the device model) gets it without loading a part.
SCHEMA_VERSION = 1

# nvidia-smi topo -m levels, best first.
LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
LEVEL_RANK = {name: rank for rank, name in enumerate(LEVELS)}

KINDS = ("gpu", "accelerator", "nic", "rdma", "nvme", "other")
GPU_KINDS = frozenset(("gpu", "accelerator"))
NIC_KINDS = frozenset(("nic", "rdma"))

# Where each name of the package is defined, for names not loaded with it.
_PARTS = {
    "reads": ("PROBE_READS",),
    "sysfs": ("Reader", "join_link"),
    "parsers": (
        "format_cpulist",
        "hex_id",
        "parse_cpulist",
        "parse_cpumask",
        "parse_enum",
        "parse_int",
        "parse_link_speed",
        "parse_nvidia_information",
        "parse_rate",
        "parse_uevent",
    ),
    "pci": (
        "GPU_DISPLAY_VENDORS",
        "PCI_IDS_PATHS",
        "PciIds",
        "classify",
        "find_pci_ids",
        "is_bridge_class",
        "kubernetes_pcie_root",
        "pci_function_key",
        "vf_addresses",
    ),
    "netdevs": ("NETDEV_TYPES",),
    "prober": ("probe", "_Probe"),
    "levels": ("compute_links", "pair_level"),
    "rails": (
        "RAILS_FILE_VERSION",
        "RULES",
        "RailRuleError",
        "assign",
        "check_rule",
        "describe",
        "rail_nics",
        "rule_for_node",
    ),
    "addresses": ("ipv4_addresses",),
}
_PART_OF = {name: part for part, names in _PARTS.items() for name in names}

__all__ = sorted(
    ["GPU_KINDS", "KINDS", "LEVEL_RANK", "LEVELS", "NIC_KINDS", "SCHEMA_VERSION"]
    + [name for name in _PART_OF if not name.startswith("_")]
)


def __getattr__(name: str) -> Any:
    part = _PART_OF.get(name)
    if part is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # A name in a string, not an import statement: the module_utils finder
    # would ship every part with every module. __import__, not importlib: that
    # costs a millisecond at start-up, and the whole-process probe is timed.
    module = f"{__name__}.{part}"
    __import__(module)
    value = getattr(sys.modules[module], name)
    globals()[name] = value  # the next look-up does not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PART_OF))
