# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: topology_snapshot
short_description: Unpack a topology snapshot into a sysfs and procfs root that can be probed
version_added: 0.1.0
description:
  - Turns a snapshot archive (as M(aligned.dra.topology_capture) writes them, or any C(tar) archive with
    C(sys/) and C(proc/) at the top or in its single top-level directory) into the directory O(dest),
    which then holds C(sys/) and C(proc/) for M(aligned.dra.topology_info).
  - Extraction is safe. An archive with absolute paths, C(..) in a path, links that are absolute or point
    outside the archive, hard links, devices or FIFOs is refused as a whole.
  - The tree is built next to O(dest) and renamed into place, so nobody sees a half-extracted tree.
    A stamp in O(dest) (C(.materialized.json)) records a checksum of the archive; while it matches,
    nothing is done. A non-empty O(dest) without that stamp is never replaced (the module fails).
  - Runs where the archive is, usually the controller (C(playbooks/what_if.yml) runs it on localhost).
requirements:
  - Python standard library only (runs where the archive is, usually the controller)
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: The archive is checked against the stamp only; nothing is extracted.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: A directory tree has no useful diff.
options:
  src:
    description:
      - The snapshot archive (C(.tar.gz), C(.tar.bz2), C(.tar.xz) or C(.tar)).
    type: path
    required: true
  dest:
    description:
      - Directory to hold the tree. It is replaced when the archive changes; its parent is created.
      - Use one directory per snapshot, in a cache that nothing else writes to.
    type: path
    required: true
seealso:
  - module: aligned.dra.topology_capture
  - module: aligned.dra.topology_info
"""

EXAMPLES = r"""
- name: Unpack a captured node
  aligned.dra.topology_snapshot:
    src: snapshots/node17.tar.gz
    dest: ~/.cache/aligned-dra/snapshots/node17
  register: tree

- name: Probe it
  aligned.dra.topology_info:
    sysfs_root: "{{ tree.sysfs_root }}"
    procfs_root: "{{ tree.procfs_root }}"
"""

RETURN = r"""
dest:
  description: The directory that holds C(sys/) and C(proc/).
  returned: always
  type: str
  sample: /home/ops/.cache/aligned-dra/snapshots/node17
sysfs_root:
  description: The C(sys/) directory, for O(aligned.dra.topology_info#module:sysfs_root).
  returned: always
  type: str
  sample: /home/ops/.cache/aligned-dra/snapshots/node17/sys
procfs_root:
  description: The C(proc/) directory, for O(aligned.dra.topology_info#module:procfs_root).
  returned: always
  type: str
  sample: /home/ops/.cache/aligned-dra/snapshots/node17/proc
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.node.snapshots.archive import (
    STAMP,
    SnapshotError,
    check_archive,
    materialize_snapshot,
    snapshot_checksum,
    stamp_matches,
)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "src": {"type": "path", "required": True},
            "dest": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    src = module.params["src"]
    dest = module.params["dest"]
    if not dest:
        module.fail_json(msg="dest: give a directory")
    dest = os.path.abspath(dest)
    if not os.path.isfile(src):
        module.fail_json(msg=f"src: {src} is not a file")
    if os.path.lexists(dest) and not os.path.isdir(dest):
        module.fail_json(msg=f"dest: {dest} exists and is not a directory")
    if os.path.isdir(dest) and os.listdir(dest) and not os.path.isfile(os.path.join(dest, STAMP)):
        module.fail_json(msg=f"dest: {dest} is not empty and was not made by this module (no {STAMP})")
    try:
        check_archive(src)
        checksum = snapshot_checksum(src)
    except SnapshotError as exc:
        module.fail_json(msg=f"src: {exc}")
    except OSError as exc:
        module.fail_json(msg=f"src: cannot read {src}: {exc.strerror or exc}")
    changed = not stamp_matches(dest, checksum)
    if changed and not module.check_mode:
        try:
            dest, changed = materialize_snapshot(src, dest)
        except (SnapshotError, OSError) as exc:
            module.fail_json(msg=f"dest: cannot make {dest} from {src}: {getattr(exc, 'strerror', None) or exc}")
    module.exit_json(
        changed=changed,
        dest=dest,
        sysfs_root=os.path.join(dest, "sys"),
        procfs_root=os.path.join(dest, "proc"),
    )


if __name__ == "__main__":
    main()
