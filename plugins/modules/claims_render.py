# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: claims_render
short_description: Render and validate a site's DeviceClasses and ResourceClaimTemplates for one Kubernetes minor
version_added: 0.1.0
description:
  - Turns a site's claim settings into C(resource.k8s.io/v1) DeviceClasses (for the collection's
    driver and for C(gpu.nvidia.com), C(dra.net) and C(dra.cpu) where the site runs them) and a catalogue
    of ResourceClaimTemplates (aligned GPU+NIC pairs, the same with C(firstAvailable) fallback,
    fractional GPU, GPU+NIC+CPUs on one NUMA node, NIC only, GPU only, VF only, and where the site
    declares rails, GPU+NIC pairs pinned to rails for multi-node jobs, and where its nodes run MIG, MIG
    partitions per profile, alone, with a NIC on the parent GPU's PCIe root, or as prioritized lists).
  - A template that needs a feature gate which is off on the target minor, and which the site does
    not declare on, is left out and named in RV(left_out) with the reason; nothing gated is emitted
    silently. A fractional GPU without consumable capacity becomes a shared ResourceClaim.
  - Every object is validated before it is returned - the official OpenAPI schema of that minor
    (kubernetes-validate, strict), CEL that compiles and passes the device-model checks, and the DRA
    limits. Any problem fails the task and names the object and the field.
  - Runs on the controller and changes nothing; write the objects with M(ansible.builtin.template)
    or apply them with M(kubernetes.core.k8s), as the C(claims) role does.
requirements:
  - cel-expr-python >= 0.1.3 on the controller (CEL of DeviceClasses and requests)
  - kubernetes-validate >= 1.34.0 on the controller, at least the site's Kubernetes minor (schema validation)
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: The module only computes; it behaves the same in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: The module changes nothing.
options:
  site:
    description: Site name, set as the C(aligned.dev/site) label on every object.
    type: str
    required: true
  kubernetes_version:
    description: Target Kubernetes version; its minor (C(1.34) to C(1.37)) selects schema and gates.
    type: str
    required: true
  feature_gates:
    description: DRA feature gates the site turns on or off, overriding the minor's defaults.
    type: dict
    default: {}
  settings:
    description: The site's claim settings (C(aligned_dra_claims)); see docs/claims.md for every key.
    type: dict
    default: {}
  tolerations:
    description:
      - Device taint tolerations (C(resource.k8s.io/v1) DeviceToleration - C(key), C(operator), C(value),
        C(effect), C(tolerationSeconds)) put into every request of every template.
      - Refused, with nothing rendered, when the C(DRADeviceTaints) gate is off for the minor and the site.
    type: list
    elements: dict
    default: []
  rail_rules:
    description:
      - The site's rails - per host, its C(aligned_dra_rails) rule (see docs/devices.md). With at least one rule,
        the rail templates of C(templates.rails) are rendered for the rails the rules declare (C(count), the
        C(subnet) rule's subnets, the C(map) rule's rails); see docs/claims.md.
      - Only for NICs of the collection's driver, which publishes C(dra.aligned.dev/rail); with another
        C(nic_driver) they are left out, and RV(left_out) says why.
    type: dict
    default: {}
  device_options:
    description:
      - The site's device model options (C(aligned_dra_device_options) of its first host, as the plan takes
        them; see docs/devices.md). Only C(split_gpu_driver) changes what is rendered - with the collection's
        driver run split by kind, the C(gpu) DeviceClass selects C(device.driver) equal to that name (kinds
        C(gpu) and C(accelerator)) while C(nic) and C(vf) stay on C(dra.aligned.dev), C(gpu_driver)
        C(dra.aligned.dev) resolves to it, and a C(sharing_config) that names C(dra.aligned.dev) names it.
      - Options the device model refuses (a C(split_gpu_driver) that is no DNS subdomain of at most 63
        characters, lacks C(gpu) or is C(dra.aligned.dev)) fail the task naming the option.
    type: dict
    default: {}
  fractional_burst:
    description:
      - The site's burstable fractional GPUs (C(aligned_dra_fractional_burst)) - C(memory) and C(compute), factors
        of at least 1 (limit = factor x request), and C(name) (default C(fractional-gpu-burst)). Empty - none.
      - Where the minor renders the fractional template (consumable capacity), a template of that name is rendered
        after it with the same request and a GpuConfig (driver C(dra.aligned.dev), or the split GPU driver) whose
        C(sharing.mps.limits) carries C(memory) (factor x C(templates.fractional_gpu.memory); the driver caps it
        at the GPU's memory) and C(compute) (factor x the C(sharing_config)'s MPS C(activeThreadPercentage),
        capped at 100). Where the fractional template is a shared claim, or C(gpu_driver) is not the
        collection's, it is left out and RV(left_out) says why.
      - A factor below 1 or not a number, an unknown key, or a C(compute) factor without an MPS share fails the
        task naming the setting. See docs/claims.md.
    type: dict
    default: {}
  mig:
    description:
      - The site's MIG - per host, its C(aligned_dra_mig) (as the filter C(aligned.dra.mig_settings) gives it; hosts
        with mode C(off) may be left out). Empty - no MIG, nothing of it is rendered.
      - With a host in mode C(static) or C(dynamic), the DeviceClass C(mig.aligned.dev) (every MIG device), one class
        per profile where the GPUs offer several (C(mig-<profile>.aligned.dev)), and the templates of
        C(templates.mig) (C(mig-<profile>), C(mig-<profile>-nic), prioritized lists C(mig-<a>-or-<b>)) are rendered
        for the profiles the hosts' GPUs offer, read from their probed topologies (O(topologies),
        O(topology_files) or O(topology_dir)); see docs/claims.md.
      - Mode C(dynamic) on a minor whose partitionable devices (C(DRAPartitionableDevices)) are off is said as a
        warning of the task, naming the hosts.
    type: dict
    default: {}
  topologies:
    description:
      - The MIG hosts' probed topologies, inline (host to topology). Read for the hosts in O(mig) only; given, the
        files of O(topology_files) and O(topology_dir) are not read.
    type: dict
  topology_files:
    description: The MIG hosts' probed topologies, one JSON file per host (host to path). Read for the hosts in O(mig) only.
    type: dict
  topology_dir:
    description:
      - A directory of C(<host>.json) probed topologies (the topology role's C(<site>/nodes/)), for the hosts in
        O(mig) that O(topology_files) does not name. A host without a file is said in RV(left_out).
    type: path
notes:
  - Delegated to C(localhost) (a local connection without become, with ansible-playbook's own interpreter)
    the module's action runs it in ansible-playbook's process, with the same options, result and messages;
    elsewhere the module runs on the task's host.
"""

EXAMPLES = r"""
- name: Render the claim catalogue of a 1.35 site that enabled consumable capacity
  aligned.dra.claims_render:
    site: ai-west
    kubernetes_version: "1.35"
    feature_gates:
      DRAConsumableCapacity: true
    settings:
      drivers: [dra.aligned.dev, dra.cpu]
      templates:
        pairs: {counts: [1, 2]}
      required: [gpu-nic-pair-1]
  register: rendered

- name: Render for a site whose driver runs split by kind (GPUs under gpu.aligned.dev, for KAI Scheduler)
  aligned.dra.claims_render:
    site: ai-west
    kubernetes_version: "1.36"
    device_options:
      split_gpu_driver: gpu.aligned.dev
  register: rendered

- name: Render with the rail templates of a site of eight rails (nic0 ... nic7)
  aligned.dra.claims_render:
    site: ai-west
    kubernetes_version: "1.36"
    settings:
      templates:
        rails: {counts: [1, 8]}
    rail_rules:
      gpu-a01: {by: netdev_name, pattern: '^nic(\d+)$', count: 8}
  register: rendered

- name: Render the MIG classes and templates of a site whose GPUs run dynamic MIG
  aligned.dra.claims_render:
    site: mig-south
    kubernetes_version: "1.36"
    settings:
      templates:
        mig: {prioritized: [["3g.40gb", "4g.40gb"]]}
    mig: "{{ hostvars | aligned.dra.mig_settings(groups['mig_south']) }}"
    topology_dir: output/mig-south/nodes
  register: rendered

- name: Render a burstable fractional GPU (request 20Gi, limit 40Gi) beside the fractional one
  aligned.dra.claims_render:
    site: ai-west
    kubernetes_version: "1.36"
    settings:
      templates:
        fractional_gpu: {memory: 20Gi}
    fractional_burst: {memory: 2.0}
  register: rendered
"""

RETURN = r"""
objects:
  description: DeviceClasses, ResourceClaimTemplates and shared ResourceClaims, validated for the minor.
  returned: success
  type: list
  elements: dict
left_out:
  description: Templates left out (or replaced) for this minor, each with C(name) and C(reason).
  returned: success
  type: list
  elements: dict
required:
  description: Names of the templates the site marks as required.
  returned: success
  type: list
  elements: str
minor:
  description: The Kubernetes minor rendered for.
  returned: success
  type: str
  sample: "1.36"
rails:
  description: The rails the site's rules declare, V(null) when no host has a rule.
  returned: success
  type: list
  elements: int
  sample: [0, 1, 2, 3, 4, 5, 6, 7]
files:
  description: C({file name, object}) for the GitOps output directory, in a stable order.
  returned: success
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, claims_render


def main():
    module = AnsibleModule(**claims_render.MODULE_SPEC, supports_check_mode=True)
    try:
        result = claims_render.run(module.params)
    except StageError as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
