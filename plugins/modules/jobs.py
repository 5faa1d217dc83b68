# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: jobs
short_description: Render a site's multi-node jobs and place each one by simulation, all or nothing
version_added: 0.1.0
description:
  - Renders every job of O(jobs) for the site's minor - an Indexed Job and a headless Service, the
    Workload and PodGroup objects the minor and O(feature_gates) allow (a gang of all workers, the
    topology constraint at the job's level), Kueue's queue label and topology annotation under engine
    V(kueue) or V(both), the NCCL environment the rails imply - and validates every object against the
    official schemas of that minor.
  - Places every job on its own on the site's nodes, all or nothing - every worker one claim of the
    job's template, allocated as the scheduler does, several workers per node where the devices allow,
    every worker on the same rails where the site has rails, all in one domain of the job's level
    (V(required)) or in the fewest domains (V(preferred)) - from the devices O(utilization_file) shows
    free, else an empty site. Writes the placements to O(dest) (C(jobs.json), docs/jobs.md).
  - Runs on the controller and changes nothing but O(dest); the objects are returned for the role to
    write and apply.
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: The diff of O(dest).
options:
  site:
    description: The site's name.
    type: str
    required: true
  kubernetes_version:
    description: The site's Kubernetes minor (C(1.34) to C(1.37)); selects the schemas and the Workload API.
    type: str
    required: true
  feature_gates:
    description: Feature gates the site turns on or off beyond the minor's defaults (the Workload API's among them).
    type: dict
    default: {}
  jobs:
    description:
      - The site's C(aligned_dra_jobs) - each with C(name), C(workers), C(template), and optionally
        C(namespace), C(placement) (C(level), C(mode)), C(image) and C(queue). See docs/jobs.md.
    type: list
    elements: dict
    default: []
  placement:
    description:
      - The site's levels and each node's domains, as the C(aligned.dra.placement) filter returns them
        (C(levels), C(domains), C(node_names), and C(sources) where levels are read from the cluster's node
        labels or device attributes); its C(problems) are refused.
    type: dict
    default: {}
  objects:
    description: The site's rendered DeviceClasses and claim templates (the claims role's catalogue for the minor).
    type: list
    elements: dict
    required: true
  claims_settings:
    description: The site's C(aligned_dra_claims) (its C(namespace) holds the templates).
    type: dict
    default: {}
  teams_settings:
    description: The site's C(aligned_dra_teams) (engine, team namespaces, the templates copied into them).
    type: dict
    default: {}
  topologies:
    description: Probed topologies per node (inline).
    type: dict
  topology_dir:
    description: Directory of probed topologies, one C(<node>.json) per node.
    type: path
  topology_files:
    description: Node -> probed topology file, read one node at a time.
    type: dict
  slices:
    description: ResourceSlices of every driver (inline); the topologies then only add the levels.
    type: list
    elements: dict
  slice_files:
    description: Files (YAML or JSON) of ResourceSlices.
    type: list
    elements: path
  device_options:
    description: Device model options (docs/devices.md).
    type: dict
    default: {}
  nodes_failed:
    description: Nodes that failed or were unreachable in this run; never placed on.
    type: dict
    default: {}
  rail_rules:
    description: Each node's rail rule (C(aligned.dra.rail_rules) filter's C(rules)).
    type: dict
    default: {}
  rail_node_names:
    description: Each node's Kubernetes node name, which the rules' per-node entries use.
    type: dict
    default: {}
  utilization_file:
    description:
      - This run's C(utilization.json) of the site; the devices its claims hold are not free. Omitted,
        the jobs are placed on an empty site.
    type: path
  dest:
    description: Where C(jobs.json) is written (atomically; nothing is written in check mode).
    type: path
requirements:
  - cel-expr-python >= 0.1.3 on the controller (the selectors are evaluated)
  - kubernetes-validate >= 1.34.0 on the controller (the objects are validated against the official schemas)
notes:
  - Delegated to C(localhost) (a local connection without become, with ansible-playbook's own interpreter)
    the module's action runs it in ansible-playbook's process, with the same options, result and messages;
    elsewhere the module runs on the task's host.
  - Each job is placed on its own, not after the other jobs; a site that fits each job alone may not
    fit them all at once.
"""

EXAMPLES = r"""
- name: Render and place the site's jobs
  aligned.dra.jobs:
    site: west
    kubernetes_version: "1.36"
    jobs:
      - name: pretrain
        workers: 16
        template: gpu-nic-rails-8-0
        namespace: llm-train
        placement: {level: rack, mode: required}
    placement: "{{ hostvars | aligned.dra.placement(groups['aligned_dra_nodes'], 'west') }}"
    objects: "{{ catalogue.objects }}"
    topology_dir: output/west/nodes
    dest: output/west/jobs.json
"""

RETURN = r"""
placement:
  description:
    - The content of C(jobs.json) - per job C(name), C(fits), C(domain), C(workers), C(reason) (docs/jobs.md).
    - Where levels are read from the cluster (the placement has C(sources)), C(level_sources) says where
      each level comes from - C(inventory), C(node_label) with its C(key), or C(device_attribute) with its
      C(driver) and C(attribute) - and the node label the schedulers read.
  returned: always
  type: dict
files:
  description: The rendered objects, C(name) (the file name) and C(object).
  returned: always
  type: list
  elements: dict
left_out:
  description: What this minor and its gates leave out of a job, and why.
  returned: always
  type: list
  elements: dict
minor:
  description: The minor the objects were rendered for.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, jobs


def main():
    module = AnsibleModule(**jobs.MODULE_SPEC, supports_check_mode=True)
    try:
        response = jobs.run(module.params, module.check_mode, module._diff)
    except StageError as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**response)


if __name__ == "__main__":
    main()
