# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: rdma
short_description: Set the RDMA subsystem's network-namespace mode and the RDMA kernel modules of a node
version_added: 0.1.0
description:
  - Reads the RDMA subsystem's network-namespace mode (C(rdma system show netns)) through RDMA
    netlink and sets it at run time (C(rdma system set netns)) and persistently, as the
    C(ib_core) module option C(netns_mode) in C(/etc/modprobe.d/aligned-dra-rdma.conf).
  - When the kernel cannot change the mode at run time (it refuses while network namespaces
    other than the initial one exist), returns RV(reboot_required=true) and the reason in
    RV(reasons); the persistent setting takes effect at the next boot.
  - Loads the listed kernel modules now and at boot (C(/etc/modules-load.d/aligned-dra-rdma.conf)).
    The options file is written first, so C(ib_core) loaded here already has the wanted mode.
  - See the collection's C(docs/network.md) for what C(shared) and C(exclusive) break.
requirements:
  - Python >= 3.9 on the node
  - pyroute2 >= 0.9 on the node (RDMA and route netlink)
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Predicts RV(reboot_required) from the number of network namespaces.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
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
  sysfs_root:
    description:
      - Root of the sysfs tree. With anything but V(/sys) (a captured tree) nothing is changed at
        run time; the mode is read from the tree's C(module/ib_core/parameters/netns_mode).
    type: path
    default: /sys
  procfs_root:
    description: Root of procfs, used to count network namespaces in check mode.
    type: path
    default: /proc
  modprobe_dir:
    description: Directory of modprobe configuration files.
    type: path
    default: /etc/modprobe.d
  modules_load_dir:
    description: Directory read by systemd-modules-load at boot.
    type: path
    default: /etc/modules-load.d
seealso:
  - name: rdma-system(8)
    description: The iproute2 command this module reimplements over netlink.
    link: https://man7.org/linux/man-pages/man8/rdma-system.8.html
"""

EXAMPLES = r"""
- name: Give every RDMA device to exactly one network namespace (pods)
  aligned.dra.rdma:
    netns_mode: exclusive
    modules: [ib_core, mlx5_ib, ib_umad, rdma_ucm]
  register: rdma

- name: Reboot when the kernel could not switch at run time
  ansible.builtin.reboot:
  when: rdma.reboot_required
"""

RETURN = r"""
netns_mode:
  description: The mode now (C(runtime), V(null) when C(ib_core) is not loaded), where it was read, and the one asked for.
  returned: always
  type: dict
  sample: {"runtime": "exclusive", "source": "netlink", "desired": "exclusive"}
reboot_required:
  description: Whether the wanted mode only takes effect after a reboot.
  returned: always
  type: bool
reasons:
  description: Why a reboot is required, or why the mode was not checked at run time.
  returned: always
  type: list
  elements: str
actions:
  description: What was done (or would be done in check mode).
  returned: always
  type: list
  elements: str
  sample: ["write /etc/modprobe.d/aligned-dra-rdma.conf", "rdma system set netns exclusive"]
disruptive:
  description:
    - Whether the change moves RDMA devices between network namespaces (the mode changes now or needs a
      reboot). Pods lose their RDMA devices, so the node is drained first.
  returned: always
  type: bool
live:
  description: Whether the module worked on the running kernel (C(sysfs_root) is V(/sys)).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.node.network import rdma_config, rdma_netlink


def modprobe(module: AnsibleModule, name: str) -> tuple[int, str]:
    """``modprobe NAME`` through Ansible's command runner: (exit status, stderr)."""
    path = module.get_bin_path("modprobe")
    if path is None:
        return 127, "modprobe is not installed"
    rc, _out, err = module.run_command([path, name])
    return rc, err.strip()


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "netns_mode": {"type": "str", "choices": sorted(rdma_netlink.NETNS_MODES)},
            "modules": {"type": "list", "elements": "str"},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "procfs_root": {"type": "path", "default": "/proc"},
            "modprobe_dir": {"type": "path", "default": "/etc/modprobe.d"},
            "modules_load_dir": {"type": "path", "default": "/etc/modules-load.d"},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = rdma_config.apply(
            {"netns_mode": p["netns_mode"], "modules": p["modules"]},
            sysfs_root=p["sysfs_root"],
            procfs_root=p["procfs_root"],
            modprobe_dir=p["modprobe_dir"],
            modules_load_dir=p["modules_load_dir"],
            check_mode=module.check_mode,
            modprobe=lambda name: modprobe(module, name),
        )
    except (rdma_config.RdmaConfigError, OSError) as exc:
        module.fail_json(msg=str(exc))
    for warning in result.pop("warnings"):
        module.warn(warning)
    diff = result.pop("diff")
    if result["changed"] and module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
