# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: plan
short_description: Prove that DRA claim templates allocate, and how well aligned, on a site's devices
version_added: 0.1.0
description:
  - Simulates kube-scheduler's structured-parameters allocation of every claim template on every node
    of a site and reports how many claims fit at once, which devices each gets, the worst GPU-NIC
    level inside each allocation, and every selector that fails to evaluate (which aborts allocation).
  - The devices come from probed topologies, computed with the same library the bundled driver
    uses, or from ResourceSlices (any driver) read from a cluster or from files.
  - Plan the same templates on another site's topologies, or on fixture trees of nodes not bought
    yet, to answer "what if".
  - Runs on the controller; needs the Python package C(cel-expr-python).
requirements:
  - cel-expr-python >= 0.1.3 on the controller (the selectors are evaluated)
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode the plan is computed and O(dest) is compared, not written.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: The diff shows the old and new content of O(dest).
options:
  site:
    description: Name of the site, copied into the plan.
    type: str
    required: true
  kubernetes_version:
    description:
      - Kubernetes minor the objects were rendered for (C(1.34) to C(1.37)).
      - With O(feature_gates) it says whether the GPUs of probed topologies are shareable, as the bundled
        driver publishes them where the cluster serves consumable capacity (C(DRAConsumableCapacity), on from
        1.36) - C(allowMultipleAllocations) with C(memory) and C(compute) capacities; without it they are not.
    type: str
  feature_gates:
    description:
      - The site's declared feature gates (C(aligned_dra_feature_gates)), over the minor's defaults; only
        C(DRAConsumableCapacity) matters here (shareable GPUs, see O(kubernetes_version)).
    type: dict
    default: {}
  objects:
    description:
      - DeviceClasses and ResourceClaimTemplates (and shared ResourceClaims) to plan, as rendered by
        M(aligned.dra.claims_render). Other kinds are ignored.
    type: list
    elements: dict
    required: true
  required:
    description: Names of templates that must be satisfiable somewhere on the site.
    type: list
    elements: str
    default: []
  topologies:
    description: Probed topologies (the C(topology) of M(aligned.dra.topology_info)) keyed by node name.
    type: dict
  topology_dir:
    description:
      - Directory of C(<node>.json) topology files, as the C(topology) role writes them.
      - Every C(*.json) of it is a node of the site, so a node taken out of the inventory must have
        its file removed; O(topology_files) names the nodes instead.
      - Used when neither O(topologies) nor O(topology_files) is given; with O(slices) or
        O(slice_files) it only adds the GPU-NIC levels.
    type: path
  topology_files:
    description:
      - Per node of the site, the JSON file of its topology, such as the file the probe's fact
        C(aligned_dra_topology.file) names, or C(<output>/<site>/nodes/<node>.json).
      - Only these nodes are planned on, and each file is read and turned into the node's devices
        one node at a time, so the plan of a site of thousands of nodes never holds every topology
        at once. The claims role plans this way.
    type: dict
  slices:
    description: ResourceSlices to plan on instead of the devices computed from topologies.
    type: list
    elements: dict
  slice_files:
    description: YAML or JSON files of ResourceSlices (or lists of them) to plan on.
    type: list
    elements: path
  device_options:
    description:
      - Options of the device model (which kinds are published, C(exclude) patterns); see docs/devices.md.
      - Planning on topologies, C(split_gpu_driver) publishes the GPUs and accelerators under that driver name
        (the NICs and VFs stay C(dra.aligned.dev)), as the driver run split by kind does; the plan's C(gpu_counts)
        then shows KAI Scheduler counting them.
    type: dict
    default: {}
  rail_rules:
    description:
      - The site's rails - per planned node (inventory host), its C(aligned_dra_rails) rule (see docs/devices.md).
      - Planning on topologies, the NICs get C(dra.aligned.dev/rail) under the rule, as the driver publishes it;
        planning on slices, the rule gives the rail of other drivers' NICs joined to the probe, and a rail the
        bundled driver publishes that the rule disagrees with is named in the plan's C(warnings) (the published one is
        planned).
      - The rule's problems on a node (a missing rail of C(count), a rail on two NICs) are warnings here; the
        validation stage refuses them.
    type: dict
    default: {}
  rail_rule:
    description:
      - One C(aligned_dra_rails) rule for every planned node that O(rail_rules) does not name (C(what_if.yml)
        plans a site's rule on other nodes this way).
    type: dict
  rail_node_names:
    description: Per planned node, its Kubernetes node name where it differs (the C(map) rule's C(nodes) are keyed by it).
    type: dict
    default: {}
  rail_addresses:
    description:
      - Per planned node, its interfaces' IPv4 addresses (interface to a list of C(a.b.c.d/len)), which the
        C(subnet) rule reads. Default, the topology's C(netdev_addresses), which the probe reads on the live
        node; without addresses a C(subnet) rule places no NIC (their rails stay unknown, and a warning says why).
    type: dict
    default: {}
  mig:
    description:
      - Per planned node (inventory host), its C(aligned_dra_mig) (see docs/mig.md), as the filter
        C(aligned.dra.mig_settings) builds it; a node not named, or with mode C(off), has no MIG.
      - Planning on topologies, the GPUs MIG takes are published as the bundled driver publishes them - a dynamic
        GPU's every placement of every profile in the driver's order, then the GPU whole, with the GPU's counter set
        (the scheduler's first fit and KEP-4815's counters are planned); a static GPU's layout instances, packed as
        the node packs them (or those the probe read). Such a GPU is never shareable.
      - Profiles come from NVML where the probe read them, else from the geometry NVIDIA documents for the GPU's
        PCI device ID (marked C(documented) in the plan; memory sizes may differ by GPU driver).
      - The plan gets a C(mig) section (only where some node has MIG) - per node, GPU and template the claims that
        fit alone and as the site's catalogue mix, and the layout that gives it. Planning on O(slices), the
        devices are the slices' and the topologies name the GPUs.
    type: dict
    default: {}
  dest:
    description: Write the plan as JSON to this file (only when its content changes).
    type: path
  return_plan:
    description:
      - V(full) returns the whole plan as RV(plan).
      - V(summary) returns it without each template's per-node entries (C(templates[].nodes)), which grow
        with the site (tens of MiB at a thousand nodes); O(dest) still gets the whole plan, so it is
        required. The claims role returns the summary.
    type: str
    choices: [full, summary]
    default: full
  fail_on_unsatisfied:
    description: Fail when a template listed in O(required) cannot be satisfied.
    type: bool
    default: true
  nodes_failed:
    description:
      - The site's nodes that failed or were unreachable in this run, as the topology role's C(summary.json)
        lists them (node to C(state), C(stage), C(task), C(error), C(stale_facts)); copied into the plan.
      - Their files in O(topology_dir), left by an earlier run, are never read.
    type: dict
    default: {}
  node_counts:
    description:
      - Nodes of the site that are C(ok), C(failed) and C(unreachable), copied into the plan.
      - Default, the planned nodes are ok and O(nodes_failed) gives the others.
    type: dict
notes:
  - Delegated to C(localhost) (a local connection without become, with ansible-playbook's own interpreter)
    the module's action runs it in ansible-playbook's process, with the same options, result and messages;
    elsewhere the module runs on the task's host.
  - The plan repeats one claim at a time per node in the scheduler's order, so C(fits) counts the
    claims the scheduler would place one after another; the search inside one claim is exhaustive.
seealso:
  - module: aligned.dra.claims_render
  - module: aligned.dra.topology_info
"""

EXAMPLES = r"""
- name: Plan the rendered templates on the site's probed nodes
  aligned.dra.plan:
    site: ai-west
    kubernetes_version: "1.36"
    objects: "{{ rendered.objects }}"
    required: [gpu-nic-pair-1]
    topology_dir: output/ai-west/nodes
    dest: output/ai-west/plan.json
  register: plan

- name: Read the ResourceSlices of every driver from the cluster
  kubernetes.core.k8s_info:
    api_version: resource.k8s.io/v1
    kind: ResourceSlice
  register: cluster_slices

- name: Plan on what the drivers publish (levels from the probed topologies)
  aligned.dra.plan:
    site: ai-west
    objects: "{{ rendered.objects }}"
    slices: "{{ cluster_slices.resources }}"
    topology_dir: output/ai-west/nodes

- name: What if - the same templates on nodes that are not bought yet
  aligned.dra.plan:
    site: what-if
    objects: "{{ rendered.objects }}"
    topologies:
      future-node: "{{ lookup('ansible.builtin.file', 'fixtures/future-node.json') | from_json }}"
    fail_on_unsatisfied: false

- name: A site of thousands of nodes - the whole plan in plan.json, only its summary returned
  aligned.dra.plan:
    site: ai-west
    objects: "{{ rendered.objects }}"
    topology_dir: output/ai-west/nodes
    dest: output/ai-west/plan.json
    return_plan: summary
"""

RETURN = r"""
plan:
  description:
    - The plan; see docs/claims.md for every key.
    - C(templates[]) has C(name), C(required), C(fits_total), C(worst_level), C(aligned_level),
      C(satisfiable), C(errors) and C(nodes) (per node C(fits), C(worst_level), C(allocations), C(reason)).
    - Each allocation has C(rails), the rail of each of its NICs (V(null) where unknown). Templates pinned to
      rails (annotation C(aligned.dev/rails)) and their nodes have C(fits_per_rail), per rail of the site the
      claims that fit with a NIC on it (keys are the rails as strings); V(null) for other templates. C(rails)
      lists the site's rails, C(warnings) the rail problems of the plan's input and the nodes whose rails are
      unknown.
    - A level is never better than what it summarises. C(null) with C(worst_level_exact=false) is unknown
      (one GPU-NIC pair of unknown level, and no exact C(SYS)); C(null) with C(worst_level_exact=true) means
      no allocation holds both a GPU and a NIC. C(templates[].worst_level_text) and C(aligned_level_text)
      read the level (C(SYS)), a bound after a less-than-or-equal sign (U+2264), C(unknown) or C(none).
    - C(thin) has one entry per burstable template (a GpuConfig with C(sharing.mps.limits), see
      C(aligned_dra_fractional_burst) in docs/claims.md), none without them - the thin ratio C(ratio) of the site,
      and per node and per GPU (C(nodes), C(gpus)), the claims of the template that fit by request times
      min(limit, the GPU's memory) over the memory of the GPUs that hold them; C(bound=true) where a search gave up
      (a lower bound), V(null) where a GPU publishes no memory. With O(return_plan=summary) it has no C(nodes).
    - C(nodes_failed) and C(node_counts) say which of the site's nodes were left out of the plan, and why.
    - C(mig) (only where O(mig) takes a GPU of a planned node) has per node and MIG GPU its model, mode, profiles
      and their C(source) (C(nvml) or C(documented)), and per template that lands on its MIG devices the claims
      that fit C(alone) and in the catalogue C(mix), with the C(layout) (profile and start) that gives them;
      C(templates) sums them over the site. With O(return_plan=summary) it has no C(nodes).
    - With O(return_plan=summary), C(templates[]) has no C(nodes); O(dest) has them.
  returned: always
  type: dict
unsatisfied:
  description: Required templates that no node can allocate.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, plan


def main():
    module = AnsibleModule(**plan.MODULE_SPEC, supports_check_mode=True)
    try:
        result = plan.run(module.params, module.check_mode, module._diff)
    except StageError as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
