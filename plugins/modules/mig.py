# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: mig
short_description: Apply a MIG layout (mig-parted's mig-configs) to a node's GPUs through NVML
version_added: 0.2.0
description:
  - Reads the node's NVIDIA GPUs through NVML (C(nvidia-ml-py)), selects those of O(gpus) (every MIG-capable GPU
    by default), and makes each one what O(mode) asks.
  - V(static) applies the config O(layout) of O(mig_configs), NVIDIA mig-parted's C(mig-configs) format
    (C(devices), C(mig-enabled), C(mig-devices), C(device-filter)), so an existing layout file works as it is.
    Existing instances of the same profile and placement are kept; the others are destroyed (compute instances,
    then GPU instances), and the missing ones created at placements NVML offers, each with the compute instance
    that spans it.
  - V(dynamic) turns MIG mode on and leaves the instances to the DRA driver, which makes them at Prepare.
    V(off) changes nothing and reports each GPU's MIG state.
  - MIG mode changes at once on Hopper and newer while the GPU is idle. Ampere needs a GPU reset, run with
    O(reset_command) only when O(drained) is true and no process runs on the GPU; otherwise that GPU is left as
    it is and reported with C(reboot_required). Where the reset fails, NVML's pending mode is set, so a reboot
    applies it.
  - Refused before anything changes, with a message naming the input or the GPU - an instance to destroy that
    runs a process (the GPU, the instance and the PIDs), a profile the GPU does not have, counts that do not fit
    it, an unknown O(layout), a malformed config.
  - Idempotent; check mode plans, and a GPU whose MIG mode is still off shows its instances without placements
    (NVML names a GPU's profiles only with MIG mode on). The diff shows each changed GPU before and after.
requirements:
  - Python >= 3.9 on the node
  - nvidia-ml-py on the node (module C(pynvml)) and the NVIDIA GPU driver
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
  mode:
    description: V(off) reports only; V(static) applies O(layout); V(dynamic) turns MIG mode on for the driver.
    type: str
    choices: ["off", static, dynamic]
    default: "off"
  gpus:
    description:
      - "Which GPUs, by any of C(pci_addresses) (list, V(0000:18:00.0)), C(device_ids) (list of PCI device IDs,
        V(0x20b0)), C(models) (list of globs on NVML's name, V(NVIDIA A100*)) and C(indices) (list of the GPUs'
        indices in PCI address order, from 0, as mig-parted's C(devices)). A GPU must match every key given;
        empty - every MIG-capable GPU. An address or index of no GPU, or of one without MIG, fails."
    type: dict
    default: {}
  mig_configs:
    description:
      - "mig-parted's C(mig-configs) value, C({name: [{devices, mig-enabled, mig-devices, device-filter}]}),
        or a whole mig-parted file (C(version: v1) and C(mig-configs)). Required with V(static)."
    type: dict
  layout:
    description: The name of the config of O(mig_configs) to apply; required with V(static).
    type: str
  drained:
    description: The node is drained, so an Ampere GPU without processes may be reset for its MIG mode.
    type: bool
    default: false
  reset_command:
    description: The GPU reset, C({pci_address}) replaced by the GPU's address.
    type: list
    elements: str
    default: ["nvidia-smi", "--gpu-reset", "-i", "{pci_address}"]
  sysfs_root:
    description: Root of the sysfs tree (the node's; kept for the role's common arguments).
    type: path
    default: /sys
  procfs_root:
    description: Root of procfs, where the names of the processes a refusal shows are read.
    type: path
    default: /proc
"""

EXAMPLES = r"""
- name: Every A100 and H100 of the node balanced, from mig-parted's own layout file
  aligned.dra.mig:
    mode: static
    mig_configs: "{{ lookup('ansible.builtin.file', 'mig-config.yaml') | from_yaml }}"
    layout: all-balanced
    drained: true

- name: Seven 1g.10gb instances on the H100s only
  aligned.dra.mig:
    mode: static
    gpus: {device_ids: ["0x2330"]}
    mig_configs:
      all-1g.10gb:
        - {devices: all, mig-enabled: true, mig-devices: {"1g.10gb": 7}}
    layout: all-1g.10gb

- name: The MIG state of every GPU, nothing changed
  aligned.dra.mig:
    mode: "off"
  register: mig_state
"""

RETURN = r"""
gpus:
  description: One entry per selected GPU - what it was, what was (or would be) done, and what it is.
  returned: always
  type: list
  elements: dict
  sample:
    - pci_address: "0000:18:00.0"
      index: 0
      name: NVIDIA A100-SXM4-40GB
      architecture: ampere
      layout_entry: mig_configs.all-balanced[0]
      mig_mode: null
      destroy: []
      create:
        - {profile: 3g.20gb, profile_id: 9, placement: {start: 4, size: 4}}
      before: []
      after:
        - {gpu_instance: 2, profile: 3g.20gb, placement: {start: 4, size: 4}, uuid: MIG-5c1b0f4e-…, processes: []}
      reset: false
      reboot_required: false
      blocked: null
      changed: true
reboot_required:
  description: Whether a GPU still needs a reset or a reboot for its MIG mode (it was left as it is).
  returned: always
  type: bool
mode:
  description: The mode applied.
  returned: always
  type: str
layout:
  description: The config applied (V(static)), else null.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.node.mig import apply, layout


def load_pynvml():
    """The real ``pynvml`` (package ``nvidia-ml-py``); ImportError where it is not installed."""
    import pynvml

    return pynvml


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "mode": {"type": "str", "choices": list(apply.MODES), "default": "off"},
            "gpus": {"type": "dict", "default": {}},
            "mig_configs": {"type": "dict"},
            "layout": {"type": "str"},
            "drained": {"type": "bool", "default": False},
            "reset_command": {"type": "list", "elements": "str", "default": list(apply.DEFAULT_RESET_COMMAND)},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "procfs_root": {"type": "path", "default": "/proc"},
        },
        supports_check_mode=True,
    )
    params = dict(module.params)
    try:
        nvml = load_pynvml()
    except ImportError:
        module.fail_json(msg="nvidia-ml-py (module pynvml) is not installed on this node; install it to manage MIG")
    try:
        result = apply.run(nvml, params, module.check_mode, module.run_command)
    except (apply.MigError, layout.LayoutError) as exc:
        module.fail_json(msg=str(exc))
    for warning in result.pop("warnings"):
        module.warn(warning)
    diff = result.pop("diff")
    if result["changed"] and module._diff:
        result["diff"] = diff
    module.exit_json(**result)


if __name__ == "__main__":
    main()
