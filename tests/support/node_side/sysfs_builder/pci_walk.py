# SPDX-License-Identifier: Apache-2.0
"""The PCI hierarchy: host bridges, buses numbered as the kernel's scan does, switches and bridges."""

from __future__ import annotations

import os

from .layouts import LayoutError, Spec, integer, parse_addr, parse_link


class PciWalk:
    """Part of the builder (:class:`~.builder.Builder`): the layout's ``hostbridges:``, depth first."""

    def write_pci(self) -> None:
        self.w.mkdir(os.path.join(self.sys, "bus", "pci", "devices"))
        self.w.mkdir(os.path.join(self.sys, "bus", "pci", "drivers"))
        devices = os.path.join(self.sys, "devices")
        for i, hb in enumerate(self.spec.get("hostbridges") or []):
            self._hostbridge(hb, devices, f"hostbridges[{i}]")
        # VFs are probed after every PF, like the kernel when sriov_numvfs is
        # written at boot: their auto names come after the PFs' ones.
        for pf, sriov, rids, what in self.vf_jobs:
            self._write_vfs(pf, sriov, rids, what)

    def _hostbridge(self, hb: Spec, parent_dir: str, what: str) -> None:
        domain = integer(hb.get("domain", 0), f"{what}.domain")
        bus = integer(hb.get("bus", 0), f"{what}.bus")
        numa = integer(hb.get("numa_node", -1), f"{what}.numa_node")
        if hb.get("parent"):
            parent_dir = os.path.join(self.sys, "devices", str(hb["parent"]).strip("/"))
        name = f"pci{domain:04x}:{bus:02x}"
        hb_dir = os.path.join(parent_dir, name)
        self._claim_bus(domain, bus, f"{what} ({name})")
        self.w.mkdir(hb_dir)
        self.w.write(os.path.join(hb_dir, "uevent"), "")
        if hb.get("files"):
            self.w.files(hb_dir, dict(hb["files"]))
        self._pci_bus_dir(hb_dir, domain, bus, numa)
        link = parse_link(hb.get("link"), f"{what}.link") if "link" in hb else None
        self._walk_bus(hb.get("children") or [], hb_dir, domain, bus, numa, link, bus + 1, what)

    def _claim_bus(self, domain: int, bus: int, what: str) -> None:
        if bus > 0xFF:
            raise LayoutError(f"{what}: bus number {bus:#x} exceeds 0xff")
        key = (domain, bus)
        if key in self.used_buses:
            raise LayoutError(f"{what}: bus {domain:04x}:{bus:02x} already used by {self.used_buses[key]}")
        self.used_buses[key] = what

    @staticmethod
    def _expand(entries: list[Spec], what: str) -> list[tuple[Spec, int, str]]:
        """Expand switch/functions sugar; returns (node, default dev, label)."""
        out: list[tuple[Spec, int, str]] = []
        for idx, raw in enumerate(entries):
            label = f"{what}.children[{idx}]"
            if not isinstance(raw, dict):
                raise LayoutError(f"{label}: expected a mapping, got {raw!r}")
            kind = raw.get("type", "endpoint")
            if kind == "switch":
                common = {
                    k: v
                    for k, v in raw.items()
                    if k not in ("type", "upstream", "downstream", "children", "addr", "dev", "fn")
                }
                up = dict(common)
                for key in ("addr", "dev", "fn"):
                    if key in raw:
                        up[key] = raw[key]
                up.update(raw.get("upstream") or {})
                up["type"] = "bridge"
                up["role"] = "upstream"
                downstream = raw.get("downstream", 0)
                if isinstance(downstream, int):
                    downstream = [{} for _port in range(downstream)]
                ports = []
                for i, port in enumerate(downstream):
                    p = {k: v for k, v in common.items() if k not in ("bus", "subordinate")}
                    p.setdefault("dev", i)
                    p.update(port or {})
                    p["type"] = "bridge"
                    p["role"] = "downstream"
                    ports.append(p)
                up["children"] = ports
                out.append((up, idx, label))
            elif "functions" in raw:
                base = {k: v for k, v in raw.items() if k != "functions"}
                for fi, func in enumerate(raw["functions"]):
                    merged = dict(base)
                    merged.setdefault("fn", fi)
                    merged.update(func or {})
                    out.append((merged, idx, f"{label}.functions[{fi}]"))
            else:
                out.append((raw, idx, label))
        return out

    def _walk_bus(
        self,
        entries: list[Spec],
        parent_dir: str,
        domain: int,
        bus: int,
        numa: int,
        parent_link: tuple[str, str] | None,
        next_bus: int,
        what: str,
    ) -> int:
        nodes = []
        for node, default_dev, label in self._expand(entries, what):
            dev, fn = parse_addr(node, default_dev, label)
            nodes.append((dev, fn, node, label))
        nodes.sort(key=lambda item: (item[0], item[1]))
        devs_with_fns: dict[int, int] = {}
        for dev, _fn, _node, _label in nodes:
            devs_with_fns[dev] = devs_with_fns.get(dev, 0) + 1
        # First pass: every endpoint on this bus (and the buses its VFs need).
        pending_bridges = []
        for dev, fn, node, label in nodes:
            kind = node.get("type", "endpoint")
            if kind in ("bridge", "rootport", "port"):
                pending_bridges.append((dev, fn, node, label))
                continue
            if kind != "endpoint":
                raise LayoutError(f"{label}: unknown type {kind!r}")
            func = self._function(
                node,
                parent_dir,
                domain,
                bus,
                dev,
                fn,
                numa,
                parent_link,
                label,
                multifunction=devs_with_fns[dev] > 1,
            )
            last_vf_bus = self._plan_vfs(func, node, label)
            if last_vf_bus is not None and last_vf_bus >= next_bus:
                for extra in range(max(next_bus, bus + 1), last_vf_bus + 1):
                    self._claim_bus(domain, extra, f"{label} (VF bus)")
                next_bus = last_vf_bus + 1
        # Second pass: bridges, depth first, in devfn order.
        for dev, fn, node, label in pending_bridges:
            secondary = integer(node.get("bus", next_bus), f"{label}.bus")
            if secondary < next_bus and "bus" not in node:
                secondary = next_bus
            func = self._function(
                node,
                parent_dir,
                domain,
                bus,
                dev,
                fn,
                numa,
                parent_link,
                label,
                multifunction=devs_with_fns[dev] > 1,
                secondary=secondary,
            )
            self._claim_bus(domain, secondary, label)
            child_link = parse_link(node["link"], f"{label}.link") if "link" in node else parent_link
            end = self._walk_bus(
                node.get("children") or [],
                func.path,
                domain,
                secondary,
                func.numa_node,
                child_link,
                max(next_bus, secondary + 1),
                label,
            )
            subordinate = max(end - 1, secondary)
            if "subordinate" in node:
                wanted = integer(node["subordinate"], f"{label}.subordinate")
                for extra in range(subordinate + 1, wanted + 1):
                    self._claim_bus(domain, extra, f"{label} (reserved)")
                subordinate = max(subordinate, wanted)
            func.subordinate = subordinate
            self._bridge_files(func)
            next_bus = subordinate + 1
        return next_bus
