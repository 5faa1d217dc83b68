# SPDX-License-Identifier: Apache-2.0
"""``aligned_dra_mig`` checked on the controller before any node changes (the validation stage calls
:func:`site_problems`, once per site).

The argument spec of the role ``aligned.dra.mig`` has refused wrong types and choices already; here what
only the whole inventory, the site and the nodes' probes know:

- a ``static`` layout names a config of its ``mig-configs`` (given inline or as ``mig_configs_file``, never
  both), read as the node reads it (``node/mig/layout``: mig-parted's rules), and no GPU index is in two
  entries;
- ``layout`` and configs belong to ``static``: ``dynamic`` takes none (the driver makes the partitions);
- each GPU the layout configures (the selector ``gpus`` and the entries' ``devices`` and ``device-filter``
  against the probe's GPUs, where this run has the probe; else each entry's ``device-filter`` models)
  offers the profiles named, and the counts fit: :func:`packing.pack` (the node's own solver) on NVML's
  profiles from the probe's ``mig`` entry, else on the documented geometry (:mod:`geometry`);
- a GPU picked by PCI address that has no MIG is refused;
- ``static`` and ``dynamic`` on one GPU: the driver's ``--mig`` in ``aligned_dra_driver_extra_args``
  must say the same mode as ``aligned_dra_mig``;
- MIG and MPS fractions on the same GPUs: a site whose fractional template is on while MIG takes every
  probed GPU of every host (the template's shares would find no GPU);
- ``dynamic`` needs partitionable devices (``DRAPartitionableDevices``): on from 1.36, on 1.34 and 1.35 only
  where the site says the gate is on (``partitionable_devices_gate`` or ``aligned_dra_feature_gates``).

Each problem is ``(host, variable, value, reason)``. Runs on the controller; imports the driver role's MIG
rules (``deploy/mig``), the probe's fact store and the node's layout reader and packing solver (standard
library only), no Ansible.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import mig as deploy_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import geometry
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import fact as topology_fact
from ansible_collections.aligned.dra.plugins.module_utils.node.mig import layout, packing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

VARIABLE = "aligned_dra_mig"
NVIDIA = "0x10de"
MIG_FLAG = "--mig"


class MigSettingsError(ValueError):
    """``aligned_dra_mig`` cannot be read; the message says which part."""


def load_configs_file(path: Any, base: str | None = None) -> dict[str, Any]:
    """The ``mig-configs`` of a mig-parted YAML file on the controller (the whole file, ``version`` and
    ``mig-configs``, or the ``mig-configs`` mapping alone); a relative path is read from ``base``."""
    import yaml  # here: module_utils import without PyYAML (ansible-test sanity import)

    where = Path(str(path)).expanduser()
    if not where.is_absolute() and base:
        where = Path(base) / where
    try:
        data = yaml.safe_load(where.read_text())
    except OSError as exc:
        raise MigSettingsError(f"mig_configs_file {path}: cannot be read ({exc.strerror})") from exc
    except yaml.YAMLError as exc:
        raise MigSettingsError(f"mig_configs_file {path}: not YAML ({exc})") from exc
    if isinstance(data, dict) and "mig-configs" in data:
        data = data["mig-configs"]
    if not isinstance(data, dict):
        raise MigSettingsError(f"mig_configs_file {path}: no mig-configs mapping in it")
    return data


def configs_of(mig: dict[str, Any], base: str | None = None) -> dict[str, Any]:
    """The host's ``mig-configs``: inline, or read from ``mig_configs_file`` (both: refused)."""
    inline, path = mig.get("mig_configs"), mig.get("mig_configs_file")
    if inline and path:
        raise MigSettingsError("mig_configs and mig_configs_file: give the layouts one way, not both")
    return load_configs_file(path, base) if path else dict(inline or {})


def layout_entries(configs: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The entries of config ``name``, read as the node reads them (:func:`layout.parse_configs`, mig-parted's
    rules), and no GPU index in two entries without a ``device-filter``."""
    try:
        entries = layout.choose(layout.parse_configs(configs), name)
    except layout.LayoutError as exc:
        raise MigSettingsError(str(exc)) from None
    seen: dict[int, str] = {}
    for entry in entries:
        if entry["devices"] == "all" or entry["device_filter"]:
            continue
        for index in entry["devices"]:
            if index in seen:
                raise MigSettingsError(f"{entry['where']}.devices: GPU {index} is in {seen[index]} too")
            seen[index] = entry["where"]
    return entries


def filter_ids(entry: dict[str, Any]) -> list[str]:
    """The PCI device IDs (``0x20b0``) of an entry's ``device-filter``; NVIDIA's only (the table is NVIDIA's)."""
    return [f"0x{device:04x}" for device, vendor, _sub in entry["device_filter"] or [] if vendor == 0x10DE]


def node_gpus(topology: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The node's NVIDIA GPUs (physical functions) in PCI address order, as the probe found them."""
    devices = (topology or {}).get("devices") or []
    gpus = [
        d
        for d in devices
        if d.get("kind") == "gpu" and str(d.get("vendor_id", "")).lower() == NVIDIA and d.get("physfn") is None
    ]
    return sorted(gpus, key=lambda d: str(d.get("pci_address")))


def _name(device: dict[str, Any]) -> str:
    entry = device.get("mig") if isinstance(device.get("mig"), dict) else {}
    return str(entry.get("name") or device.get("model") or device.get("name") or "")


def selected(gpus: list[dict[str, Any]], selector: dict[str, Any] | None) -> list[tuple[int, dict[str, Any]]]:
    """``(index, GPU)`` of the GPUs the selector ``gpus`` takes (every one for an empty selector); a GPU must
    match every key given."""
    selector = selector or {}
    found = []
    for index, device in enumerate(gpus):
        if selector.get("pci_addresses") and device.get("pci_address") not in selector["pci_addresses"]:
            continue
        if selector.get("device_ids") and geometry.device_id(device.get("device_id")) not in {
            geometry.device_id(d) for d in selector["device_ids"]
        }:
            continue
        if selector.get("models") and not any(fnmatch.fnmatchcase(_name(device), m) for m in selector["models"]):
            continue
        if selector.get("indices") and index not in selector["indices"]:
            continue
        found.append((index, device))
    return found


def _fits(where: str, geo: dict[str, Any], wanted: dict[str, int]) -> list[str]:
    """Why ``wanted`` does not fit a GPU of geometry ``geo``, if it does not."""
    try:
        packing.pack(geo["profiles"], [], {name: count for name, count in wanted.items() if count})
    except packing.PackingError as exc:
        return [f"{where} ({geo['model']}, {geo['source']} profiles): {exc}"]
    return []


def layout_problems(mig: dict[str, Any], topology: dict[str, Any] | None, base: str | None = None) -> list[str]:
    """Reasons ``mig`` (one host's, ``static``) cannot be applied: the layout, and each GPU it configures."""
    name = mig.get("layout")
    if not name:
        return ["mode static needs layout (the name of one of the mig-configs)"]
    try:
        entries = layout_entries(configs_of(mig, base), str(name))
    except MigSettingsError as exc:
        return [str(exc)]
    gpus = node_gpus(topology)
    reasons = []
    if not gpus:  # no probe in this run: each entry against the models its device-filter names
        for number, entry in enumerate(entries):
            for filtered in filter_ids(entry):
                geo = geometry.documented(filtered)
                if geo and entry["mig_devices"]:
                    reasons += _fits(f"layout {name}[{number}]", geo, entry["mig_devices"])
        return reasons
    for index, device in selected(gpus, mig.get("gpus")):
        for number, entry in enumerate(entries):
            devices = entry["devices"]
            filtered = entry["device_filter"] and geometry.device_id(device.get("device_id")) not in filter_ids(entry)
            if (devices != "all" and index not in devices) or filtered:
                continue
            geo = geometry.of_gpu(device)
            where = f"layout {name}[{number}] on GPU {device.get('pci_address')}"
            if geo is None:
                continue  # not MIG-capable: "every MIG-capable GPU" leaves it out (one picked by address: said below)
            reasons += _fits(where, geo, entry["mig_devices"])
    return reasons


def host_problems(
    host: str, settings: dict[str, Any], minor: str | None, gates: dict[str, Any], base: str | None = None
) -> list[tuple[str, str, Any, str]]:
    """One host's ``aligned_dra_mig`` (its settings as the validation read them): ``(host, variable, value,
    reason)`` for each problem. ``minor`` is the site's Kubernetes minor (None: reported elsewhere)."""
    mig = settings.get(VARIABLE) or {}
    mode = mig.get("mode", "off")
    reasons: list[str] = []
    topology = settings.get("aligned_dra_topology")
    topology = topology if isinstance(topology, dict) and "devices" in topology else None
    if mode == "static":
        reasons += layout_problems(mig, topology, base)
    elif mode == "dynamic" and (mig.get("layout") or mig.get("mig_configs") or mig.get("mig_configs_file")):
        reasons.append("layout and mig-configs are for mode static: in mode dynamic the driver makes the partitions")
    if mode == "dynamic" and minor is not None:
        reasons += gate_problems(mig, minor, gates)
    if mode != "off" and topology:
        for address in (mig.get("gpus") or {}).get("pci_addresses") or []:
            device = next((d for d in node_gpus(topology) if d.get("pci_address") == address), None)
            if device is None:
                reasons.append(f"gpus.pci_addresses: no NVIDIA GPU {address} on the node")
            elif geometry.of_gpu(device) is None:
                reasons.append(
                    f"gpus.pci_addresses: GPU {address} ({_name(device) or device.get('device_id')}) has no MIG"
                )
    problems = [(host, VARIABLE, mig, reason) for reason in reasons]
    driver_mode = driver_mig_mode(settings.get("aligned_dra_driver_extra_args"))
    if driver_mode is not None and driver_mode != mode:
        problems.append(
            (
                host,
                "aligned_dra_driver_extra_args",
                settings.get("aligned_dra_driver_extra_args"),
                f"the driver would run {MIG_FLAG}={driver_mode} while aligned_dra_mig.mode is {mode}: one mode per "
                "GPU, static and dynamic never both (leave --mig out: the driver follows aligned_dra_mig)",
            )
        )
    return problems


def driver_mig_mode(extra_args: Any) -> str | None:
    """The ``--mig`` mode host mode's ``aligned_dra_driver_extra_args`` give the driver (the last one), or None."""
    args = [str(arg) for arg in extra_args or []] if isinstance(extra_args, list) else []
    value = None
    for index, arg in enumerate(args):
        if arg.startswith(MIG_FLAG + "="):
            value = arg.split("=", 1)[1]
        elif arg == MIG_FLAG and index + 1 < len(args):
            value = args[index + 1]
    return value


def gate_problems(mig: dict[str, Any], minor: str, gates: dict[str, Any]) -> list[str]:
    """Mode ``dynamic`` on a minor whose partitionable devices are off, unless the site turns the gate on: the
    driver role's rule (:func:`deploy_mig.partitionable_problems`), so both say the same words."""
    return deploy_mig.partitionable_problems(mig, minor, gates)


def topology_of(host: str, fact: Any) -> dict[str, Any] | None:
    """The whole topology behind the host's probe fact (None without one, or where it cannot be read: the
    validation's own rails and SR-IOV checks say why)."""
    try:
        return topology_fact.full_topology(host, fact)
    except topology_fact.TopologyFactError:
        return None


def fractional_problems(
    site: str, hosts: list[str], setting: Callable[[str, str, Any], Any], shares: bool
) -> list[tuple[str, str, Any, str]]:
    """MIG and MPS fractions on the same GPUs: the site's fractional template is on and its GPUs are shared
    (``shares``), while MIG takes every probed NVIDIA GPU of every host of the site."""
    claims = setting(hosts[0], "aligned_dra_claims", None) or {}
    template = ((claims.get("templates") or {}) if isinstance(claims, dict) else {}).get("fractional_gpu") or {}
    if not shares or template.get("enabled", True) is False:
        return []
    taken = free = 0
    for host in hosts:
        mig = setting(host, VARIABLE, None) or {}
        gpus = node_gpus(topology_of(host, setting(host, "aligned_dra_topology", None)))
        if not gpus:
            return []  # a host without a probe: its GPUs are not known
        chosen = {id(d) for _i, d in selected(gpus, mig.get("gpus"))} if mig.get("mode", "off") != "off" else set()
        taken += sum(1 for d in gpus if id(d) in chosen and geometry.of_gpu(d) is not None)
        free += sum(1 for d in gpus if id(d) not in chosen or geometry.of_gpu(d) is None)
    if not taken or free:
        return []
    reason = (
        f"site {site}: MIG takes every GPU, and the fractional template (MPS shares) would share the same GPUs: "
        "turn it off (aligned_dra_claims.templates.fractional_gpu.enabled: false) or leave GPUs out of "
        "aligned_dra_mig.gpus"
    )
    return [(host, VARIABLE, setting(host, VARIABLE, None), reason) for host in hosts]


def site_problems(
    site: str,
    hosts: list[str],
    setting: Callable[[str, str, Any], Any],
    minor: str | None,
    gates: dict[str, Any],
    shares: bool,
) -> list[tuple[str, str, Any, str]]:
    """Every host's ``aligned_dra_mig`` of one site, and the site's fractions beside them; nothing to say where
    no host of the site sets ``aligned_dra_mig``."""
    if not any(setting(host, VARIABLE, None) for host in hosts):
        return []
    problems = []
    for host in hosts:
        mig = setting(host, VARIABLE, None)
        if not isinstance(mig, dict):
            continue  # the argument spec said so
        names = {name: setting(host, name, None) for name in (VARIABLE, "aligned_dra_driver_extra_args")}
        names["aligned_dra_topology"] = topology_of(host, setting(host, "aligned_dra_topology", None))
        problems += host_problems(host, names, minor, gates)
    return problems + fractional_problems(site, hosts, setting, shares)
