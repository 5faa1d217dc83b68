# SPDX-License-Identifier: Apache-2.0
"""GPUDirect RDMA made possible on a node: PCIe ACS redirect, IOMMU passthrough, peer memory.

:func:`apply` is the one code path of the ``aligned.dra.gpudirect`` module and
of the boot-time unit (:mod:`netconf`'s ``gpudirect`` command). It reads the
node with the probe (``probe()``'s ``links``, ``p2p``, ``devices`` and
``gpudirect``) and, for each setting asked (``keep`` leaves that part alone):

- ``acs: disable`` clears ACS P2P Request Redirect, Completion Redirect and
  Egress Control (:func:`p2p.acs_cleared`) on exactly the functions that
  ``p2p`` names in ``redirected_at`` for a GPU x physical NIC pair whose
  physical level is PIX or PXB. The two bytes of ACS Control are written in
  place in the function's ``config`` file (every other byte untouched) and
  read back. Refused before any change when a function on or below such a
  function is bound to ``vfio-pci``, and when the IOMMU translates unless
  ``iommu: passthrough`` is asked too (the writes then wait for the reboot:
  the boot-time unit makes them).
- ``iommu: passthrough`` writes ``iommu=pt`` (and ``iommu_vendor_args``) to a
  GRUB drop-in and runs ``update-grub``; a kernel running without them needs
  a reboot. A kernel booted with them whose groups still translate fails.
- ``peer_memory: auto`` loads ``nvidia_peermem`` now and at boot where
  DMA-BUF is not possible; ``dma_buf`` refuses a node where it is not.

Runs on nodes (Python >= 3.9), no Ansible imports.
"""

from __future__ import annotations

import os
import re
import subprocess

from ansible_collections.aligned.dra.plugins.module_utils.node.network import kmod
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import p2p

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

CHOICES = {
    "acs": ("keep", "disable"),
    "iommu": ("keep", "passthrough"),
    "peer_memory": ("keep", "auto", "dma_buf"),
}
GRUB_DIR = "/etc/default/grub.d"
GRUB_FILE = "aligned-dra-gpudirect.cfg"
MODULES_FILE = "aligned-dra-gpudirect.conf"
PEERMEM = "nvidia_peermem"
PASSTHROUGH_ARG = "iommu=pt"
# The physical levels at which a pair is aligned: the two share a PCIe switch (PIX) or a bridge below the root (PXB).
ALIGNED_LEVELS = ("PIX", "PXB")
# A kernel argument as GRUB's shell-sourced file takes it: no blanks, quotes or shell characters.
_KERNEL_ARG_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}(=[A-Za-z0-9_.,:+-]{1,128})?$")


class GpuDirectError(Exception):
    """A setting refused or a change that failed; the message names the setting."""


def validate(desired: Mapping[str, Any]) -> dict[str, Any]:
    """Normalised settings (missing ones are ``keep``); GpuDirectError naming the wrong field."""
    unknown = sorted(set(desired) - set(CHOICES) - {"iommu_vendor_args"})
    if unknown:
        raise GpuDirectError(
            f"{unknown[0]}: not a GPUDirect setting (known: acs, iommu, peer_memory, iommu_vendor_args)"
        )
    found: dict[str, Any] = {}
    for name, choices in CHOICES.items():
        value = desired.get(name)
        value = "keep" if value is None else value
        if value not in choices:
            raise GpuDirectError(f"{name}: must be one of {', '.join(choices)} (got {value!r})")
        found[name] = value
    extra = desired.get("iommu_vendor_args")
    extra = [] if extra is None else extra
    if not isinstance(extra, list):
        raise GpuDirectError("iommu_vendor_args: must be a list of kernel arguments")
    for arg in extra:
        if not isinstance(arg, str) or not _KERNEL_ARG_RE.match(arg):
            raise GpuDirectError(f"iommu_vendor_args: {arg!r} is not a kernel argument (name or name=value, no blanks)")
    if extra and found["iommu"] != "passthrough":
        raise GpuDirectError("iommu_vendor_args: only used with iommu: passthrough")
    found["iommu_vendor_args"] = list(extra)
    return found


def is_off(settings: Mapping[str, Any]) -> bool:
    """Every part ``keep``: report only, nothing to change."""
    return all(settings.get(name, "keep") in (None, "keep") for name in CHOICES)


# -- reading the node ----------------------------------------------------------------------------


def config_path(sysfs_root: str, bdf: str) -> str:
    return os.path.join(sysfs_root, "bus", "pci", "devices", bdf, "config")


def read_config(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(p2p.EXTENDED_CONFIG_SIZE)


def read_register(path: str, offset: int) -> int:
    """The u16 at ``offset`` of a config file, as the kernel answers it now."""
    with open(path, "rb", buffering=0) as fh:
        fh.seek(offset)
        data = fh.read(2)
    if len(data) != 2:
        raise OSError(f"{path}: {len(data)} bytes at 0x{offset:03x}, 2 expected")
    return int.from_bytes(data, "little")


def write_register(path: str, offset: int, value: int) -> None:
    """Two bytes little-endian at ``offset``, in place: every other byte of the file is left as it is."""
    with open(path, "r+b", buffering=0) as fh:
        fh.seek(offset)
        fh.write(value.to_bytes(2, "little"))


def read_cmdline(procfs_root: str) -> list[str] | None:
    try:
        with open(os.path.join(procfs_root, "cmdline"), encoding="utf-8", errors="replace") as fh:
            return fh.read().split()
    except OSError:
        return None


def _by_address(topology: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {device["pci_address"]: device for device in topology.get("devices") or []}


def pair_paths(topology: Mapping[str, Any], sysfs_root: str) -> dict[str, dict[str, dict[str, Any]]]:
    """The probe's ``p2p``; a topology without it (an older probe) gets it from the chains by :func:`p2p.p2p_path`."""
    if isinstance(topology.get("p2p"), dict):
        return topology["p2p"]
    devices = _by_address(topology)
    states: dict[str, dict[str, Any] | None] = {}

    def state(bdf: str) -> dict[str, Any] | None:
        if bdf not in states:
            try:
                states[bdf] = p2p.acs_state(read_config(config_path(sysfs_root, bdf)))
            except (OSError, ValueError):
                states[bdf] = None
        return states[bdf]

    paths: dict[str, dict[str, dict[str, Any]]] = {}
    for gpu, nics in (topology.get("links") or {}).items():
        for nic in nics:
            if gpu not in devices or nic not in devices:
                continue
            a_chain, b_chain = devices[gpu]["bridges"], devices[nic]["bridges"]
            for bdf in (gpu, nic, *a_chain, *b_chain):
                state(bdf)
            paths.setdefault(gpu, {})[nic] = p2p.p2p_path(gpu, a_chain, nic, b_chain, states)
    return paths


def acs_targets(topology: Mapping[str, Any], sysfs_root: str) -> tuple[dict[str, list[str]], list[str]]:
    """The functions to clear, each with the aligned pairs it redirects, and the unreadable functions on them.

    Only GPU x physical NIC pairs at PIX or PXB count (a VF takes its PF's path).
    """
    devices = _by_address(topology)
    paths = pair_paths(topology, sysfs_root)
    targets: dict[str, list[str]] = {}
    unread: set[str] = set()
    for gpu, nics in sorted((topology.get("links") or {}).items()):
        for nic, level in sorted(nics.items()):
            if level not in ALIGNED_LEVELS or (devices.get(nic) or {}).get("physfn"):
                continue
            entry = (paths.get(gpu) or {}).get(nic) or {}
            for bdf in entry.get("redirected_at") or []:
                targets.setdefault(bdf, []).append(f"{gpu} x {nic}")
            unread.update(entry.get("unread") or [])
    return targets, sorted(unread)


def _gpudirect(topology: Mapping[str, Any]) -> dict[str, Any]:
    found = topology.get("gpudirect")
    return found if isinstance(found, dict) else {}


def _groups_text(iommu: Mapping[str, Any]) -> str:
    groups = iommu.get("groups") or {}
    return ", ".join(f"{bdf}={groups[bdf]}" for bdf in sorted(groups)) or "none read"


def _vfio_below(topology: Mapping[str, Any], targets: Mapping[str, list[str]]) -> list[str]:
    """``function (device)`` for each target that is, or has below it, a device bound to vfio-pci."""
    # vfio-pci and its variant drivers (mlx5_vfio_pci, nvgrace_gpu_vfio_pci, ...) hand the device to a VM
    vfio = {d["pci_address"] for d in topology.get("devices") or [] if "vfio" in (d.get("driver") or "")}
    vfio.update(_gpudirect(topology).get("vfio") or [])
    devices = _by_address(topology)
    found = []
    for bdf in sorted(targets):
        for device in sorted(vfio):
            entry = devices.get(device) or {}
            chain = entry.get("bridges") or []
            # a VF sits below its PF's upstream bridge, not below the PF: a redirecting PF isolates its VFs
            if device == bdf or bdf in chain or entry.get("physfn") == bdf:
                found.append(f"{bdf} (device {device})")
    return found


# -- planning and applying -------------------------------------------------------------------------


def apply(
    desired: Mapping[str, Any],
    sysfs_root: str = "/sys",
    procfs_root: str = "/proc",
    modules_load_dir: str = "/etc/modules-load.d",
    grub_dir: str = GRUB_DIR,
    check_mode: bool = False,
    topology: Mapping[str, Any] | None = None,
    modprobe: Callable[[str], tuple[int, str]] = kmod.run_modprobe,
    update_grub: Callable[[], tuple[int, str]] | None = None,
    which: Callable[[str], str | None] | None = None,
    live: bool | None = None,
) -> dict[str, Any]:
    """Bring the node to ``desired``; returns the result (see the module's RETURN).

    ``topology`` is the node's probe (read here when None). ``update_grub``
    regenerates GRUB's configuration ((exit status, stderr)); ``which`` finds
    ``update-grub`` on the node. ``live`` (whether modules are loaded now)
    is whether ``sysfs_root`` is the running kernel's ``/sys`` unless given.
    """
    settings = validate(desired)
    if not os.path.isdir(sysfs_root):
        raise GpuDirectError(f"sysfs_root: {sysfs_root} is not a directory")
    if live is None:
        live = os.path.realpath(sysfs_root) == "/sys"
    result: dict[str, Any] = {
        "changed": False,
        "reboot_required": False,
        "disruptive": False,
        "reasons": [],
        "warnings": [],
        "actions": [],
        "live": live,
        "acs": [],
        "settings": settings,
    }
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    result["diff"] = {"before": before, "after": after}
    if is_off(settings):
        return result
    if topology is None:
        from ansible_collections.aligned.dra.plugins.module_utils.node.topology.prober import probe

        topology = probe(sysfs_root, procfs_root)
    cmdline = read_cmdline(procfs_root)
    # Every refusal comes before the first change: plan the three parts, then change.
    acs_plan = _plan_acs(settings, topology, sysfs_root, cmdline, result)
    grub = _plan_iommu(settings, topology, cmdline, grub_dir, which or _which, result)
    peermem, load = _plan_peer_memory(settings, topology, modules_load_dir, sysfs_root, procfs_root, live, result)
    for change in [grub, peermem]:
        if change is not None:
            before[change.path] = change.current
            after[change.path] = change.desired
    for item in acs_plan:
        key = f"{item['function']} {item['register']}"
        before[key] = f"0x{item['before']:04x}"
        after[key] = f"0x{item['after']:04x}"
    if check_mode:
        return result
    if grub is not None and grub.changed:
        _write_grub(grub, update_grub or (lambda: _run_update_grub(which or _which)))
    if peermem is not None:
        _apply_peer_memory(peermem, load, modprobe)
    for item in acs_plan:
        _write_acs(item)
    return result


def _plan_acs(
    settings: Mapping[str, Any],
    topology: Mapping[str, Any],
    sysfs_root: str,
    cmdline: list[str] | None,
    result: dict[str, Any],
) -> list[dict[str, Any]]:
    """The ACS Control writes ``acs: disable`` needs; refusals before any change."""
    if settings["acs"] != "disable":
        return []
    targets, unread = acs_targets(topology, sysfs_root)
    if unread:
        raise GpuDirectError(
            f"acs: the ACS state of {', '.join(unread)} (on the path of an aligned GPU x NIC pair) cannot be read: "
            "the config space is shorter than 4096 bytes or its capability list is malformed (a probe without "
            "root reads 64 bytes); nothing changed"
        )
    vfio = _vfio_below(topology, targets)
    if vfio:
        raise GpuDirectError(
            f"acs: refusing to clear ACS redirect on {', '.join(vfio)}: the device is bound to vfio-pci, and a "
            "device passed to a VM relies on ACS for its isolation; nothing changed"
        )
    iommu = _gpudirect(topology).get("iommu") or {}
    waits = False
    if targets and iommu.get("mode") == "translated":
        if settings["iommu"] != "passthrough":
            raise GpuDirectError(
                f"acs: disable is refused while the IOMMU translates (groups: {_groups_text(iommu)}): with "
                "translation on, a peer would receive addresses it cannot use; ask iommu: passthrough in the "
                "same setting; nothing changed"
            )
        waits = not _has_args(cmdline, _iommu_args(settings))
    elif targets and iommu.get("mode") is None and settings["iommu"] != "passthrough":
        raise GpuDirectError(
            f"acs: disable is refused while the IOMMU mode is unknown (groups: {_groups_text(iommu)}): it may "
            "translate, and with translation on a peer would receive addresses it cannot use; ask iommu: "
            "passthrough in the same setting, or probe a tree that has sys/kernel/iommu_groups; nothing changed"
        )
    elif targets and iommu.get("mode") is None:
        waits = not _has_args(cmdline, _iommu_args(settings))
    planned = []
    for bdf in sorted(targets):
        item = _acs_item(sysfs_root, bdf, targets[bdf])
        result["acs"].append(item)
        if item["before"] == item["after"]:
            continue
        if waits:
            item["waits_for_reboot"] = True
            result["reasons"].append(
                f"{item['function']} {item['register']}: 0x{item['before']:04x} -> 0x{item['after']:04x} is "
                "written at boot, once the IOMMU is in passthrough (the boot-time unit)"
            )
            continue
        planned.append(item)
        result["changed"] = True
        result["disruptive"] = True
        result["actions"].append(
            f"write {item['function']} {item['register']}: 0x{item['before']:04x} -> 0x{item['after']:04x}"
        )
    return planned


def _acs_item(sysfs_root: str, bdf: str, pairs: list[str]) -> dict[str, Any]:
    path = config_path(sysfs_root, bdf)
    try:
        config = read_config(path)
        offset = p2p.acs_control_offset(config)
    except OSError as exc:
        raise GpuDirectError(f"acs: cannot read the config space of {bdf}: {exc.strerror or exc}") from exc
    except ValueError as exc:  # CapabilityListError, or a space too short for the extended list
        raise GpuDirectError(f"acs: {bdf}: {exc}") from exc
    if offset is None:  # the probe said it redirects: its ACS capability vanished since
        raise GpuDirectError(f"acs: {bdf} has no ACS capability in {path}")
    control = config[offset] | (config[offset + 1] << 8)
    return {
        "function": bdf,
        "register": f"ACS Control @0x{offset:03x}",
        "offset": offset,
        "path": path,
        "before": control,
        "after": p2p.acs_cleared(control),
        "pairs": pairs,
    }


def _write_acs(item: dict[str, Any]) -> None:
    """Writes one ACS Control register and reads it back; GpuDirectError naming it when it did not stick."""
    try:
        write_register(item["path"], item["offset"], item["after"])
        now = read_register(item["path"], item["offset"])
    except OSError as exc:
        raise GpuDirectError(
            f"acs: writing {item['function']} {item['register']} failed: {exc.strerror or exc}"
        ) from exc
    if now != item["after"]:
        raise GpuDirectError(
            f"acs: the write to {item['function']} {item['register']} did not stick: wanted 0x{item['after']:04x}, "
            f"read back 0x{now:04x}"
        )


def _file_change(field: str, directory: str, name: str, content: str | None) -> kmod.FileChange:
    """The managed file ``name`` in ``directory``; one that cannot be read names ``field``."""
    path = os.path.join(directory, name)
    try:
        return kmod.FileChange(path, content)
    except (OSError, ValueError) as exc:  # a file where a directory is wanted, a NUL byte, bytes that are no text
        raise GpuDirectError(f"{field}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc


def _iommu_args(settings: Mapping[str, Any]) -> list[str]:
    return [PASSTHROUGH_ARG, *settings["iommu_vendor_args"]]


def _has_args(cmdline: list[str] | None, args: list[str]) -> bool:
    return cmdline is not None and all(arg in cmdline for arg in args)


def grub_content(args: list[str]) -> str:
    return f'{kmod.HEADER}GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX {" ".join(args)}"\n'


def _which(name: str) -> str | None:
    import shutil

    return shutil.which(name)


def _plan_iommu(
    settings: Mapping[str, Any],
    topology: Mapping[str, Any],
    cmdline: list[str] | None,
    grub_dir: str,
    which: Callable[[str], str | None],
    result: dict[str, Any],
) -> kmod.FileChange | None:
    """The GRUB drop-in ``iommu: passthrough`` needs, and whether the running kernel needs a reboot."""
    if settings["iommu"] != "passthrough":
        return None
    args = _iommu_args(settings)
    iommu = _gpudirect(topology).get("iommu") or {}
    if _has_args(cmdline, args):
        if iommu.get("mode") == "translated":
            raise GpuDirectError(
                f"iommu: the IOMMU still translates after the reboot (groups: {_groups_text(iommu)}); "
                f"the kernel runs with {' '.join(args)}"
            )
        if iommu.get("mode") is None:
            result["warnings"].append("iommu: the IOMMU mode is unknown (the probe read no IOMMU group type)")
    missing = [
        what
        for what, there in ((grub_dir, os.path.isdir(grub_dir)), ("update-grub", which("update-grub")))
        if not there
    ]
    if missing:
        raise GpuDirectError(
            f"iommu: passthrough needs GRUB's drop-in directory (grub_dir: {grub_dir}) and update-grub; this node "
            f"lacks {' and '.join(missing)}: set the kernel arguments {' '.join(args)} by hand; nothing changed"
        )
    change = _file_change("grub_dir", grub_dir, GRUB_FILE, grub_content(args))
    if change.changed:
        result["changed"] = True
        result["actions"].append(f"write {change.path} ({' '.join(args)})")
        result["actions"].append("update-grub")
    if iommu.get("mode") in ("off", "passthrough") and not _has_args(cmdline, args):
        result["reasons"].append(
            f"the IOMMU is {iommu['mode']} already: {' '.join(args)} take effect at the next boot, none is needed now"
        )
    elif not _has_args(cmdline, args):
        absent = [arg for arg in args if cmdline is None or arg not in cmdline]
        result["reboot_required"] = True
        result["disruptive"] = True
        result["reasons"].append(
            f"the kernel runs without {' '.join(absent)}"
            + (" (/proc/cmdline unreadable)" if cmdline is None else "")
            + ": the IOMMU passthrough takes effect at the next boot"
        )
    return change


def _run_update_grub(which: Callable[[str], str | None]) -> tuple[int, str]:
    path = which("update-grub") or "update-grub"
    try:
        proc = subprocess.run([path], capture_output=True, text=True, check=False, timeout=300)
    except FileNotFoundError:
        return 127, "update-grub is not installed"
    return proc.returncode, proc.stderr.strip()


def _write_grub(change: kmod.FileChange, update_grub: Callable[[], tuple[int, str]]) -> None:
    """Writes the drop-in, then update-grub; when update-grub fails the drop-in goes back to what it was.

    A drop-in left in place after a failed update-grub would read as done to
    the next run, which would then never run update-grub again.
    """
    previous = change.current
    try:
        change.apply()
    except OSError as exc:
        raise GpuDirectError(f"grub_dir: cannot write {change.path}: {exc.strerror or exc}") from exc
    code, err = update_grub()
    if code != 0:
        undone = "the drop-in was put back as it was"
        try:
            kmod.FileChange(change.path, previous).apply()
        except OSError as exc:
            undone = f"the drop-in could not be put back ({exc.strerror or exc})"
        raise GpuDirectError(f"iommu: update-grub failed ({code}): {err or 'no message'}; {undone}")


def dma_buf_problem(peer: Mapping[str, Any]) -> str | None:
    """Why DMA-BUF is not possible on the node (None when it is)."""
    if peer.get("dma_buf") is True:
        return None
    release = peer.get("kernel_release")
    if peer.get("open_kernel_modules") is False:
        return "the NVIDIA driver runs its proprietary kernel modules (DMA-BUF needs the open GPU kernel modules)"
    if release and _kernel_older(release, (5, 12)):
        return f"the kernel {release} is older than 5.12"
    if peer.get("dma_buf") is False:
        return "the probe found DMA-BUF not possible"
    known = "the NVIDIA driver's kernel modules" if peer.get("open_kernel_modules") is None else "the kernel release"
    return f"unknown: the probe could not read {known}"


def _kernel_older(release: str, than: tuple[int, int]) -> bool:
    found = re.match(r"^(\d+)\.(\d+)", release)
    return bool(found) and (int(found.group(1)), int(found.group(2))) < than


def _plan_peer_memory(
    settings: Mapping[str, Any],
    topology: Mapping[str, Any],
    modules_load_dir: str,
    sysfs_root: str,
    procfs_root: str,
    live: bool,
    result: dict[str, Any],
) -> tuple[kmod.FileChange | None, bool]:
    """The modules-load file for ``nvidia_peermem`` (None: left alone), and whether to load it now."""
    mode = settings["peer_memory"]
    if mode == "keep":
        return None, False
    peer = _gpudirect(topology).get("peer_memory") or {}
    problem = dma_buf_problem(peer)
    path = os.path.join(modules_load_dir, MODULES_FILE)
    load = False
    if mode == "dma_buf":
        if problem is not None:
            # what the probe could not read comes from procfs (the driver's version file, the kernel release)
            where = f" (in procfs_root {procfs_root})" if problem.startswith("unknown:") else ""
            raise GpuDirectError(
                f"peer_memory: dma_buf is not possible on this node: {problem}{where}; nothing changed"
            )
        # DMA-BUF: the collection's nvidia_peermem file goes
        change = _file_change("modules_load_dir", modules_load_dir, MODULES_FILE, None)
    elif problem is None:
        change = _file_change("modules_load_dir", modules_load_dir, MODULES_FILE, None)
        result["reasons"].append("peer_memory: DMA-BUF is possible, nvidia_peermem is not needed")
    elif peer.get("dma_buf") is None:
        result["warnings"].append(f"peer_memory: auto leaves nvidia_peermem as it is: DMA-BUF is {problem}")
        return None, False
    else:
        change = _file_change("modules_load_dir", modules_load_dir, MODULES_FILE, kmod.modules_load_content([PEERMEM]))
        missing = not kmod.is_loaded(PEERMEM, sysfs_root)
        load = missing and live
        if load:
            result["changed"] = True
            result["actions"].append(f"modprobe {PEERMEM}")
        elif missing:
            result["warnings"].append(f"{PEERMEM} is not loaded in {sysfs_root}; it loads at the next boot")
    if change.changed:
        result["changed"] = True
        result["actions"].append(f"write {path}" if change.desired is not None else f"remove {path}")
    return change, load


def _apply_peer_memory(change: kmod.FileChange, load: bool, modprobe: Callable[[str], tuple[int, str]]) -> None:
    """The modules-load file first (the module loads at every boot), then the module now."""
    try:
        change.apply()
    except OSError as exc:
        raise GpuDirectError(f"modules_load_dir: cannot write {change.path}: {exc.strerror or exc}") from exc
    if load:
        try:
            kmod.load(PEERMEM, modprobe)
        except kmod.KmodError as exc:
            raise GpuDirectError(f"peer_memory: {exc}") from exc
