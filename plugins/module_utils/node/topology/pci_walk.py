# SPDX-License-Identifier: Apache-2.0
"""The probe's walk of the PCI functions: where each one is, what it is, its link and its VFs."""

from __future__ import annotations

import os

from . import sysfs as _sysfs
from .parsers import format_cpulist, hex_id, parse_cpulist, parse_cpumask, parse_int, parse_link_speed, parse_uevent
from .pci import _BDF_RE, _HOST_BRIDGE_RE, _K8S_BDF_RE, is_bridge_class, kubernetes_pcie_root, vf_addresses
from .sysfs import join_link

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .sysfs import Reader, _Dir

# The whole config space: the extended capability list (ACS) ends at 4096.
CONFIG_BYTES = 4096


class _Function:
    """One PCI function as found on the path walk (endpoint or bridge)."""

    __slots__ = (
        "bdf",
        "chain",
        "host_bridge",
        "host_key",
        "info",
        "listed",
        "parent",
        "path",
    )

    def __init__(self, bdf: str, path: str, listed: bool) -> None:
        self.bdf = bdf
        self.path = path
        self.listed = listed
        self.host_bridge: str | None = None
        self.host_key: str | None = None
        self.chain: list[str] = []
        self.parent: str | None = None
        self.info: dict[str, Any] = {}


class PciWalk:
    """Part of the probe (:class:`prober._Probe`): finds and reads every PCI function."""

    # Set by the probe's __init__.
    sys: str
    r: Reader
    functions: dict[str, _Function]
    _located: dict[str, tuple[str | None, str | None, list[str]]]
    _identities: dict[str, dict[str, Any]]
    _listed: set[str]
    _roots: dict[str, str | None]
    _vf_identity: dict[str, dict[str, Any]]
    _vf_paths: dict[str, tuple[str, str]]
    _cpu_lists: dict[str, tuple[list[int], str]]
    _configs: dict[str, bytes]

    def walk_pci(self) -> None:
        """Find and read every PCI function.

        Functions are visited in address order, so a PF comes before its VFs;
        a VF's directory is known from its PF (it is the PF's sibling), which
        spares resolving hundreds of links on big nodes.
        """
        bus = self.sys + "/bus/pci/devices"
        names = sorted(self.r.listdir(bus, expected=True))
        self._listed = set(names)
        hidden: list[_Function] = []
        for bdf in names:
            placed = self._vf_paths.pop(bdf, None)
            if placed is not None:
                path, pf = placed
            else:
                pf = None
                path = self.r.link_target(bus, bdf)
                if path is None:
                    continue
            func = self.functions[bdf] = _Function(bdf, path, True)
            # Bridges that exist as directories but not in bus/pci/devices;
            # functions in one directory (a PF and its VFs) share the chain,
            # so it is looked at once per directory.
            for part in self._locate(func):
                if part not in self.functions:
                    hidden_path = path[: path.index("/" + part + "/") + len(part) + 1]
                    self.functions[part] = bridge = _Function(part, hidden_path, listed=False)
                    self._locate(bridge)
                    hidden.append(bridge)
                    self.r.warn(f"{part}: bridge directory present but missing from bus/pci/devices")
            if not self.read_function(func, pf):
                del self.functions[bdf]
        for bridge in hidden:
            if not self.read_function(bridge, None):
                del self.functions[bridge.bdf]

    def _pcie_root(self, func: _Function) -> str | None:
        """:func:`kubernetes_pcie_root`, its path part worked out once per directory."""
        if not func.path.endswith("/" + func.bdf) or not _K8S_BDF_RE.match(func.bdf):
            return None
        parent_dir = func.path[: func.path.rindex("/")]
        if parent_dir not in self._roots:
            # Functions in one directory (a PF and its VFs) share the host bridge.
            self._roots[parent_dir] = kubernetes_pcie_root(func.bdf, func.path, self.sys)
        return self._roots[parent_dir]

    def _locate(self, func: _Function) -> list[str]:
        """Fill host bridge and bridge chain of ``func`` from its path.

        Returns the chain the first time a directory is seen, else nothing.
        """
        parent_dir = func.path[: func.path.rindex("/")]
        located = self._located.get(parent_dir)
        fresh = located is None
        if located is None:
            # Everything above a function is decided by its parent directory,
            # which the PF and all its VFs share.
            parts = parent_dir.removeprefix(self.sys + "/devices/").split("/")
            chain: list[str] = []
            host_index = -1
            for index, part in enumerate(parts):
                if part.startswith("pci") and _HOST_BRIDGE_RE.match(part):
                    host_index, chain = index, []
                elif part[-2:-1] == "." and _BDF_RE.match(part):
                    chain.append(part)
            host = parts[host_index] if host_index >= 0 else None
            host_key = "/".join(parts[: host_index + 1]) if host_index >= 0 else None
            located = self._located[parent_dir] = (host, host_key, chain)
        # Siblings share one chain list; nobody modifies it.
        func.host_bridge, func.host_key, chain = located
        func.chain = chain
        func.parent = chain[-1] if chain else None
        return chain if fresh else []

    def read_function(self, func: _Function, vf_parent: str | None) -> bool:
        if vf_parent is None:
            with self.r.directory(func.path) as d:
                if not self._read_function(func, vf_parent, d.read):
                    return False
                self._read_config(func.bdf, d)
                return True
        vf0 = self._vf_identity.get(vf_parent)
        if vf0 is None:
            # Two files only: plain paths are cheaper than a directory descriptor.
            prefix = func.path + "/"
            if not self._read_function(func, vf_parent, lambda name: self.r.read(prefix + name)):
                return False
            self._vf_identity[vf_parent] = func.info
            return True
        # The kernel reads class and subsystem ids of all VFs of a PF from the
        # first VF (pci_read_vf_config_common): only driver and NUMA node are
        # each VF's own.
        # Relative to the directory the VF shares with its PF and siblings.
        cut = func.path.rindex("/")
        directory, own = func.path[:cut], func.path[cut + 1 :]
        numa = parse_int(self.r.read_under(directory, own + "/numa_node"))
        if numa is None and not os.path.isdir(func.path):
            self.r.warn(f"{func.bdf}: {func.path} does not exist")
            return False
        info = dict(vf0)
        driver = self.r.readlink_under(directory, own + "/driver")
        info["driver"] = driver[driver.rfind("/") + 1 :] if driver else None
        info["numa_node"] = None if numa is None or numa < 0 else numa
        func.info = info
        return True

    def _read_config(self, bdf: str, d: _Dir) -> None:
        """Keep the function's ``config`` bytes, read once (VFs' are not read: a VF takes its PF's path).

        A non-root reader gets the first 64 bytes of a real sysfs file: what
        is kept is what was readable; a missing file keeps nothing.
        """
        try:
            if d.fd is None:
                fd = _sysfs._os_open(d.where + "config", _sysfs._O_RDONLY)
            else:
                fd = _sysfs._os_open("config", _sysfs._O_RDONLY, dir_fd=d.fd)
        except OSError as exc:
            self.r._open_failed(d.where + "config", exc, False)
            return
        try:
            self._configs[bdf] = _sysfs._os_read(fd, CONFIG_BYTES)
        except OSError as exc:
            self.r._read_failed(d.where + "config", exc)
        finally:
            _sysfs._os_close(fd)

    def _read_function(self, func: _Function, vf_parent: str | None, read: Callable[..., str | None]) -> bool:
        r = self.r
        p = func.path + "/"
        raw_uevent = read("uevent")
        if raw_uevent is None and not os.path.isdir(func.path):
            r.warn(f"{func.bdf}: {func.path} does not exist (dangling link in bus/pci/devices)")
            return False
        identity = None
        key = None
        if raw_uevent is not None and "PCI_ID=" in raw_uevent and "DRIVER=" in raw_uevent:
            # VFs of one PF differ only in their slot name: parse each kind once.
            start = raw_uevent.find("PCI_SLOT_NAME=")
            end = raw_uevent.find("\n", start) if start >= 0 else -1
            key = raw_uevent[:start] + (raw_uevent[end:] if end >= 0 else "") if start >= 0 else raw_uevent
            identity = self._identities.get(key)
        if identity is None:
            identity = self._identity(func, read, raw_uevent)
            if key is not None:
                self._identities[key] = identity
        numa = parse_int(read("numa_node"))
        info = dict(identity)
        info["numa_node"] = None if numa is None or numa < 0 else numa
        if vf_parent is None and is_bridge_class(info["class_code"]):
            # Of a bridge only its link is reported: CPU locality, SR-IOV and
            # physfn belong to endpoints (a bridge is never a PF or a VF).
            info["local_cpus"] = info["local_cpulist"] = None
            info["link"] = self._link(read)
            info["sriov"] = None
            info["physfn"] = None
        elif vf_parent is None:
            raw_cpus = read("local_cpulist")
            cpus_and_text = self._cpu_lists.get(raw_cpus) if raw_cpus else None
            if cpus_and_text is None:
                # Devices of one socket share a list of maybe a hundred CPUs:
                # parse and format each distinct list once.
                cpus = parse_cpulist(raw_cpus)
                if cpus is None:
                    cpus = parse_cpumask(read("local_cpus"))
                    cpus_and_text = (cpus, None if cpus is None else format_cpulist(cpus))
                else:
                    cpus_and_text = self._cpu_lists[raw_cpus] = (cpus, format_cpulist(cpus))
            info["local_cpus"], info["local_cpulist"] = cpus_and_text
            info["link"] = self._link(read)
            total = parse_int(read("sriov_totalvfs"))
            if total is not None:
                numvfs = parse_int(read("sriov_numvfs")) or 0
                vfs = self._vfs(func, numvfs, read) if numvfs else []
                info["sriov"] = {"totalvfs": total, "numvfs": numvfs, "vfs": vfs}
            else:
                info["sriov"] = None
            physfn = r.readlink(p + "physfn")
            info["physfn"] = os.path.basename(physfn) if physfn else None
        else:
            # A VF shares its PF's link and CPU locality; reading them again
            # for hundreds of VFs would dominate the probe time.
            info["local_cpus"] = info["local_cpulist"] = None
            info["link"] = None
            info["sriov"] = None
            info["physfn"] = vf_parent
        func.info = info
        return True

    def _vfs(self, func: _Function, numvfs: int, read: Callable[..., str | None]) -> list[str]:
        """Addresses of a PF's VFs; remembers where each VF's directory is.

        The kernel places VF n at routing ID PF + offset + n * stride, as a
        sibling of the PF; that saves a link per VF. Where the offset and
        stride are missing or a computed VF is not listed, the ``virtfnN``
        links decide.
        """
        parent = func.path[: func.path.rindex("/")]
        vfs = vf_addresses(func.bdf, numvfs, parse_int(read("sriov_offset")), parse_int(read("sriov_stride")))
        if vfs and all(vf in self._listed for vf in vfs):
            for vf in vfs:
                self._vf_paths[vf] = (parent + "/" + vf, func.bdf)
            return vfs
        vfs = []
        for index in range(numvfs):
            target = self.r.readlink(f"{func.path}/virtfn{index}")
            if target is None:
                self.r.warn(f"{func.bdf}: sriov_numvfs is {numvfs} but virtfn{index} is missing")
                continue
            vf = os.path.basename(target)
            vfs.append(vf)
            self._vf_paths[vf] = (join_link(func.path, target), func.bdf)
        return vfs

    def _identity(self, func: _Function, read: Callable[..., str | None], raw_uevent: str | None) -> dict[str, Any]:
        """Class, ids and driver of a function, from uevent or single files."""
        r = self.r
        p = func.path + "/"
        uevent = parse_uevent(raw_uevent)
        class_code = parse_int(uevent.get("PCI_CLASS"), 16)
        if class_code is None:
            class_code = parse_int(read("class", expected=True), 16)
        pci_id = uevent.get("PCI_ID")
        if pci_id and ":" in pci_id:
            vendor, _colon, device = pci_id.partition(":")
            vendor_id, device_id = parse_int(vendor, 16), parse_int(device, 16)
        else:
            vendor_id = parse_int(read("vendor", expected=True), 16)
            device_id = parse_int(read("device", expected=True), 16)
        subsys = uevent.get("PCI_SUBSYS_ID")
        if subsys and ":" in subsys:
            svendor, _colon, sdevice = subsys.partition(":")
            sub_vendor_id, sub_device_id = (
                parse_int(svendor, 16),
                parse_int(sdevice, 16),
            )
        else:
            sub_vendor_id = parse_int(read("subsystem_vendor"), 16)
            sub_device_id = parse_int(read("subsystem_device"), 16)
        driver = uevent.get("DRIVER")
        if driver is None:
            link = r.readlink(p + "driver")
            driver = os.path.basename(link) if link else None
        return {
            "class_code": class_code,
            "class_id": hex_id(class_code, 6),
            "vendor_id": hex_id(vendor_id, 4),
            "device_id": hex_id(device_id, 4),
            "subsystem_vendor_id": hex_id(sub_vendor_id, 4),
            "subsystem_device_id": hex_id(sub_device_id, 4),
            "driver": driver,
        }

    def _link(self, read: Callable[..., str | None]) -> dict[str, Any] | None:
        speed = read("current_link_speed")
        max_speed = read("max_link_speed")
        width = parse_int(read("current_link_width"))
        max_width = parse_int(read("max_link_width"))
        if speed is None and max_speed is None and width is None and max_width is None:
            return None
        return {
            "current_speed": speed,
            "current_gts": parse_link_speed(speed),
            "current_width": width,
            "max_speed": max_speed,
            "max_gts": parse_link_speed(max_speed),
            "max_width": max_width,
        }

    def _owner(self, path: str) -> str | None:
        """The PCI function a class device's ``path`` belongs to."""
        # Usually .../<bdf>/<class>/<name>: look there before walking up.
        cut = path.rfind("/", 0, path.rfind("/", 0, path.rfind("/")))
        if cut >= 0:
            candidate = path[cut + 1 : path.index("/", cut + 1)]
            # A function found on the PCI walk needs no pattern check.
            if candidate in self.functions or (candidate[-2:-1] == "." and _BDF_RE.match(candidate)):
                return candidate
        parts = path.split("/")
        for index in range(len(parts) - 2, -1, -1):
            part = parts[index]
            # Cheap pre-check before the regex: bdfs look like dddd:bb:dd.f.
            if part[-2:-1] == "." and _BDF_RE.match(part):
                return part
        return None
