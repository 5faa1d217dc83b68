# SPDX-License-Identifier: Apache-2.0
"""PCIe/NUMA topology of a Linux node, read from sysfs and procfs.

This is the single source of truth for "which devices does this node have and
where are they": the ``topology_info`` module calls :func:`probe`, and the
bundled DRA driver and the allocation planner are to call nothing else, so
facts, published ResourceSlices and plans cannot disagree.

The code runs on nodes (Python >= 3.9) and imports nothing from Ansible.
Every read tolerates missing files, unreadable files and dangling symlinks:
the field becomes ``None`` and, where the file should have been there, a
warning is recorded instead of an exception.
"""

from __future__ import annotations

import gc
import operator
import os
import re

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs 4 ms at import; annotations are strings here anyway
    from collections.abc import Callable, Iterable
    from typing import Any

SCHEMA_VERSION = 1

# nvidia-smi topo -m levels, best first.
LEVELS = ("PIX", "PXB", "PHB", "NODE", "SYS")
LEVEL_RANK = {name: rank for rank, name in enumerate(LEVELS)}

KINDS = ("gpu", "accelerator", "nic", "rdma", "nvme", "other")
GPU_KINDS = frozenset(("gpu", "accelerator"))
NIC_KINDS = frozenset(("nic", "rdma"))

# Vendors whose VGA/"other display" functions are real GPUs; a BMC's VGA
# (ASPEED, Matrox) is a display controller but not something to allocate.
GPU_DISPLAY_VENDORS = frozenset(("0x10de", "0x1002", "0x8086"))

PCI_IDS_PATHS = (
    "/usr/share/hwdata/pci.ids",
    "/usr/share/misc/pci.ids",
    "/usr/share/pci.ids",
)

_BDF_RE = re.compile(r"^([0-9a-f]{4,}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
_HOST_BRIDGE_RE = re.compile(r"^pci([0-9a-f]{4,}):([0-9a-f]{2})$")
# What Kubernetes accepts as a pcieRoot: a host bridge in a 4-hex-digit domain.
_K8S_PCIE_ROOT_RE = re.compile(r"^pci[0-9a-f]{4}:[0-9a-f]{2}$")
_K8S_BDF_RE = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")

NETDEV_TYPES = {1: "ethernet", 32: "infiniband", 772: "loopback"}

# Everything the probe reads, for tools that copy a node's trees (the
# topology_capture module): the capture copies exactly this, so a probe of the
# copy returns what a probe of the node returns. Directory names are relative
# to the sysfs root (``procfs_files`` to the procfs root); ``*`` stands for
# one path component. tests/unit/plugins/module_utils/test_snapshot.py traces
# every path the probe touches and fails when one is not captured: a new read
# in the probe needs a new entry here.
PROBE_READS: dict[str, Any] = {
    # devices/system/node/node<N>/<file>
    "numa_dir": "devices/system/node",
    "numa_node_files": ("cpulist", "cpumap", "distance", "meminfo"),
    # bus/pci/devices/<bdf>: links to the function directories under
    # devices/pci*/...; every PCI function in those paths (bridges too, listed
    # or not) is read with these files and links.
    "pci_devices_dir": "bus/pci/devices",
    "pci_function_files": (
        "uevent",
        "class",
        "vendor",
        "device",
        "subsystem_vendor",
        "subsystem_device",
        "numa_node",
        "local_cpulist",
        "local_cpus",
        "current_link_speed",
        "max_link_speed",
        "current_link_width",
        "max_link_width",
        "sriov_totalvfs",
        "sriov_numvfs",
        "sriov_offset",
        "sriov_stride",
    ),
    "pci_function_links": ("driver", "physfn", "virtfn*"),
    # class/<name>/<device>: links to class devices below PCI functions, and
    # the files read in each device's directory.
    "class_files": {
        "net": ("type", "speed", "address", "operstate", "mtu"),
        "infiniband": ("node_guid",),
        "infiniband_verbs": ("ibdev",),
        "infiniband_mad": ("ibdev",),
        "drm": (),
    },
    # Classes whose devices count only below a PCI function (the RDMA classes
    # are read in full: an RDMA device without a PCI function is reported too).
    "class_pci_only": ("net", "drm"),
    # class/infiniband/<dev>/ports/<n>/<file>
    "rdma_port_files": ("state", "phys_state", "link_layer", "rate"),
    # <function>/<dir>/<char device>/ibdev beside an RDMA device's infiniband/
    "rdma_char_device_dirs": ("infiniband_verbs", "infiniband_mad"),
    # Identifiers a shared snapshot may leave out (redaction): MAC addresses
    # and RDMA node GUIDs.
    "address_files": {"net": ("address",), "infiniband": ("node_guid",)},
    "procfs_files": ("sys/kernel/hostname", "driver/nvidia/gpus/*/information"),
}

# Bound once: the probe makes thousands of these calls on big nodes.
_os_open = os.open
_os_read = os.read
_os_close = os.close
_os_readlink = os.readlink
_O_RDONLY = os.O_RDONLY
_O_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY


class Reader:
    """Small, fast file access under a root, collecting warnings."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        # Directory descriptors kept open for the whole probe: the hundreds of
        # VFs of a PF are siblings, and a lookup relative to their common
        # directory spares the kernel most of every path walk.
        self._dirs: dict[str, int] = {}

    def dir_fd(self, path: str) -> int:
        """A descriptor of directory ``path`` kept until :meth:`close`; -1 if it cannot be opened."""
        fd = self._dirs.get(path)
        if fd is None:
            try:
                fd = _os_open(path, _O_DIRECTORY)
            except OSError:
                fd = -1  # reads by full path then report what is wrong
            self._dirs[path] = fd
        return fd

    def close(self) -> None:
        for fd in self._dirs.values():
            if fd >= 0:
                _os_close(fd)
        self._dirs.clear()

    def read_under(self, directory: str, name: str, expected: bool = False) -> str | None:
        """:meth:`read` of ``directory/name``, relative to a kept descriptor of ``directory``."""
        # Written out rather than through read and _drain: this runs for
        # every VF, and each Python call level costs as much as the read.
        dir_fd = self._dirs.get(directory)
        if dir_fd is None:
            dir_fd = self.dir_fd(directory)
        if dir_fd < 0:
            return self.read(directory + "/" + name, expected)
        try:
            fd = _os_open(name, _O_RDONLY, dir_fd=dir_fd)
        except OSError as exc:
            return self._open_failed(directory + "/" + name, exc, expected)
        try:
            return _os_read(fd, 65536).decode("utf-8", "replace").strip()
        except OSError as exc:
            return self._read_failed(directory + "/" + name, exc)
        finally:
            _os_close(fd)

    def readlink_under(self, directory: str, name: str) -> str | None:
        """:meth:`readlink` of ``directory/name``, relative to a kept descriptor of ``directory``."""
        fd = self._dirs.get(directory)
        if fd is None:
            fd = self.dir_fd(directory)
        if fd < 0:
            return self.readlink(directory + "/" + name)
        try:
            return _os_readlink(name, dir_fd=fd)
        except OSError as exc:
            return self._readlink_failed(directory + "/" + name, exc)

    def warn(self, message: str) -> None:
        self.warnings.append(message)

    def read(self, path: str, expected: bool = False) -> str | None:
        """Return the stripped content of ``path`` or ``None``.

        A missing file is normal for optional attributes; ``expected`` files
        that are missing, and any file that exists but cannot be read, add a
        warning.
        """
        try:
            fd = _os_open(path, _O_RDONLY)
        except OSError as exc:
            return self._open_failed(path, exc, expected)
        return self._drain(fd, path)

    def _open_failed(self, path: str, exc: OSError, expected: bool) -> None:
        if not isinstance(exc, FileNotFoundError):
            self.warn(f"cannot open {path}: {exc.strerror or exc}")
        elif expected:
            self.warn(f"missing file {path}")

    def _drain(self, fd: int, path: str, name: str = "") -> str | None:
        try:
            return _os_read(fd, 65536).decode("utf-8", "replace").strip()
        except OSError as exc:
            return self._read_failed(path + name, exc)
        finally:
            _os_close(fd)

    def _read_failed(self, path: str, exc: OSError) -> None:
        # sysfs answers EINVAL for e.g. the speed of a link that is down.
        if exc.errno not in (22, 19, 95):  # EINVAL, ENODEV, EOPNOTSUPP
            self.warn(f"cannot read {path}: {exc.strerror or exc}")

    def directory(self, path: str) -> _Dir:
        return _Dir(self, path)

    def readlink(self, path: str) -> str | None:
        try:
            return _os_readlink(path)
        except OSError as exc:
            return self._readlink_failed(path, exc)

    def _readlink_failed(self, path: str, exc: OSError) -> None:
        # ENOENT: an optional link (driver, physfn); EINVAL: not a symlink.
        if exc.errno not in (2, 22):
            self.warn(f"cannot read link {path}: {exc.strerror or exc}")

    def listdir(self, path: str, expected: bool = False) -> list[str]:
        try:
            return os.listdir(path)
        except FileNotFoundError:
            if expected:
                self.warn(f"missing directory {path}")
            return []
        except OSError as exc:
            self.warn(f"cannot list {path}: {exc.strerror or exc}")
            return []


class _Dir:
    """Reads the files of one directory through a directory descriptor.

    Opening ``uevent`` relative to the device's directory spares the kernel a
    walk down a deep sysfs path for every attribute; that halves the probe time
    of nodes with hundreds of VFs.
    """

    __slots__ = ("fd", "path", "reader", "where")

    def __init__(self, reader: Reader, path: str) -> None:
        self.reader = reader
        self.path = path
        self.where = path + "/"
        try:
            self.fd: int | None = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            self.fd = None  # reads by path then report what is wrong

    def read(self, name: str, expected: bool = False) -> str | None:
        if self.fd is None:
            return self.reader.read(self.where + name, expected)
        try:
            fd = _os_open(name, _O_RDONLY, dir_fd=self.fd)
        except OSError as exc:
            return self.reader._open_failed(self.where + name, exc, expected)
        return self.reader._drain(fd, self.where, name)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> _Dir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------
# Parsers (pure functions, unit-tested on their own)
# --------------------------------------------------------------------------


def parse_cpulist(text: str | None) -> list[int] | None:
    """Parse a kernel cpulist (``0-3,8,10-11``) into sorted CPU ids."""
    if text is None:
        return None
    cpus = set()
    for part in text.replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        stride = 1
        if ":" in part:  # 0-15:2/4 groups are rare; keep the stride only
            part, _colon, grp = part.partition(":")
            stride = int(grp.split("/")[0])
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                cpus.update(range(int(lo), int(hi) + 1, max(stride, 1)))
            else:
                cpus.add(int(lo))
        except ValueError:
            return None
    return sorted(cpus)


def parse_cpumask(text: str | None) -> list[int] | None:
    """Parse a kernel cpumask (``00000000,0000ff00``) into CPU ids."""
    if text is None:
        return None
    try:
        value = int(text.replace(",", "").strip() or "0", 16)
    except ValueError:
        return None
    cpus = []
    bit = 0
    while value:
        if value & 1:
            cpus.append(bit)
        value >>= 1
        bit += 1
    return cpus


def format_cpulist(cpus: Iterable[int]) -> str:
    """Inverse of :func:`parse_cpulist`: ``[0,1,2,5]`` -> ``0-2,5``."""
    out = []
    run: list[int] = []
    for cpu in sorted(cpus):
        if run and cpu == run[-1] + 1:
            run.append(cpu)
            continue
        if run:
            out.append(_run(run))
        run = [cpu]
    if run:
        out.append(_run(run))
    return ",".join(out)


def _run(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def parse_int(text: str | None, base: int = 10) -> int | None:
    if text is None or text == "":
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


_HEX_WIDTHS = {4: "04x", 6: "06x"}


def hex_id(value: int | None, width: int) -> str | None:
    return None if value is None else "0x" + format(value, _HEX_WIDTHS[width])


def _leading_number(text: str | None, unit: str) -> float | None:
    """``"16.0 GT/s PCIe"``, ``"GT/s"`` -> 16.0; None when the unit differs."""
    if not text:
        return None
    words = text.split()
    if len(words) < 2 or not words[1].startswith(unit):
        return None
    try:
        return float(words[0])
    except ValueError:
        return None


def parse_link_speed(text: str | None) -> float | None:
    """``"16.0 GT/s PCIe"`` -> 16.0; ``"Unknown"`` -> None."""
    return _leading_number(text, "GT/s")


def parse_rate(text: str | None) -> float | None:
    """RDMA port rate ``"400 Gb/sec (4X NDR)"`` -> 400.0."""
    return _leading_number(text, "Gb/sec")


def parse_enum(text: str | None) -> str | None:
    """``"4: ACTIVE"`` -> ``"ACTIVE"``."""
    if text is None:
        return None
    return text.partition(":")[2].strip() or text.strip()


def parse_uevent(text: str | None) -> dict[str, str]:
    result: dict[str, str] = {}
    if text:
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                result[key] = value
    return result


def parse_nvidia_information(text: str | None) -> dict[str, Any]:
    """Parse ``/proc/driver/nvidia/gpus/<bdf>/information``."""
    fields: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip():
            fields[key.strip()] = value.strip()
    if not fields:
        return {}
    return {
        "minor": parse_int(fields.get("Device Minor")),
        "uuid": fields.get("GPU UUID") or None,
        "model": fields.get("Model") or None,
    }


def join_link(directory: str, target: str) -> str:
    """Absolute path of a symlink's ``target`` found in ``directory``.

    String surgery instead of ``normpath(join())``: it runs for every PCI
    function, netdev, RDMA device and character device of every VF.
    """
    if target.startswith("/"):
        return os.path.normpath(target)
    rest = target.lstrip("./")
    ups = (len(target) - len(rest)) // 3
    if target[: ups * 3] == "../" * ups and len(target) - len(rest) == ups * 3:
        if ups:
            directory = directory.rsplit("/", ups)[0]
        target = rest
    path = directory + "/" + target
    return os.path.normpath(path) if "/." in path or "//" in path else path


def vf_addresses(pf: str, numvfs: int, offset: int | None, stride: int | None) -> list[str] | None:
    """Addresses of VFs 0..numvfs-1 of PF ``pf`` (SR-IOV routing IDs), or None."""
    match = _BDF_RE.match(pf)
    if match is None or offset is None or stride is None or offset < 1:
        return None
    domain, bus, dev, fn = match.group(1), int(match.group(2), 16), int(match.group(3), 16), int(match.group(4))
    first = (bus << 8) + (dev << 3) + fn + offset
    addresses = []
    for index in range(numvfs):
        rid = first + index * stride
        if rid > 0xFFFF:
            return None
        addresses.append(f"{domain}:{rid >> 8:02x}:{(rid >> 3) & 0x1F:02x}.{rid & 7}")
    return addresses


def pci_function_key(bdf: str) -> tuple[str, str]:
    """Split ``dddd:bb:dd.f`` into (``dddd:bb:dd``, ``f``)."""
    device, _dot, function = bdf.rpartition(".")
    return device, function


def kubernetes_pcie_root(bdf: str, resolved: str | None, sysfs_root: str) -> str | None:
    """The value Kubernetes publishes as ``resource.kubernetes.io/pcieRoot``.

    ``resolved`` is the absolute target of ``<sysfs_root>/bus/pci/devices/<bdf>``.
    Returns ``None`` wherever Kubernetes publishes no attribute: a domain of
    more than four hex digits (VMD), a path that does not start with
    ``/sys/devices/pci`` (Hyper-V VMBUS, some VMs) or that does not end in the
    bdf.
    """
    if resolved is None or not _K8S_BDF_RE.match(bdf):
        return None
    prefix = sysfs_root.rstrip("/") + "/devices/"
    if not resolved.startswith(prefix):
        return None
    parts = resolved[len(prefix) :].split("/")
    if len(parts) < 2 or parts[-1] != bdf:
        return None
    if not _K8S_PCIE_ROOT_RE.match(parts[0]):
        return None
    return parts[0]


def classify(class_code: int | None, vendor_id: str | None, has_rdma: bool) -> str:
    """Map a PCI class code to one of :data:`KINDS`."""
    if class_code is None:
        return "other"
    base = class_code >> 16
    sub = (class_code >> 8) & 0xFF
    if base == 0x03:
        if sub == 0x02 or vendor_id in GPU_DISPLAY_VENDORS:
            return "gpu"
        return "other"
    if base == 0x12 or (base == 0x0B and sub == 0x40):
        return "accelerator"
    if base == 0x02 or (base == 0x0C and sub == 0x06):
        return "rdma" if has_rdma else "nic"
    if base == 0x01 and sub == 0x08:
        return "nvme"
    return "other"


def is_bridge_class(class_code: int | None) -> bool:
    # PCI-to-PCI (0x0604) and semi-transparent PCI-to-PCI (0x0609) bridges.
    return class_code is not None and (class_code >> 8) in (0x0604, 0x0609)


# --------------------------------------------------------------------------
# pci.ids names
# --------------------------------------------------------------------------

_PCI_IDS_CACHE: dict[tuple[str, float], dict[str, Any]] = {}


def find_pci_ids(candidates: Iterable[str] = PCI_IDS_PATHS) -> str | None:
    for path in candidates:
        if os.path.isfile(path):
            return path
    return None


class PciIds:
    """Look-ups in a pci.ids file without parsing all of it.

    The file is about 1.5 MB; scanning only the sections of the vendors a node
    actually has keeps a probe in the millisecond range.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        stamp = (path, os.stat(path).st_mtime)
        cached = _PCI_IDS_CACHE.get(stamp)
        if cached is None:
            with open(path, encoding="utf-8", errors="replace") as handle:
                cached = {"text": "\n" + handle.read(), "vendors": {}}
            _PCI_IDS_CACHE.clear()
            _PCI_IDS_CACHE[stamp] = cached
        self._text: str = cached["text"]
        self._vendors: dict[str, tuple[str | None, dict[str, str]]] = cached["vendors"]

    def _vendor(self, vendor: str) -> tuple[str | None, dict[str, str]]:
        entry = self._vendors.get(vendor)
        if entry is not None:
            return entry
        text = self._text
        start = text.find(f"\n{vendor}  ")
        if start < 0:
            entry = (None, {})
        else:
            line_end = text.find("\n", start + 1)
            name = text[start + 7 : line_end].strip()
            devices: dict[str, str] = {}
            pos = line_end
            while pos >= 0 and pos + 1 < len(text):
                nxt = text.find("\n", pos + 1)
                line = text[pos + 1 : nxt if nxt >= 0 else len(text)]
                if line.startswith(("\t\t", "#")) or not line:
                    pos = nxt
                    continue
                if not line.startswith("\t"):
                    break
                devices[line[1:5]] = line[5:].strip()
                pos = nxt
            entry = (name, devices)
        self._vendors[vendor] = entry
        return entry

    def names(self, vendor_id: str | None, device_id: str | None) -> tuple[str | None, str | None]:
        if not vendor_id:
            return None, None
        vendor_name, devices = self._vendor(vendor_id[2:])
        device_name = devices.get(device_id[2:]) if device_id else None
        return vendor_name, device_name


# --------------------------------------------------------------------------
# The probe
# --------------------------------------------------------------------------


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


class _Probe:
    def __init__(self, sysfs_root: str, procfs_root: str, pci_ids_path: str | None) -> None:
        self.sys = os.path.normpath(sysfs_root)
        self.proc = os.path.normpath(procfs_root)
        self.r = Reader()
        self.functions: dict[str, _Function] = {}
        self._located: dict[str, tuple[str | None, str | None, list[str]]] = {}
        self._identities: dict[str, dict[str, Any]] = {}
        self._listed: set[str] = set()
        self._roots: dict[str, str | None] = {}
        self._vf_identity: dict[str, dict[str, Any]] = {}
        self._vf_paths: dict[str, tuple[str, str]] = {}
        self._cpu_lists: dict[str, tuple[list[int], str]] = {}
        self._pf_ports: dict[str, list[tuple[dict[str, Any], str]]] = {}
        self._port_states: dict[str, str | None] = {}
        self.pci_ids: PciIds | None = None
        if pci_ids_path:
            try:
                self.pci_ids = PciIds(pci_ids_path)
            except OSError as exc:
                self.r.warn(f"cannot read pci.ids {pci_ids_path}: {exc.strerror or exc}")

    # -- NUMA ---------------------------------------------------------------

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

    # -- PCI walk -------------------------------------------------------------

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
                path = self._bus_target(bus, bdf)
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

    def _bus_target(self, bus: str, bdf: str) -> str | None:
        """Directory of ``bus/pci/devices/<bdf>`` (a link, or in some trees a directory)."""
        try:
            return join_link(bus, _os_readlink(bus + "/" + bdf))
        except OSError as exc:
            if exc.errno == 22:  # EINVAL: not a link but the directory itself
                return bus + "/" + bdf
            if exc.errno != 2:
                self.r.warn(f"cannot read link {bus}/{bdf}: {exc.strerror or exc}")
            return None

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
                return self._read_function(func, vf_parent, d.read)
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

    # -- class devices (net, infiniband, drm) -----------------------------------

    def _class_links(self, class_dir: str, keep_plain: bool = False, expected: bool = False) -> list[tuple[str, str]]:
        """(name, absolute target) of every link in ``class_dir``, sorted by name.

        One tight loop per directory: it runs for every PCI function, netdev,
        RDMA device and character device of every VF. Entries that are not
        links (``abi_version``) are left out, or kept as they are with
        ``keep_plain``.
        """
        links = []
        up = base = None  # the "../../" every link of a class directory starts with
        strip = 0
        names = sorted(self.r.listdir(class_dir, expected))
        dir_fd = self.r.dir_fd(class_dir) if names else -1
        for name in names:
            try:
                target = _os_readlink(name, dir_fd=dir_fd) if dir_fd >= 0 else _os_readlink(class_dir + "/" + name)
            except OSError as exc:
                if exc.errno != 22:  # EINVAL: not a symlink
                    self.r.warn(f"cannot read link {class_dir}/{name}: {exc.strerror or exc}")
                elif keep_plain:
                    links.append((name, class_dir + "/" + name))
                continue
            if up is None:
                rest = target.lstrip("./")
                strip = len(target) - len(rest)
                if strip and strip % 3 == 0 and target[:strip] == "../" * (strip // 3):
                    up, base = target[:strip], class_dir.rsplit("/", strip // 3)[0] + "/"
            if up is not None and target.startswith(up):
                rest = target[strip:]
                if "/." not in rest:
                    links.append((name, base + rest))
                    continue
            links.append((name, join_link(class_dir, target)))
        return links

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

    def netdevs(self, physfn: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
        """Network interfaces by owning PCI function.

        A VF's interface has its PF's type and link speed; of the hundreds of
        VF interfaces of a big node only the name is taken from sysfs.
        """
        by_function: dict[str, list[dict[str, Any]]] = {}
        base = self.sys + "/class/net"
        r = self.r
        owned = []
        of_vfs = []
        for name, path in self._class_links(base):
            bdf = self._owner(path)
            if bdf is not None:
                is_vf = bdf in physfn
                (of_vfs if is_vf else owned).append((is_vf, name, bdf, path + "/"))
        owned.extend(of_vfs)  # PFs first: VFs take their PF interface's type
        for is_vf, name, bdf, p in owned:
            pf_netdevs = by_function.get(physfn[bdf]) if is_vf else None
            if pf_netdevs:
                # MAC, state and MTU of VF interfaces are netlink properties of
                # the PF (the sriov module reads all VFs in one message).
                netdev = {
                    "name": name,
                    "address": None,
                    "type": pf_netdevs[0]["type"],
                    "operstate": None,
                    "mtu": None,
                    "speed_mbps": None,
                }
            else:
                raw_type = parse_int(r.read(p + "type"))
                speed = None if is_vf else parse_int(r.read(p + "speed"))
                netdev = {
                    "name": name,
                    "address": r.read(p + "address"),
                    "type": NETDEV_TYPES.get(raw_type, raw_type) if raw_type is not None else None,
                    "operstate": r.read(p + "operstate"),
                    "mtu": parse_int(r.read(p + "mtu")),
                    "speed_mbps": speed if speed is not None and speed > 0 else None,
                }
            # In name order already: class links are sorted, and a function's
            # interfaces are all in one of the two lists.
            by_function.setdefault(bdf, []).append(netdev)
        return by_function

    def _char_devices(self, class_name: str) -> dict[str, list[str]] | None:
        """{parent device dir: [names]} from ``class/<class_name>``; None if absent."""
        base = self.sys + "/class/" + class_name
        if not os.path.isdir(base):
            return None
        by_parent: dict[str, list[str]] = {}
        for name, path in self._class_links(base):
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
        for name, path in self._class_links(base):
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

    def drm_nodes(self) -> dict[str, dict[str, str]]:
        by_function: dict[str, dict[str, str]] = {}
        base = self.sys + "/class/drm"
        for name, path in self._class_links(base):
            if name.startswith("card") and name[4:].isdigit():
                key = "card"
            elif name.startswith("renderD") and name[7:].isdigit():
                key = "render_node"
            else:
                continue
            bdf = self._owner(path)
            if bdf is not None:
                by_function.setdefault(bdf, {})[key] = name
        return by_function

    def nvidia_gpu(self, bdf: str) -> dict[str, Any]:
        text = self.r.read(f"{self.proc}/driver/nvidia/gpus/{bdf}/information")
        return parse_nvidia_information(text)

    # -- assembly -----------------------------------------------------------

    def run(self) -> dict[str, Any]:
        numa_nodes = self.numa_nodes()
        self.walk_pci()
        physfn = {bdf: f.info["physfn"] for bdf, f in self.functions.items() if f.info.get("physfn")}
        netdevs = self.netdevs(physfn)
        rdma_by_function, rdma_all = self.rdma_devices(physfn)
        drm = self.drm_nodes()

        children: dict[str, list[str]] = {}
        for func in self.functions.values():
            if func.parent is not None:
                children.setdefault(func.parent, []).append(func.bdf)

        bridges = self._bridges(children)
        bridge_roles = {b["pci_address"]: b["role"] for b in bridges}
        switches = self._switches(bridges, children)

        switch_cache: dict[int, list[str]] = {}

        def switches_of(chain: list[str]) -> list[str]:
            found = switch_cache.get(id(chain))
            if found is None:
                found = switch_cache[id(chain)] = [b for b in chain if bridge_roles.get(b) == "switch_upstream"]
            return found

        devices = []
        # VFs of one PF share everything but address, driver, NUMA node and
        # class devices: the PF's first VF is the template of the others.
        vf_templates: dict[tuple[str, int, bool], dict[str, Any]] = {}
        for bdf in sorted(self.functions):
            func = self.functions[bdf]
            info = func.info
            rdma = rdma_by_function.get(bdf, [])
            if info["physfn"] is not None:
                template_key = (info["physfn"], id(func.chain), not rdma)
                template = vf_templates.get(template_key)
                if template is not None:
                    device = template.copy()
                    device["pci_address"] = bdf
                    device["driver"] = info["driver"]
                    device["numa_node"] = info["numa_node"]
                    device["bridges"] = list(func.chain)
                    device["switches"] = list(template["switches"])
                    device["netdevs"] = netdevs.get(bdf, [])
                    device["rdma_devices"] = [e["name"] for e in rdma]
                    devices.append(device)
                    continue
            else:
                template_key = None
            if is_bridge_class(info["class_code"]):
                continue
            kind = classify(info["class_code"], info["vendor_id"], bool(rdma))
            device: dict[str, Any] = {
                "pci_address": bdf,
                "kind": kind,
                "class_id": info["class_id"],
                "vendor_id": info["vendor_id"],
                "device_id": info["device_id"],
                "subsystem_vendor_id": info["subsystem_vendor_id"],
                "subsystem_device_id": info["subsystem_device_id"],
                "vendor_name": None,
                "device_name": None,
                "driver": info["driver"],
                "numa_node": info["numa_node"],
                "numa_node_inferred": None,
                "local_cpulist": info["local_cpulist"],
                "pcie_root": self._pcie_root(func),
                "host_bridge": func.host_bridge,
                "bridges": list(func.chain),
                "switches": list(switches_of(func.chain)),
                "link": info["link"],
                "netdevs": netdevs.get(bdf, []),
                "rdma_devices": [e["name"] for e in rdma],
                "sriov": info["sriov"],
                "physfn": info["physfn"],
                "gpu": None,
            }
            if self.pci_ids is not None:
                device["vendor_name"], device["device_name"] = self.pci_ids.names(info["vendor_id"], info["device_id"])
            if kind in GPU_KINDS:
                gpu: dict[str, Any] = {}
                if info["vendor_id"] == "0x10de":
                    gpu.update(self.nvidia_gpu(bdf))
                gpu.update(drm.get(bdf, {}))
                device["gpu"] = gpu or None
            elif template_key is not None:
                vf_templates[template_key] = device
            devices.append(device)

        self._infer_numa(devices, numa_nodes)
        links, nearest = compute_links(devices, self.functions, bridge_roles)
        self._device_warnings(devices, numa_nodes)

        return {
            "schema_version": SCHEMA_VERSION,
            "hostname": self.r.read(self.proc + "/sys/kernel/hostname"),
            "sysfs_root": self.sys,
            "numa_nodes": numa_nodes,
            "devices": devices,
            "bridges": bridges,
            "switches": switches,
            "rdma_devices": rdma_all,
            "links": links,
            "nearest_nics": nearest,
            "counts": _counts(devices),
            "warnings": self.r.warnings,
        }

    def _bridges(self, children: dict[str, list[str]]) -> list[dict[str, Any]]:
        bridges = []
        is_bridge = {
            bdf: (is_bridge_class(f.info.get("class_code")) or not f.listed) for bdf, f in self.functions.items()
        }
        roles: dict[str, str] = {}
        # Parents before children: chains are root-first, so sort by depth.
        for bdf in sorted(
            (b for b, flag in is_bridge.items() if flag),
            key=lambda b: len(self.functions[b].chain),
        ):
            func = self.functions[bdf]
            kids = children.get(bdf, [])
            parent_role = roles.get(func.parent) if func.parent else None
            if func.parent is None:
                role = "root_port"
            elif parent_role == "switch_upstream":
                role = "switch_downstream"
            elif kids and all(is_bridge.get(k) for k in kids) and parent_role in ("root_port", "switch_downstream"):
                role = "switch_upstream"
            else:
                role = "pci_bridge"
            roles[bdf] = role
            info = func.info
            bridges.append(
                {
                    "pci_address": bdf,
                    "role": role,
                    "listed": func.listed,
                    "vendor_id": info.get("vendor_id"),
                    "device_id": info.get("device_id"),
                    "host_bridge": func.host_bridge,
                    "parent": func.parent,
                    "numa_node": info.get("numa_node"),
                    "link": info.get("link"),
                }
            )
        bridges.sort(key=lambda b: b["pci_address"])
        return bridges

    @staticmethod
    def _switches(bridges: list[dict[str, Any]], children: dict[str, list[str]]) -> list[dict[str, Any]]:
        switches = []
        for bridge in bridges:
            if bridge["role"] != "switch_upstream":
                continue
            switches.append(
                {
                    "upstream_port": bridge["pci_address"],
                    "downstream_ports": sorted(children.get(bridge["pci_address"], [])),
                    "vendor_id": bridge["vendor_id"],
                    "device_id": bridge["device_id"],
                    "host_bridge": bridge["host_bridge"],
                    "parent": bridge["parent"],
                }
            )
        return switches

    def _infer_numa(self, devices: list[dict[str, Any]], numa_nodes: list[dict[str, Any]]) -> None:
        known_by_host: dict[str | None, set] = {}
        by_bdf = {d["pci_address"]: d for d in devices}
        for func in self.functions.values():
            node = func.info.get("numa_node")
            if node is not None:
                known_by_host.setdefault(func.host_key, set()).add(node)
        node_cpus = [(n["id"], set(n["cpus"])) for n in numa_nodes]
        for device in devices:
            if device["numa_node"] is not None:
                continue
            func = self.functions[device["pci_address"]]
            inferred = None
            pf = by_bdf.get(device["physfn"]) if device["physfn"] else None
            if pf is not None and pf["numa_node"] is not None:
                inferred = (pf["numa_node"], "physfn")
            if inferred is None:
                for bridge in reversed(func.chain):
                    node = self.functions[bridge].info.get("numa_node")
                    if node is not None:
                        inferred = (node, "nearest_ancestor")
                        break
            if inferred is None:
                nodes = known_by_host.get(func.host_key) if func.host_key else None
                if nodes and len(nodes) == 1:
                    inferred = (next(iter(nodes)), "same_root_bus")
            if inferred is None:
                cpus = func.info.get("local_cpus")
                if cpus:
                    matches = [nid for nid, ncpus in node_cpus if set(cpus) <= ncpus]
                    if len(matches) == 1:
                        inferred = (matches[0], "local_cpulist")
            if inferred is None and len(numa_nodes) == 1:
                inferred = (numa_nodes[0]["id"], "single_numa_node")
            if inferred is not None:
                device["numa_node_inferred"] = {
                    "node": inferred[0],
                    "rule": inferred[1],
                }

    def _device_warnings(
        self,
        devices: list[dict[str, Any]],
        numa_nodes: list[dict[str, Any]],
    ) -> None:
        multi_numa = len(numa_nodes) > 1
        for device in devices:
            if device["kind"] in ("other", "nvme") or device["physfn"]:
                continue
            bdf = device["pci_address"]
            if multi_numa and device["numa_node"] is None:
                inferred = device["numa_node_inferred"]
                how = (
                    f"inferred NUMA node {inferred['node']} ({inferred['rule']})"
                    if inferred
                    else "no NUMA node could be inferred"
                )
                self.r.warn(f"{device['kind']} {bdf}: numa_node is -1 on a {len(numa_nodes)}-node system; {how}")
            if device["pcie_root"] is None:
                self.r.warn(
                    "{} {}: no resource.kubernetes.io/pcieRoot (path {}); alignment by PCIe root is impossible".format(
                        device["kind"],
                        bdf,
                        "outside /sys/devices/pci*" if device["host_bridge"] else "unknown",
                    )
                )


def _counts(devices: list[dict[str, Any]]) -> dict[str, int]:
    counts = {kind: 0 for kind in KINDS}
    vfs = 0
    for device in devices:
        counts[device["kind"]] += 1
        if device["physfn"]:
            vfs += 1
    counts["vfs"] = vfs
    return counts


# --------------------------------------------------------------------------
# GPU x NIC levels
# --------------------------------------------------------------------------


def _effective_numa(device: dict[str, Any]) -> int | None:
    if device["numa_node"] is not None:
        return device["numa_node"]
    inferred = device.get("numa_node_inferred")
    return inferred["node"] if inferred else None


def pair_level(
    a_chain: list[str],
    b_chain: list[str],
    a_bdf: str,
    b_bdf: str,
    a_host: str | None,
    b_host: str | None,
    a_numa: int | None,
    b_numa: int | None,
    bridge_roles: dict[str, str],
    bridge_parent: dict[str, str | None],
) -> str:
    """nvidia-smi ``topo -m`` level between two PCI functions.

    PIX: at most one PCIe switch (or bridge) between them, or two functions of
    one device; PXB: several switches/bridges, host bridge not crossed; PHB:
    through their common host bridge; NODE: different host bridges on one
    NUMA node; SYS: different NUMA nodes, or locality unknown.
    """
    if a_host is not None and a_host == b_host:
        if pci_function_key(a_bdf)[0] == pci_function_key(b_bdf)[0] and a_chain == b_chain:
            return "PIX"
        common = 0
        for x, y in zip(a_chain, b_chain):
            if x != y:
                break
            common += 1
        if common == 0:
            return "PHB"
        hops = set()
        for chain in (a_chain, b_chain):
            for bridge in chain[common - 1 :]:
                role = bridge_roles.get(bridge)
                if role == "root_port":
                    continue
                hops.add(bridge_parent.get(bridge) if role == "switch_downstream" else bridge)
        return "PIX" if len(hops) <= 1 else "PXB"
    if a_numa is not None and a_numa == b_numa:
        return "NODE"
    return "SYS"


def compute_links(
    devices: list[dict[str, Any]],
    functions: dict[str, Any],
    bridge_roles: dict[str, str],
) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, Any]]]:
    """Level matrix {gpu: {nic: level}} and each GPU's nearest physical NICs.

    A VF sits on its PF's link, so it gets its PF's level without another walk.
    """
    bridge_parent = {bdf: f.parent for bdf, f in functions.items()}
    gpus = [d for d in devices if d["kind"] in GPU_KINDS]
    nics = [d for d in devices if d["kind"] in NIC_KINDS]
    # Levels are worked out for NICs that are not VFs of a listed PF; each
    # VF then takes its PF's (a PF sorts before its VFs). ``level_source``
    # names, per NIC in device order, whose level it has.
    own: list[dict[str, Any]] = []
    level_source: list[str] = []
    levels_known: set[str] = set()
    for nic in nics:
        pf = nic["physfn"]
        if pf in levels_known:
            level_source.append(pf)
        else:
            own.append(nic)
            level_source.append(nic["pci_address"])
            levels_known.add(nic["pci_address"])
    row_keys = [d["pci_address"] for d in nics]
    # One C-level lookup per GPU instead of a Python loop over hundreds of VFs.
    pick = operator.itemgetter(*level_source) if len(level_source) > 1 else None
    physical_nics = [d["pci_address"] for d in nics if not d["physfn"]]
    links: dict[str, dict[str, str]] = {}
    nearest: dict[str, dict[str, Any]] = {}
    for gpu in gpus:
        g = functions[gpu["pci_address"]]
        g_numa = _effective_numa(gpu)
        levels: dict[str, str] = {}
        for nic in own:
            n = functions[nic["pci_address"]]
            levels[nic["pci_address"]] = pair_level(
                g.chain,
                n.chain,
                g.bdf,
                n.bdf,
                g.host_key,
                n.host_key,
                g_numa,
                _effective_numa(nic),
                bridge_roles,
                bridge_parent,
            )
        if pick is not None:
            row = dict(zip(row_keys, pick(levels)))
        else:
            row = levels
        links[gpu["pci_address"]] = row
        physical = [(LEVEL_RANK[row[bdf]], bdf) for bdf in physical_nics]
        if physical:
            best = min(rank for rank, _bdf in physical)
            nearest[gpu["pci_address"]] = {
                "level": LEVELS[best],
                "nics": sorted(bdf for rank, bdf in physical if rank == best),
            }
        else:
            nearest[gpu["pci_address"]] = {"level": None, "nics": []}
    return links, nearest


def probe(
    sysfs_root: str = "/sys",
    procfs_root: str = "/proc",
    pci_ids_path: str | None = None,
) -> dict[str, Any]:
    """Probe a node (or a captured sysfs tree) and return its topology."""
    if not os.path.isdir(sysfs_root):
        raise ValueError(f"sysfs_root {sysfs_root} is not a directory")
    prober = _Probe(sysfs_root, procfs_root, pci_ids_path)
    # The probe makes thousands of small objects and no reference cycles;
    # left on, the cyclic collector would walk them about ten times per probe
    # of a node with hundreds of VFs, for nothing (a tenth of the time).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return prober.run()
    finally:
        if collecting:
            gc.enable()
        prober.r.close()


# --------------------------------------------------------------------------
# Summaries (used by the topology role's site summary and the report)
# --------------------------------------------------------------------------


def node_summary(
    topology: dict[str, Any], warn_levels: Iterable[str] = ("SYS",), device_options: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Counts, best GPU<->NIC level per GPU and warnings of one node.

    A GPU whose nearest physical NIC is at one of ``warn_levels``, or that has
    no NIC at all, adds a warning to the node's probe warnings.

    ``gpus``, ``nics`` and ``best_level_per_gpu`` count what the probe found
    (every GPU/accelerator, every physical NIC). ``accelerators``,
    ``rdma_nics`` and ``best_rdma_level_per_accelerator`` are the planner's
    view from :func:`device_model.node_devices` (what the driver publishes
    with ``device_options``): the report's counts and alignment score.
    """
    # Imported here: device_model imports this module's constants.
    from ansible_collections.aligned.dra.plugins.module_utils import device_model

    warn = set(warn_levels)
    model = device_model.node_devices(topology, device_options)
    devices = topology.get("devices", [])
    gpus = [d for d in devices if d["kind"] in GPU_KINDS]
    nics = [d for d in devices if d["kind"] in NIC_KINDS and not d.get("physfn")]
    nearest = topology.get("nearest_nics", {})
    best = {}
    warnings = list(topology.get("warnings", []))
    for gpu in gpus:
        bdf = gpu["pci_address"]
        entry = nearest.get(bdf) or {"level": None, "nics": []}
        best[bdf] = entry
        if entry["level"] is None:
            warnings.append(f"{gpu['kind']} {bdf} has no NIC on this node")
        elif entry["level"] in warn:
            warnings.append(f"{gpu['kind']} {bdf} has no NIC closer than {entry['level']}")
    levels = [e["level"] for e in best.values()]
    return {
        "hostname": topology.get("hostname"),
        "numa_nodes": len(topology.get("numa_nodes", [])),
        "gpus": len(gpus),
        "nics": len(nics),
        "vfs": sum(1 for d in devices if d.get("physfn")),
        "best_level_per_gpu": best,
        "level_histogram": {lv: levels.count(lv) for lv in LEVELS if lv in levels},
        "warnings": warnings,
        "accelerators": {key: model["counts"][key] for key in ("gpu", "ve", "accelerator")},
        "rdma_nics": model["counts"]["rdma_nics"],
        "best_rdma_level_per_accelerator": model["nearest"],
    }


def site_summary(
    site: str,
    nodes: dict[str, dict[str, Any]],
    warn_levels: Iterable[str] = ("SYS",),
    device_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Summary of a site from its nodes' topologies (keyed by inventory name)."""
    per_node = {name: node_summary(topology, warn_levels, device_options) for name, topology in sorted(nodes.items())}
    histogram: dict[str, int] = {}
    for summary in per_node.values():
        for level, count in summary["level_histogram"].items():
            histogram[level] = histogram.get(level, 0) + count
    return {
        "site": site,
        "nodes": len(per_node),
        "gpus": sum(s["gpus"] for s in per_node.values()),
        "nics": sum(s["nics"] for s in per_node.values()),
        "vfs": sum(s["vfs"] for s in per_node.values()),
        "accelerators": {
            key: sum(s["accelerators"][key] for s in per_node.values()) for key in ("gpu", "ve", "accelerator")
        },
        "rdma_nics": sum(s["rdma_nics"] for s in per_node.values()),
        "level_histogram": {lv: histogram[lv] for lv in LEVELS if lv in histogram},
        "per_node": per_node,
        "warnings": [f"{name}: {w}" for name, s in per_node.items() for w in s["warnings"]],
    }


def site_summary_markdown(summary: dict[str, Any]) -> str:
    """Human-readable rendering of :func:`site_summary`."""
    from ansible_collections.aligned.dra.plugins.module_utils import device_model

    plural = device_model.plural

    families = ", ".join(device_model.family_counts_text(summary["accelerators"])) or "no accelerator"
    lines = [
        f"# Site {summary['site']}",
        "",
        f"{plural(summary['nodes'], 'node')}, {plural(summary['gpus'], 'GPU/accelerator', 'GPUs/accelerators')}, "
        f"{plural(summary['nics'], 'physical NIC')}, {plural(summary['vfs'], 'VF')}.",
        "",
        f"As the planner sees them: {families}; {plural(summary['rdma_nics'], 'RDMA NIC')}.",
        "",
        "Best GPU-to-NIC level per GPU: "
        + (", ".join(f"{lv} {n}" for lv, n in summary["level_histogram"].items()) or "no GPUs"),
        "",
        "| node | NUMA nodes | GPUs | NICs | VFs | GPU: nearest NIC (level) |",
        "|---|---|---|---|---|---|",
    ]
    for name, node in summary["per_node"].items():
        pairs = "; ".join(
            f"{gpu}: {', '.join(best['nics']) or '-'} ({best['level'] or 'none'})"
            for gpu, best in node["best_level_per_gpu"].items()
        )
        lines.append(
            f"| {name} | {node['numa_nodes']} | {node['gpus']} | {node['nics']} | {node['vfs']} | {pairs or '-'} |"
        )
    failed = summary.get("nodes_failed") or {}
    if "node_counts" in summary:
        counts = summary["node_counts"]
        lines += [
            "",
            "## Nodes not in this summary",
            "",
            f"{counts['ok']} ok, {counts['failed']} failed, {counts['unreachable']} unreachable.",
            "",
        ]
        for name, entry in sorted(failed.items()):
            stale = entry.get("stale_facts")
            note = f" (facts file of an earlier run, {stale['age_s']} s old, not used)" if stale else ""
            task = f", task {entry['task']}" if entry.get("task") else ""
            lines.append(f"- {name}: {entry['state']} in stage {entry['stage']}{task}: {entry['error']}{note}")
    lines += ["", "## Warnings", ""]
    lines += [f"- {w}" for w in summary["warnings"]] or ["none"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# Every node accounted for: which of a site's nodes failed, and how
# --------------------------------------------------------------------------

NODE_STATES = ("failed", "unreachable")


def node_accounting(
    site_hosts: Iterable[str],
    ok_hosts: Iterable[str],
    failures: dict[str, dict[str, Any]],
    stage: str,
    stale_ages: dict[str, int] | None = None,
) -> dict[str, Any]:
    """``nodes_failed`` and ``node_counts`` of one site.

    ``site_hosts`` are the site's nodes this run targets, ``ok_hosts`` those
    still in the run, ``failures`` the recorded failures (``state``, ``stage``,
    ``task``, ``error``) by node. A node with a failure is failed (or
    unreachable, as recorded); a node neither ok nor with a failure is
    unreachable in ``stage``. ``stale_ages`` gives the age in seconds of the
    facts file an earlier run left for a failed node: it is reported, never used.
    """
    ok = set(ok_hosts)
    stale_ages = stale_ages or {}
    nodes_failed: dict[str, dict[str, Any]] = {}
    hosts = sorted(set(site_hosts))
    for host in hosts:
        failure = failures.get(host)
        if failure is None:
            if host in ok:
                continue
            failure = {
                "state": "unreachable",
                "stage": stage,
                "task": None,
                "error": f"the node gave no result in stage {stage} (unreachable: the run's output has the connection error)",
            }
        state = failure.get("state") or "failed"
        if state not in NODE_STATES:
            raise ValueError(f"{host}: aligned_dra_node_failure.state {state!r} is not one of {list(NODE_STATES)}")
        age = stale_ages.get(host)
        nodes_failed[host] = {
            "state": state,
            "stage": str(failure.get("stage") or stage),
            "task": None if failure.get("task") in (None, "") else str(failure["task"]),
            "error": str(failure.get("error") or ""),
            "stale_facts": None
            if age is None
            else {"file": f"nodes/{host}.json", "age_s": max(0, int(age)), "used": False},
        }
    states = [entry["state"] for entry in nodes_failed.values()]
    return {
        "nodes_failed": nodes_failed,
        "node_counts": {
            "ok": len(hosts) - len(nodes_failed),
            "failed": states.count("failed"),
            "unreachable": states.count("unreachable"),
        },
    }


def node_counts_line(site: str, counts: dict[str, int]) -> str:
    """The run's last word on a site: ``site <name>: nodes <ok> ok / <failed> failed / <unreachable> unreachable``."""
    return f"site {site}: nodes {counts['ok']} ok / {counts['failed']} failed / {counts['unreachable']} unreachable"
