# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: an IOMMU group for every PCI function of the fake tree that has none.

``python3 iommu_groups.py SYS_ROOT TYPE`` gives each function of
``SYS_ROOT/bus/pci/devices`` without an ``iommu_group`` link its own group
(numbered after the highest there) of type TYPE, laid out as the kernel does:
``kernel/iommu_groups/<n>/{type,devices/<bdf>}`` and the function's
``iommu_group`` link. The SR-IOV part of the tree is built without groups and
the GPUDirect part with them; the probe's IOMMU mode counts every GPU's and
physical NIC's group.
"""

import os
import sys


def main(argv):
    root, kind = argv
    groups = os.path.join(root, "kernel", "iommu_groups")
    devices = os.path.join(root, "bus", "pci", "devices")
    os.makedirs(groups, exist_ok=True)
    number = max((int(name) for name in os.listdir(groups) if name.isdigit()), default=-1)
    for bdf in sorted(os.listdir(devices)):
        function = os.path.realpath(os.path.join(devices, bdf))
        if os.path.lexists(os.path.join(function, "iommu_group")):
            continue
        number += 1
        group = os.path.join(groups, str(number))
        os.makedirs(os.path.join(group, "devices"))
        with open(os.path.join(group, "type"), "w", encoding="ascii") as fh:
            fh.write(kind + "\n")
        os.symlink(os.path.relpath(function, os.path.join(group, "devices")), os.path.join(group, "devices", bdf))
        os.symlink(os.path.relpath(group, function), os.path.join(function, "iommu_group"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
