# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: teams_render
short_description: Render and check a site's team namespaces, device quotas, priority classes and admin access
version_added: 0.1.0
description:
  - Turns a site's team settings into Namespaces, ResourceQuotas on the DRA resource names
    (C(<class>.deviceclass.resource.k8s.io/devices), and C(requests.<name>) where a class has an
    extended-resource name), PriorityClasses per tier, copies of the claim templates each team may
    use in its namespaces (annotated with the team's priority class), and, for teams with admin
    access, C(adminAccess) templates in namespaces labelled C(resource.kubernetes.io/admin-access).
  - The site's DeviceClasses and claim templates are rendered with the same code as
    M(aligned.dra.claims_render), so quotas and template names are checked against what the site
    really has. A quota that names a class the site does not have is refused.
  - The guaranteed quotas per class (teams of tiers marked guaranteed, times their namespaces) are
    compared with the devices each class selects on the site, from the planner's C(plan.json).
    Above capacity is reported as oversubscribed and allowed only up to the factor the site sets
    in C(oversubscription); beyond that the task fails.
  - With engine C(kai), the teams become KAI Scheduler queues - a parent Queue per site and per department,
    a leaf Queue per team with its guaranteed GPUs as quota, its borrowing limit, over-quota weight and
    tier priority - and a ValidatingAdmissionPolicy per site keeps each team's namespaces to the team's
    queue. Quotas on classes KAI does not count as GPUs stay ResourceQuotas. What KAI would miscount (a
    GPU driver or class whose name lacks C(gpu), NICs under the GPU driver, GPUs asked for through
    C(firstAvailable)) is refused, naming the template or setting.
  - Every object is validated for the minor (official schema, strict) before it is returned; Kueue's and
    KAI Scheduler's objects against their own CRDs.
  - Writes C(dest) (the teams summary the site report reads) only when it changes.
requirements:
  - cel-expr-python >= 0.1.3 on the controller
  - kubernetes-validate >= 1.34.0 on the controller, at least the site's Kubernetes minor (schema validation)
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode O(dest) is compared, not written.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: The diff shows the old and new content of O(dest).
options:
  site:
    description: Site name, set as the C(aligned.dev/site) label on every object.
    type: str
    required: true
  kubernetes_version:
    description: Target Kubernetes version; its minor (C(1.34) to C(1.37)) selects the schema.
    type: str
    required: true
  feature_gates:
    description: DRA feature gates the site turns on or off, overriding the minor's defaults.
    type: dict
    default: {}
  claims_settings:
    description: The site's claim settings (C(aligned_dra_claims)), which give its DeviceClasses and templates.
    type: dict
    default: {}
  rail_rules:
    description:
      - Each host's rail rule (host to C(aligned_dra_rails)), as M(aligned.dra.claims_render) takes it, so a
        team can name the rail templates (C(gpu-nic-rail-<r>)) the site renders.
    type: dict
    default: {}
  device_options:
    description:
      - The site's device model options (C(aligned_dra_device_options) of its first host), as
        M(aligned.dra.claims_render) takes them. With C(split_gpu_driver) the collection's GPUs are published
        under that name - the one KAI counts (C(gpu_driver) C(dra.aligned.dev) resolves to it) - and the
        C(gpu) DeviceClass selects it; see docs/kai.md.
    type: dict
    default: {}
  fractional_burst:
    description:
      - The site's burstable fractional GPUs (C(aligned_dra_fractional_burst)), as M(aligned.dra.claims_render)
        takes them, so a team can name the burstable template; see docs/thin-provisioning.md.
    type: dict
    default: {}
  settings:
    description: The site's team settings (C(aligned_dra_teams)); see docs/teams.md for every key.
    type: dict
    default: {}
  placement_levels:
    description:
      - The site's placement levels (C(aligned_dra_placement_levels)), widest first, each a C(name) and the
        node C(label) that carries it, or in the forms read from the cluster (a level with a C(source), or a
        C(preset) mapping; the Topology then lists the keys the cluster's nodes carry).
      - With engine C(kueue) or C(both) and at least one level, a Kueue C(Topology) named C(<site>-topology)
        is rendered with the level labels and C(kubernetes.io/hostname) last, and every ResourceFlavor names
        it in C(topologyName); without node groups the site's flavor then selects the label
        C(aligned.dev/site=<site>), which the placement stage puts on every node of a site with levels.
      - Kueue's Topology Aware Scheduling does not count DRA devices when it picks a domain (Kueue v0.19.2);
        C(kueue.notes) says so.
      - With engine C(kai) and at least one level, a KAI C(Topology) named C(<site>-topology) lists the level
        labels and C(kubernetes.io/hostname) last.
    type: raw
    default: []
  plan_file:
    description:
      - The site's C(plan.json) from M(aligned.dra.plan); its C(classes) give the capacity per class.
      - When it does not exist the capacity is unknown and the quotas are not compared.
    type: path
  utilization_file:
    description:
      - The site's C(utilization.json) from M(aligned.dra.utilization) of this run; its C(teams) give the
        devices each team holds now.
      - With engine C(kueue) or C(both), each team's queue row then says what it has idle and could lend.
      - With engine C(kai), the fair-share what-if takes the GPUs each team holds now as its allocation.
      - When it does not exist the idle devices are unknown.
    type: path
  dest:
    description: Where to write the teams summary (C(<site>/teams.json)); omitted, nothing is written.
    type: path
  mig:
    description:
      - The site's MIG - per host, its C(aligned_dra_mig) (as the filter C(aligned.dra.mig_settings) gives it). Empty -
        no MIG, and nothing of the output changes.
      - With hosts in mode C(static) or C(dynamic), the site's MIG classes are rendered as M(aligned.dra.claims_render)
        renders them, so teams may name them and their templates, and C(teams.json) gets C(mig) (hosts by mode, MIG
        classes, the MIG capacity from the controller's MIG model - GPUs, GPU memory, per profile, C(bound) where a
        figure is the driver's counter bound or the geometry NVIDIA documents - and the MIG devices published per host).
      - With engine C(kueue) or C(both), a quota given as GPU memory on the class of every MIG device (C(quotas.mig 80Gi))
        maps every MIG class to one logical resource (C(aligned.dev/mig-memory)) with a C(counter) source on the
        driver's C(memory) counter; the nominal quotas in cohort are checked against the site's MIG memory. Refused,
        naming the setting - hosts in mode C(static) (their instances publish no counters), a minor whose
        C(DRAPartitionableDevices) gate is off, memory on a per-profile MIG class.
        C(KueueDRAIntegrationPartitionableDevices) is turned on in the Configuration fragment and named in a
        warning where the site's Kueue (C(aligned_dra_teams.kueue.version)) has it off.
      - With engine C(kai), GPU memory on a MIG class, and any quota on or template of a MIG class whose name
        contains C(gpu), are refused (KAI counts each MIG device as one whole GPU); the stage warns how many devices
        KAI counts as GPUs on the MIG hosts.
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
        O(mig) that O(topology_files) does not name. A host without one makes the site's MIG capacity unknown.
    type: path
notes:
  - Delegated to C(localhost) (a local connection without become, with ansible-playbook's own interpreter)
    the module's action runs it in ansible-playbook's process, with the same options, result and messages;
    elsewhere the module runs on the task's host.
"""

EXAMPLES = r"""
- name: Teams of a site, checked against the capacity the planner found
  aligned.dra.teams_render:
    site: ai-west
    kubernetes_version: "1.36"
    claims_settings:
      templates:
        pairs: {counts: [1, 2]}
    settings:
      oversubscription: {gpu: 1.5}
      teams:
        - name: vision
          namespaces: [vision-train]
          tier: production
          templates: [gpu-nic-pair-1, gpu-nic-pair-2]
          quotas: {gpu: 8, nic: 8}
        - name: monitoring
          tier: opportunistic
          admin_access: true
    plan_file: output/ai-west/plan.json
    dest: output/ai-west/teams.json
  register: teams
"""

RETURN = r"""
objects:
  description:
    - PriorityClasses, Namespaces, ResourceQuotas and ResourceClaimTemplates, validated for the minor, and with
      engine C(kueue) or C(both) Kueue's objects (a C(Topology) with O(placement_levels)), validated against
      Kueue's CRDs; with engine C(kai) KAI Scheduler's Queues (and C(Topology)), validated against KAI's CRDs,
      and the admission policy with its binding.
  returned: success
  type: list
  elements: dict
files:
  description: C({name, object}) for the GitOps output directory, in a stable order.
  returned: success
  type: list
  elements: dict
capacity:
  description:
    - Per DeviceClass with a quota - C(class), C(capacity) (null without a plan), C(guaranteed),
      C(opportunistic), C(factor), C(ratio), C(status) (ok, oversubscribed, over_limit, unknown), C(teams).
  returned: success
  type: list
  elements: dict
teams:
  description: Per team - C(name), C(namespaces), C(tier), C(priority_class), C(quotas), C(templates), C(admin_access).
  returned: success
  type: list
  elements: dict
minor:
  description: The Kubernetes minor rendered for.
  returned: success
  type: str
engine:
  description: The quota engine of the site - C(resourcequota), C(kueue), C(both) or C(kai).
  returned: success
  type: str
kueue:
  description:
    - With engine C(kueue) or C(both) - C(configuration) (the Kueue manager Configuration fragment with
      the feature gates and C(deviceClassMappings)), C(teams) (per team its ClusterQueue, cohort, and
      nominal, borrowable, lendable and idle devices per class), C(mappings) (per DeviceClass its
      logical resource and unit, devices, capacity or counter - GPU memory of MIG devices), C(capacity) (the cohort's nominal quotas
      against the plan's devices), C(notes) (what works differently than with ResourceQuotas) and
      C(what_if) (the outcome of the site's what-if workloads); null with engine C(resourcequota).
  returned: success
  type: dict
mig:
  description:
    - Only where O(mig) has hosts running MIG - C(hosts) (C(static), C(dynamic)), C(unprobed), C(classes) (the MIG
      DeviceClasses, each with its profile or null for every MIG device), C(capacity) (C(gpus), C(memory_bytes),
      C(memory), C(by_profile), C(sources), C(bound); null figures where a host is unprobed, with C(reason)) and
      C(published) (per host its MIG GPUs and the MIG devices the driver publishes for them).
  returned: when hosts run MIG
  type: dict
shared:
  description:
    - Only where O(mig) has hosts running MIG - one GPU counted once (docs/teams.md "One GPU counted once") -
      C(sets) (the MIG GPUs by how they are given - C(shared) whole or as partitions, C(partitions) only - with
      what Kueue charges per GPU at most), C(holders) (per guaranteed quota its team, class, kind, amount and the
      GPUs it takes at least), C(needed), C(capacity), C(free), C(factor), C(status) (ok, oversubscribed,
      over_limit, unknown without a plan) and C(counted_as) (how a quota becomes GPUs - a lower bound).
  returned: when hosts run MIG
  type: dict
kai:
  description:
    - With engine C(kai) - C(scheduler_name), C(queue_label) (the label pods name their queue in),
      C(parent_queue), C(gpu_classes) (the classes KAI counts as GPUs), C(queues) (per queue its parent,
      priority, GPU quota, limit and over-quota weight; teams also C(team)), C(notes) and C(what_if) (the
      fair share KAI would give each queue for C(kai.what_if)'s demand, what each gets beyond its quota and
      the reclaim order); null with the other engines.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, teams_render


def main():
    module = AnsibleModule(**teams_render.MODULE_SPEC, supports_check_mode=True)
    try:
        result = teams_render.run(module.params, module.check_mode, module._diff)
    except StageError as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
