# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: validate
short_description: Check the whole site's input before anything changes
version_added: 0.1.0
description:
  - Checks every host's C(aligned_dra_*) variables, wherever they were set (inventory, group_vars,
    host_vars, extra vars), against the argument specs of the collection's roles and playbooks, and
    fails on a name the collection does not know, suggesting the closest known one.
  - Then the checks across hosts and stages, once per site, with the stages' own code - one Kubernetes
    minor per site, the site's claim settings render, team quotas and templates name classes the site
    renders, SR-IOV entries select PFs the node's probe found and ask for no more VFs than the PF has,
    the devices the driver publishes need no feature gate the minor leaves off, and each node's rails
    rule (C(aligned_dra_rails)) is well formed and, where this run probed the node, gives it every rail
    of C(count), no rail to two NICs, and matches the node's RDMA NICs (each problem names the NIC and the rule).
  - For the C(placement) stage (and for C(teams), whose Kueue C(Topology) has them) the site's placement
    levels (C(aligned_dra_placement_levels), the same on every host of the site) are well formed - a DNS label
    C(name) and a label key C(label) each, both unique, not C(kubernetes.io/hostname), at most 15. For
    C(placement), and for C(teams) with engine C(kueue) or C(both) and levels, every host's C(aligned_dra_placement)
    gives a valid label value at every level and names no other level, a domain sits inside one domain of the
    level above (a rack in two blocks is refused), no two hosts are one Kubernetes node, and the site name is
    a valid label value. For C(placement), the site's jobs (C(aligned_dra_jobs)) are well formed (unknown
    keys refused with the closest known one) and name claim templates the site's catalogue renders for its minor.
  - All problems are reported together in one message that names host, variable, value and reason;
    the same problem on many hosts is said once per site with the host count.
  - The validation play of C(aligned.dra.site) and of every stage playbook runs it once, on the
    controller, after the read-only probe where the stages need the node's devices (probe, network);
    it changes nothing.
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: It only reads.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  action:
    description: Indicates this has a corresponding action plugin so some parts of the options can be executed on the controller.
    support: full
options:
  stages:
    description:
      - The stages the playbook runs; required options and the cross-stage checks follow them.
    type: list
    elements: str
    choices: [probe, network, mig, driver, claims, teams, utilization, placement, replay, report, what_if]
    required: true
  hosts:
    description:
      - The hosts whose variables are checked. Empty uses the group C(aligned_dra_nodes), or every host
        of O(settings) when the module runs without its action plugin.
    type: list
    elements: str
    default: []
  settings:
    description:
      - Only when the module runs without its action plugin (the action reads C(hostvars) itself).
        Host name -> that host's variables, C(aligned_dra_topology) included for the device checks.
    type: dict
    default: {}
requirements:
  - ansible-core >= 2.20 on a Python >= 3.12 controller
notes:
  - C(aligned_dra_allowed_extra_vars) (a list of names or fnmatch patterns) lets deliberate extra
    C(aligned_dra_*) names through.
  - C(docs/inventory.md) in the collection lists what is checked.
"""

EXAMPLES = r"""
- name: Validate | The whole site's input, before anything changes
  aligned.dra.validate:
    stages: [probe, network, driver, claims, teams, utilization, placement, replay, report]
  run_once: true
  delegate_to: localhost
  check_mode: false
"""

RETURN = r"""
hosts:
  description: How many hosts were checked.
  returned: always
  type: int
  sample: 12
sites:
  description: The sites of the hosts checked.
  returned: always
  type: list
  elements: str
  sample: [lab-east]
problems:
  description: Every problem found, each with host, variable, value (as JSON, shortened) and reason.
  returned: always
  type: list
  elements: dict
  sample: [{host: gpu-03, variable: "aligned_dra_sriov_pfs[0]", value: '{"netdev": "ens1f0", "numvfs": 64}',
            reason: "pfs[0].numvfs: 64 is above sriov_totalvfs 8 of 0000:3b:00.0"}]
site_inputs:
  description:
    - Per site, what M(aligned.dra.site_state) compares with the last run, from the same one read of each
      host - C(settings) (a digest of every host's C(aligned_dra_*) settings in inventory order),
      C(inventory_dirs), C(files) (the files absolute paths in the settings name), C(live) (why the site's
      stages read or write the cluster or Prometheus, or V(null)), C(output_dir), C(hosts) (in inventory order)
      and C(nodes_live) (per host whose host-mode driver gets its token from the cluster, why its own steps
      read something live).
    - Empty when a problem was found.
  returned: always
  type: dict
mig_hosts:
  description:
    - The hosts whose C(aligned_dra_mig.mode) is not V(off), in the order given - the nodes C(playbooks/mig.yml)
      plans and rolls, so it reads no host's variables again.
  returned: always
  type: list
  elements: str
  sample: [gpu-01, gpu-02]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import stage, validate


def main():
    module = AnsibleModule(
        argument_spec={
            "stages": {"type": "list", "elements": "str", "required": True, "choices": list(validate.STAGES)},
            "hosts": {"type": "list", "elements": "str", "default": []},
            "settings": {"type": "dict", "default": {}},
        },
        supports_check_mode=True,
    )
    settings = module.params["settings"]
    hosts = module.params["hosts"] or sorted(settings)
    for host in hosts:
        if not isinstance(settings.get(host), dict):
            module.fail_json(msg=f"settings.{host}: must map the host's variable names to values")
    result, message = stage.run(
        hosts,
        lambda host: list(settings[host]),
        lambda host, name, default: settings[host].get(name, default),
        module.params["stages"],
    )
    if message:
        module.fail_json(msg="settings: " + message, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
