# SPDX-License-Identifier: Apache-2.0
"""TEST HARNESS: the writable sysfs trees of the Molecule "site" scenario's nodes.

Tests only, never shipped. Each node gets a layout of tests/fixtures/ built
by tests/support/node_side/sysfs_builder/ into OUTDIR/<node>/ (sys/ and proc/), which
prepare.yml copies into the node at /fixture, where tests/support/node_side/fake_sysfs_sriov.py
plays the kernel's part of SR-IOV writes:

- site-dgx: tests/fixtures/layouts/dgx-h100.yml (8 x H100, 8 x ConnectX-7
  IB) with SR-IOV on the management ConnectX-6 Dx port 0000:5a:00.0
  (eno1np0): 8 VFs at most, none yet, VFs from 0000:5a:00.2 on.
- site-mi300x: tests/fixtures/layouts/mi300x.yml (8 x MI300X, 8 x Thor2)
  with SR-IOV on the first Thor2 0000:02:00.0 (GPU 0000:01:00.0's NIC):
  16 VFs at most, none yet, VFs from 0000:02:00.1 on.
- site-cpu: tests/fixtures/site/cpu-only.yml (no GPU, RDMA or SR-IOV).

The GPU layouts are the fixtures every other test uses; only the SR-IOV
capability is added here, so the probe, the driver and the plan see the same
GPUs and NICs as there. VF device ids are those of the PF families' VFs
(ConnectX-6 Dx VF 0x101e; 0x1819 stands for a Thor2 VF).

    python molecule/site/trees.py OUTDIR
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(PROJECT / "tests" / "support" / "node_side"))

import sysfs_builder  # noqa: E402

SITE_FIXTURES = PROJECT / "tests" / "fixtures" / "site"


def _host_bridge(spec: dict, bus: int) -> dict:
    return next(hb for hb in spec["hostbridges"] if hb["bus"] == bus)


def dgx() -> dict:
    spec = sysfs_builder.load_layout("dgx-h100")
    # host bridge pci0000:59 -> root port -> ConnectX-6 Dx, function 0 (eno1np0)
    nic = _host_bridge(spec, 0x59)["children"][0]["children"][0]
    nic["functions"][0]["sriov"] = {"totalvfs": 8, "numvfs": 0, "offset": 2, "stride": 1, "vf_device": 0x101E}
    return spec


def mi300x() -> dict:
    spec = sysfs_builder.load_layout("mi300x")
    # host bridge pci0000:00 -> second root port -> Thor2. The layout's NICs
    # share one YAML anchor: copy this one before giving it SR-IOV.
    port = _host_bridge(spec, 0x00)["children"][1]
    nic = copy.deepcopy(port["children"][0])
    nic["sriov"] = {"totalvfs": 16, "numvfs": 0, "offset": 1, "stride": 1, "vf_device": 0x1819}
    port["children"] = [nic]
    return spec


def cpu_only() -> dict:
    return sysfs_builder.load_layout(SITE_FIXTURES / "cpu-only.yml")


NODES = {"site-dgx": dgx, "site-mi300x": mi300x, "site-cpu": cpu_only}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out = Path(argv[0])
    for node, make in NODES.items():
        sysfs_builder.build_tree(make(), out / node)
        print(out / node)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
