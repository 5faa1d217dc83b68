# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: network_plan
short_description: What the RDMA and SR-IOV settings would change on a node, changing nothing
version_added: 0.2.0
description:
  - Plans the settings of the M(aligned.dra.rdma) and M(aligned.dra.sriov) modules on the node in one
    call, always read-only (both modules in check mode, through the same library).
  - The network stage (C(playbooks/network.yml)) runs it on every node at once and rolls only the
    nodes with RV(pending) set, a batch at a time; a converged site starts no batch.
  - Refusals of the SR-IOV part (VFs in use, counts above C(sriov_totalvfs), a PF that is not there)
    fail here, before any node changes.
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
    description: Returns the diffs of both parts when something would change.
    support: full
options:
  rdma:
    description:
      - The RDMA settings (M(aligned.dra.rdma)'s options C(netns_mode), C(modules), C(modprobe_dir),
        C(modules_load_dir)). Omit to leave RDMA out of the plan.
    type: dict
  sriov:
    description:
      - The SR-IOV settings (M(aligned.dra.sriov)'s options C(pfs), C(driver_state_dir), C(vf_drivers)).
        Omit, or give no PFs, to leave SR-IOV out of the plan.
    type: dict
  sysfs_root:
    description: Root of the sysfs tree.
    type: path
    default: /sys
  procfs_root:
    description: Root of procfs.
    type: path
    default: /proc
seealso:
  - module: aligned.dra.rdma
  - module: aligned.dra.sriov
"""

EXAMPLES = r"""
- name: Which nodes need a network change
  aligned.dra.network_plan:
    rdma: {netns_mode: exclusive, modules: [ib_core, mlx5_ib]}
    sriov:
      pfs: [{pci_address: "0000:19:00.0", numvfs: 8}]
  register: network_plan

- name: Roll only those
  ansible.builtin.group_by:
    key: "{{ 'network_pending' if network_plan.pending else 'network_converged' }}"
"""

RETURN = r"""
pending:
  description: Whether anything would change, or the RDMA mode waits for a reboot.
  returned: always
  type: bool
disruptive:
  description: Whether the change destroys or creates VFs or moves RDMA devices between namespaces (drain first).
  returned: always
  type: bool
rdma:
  description: M(aligned.dra.rdma)'s check-mode result, without its diff; V(null) when O(rdma) is omitted.
  returned: always
  type: dict
sriov:
  description: M(aligned.dra.sriov)'s check-mode result, without its diff; V(null) without PFs.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils import netconf, rdma_config, sriov

# netns_mode: null leaves the mode alone (the rdma role's default), so no
# choices here; the library refuses any other value, naming the field.
RDMA_OPTIONS = {
    "netns_mode": {"type": "str"},
    "modules": {"type": "list", "elements": "str"},
    "modprobe_dir": {"type": "path", "default": "/etc/modprobe.d"},
    "modules_load_dir": {"type": "path", "default": "/etc/modules-load.d"},
}
SRIOV_OPTIONS = {
    "pfs": {"type": "list", "elements": "dict", "default": [], "options": sriov.PF_ARGUMENT_SPEC},
    "driver_state_dir": {"type": "path", "default": sriov.DEFAULT_STATE_DIR},
    "vf_drivers": {"type": "list", "elements": "str", "default": []},
}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "rdma": {"type": "dict", "options": RDMA_OPTIONS},
            "sriov": {"type": "dict", "options": SRIOV_OPTIONS},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "procfs_root": {"type": "path", "default": "/proc"},
        },
        supports_check_mode=True,
    )
    p = module.params
    roots = {"sysfs_root": p["sysfs_root"], "procfs_root": p["procfs_root"]}
    rdma_state = dict(p["rdma"], **roots) if p["rdma"] is not None else None
    sriov_state = None
    if p["sriov"] is not None:
        pfs = [{key: value for key, value in pf.items() if value is not None} for pf in p["sriov"]["pfs"]]
        sriov_state = dict(p["sriov"], pfs=pfs, **roots)
    try:
        result = netconf.plan(rdma_state, sriov_state)
    except (rdma_config.RdmaConfigError, sriov.SriovError, OSError) as exc:
        module.fail_json(msg=str(exc))
    diffs = []
    for part in ("rdma", "sriov"):
        if result[part] is None:
            continue
        for warning in result[part].pop("warnings", []):
            module.warn(warning)
        diff = result[part].pop("diff", None)
        if result[part]["changed"] and diff:
            diffs.append(dict(diff, before_header=f"{part} now", after_header=f"{part} wanted"))
    if module._diff and diffs:
        result["diff"] = diffs
    module.exit_json(changed=result["pending"], **result)


if __name__ == "__main__":
    main()
