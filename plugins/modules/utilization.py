# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: utilization
short_description: Measure how a site's DRA devices are used, per node, class and team, and how aligned live allocations are
version_added: 0.1.0
description:
  - Reads the ResourceSlices (any driver) and ResourceClaims of a site, from a cluster through the
    C(kubernetes) Python client, from files, or as lists, and reports devices published, allocated
    and idle per node, DeviceClass and team, the devices shared by several claims or consumers with
    the share of their capacity in use, and for every claim that holds GPUs and NICs the GPU-NIC level
    it got (PIX, PXB, PHB, NODE, SYS).
  - Levels come from the nodes' probed topologies (C(topology_dir)) where given, else from the
    standard attributes C(resource.kubernetes.io/pcieRoot) and C(numaNode); RV(utilization) C(alignment.level_source)
    says which. With O(plan_file) the measured levels are compared with the level the plan promised.
  - Writes O(dest) (the site report reads it) only when it changes.
  - Runs on the controller.
requirements:
  - cel-expr-python >= 0.1.3 on the controller
  - kubernetes >= 34.1.0 on the controller, for O(from_cluster) only
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
    description: Name of the site, copied into the result.
    type: str
    required: true
  from_cluster:
    description:
      - Read ResourceSlices, ResourceClaims (all namespaces) and DeviceClasses from the cluster with the
        C(kubernetes) Python client (O(kubeconfig), else in-cluster, else C(KUBECONFIG)).
    type: bool
    default: false
  kubeconfig:
    description: Kubeconfig for O(from_cluster); empty uses the client's defaults.
    type: path
  context:
    description: Kubeconfig context for O(from_cluster).
    type: str
  slices:
    description: ResourceSlices as dicts (for example from M(kubernetes.core.k8s_info)).
    type: list
    elements: dict
  claims:
    description: ResourceClaims as dicts.
    type: list
    elements: dict
  slice_files:
    description: YAML or JSON files with ResourceSlices (documents, lists or C(List) objects).
    type: list
    elements: path
  claim_files:
    description: YAML or JSON files with ResourceClaims.
    type: list
    elements: path
  classes:
    description:
      - DeviceClasses whose selectors sort the published devices into classes. Without them (and not
        O(from_cluster)) devices are grouped by driver and kind.
    type: list
    elements: dict
  teams:
    description: The site's team settings (C(aligned_dra_teams)); their namespaces give each claim's team.
    type: dict
    default: {}
  topology_dir:
    description: Directory of C(<node>.json) topologies (the topology role's C(<site>/nodes/)) for the levels.
    type: path
  plan_file:
    description: The site's C(plan.json); the worst level its satisfiable templates promise is compared with the measured ones.
    type: path
  dest:
    description: Where to write the result as JSON (C(<site>/utilization.json)); omitted, nothing is written.
    type: path
"""

EXAMPLES = r"""
- name: Utilization of the live cluster, written for the site report
  aligned.dra.utilization:
    site: ai-west
    from_cluster: true
    teams: "{{ aligned_dra_teams }}"
    topology_dir: output/ai-west/nodes
    plan_file: output/ai-west/plan.json
    dest: output/ai-west/utilization.json

- name: Utilization of a recorded dump
  aligned.dra.utilization:
    site: ai-west
    slice_files: [dump/slices.yaml]
    claim_files: [dump/claims.yaml]
    classes: "{{ rendered.objects | selectattr('kind', 'equalto', 'DeviceClass') | list }}"
  register: used
"""

RETURN = r"""
utilization:
  description:
    - C(totals), C(claims) (allocated, pending, admin access results), C(nodes), C(classes) and C(teams) with
      published, allocated, idle and utilization; C(shared) devices; C(alignment) (level histogram,
      C(level_source), C(promised_level), C(below_promise)); C(allocations) per claim. See docs/teams.md.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, utilization


def main():
    module = AnsibleModule(
        argument_spec={
            "site": {"type": "str", "required": True},
            "from_cluster": {"type": "bool", "default": False},
            "kubeconfig": {"type": "path"},
            "context": {"type": "str"},
            "slices": {"type": "list", "elements": "dict"},
            "claims": {"type": "list", "elements": "dict"},
            "slice_files": {"type": "list", "elements": "path"},
            "claim_files": {"type": "list", "elements": "path"},
            "classes": {"type": "list", "elements": "dict"},
            "teams": {"type": "dict", "default": {}},
            "topology_dir": {"type": "path"},
            "plan_file": {"type": "path"},
            "dest": {"type": "path"},
        },
        mutually_exclusive=[("slices", "slice_files"), ("claims", "claim_files")],
        supports_check_mode=True,
    )
    try:
        result = utilization.run(module.params, module.check_mode, module._diff)
    except StageError as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
