# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: network_plan
short_description: What the RDMA, SR-IOV and GPUDirect RDMA settings would change on a node, changing nothing
version_added: 0.2.0
description:
  - Plans the settings of the M(aligned.dra.rdma), M(aligned.dra.sriov) and M(aligned.dra.gpudirect)
    modules on the node in one call, always read-only (the modules in check mode, through the same
    library). The options are the rdma and sriov modules' options under the same names, and the
    gpudirect module's settings under O(gpudirect).
  - With every part of O(gpudirect) V(keep) (the default) GPUDirect RDMA is left out of the plan and
    nothing more is read; otherwise a node whose only change is GPUDirect RDMA (ACS writes, the GRUB
    drop-in, C(nvidia_peermem)) has RV(pending) set.
  - The network stage (C(playbooks/network.yml)) runs it on every node at once and rolls only the
    nodes with RV(pending) set, a batch at a time; a converged site starts no batch.
  - Refusals of the SR-IOV part (VFs in use, counts above C(sriov_totalvfs), a PF that is not there)
    and of the GPUDirect part (a device below an aligned path bound to C(vfio-pci), an IOMMU that
    translates, an ACS state on an aligned path that cannot be read) fail here, before any node
    changes; a GPUDirect refusal names its setting, for example C(gpudirect.acs).
  - When this run's probe already planned the node with exactly these options (M(aligned.dra.topology_info)
    with its C(network_plan) option and C(fact), as the validation play of C(site.yml) and C(network.yml)
    probes), the module's action plugin returns that plan (the same result, warnings, diff or failure)
    without reading the node again. The kept plan is taken by the node's next call of the run,
    whatever its options; any other call reads the node.
requirements:
  - Python >= 3.9 on the node
  - pyroute2 >= 0.9 on the node when O(sysfs_root) is V(/sys)
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Never changes anything, in check mode or not.
    support: full
  diff_mode:
    description: Returns the diff of each part that would change.
    support: full
options:
  netns_mode:
    description:
      - V(shared) - RDMA devices are visible in every network namespace (the kernel default).
      - V(exclusive) - an RDMA device belongs to one network namespace and moves with it; needed to
        hand an RDMA device to exactly one pod.
      - Omit to leave the mode alone.
    type: str
    choices: [shared, exclusive]
  modules:
    description:
      - Kernel modules to load now and at every boot, for example V(ib_core), V(mlx5_ib), V(ib_umad), V(rdma_ucm).
      - An empty list removes the collection's boot-time module file; omit to leave modules alone.
    type: list
    elements: str
  modprobe_dir:
    description: Directory of modprobe configuration files.
    type: path
    default: /etc/modprobe.d
  modules_load_dir:
    description: Directory read by systemd-modules-load at boot.
    type: path
    default: /etc/modules-load.d
  pfs:
    description:
      - The physical functions, as M(aligned.dra.sriov) takes them. Empty leaves SR-IOV out of the plan.
    type: list
    elements: dict
    default: []
    suboptions:
      pci_address:
        description: PCI address of the PF (V(0000:19:00.0)).
        type: str
      netdev:
        description: Network interface name of the PF.
        type: str
      vendor_id:
        description: PCI vendor id (V(0x15b3)); with O(pfs[].device_id) and O(pfs[].index).
        type: str
      device_id:
        description: PCI device id (V(0x1021)).
        type: str
      index:
        description: Which of the PFs with that vendor and device, in PCI address order, from 0.
        type: int
      numvfs:
        description: Number of VFs. Omit to keep the current count.
        type: int
      drivers_autoprobe:
        description: Whether new VFs bind to their driver (C(sriov_drivers_autoprobe)); set before VFs are created.
        type: bool
      eswitch_mode:
        description: Eswitch mode through devlink; a change destroys and recreates the VFs.
        type: str
        choices: [legacy, switchdev]
      mtu:
        description: MTU of the PF's interface.
        type: int
      vf_defaults:
        description: VF properties applied to every VF (keys as in O(pfs[].vfs), without C(index)).
        type: dict
      vfs:
        description:
          - Per-VF properties; each entry needs C(index) and may set C(mac), C(vlan) (0-4095),
            C(qos) (0-7, needs a VLAN), C(spoofchk), C(trust), C(link_state)
            (V(auto), V(enable), V(disable)), C(min_tx_rate) and C(max_tx_rate) (Mbit/s).
        type: list
        elements: dict
      missing:
        description: What to do when this node has no such PF.
        type: str
        choices: [fail, skip]
        default: fail
      force:
        description: Change the VF count even when VFs in use are destroyed.
        type: bool
        default: false
  driver_state_dir:
    description:
      - The DRA driver's state directory; its C(checkpoint.json) lists prepared devices (shape in C(docs/network.md)).
    type: path
    default: /var/lib/aligned-dra
  vf_drivers:
    description: More drivers that count as a VF's default driver (a VF bound to another is in use).
    type: list
    elements: str
    default: []
  sysfs_root:
    description:
      - Root of the sysfs tree. With anything but V(/sys) (a captured tree) the RDMA mode is read from
        the tree's C(module/ib_core/parameters/netns_mode).
    type: path
    default: /sys
  procfs_root:
    description: Root of procfs, used to count network namespaces (and the kernel command line for O(gpudirect)).
    type: path
    default: /proc
  gpudirect:
    description:
      - The settings of M(aligned.dra.gpudirect) (the rdma role's C(aligned_dra_gpudirect)), with the same
        defaults; every part V(keep) leaves GPUDirect RDMA out of the plan.
      - The gpudirect module reads O(modules_load_dir), O(sysfs_root) and O(procfs_root) of this module.
    type: dict
    suboptions:
      acs:
        description: V(disable) clears ACS redirect on the aligned pairs' paths; V(keep) leaves ACS alone.
        type: str
        choices: [keep, disable]
        default: keep
      iommu:
        description: V(passthrough) adds C(iommu=pt) to the kernel command line; V(keep) leaves the IOMMU alone.
        type: str
        choices: [keep, passthrough]
        default: keep
      iommu_vendor_args:
        description: Kernel arguments added with C(iommu=pt); only with O(gpudirect.iommu=passthrough).
        type: list
        elements: str
        default: []
      peer_memory:
        description:
          - V(auto) loads C(nvidia_peermem) only where DMA-BUF is not possible; V(dma_buf) requires DMA-BUF;
            V(keep) leaves peer memory alone.
        type: str
        choices: [keep, auto, dma_buf]
        default: keep
  grub_dir:
    description: GRUB's drop-in directory (O(gpudirect.iommu=passthrough)).
    type: path
    default: /etc/default/grub.d
seealso:
  - module: aligned.dra.rdma
  - module: aligned.dra.sriov
  - module: aligned.dra.gpudirect
"""

EXAMPLES = r"""
- name: Which nodes need a network change
  aligned.dra.network_plan:
    netns_mode: exclusive
    modules: [ib_core, mlx5_ib]
    pfs: [{pci_address: "0000:19:00.0", numvfs: 8}]
    gpudirect: {acs: disable, iommu: passthrough, iommu_vendor_args: [intel_iommu=on]}
  register: network_plan

- name: Roll only those
  ansible.builtin.group_by:
    key: "{{ 'network_pending' if network_plan.pending else 'network_converged' }}"
"""

RETURN = r"""
pending:
  description: Whether anything would change, or the RDMA mode or the IOMMU passthrough waits for a reboot.
  returned: always
  type: bool
disruptive:
  description:
    - Whether the change destroys or creates VFs, moves RDMA devices between namespaces, clears ACS redirect
      or needs a reboot (drain first).
  returned: always
  type: bool
rdma:
  description: M(aligned.dra.rdma)'s check-mode result, without its diff.
  returned: always
  type: dict
sriov:
  description: M(aligned.dra.sriov)'s check-mode result, without its diff; V(null) without O(pfs).
  returned: always
  type: dict
gpudirect:
  description: M(aligned.dra.gpudirect)'s check-mode result, without its diff and warnings.
  returned: when a part of O(gpudirect) is not V(keep)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.node.network import plan


def main() -> None:
    module = AnsibleModule(argument_spec=plan.ARGUMENT_SPEC, supports_check_mode=True)
    try:
        planned = plan.outcome(module.params)
    except plan.PlanError as exc:
        module.fail_json(msg=str(exc))
    for warning in planned["warnings"]:
        module.warn(warning)
    result = planned["result"]
    if module._diff and planned["diffs"]:
        result["diff"] = planned["diffs"]
    module.exit_json(changed=result["pending"], **result)


if __name__ == "__main__":
    main()
