# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: topology_output
short_description: Write every node's probed topology to the site's output directory, in one call
version_added: 0.2.0
description:
  - Writes C(<output_dir>/<site>/nodes/<node>.json) for every node, and creates the C(nodes)
    directory of every site in O(sites). A file whose content is unchanged is left alone; each
    file is replaced atomically.
  - The topology role runs it once per play on the controller (its action plugin reads each
    node's C(aligned_dra_topology) and C(aligned_dra_site) from C(hostvars), and the whole
    topology from the file the probe's fact names, one node at a time), so the output costs no
    worker round per node. As a module it takes the topologies in O(nodes).
requirements:
  - Python >= 3.9 where it runs; through its action plugin, the controller's Python (nothing beyond ansible-core)
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Reports the files it would write and writes nothing.
    support: full
  diff_mode:
    description: Lists the files written.
    support: full
options:
  output_dir:
    description: The collection's output directory (C(aligned_dra_output_dir)).
    type: path
    required: true
  nodes:
    description:
      - Per node, C(site) and C(topology) (what M(aligned.dra.topology_info) returned).
      - Through the action plugin, taken from the play's hosts that have a topology.
    type: dict
    default: {}
  sites:
    description: Sites whose C(nodes) directory is created even without a node to write.
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Write the node files of the play's hosts
  aligned.dra.topology_output:
    output_dir: "{{ aligned_dra_output_dir }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
written:
  description: The directories (ending in C(/)) and files created or written (in check mode, those that would be).
  returned: always
  type: list
  elements: str
nodes:
  description: How many nodes' facts were given.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError, topology_output


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "output_dir": {"type": "path", "required": True},
            "nodes": {"type": "dict", "default": {}},
            "sites": {"type": "list", "elements": "str", "default": []},
        },
        supports_check_mode=True,
    )
    try:
        result = topology_output.run(module.params, module.check_mode, module._diff)
    except StageError as exc:
        module.fail_json(msg=str(exc), **exc.fields)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
