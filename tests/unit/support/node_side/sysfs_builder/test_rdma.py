# SPDX-License-Identifier: Apache-2.0
"""RDMA devices with several ports, next to the less common layout keys (tests/support/node_side/sysfs_builder/rdma.py)."""

from __future__ import annotations

import os
from pathlib import Path

from ansible_collections.aligned.dra.tests.support.node_side import sysfs_builder as sb
from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import pci_functions, read


def test_multiport_rdma_missing_bridge_and_dangling_links(tmp_path: Path) -> None:
    spec = {
        "name": "robust",
        "numa": {"nodes": [{"id": 0, "cpus": "0-3"}, {"id": 1, "cpus": "4-7"}], "distances": [[10, 20], [20, 10]]},
        "hostbridges": [
            {
                "bus": 0x5D,
                "numa_node": 1,
                "children": [
                    {
                        "type": "bridge",
                        "addr": "02.0",
                        "vendor": 0x8086,
                        "device": 0x2032,
                        "in_bus_devices": False,
                        "links": {"firmware_node": "../../LNXSYSTM:00/device:5d"},
                        "children": [
                            {
                                "vendor": 0x15B3,
                                "device": 0x1003,
                                "class": 0x028000,
                                "driver": "mlx4_core",
                                "driver_dir": False,
                                "netdevs": [{"name": "ib0", "type": "ib"}, {"name": "enp94s0d1", "type": "eth"}],
                                "rdma": {
                                    "name": "mlx4_0",
                                    "ports": [
                                        {"link_layer": "InfiniBand", "rate": "56 Gb/sec (4X FDR)"},
                                        {"link_layer": "Ethernet", "rate": "40 Gb/sec (4X QDR)"},
                                    ],
                                },
                            }
                        ],
                    }
                ],
            }
        ],
    }
    sb.build_tree(spec, tmp_path)
    funcs = pci_functions(tmp_path)
    bridge_dir = tmp_path / "sys" / "devices" / "pci0000:5d" / "0000:5d:02.0"
    assert bridge_dir.is_dir() and "0000:5d:02.0" not in funcs
    nic = funcs["0000:5e:00.0"]
    assert nic.parent == bridge_dir.resolve()
    assert os.path.islink(bridge_dir / "firmware_node") and not (bridge_dir / "firmware_node").exists()
    assert os.path.islink(nic / "driver") and not (nic / "driver").exists()
    assert "DRIVER=mlx4_core" in read(nic / "uevent")
    ports = nic / "infiniband" / "mlx4_0" / "ports"
    assert sorted(p.name for p in ports.iterdir()) == ["1", "2"]
    assert read(ports / "2" / "link_layer") == "Ethernet"
    assert read(ports / "2" / "gid_attrs" / "ndevs" / "0") == "enp94s0d1"
    assert [read(nic / "net" / n / "dev_port") for n in ("ib0", "enp94s0d1")] == ["0", "1"]
    umads = sorted((nic / "infiniband_mad").iterdir())
    assert [read(u / "port") for u in umads] == ["1", "2"]
    assert read(nic / "local_cpulist") == "4-7" and read(nic / "numa_node") == "1"
    assert read(tmp_path / "sys" / "devices" / "system" / "node" / "node1" / "distance") == "20 10"
