# SPDX-License-Identifier: Apache-2.0
"""Desired SR-IOV state of a node's physical functions, and bringing it about.

:func:`apply` is the one code path of the ``aligned.dra.sriov`` module and of
the boot-time unit (:mod:`netconf`). For every PF entry it

1. validates the whole request first (a wrong field fails before anything
   changes, and the message names the field),
2. finds the PF in the topology library's probe (by PCI address, by netdev
   name, or by vendor/device and index),
3. sets ``sriov_drivers_autoprobe``, the eswitch mode (devlink) and the VF
   count; a count change goes through 0 as the kernel requires, and is
   refused when it would destroy VFs in use (see :func:`vfs_in_use`) unless
   ``force`` is set,
4. sets the PF's MTU and every VF's MAC, VLAN/QoS, spoof check, trust, link
   state and TX rates through netlink on the PF,

and returns per PF and per VF what was before and what is after.

Writes to sysfs go through a :class:`SysfsWriter`; the kernel creates the
VFs synchronously when ``sriov_numvfs`` is written, and :func:`apply` checks
that it did (waiting up to ``settle_timeout`` seconds for the ``virtfnN``
links, as VF drivers may bind late). On a captured sysfs tree (``sysfs_root``
other than ``/sys``) netlink and devlink are not used: those settings are
reported as not applied.

Runs on nodes (Python >= 3.9), no Ansible imports.
"""

from __future__ import annotations

import json
import os
import re
import time

from ansible_collections.aligned.dra.plugins.module_utils.node.network import netlink_link
from ansible_collections.aligned.dra.plugins.module_utils.node.topology.prober import probe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

CHECKPOINT_FILE = "checkpoint.json"
DEFAULT_STATE_DIR = "/var/lib/aligned-dra"

# The driver a VF gets from its PF's driver when drivers_autoprobe is on.
VF_DRIVERS = {
    "mlx5_core": "mlx5_core",
    "mlx4_core": "mlx4_core",
    "ixgbe": "ixgbevf",
    "i40e": "iavf",
    "ice": "iavf",
    "igb": "igbvf",
    "bnxt_en": "bnxt_en",
    "qede": "qede",
    "be2net": "be2net",
    "nfp": "nfp",
    "hinic": "hinic",
    "octeontx2-pf": "octeontx2-vf",
    "cxgb4": "cxgb4vf",
    "enic": "enic",
}

_BDF_RE = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$")
_ID_RE = re.compile(r"^(0x)?[0-9a-f]{4}$")
_MAC_RE = re.compile(r"^[0-9a-f]{2}(:[0-9a-f]{2}){5}$")
_IFNAME_RE = re.compile(r"^[^/\s:]{1,15}$")

VF_PROPERTIES = netlink_link.VF_PROPERTIES
LINK_STATES = tuple(netlink_link.VF_LINK_STATES)
ESWITCH_MODES = tuple(netlink_link.ESWITCH_MODES)

# The argument spec of one entry of pfs, shared by the sriov and network_plan modules.
PF_ARGUMENT_SPEC = {
    "pci_address": {"type": "str"},
    "netdev": {"type": "str"},
    "vendor_id": {"type": "str"},
    "device_id": {"type": "str"},
    "index": {"type": "int"},
    "numvfs": {"type": "int"},
    "drivers_autoprobe": {"type": "bool"},
    "eswitch_mode": {"type": "str", "choices": list(ESWITCH_MODES)},
    "mtu": {"type": "int"},
    "vf_defaults": {"type": "dict"},
    "vfs": {"type": "list", "elements": "dict"},
    "missing": {"type": "str", "choices": ["fail", "skip"], "default": "fail"},
    "force": {"type": "bool", "default": False},
}


class SriovError(Exception):
    """Invalid request or a refused change; the message names the field."""


class SysfsWriter:
    """Writes one value to a sysfs attribute, as ``echo VALUE > PATH`` does."""

    def write(self, path: str, value: str) -> None:
        with open(path, "w", encoding="ascii") as fh:
            fh.write(value)


# -- validation -----------------------------------------------------------------


def _bool(value: Any, field: str) -> bool:
    if isinstance(value, bool):
        return value
    raise SriovError(f"{field}: must be true or false (got {value!r})")


def _int(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        else:
            raise SriovError(f"{field}: must be an integer (got {value!r})")
    if not low <= value <= high:
        raise SriovError(f"{field}: {value} is out of range {low}-{high}")
    return value


def validate_vf_properties(props: dict[str, Any], field: str) -> dict[str, Any]:
    """Checked and normalised VF properties (only those given)."""
    if not isinstance(props, dict):
        raise SriovError(f"{field}: must be a mapping of VF properties")
    unknown = sorted(set(props) - set(VF_PROPERTIES) - {"index"})
    if unknown:
        raise SriovError(f"{field}: unknown VF properties {', '.join(unknown)} (known: {', '.join(VF_PROPERTIES)})")
    out: dict[str, Any] = {}
    for key, value in props.items():
        if value is None or key == "index":
            continue
        where = f"{field}.{key}"
        if key == "mac":
            mac = str(value).lower()
            if not _MAC_RE.match(mac):
                raise SriovError(f"{where}: {value!r} is not a MAC address (xx:xx:xx:xx:xx:xx)")
            if int(mac[:2], 16) & 1:
                raise SriovError(f"{where}: {value} is a multicast address; a VF needs a unicast MAC")
            out[key] = mac
        elif key == "vlan":
            out[key] = _int(value, where, 0, 4095)
        elif key == "qos":
            out[key] = _int(value, where, 0, 7)
        elif key in ("spoofchk", "trust"):
            out[key] = _bool(value, where)
        elif key == "link_state":
            if value not in LINK_STATES:
                raise SriovError(f"{where}: must be one of {', '.join(LINK_STATES)} (got {value!r})")
            out[key] = value
        else:  # rates in Mbit/s
            out[key] = _int(value, where, 0, 0xFFFFFFFF)
    if out.get("qos") and not out.get("vlan"):
        raise SriovError(f"{field}.qos: a QoS priority needs a VLAN other than 0")
    low, high = out.get("min_tx_rate"), out.get("max_tx_rate")
    if low is not None and high is not None and high and low > high:
        raise SriovError(f"{field}.min_tx_rate: {low} is above max_tx_rate {high}")
    return out


def validate_pf(spec: dict[str, Any], field: str) -> dict[str, Any]:
    """A normalised PF entry; SriovError naming the first wrong field."""
    if not isinstance(spec, dict):
        raise SriovError(f"{field}: must be a mapping")
    known = {
        "pci_address",
        "netdev",
        "vendor_id",
        "device_id",
        "index",
        "numvfs",
        "drivers_autoprobe",
        "eswitch_mode",
        "mtu",
        "vf_defaults",
        "vfs",
        "missing",
        "force",
    }
    unknown = sorted(k for k in spec if k not in known)
    if unknown:
        raise SriovError(f"{field}: unknown keys {', '.join(unknown)}")
    pf: dict[str, Any] = {}
    given = [k for k in ("pci_address", "netdev", "vendor_id") if spec.get(k) is not None]
    if len(given) != 1:
        raise SriovError(f"{field}: select the PF with exactly one of pci_address, netdev, or vendor_id + device_id")
    if spec.get("pci_address") is not None:
        addr = str(spec["pci_address"]).lower()
        if not _BDF_RE.match(addr):
            raise SriovError(f"{field}.pci_address: {spec['pci_address']!r} is not a PCI address (dddd:bb:dd.f)")
        pf["pci_address"] = addr
    elif spec.get("netdev") is not None:
        name = str(spec["netdev"])
        if not _IFNAME_RE.match(name):
            raise SriovError(f"{field}.netdev: {name!r} is not a network interface name")
        pf["netdev"] = name
    else:
        for key in ("vendor_id", "device_id"):
            value = str(spec.get(key) or "").lower()
            if not _ID_RE.match(value):
                raise SriovError(f"{field}.{key}: {spec.get(key)!r} is not a 4-digit hex PCI id (e.g. 0x15b3)")
            pf[key] = value if value.startswith("0x") else "0x" + value
        pf["index"] = _int(spec.get("index", 0), f"{field}.index", 0, 4095)
    if spec.get("index") is not None and "index" not in pf:
        raise SriovError(f"{field}.index: only used with vendor_id and device_id")
    pf["numvfs"] = None if spec.get("numvfs") is None else _int(spec["numvfs"], f"{field}.numvfs", 0, 65535)
    autoprobe = spec.get("drivers_autoprobe")
    pf["drivers_autoprobe"] = None if autoprobe is None else _bool(autoprobe, f"{field}.drivers_autoprobe")
    mode = spec.get("eswitch_mode")
    if mode is not None and mode not in ESWITCH_MODES:
        raise SriovError(f"{field}.eswitch_mode: must be one of {', '.join(ESWITCH_MODES)} (got {mode!r})")
    pf["eswitch_mode"] = mode
    pf["mtu"] = None if spec.get("mtu") is None else _int(spec["mtu"], f"{field}.mtu", 68, 65535)
    pf["vf_defaults"] = validate_vf_properties(spec.get("vf_defaults") or {}, f"{field}.vf_defaults")
    vfs: dict[int, dict[str, Any]] = {}
    for position, vf in enumerate(spec.get("vfs") or []):
        where = f"{field}.vfs[{position}]"
        if not isinstance(vf, dict) or "index" not in vf:
            raise SriovError(f"{where}.index: every VF entry needs the VF's index")
        index = _int(vf["index"], f"{where}.index", 0, 65535)
        if index in vfs:
            raise SriovError(f"{where}.index: VF {index} is listed twice")
        if pf["numvfs"] is not None and index >= pf["numvfs"]:
            raise SriovError(f"{where}.index: VF {index} does not exist with numvfs {pf['numvfs']}")
        vfs[index] = validate_vf_properties(vf, where)
    macs: dict[str, int] = {}
    for index, props in vfs.items():
        if "mac" in props:
            if props["mac"] in macs:
                raise SriovError(f"{field}.vfs: VFs {macs[props['mac']]} and {index} have the same MAC {props['mac']}")
            macs[props["mac"]] = index
    pf["vfs"] = vfs
    missing = spec.get("missing", "fail")
    if missing not in ("fail", "skip"):
        raise SriovError(f"{field}.missing: must be fail or skip (got {missing!r})")
    pf["missing"] = missing
    pf["force"] = _bool(spec.get("force", False), f"{field}.force")
    return pf


def validate(pfs: Any) -> list[dict[str, Any]]:
    if not isinstance(pfs, list):
        raise SriovError("pfs: must be a list of PF entries")
    return [validate_pf(spec, f"pfs[{i}]") for i, spec in enumerate(pfs)]


# -- reading the node -------------------------------------------------------------


def describe_selector(pf: dict[str, Any]) -> str:
    if "pci_address" in pf:
        return f"PCI address {pf['pci_address']}"
    if "netdev" in pf:
        return f"network interface {pf['netdev']}"
    return f"PF {pf['index']} with vendor {pf['vendor_id']} device {pf['device_id']}"


def _selector_key(pf: dict[str, Any]) -> str:
    for key in ("pci_address", "netdev"):
        if key in pf:
            return key
    return "index"


def find_pf(pf: dict[str, Any], topology: dict[str, Any], field: str) -> dict[str, Any] | None:
    """The topology entry of the PF an entry selects; None when absent."""
    devices = topology["devices"]
    if "pci_address" in pf:
        found = [d for d in devices if d["pci_address"] == pf["pci_address"]]
    elif "netdev" in pf:
        found = [d for d in devices if any(n["name"] == pf["netdev"] for n in d.get("netdevs") or [])]
    else:
        candidates = sorted(
            (
                d
                for d in devices
                if d["vendor_id"] == pf["vendor_id"] and d["device_id"] == pf["device_id"] and not d.get("physfn")
            ),
            key=lambda d: d["pci_address"],
        )
        found = candidates[pf["index"] : pf["index"] + 1]
    if not found:
        return None
    device = found[0]
    if device.get("physfn"):
        raise SriovError(
            f"{field}.{_selector_key(pf)}: {describe_selector(pf)} is a VF of {device['physfn']}, not a PF"
        )
    return device


def read_prepared(state_dir: str) -> dict[str, str]:
    """PCI addresses the DRA driver has prepared: {address: claim uid} (docs/network.md)."""
    path = os.path.join(state_dir, CHECKPOINT_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise SriovError(f"driver_state_dir: cannot read {path}: {exc}") from exc
    claims = data.get("claims") if isinstance(data, dict) else None
    if not isinstance(claims, dict):
        raise SriovError(f"driver_state_dir: {path} has no 'claims' mapping")
    prepared = {}
    for uid, claim in claims.items():
        for device in (claim or {}).get("devices") or [] if isinstance(claim, dict) else []:
            if isinstance(device, dict) and isinstance(device.get("pci_address"), str):
                prepared[device["pci_address"].lower()] = str(uid)
    return prepared


def vfs_in_use(
    pf_device: dict[str, Any],
    by_address: dict[str, dict[str, Any]],
    prepared: dict[str, str],
    extra_drivers: tuple[str, ...] = (),
) -> list[str]:
    """Why VFs of a PF are in use (empty when all can be destroyed).

    A VF is in use when its interface is not in this network namespace (bound
    to a network driver, but no interface here), when it is bound to vfio-pci
    or any driver other than its default one, or when the DRA driver lists
    it as prepared.
    """
    reasons = []
    pf_driver = pf_device.get("driver")
    # Drivers that give a VF a network interface, and others the user accepts.
    net_drivers = {d for d in (pf_driver, VF_DRIVERS.get(pf_driver or "")) if d}
    defaults = net_drivers | set(extra_drivers)
    pf_has_netdev = bool(pf_device.get("netdevs"))
    for address in (pf_device.get("sriov") or {}).get("vfs") or []:
        vf = by_address.get(address, {})
        driver = vf.get("driver")
        if address in prepared:
            reasons.append(f"VF {address} is prepared for claim {prepared[address]} (driver checkpoint)")
        elif driver and driver not in defaults:
            reasons.append(f"VF {address} is bound to {driver}")
        elif driver in net_drivers and pf_has_netdev and not vf.get("netdevs"):
            reasons.append(f"VF {address} has no network interface in this namespace (moved to another one)")
    return reasons


def read_attr(path: str) -> str | None:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return None


# -- applying -----------------------------------------------------------------------


class _Context:
    def __init__(
        self,
        sysfs_root: str,
        check_mode: bool,
        writer: SysfsWriter,
        links: Any,
        devlink: Any,
        prepared: dict[str, str],
        settle_timeout: float,
        extra_drivers: tuple[str, ...],
    ) -> None:
        self.sysfs_root = sysfs_root
        self.check_mode = check_mode
        self.writer = writer
        self.links = links
        self.devlink = devlink
        self.prepared = prepared
        self.settle_timeout = settle_timeout
        self.extra_drivers = extra_drivers
        self.warnings: list[str] = []

    def pf_path(self, address: str) -> str:
        return os.path.join(self.sysfs_root, "bus", "pci", "devices", address)

    def write(self, path: str, value: str, field: str) -> None:
        try:
            self.writer.write(path, value)
        except OSError as exc:
            raise SriovError(f"{field}: writing {value} to {path} failed: {os.strerror(exc.errno or 0)}") from exc


def _wait_for_vfs(ctx: _Context, address: str, numvfs: int, field: str) -> None:
    path = ctx.pf_path(address)
    deadline = time.monotonic() + ctx.settle_timeout
    while True:
        now = read_attr(os.path.join(path, "sriov_numvfs"))
        links_ok = (numvfs == 0 or os.path.lexists(os.path.join(path, f"virtfn{numvfs - 1}"))) and not os.path.lexists(
            os.path.join(path, f"virtfn{numvfs}")
        )
        if now == str(numvfs) and links_ok:
            return
        if time.monotonic() >= deadline:
            raise SriovError(
                f"{field}: after writing {numvfs} to sriov_numvfs of {address}, the kernel reports "
                f"{now} VFs (virtfn links {'present' if links_ok else 'missing'})"
            )
        time.sleep(0.05)


def _vf_targets(pf: dict[str, Any], count: int) -> dict[int, dict[str, Any]]:
    targets = {}
    for index in range(count):
        props = dict(pf["vf_defaults"])
        props.update(pf["vfs"].get(index, {}))
        if props:
            targets[index] = props
    return targets


def check_pf(pf: dict[str, Any], topology: dict[str, Any], field: str) -> dict[str, Any] | None:
    """A validated PF entry against the node's probed topology, changing nothing.

    The device it selects (None when absent and ``missing: skip``); SriovError
    when the PF is absent, has no SR-IOV, or the VF count or a VF index does
    not fit its ``sriov_totalvfs``. The validation stage and :func:`apply` both
    call it.
    """
    device = find_pf(pf, topology, field)
    if device is None:
        if pf["missing"] == "skip":
            return None
        key = _selector_key(pf)
        which = " (selected by vendor_id, device_id and index)" if key == "index" else ""
        raise SriovError(f"{field}.{key}: no {describe_selector(pf)} on this node{which}")
    address = device["pci_address"]
    sriov = device.get("sriov")
    wants_sriov = pf["numvfs"] is not None or pf["drivers_autoprobe"] is not None or pf["vfs"] or pf["vf_defaults"]
    if sriov is None and wants_sriov:
        key = "numvfs" if pf["numvfs"] is not None else "vfs"
        raise SriovError(
            f"{field}.{key}: {address} has no SR-IOV capability (no sriov_totalvfs); "
            f"{field}.{_selector_key(pf)} selects it"
        )
    current = sriov["numvfs"] if sriov else 0
    total = sriov["totalvfs"] if sriov else 0
    target = current if pf["numvfs"] is None else pf["numvfs"]
    if target > total:
        raise SriovError(f"{field}.numvfs: {target} is above sriov_totalvfs {total} of {address}")
    for index in pf["vfs"]:
        if index >= target:
            raise SriovError(f"{field}.vfs: VF {index} does not exist on {address} ({target} VFs)")
    return device


def _apply_pf(ctx: _Context, pf: dict[str, Any], field: str, topology: dict[str, Any]) -> dict[str, Any]:
    device = check_pf(pf, topology, field)
    entry: dict[str, Any] = {"selector": describe_selector(pf), "actions": [], "disruptive": False}
    if device is None:
        entry["skipped"] = f"no {describe_selector(pf)} on this node"
        return entry
    address = device["pci_address"]
    path = ctx.pf_path(address)
    sriov = device.get("sriov")
    netdev = (device.get("netdevs") or [{}])[0].get("name")
    entry.update(pci_address=address, netdev=netdev)
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    current = sriov["numvfs"] if sriov else 0
    total = sriov["totalvfs"] if sriov else 0
    entry["totalvfs"] = total if sriov else None
    target = current if pf["numvfs"] is None else pf["numvfs"]
    live_netlink = ctx.links is not None
    if (pf["vfs"] or pf["vf_defaults"] or pf["mtu"] is not None) and live_netlink and not netdev:
        raise SriovError(f"{field}: {address} has no network interface to set the MTU or VF properties through")

    # Everything read and checked: now compute and apply, in the kernel's order.
    if pf["drivers_autoprobe"] is not None:
        raw = read_attr(os.path.join(path, "sriov_drivers_autoprobe"))
        now = None if raw is None else raw == "1"
        before["drivers_autoprobe"], after["drivers_autoprobe"] = now, pf["drivers_autoprobe"]
        if now != pf["drivers_autoprobe"]:
            value = "1" if pf["drivers_autoprobe"] else "0"
            entry["actions"].append(f"sriov_drivers_autoprobe={value}")
            if not ctx.check_mode:
                ctx.write(os.path.join(path, "sriov_drivers_autoprobe"), value, f"{field}.drivers_autoprobe")

    eswitch_change = None
    if pf["eswitch_mode"] is not None:
        if ctx.devlink is None:
            ctx.warnings.append(f"{address}: eswitch_mode not applied: {ctx.sysfs_root} is not the live /sys")
        else:
            try:
                mode = ctx.devlink.eswitch_mode(address)
            except netlink_link.LinkError as exc:
                raise SriovError(f"{field}.eswitch_mode: {exc}") from exc
            before["eswitch_mode"], after["eswitch_mode"] = mode, pf["eswitch_mode"]
            if mode != pf["eswitch_mode"]:
                eswitch_change = pf["eswitch_mode"]
                entry["disruptive"] = True

    numvfs_change = target != current
    before["numvfs"], after["numvfs"] = current, target
    if numvfs_change or (eswitch_change and current):
        entry["disruptive"] = True
        if current:
            by_address = {d["pci_address"]: d for d in topology["devices"]}
            reasons = vfs_in_use(device, by_address, ctx.prepared, ctx.extra_drivers)
            entry["in_use"] = reasons
            if reasons and not pf["force"]:
                shown = "; ".join(reasons[:5]) + (f"; and {len(reasons) - 5} more" if len(reasons) > 5 else "")
                raise SriovError(
                    f"{field}.numvfs: changing {address} from {current} to {target} VFs destroys VFs in use "
                    f"({shown}); set force: true to do it anyway"
                )
    if numvfs_change or eswitch_change:
        steps = []
        if current and (numvfs_change or eswitch_change):
            steps.append("0")
        if eswitch_change:
            steps.append(f"eswitch {eswitch_change}")
        if target and (current != target or current):
            steps.append(str(target))
        entry["actions"].extend(s if s.startswith("eswitch") else f"sriov_numvfs={s}" for s in steps)
        if not ctx.check_mode:
            numvfs_path = os.path.join(path, "sriov_numvfs")
            for step in steps:
                if step.startswith("eswitch"):
                    try:
                        ctx.devlink.set_eswitch_mode(address, eswitch_change)
                    except netlink_link.LinkError as exc:
                        raise SriovError(f"{field}.eswitch_mode: {exc}") from exc
                    continue
                ctx.write(numvfs_path, step, f"{field}.numvfs")
                _wait_for_vfs(ctx, address, int(step), f"{field}.numvfs")

    # Netlink-held settings (read after the VFs exist).
    if pf["mtu"] is not None or pf["vfs"] or pf["vf_defaults"]:
        if not live_netlink:
            ctx.warnings.append(
                f"{address}: MTU and VF properties not applied: {ctx.sysfs_root} is a captured tree, "
                "and netlink talks to the running kernel"
            )
        else:
            _apply_netlink(ctx, pf, field, netdev, target, numvfs_change, entry, before, after)
    entry["before"], entry["after"] = before, after
    entry["changed"] = bool(entry["actions"])
    return entry


def _apply_netlink(
    ctx: _Context,
    pf: dict[str, Any],
    field: str,
    netdev: str,
    target: int,
    recreated: bool,
    entry: dict[str, Any],
    before: dict[str, Any],
    after: dict[str, Any],
) -> None:
    try:
        link = ctx.links.get(netdev, vfs=True)
    except netlink_link.LinkError as exc:
        raise SriovError(f"{field}: reading {netdev} failed: {exc}") from exc
    if pf["mtu"] is not None:
        before["mtu"], after["mtu"] = link["mtu"], pf["mtu"]
        if link["mtu"] != pf["mtu"]:
            entry["actions"].append(f"mtu {pf['mtu']}")
            if not ctx.check_mode:
                try:
                    ctx.links.set_mtu(netdev, pf["mtu"])
                except netlink_link.LinkError as exc:
                    raise SriovError(f"{field}.mtu: {exc}") from exc
    known = {} if (recreated and ctx.check_mode) else {vf["vf"]: vf for vf in link.get("vfs") or [] if "vf" in vf}
    vf_before: dict[str, Any] = {}
    vf_after: dict[str, Any] = {}
    for index, props in sorted(_vf_targets(pf, target).items()):
        state = known.get(index, {})
        old = {key: state.get(key) for key in props}
        changes = {key: value for key, value in props.items() if state.get(key) != value}
        if not changes:
            continue
        vf_before[str(index)], vf_after[str(index)] = old, dict(props)
        entry["actions"].append(f"vf {index} " + " ".join(f"{k} {v}" for k, v in sorted(changes.items())))
        if ctx.check_mode:
            continue
        if index not in known:
            raise SriovError(f"{field}.vfs: {netdev} does not report VF {index} through netlink")
        try:
            ctx.links.set_vf(netdev, index, changes, state)
        except netlink_link.LinkError as exc:
            raise SriovError(f"{field}.vfs[{index}]: {exc}") from exc
    if vf_before:
        before["vfs"], after["vfs"] = vf_before, vf_after


def apply(
    pfs: list[dict[str, Any]],
    sysfs_root: str = "/sys",
    procfs_root: str = "/proc",
    check_mode: bool = False,
    driver_state_dir: str = DEFAULT_STATE_DIR,
    writer: SysfsWriter | None = None,
    links_factory: Callable[[], Any] | None = None,
    devlink_factory: Callable[[], Any] | None = None,
    settle_timeout: float = 10.0,
    vf_drivers: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Bring every listed PF to its desired state; see the ``sriov`` module's RETURN."""
    wanted = validate(pfs)
    if (
        isinstance(settle_timeout, bool)
        or not isinstance(settle_timeout, (int, float))
        or not 0 <= settle_timeout < 86400
    ):
        raise SriovError(f"settle_timeout: {settle_timeout!r} is not a number of seconds from 0 to 86400")
    if not os.path.isdir(sysfs_root):
        raise SriovError(f"sysfs_root: {sysfs_root} is not a directory")
    live = os.path.realpath(sysfs_root) == "/sys"
    if links_factory is None and live:
        links_factory = netlink_link.Links
    if devlink_factory is None and live:
        devlink_factory = netlink_link.Devlink
    links = links_factory() if links_factory is not None else None
    devlink = devlink_factory() if devlink_factory is not None else None
    ctx = _Context(
        sysfs_root,
        check_mode,
        writer or SysfsWriter(),
        links,
        devlink,
        read_prepared(driver_state_dir),
        settle_timeout,
        tuple(vf_drivers),
    )
    try:
        topology = probe(sysfs_root, procfs_root)
        seen: dict[str, str] = {}
        # Resolve every entry before changing anything: a wrong entry late in
        # the list must not leave the first PFs changed.
        for position, pf in enumerate(wanted):
            device = find_pf(pf, topology, f"pfs[{position}]")
            if device is not None:
                if device["pci_address"] in seen:
                    raise SriovError(
                        f"pfs[{position}]: selects {device['pci_address']}, already selected by {seen[device['pci_address']]}"
                    )
                seen[device["pci_address"]] = f"pfs[{position}]"
        _dry_run(wanted, ctx, topology)
        results = []
        for position, pf in enumerate(wanted):
            results.append(_apply_pf(ctx, pf, f"pfs[{position}]", topology))
            if results[-1].get("changed") and not check_mode:
                topology = probe(sysfs_root, procfs_root)
    finally:
        for handle in (links, devlink):
            if handle is not None:
                handle.close()
    before = {r["pci_address"]: r["before"] for r in results if "before" in r}
    after = {r["pci_address"]: r["after"] for r in results if "after" in r}
    return {
        "changed": any(r.get("changed") for r in results),
        "disruptive": any(r.get("disruptive") for r in results),
        "pfs": results,
        "warnings": ctx.warnings,
        "diff": {"before": before, "after": after},
    }


def _dry_run(wanted: list[dict[str, Any]], ctx: _Context, topology: dict[str, Any]) -> None:
    """Check every entry against the node in check mode first (refusals change nothing)."""
    if ctx.check_mode:
        return
    dry = _Context(
        ctx.sysfs_root,
        True,
        ctx.writer,
        ctx.links,
        ctx.devlink,
        ctx.prepared,
        ctx.settle_timeout,
        ctx.extra_drivers,
    )
    for position, pf in enumerate(wanted):
        _apply_pf(dry, pf, f"pfs[{position}]", topology)
