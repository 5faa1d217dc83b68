# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: site_state
short_description: Which sites' inputs and facts did not change since the last run (their outputs are kept)
version_added: 0.2.0
description:
  - A converged re-run of C(aligned.dra.site) still probes every node, but a site whose inputs and facts did
    not change would get the same claims, utilization, teams, placement, replay and report outputs, byte
    for byte. With O(state=check) this module says which sites those are; C(site.yml) then keeps their
    outputs and says so per stage. With O(state=record), at the end of a run in which no host failed, it
    writes what the next check compares with, per site, in C(<output>/<site>/.aligned-dra-converged.json).
  - With O(state=nodes) it says which nodes are converged, so that C(site.yml) skips their network and
    driver steps. A node is converged when its site's settings (every host's, as a neighbour's rails reach this
    node's driver), inventory files, named files and the collection's code are those of the record, its own
    probe output (C(nodes/<node>.json)) is the recorded one, the network plan this run's probe made for it
    changes nothing and warns of nothing (a change by hand to the RDMA mode or the VFs is seen there), and
    its host-mode driver does not get its token from the cluster (C(aligned_dra_driver_kubeconfig)). What
    the network and driver stages installed on a converged node is not inspected again; run with
    C(-e aligned_dra_converged_nodes=false) to check every node.
  - A site's inputs are its hosts' C(aligned_dra_*) settings in inventory order (as the validation read
    them, extra vars included), every file under their inventory directories but the output directory,
    every file an absolute path in the settings names, the site's probe output of this run
    (C(nodes/*.json), C(summary.json)) and the collection's own code. Its outputs are every file of the
    site's directory but the probe's and the record; one changed or removed since the record makes the
    site render again.
  - A site whose stages apply to the cluster or read it (any C(aligned_dra_*_apply), a C(source) of
    V(cluster)) or read Prometheus (C(aligned_dra_usage.prometheus)) always renders, since this run cannot tell
    whether those changed.
  - Runs on the controller, in the controller's process (the module is its action plugin), so that the
    collection's code it hashes is the installed one. Reads only, but for O(state=record) outside check
    mode.
requirements:
  - ansible-core >= 2.20 on a Python >= 3.12 controller
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: O(state=record) writes nothing in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: The record is the module's own bookkeeping, not a site output; it is not diffed.
options:
  state:
    description:
      - V(check) compares each site with its record; V(nodes) each node; V(record) writes the records.
    type: str
    required: true
    choices: [check, nodes, record]
  sites:
    description:
      - Per site, what the validation returned for it (RV(aligned.dra.validate#module:site_inputs)) - C(settings)
        (the digest of its settings), C(inventory_dirs), C(files), C(live) (why it must render, or
        V(null)), C(output_dir), C(hosts) and C(nodes_live).
    type: dict
    required: true
  digests:
    description:
      - With O(state=record), the digests RV(digests) the check of this run returned; only these sites are
        recorded.
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: Which sites did not change
  aligned.dra.site_state:
    state: check
    sites: "{{ aligned_dra_validation.site_inputs }}"
  register: site_state
  run_once: true
  delegate_to: localhost

- name: Record them at the end of a run in which no host failed
  aligned.dra.site_state:
    state: record
    sites: "{{ aligned_dra_validation.site_inputs }}"
    digests: "{{ site_state.digests }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
unchanged:
  description: The sites whose inputs, facts and outputs match their record (O(state=check)).
  returned: O(state=check)
  type: list
  elements: str
  sample: [ai-west]
render:
  description: The other sites, each with why it renders (O(state=check)).
  returned: O(state=check)
  type: dict
  sample: {kai-north: "its inputs or facts changed since the last run"}
digests:
  description: Each site's inputs digest (O(state=check)); O(state=record) records them.
  returned: O(state=check)
  type: dict
converged:
  description: The converged nodes of every site (O(state=nodes)), in inventory order per site.
  returned: O(state=nodes)
  type: list
  elements: str
  sample: [gpu-01, gpu-02]
sites:
  description:
    - Per site (O(state=nodes)), C(converged) and C(hosts) (how many nodes), and C(reasons) (how many of the
      other nodes each reason holds back).
  returned: O(state=nodes)
  type: dict
  sample: {west: {converged: 2, hosts: 3, reasons: {"its inputs or facts changed since the last run": 1}}}
recorded:
  description: The sites whose record was written (O(state=record)).
  returned: O(state=record)
  type: list
  elements: str
"""
