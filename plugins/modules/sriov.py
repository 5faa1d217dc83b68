# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sriov
short_description: Create SR-IOV virtual functions and set their properties, refusing to destroy VFs in use
version_added: 0.1.0
description:
  - For every entry of O(pfs), finds the physical function (by PCI address, interface name, or
    vendor/device and index) with the collection's topology library, then sets
    C(sriov_drivers_autoprobe), the eswitch mode (devlink), the number of VFs, the PF's MTU and
    each VF's MAC, VLAN and QoS, spoof check, trust, link state and TX rates (netlink on the PF).
  - The kernel only changes a non-zero VF count through 0, which destroys every VF. The module
    does that, but refuses when a VF to be destroyed is in use - its interface is in another
    network namespace, it is bound to vfio-pci or any driver other than its default one, or the
    DRA driver's checkpoint lists it as prepared - unless O(pfs[].force) is set.
  - Counts above C(sriov_totalvfs) and every invalid field are refused before anything changes;
    the message names the field.
  - Idempotent; the diff shows every PF's and VF's settings before and after.
  - With O(sysfs_root) other than V(/sys) (a captured or test tree), netlink and devlink are not
    used, and MTU, VF properties and eswitch mode are reported in warnings as not applied.
requirements:
  - Python >= 3.9 on the node
  - pyroute2 >= 0.9 on the node (VF settings through netlink)
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
  pfs:
    description: The physical functions to configure, each selected in exactly one way.
    type: list
    elements: dict
    required: true
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
  sysfs_root:
    description: Root of the sysfs tree.
    type: path
    default: /sys
  procfs_root:
    description: Root of procfs.
    type: path
    default: /proc
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
  settle_timeout:
    description: Seconds to wait for the kernel to show the VFs after a count is written.
    type: float
    default: 10
"""

EXAMPLES = r"""
- name: Eight VFs on the first ConnectX-7 port, trusted, with fixed MACs for the first two
  aligned.dra.sriov:
    pfs:
      - vendor_id: "0x15b3"
        device_id: "0x1021"
        index: 0
        numvfs: 8
        mtu: 9000
        vf_defaults: {trust: true, spoofchk: false}
        vfs:
          - {index: 0, mac: "02:00:00:00:01:00", vlan: 100}
          - {index: 1, mac: "02:00:00:00:01:01", vlan: 100, qos: 3}

- name: Switchdev mode on a PF selected by interface name
  aligned.dra.sriov:
    pfs:
      - {netdev: enp25s0np0, eswitch_mode: switchdev, numvfs: 16}
"""

RETURN = r"""
pfs:
  description: One entry per PF with what it was, what it is, and what was done.
  returned: always
  type: list
  elements: dict
  sample:
    - selector: PCI address 0000:19:00.0
      pci_address: "0000:19:00.0"
      netdev: enp25s0np0
      totalvfs: 127
      before: {numvfs: 0}
      after: {numvfs: 8}
      actions: ["sriov_numvfs=8"]
      disruptive: true
      changed: true
disruptive:
  description: Whether a VF count or eswitch mode changed (VFs were destroyed or created).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.node.network import sriov


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "pfs": {"type": "list", "elements": "dict", "required": True, "options": sriov.PF_ARGUMENT_SPEC},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "procfs_root": {"type": "path", "default": "/proc"},
            "driver_state_dir": {"type": "path", "default": sriov.DEFAULT_STATE_DIR},
            "vf_drivers": {"type": "list", "elements": "str", "default": []},
            "settle_timeout": {"type": "float", "default": 10},
        },
        supports_check_mode=True,
    )
    p = module.params
    pfs = [{key: value for key, value in pf.items() if value is not None} for pf in p["pfs"]]
    try:
        result = sriov.apply(
            pfs,
            sysfs_root=p["sysfs_root"],
            procfs_root=p["procfs_root"],
            check_mode=module.check_mode,
            driver_state_dir=p["driver_state_dir"],
            settle_timeout=p["settle_timeout"],
            vf_drivers=tuple(p["vf_drivers"]),
        )
    except (sriov.SriovError, OSError) as exc:
        module.fail_json(msg=str(exc))
    for warning in result.pop("warnings"):
        module.warn(warning)
    diff = result.pop("diff")
    if result["changed"] and module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
