# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: topology_info
short_description: Probe a node's PCIe/NUMA topology for topology-aligned DRA allocation
version_added: 0.1.0
description:
  - Reads sysfs (and procfs for NVIDIA GPU minors) and returns every PCI function of the node
    with its kind, ids, NUMA node, the Kubernetes C(resource.kubernetes.io/pcieRoot) value,
    the bridge chain and PCIe switches above it, link speed and width, network and RDMA
    devices, SR-IOV state and GPU details.
  - Returns the C(nvidia-smi topo -m) level (PIX, PXB, PHB, NODE, SYS) for every
    GPU/accelerator x NIC/RDMA pair, and each GPU's nearest physical NICs.
  - The probe lives in the collection's topology library, which the bundled DRA driver and the
    allocation planner share, so that facts, published ResourceSlices and plans agree.
  - Missing files, unreadable files and dangling symlinks never fail the probe; they leave a
    field V(null) and add an entry to RV(topology.warnings).
  - On the live node (O(sysfs_root) is C(/sys)) it also reads the IPv4 address of each RDMA NIC
    physical function's interface (RV(topology.netdev_addresses)), which the C(subnet) rule of
    C(aligned_dra_rails) needs; sysfs has no addresses, so a captured tree leaves them unknown.
  - On the live node it also reads the bundled driver's record of the NICs it last saw on the host
    (O(rails_record)). A NIC physical function that a pod holds (its interface and, in exclusive RDMA
    mode, its RDMA device moved into the pod) is returned as the driver last saw it, marked
    C(out_of_view), so that the rails of the node's other NICs are read as the driver publishes them.
  - On the live node it also reads each NVIDIA GPU's MIG state (MIG-capable, MIG mode, profiles and
    instances) through NVML where the node's Python has C(nvidia-ml-py), and says why where it cannot
    (O(mig)).
requirements:
  - Python >= 3.9 on the node, standard library only
  - nvidia-ml-py on the node for the MIG state of its NVIDIA GPUs (O(mig)); without it the state is reported as
    not readable
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: The module only reads; it behaves the same in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: The module changes nothing, so there is nothing to diff.
options:
  sysfs_root:
    description:
      - Root of the sysfs tree to read. Point it at a captured tree to probe a snapshot.
    type: path
    default: /sys
  procfs_root:
    description:
      - Root of the procfs tree, used for C(driver/nvidia/gpus/<bdf>/information) and the hostname.
    type: path
    default: /proc
  pci_ids_path:
    description:
      - A C(pci.ids) file used to name vendors and devices.
      - When omitted, the usual locations (C(/usr/share/hwdata/pci.ids), C(/usr/share/misc/pci.ids))
        are tried; names stay V(null) when none exists.
    type: path
  rails_record:
    description:
      - The bundled driver's record of what its rail rules read of each NIC physical function it saw
        on the host (C(<state dir>/rails-nics.json), written by a driver started with C(--rails-file)).
      - Read only on the live node (O(sysfs_root) is C(/sys)). Each NIC physical function that is on the
        PCI bus but out of the host's view, and that the record has as an RDMA NIC, is returned as the
        record has it (kind C(rdma), its interfaces, their recorded IPv4 addresses in
        RV(topology.netdev_addresses)) with C(out_of_view) set to what the host sees now.
      - A missing file (no driver, or one without C(--rails-file)) changes nothing. A file that cannot be
        read or is not the driver's record adds an entry to RV(topology.warnings) and changes nothing;
        it never fails the probe.
      - Set it to the driver's state directory (C(aligned_dra_driver_state_dir)) plus C(/rails-nics.json)
        where that is not the default.
    type: path
    default: /var/lib/aligned-dra/rails-nics.json
  mig:
    description:
      - Read each NVIDIA GPU's MIG state through NVML (C(mig) in RV(topology.devices)). Read only on the live node
        (O(sysfs_root) is C(/sys)); a captured tree's GPUs are not this machine's, so it never asks NVML for them.
      - Needs C(nvidia-ml-py) (module C(pynvml)) in the Python that runs the module, imported only on a node
        with NVIDIA GPUs. Where it is not installed, there is no GPU driver or NVML fails, the entry says so
        and why; it never fails the probe.
      - V(false) leaves the entry out.
    type: bool
    default: true
  fact:
    description:
      - Keep the node's topology in this run's store on the controller and set the fact
        C(aligned_dra_topology) to its counts, warnings and the store file (C(schema_version),
        C(hostname), C(counts), C(warnings), C(file)); RV(topology) is then not returned.
      - The topology role probes this way, so a large site's topologies never pile up in the
        controller's memory. The file lives as long as the C(ansible-playbook) run; the role writes
        each node's topology to C(<output>/<site>/nodes/<node>.json).
      - Handled by the module's action plugin on the controller.
    type: bool
    default: false
  network_plan:
    description:
      - The options of M(aligned.dra.network_plan) (the same names and rules). When given, the probe
        also plans the node's RDMA, SR-IOV and GPUDirect RDMA settings in the same round, read-only, and
        returns RV(network_plan).
      - With O(fact), the plan is kept in this run's store on the controller, and the next
        M(aligned.dra.network_plan) call for the node with exactly these options in the same run returns
        it instead of reading the node a second time (the validation play of C(site.yml) and
        C(network.yml) probes this way). Any other options, or a plan that could not be made here, make
        that call read the node itself.
      - A refused plan (VFs in use, a count above C(sriov_totalvfs), a GPUDirect setting the node refuses)
        never fails the probe; the network stage fails the node with the module's message.
    type: dict
notes:
  - Devices whose sysfs path does not start with C(/sys/devices/pci), whose PCI domain has more
    than four hex digits (Intel VMD) or that sit on Hyper-V's VMBUS get a C(pcie_root) of V(null),
    exactly where Kubernetes publishes no C(resource.kubernetes.io/pcieRoot) attribute.
  - A C(numa_node) of -1 is returned as V(null); a best guess, with the rule used, is in
    C(numa_node_inferred) and never replaces the real value.
seealso:
  - name: nvidia-smi topo -m levels
    description: PIX, PXB, PHB, NODE and SYS have the meaning nvidia-smi gives them.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Probe this node
  aligned.dra.topology_info:
  register: probe

- name: Show the GPUs and their nearest NICs
  ansible.builtin.debug:
    var: probe.topology.nearest_nics

- name: Probe a captured sysfs tree
  aligned.dra.topology_info:
    sysfs_root: /srv/snapshots/node17/sys
    procfs_root: /srv/snapshots/node17/proc
  register: snapshot

- name: Probe a node whose driver keeps its state elsewhere
  aligned.dra.topology_info:
    rails_record: /srv/aligned-dra/state/rails-nics.json

- name: Probe, and keep only a slim fact (aligned_dra_topology) with the topology's file
  aligned.dra.topology_info:
    fact: true
"""

RETURN = r"""
topology:
  description: The node's topology.
  returned: unless O(fact) is true
  type: dict
  contains:
    schema_version:
      description: Version of this structure.
      type: int
      sample: 1
    hostname:
      description: Host name from procfs, V(null) when not readable.
      type: str
    numa_nodes:
      description: NUMA nodes with C(id), C(cpus) (list of CPU ids), C(cpulist), C(distances)
        (SLIT row keyed by node id) and C(memory_kb).
      type: list
      elements: dict
    devices:
      description:
        - One entry per PCI function that is not a bridge.
        - Keys C(pci_address) (lowercase bdf), C(kind) (gpu, accelerator, nic, rdma, nvme, other),
          C(class_id), C(vendor_id), C(device_id), C(subsystem_vendor_id), C(subsystem_device_id),
          C(vendor_name), C(device_name), C(driver), C(numa_node), C(numa_node_inferred)
          ({node, rule}), C(local_cpulist), C(pcie_root), C(host_bridge), C(bridges) (root first),
          C(switches) (upstream ports, root first), C(link), C(netdevs), C(rdma_devices),
          C(sriov) ({totalvfs, numvfs, vfs}), C(physfn), C(gpu) ({minor, uuid, model, card, render_node})
          and C(acs) (as in RV(topology.bridges); V(null) for a VF, whose config space is not read).
        - On the live node, a NIC physical function out of the host's view that the driver's record
          (O(rails_record)) has as an RDMA NIC has C(kind) V(rdma), the recorded C(netdevs) (names only) and
          C(out_of_view), a dict with the C(kind) and the interface names (C(netdevs)) the host sees now
          (usually V(nic) and none while a pod holds it); no other device has C(out_of_view).
        - On the live node with O(mig), each NVIDIA GPU (not a VF) has C(mig), its MIG state as NVML reads it
          (docs/topology.md) with C(readable) V(true), C(mig_capable), C(mig_mode) ({current, pending},
          V(null) when not MIG-capable), C(profiles) (V(null) while MIG mode is off), C(memory_slices) and
          C(instances) (each with its C(profile), C(placement) {start, size}, C(uuid) and compute instances),
          with C(uuid), C(name), C(architecture), C(minor) and C(memory_bytes); or, where NVML could not be
          read, only C(readable) V(false) and C(reason). No other device has C(mig), nor does any device of a
          captured tree.
      type: list
      elements: dict
    bridges:
      description: PCI bridges with their C(role) (root_port, switch_upstream, switch_downstream,
        pci_bridge), whether the kernel listed them in C(bus/pci/devices), and C(acs), their PCIe ACS state
        from the extended config space ({capability, control, redirect}), V(null) when fewer than 4096 bytes
        of C(config) are readable (a probe without root, a capture of one) or the capability list is malformed.
      type: list
      elements: dict
    switches:
      description: PCIe switches, each an upstream port with its downstream ports.
      type: list
      elements: dict
    rdma_devices:
      description: Every RDMA device with its ports, character devices and owning PCI function.
      type: list
      elements: dict
    links:
      description: Level between each GPU/accelerator (outer key) and each NIC/RDMA function (inner key).
      type: dict
      sample: {"0000:1b:00.0": {"0000:1a:00.0": "PIX", "0000:3e:00.0": "NODE"}}
    nearest_nics:
      description: For each GPU, the best level to a physical NIC (not a VF) and the NICs at that level.
      type: dict
      sample: {"0000:1b:00.0": {"level": "PIX", "nics": ["0000:1a:00.0"]}}
    p2p:
      description:
        - For the pairs of RV(topology.links), how peer-to-peer traffic goes by the kernel's rule
          (drivers/pci/p2pdma.c) - C(path) V(direct), V(host_bridge) (no common bridge, or the functions in
          C(redirected_at) redirect) or V(unknown) (the functions in C(unread) have no readable ACS state).
        - A VF has its physical function's entry. docs/gpudirect.md.
      type: dict
      sample: {"0000:1b:00.0": {"0000:1a:00.0": {"path": "direct", "redirected_at": [], "unread": []}}}
    gpudirect:
      description:
        - Whether GPUDirect RDMA can run on the node - C(iommu) ({mode, groups, cmdline}; C(mode) V(off),
          V(passthrough), V(translated) or V(null) when unknown), C(peer_memory) ({nvidia_peermem, dma_buf,
          open_kernel_modules, kernel_release, method}), C(nics) (each physical NIC's C(max_read_request) and
          C(relaxed_ordering)), C(vfio) (functions bound to vfio-pci), C(ready) (V(true), V(false), or V(null)
          when nothing says no but something is unknown) and C(reasons).
        - docs/topology.md and docs/gpudirect.md.
      type: dict
    counts:
      description: Number of devices per kind, plus C(vfs).
      type: dict
    netdev_addresses:
      description:
        - The IPv4 addresses (with their prefix length) of the interfaces of the node's RDMA NIC
          physical functions, read in the module's network namespace; an interface without an IPv4
          address has an empty list. Only the primary address of each interface is read.
        - The interfaces of a NIC read as the driver's record has it (C(out_of_view)) have the addresses the
          record has for them (read by the driver under a C(subnet) rule), else none.
        - V(null) when O(sysfs_root) is not C(/sys), a captured tree, whose addresses are unknown (not absent).
        - The C(subnet) rule of C(aligned_dra_rails) places NICs on rails by these addresses (docs/devices.md).
      type: dict
      sample: {"ibp29s0": ["192.168.128.5/21"], "ibp46s0": []}
    warnings:
      description: What could not be read or looks wrong.
      type: list
      elements: str
network_plan:
  description:
    - The plan for O(network_plan), unless O(fact) is true (then it is kept for M(aligned.dra.network_plan)).
    - C(module_args) (the options with their defaults) and either C(result) (what M(aligned.dra.network_plan)
      returns), C(warnings) and C(diffs), or C(refused) (the message M(aligned.dra.network_plan) fails
      with); or only C(not_planned) (why the plan was left to M(aligned.dra.network_plan)).
  returned: when O(network_plan) is given
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.node.probe import topology_info as probe
from ansible_collections.aligned.dra.plugins.module_utils.node.topology.rail_record import DEFAULT_RECORD

# This machine's sysfs (a test names a tree of its own as the live one), and the module's own name for the
# addresses' reader, as before its work moved to module_utils.
LIVE_SYSFS = probe.LIVE_SYSFS
netdev_addresses = probe.netdev_addresses


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "sysfs_root": {"type": "path", "default": "/sys"},
            "procfs_root": {"type": "path", "default": "/proc"},
            "pci_ids_path": {"type": "path"},
            "rails_record": {"type": "path", "default": DEFAULT_RECORD},
            "mig": {"type": "bool", "default": True},
            "network_plan": {"type": "dict"},
            # taken by the action plugin on the controller; never reaches the node
            "fact": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    try:
        result = probe.run(module.params, live_sysfs=LIVE_SYSFS)
    except probe.ProbeError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
