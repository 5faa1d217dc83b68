# SPDX-License-Identifier: Apache-2.0
"""The probe's RDMA devices: ports and character devices, by owning PCI function."""

from __future__ import annotations

import os

from .parsers import parse_enum, parse_int, parse_rate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .sysfs import Reader


class RdmaProbe:
    """Part of the probe (:class:`prober._Probe`): reads ``class/infiniband`` and its character devices."""

    # Set by the probe's __init__; _owner comes from pci_walk.PciWalk.
    sys: str
    r: Reader
    _pf_ports: dict[str, list[tuple[dict[str, Any], str]]]
    _port_states: dict[str, str | None]
    _owner: Callable[[str], str | None]

    def _char_devices(self, class_name: str) -> dict[str, list[str]] | None:
        """{parent device dir: [names]} from ``class/<class_name>``; None if absent."""
        base = self.sys + "/class/" + class_name
        if not os.path.isdir(base):
            return None
        by_parent: dict[str, list[str]] = {}
        for name, path in self.r.class_links(base):
            # <parent>/infiniband_verbs/uverbsN
            parent = path[: path.rindex("/", 0, path.rindex("/"))]
            by_parent.setdefault(parent, []).append(name)
        return by_parent

    def _ports(self, path: str) -> list[dict[str, Any]]:
        """Ports of an RDMA device (a VF's are copied from its PF's, see below)."""
        r = self.r
        numbers: list[str] = []
        # Ports are numbered from 1; probing beats listing the directory.
        port = 1
        while os.path.isdir(f"{path}/ports/{port}") if port == 1 else r.read(f"{path}/ports/{port}/state"):
            numbers.append(str(port))
            port += 1
        if not numbers:
            numbers = sorted(r.listdir(path + "/ports"), key=lambda n: parse_int(n) or 0)
        ports = []
        for number in numbers:
            with r.directory(f"{path}/ports/{number}") as d:
                rate = d.read("rate")
                ports.append(
                    {
                        "port": parse_int(number),
                        "state": parse_enum(d.read("state")),
                        "phys_state": parse_enum(d.read("phys_state")),
                        "link_layer": d.read("link_layer"),
                        "rate": rate,
                        "rate_gbps": parse_rate(rate),
                    }
                )
        return ports

    def rdma_devices(self, physfn: dict[str, str]) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
        """RDMA devices by owning PCI function, and all of them.

        ``physfn`` maps VFs to PFs: a VF's port shares the PF's physical
        link (layer, rate, physical state), so only its logical state is read
        and the rest is copied from the PF's port.
        """
        by_function: dict[str, list[dict[str, Any]]] = {}
        base = self.sys + "/class/infiniband"
        found = []
        of_vfs = []
        per_parent: dict[str, int] = {}
        for name, path in self.r.class_links(base):
            bdf = self._owner(path)
            # Character devices sit beside infiniband/ in the parent device.
            parent = path[: path.rindex("/", 0, path.rindex("/"))]
            per_parent[parent] = per_parent.get(parent, 0) + 1
            (of_vfs if bdf in physfn else found).append((name, bdf, path, parent))
        verbs_by_parent = self._char_devices("infiniband_verbs")
        mads_by_parent = self._char_devices("infiniband_mad")
        entries: dict[str, dict[str, Any]] = {}

        def add(entry: dict[str, Any]) -> None:
            entries[entry["name"]] = entry
            if entry["pci_address"] is not None:
                by_function.setdefault(entry["pci_address"], []).append(entry)

        # PFs (and everything else) first, so VFs can copy their PF's port.
        for name, bdf, path, parent in found:
            entry = self._rdma_device(name, bdf, path, parent, per_parent[parent] > 1, verbs_by_parent, mads_by_parent)
            if entry is not None:
                add(entry)
        if of_vfs and verbs_by_parent is not None and mads_by_parent is not None:
            verbs_of, mads_of = verbs_by_parent.get, mads_by_parent.get
        else:
            verbs_of = mads_of = None
        for name, bdf, path, parent in of_vfs:
            pf_entries = by_function.get(physfn[bdf])
            if not pf_entries or verbs_of is None or mads_of is None or per_parent[parent] > 1:
                entry = self._rdma_device(
                    name, bdf, path, parent, per_parent[parent] > 1, verbs_by_parent, mads_by_parent, pf_entries
                )
                if entry is not None:
                    add(entry)
                continue
            # The common VF: one RDMA device of its own, the char devices
            # already known by parent (no ibdev files to read).
            ports = self._vf_ports(name, path, parent, pf_entries[0])
            if ports is None:
                continue
            entry = {
                "name": name,
                "pci_address": bdf,
                "node_guid": None,  # set and read through netlink (sriov module)
                "ports": ports,
                "char_devices": verbs_of(parent, []) + mads_of(parent, []),
            }
            entries[name] = entry
            by_function.setdefault(bdf, []).append(entry)
        # Class device names are unique: name order is the class directory's.
        return by_function, [entries[name] for name in sorted(entries)]

    def _vf_ports(self, name: str, path: str, parent: str, pf_entry: dict[str, Any]) -> list[dict[str, Any]] | None:
        """Ports of a VF's RDMA device at ``path``; None (and a warning) if it is gone.

        A VF's port shares its PF port's physical link, so only the logical
        state is read. A port of the PF that the VF lacks (a ConnectX-3 VF
        can be single-port on a dual-port PF) is left out.
        """
        templates = self._pf_ports.get(pf_entry["name"])
        if templates is None:
            templates = self._pf_ports[pf_entry["name"]] = [
                (port, f"/ports/{port['port']}/state") for port in pf_entry["ports"]
            ]
        states = self._port_states
        # Relative to the directory the VF shares with its siblings.
        cut = parent.rindex("/")
        siblings, own = parent[:cut], path[cut + 1 :]
        ports = []
        for pf_port, suffix in templates:
            raw = self.r.read_under(siblings, own + suffix)
            if raw is None:
                if not os.path.isdir(path + suffix[: -len("/state")]):
                    continue
                state = None
            else:
                state = states.get(raw)
                if state is None:
                    state = states[raw] = parse_enum(raw)
            port = pf_port.copy()
            port["state"] = state
            ports.append(port)
        if not ports and templates and not os.path.isdir(path):
            self.r.warn(f"RDMA device {name}: dangling link to {path}")
            return None
        return ports

    def _rdma_device(
        self,
        name: str,
        bdf: str | None,
        path: str,
        parent: str,
        shared_parent: bool,
        verbs_by_parent: dict[str, list[str]] | None,
        mads_by_parent: dict[str, list[str]] | None,
        pf_entries: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any] | None:
        """One RDMA device read in full; ``pf_entries``: its PF's, for a VF."""
        r = self.r
        # A VF's node GUID is set and read through netlink (sriov module).
        guid = None if pf_entries else r.read(path + "/node_guid")
        if guid is None and not pf_entries and not os.path.isdir(path):
            r.warn(f"RDMA device {name}: dangling link to {path}")
            return None
        if verbs_by_parent is None:
            verbs = sorted(r.listdir(parent + "/infiniband_verbs"))
        else:
            verbs = verbs_by_parent.get(parent, [])
        if mads_by_parent is None:
            mads = sorted(r.listdir(parent + "/infiniband_mad"))
        else:
            mads = mads_by_parent.get(parent, [])
        if shared_parent:
            # Several RDMA devices of one function: each char device names its own.
            verbs = [v for v in verbs if r.read(f"{parent}/infiniband_verbs/{v}/ibdev") == name]
            mads = [m for m in mads if r.read(f"{parent}/infiniband_mad/{m}/ibdev") == name]
        if pf_entries:
            vf_ports = self._vf_ports(name, path, parent, pf_entries[0])
            if vf_ports is None:
                return None
            ports = vf_ports
        else:
            ports = self._ports(path)
        return {
            "name": name,
            "pci_address": bdf,
            "node_guid": guid,
            "ports": ports,
            "char_devices": verbs + mads,
        }
