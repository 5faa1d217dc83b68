# SPDX-License-Identifier: Apache-2.0
"""CPUs, NUMA nodes and the kernel's cpulist and cpumask formats (tests/support/node_side/sysfs_builder/numa.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.node_side import sysfs_builder as sb
from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import LAYOUTS, read


@pytest.mark.parametrize("name", LAYOUTS)
def test_numa_and_cpu_files(trees: dict[str, Path], name: str) -> None:
    root = trees[name]
    node_root = root / "sys" / "devices" / "system" / "node"
    cpus_online = sb.parse_cpulist(read(root / "sys" / "devices" / "system" / "cpu" / "online"))
    nodes = sorted(node_root.glob("node[0-9]*"))
    assert nodes
    seen: list[int] = []
    for node in nodes:
        nid = int(node.name[4:])
        cpus = sb.parse_cpulist(read(node / "cpulist"))
        seen += cpus
        assert len(read(node / "distance").split()) == len(nodes)
        assert read(node / "distance").split()[nodes.index(node)] == "10"
        assert re.match(rf"Node {nid} MemTotal: +\d+ kB$", read(node / "meminfo").splitlines()[0])
        for cpu in cpus:
            topo = root / "sys" / "devices" / "system" / "cpu" / f"cpu{cpu}" / "topology"
            assert read(topo / "physical_package_id").isdigit() and read(topo / "core_id").isdigit()
    assert sorted(seen) == cpus_online
    assert read(root / "proc" / "cpuinfo").count("processor\t:") == len(cpus_online)


def test_node_dir_may_be_absent(tmp_path: Path) -> None:
    spec = {"numa": {"node_dir": False, "nodes": [{"id": 0, "cpus": "0-3"}]}, "hostbridges": []}
    sb.build_tree(spec, tmp_path)
    assert not (tmp_path / "sys" / "devices" / "system" / "node").exists()
    assert read(tmp_path / "sys" / "devices" / "system" / "cpu" / "online") == "0-3"


def test_cpumask_and_cpulist_formatting() -> None:
    assert sb.format_cpulist([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert sb.format_cpumask([0, 1, 2, 3], 16) == "0000000f"
    assert sb.format_cpumask([32], 64) == "00000001,00000000"
    assert sb.parse_cpulist("0-2,5") == [0, 1, 2, 5]
