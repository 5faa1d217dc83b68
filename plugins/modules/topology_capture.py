# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0

from __future__ import annotations

DOCUMENTATION = r"""
---
module: topology_capture
short_description: Capture what the topology probe reads from a node into a snapshot archive
version_added: 0.1.0
description:
  - Copies exactly the part of sysfs and procfs that M(aligned.dra.topology_info) reads (NUMA nodes,
    every PCI function on the paths of C(bus/pci/devices) with its bridges, the network, RDMA and DRM
    class devices of PCI functions, RDMA ports and character devices, the NVIDIA GPU information and
    the host name) into a C(.tar.gz) with C(sys/) and C(proc/) at the top.
  - A probe of the extracted snapshot returns what a probe of the node returns, so claim templates can
    be planned offline on captured nodes (C(playbooks/what_if.yml) takes snapshots directly).
  - Files are read with real reads (sysfs reports every attribute as 4096 bytes long). Attributes that
    exist but cannot be read (write-only, root-only, the speed of a link that is down) are left out and
    listed in RV(left_out); binary attributes such as C(config) and C(resource*) are never read.
  - Symlinks stay symlinks, relative and inside the tree; a link that points outside the sysfs root is
    left out (and listed in RV(left_out)).
  - The archive is deterministic (sorted members, fixed times, owners and modes, no time or name in the
    gzip header), so capturing an unchanged node again gives the same bytes and reports no change.
  - The playbook C(aligned.dra.capture) runs this module on every node and fetches the snapshots to
    the controller.
requirements:
  - Python >= 3.9 on the node, standard library only
author:
  - aligned.dra maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: The snapshot is built in memory and compared with O(dest); nothing is written.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: The archive is binary; RV(sha256) tells whether it changed.
options:
  dest:
    description:
      - Path of the snapshot archive to write on the node. Its directory must exist.
      - The file is replaced atomically, and only when its bytes change.
    type: path
    required: true
  sysfs_root:
    description:
      - Root of the sysfs tree to capture. Point it at a captured tree to capture that again.
    type: path
    default: /sys
  procfs_root:
    description:
      - Root of the procfs tree (C(sys/kernel/hostname), C(driver/nvidia/gpus/*/information)).
    type: path
    default: /proc
  redact_addresses:
    description:
      - Leave out the network interfaces' MAC addresses (C(address)) and the RDMA devices' node GUIDs
        (C(node_guid)). A probe of the snapshot then reports them as V(null); planning does not need them.
    type: bool
    default: false
notes:
  - The snapshot holds the host name, PCI ids, addresses, drivers, NUMA and CPU locality, link speeds,
    SR-IOV counts, interface names, types, states and MTUs, RDMA device and port states and, unless
    O(redact_addresses) is set, MAC addresses and RDMA node GUIDs. It holds no PCI config space, no
    firmware, no kernel command line and nothing of interfaces that belong to no PCI function (C(lo),
    bridges, veths).
seealso:
  - module: aligned.dra.topology_info
"""

EXAMPLES = r"""
- name: Capture this node's topology
  aligned.dra.topology_capture:
    dest: /var/tmp/topology.tar.gz
  register: capture

- name: Capture without MAC addresses and RDMA node GUIDs
  aligned.dra.topology_capture:
    dest: /var/tmp/topology.tar.gz
    redact_addresses: true

- name: Capture a tree that was extracted from another snapshot
  aligned.dra.topology_capture:
    sysfs_root: /srv/trees/node17/sys
    procfs_root: /srv/trees/node17/proc
    dest: /srv/snapshots/node17.tar.gz
"""

RETURN = r"""
dest:
  description: The archive's path.
  returned: always
  type: str
  sample: /var/tmp/topology.tar.gz
sha256:
  description: SHA-256 of the archive's bytes (of the archive that would be written, in check mode).
  returned: always
  type: str
  sample: 1b4f0e9851971998e732078544c96b36c3d01cedf7caa332359d6f1d83567014
size:
  description: Size of the archive in bytes.
  returned: always
  type: int
  sample: 45845
counts:
  description: Number of C(directories), C(files) and C(links) in the archive.
  returned: always
  type: dict
  sample: {"directories": 230, "files": 1302, "links": 220}
left_out:
  description: Paths (relative to the archive's top) that exist on the node but were left out, with the reason.
  returned: always
  type: list
  elements: str
  sample: ["sys/devices/pci0000:00/0000:00:02.0/driver: link to ../../../../bus/pci/drivers/nvme outside the sysfs root"]
"""

import hashlib
import os
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aligned.dra.plugins.module_utils.node.snapshots.capture import CaptureError, capture_archive


def _current(dest: str) -> bytes | None:
    try:
        with open(dest, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "dest": {"type": "path", "required": True},
            "sysfs_root": {"type": "path", "default": "/sys"},
            "procfs_root": {"type": "path", "default": "/proc"},
            "redact_addresses": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    dest = params["dest"]
    if not dest or dest.endswith("/"):
        module.fail_json(msg=f"dest: {dest!r} is no file name")
    parent = os.path.dirname(os.path.abspath(dest))
    if os.path.isdir(dest):
        module.fail_json(msg=f"dest: {dest} is a directory")
    if not os.path.isdir(parent):
        module.fail_json(msg=f"dest: directory {parent} does not exist")
    try:
        data, result = capture_archive(params["sysfs_root"], params["procfs_root"], params["redact_addresses"])
    except CaptureError as exc:
        module.fail_json(msg=str(exc))
    try:
        changed = _current(dest) != data
    except OSError as exc:
        module.fail_json(msg=f"dest: cannot read {dest}: {exc.strerror or exc}")
    if changed and not module.check_mode:
        tmp = None
        try:
            fd, tmp = tempfile.mkstemp(prefix=".topology-capture-", suffix=".tmp", dir=parent)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            try:
                mode = stat.S_IMODE(os.stat(dest).st_mode)  # a replaced file keeps its mode
            except FileNotFoundError:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o644 & ~umask
            os.chmod(tmp, mode)
            os.replace(tmp, dest)
            tmp = None
        except OSError as exc:
            module.fail_json(msg=f"dest: cannot write {dest}: {exc.strerror or exc}")
        finally:
            if tmp is not None and os.path.lexists(tmp):
                os.unlink(tmp)
    module.exit_json(
        changed=changed,
        dest=dest,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        **result,
    )


if __name__ == "__main__":
    main()
