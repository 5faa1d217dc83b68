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
  - MIG devices of the collection's driver (C(dra.aligned.dev/kind) C(mig)) are counted per profile, GPU, node
    and team in C(mig), with GPU-equivalents; O(topology_dir) gives the GPUs' MIG geometry for the MIG advice.
  - Writes O(dest) (the site report reads it) only when it changes.
  - Runs on the controller.
requirements:
  - cel-expr-python >= 0.1.3 on the controller
  - kubernetes >= 34.1.0 on the controller, for O(from_cluster) only
  - requests >= 2.31 on the controller, for O(usage) with C(prometheus) only
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
    description:
      - Directory of C(<node>.json) topologies (the topology role's C(<site>/nodes/)) for the levels, and the GPUs'
        MIG profiles (NVML's from the probe, else the documented geometry of their device IDs) for the MIG advice.
    type: path
  plan_file:
    description: The site's C(plan.json); the worst level its satisfiable templates promise is compared with the measured ones.
    type: path
  usage:
    description:
      - GPU use measured by the collection's driver, read over a window (C(aligned_dra_usage), docs/utilization.md)
        from C(prometheus) (the base URL of Prometheus's HTTP API) with C(window) (default C(7d)), C(step) (default
        C(60s)), C(end) (RFC 3339 or seconds; default now), C(bearer_token_file), C(ca_file), C(headers),
        C(match) (label matchers added to the driver's selectors), C(dcgm_match) (to DCGM's), C(timeout) and
        C(max_points) (default 11000, the most points Prometheus gives one series of a range query); or C(files)
        (the same series exported, as OpenMetrics text with timestamps, or saved answers of Prometheus's API)
        with C(window), C(step) and C(end).
      - C(idle_threshold) (default 0.05) is the SM ratio under which a GPU with a process counts as idle;
        C(request_percentile) (default 95) the percentile of the claims' peak memory the advice proposes as a
        fraction's request; C(mig_headroom) (default 0.05, at least 0 and below 1) the share of a MIG profile's
        memory a measured peak must leave free for the MIG advice to choose that profile.
      - The result gains C(usage) (used versus allocated per claim, team and template, and the advice). Without
        slices (no O(from_cluster), O(slices) or O(slice_files)) the result is the usage alone. Nothing is written
        to the cluster.
    type: dict
  pods_dest:
    description:
      - Where to write the pods' usage series read through O(usage), as the replay's usage CSV
        (C(pod,timestamp,memory_used_bytes,sm_ratio), pods named C(namespace/pod); docs/replay.md), for
        replaying thin provisioning on this window's use. Needs O(usage). The diff names the file, not its rows.
    type: path
  dest:
    description: Where to write the result as JSON (C(<site>/utilization.json)); omitted, nothing is written.
    type: path
notes:
  - Delegated to C(localhost) (a local connection without become, with ansible-playbook's own interpreter)
    the module's action runs it in ansible-playbook's process, with the same options, result and messages;
    elsewhere the module runs on the task's host.
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

- name: Used versus allocated over the last week, from the site's Prometheus
  aligned.dra.utilization:
    site: ai-west
    from_cluster: true
    usage:
      prometheus: https://prometheus.monitoring.svc:9090
      window: 7d
      bearer_token_file: /var/run/secrets/kubernetes.io/serviceaccount/token
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
    - Where the site publishes MIG devices, C(mig) (docs/utilization.md) - per profile, GPU, node and team the
      MIG devices published, allocated and idle (a dynamic GPU's idle is what can still be made, not its
      overlapping placements) and GPU-equivalents (memory slices over the GPU's); C(instances) allocated, with
      O(usage) each with its used versus allocated memory.
    - With O(usage), C(usage) (docs/utilization.md) - C(window), C(totals), C(teams), C(templates) and C(claims)
      with hours and GPU-hours allocated, active, idle and unknown, memory used and SM ratio, C(timeline) per team,
      and C(advice) (right-sized fractions, whole-GPU claims that could be fractions, an inventory snippet, and
      C(mig) - per team the smallest MIG profile holding each measured claim's peak, the GPUs a layout would
      need against today's, and a ready C(aligned_dra_mig) snippet).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, utilization


def main():
    module = AnsibleModule(**utilization.MODULE_SPEC, supports_check_mode=True)
    try:
        result = utilization.run(module.params, module.check_mode, module._diff)
    except StageError as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
