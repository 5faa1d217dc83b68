# SPDX-License-Identifier: Apache-2.0
"""The probe's NUMA nodes: CPUs, distances and memory of each."""

from __future__ import annotations

from .parsers import format_cpulist, parse_cpulist, parse_cpumask, parse_int

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .sysfs import Reader


class NumaProbe:
    """Part of the probe (:class:`prober._Probe`): reads ``devices/system/node``."""

    # Set by the probe's __init__.
    sys: str
    r: Reader

    def numa_nodes(self) -> list[dict[str, Any]]:
        base = self.sys + "/devices/system/node"
        nodes = []
        for name in self.r.listdir(base):
            if not name.startswith("node") or not name[4:].isdigit():
                continue
            path = base + "/" + name
            node_id = int(name[4:])
            cpulist = self.r.read(path + "/cpulist", expected=True)
            cpus = parse_cpulist(cpulist)
            if cpus is None:
                cpus = parse_cpumask(self.r.read(path + "/cpumap"))
            distances = None
            raw = self.r.read(path + "/distance", expected=True)
            if raw:
                try:
                    distances = [int(x) for x in raw.split()]
                except ValueError:
                    self.r.warn(f"unparsable NUMA distances in {path}/distance")
            nodes.append(
                {
                    "id": node_id,
                    "cpus": cpus or [],
                    "cpulist": format_cpulist(cpus or []),
                    "distances_raw": distances,
                    "memory_kb": self._node_memory(path),
                }
            )
        nodes.sort(key=lambda n: n["id"])
        # The kernel prints distances in the order of online node ids.
        ids = [n["id"] for n in nodes]
        for node in nodes:
            raw = node.pop("distances_raw")
            if raw is not None and len(raw) == len(ids):
                node["distances"] = {str(i): d for i, d in zip(ids, raw)}
            else:
                if raw is not None:
                    self.r.warn(f"NUMA node {node['id']}: {len(raw)} distances for {len(ids)} nodes")
                node["distances"] = None
        return nodes

    def _node_memory(self, path: str) -> int | None:
        text = self.r.read(path + "/meminfo")
        if not text:
            return None
        for line in text.splitlines():
            if "MemTotal:" in line:
                return parse_int(line.split("MemTotal:")[1].split()[0])
        return None
