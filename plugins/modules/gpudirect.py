# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpudirect
short_description: Make GPUDirect RDMA flow on a node's aligned GPU x NIC pairs (PCIe ACS, IOMMU, peer memory)
version_added: 0.1.0
description:
  - Reads the node with the collection's probe (its C(p2p) paths and C(gpudirect) readiness) and changes
    only the parts asked; V(keep) leaves a part as it is.
  - O(acs=disable) clears ACS P2P Request Redirect, Completion Redirect and Egress Control in the ACS
    Control register of exactly the functions that redirect the peer-to-peer traffic of a GPU x physical
    NIC pair at level PIX or PXB. Two bytes are written in place in the function's C(config) file and
    read back; every other bit and byte is left as it was. Refused before any change when a function on or
    below such a function, or a VF of it, is bound to C(vfio-pci) or a vfio variant driver, and while the
    IOMMU translates or its mode is unknown unless O(iommu=passthrough) is asked too (the writes then wait
    for the reboot; the boot-time unit makes them).
  - O(iommu=passthrough) adds C(iommu=pt) and O(iommu_vendor_args) to the kernel command line through a
    GRUB drop-in file and C(update-grub) (a failed C(update-grub) puts the drop-in back); RV(reboot_required)
    while the running kernel lacks them and the IOMMU is not already off or in passthrough. A kernel booted
    with them whose IOMMU groups still translate fails the module.
  - O(peer_memory=auto) loads C(nvidia_peermem) now and at boot where DMA-BUF is not possible;
    O(peer_memory=dma_buf) refuses a node where DMA-BUF is not possible, naming why.
  - See the collection's C(docs/network.md) (GPUDirect RDMA) for what each setting gives up.
requirements:
  - Python >= 3.9 on the node
  - root, to read the 4096-byte PCIe configuration spaces
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
options:
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
    description:
      - Kernel arguments added with C(iommu=pt), for example V(intel_iommu=on) or V(amd_iommu=on); only with
        O(iommu=passthrough).
    type: list
    elements: str
    default: []
  peer_memory:
    description:
      - V(auto) loads C(nvidia_peermem) (now and at boot) only where DMA-BUF is not possible.
      - V(dma_buf) requires DMA-BUF (NVIDIA's open GPU kernel modules and Linux 5.12 or later).
      - V(keep) leaves peer memory alone.
    type: str
    choices: [keep, auto, dma_buf]
    default: keep
  sysfs_root:
    description: Root of the node's sysfs; anything but V(/sys) is a captured or test tree (no module is loaded).
    type: path
    default: /sys
  procfs_root:
    description: Root of procfs (the running kernel's command line).
    type: path
    default: /proc
  modules_load_dir:
    description: Directory read by systemd-modules-load at boot.
    type: path
    default: /etc/modules-load.d
  grub_dir:
    description: GRUB's drop-in directory, sourced by C(update-grub).
    type: path
    default: /etc/default/grub.d
"""

EXAMPLES = r"""
- name: Clear ACS redirect on the aligned pairs, IOMMU in passthrough, peer memory as the node allows
  aligned.dra.gpudirect:
    acs: disable
    iommu: passthrough
    iommu_vendor_args: [intel_iommu=on]
    peer_memory: auto
  register: gpudirect

- name: Reboot into the IOMMU passthrough
  ansible.builtin.reboot:
  when: gpudirect.reboot_required
"""

RETURN = r"""
actions:
  description: What was done (or would be done in check mode).
  returned: always
  type: list
  elements: str
  sample: ["write 0000:17:00.0 ACS Control @0x14e: 0x001d -> 0x0011", "modprobe nvidia_peermem"]
acs:
  description: Every function whose ACS redirect breaks an aligned pair, its register and values.
  returned: always
  type: list
  elements: dict
  sample: [{"function": "0000:17:00.0", "register": "ACS Control @0x14e", "before": 29, "after": 17,
            "pairs": ["0000:18:00.0 x 0000:19:00.0"]}]
reboot_required:
  description: Whether the running kernel lacks the IOMMU arguments (they take effect at the next boot).
  returned: always
  type: bool
reasons:
  description: Why a reboot is required, and what waits for it.
  returned: always
  type: list
  elements: str
disruptive:
  description: Whether the change clears ACS redirect on a live PCIe path or needs a reboot (drain first).
  returned: always
  type: bool
live:
  description: Whether the module worked on the running kernel (C(sysfs_root) is V(/sys)).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.node.network import gpudirect


def command(module: AnsibleModule, name: str, *args: str) -> tuple[int, str]:
    """``NAME ARGS`` through Ansible's command runner: (exit status, stderr)."""
    path = module.get_bin_path(name)
    if path is None:
        return 127, f"{name} is not installed"
    rc, _out, err = module.run_command([path, *args])
    return rc, err.strip()


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "acs": {"type": "str", "choices": list(gpudirect.CHOICES["acs"]), "default": "keep"},
            "iommu": {"type": "str", "choices": list(gpudirect.CHOICES["iommu"]), "default": "keep"},
            "iommu_vendor_args": {"type": "list", "elements": "str", "default": []},
            "peer_memory": {"type": "str", "choices": list(gpudirect.CHOICES["peer_memory"]), "default": "keep"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "procfs_root": {"type": "path", "default": "/proc"},
            "modules_load_dir": {"type": "path", "default": "/etc/modules-load.d"},
            "grub_dir": {"type": "path", "default": gpudirect.GRUB_DIR},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = gpudirect.apply(
            {name: p[name] for name in ("acs", "iommu", "peer_memory", "iommu_vendor_args")},
            sysfs_root=p["sysfs_root"],
            procfs_root=p["procfs_root"],
            modules_load_dir=p["modules_load_dir"],
            grub_dir=p["grub_dir"],
            check_mode=module.check_mode,
            modprobe=lambda name: command(module, "modprobe", name),
            update_grub=lambda: command(module, "update-grub"),
            which=module.get_bin_path,
        )
    except (gpudirect.GpuDirectError, OSError, ValueError) as exc:
        module.fail_json(msg=str(exc))
    for warning in result.pop("warnings"):
        module.warn(warning)
    diff = result.pop("diff")
    for item in result["acs"]:
        item.pop("path", None)
        item.pop("offset", None)
    if result["changed"] and module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
