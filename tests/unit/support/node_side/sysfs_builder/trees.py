# SPDX-License-Identifier: Apache-2.0
"""What the tests of tests/support/node_side/sysfs_builder/ share: the layouts and readers of a built tree.

They check properties of the produced trees that a kernel guarantees and that
the topology probe relies on (links resolve, SR-IOV links agree both ways,
bus numbers are depth first, ...), not the builder's internals.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[4]

LAYOUTS = sorted(p.stem for p in (TESTS / "fixtures" / "layouts").glob("*.yml"))

BDF_RE = re.compile(r"^[0-9a-f]{4,5}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")

# Links the layouts deliberately leave dangling (captured snapshots have them too).
DANGLING_OK = {"firmware_node"}

NUMA1 = {"nodes": [{"id": 0, "cpus": "0-7"}]}


def read(path: Path) -> str:
    return path.read_text().strip()


def pci_functions(root: Path) -> dict[str, Path]:
    """bdf -> resolved function directory, from sys/bus/pci/devices."""
    devices = root / "sys" / "bus" / "pci" / "devices"
    return {link.name: link.resolve() for link in devices.iterdir()}


def pci_class(fdir: Path) -> int:
    return int(read(fdir / "class"), 16)


def pci_ancestors(fdir: Path, root: Path) -> list[str]:
    """BDFs of the PCI functions above ``fdir`` (nearest last), from the directory path."""
    rel = fdir.relative_to(root / "sys" / "devices")
    return [part for part in rel.parts[:-1] if BDF_RE.match(part)]
