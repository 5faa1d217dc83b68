# SPDX-License-Identifier: Apache-2.0
"""A small node for the ACS, p2p and gpudirect tests of the probe: layouts and their probe.

Host bridge pci0000:00: root port 0000:00:01.0 -> switch upstream port
0000:01:00.0 -> downstream ports 0000:02:00.0 (H100 0000:03:00.0) and
0000:02:01.0 (ConnectX-7 0000:04:00.0, RDMA mlx5_0, two VFs 0000:04:00.1 and
0000:04:00.2). Host bridge pci0000:80: root port 0000:80:01.0 -> ConnectX-7
0000:81:00.0 (mlx5_1). The probe sees the GPU at PIX from the first NIC
(below one switch), at NODE from the second (another host bridge).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import probe
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree

ROOT_PORT, UPSTREAM, GPU_PORT, NIC_PORT = "0000:00:01.0", "0000:01:00.0", "0000:02:00.0", "0000:02:01.0"
GPU, NIC, VFS = "0000:03:00.0", "0000:04:00.0", ["0000:04:00.1", "0000:04:00.2"]
FAR_PORT, FAR_NIC = "0000:80:01.0", "0000:81:00.0"

_CX7 = {"vendor": 0x15B3, "device": 0x1021, "class": 0x020700, "driver": "mlx5_core"}

BASE: dict[str, Any] = {
    "name": "gpudirect-small",
    "numa": {"nodes": [{"id": 0, "cpus": "0-7"}]},
    "hostbridges": [
        {
            "bus": 0x00,
            "numa_node": 0,
            "children": [
                {
                    "type": "bridge",
                    "addr": "01.0",
                    "vendor": 0x8086,
                    "device": 0x352A,
                    "children": [
                        {
                            "type": "switch",
                            "vendor": 0x1000,
                            "device": 0xC030,
                            "downstream": [
                                {"children": [{"vendor": 0x10DE, "device": 0x2330, "class": 0x030200}]},
                                {
                                    "children": [
                                        dict(
                                            _CX7,
                                            rdma={"name": "mlx5_0", "link_layer": "InfiniBand"},
                                            sriov={"totalvfs": 8, "numvfs": 2, "vf_device": 0x101E},
                                        )
                                    ]
                                },
                            ],
                        }
                    ],
                }
            ],
        },
        {
            "bus": 0x80,
            "numa_node": 0,
            "children": [
                {
                    "type": "bridge",
                    "addr": "01.0",
                    "vendor": 0x8086,
                    "device": 0x352A,
                    "children": [dict(_CX7, rdma={"name": "mlx5_1", "link_layer": "InfiniBand"})],
                }
            ],
        },
    ],
}


def layout(gpu_port: dict[str, Any] | None = None, nic: dict[str, Any] | None = None, **top: Any) -> dict[str, Any]:
    """The small node with ``top`` keys on the layout, ``gpu_port`` on the GPU's switch port, ``nic`` on the NIC."""
    spec = copy.deepcopy(BASE)
    spec.update(top)
    ports = spec["hostbridges"][0]["children"][0]["children"][0]["downstream"]
    ports[0].update(gpu_port or {})
    ports[1]["children"][0].update(nic or {})
    return spec


def function_dir(root: Path, bdf: str) -> Path:
    return (root / "sys/bus/pci/devices" / bdf).resolve()


def probed(root: Path) -> dict[str, Any]:
    return probe(str(root / "sys"), str(root / "proc"))


def build_and_probe(tmp_path: Path, spec: dict[str, Any]) -> dict[str, Any]:
    return probed(build_tree(spec, tmp_path))
