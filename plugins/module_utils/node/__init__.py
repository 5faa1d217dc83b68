# SPDX-License-Identifier: Apache-2.0
"""Node side: code that runs on the managed nodes, under Python >= 3.9, standard library first.

Modules ship these parts to nodes through AnsiballZ (only the files a module imports), the
network roles copy ``network`` and ``topology`` for their boot-time units, and the driver wheel
vendors ``topology`` and ``mig``. Nothing here imports the controller side.

- ``topology``: the probe of PCIe, NUMA, GPUs, NICs and RDMA devices (also read by the driver
  and the planner: one source of truth);
- ``network``: RDMA mode and kernel modules, SR-IOV VFs, links (netlink), the boot-time re-apply;
- ``snapshots``: capturing what the probe reads, and the archives that carry it;
- ``probe``: the ``topology_info`` module's run (the probe, and what only the live node adds: addresses,
  the driver's NIC record, each NVIDIA GPU's MIG state);
- ``mig``: MIG on a node: a GPU's MIG state read from NVML, placements for wanted instances, mig-parted
  layouts and their apply (the ``mig`` module and the driver).
"""
