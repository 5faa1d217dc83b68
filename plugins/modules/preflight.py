# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: preflight
short_description: Check, before anything changes, that the controller has what the run needs
version_added: 0.1.0
description:
  - Works out from the inventory which features a run needs (rendering and planning claims, talking
    to a cluster, building the driver's wheelhouse), checks the Python packages and versions in the
    interpreter that runs the collection's modules and in the one running C(ansible-playbook), the
    Ansible collections and C(ansible-core), and fails with one message that lists everything missing
    and the exact lines that install it.
  - The first play of C(aligned.dra.site) and of every stage playbook runs it on C(localhost); it
    changes nothing.
  - The list of requirements is the collection's C(requirements.txt) and C(galaxy.yml) dependencies;
    C(kubernetes-validate) must be at least the newest Kubernetes minor of the run's sites.
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
      - The stages the playbook runs; only their settings decide what is needed.
    type: list
    elements: str
    choices: [probe, network, driver, claims, teams, utilization, placement, replay, report, what_if]
    required: true
  hosts:
    description:
      - The hosts whose settings are read. Empty uses the group C(aligned_dra_nodes).
    type: list
    elements: str
    default: []
  python:
    description:
      - Internal, set by the action plugin. Python packages to look for in the module interpreter.
    type: list
    elements: dict
    default: []
requirements:
  - ansible-core >= 2.20 on a Python >= 3.12 controller
notes:
  - The check of a Python package imports nothing; it reads the installed distribution's version and
    whether its module can be found.
  - C(docs/install.md) in the collection shows the install lines, the air-gapped install and the
    execution environment.
"""

EXAMPLES = r"""
- name: Preflight | The controller has what the run needs
  aligned.dra.preflight:
    stages: [probe, network, driver, claims, teams, utilization, placement, replay, report]
"""

RETURN = r"""
features:
  description: Features the run needs, each with the setting that asked for it.
  returned: always
  type: dict
  sample: {render: "the claims stage (node-1)", cluster: "aligned_dra_claims_apply on node-1"}
python:
  description: Every required Python package with the version found (null when missing) and the problem, if any.
  returned: always
  type: list
  elements: dict
  sample: [{name: kubernetes, version: ">=34.1.0", found: "37.0.2", problem: null, interpreter: modules}]
collections:
  description: Every required collection with the version found and the problem, if any.
  returned: always
  type: list
  elements: dict
  sample: [{name: kubernetes.core, version: ">=5.0.0", found: "6.6.0", problem: null}]
interpreters:
  description: The interpreters checked, C(modules) (runs the collection's modules) and C(playbook).
  returned: always
  type: dict
  sample: {modules: /usr/bin/python3, playbook: /opt/venv/bin/python}
"""

import sys

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import preflight


def main():
    module = AnsibleModule(
        argument_spec={
            "stages": {
                "type": "list",
                "elements": "str",
                "required": True,
                "choices": [
                    "probe",
                    "network",
                    "driver",
                    "claims",
                    "teams",
                    "utilization",
                    "placement",
                    "replay",
                    "report",
                    "what_if",
                ],
            },
            "hosts": {"type": "list", "elements": "str", "default": []},
            "python": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    try:
        results = preflight.run(module.params["python"])
    except preflight.PreflightError as exc:
        module.fail_json(msg=f"python: {exc}")
    module.exit_json(changed=False, python=results, interpreter=sys.executable)


if __name__ == "__main__":
    main()
