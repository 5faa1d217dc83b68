# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: replay
short_description: Replay a workload trace on a site's GPUs, with whole or fractional GPUs, packed or spread
version_added: 0.1.0
description:
  - Places the pods of a workload trace on nodes and reports how many run and how much of the GPUs they
    take and ask for, so a site can measure what fractional GPUs and packing buy with its own workload.
  - The trace is a CSV file, in the openb format of a published production GPU-sharing trace or in the
    collection's generic format (see docs/replay.md); the nodes are an openb node list or a site's
    C(plan.json), whose nodes, GPUs (the devices of O(gpu_class)) and fractional GPU template are
    replayed on, with no CPU or memory limit (a plan does not know them; the result says so).
  - O(mode=saturation) places the pods in creation order, none leaving, and stops at the first GPU pod
    that cannot be placed; O(mode=timeline) lets pods leave at their deletion time and reports the GPUs
    occupied and requested over time and the pods that could not start.
  - Every figure is a fraction of the nodes' GPU capacity, with its numerator and denominator in
    C(shares_of). Runs on the controller; reads files only.
requirements:
  - Python >= 3.12 on the controller (standard library only)
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode the replay runs and O(dest) is compared, not written.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: The diff shows the old and new content of O(dest).
options:
  trace:
    description:
      - The trace, a CSV file with a header line. A bad value fails the module with the file's line and
        the column.
    type: path
    required: true
  trace_format:
    description:
      - V(openb) - the pod list of the published openb trace (C(name,cpu_milli,memory_mib,num_gpu,gpu_milli,
        gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time)).
      - V(csv) - the generic format, C(name,submit,end,gpus) and optionally
        C(team,tier,gpu_memory,cpu,memory,gpu_model,gpu_limit,priority); times in seconds or RFC 3339, GPUs as a
        decimal (below 1, a share of one GPU), C(priority) an integer (the reclaim rule evicts the lowest first).
    type: str
    choices: [openb, csv]
    default: openb
  nodes:
    description:
      - An openb node list (C(sn,cpu_milli,memory_mib,gpu,model)) to replay on.
      - Exactly one of O(nodes) and O(plan) is required.
    type: path
  plan:
    description:
      - A site's C(plan.json) (M(aligned.dra.plan)) to replay on - its nodes, with the devices of
        O(gpu_class) as GPUs and no CPU, memory or GPU model limit.
      - V(fractional) needs the fractional GPU template O(fractional_template) rendered as a
        ResourceClaimTemplate (consumable capacity, Kubernetes 1.36 or C(DRAConsumableCapacity)); where the
        plan's minor renders it as a shared ResourceClaim, or not at all, the replay falls back to whole
        GPUs and says why in the C(fallback) of RV(replay).
    type: path
  gpu_class:
    description: With O(plan), the DeviceClass whose devices are the nodes' GPUs.
    type: str
    default: aligned-gpu
  fractional_template:
    description: With O(plan), the name of the fractional GPU template (C(aligned_dra_claims.templates.fractional_gpu.name)).
    type: str
    default: fractional-gpu
  policy:
    description:
      - V(whole) - a GPU pod takes C(num_gpu) whole GPUs (a share below one GPU rounds up to one).
      - V(fractional) - a 1-GPU pod asking for less than 1000 milli takes that share of one GPU; other GPU
        pods take whole GPUs.
      - V(thin) - placed as V(fractional), by request (burstable fractional GPUs - the trace's C(gpu_limit) is
        what a pod may use while its GPU has room, not what it takes); RV(replay) gains C(thin), the GPU memory
        promised (the limits) against guaranteed (the requests). Falls back to whole GPUs as V(fractional) does.
      - V(mig) - on the site's MIG GPUs (O(mig), O(topology_dir); with O(plan) only), each share rounded up to the
        smallest MIG profile holding both its memory (its peak in O(usage) with O(mig_headroom) kept free, else the
        trace's C(gpu_memory)) and its compute share, placed by the driver's device order (first fit, nodes in name
        order - the best case, as a rule), with the scheduler's random tie-breaks among nodes (O(draws), O(seed)) and,
        for comparison, by a fragmentation-aware order; pods of whole GPUs take the GPU whole of dynamic MIG GPUs.
        RV(replay) gains C(mig) - per order the pods placed, the GPUs needed, the memory slices stranded, what decided
        each pod's profile and every placement; the range over the draws. GPUs without MIG are not used.
    type: str
    choices: [whole, fractional, thin, mig]
    default: whole
  policies:
    description:
      - Replay under each of these policies (as O(policy) says), in this order, each once - the trace, the nodes
        and O(usage) read once for all of them. The result is RV(replays) instead of RV(replay), and O(dest)
        holds the site's C(replay.json) - C(schema_version), C(site) (O(site)) and C(policies) (RV(replays)).
      - Mutually exclusive with O(policy).
    type: list
    elements: str
    choices: [whole, fractional, thin, mig]
  mig:
    description:
      - The policy V(mig) only - each host's C(aligned_dra_mig), as the filter C(aligned.dra.mig_settings) hands them
        on, mapping each host to its settings (hosts with mode V(off) take no GPU). V(mig) with no host of mode V(static) or
        V(dynamic) fails.
    type: dict
    default: {}
  topology_dir:
    description:
      - The policy V(mig) only - the directory of the nodes' probes (C(<host>.json), the topology role's files),
        read for the MIG GPUs of the hosts of O(mig) that the plan has. Default - C(nodes/) beside O(plan).
    type: path
  mig_headroom:
    description:
      - The policy V(mig) only - the fraction of a profile's memory a measured peak (O(usage)) leaves free - a peak fits
        a profile only where it is at most its memory x (1 - O(mig_headroom)). At least 0, below 1. The trace's
        C(gpu_memory) is a request and fits as it is. The same setting as the utilization stage's MIG advice.
    type: float
    default: 0.05
  seed:
    description:
      - The policy V(mig) only - the seed of the random tie-breaks among nodes (O(draws)); one seed gives the same
        figures on every run. 0 or more.
    type: int
    default: 0
  draws:
    description:
      - The policy V(mig) only - how many times first fit is replayed with each pod's node drawn at random among the
        nodes with a free device of its profile (the scheduler picks at random among nodes that score the same);
        C(mig.first_fit_range) gives the min, median and max. V(0) - none. At most 1000; each draw is one more
        replay.
    type: int
    default: 10
  site:
    description: With O(policies), the site C(replay.json) names.
    type: str
  order:
    description:
      - V(pack) - the feasible node with the least free GPU milli after placement (ties - least free CPU,
        then the node's name).
      - V(spread) - the one with the most (ties - most free CPU, then the node's name).
      - On the node, each request goes to the fullest GPU that still fits it, ties by index.
    type: str
    choices: [pack, spread]
    default: pack
  mode:
    description:
      - V(saturation) - pods in creation order (ties by name), none leaves; stops at the first GPU pod that
        cannot be placed; a CPU-only pod that does not fit is skipped.
      - V(timeline) - the same placement, pods leave at their deletion time; a pod that does not fit when
        it is created never starts.
    type: str
    choices: [saturation, timeline]
    default: saturation
  usage:
    description:
      - The pods' measured GPU memory use, a CSV file C(pod,timestamp,memory_used_bytes[,sm_ratio]) with a header
        line - times of the trace's kind (seconds or RFC 3339). A pod's use at a time is its latest sample at or before
        it (0 before its first); samples outside the pod's life are ignored, and so are pods the trace does not have
        (counted and named in C(measured.usage)).
      - With it, O(mode=timeline) replays the pods on their use too - RV(replay) gains C(measured) (and, under
        V(thin) with O(burst_factors), C(thin_factors)); docs/replay.md, "Thin provisioning on measured use".
    type: path
  gpu_memory:
    description:
      - The memory of one of the site's GPUs, a quantity (V(80Gi)) or a number of bytes. Required with O(usage),
        unless the O(plan) publishes one GPU memory (the C(memory) of its GPUs in C(thin)); when both are given,
        this option wins.
    type: raw
  gpu_reserve:
    description:
      - With O(usage), the memory of each GPU that no pod uses (the MPS server, CUDA contexts, processes of no claim),
        a quantity (V(1Gi)) or a number of bytes, below O(gpu_memory). It is added to each GPU's use where the
        reclaim's trigger and the GPU's memory are weighed, as NVML's used memory, which the driver reads, counts it.
      - V(0) (the default) counts the pods' use alone - the evictions are then fewer than the driver's, as a rule
        (C(evictions_bound) says V(lower)). The driver's C(aligned_dra_gpu_memory_unattributed_bytes) gives it
        (docs/monitoring.md).
    type: raw
    default: 0
  thin_request:
    description:
      - With O(usage), what a share asks for under V(thin) - V(request) (the trace's C(gpu_memory), else its share
        of the GPU's memory) or V(pNN), a percentile of the pod's own samples (V(p95)).
    type: str
    default: request
  thin_limit:
    description:
      - With O(usage), what a share may use under V(thin) - V(max) (its largest sample) or a factor of its request
        (V(2.0)), at least 1; at most one GPU's memory.
    type: raw
    default: max
  reclaim_margin:
    description:
      - With O(usage), the percent of a GPU's memory kept free - above O(gpu_memory) x (1 - margin / 100) used, the
        GPU evicts as the driver's reclaim does (its C(--reclaim-margin)).
    type: float
    default: 5
  on_evict:
    description:
      - With O(usage), what becomes of an evicted pod - V(drop) (it ends) or V(requeue) (it is placed again at the
        next step where it fits, for the time it had left).
    type: str
    choices: [drop, requeue]
    default: drop
  burst_factors:
    description:
      - With O(usage) and V(thin), replay V(thin) once more per factor (limit = factor x request), to trade
        evictions against GPUs; RV(replay) lists each in C(thin_factors).
    type: list
    elements: float
  dest:
    description:
      - Write RV(replay) as JSON to this file (only when its content changes); with O(policies) the site's
        C(replay.json) (O(policies)). Nothing is written on error.
    type: path
notes:
  - Delegated to C(localhost) (a local connection without become, with ansible-playbook's own interpreter)
    the module's action runs it in ansible-playbook's process, with the same options, result and messages;
    elsewhere the module runs on the task's host.
  - docs/replay.md describes the formats, the semantics, every field of the result, how to export a trace
    from a cluster, and a worked example.
seealso:
  - module: aligned.dra.plan
"""

EXAMPLES = r"""
- name: What fractional GPUs buy on the site, with the workload of the trace
  aligned.dra.replay:
    trace: traces/openb_pod_list_default.csv
    plan: output/ai-west/plan.json
    policy: fractional
    mode: timeline
    dest: output/ai-west/replay-fractional.json
  register: fractional

- name: The site's replay.json - whole and fractional GPUs, the trace and the plan read once
  aligned.dra.replay:
    trace: traces/openb_pod_list_default.csv
    plan: output/ai-west/plan.json
    policies: [whole, fractional]
    site: ai-west
    mode: timeline
    dest: output/ai-west/replay.json

- name: The published trace on its own nodes, packed, until the first GPU pod that does not fit
  aligned.dra.replay:
    trace: traces/openb_pod_list_default.csv
    nodes: traces/openb_node_list_gpu_node.csv
    policy: whole
    order: pack
    mode: saturation

- name: Thin provisioning on the pods' measured use, with three burst factors
  aligned.dra.replay:
    trace: traces/last-week.csv
    trace_format: csv
    usage: traces/last-week-usage.csv
    gpu_memory: 80Gi
    plan: output/ai-west/plan.json
    policy: thin
    mode: timeline
    thin_request: p95
    burst_factors: [1.5, 2.0, 3.0]

- name: A trace exported from a cluster (the generic format), spread
  aligned.dra.replay:
    trace: traces/last-week.csv
    trace_format: csv
    plan: output/ai-west/plan.json
    order: spread
"""

RETURN = r"""
replay:
  description:
    - The replay; docs/replay.md describes every key.
    - C(pods_placed), C(gpu_pods_placed), C(cpu_pods_skipped), C(pods_not_tried) (saturation - the pods after
      the stop), C(gpus_total), C(first_unplaced) (the first GPU pod that could not be placed or, in timeline
      mode, could not start - C(name), C(line), C(created), C(needs); V(null) when every one was).
    - C(gpu_allocated_share) (milli-GPUs taken from the nodes over the capacity) and C(gpu_requested_share)
      (milli-GPUs the placed pods asked for over the capacity), at saturation or, in timeline mode, as the
      time-weighted mean over the trace's window; C(shares_of) gives the numerators and the denominator.
      V(null) when the nodes have no GPU.
    - C(policy) asked and C(policy_applied); C(fallback) says why they differ (V(null) when they do not).
    - C(trace) and C(nodes) describe the inputs, C(nodes.limits) which of CPU, memory and GPU model were
      limited, C(nodes.notes) what the nodes could not say.
    - In timeline mode C(timeline) - C(time), C(occupied_milli), C(requested_milli) (a step series), C(peak),
      C(unstarted) (names) and C(unstarted_gpu_pods).
    - C(teams) (pods per team) and C(tiers) (pods per tier) when the trace names them.
    - With V(thin) applied, C(thin) - C(promised_milli) (the placed GPU pods' limits), C(guaranteed_milli) (their
      requests), C(over_request_milli), their shares of the capacity, C(pods_with_limit), and C(basis) and
      C(time) (at saturation, or the instant most is promised).
    - With O(usage), C(measured) - the replay on measured use under the applied policy - C(usage), C(gpu_memory),
      C(rules), C(window), C(pods_placed), C(gpus_needed) (C(peak), C(at), C(mean)), C(evictions),
      C(evictions_per_day), C(evictions_bound) (V(lower) without O(gpu_reserve)), C(pods_dropped) (evicted and not
      run again), C(over_memory) (C(steps), C(gpu_seconds) and C(pods) where a GPU's pods and O(gpu_reserve) were
      above its memory after the evictions, and C(evictions) made from a GPU above it), C(memory) (requested,
      promised and used bytes, their peaks and time-weighted means), C(placements) and C(evicted) (each eviction -
      C(time), C(node), C(gpu), C(pod), C(used_bytes), C(request_bytes)). Under V(thin) with O(burst_factors),
      C(thin_factors) - per factor C(factor), C(gpus), C(gpus_fractional), C(gpus_saved), C(all_placed),
      C(pods_dropped) (GPUs saved by pods dropped or never started are not savings) and the same figures.
    - With V(mig), the figures above for the driver's order (nodes by name, the best case as a rule) on the MIG GPUs
      only, and C(mig) - C(gpus), C(gpus_without_mig), C(memory_slices), C(gpu_models), C(sources), C(sizing) (with
      C(headroom)), C(profile_sizes) (each profile's memory as used, and its C(source) - V(nvml) or V(documented)),
      C(orders) (C(first_fit), C(fragmentation_aware)) - each C(case), C(pods_placed), C(gpu_pods_placed),
      C(gpu_pods_not_placed), C(gpus_needed), C(stranded) (the free memory slices when the first pod found no device),
      C(sized_by), C(decided_by) (C(memory), C(compute), C(both), C(whole)), C(profiles), C(placements) (C(pod),
      C(node), C(gpu), C(device), C(profile), C(start), C(memory_bytes), C(memory_source)) and C(not_placed) (with
      C(reason)) - and C(first_fit_range) (O(draws) > 0) - C(seed), C(draws), C(min), C(median) and C(max) of the GPU
      pods placed and the GPUs needed, C(best_case) (the name order, and how many draws beat it), C(runs).
  returned: with O(policy)
  type: dict
replays:
  description: With O(policies), RV(replay) of each policy, keyed by the policy.
  returned: with O(policies)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, replay


def main():
    module = AnsibleModule(**replay.MODULE_SPEC, supports_check_mode=True)
    try:
        result = replay.run(module.params, module.check_mode, module._diff)
    except StageError as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
