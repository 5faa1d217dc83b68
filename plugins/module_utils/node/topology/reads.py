# SPDX-License-Identifier: Apache-2.0
"""What the probe reads, for tools that copy a node's trees.

The ``topology_capture`` module ships this file and not the probe.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Everything the probe reads, for tools that copy a node's trees (the
# topology_capture module): the capture copies exactly this, so a probe of the
# copy returns what a probe of the node returns. Directory names are relative
# to the sysfs root (``procfs_files`` to the procfs root); ``*`` stands for
# one path component. tests/unit/plugins/module_utils/node/snapshots/test_capture.py traces
# every path the probe touches and fails when one is not captured: a new read
# in the probe needs a new entry here.
PROBE_READS: dict[str, Any] = {
    # devices/system/node/node<N>/<file>
    "numa_dir": "devices/system/node",
    "numa_node_files": ("cpulist", "cpumap", "distance", "meminfo"),
    # bus/pci/devices/<bdf>: links to the function directories under
    # devices/pci*/...; every PCI function in those paths (bridges too, listed
    # or not) is read with these files and links.
    "pci_devices_dir": "bus/pci/devices",
    "pci_function_files": (
        "uevent",
        "class",
        "vendor",
        "device",
        "subsystem_vendor",
        "subsystem_device",
        "numa_node",
        "local_cpulist",
        "local_cpus",
        "current_link_speed",
        "max_link_speed",
        "current_link_width",
        "max_link_width",
        "sriov_totalvfs",
        "sriov_numvfs",
        "sriov_offset",
        "sriov_stride",
        # Binary: the whole space when readable (4096 bytes as root, 64 without).
        "config",
    ),
    "pci_function_links": ("driver", "physfn", "virtfn*", "iommu_group"),
    # kernel/iommu_groups/<n>/<file>; the directory itself, empty, says the kernel has no IOMMU.
    "iommu_groups_dir": "kernel/iommu_groups",
    "iommu_group_files": ("type",),
    # module/<name>: whether these modules are loaded (the directory is there),
    # and module/ itself (which says the others are not).
    "module_dir": "module",
    "modules": ("nvidia_peermem",),
    # class/<name>/<device>: links to class devices below PCI functions, and
    # the files read in each device's directory.
    "class_files": {
        "net": ("type", "speed", "address", "operstate", "mtu"),
        "infiniband": ("node_guid",),
        "infiniband_verbs": ("ibdev",),
        "infiniband_mad": ("ibdev",),
        "drm": (),
    },
    # Classes whose devices count only below a PCI function (the RDMA classes
    # are read in full: an RDMA device without a PCI function is reported too).
    "class_pci_only": ("net", "drm"),
    # class/infiniband/<dev>/ports/<n>/<file>
    "rdma_port_files": ("state", "phys_state", "link_layer", "rate"),
    # <function>/<dir>/<char device>/ibdev beside an RDMA device's infiniband/
    "rdma_char_device_dirs": ("infiniband_verbs", "infiniband_mad"),
    # Identifiers a shared snapshot may leave out (redaction): MAC addresses
    # and RDMA node GUIDs.
    "address_files": {"net": ("address",), "infiniband": ("node_guid",)},
    "procfs_files": (
        "sys/kernel/hostname",
        "driver/nvidia/gpus/*/information",
        "driver/nvidia/version",
        "cmdline",
        "modules",
        "sys/kernel/osrelease",
        "version",
    ),
}
