# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: build fake, kernel-shaped ``/sys`` and ``/proc`` trees from YAML.

This package lives in ``tests/`` and is never shipped with the collection. It
writes a directory tree that looks like what a real Linux kernel exposes under
``/sys`` and ``/proc`` for a machine with PCIe switches, GPUs, RDMA NICs and
SR-IOV virtual functions, so that the topology probe can be pointed at
``ROOT/sys`` (sysfs root) and ``ROOT/proc`` (procfs root). All symlinks are
relative, as the kernel's are, so the tree can be moved or archived.

One module per subsystem, as in ``plugins/module_utils/node/topology/``:
``layouts`` (finding, loading and reading layouts), ``sysfs`` (files, directories
and kernfs-style links), ``numa`` (CPUs, NUMA nodes, ``/proc``), ``pci`` (one
function's files and links), ``pci_walk`` (host bridges, bus numbers,
switches), ``sriov`` (a PF's capability and the one VF writer, which
``tests/support/node_side/fake_sysfs_sriov.py`` uses too), ``netdevs``, ``rdma``, ``gpus``,
``nvme``, ``gpudirect`` (4096-byte config spaces with ACS and Device Control,
IOMMU groups, kernel command line and release, loaded modules: its docstring
lists the layout keys, all off by default); ``builder`` holds what one build
shares and the entry points.

Usage::

    from sysfs_builder import build_tree, load_layout
    root = build_tree(load_layout("dgx-h100"), tmp_path)   # root/sys, root/proc

    python tests/support/node_side/sysfs_builder tests/fixtures/layouts/dgx-h100.yml OUTDIR [--list]

Layout format (YAML mapping; every key optional unless marked)
==============================================================

Integers may be written in hex (``0x10de``). ``addr`` is ``"DD.F"`` in hex
and must be quoted in YAML (``"01.0"``); ``dev:``/``fn:`` work too.

::

    name: dgx-h100                 # used to derive stable ids (UUIDs, GUIDs, MACs)
    description: free text
    cpu:
      vendor: GenuineIntel         # /proc/cpuinfo vendor_id
      model: "Intel(R) Xeon(R) Platinum 8480C"
      threads_per_core: 2          # for core_id / thread_siblings
      possible: "0-223"            # default: 0..max(cpu); sets the cpumask width
    numa:
      node_dir: true               # false: no sys/devices/system/node at all (VMs)
      nodes:                       # REQUIRED (at least one)
        - {id: 0, cpus: "0-55,112-167", memory_kb: 1056000000, package: 0}
      distances: [[10, 21], [21, 10]]   # default: 10 on the diagonal, 21 elsewhere
    nvidia_driver: "570.124.06"    # /proc/driver/nvidia/version
    hostbridges:                   # PCI root complexes, each a pciDDDD:BB directory
      - domain: 0x0000             # 0x10000 and up give 5-hex-digit domains
        bus: 0x15                  # root bus number
        numa_node: 0               # default -1; inherited by everything below
        parent: "LNXSYSTM:00/..."  # optional: path under sys/devices (Hyper-V VMBus)
        link: gen5x16              # optional default link for the functions on the root bus
        files: {name: content}     # optional extra files in the pciDDDD:BB directory
        children: [NODE, ...]
    extra:                         # arbitrary additions, paths relative to ROOT
      files: {"sys/firmware/dmi/id/product_name": "DGXH100"}
      links: {"sys/class/foo/bar": "../../devices/nowhere"}   # may dangle

A ``NODE`` is one of (``type`` selects; default ``endpoint``):

``type: bridge`` (aliases ``rootport``, ``port``): a PCI-PCI bridge
    (class ``0x060400``, driver ``pcieport`` unless ``driver: null``).
    Keys: ``addr``, ``vendor``, ``device``, ``bus`` (secondary bus, default:
    next free one, depth first), ``subordinate`` (reserve buses up to this),
    ``children``, plus every common key below.

``type: switch``: sugar for an upstream port whose secondary bus holds the
    downstream ports. Keys: ``addr``, ``vendor``, ``device``, ``link`` and the
    other common keys (they apply to every port of the switch), ``upstream:
    {overrides}``, ``downstream: [PORT, ...]`` or an integer count. A ``PORT``
    is a bridge mapping (``addr`` defaults to its index, ``children``, any
    override). Switches nest: a downstream port's child may be a switch.

``type: endpoint``: one PCI function, or several with ``functions: [{fn: 0,
    ...}, {fn: 1, ...}]`` (each entry is merged over the parent mapping).
    Keys: ``addr``, ``vendor``, ``device``, ``class`` (REQUIRED), and:

    - ``sriov: {totalvfs, numvfs, offset: 1, stride: 1, vf_device, vf_driver,
      autoprobe: 1, vf_netdev: true, vf_rdma: true}``; VFs are created as
      siblings of the PF with routing ID = PF RID + offset + stride * N (they
      may spill onto following bus numbers, which are then reserved, like the
      kernel's ``pci_iov_bus_range``). VF netdevs are named ``<pf netdev>vN``,
      VF RDMA devices get the next free ``mlx5_N`` style name.
    - ``netdevs: [NAME | {name, type: eth|ib|<int>, address, mtu, speed,
      operstate, dev_port, port, parent}]``. ``name: auto`` gives a systemd
      style name (``ibp29s0``, ``enp27s0f0np0``, ``enP1p0s0``). ``parent:
      virtio0`` puts the netdev under a ``virtio0/`` child device as
      virtio-net does.
    - ``rdma: NAME | {name, node_type, hca_type, fw_ver, node_guid,
      link_layer: InfiniBand|Ethernet|Unknown, rate, state, phys_state, ports:
      N | [{link_layer, rate, state, phys_state, netdev}, ...]}``. One
      ``uverbsN`` per device and one ``umadN`` per port are created.
    - ``gpu: {model, uuid, minor, vbios, irq, excluded}`` (NVIDIA: writes the driver's
      ``/proc/driver/nvidia/gpus/<bdf>/information``) or ``{card, render}``
      (AMD and other DRM drivers: ``drm/cardN`` and ``drm/renderDN``). Implied
      for NVIDIA/AMD display (0x03xxxx) and accelerator (0x12xxxx) classes;
      ``gpu: false`` suppresses it. ``drm: {card, render}`` adds DRM nodes to
      any function (``render: false`` for a BMC VGA).
    - ``nvme: NAME | {name, model, serial, namespaces}`` (implied for class
      0x0108xx; ``nvme: false`` suppresses it).
    - ``hostbridges: [HOSTBRIDGE, ...]``: PCI roots *inside* this function's
      directory (Intel VMD: ``.../0000:00:0e.0/pci10000:e0/10000:e0:06.0``).

Common keys for every function: ``subsystem_vendor``, ``subsystem_device``,
``revision``, ``irq``, ``driver`` (default from a small vendor/class table;
``null`` for unbound; ``driver_dir: false`` leaves the ``driver`` link
dangling), ``numa_node`` (override, ``-1`` allowed), ``link`` (``gen5x16``,
``{speed: "32.0 GT/s PCIe", width: 16}`` or ``null`` for no link files;
default: the link of the port above), ``max_link``, ``in_bus_devices: false``
(keep the function out of ``sys/bus/pci/devices``, as in a real snapshot),
``links: {name: raw relative target}`` (extra symlinks, may dangle, e.g.
``firmware_node``), ``files: {name: content}``.

Each function gets the attribute files a probe reads (``class``, ``vendor``,
``device``, ``subsystem_*``, ``revision``, ``numa_node``, ``local_cpulist``,
``local_cpus``, link speed/width, ``uevent``, ``modalias``, ``irq``,
``enable`` and a 64-byte ``config`` header, or the 4096-byte space of
``gpudirect``'s keys: bridges carry their bus numbers there, and a VF's header
reads 0xffff as vendor/device, as on real hardware),
plus ``subsystem`` and ``driver`` links. Attributes that probes rarely read
are left out, to keep big trees fast. Unknown top-level keys are ignored, so a
layout can keep YAML anchors under ``x-templates``.

Bus numbers are assigned like the kernel's scan: devices on a bus are visited
in devfn order, each bridge takes the next free bus number for its secondary
bus and its subordinate bus is the last one used below it; buses needed by VFs
on a bus are reserved before the bridges on that bus are numbered.
"""

from __future__ import annotations

from .builder import BuildResult, build, build_tree, main
from .layouts import LAYOUT_DIR, LayoutError, Spec, layout_path, load_layout
from .numa import format_cpulist, format_cpumask, parse_cpulist
from .pci import PciFunction

__all__ = [
    "LAYOUT_DIR",
    "BuildResult",
    "LayoutError",
    "PciFunction",
    "Spec",
    "build",
    "build_tree",
    "format_cpulist",
    "format_cpumask",
    "layout_path",
    "load_layout",
    "main",
    "parse_cpulist",
]
