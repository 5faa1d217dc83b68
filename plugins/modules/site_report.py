# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: site_report
short_description: Write the HTML site report from the topology role's output
version_added: 0.1.0
description:
  - Reads C(index.json) and the per-node topology files that the C(aligned.dra.topology) role writes
    to its output directory and, where they exist, the planner's C(<site>/plan.json), the replay's
    C(<site>/replay.json) and the job placements C(<site>/jobs.json).
  - Writes one self-contained HTML page per site, C(<site>/report.html), and an index of sites,
    C(index.html). The pages need no network access to open (no external fonts, scripts or images).
  - "Per layout: an SVG picture of the machine (NUMA nodes, root complexes, PCIe switches, GPUs, NICs,
    VFs collapsed per PF) with the best GPU/NIC pairs highlighted, the GPU x NIC level matrix laid out
    like C(nvidia-smi topo -m), and the warnings. Nodes built the same way share one layout and are
    drawn once."
  - "Per site: the nodes ok / failed / unreachable and the failed ones with stage and error (when C(plan.json) or
    C(summary.json) lists them), the node inventory, the alignment score (share of accelerators whose nearest RDMA
    NIC is at PIX/PXB, PHB/NODE or only SYS) and, when the planner ran, capacity per claim template and the worst
    level inside allocations; when C(<site>/replay.json) exists (C(playbooks/replay.yml)), the workload trace
    replayed on the plan - the ratio of pods placed with fractional over whole GPUs and a chart of the GPUs
    occupied and requested per policy; when C(<site>/jobs.json) exists (C(aligned.dra.jobs)), the site's
    multi-node jobs - per job whether it fits, where, on which rails, the worst level and, when it does not
    fit, why with the planner's figures - each drawn on a picture of the site's domains and nodes."
  - Runs where the output directory is, normally the controller (C(delegate_to=localhost)).
    A file is written only when its content changes; pages carry no timestamps.
  - "The pages are rendered from the collection's Jinja2 templates (C(roles/report/templates/report/), autoescaping
    on): the module's action plugin reads them on the controller and hands them to the module."
  - "Accelerators are counted and labelled by family (C(GPU0), C(VE0) for NEC Vector Engines, C(ACC0) for other
    accelerators) and the alignment score uses the NICs the planner pairs them with (with the default
    O(device_options): NICs that own an RDMA device), from the same device model as the planner."
requirements:
  - jinja2 (ansible-core's own dependency) in the Python that runs the module, normally the controller's
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode the pages are built and compared with the files, and nothing is written. On a first
      run, when C(index.json) is not written yet, it reports a change without building the pages.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: The diff lists the pages that are created or updated with their sizes, not their HTML.
options:
  output_dir:
    description:
      - The topology role's output directory (C(aligned_dra_output_dir)), holding C(index.json).
    type: path
    required: true
  sites:
    description:
      - Sites to build pages for. Default, every site in C(index.json).
      - The index page lists every site of C(index.json) that has a page.
    type: list
    elements: str
  warn_levels:
    description: Levels of a GPU's nearest physical NIC that are reported as warnings.
    type: list
    elements: str
    choices: [PIX, PXB, PHB, NODE, SYS]
    default: [SYS]
  device_options:
    description:
      - The driver's device options (C(aligned_dra_device_options)); they decide which devices the planner, and so
        the report's counts and score, see. Keys as in the driver role.
    type: dict
    default: {}
  templates:
    description:
      - The report's Jinja2 templates, file name to source. Set by the action plugin from the collection's
        C(roles/report/templates/report/); leave it out.
    type: dict
  mig:
    description:
      - Each host's C(aligned_dra_mig), as the filter C(aligned.dra.mig_settings) hands them on, mapping each host to its settings.
        A site with MIG GPUs gets a section, MIG layouts - each static layout drawn (a row of memory slices, a box
        per instance), dynamic GPUs counted. Empty - no such section.
    type: dict
    default: {}
notes:
  - Delegated to C(localhost) (a local connection without become, with ansible-playbook's own interpreter)
    the module's action runs it in ansible-playbook's process, with the same options, result and messages;
    elsewhere the module runs on the task's host.
  - Levels are taken from the probe (C(links), C(nearest_nics)); the report never recomputes them.
seealso:
  - module: aligned.dra.topology_info
  - name: nvidia-smi topo -m levels
    description: PIX, PXB, PHB, NODE and SYS have the meaning nvidia-smi gives them.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Write the site report next to the topology facts
  aligned.dra.site_report:
    output_dir: "{{ aligned_dra_output_dir }}"
  delegate_to: localhost
  run_once: true

- name: Rebuild only one site's page, warning about NODE and SYS
  aligned.dra.site_report:
    output_dir: /srv/aligned-dra/output
    sites: [ai-west]
    warn_levels: [NODE, SYS]
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
index:
  description: Path of the index page.
  returned: success
  type: str
  sample: /srv/aligned-dra/output/index.html
files:
  description: Pages written (or, in check mode, that would be written) because their content changed.
  returned: success
  type: list
  elements: str
  sample: [/srv/aligned-dra/output/ai-west/report.html, /srv/aligned-dra/output/index.html]
sites:
  description: Per site, its page, node and accelerator counts (C(gpus) is all accelerators, C(accelerators) per
    family), RDMA NICs, nodes ok / failed / unreachable, layouts (fingerprint and hosts), alignment score
    (accelerators per bucket C(aligned), C(host), C(sys), C(none)), whether a plan was shown, and the number of
    warnings.
  returned: success
  type: dict
  sample:
    ai-west:
      report: ai-west/report.html
      nodes: 2
      gpus: 16
      accelerators: {"gpu": 16, "ve": 0, "accelerator": 0}
      rdma_nics: 20
      node_counts: {"ok": 2, "failed": 0, "unreachable": 0}
      layouts: [{"fingerprint": "54a1317841b2...", "hosts": ["dgx-h100-01", "dgx-h100-02"]}]
      score: {"aligned": 16, "host": 0, "sys": 0, "none": 0}
      plan: false
      warnings: 0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, site_report


def main() -> None:
    module = AnsibleModule(**site_report.MODULE_SPEC, supports_check_mode=True)
    try:
        result = site_report.run(module.params, module.check_mode, module._diff, module.atomic_move)
    except StageError as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
