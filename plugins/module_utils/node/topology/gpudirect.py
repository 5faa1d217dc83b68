# SPDX-License-Identifier: Apache-2.0
"""The probe's reading of what decides GPUDirect RDMA: ACS, the GPU x NIC paths, the IOMMU, peer memory.

Part of the probe (:class:`prober._Probe`). The PCI walk reads each
function's ``config`` once (``_configs``); here come the ACS state of every
function read, the ``p2p`` map of the GPU x NIC pairs by the kernel's rule
(:mod:`.p2p`), and the node's ``gpudirect`` block:

- ``iommu``: ``off`` when ``sys/kernel/iommu_groups`` is there and empty
  (or, on the live ``/sys``, not there: a kernel without the IOMMU API),
  ``passthrough`` when every GPU's and physical NIC's group is of type
  ``identity``, ``translated`` when any is ``DMA`` or ``DMA-FQ``, None when
  unknown (no ``sys/kernel/iommu_groups`` in the tree, a group not readable);
  the groups read through each function's ``iommu_group`` link, and the
  IOMMU and PCI arguments of ``/proc/cmdline``;
- ``peer_memory``: ``nvidia_peermem`` loaded (``sys/module/nvidia_peermem``,
  else ``/proc/modules``), DMA-BUF possible (NVIDIA's open kernel modules,
  named in ``/proc/driver/nvidia/version``, on Linux >= 5.12) and the method
  the NIC registers GPU memory with;
- ``nics``: the physical NICs' Max Read Request and Relaxed Ordering (Device
  Control); ``vfio``: the functions bound to ``vfio-pci``;
- ``ready`` with every reason it is not (None: nothing says no, something
  is unknown).
"""

from __future__ import annotations

import operator
import os
import re

from . import GPU_KINDS, NIC_KINDS
from .p2p import PATH_HOST_BRIDGE, PATH_UNKNOWN, CapabilityListError, acs_state, device_control, p2p_path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from .pci_walk import _Function
    from .sysfs import Reader

# Kernel command line arguments that decide the IOMMU and ACS (pci=disable_acs_redir=, pci=noats, ...).
CMDLINE_PREFIXES = ("iommu", "intel_iommu", "amd_iommu", "pci=")
TRANSLATED_TYPES = ("DMA", "DMA-FQ")
DMA_BUF_KERNEL = (5, 12)
ALIGNED_LEVELS = ("PIX", "PXB")
_RELEASE_RE = re.compile(r"^(\d+)\.(\d+)")


def kernel_version(release: str | None) -> tuple[int, int] | None:
    """(major, minor) of a kernel release string such as ``6.8.0-45-generic``."""
    found = _RELEASE_RE.match(release or "")
    return (int(found.group(1)), int(found.group(2))) if found else None


def cmdline_arguments(cmdline: str | None) -> list[str] | None:
    """The IOMMU and PCI arguments of a kernel command line, in order; None when it is not known."""
    if cmdline is None:
        return None
    return [token for token in cmdline.split() if token.startswith(CMDLINE_PREFIXES)]


def peer_memory(peermem: bool | None, version_text: str | None, release: str | None) -> dict[str, Any]:
    """The ``peer_memory`` block from what the tree says (None: the tree does not say)."""
    open_modules = None if version_text is None else "Open Kernel Module" in version_text
    version = kernel_version(release)
    if open_modules is False or (version is not None and version < DMA_BUF_KERNEL):
        dma_buf: bool | None = False
    elif open_modules and version is not None:
        dma_buf = True
    else:
        dma_buf = None
    if dma_buf:
        method: str | None = "dma_buf"
    elif peermem:
        method = "nvidia_peermem"
    elif dma_buf is False and peermem is False:
        method = "none"
    else:
        method = None
    return {
        "nvidia_peermem": peermem,
        "dma_buf": dma_buf,
        "open_kernel_modules": open_modules,
        "kernel_release": release,
        "method": method,
    }


def is_live(sysfs_root: str) -> bool:
    """Whether ``sysfs_root`` is the running kernel's ``/sys`` (not a captured or built tree)."""
    return os.path.realpath(sysfs_root) == "/sys"


def iommu_mode(present: bool, empty: bool, groups: dict[str, str | None]) -> str | None:
    """``off``, ``passthrough``, ``translated`` or None (unknown) from the groups of the GPUs and NICs."""
    if not present:
        return None
    if empty:
        return "off"
    types = list(groups.values())
    if any(kind in TRANSLATED_TYPES for kind in types):
        return "translated"
    if types and all(kind == "identity" for kind in types):
        return "passthrough"
    return None


class GpudirectProbe:
    """Part of the probe (:class:`prober._Probe`): ACS, ``p2p`` and ``gpudirect``."""

    # Set by the probe's __init__ and its PCI walk.
    sys: str
    proc: str
    r: Reader
    functions: dict[str, _Function]
    _configs: dict[str, bytes]
    _p2p_own: list[dict[str, Any]]  # the entries p2p_map worked out, each once

    def acs_states(self) -> dict[str, dict[str, Any] | None]:
        """ACS of every function whose config was read; a malformed list gives None and a warning."""
        states: dict[str, dict[str, Any] | None] = {}
        for bdf, config in self._configs.items():
            try:
                states[bdf] = acs_state(config)
            except CapabilityListError as exc:
                self.r.warn(f"{bdf}: malformed extended capability list in config space ({exc}); its ACS is unknown")
                states[bdf] = None
        return states

    def p2p_map(
        self, devices: list[dict[str, Any]], acs: dict[str, dict[str, Any] | None]
    ) -> dict[str, dict[str, dict[str, Any]]]:
        """``{gpu: {nic: {path, redirected_at, unread}}}`` for the pairs of ``links``.

        A VF takes its PF's entry (the same object), as it takes its level:
        the path is worked out once per physical NIC and GPU.
        """
        gpus = [d["pci_address"] for d in devices if d["kind"] in GPU_KINDS]
        nics = [d for d in devices if d["kind"] in NIC_KINDS]
        own: list[str] = []
        source: list[str] = []
        known: set[str] = set()
        for nic in nics:
            pf = nic["physfn"]
            if pf in known:
                source.append(pf)
            else:
                own.append(nic["pci_address"])
                source.append(nic["pci_address"])
                known.add(nic["pci_address"])
        functions = self.functions
        row_keys = [nic["pci_address"] for nic in nics]
        # One C-level lookup per GPU instead of a Python loop over hundreds of VFs.
        pick = operator.itemgetter(*source) if len(source) > 1 else None
        p2p: dict[str, dict[str, dict[str, Any]]] = {}
        self._p2p_own = []
        for gpu in gpus:
            chain = functions[gpu].chain
            entries = {nic: p2p_path(gpu, chain, nic, functions[nic].chain, acs) for nic in own}
            self._p2p_own.extend(entries.values())
            p2p[gpu] = dict(zip(row_keys, pick(entries))) if pick is not None else entries
        return p2p

    def warn_unread(self) -> None:
        """One warning naming the functions whose ACS is not known on the GPU x NIC paths it leaves unverified."""
        unread: set[str] = set()
        for entry in self._p2p_own:  # each pair's entry once, not once more per VF
            if entry["path"] == PATH_UNKNOWN:
                unread.update(entry["unread"])
        if unread:
            self.r.warn(
                "ACS not readable (config space shorter than 4096 bytes, missing or malformed: a capture or"
                f" probe without root gives 64 bytes) on {', '.join(sorted(unread))}; GPU x NIC paths"
                " through them are unverified"
            )

    # -- the gpudirect block ------------------------------------------------

    def gpudirect(
        self,
        devices: list[dict[str, Any]],
        links: dict[str, dict[str, str]],
        p2p: dict[str, dict[str, dict[str, Any]]],
    ) -> dict[str, Any]:
        physical = [d for d in devices if not d["physfn"]]
        gpus = [d for d in physical if d["kind"] in GPU_KINDS]
        nics = [d for d in physical if d["kind"] in NIC_KINDS]
        iommu = self._iommu([d["pci_address"] for d in gpus + nics])
        memory = peer_memory(self._peermem_loaded(), self.r.read(self.proc + "/driver/nvidia/version"), self._release())
        block = {
            "iommu": iommu,
            "peer_memory": memory,
            "nics": {d["pci_address"]: self._device_control(d["pci_address"]) for d in nics},
            "vfio": sorted(bdf for bdf, f in self.functions.items() if f.info.get("driver") == "vfio-pci"),
            "ready": None,
            "reasons": [],
        }
        nvidia = [d["pci_address"] for d in gpus if d["vendor_id"] == "0x10de"]
        rdma = [d["pci_address"] for d in nics if d["kind"] == "rdma"]
        blocking, unknown = readiness(nvidia, rdma, iommu, memory, links, p2p)
        block["ready"] = False if blocking else (None if unknown else True)
        block["reasons"] = blocking + unknown
        return block

    def _iommu(self, bdfs: list[str]) -> dict[str, Any]:
        base = self.sys + "/kernel/iommu_groups"
        present = os.path.isdir(base)
        if not present and is_live(self.sys):
            # the running kernel without the IOMMU API (CONFIG_IOMMU_API=n) has no iommu_groups: no IOMMU;
            # a tree without it is a capture that did not take it: unknown
            present = empty = True
        else:
            empty = present and not self.r.listdir(base)
        groups: dict[str, str | None] = {}
        if present and not empty:
            types: dict[str, str | None] = {}
            for bdf in sorted(bdfs):
                func = self.functions[bdf]
                link = self.r.readlink(func.path + "/iommu_group")
                if link is None:
                    groups[bdf] = None
                    continue
                group = link[link.rfind("/") + 1 :]
                if group not in types:
                    types[group] = self.r.read(f"{base}/{group}/type")
                groups[bdf] = types[group]
        return {
            "mode": iommu_mode(present, empty, groups),
            "groups": groups,
            "cmdline": cmdline_arguments(self.r.read(self.proc + "/cmdline")),
        }

    def _peermem_loaded(self) -> bool | None:
        modules = self.sys + "/module"
        if os.path.isdir(modules + "/nvidia_peermem"):
            return True
        if os.path.isdir(modules):
            return False
        listed = self.r.read(self.proc + "/modules")
        if listed is None:
            return None
        return any(line.split(" ", 1)[0] == "nvidia_peermem" for line in listed.splitlines())

    def _release(self) -> str | None:
        release = self.r.read(self.proc + "/sys/kernel/osrelease")
        if release:
            return release
        version = self.r.read(self.proc + "/version")  # "Linux version 6.8.0-45-generic (...) ..."
        words = version.split() if version else []
        return words[2] if len(words) > 2 and words[:2] == ["Linux", "version"] else None

    def _device_control(self, bdf: str) -> dict[str, Any]:
        config = self._configs.get(bdf)
        control = None
        if config is not None:
            try:
                control = device_control(config)
            except CapabilityListError as exc:
                self.r.warn(f"{bdf}: malformed capability list in config space ({exc}); Device Control unknown")
        if control is None:
            return {"max_read_request": None, "relaxed_ordering": None}
        return control


def readiness(
    nvidia: list[str],
    rdma: list[str],
    iommu: dict[str, Any],
    memory: dict[str, Any],
    links: dict[str, dict[str, str]],
    p2p: dict[str, dict[str, dict[str, Any]]],
) -> tuple[list[str], list[str]]:
    """(reasons it is not ready, reasons it is unknown) of a node."""
    blocking: list[str] = []
    unknown: list[str] = []
    if not nvidia or not rdma:
        missing = " and ".join(what for what, found in (("NVIDIA GPU", nvidia), ("RDMA NIC", rdma)) if not found)
        blocking.append(f"no {missing} on this node")
    mode = iommu["mode"]
    if mode == "translated":
        translated = sorted(bdf for bdf, kind in iommu["groups"].items() if kind in TRANSLATED_TYPES)
        blocking.append(
            f"the IOMMU translates DMA for {', '.join(translated)}: GPUDirect RDMA needs it off or in passthrough"
            " (iommu=pt)"
        )
    elif mode is None:
        unread = sorted(bdf for bdf, kind in iommu["groups"].items() if kind is None)
        where = f" (IOMMU group not readable for {', '.join(unread)})" if unread else ""
        unknown.append(f"IOMMU mode unknown{where}")
    method = memory["method"]
    if method == "none":
        why = (
            "the NVIDIA kernel modules are not the open ones"
            if memory["open_kernel_modules"] is False
            else f"Linux {memory['kernel_release']} is older than 5.12"
        )
        blocking.append(f"no peer memory: nvidia_peermem is not loaded and DMA-BUF is not possible ({why})")
    elif method is None:
        unknown.append(
            "peer memory unknown: "
            + ", ".join(
                what
                for what, value in (
                    ("whether nvidia_peermem is loaded", memory["nvidia_peermem"]),
                    ("the NVIDIA kernel modules", memory["open_kernel_modules"]),
                    ("the kernel release", memory["kernel_release"]),
                )
                if value is None
            )
        )
    redirected: set[str] = set()
    host_pairs = unknown_pairs = 0
    for gpu in nvidia:
        row = p2p.get(gpu, {})
        levels = links.get(gpu, {})
        for nic in rdma:
            if levels.get(nic) not in ALIGNED_LEVELS or nic not in row:
                continue
            entry = row[nic]
            if entry["path"] == PATH_HOST_BRIDGE:
                host_pairs += 1
                redirected.update(entry["redirected_at"])
            elif entry["path"] == PATH_UNKNOWN:
                unknown_pairs += 1
    if host_pairs:
        blocking.append(
            f"ACS redirects peer-to-peer at {', '.join(sorted(redirected))}: {host_pairs} aligned GPU x NIC"
            " pair(s) go through the host bridge"
        )
    if unknown_pairs:
        unknown.append(f"ACS not readable on the paths of {unknown_pairs} aligned GPU x NIC pair(s)")
    return blocking, unknown
