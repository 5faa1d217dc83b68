# SPDX-License-Identifier: Apache-2.0
"""Desired RDMA state of a node: network-namespace mode and kernel modules.

:func:`apply` is the one code path used by the ``aligned.dra.rdma`` module
and by the boot-time unit (:mod:`netconf`). It

1. writes the persistent settings (``options ib_core netns_mode=0|1`` in
   ``/etc/modprobe.d/aligned-dra-rdma.conf``, the module list in
   ``/etc/modules-load.d/aligned-dra-rdma.conf``),
2. loads missing modules (after the options file, so ``ib_core`` loads with
   the wanted mode),
3. sets the mode at run time through NETLINK_RDMA; when the kernel refuses
   (EBUSY: network namespaces other than the initial one exist) the result
   says ``reboot_required`` and why.

On a captured sysfs tree (``sysfs_root`` other than ``/sys``) nothing at run
time is touched: the mode is read from the tree's
``module/ib_core/parameters/netns_mode`` and modules are only checked.

Runs on nodes (Python >= 3.9), no Ansible imports.
"""

from __future__ import annotations

import errno
import os

from ansible_collections.aligned.dra.plugins.module_utils.node.network import kmod, rdma_netlink

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

OPTIONS_FILE = "aligned-dra-rdma.conf"
MODULES_FILE = "aligned-dra-rdma.conf"
PARAM_VALUES = {"Y": "shared", "N": "exclusive", "1": "shared", "0": "exclusive"}


class RdmaConfigError(Exception):
    pass


def validate(desired: dict[str, Any]) -> dict[str, Any]:
    """Normalised desired state; RdmaConfigError naming the wrong field."""
    mode = desired.get("netns_mode")
    if mode is not None and mode not in rdma_netlink.NETNS_MODES:
        raise RdmaConfigError(f"netns_mode: must be one of shared, exclusive (got {mode!r})")
    modules = desired.get("modules")
    if modules is not None:
        if not isinstance(modules, list):
            raise RdmaConfigError("modules: must be a list of kernel module names")
        try:
            modules = [kmod.check_module_name(m) for m in modules]
        except kmod.KmodError as exc:
            raise RdmaConfigError(str(exc)) from exc
        if len({kmod.canonical(m) for m in modules}) != len(modules):
            raise RdmaConfigError("modules: a module is listed twice")
    return {"netns_mode": mode, "modules": modules}


def _file_change(field: str, directory: str, name: str, content: str | None) -> kmod.FileChange:
    """The managed file ``name`` in ``directory``; a directory that cannot hold it names ``field``."""
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise RdmaConfigError(f"{field}: {directory} is not a directory")
    path = os.path.join(directory, name)
    if os.path.isdir(path):
        raise RdmaConfigError(f"{field}: {path} is a directory")
    try:
        return kmod.FileChange(path, content)
    except (OSError, ValueError) as exc:
        raise RdmaConfigError(f"{field}: cannot read {path}: {exc}") from exc


def count_network_namespaces(procfs_root: str = "/proc", run_netns: str = "/var/run/netns") -> int:
    """Distinct network namespaces held by processes or bind mounts (best effort)."""
    seen = set()
    try:
        pids = [p for p in os.listdir(procfs_root) if p.isdigit()]
    except OSError:
        pids = []
    for pid in pids:
        try:
            seen.add(os.stat(f"{procfs_root}/{pid}/ns/net").st_ino)
        except OSError:
            continue
    try:
        for name in os.listdir(run_netns):
            try:
                seen.add(os.stat(os.path.join(run_netns, name)).st_ino)
            except OSError:
                continue
    except OSError:
        pass
    return len(seen)


def _read_runtime_mode(live: bool, sysfs_root: str, system_factory: Callable[[], Any]) -> tuple[str | None, str]:
    """(mode or None when ib_core is not loaded, where it was read)."""
    if live:
        try:
            with system_factory() as system:
                return system.get()["netns_mode"], "netlink"
        except rdma_netlink.RdmaNetlinkError as exc:
            if exc.errno != errno.EPROTONOSUPPORT:
                raise RdmaConfigError(f"reading the RDMA netns mode failed: {exc}") from exc
    raw = kmod.module_parameter("ib_core", "netns_mode", sysfs_root)
    if raw is None:
        return None, "ib_core not loaded"
    return PARAM_VALUES.get(raw, f"unknown ({raw})"), "module parameter"


def apply(
    desired: dict[str, Any],
    sysfs_root: str = "/sys",
    procfs_root: str = "/proc",
    modprobe_dir: str = "/etc/modprobe.d",
    modules_load_dir: str = "/etc/modules-load.d",
    check_mode: bool = False,
    system_factory: Callable[[], Any] = rdma_netlink.RdmaSystem,
    modprobe: Callable[[str], tuple[int, str]] = kmod.run_modprobe,
) -> dict[str, Any]:
    """Bring the node to ``desired``; returns the result (see the module's RETURN)."""
    desired = validate(desired)
    if not os.path.isdir(sysfs_root):
        raise RdmaConfigError(f"sysfs_root: {sysfs_root} is not a directory")
    live = os.path.realpath(sysfs_root) == "/sys"
    mode = desired["netns_mode"]
    modules = desired["modules"]
    result: dict[str, Any] = {
        "changed": False,
        "reboot_required": False,
        "reasons": [],
        "warnings": [],
        "actions": [],
        "live": live,
    }
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    _write_settings(result, before, after, mode, modules, modprobe_dir, modules_load_dir, check_mode)
    _load_modules(result, before, after, modules, sysfs_root, live, check_mode, modprobe)
    _set_runtime_mode(result, before, after, mode, sysfs_root, procfs_root, live, check_mode, system_factory)
    result["diff"] = {"before": before, "after": after}
    # Moving RDMA devices between namespaces, now or at the next boot: pods lose them, drain first.
    result["disruptive"] = result["reboot_required"] or any(
        action.startswith("rdma system set netns") for action in result["actions"]
    )
    return result


def _write_settings(
    result: dict[str, Any],
    before: dict[str, Any],
    after: dict[str, Any],
    mode: str | None,
    modules: list[str] | None,
    modprobe_dir: str,
    modules_load_dir: str,
    check_mode: bool,
) -> None:
    """Step 1: the persistent settings, the modprobe options file and the modules-load list."""
    files: list[tuple[kmod.FileChange, str]] = []
    if mode is not None:
        content = kmod.modprobe_options_content({"ib_core": {"netns_mode": rdma_netlink.NETNS_MODES[mode]}})
        change = _file_change("modprobe_dir", modprobe_dir, OPTIONS_FILE, content)
        files.append((change, "modprobe_dir"))
        others = kmod.configured_options(modprobe_dir, "ib_core", "netns_mode", skip=OPTIONS_FILE)
        if others:
            result["warnings"].append(
                f"ib_core netns_mode is also set in {', '.join(others)}; modprobe reads files in name order "
                "and the last setting wins"
            )
    if modules is not None:
        content = kmod.modules_load_content(modules) if modules else None
        files.append((_file_change("modules_load_dir", modules_load_dir, MODULES_FILE, content), "modules_load_dir"))
    for change, field in files:
        before[change.path] = change.current
        after[change.path] = change.desired
        if change.changed:
            result["changed"] = True
            result["actions"].append(f"write {change.path}" if change.desired is not None else f"remove {change.path}")
            if not check_mode:
                try:
                    change.apply()
                except OSError as exc:
                    raise RdmaConfigError(f"{field}: cannot write {change.path}: {exc.strerror or exc}") from exc


def _load_modules(
    result: dict[str, Any],
    before: dict[str, Any],
    after: dict[str, Any],
    modules: list[str] | None,
    sysfs_root: str,
    live: bool,
    check_mode: bool,
    modprobe: Callable[[str], tuple[int, str]],
) -> None:
    """Step 2: the missing modules loaded now (on a captured tree only checked)."""
    loaded_before = {}
    not_loaded = []
    for name in modules or []:
        loaded = kmod.is_loaded(name, sysfs_root)
        loaded_before[name] = loaded
        if loaded:
            continue
        if not live:
            not_loaded.append(name)
            continue
        result["changed"] = True
        result["actions"].append(f"modprobe {name}")
        if not check_mode:
            try:
                kmod.load(name, modprobe)
            except kmod.KmodError as exc:
                raise RdmaConfigError(f"modules: {exc}") from exc
    if not_loaded:
        result["warnings"].append(
            f"modules not loaded in {sysfs_root}: {', '.join(not_loaded)}; they load at the next boot"
        )
    if modules is not None:
        before["modules_loaded"] = loaded_before
        after["modules_loaded"] = {name: True if live else loaded_before[name] for name in modules}


def _set_runtime_mode(
    result: dict[str, Any],
    before: dict[str, Any],
    after: dict[str, Any],
    mode: str | None,
    sysfs_root: str,
    procfs_root: str,
    live: bool,
    check_mode: bool,
    system_factory: Callable[[], Any],
) -> None:
    """Step 3: the netns mode now; where it cannot change at run time, ``reboot_required`` and why."""
    current, source = _read_runtime_mode(live, sysfs_root, system_factory)
    result["netns_mode"] = {"runtime": current, "source": source, "desired": mode}
    if mode is None:
        return
    before["netns_mode"] = current
    after["netns_mode"] = mode if current is not None else None
    if current is None:
        result["reasons"].append("ib_core is not loaded: the mode applies when it loads")
    elif current != mode:
        result["changed"] = True
        if not live:
            result["reboot_required"] = True
            result["reasons"].append(
                f"the RDMA netns mode is {current} in {sysfs_root}, a captured tree that is not changed at "
                f"run time; {mode} takes effect when ib_core is next loaded (reboot)"
            )
            after["netns_mode"] = current
        elif check_mode:
            result["actions"].append(f"rdma system set netns {mode}")
            spaces = count_network_namespaces(procfs_root)
            if spaces > 1:
                result["reboot_required"] = True
                result["reasons"].append(
                    f"{spaces} network namespaces exist; the kernel changes the RDMA netns mode at run time "
                    "only when the initial namespace is the only one, so a reboot will be needed"
                )
        else:
            result["actions"].append(f"rdma system set netns {mode}")
            _set_mode_through_netlink(result, after, current, mode, system_factory)


def _set_mode_through_netlink(
    result: dict[str, Any], after: dict[str, Any], current: str, mode: str, system_factory: Callable[[], Any]
) -> None:
    """Sets the mode through NETLINK_RDMA; EBUSY (other network namespaces exist) means a reboot."""
    try:
        with system_factory() as system:
            system.set_netns_mode(mode)
            now = system.get()["netns_mode"]
    except rdma_netlink.RdmaNetlinkError as exc:
        if exc.errno != errno.EBUSY:
            raise RdmaConfigError(f"netns_mode: setting {mode} failed: {exc}") from exc
        result["reboot_required"] = True
        result["reasons"].append(
            f"the kernel refused to change the RDMA netns mode from {current} to {mode} at run time "
            "(EBUSY: network namespaces other than the initial one exist); the persistent setting "
            "takes effect at the next boot"
        )
        after["netns_mode"] = current
    else:
        if now != mode:
            raise RdmaConfigError(f"netns_mode: the kernel reports {now} after setting {mode}")
        result["netns_mode"]["runtime"] = now
