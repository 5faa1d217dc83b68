# SPDX-License-Identifier: Apache-2.0
"""CPUs and NUMA nodes: ``sys/devices/system/{cpu,node}``, ``/proc/cpuinfo`` and ``/proc/meminfo``."""

from __future__ import annotations

import os

from .layouts import LayoutError, integer


def parse_cpulist(text: str) -> list[int]:
    """Parse a kernel cpulist (``0-3,8,10-11``) into a sorted list."""
    cpus: set[int] = set()
    text = str(text).strip()
    if not text:
        return []
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.update(range(int(lo), int(hi) + 1))
        elif part:
            cpus.add(int(part))
    return sorted(cpus)


def format_cpulist(cpus: list[int]) -> str:
    """Format CPUs the way the kernel's ``%*pbl`` does (``0-55,112-167``)."""
    out: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def format_cpumask(cpus: list[int], nbits: int) -> str:
    """Format CPUs the way the kernel's ``%*pb`` does: 32-bit hex groups, MSB first."""
    value = 0
    for cpu in cpus:
        value |= 1 << cpu
    groups = max(1, (nbits + 31) // 32)
    return ",".join(f"{(value >> (32 * g)) & 0xFFFFFFFF:08x}" for g in reversed(range(groups)))


class NumaWriter:
    """Part of the builder (:class:`~.builder.Builder`): the layout's ``cpu:`` and ``numa:``."""

    def _setup_cpus(self) -> None:
        numa = self.spec.get("numa") or {}
        nodes = numa.get("nodes") or []
        if not nodes:
            raise LayoutError("numa.nodes: at least one node is required")
        self.node_cpus: dict[int, list[int]] = {}
        self.node_mem: dict[int, int] = {}
        self.node_pkg: dict[int, int] = {}
        for i, node in enumerate(nodes):
            nid = integer(node.get("id", i), f"numa.nodes[{i}].id")
            self.node_cpus[nid] = parse_cpulist(str(node.get("cpus", "")))
            self.node_mem[nid] = integer(node.get("memory_kb", 16 * 1024 * 1024), "memory_kb")
            self.node_pkg[nid] = integer(node.get("package", nid), "package")
        self.all_cpus = sorted({c for cpus in self.node_cpus.values() for c in cpus})
        if not self.all_cpus:
            raise LayoutError("numa.nodes: no CPUs")
        cpu = self.spec.get("cpu") or {}
        possible = parse_cpulist(str(cpu.get("possible", f"0-{self.all_cpus[-1]}")))
        self.possible = possible
        self.nbits = possible[-1] + 1
        self.node_ids = sorted(self.node_cpus)
        dist = numa.get("distances")
        n = len(self.node_ids)
        if dist is None:
            dist = [[10 if a == b else 21 for b in range(n)] for a in range(n)]
        if len(dist) != n or any(len(row) != n for row in dist):
            raise LayoutError("numa.distances must be an N x N matrix")
        self.distances = [[int(x) for x in row] for row in dist]

    def cpus_for_node(self, node: int) -> list[int]:
        if node < 0 or node not in self.node_cpus:
            return self.all_cpus
        return self.node_cpus[node]

    def write_system(self) -> None:
        cpu_spec = self.spec.get("cpu") or {}
        node_dir = (self.spec.get("numa") or {}).get("node_dir", True)
        cpuinfo = self._write_cpus(cpu_spec, node_dir)
        self._write_proc(cpuinfo)
        if node_dir:
            self._write_nodes()

    def _write_cpus(self, cpu_spec: dict, node_dir: bool) -> dict[int, str]:
        """``sys/devices/system/cpu``; returns each CPU's ``/proc/cpuinfo`` paragraph."""
        w = self.w
        tpc = integer(cpu_spec.get("threads_per_core", 1), "cpu.threads_per_core")
        cpu_root = os.path.join(self.sys, "devices", "system", "cpu")
        allcpus = format_cpulist(self.all_cpus)
        w.files(
            cpu_root,
            {
                "online": allcpus,
                "present": allcpus,
                "possible": format_cpulist(self.possible),
                "offline": "",
                "kernel_max": "8191",
            },
        )
        pkg_cpus: dict[int, list[int]] = {}
        cpu_node: dict[int, int] = {}
        for nid in self.node_ids:
            pkg_cpus.setdefault(self.node_pkg[nid], []).extend(self.node_cpus[nid])
            for c in self.node_cpus[nid]:
                cpu_node[c] = nid
        cpuinfo: dict[int, str] = {}
        for pkg, cpus in sorted(pkg_cpus.items()):
            cpus.sort()
            ncores = max(1, len(cpus) // max(1, tpc))
            core_of = {c: i % ncores for i, c in enumerate(cpus)}
            for c in cpus:
                core = core_of[c]
                siblings = [x for x in cpus if core_of[x] == core]
                d = os.path.join(cpu_root, f"cpu{c}")
                w.files(
                    os.path.join(d, "topology"),
                    {
                        "physical_package_id": pkg,
                        "die_id": 0,
                        "core_id": core,
                        "thread_siblings_list": format_cpulist(siblings),
                        "thread_siblings": format_cpumask(siblings, self.nbits),
                        "core_siblings_list": format_cpulist(cpus),
                        "core_siblings": format_cpumask(cpus, self.nbits),
                        "package_cpus_list": format_cpulist(cpus),
                    },
                )
                w.write(os.path.join(d, "online"), "1")
                if node_dir:
                    w.link(
                        os.path.join(d, f"node{cpu_node[c]}"),
                        os.path.join(self.sys, "devices", "system", "node", f"node{cpu_node[c]}"),
                    )
                w.link(os.path.join(self.sys, "bus", "cpu", "devices", f"cpu{c}"), d)
                cpuinfo[c] = "\n".join(
                    [
                        f"processor\t: {c}",
                        f"vendor_id\t: {cpu_spec.get('vendor', 'GenuineIntel')}",
                        f"model name\t: {cpu_spec.get('model', 'Synthetic CPU')}",
                        f"physical id\t: {pkg}",
                        f"siblings\t: {len(cpus)}",
                        f"core id\t\t: {core}",
                        f"cpu cores\t: {ncores}",
                        "flags\t\t: fpu sse sse2 ht lm",
                        "",
                    ]
                )
        return cpuinfo

    def _write_proc(self, cpuinfo: dict[int, str]) -> None:
        w = self.w
        w.mkdir(self.proc)
        w.write(os.path.join(self.proc, "cpuinfo"), "\n".join(cpuinfo[c] for c in sorted(cpuinfo)))
        total = sum(self.node_mem.values())
        w.write(
            os.path.join(self.proc, "meminfo"),
            "".join(
                f"{label:<16}{value:>8} kB\n"
                for label, value in (
                    ("MemTotal:", total),
                    ("MemFree:", total * 9 // 10),
                    ("MemAvailable:", total * 9 // 10),
                )
            ),
        )

    def _write_nodes(self) -> None:
        w = self.w
        cpu_root = os.path.join(self.sys, "devices", "system", "cpu")
        node_root = os.path.join(self.sys, "devices", "system", "node")
        ids = format_cpulist(self.node_ids)
        with_cpu = format_cpulist([n for n in self.node_ids if self.node_cpus[n]])
        w.files(
            node_root,
            {
                "online": ids,
                "possible": ids,
                "has_cpu": with_cpu,
                "has_memory": ids,
                "has_normal_memory": ids,
            },
        )
        for i, nid in enumerate(self.node_ids):
            d = os.path.join(node_root, f"node{nid}")
            mem = self.node_mem[nid]
            meminfo = "".join(
                f"Node {nid} {label:<16}{value:>8} kB\n"
                for label, value in (
                    ("MemTotal:", mem),
                    ("MemFree:", mem * 9 // 10),
                    ("MemUsed:", mem - mem * 9 // 10),
                )
            )
            w.files(
                d,
                {
                    "cpulist": format_cpulist(self.node_cpus[nid]),
                    "cpumap": format_cpumask(self.node_cpus[nid], self.nbits),
                    "distance": " ".join(str(x) for x in self.distances[i]),
                    "meminfo": meminfo,
                },
            )
            for c in self.node_cpus[nid]:
                w.link(os.path.join(d, f"cpu{c}"), os.path.join(cpu_root, f"cpu{c}"))
            w.link(os.path.join(self.sys, "bus", "node", "devices", f"node{nid}"), d)
