# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: node_library
short_description: Install the collection's node library on a node as one zip file
version_added: 0.2.0
description:
  - Zips the modules O(files) of this collection's C(module_utils) on the controller, under
    C(ansible_collections/aligned/dra/plugins/module_utils/) with an C(__init__.py) in every
    package, and copies the zip to O(dest) with M(ansible.builtin.copy). The zip's bytes depend
    only on the files' content (sorted entries, fixed timestamps), so an unchanged library is
    not copied again, and a changed one replaces the old file atomically.
  - The rdma and sriov roles install the library their boot-time units run with it, one file per
    node instead of one transfer per module. The units set C(PYTHONPATH) to O(dest) and run
    C(python3 -m ansible_collections.aligned.dra.plugins.module_utils.node.network.netconf).
  - An action plugin, which does its work on the controller and through M(ansible.builtin.copy).
requirements:
  - Python >= 3.9 on the node to import the library (zipimport, standard library only)
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: As M(ansible.builtin.copy) - reports whether the zip would change and copies nothing.
    support: full
  diff_mode:
    description: As M(ansible.builtin.copy) for a binary file.
    support: partial
options:
  dest:
    description: The zip file on the node; its directory must exist.
    type: path
    required: true
  files:
    description:
      - The modules, as paths under C(plugins/module_utils/) (C(node/network/netconf.py)); every
        module the entry point imports must be listed (a test checks the roles' lists against
        Ansible's own module_utils finder).
    type: list
    elements: str
    required: true
  owner:
    description: Owner of O(dest).
    type: str
  group:
    description: Group of O(dest).
    type: str
  mode:
    description: Permissions of O(dest).
    type: raw
    default: "0644"
"""

EXAMPLES = r"""
- name: Install the network library
  aligned.dra.node_library:
    dest: /usr/local/lib/aligned-dra/network.zip
    files: [node/__init__.py, node/network/__init__.py, node/network/netconf.py]
    owner: root
    group: root
"""

RETURN = r"""
files:
  description: How many modules the zip holds (not counting the C(__init__.py) files it adds).
  returned: always
  type: int
checksum:
  description: The zip's SHA-1, as M(ansible.builtin.copy) returns it.
  returned: success
  type: str
"""
