# SPDX-License-Identifier: Apache-2.0
"""Capture the part of a node's sysfs and procfs that the topology probe reads.

:func:`capture` walks exactly what :data:`topology.PROBE_READS` lists (NUMA
nodes, every PCI function on the paths of ``bus/pci/devices`` with its
``config`` space as far as it is readable and its IOMMU group link, the net,
infiniband and drm class devices below PCI functions, the IOMMU groups' types,
whether ``nvidia_peermem`` is loaded, and from procfs the NVIDIA GPU
information and driver version, the host name, the kernel command line,
release and modules) and returns archive entries for
:func:`snapshot.write_archive`: a probe of the extracted archive returns what a
probe of the node returns.

Attributes are read with real reads (sysfs reports every file as 4096 bytes
long, so copying by size is wrong); files that cannot be read (write-only,
root-only, an ``EINVAL`` from the speed of a link that is down) are left out
and listed in ``left_out``. Symlinks stay symlinks, rewritten to the shortest
relative form inside the tree; a link that points outside the tree is left
out. Network interfaces that belong to no PCI function (``lo``, bridges,
veths) are not captured.

Runs on nodes: no Ansible imports, Python >= 3.9.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import stat

from ansible_collections.aligned.dra.plugins.module_utils.node.snapshots.archive import write_archive
from ansible_collections.aligned.dra.plugins.module_utils.node.topology.reads import PROBE_READS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_BDF_RE = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_NUMA_NODE_RE = re.compile(r"^node[0-9]+$")
# No sysfs attribute or procfs file the probe reads comes near this.
MAX_FILE_BYTES = 1 << 20


class CaptureError(Exception):
    """The roots cannot be captured at all (the message names the option)."""


class _Capture:
    def __init__(self, sysfs_root: str, procfs_root: str, redact_addresses: bool) -> None:
        self.roots = {
            "sys": os.path.normpath(os.path.abspath(sysfs_root)),
            "proc": os.path.normpath(os.path.abspath(procfs_root)),
        }
        self.redact = redact_addresses
        self.entries: dict[str, Any] = {"sys": ("dir",), "proc": ("dir",)}
        self.left_out: list[str] = []
        self._functions: set[str] = set()

    # -- primitives ------------------------------------------------------------

    def _path(self, top: str, rel: str) -> str:
        return self.roots[top] + "/" + rel if rel else self.roots[top]

    def listdir(self, top: str, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self._path(top, rel)))
        except FileNotFoundError:
            return []
        except OSError as exc:
            self.left_out.append(f"{top}/{rel}: {exc.strerror or exc}")
            return []

    def isdir(self, top: str, rel: str) -> bool:
        return os.path.isdir(self._path(top, rel))

    def directory(self, top: str, rel: str) -> None:
        name = f"{top}/{rel}"
        if self.entries.get(name, ("dir",))[0] == "dir":
            self.entries[name] = ("dir",)

    def file(self, top: str, rel: str) -> None:
        """Copy one file by reading it; a missing file is normal (optional attribute)."""
        path = self._path(top, rel)
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                return
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        except OSError as exc:
            self.left_out.append(f"{top}/{rel}: {exc.strerror or exc}")
            return
        chunks = []
        size = 0
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > MAX_FILE_BYTES:
                    self.left_out.append(f"{top}/{rel}: larger than {MAX_FILE_BYTES} bytes")
                    return
                chunks.append(chunk)
        except OSError as exc:
            self.left_out.append(f"{top}/{rel}: {exc.strerror or exc}")
            return
        finally:
            os.close(fd)
        self.entries[f"{top}/{rel}"] = ("file", b"".join(chunks))

    def resolve(self, rel: str) -> tuple[str, str] | None:
        """(relative link text, target relative to the sysfs root) of link ``rel``; None if not a link.

        A link that leaves the tree is recorded in ``left_out`` and None returned.
        """
        path = self._path("sys", rel)
        try:
            target = os.readlink(path)
        except OSError:
            return None  # missing, or not a link
        root = self.roots["sys"]
        if target.startswith("/"):
            resolved = posixpath.normpath(target)
        else:
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if not resolved.startswith(root + "/"):
            self.left_out.append(f"sys/{rel}: link to {target} outside the sysfs root")
            return None
        inside = resolved[len(root) + 1 :]
        return posixpath.relpath(inside, posixpath.dirname(rel) or "."), inside

    def link(self, rel: str) -> str | None:
        """Copy link ``rel`` (relative); return its target relative to the sysfs root."""
        found = self.resolve(rel)
        if found is None:
            return None
        self.entries["sys/" + rel] = ("link", found[0])
        return found[1]

    # -- what the probe reads --------------------------------------------------

    def numa_nodes(self) -> None:
        base = PROBE_READS["numa_dir"]
        for name in self.listdir("sys", base):
            rel = base + "/" + name
            if _NUMA_NODE_RE.match(name) and self.isdir("sys", rel):
                self.directory("sys", rel)
                for attribute in PROBE_READS["numa_node_files"]:
                    self.file("sys", rel + "/" + attribute)

    def pci(self) -> None:
        bus = PROBE_READS["pci_devices_dir"]
        self.directory("sys", bus)
        for name in self.listdir("sys", bus):
            rel = bus + "/" + name
            if os.path.islink(self._path("sys", rel)):
                target = self.link(rel)
            elif self.isdir("sys", rel):
                target = rel  # some trees hold the directory itself
            else:
                target = None
            if target is not None:
                self.pci_path(target)

    def pci_path(self, rel: str) -> None:
        """Every PCI function on the path to ``rel`` (its bridges, listed or not) and ``rel``."""
        parts = rel.split("/")
        for index, part in enumerate(parts):
            if _BDF_RE.match(part):
                self.function("/".join(parts[: index + 1]))

    def function(self, rel: str) -> None:
        if rel in self._functions:
            return
        self._functions.add(rel)
        if not self.isdir("sys", rel):
            return
        self.directory("sys", rel)
        for attribute in PROBE_READS["pci_function_files"]:
            self.file("sys", rel + "/" + attribute)
        patterns = PROBE_READS["pci_function_links"]
        names = None
        for pattern in patterns:
            if "*" in pattern:
                if names is None:
                    names = self.listdir("sys", rel)
                for name in fnmatch.filter(names, pattern):
                    self.link(rel + "/" + name)
            else:
                self.link(rel + "/" + pattern)

    def classes(self) -> None:
        redacted = PROBE_READS["address_files"] if self.redact else {}
        pci_only = PROBE_READS["class_pci_only"]
        for class_name, attributes in PROBE_READS["class_files"].items():
            base = "class/" + class_name
            if not self.isdir("sys", base):
                continue
            self.directory("sys", base)
            wanted = [a for a in attributes if a not in redacted.get(class_name, ())]
            for name in self.listdir("sys", base):
                rel = base + "/" + name
                found = self.resolve(rel)
                if found is None:
                    continue
                if class_name in pci_only and not any(_BDF_RE.match(p) for p in found[1].split("/")[:-1]):
                    continue  # lo, bridges, veths: the probe leaves them out
                self.entries["sys/" + rel] = ("link", found[0])
                target = found[1]
                if not self.isdir("sys", target):
                    continue
                self.directory("sys", target)
                for attribute in wanted:
                    self.file("sys", target + "/" + attribute)
                if class_name == "infiniband":
                    self.rdma_device(target)

    def rdma_device(self, rel: str) -> None:
        for port in self.listdir("sys", rel + "/ports"):
            port_rel = f"{rel}/ports/{port}"
            if self.isdir("sys", port_rel):
                self.directory("sys", port_rel)
                for attribute in PROBE_READS["rdma_port_files"]:
                    self.file("sys", port_rel + "/" + attribute)
        # Character devices beside the RDMA device's infiniband/ directory.
        parent = posixpath.dirname(posixpath.dirname(rel))
        for kind in PROBE_READS["rdma_char_device_dirs"]:
            kind_rel = parent + "/" + kind
            for name in self.listdir("sys", kind_rel):
                device = kind_rel + "/" + name
                if self.isdir("sys", device):
                    self.directory("sys", device)
                    self.file("sys", device + "/ibdev")

    def kernel(self) -> None:
        """The IOMMU groups' types and the modules the probe looks for (directories, even empty ones)."""
        base = PROBE_READS["iommu_groups_dir"]
        if self.isdir("sys", base):
            self.directory("sys", base)
            for name in self.listdir("sys", base):
                rel = base + "/" + name
                if self.isdir("sys", rel):
                    self.directory("sys", rel)
                    for attribute in PROBE_READS["iommu_group_files"]:
                        self.file("sys", rel + "/" + attribute)
        modules = PROBE_READS["module_dir"]
        if self.isdir("sys", modules):
            self.directory("sys", modules)
            for name in PROBE_READS["modules"]:
                if self.isdir("sys", modules + "/" + name):
                    self.directory("sys", modules + "/" + name)

    def procfs(self) -> None:
        for pattern in PROBE_READS["procfs_files"]:
            for rel in self._expand("proc", pattern):
                self.file("proc", rel)

    def _expand(self, top: str, pattern: str) -> list[str]:
        found = [""]
        for part in pattern.split("/"):
            following = []
            for prefix in found:
                if "*" in part:
                    names = fnmatch.filter(self.listdir(top, prefix), part)
                else:
                    names = [part]
                following.extend(f"{prefix}/{n}" if prefix else n for n in names)
            found = following
        return found


def capture(sysfs_root: str = "/sys", procfs_root: str = "/proc", redact_addresses: bool = False) -> dict[str, Any]:
    """Read what the probe reads under the two roots.

    Returns ``entries`` (for :func:`snapshot.write_archive`), ``left_out``
    (files that exist but could not be read, with the reason) and ``counts``.
    Raises :class:`CaptureError` when a root is not a directory.
    """
    for option, root in (("sysfs_root", sysfs_root), ("procfs_root", procfs_root)):
        if not os.path.isdir(root):
            raise CaptureError(f"{option}: {root} is not a directory")
    walk = _Capture(sysfs_root, procfs_root, redact_addresses)
    walk.numa_nodes()
    walk.pci()
    walk.classes()
    walk.kernel()
    walk.procfs()
    entries = walk.entries
    for name in list(entries):
        parent = posixpath.dirname(name)
        while parent and parent not in entries:
            entries[parent] = ("dir",)
            parent = posixpath.dirname(parent)
    counts = {"directories": 0, "files": 0, "links": 0}
    for entry in entries.values():
        counts[{"dir": "directories", "file": "files", "link": "links"}[entry[0]]] += 1
    return {"entries": entries, "left_out": sorted(walk.left_out), "counts": counts}


def capture_archive(
    sysfs_root: str = "/sys", procfs_root: str = "/proc", redact_addresses: bool = False
) -> tuple[bytes, dict[str, Any]]:
    """:func:`capture` written as snapshot bytes; returns (bytes, the capture without entries)."""
    result = capture(sysfs_root, procfs_root, redact_addresses)
    data = write_archive(result.pop("entries"))
    return data, result
