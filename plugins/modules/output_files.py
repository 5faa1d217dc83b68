# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: output_files
short_description: Make a directory hold exactly a set of rendered files, in one call
version_added: 0.2.0
description:
  - Creates O(dest) when missing, writes each file of O(files) whose content or mode differs
    (each replaced atomically, so a reader never sees half of it), and removes the files of
    O(dest) that match O(prune) and are not in O(files). Files that are already right are
    left alone; nothing else in O(dest) is touched.
  - The claims, teams, placement and topology roles write their objects, kustomizations and
    summaries with it, on the controller. Through its action plugin the files are rendered
    and written in the controller's process (a C(template) entry is rendered exactly as
    M(ansible.builtin.template) renders it, with the entry as C(item)), so a directory of a
    hundred objects costs one task, not a hundred module runs.
requirements:
  - Python >= 3.9 where it runs; through its action plugin, the controller's Python (nothing beyond ansible-core)
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Reports the files it would write and remove, with their diff, and changes nothing.
    support: full
  diff_mode:
    description: The content before and after of every file written or removed.
    support: full
options:
  dest:
    description: The directory.
    type: path
    required: true
  files:
    description:
      - The files, each a dict with C(name) (a plain file name, no C(/)) and exactly one of
        C(content) (the text) or C(template) (a template of the role's C(templates/), found as
        M(ansible.builtin.template) finds it; through the action plugin only).
      - A template sees the entry as C(item), so other keys of the entry (C(object)) are its data.
    type: list
    elements: dict
    required: true
  prune:
    description:
      - Shell patterns of file names (C(*.yaml)); a file of O(dest) that matches one and is not
        in O(files) is removed (an object that is no longer rendered). Directories are never removed.
    type: list
    elements: str
    default: []
  mode:
    description: The permissions of the files written, in octal; C(preserve) leaves them as they are.
    type: raw
    default: "0644"
  directory_mode:
    description:
      - The permissions of O(dest), in octal, set when it is created or differs; C(preserve) leaves
        an existing directory's alone (the output directory itself, which the user owns).
    type: raw
    default: "0755"
"""

EXAMPLES = r"""
- name: Write the rendered objects and their kustomization; remove objects no longer rendered
  aligned.dra.output_files:
    dest: "{{ aligned_dra_output_dir }}/{{ site }}/claims"
    files: >-
      {{ rendered.files | map('combine', {'template': 'object.yaml.j2'})
         + [{'name': 'kustomization.yaml', 'template': 'kustomization.yaml.j2'}] }}
    prune: ["*.yaml"]
  delegate_to: localhost

- name: One file from content
  aligned.dra.output_files:
    dest: "{{ aligned_dra_output_dir }}/west"
    files:
      - name: summary.json
        content: "{{ summary | to_nice_json(sort_keys=true) }}\n"
"""

RETURN = r"""
written:
  description: The directory (ending in C(/)) when created or its mode set, and the files written (in check mode, those that would be).
  returned: always
  type: list
  elements: str
removed:
  description: The files removed (in check mode, those that would be).
  returned: always
  type: list
  elements: str
files:
  description: How many files were given.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils import output_files


def main() -> None:
    module = AnsibleModule(
        argument_spec=output_files.argument_spec(),
        supports_check_mode=True,
    )
    try:
        contents = output_files.file_contents(module.params["files"])
        result = output_files.write_files(module.params, contents, module.check_mode, module._diff)
    except (ValueError, output_files.OutputFileError) as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
