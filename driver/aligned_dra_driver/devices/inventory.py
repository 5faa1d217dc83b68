# SPDX-License-Identifier: Apache-2.0
"""The driver's options and the node's devices: the scan, and the filters that choose what is published.

:func:`scan` probes the node with the topology library, builds the published
devices (the dra module), keeps those that pass the ``--match`` rules and the
CEL ``--selector`` expressions, and remembers the topology entry behind each.
With ``--rails-file`` the RDMA NICs and VFs carry their rail
(:mod:`aligned_dra_driver.devices.rails`, evaluated at every scan).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any

from ..collection import dra, topology

LOG = logging.getLogger(__name__)

CALL_BUDGET = 25.0  # seconds; kubelet's own timeout per call is 45 s


@dataclass
class Options:
    node_name: str
    driver_name: str = dra.DRIVER_NAME
    sysfs_root: str = "/sys"
    procfs_root: str = "/proc"
    dev_root: str = "/dev"
    cdi_dir: str = "/var/run/cdi"
    state_dir: str = "/var/lib/aligned-dra"
    vendor_cdi_dirs: list[str] = field(default_factory=lambda: ["/etc/cdi", "/var/run/cdi"])
    netdev_hook: str = "/usr/local/bin/aligned-dra-netdev-hook"  # CDI wants an absolute hook path
    device_options: dict[str, Any] = field(default_factory=dict)
    match: list[tuple[str, bool, str]] = field(default_factory=list)  # (attribute, equal?, glob)
    selectors: list[str] = field(default_factory=list)  # CEL, as in a DeviceClass
    fractional_gpus: bool = False
    mps_root: str = "/run/aligned-dra/mps"
    durable_checkpoint: bool = True
    # kubelet gives a call 45 s: every claim of a call is answered within this budget (API requests
    # are cut to what is left of it), the checkpoint write after it; the rest get an error, kubelet retries
    call_budget: float = CALL_BUDGET
    rails: Any = None  # rails.Rails with --rails-file: every scan publishes the NICs' rails
    mig_scanner: Any = None  # mig.devices.MigScanner with --mig: every scan publishes the MIG devices
    mig: str = "off"  # --mig: off | static | dynamic (aligned_dra_driver.mig.prepare)
    mig_gpus: list[str] | None = None  # --mig-gpus: the GPUs run as MIG (PCI addresses); None: every MIG-capable one


@dataclass
class Inventory:
    """What the node has now: published devices and the topology entries behind them."""

    devices: list[dict[str, Any]]
    by_name: dict[str, dict[str, Any]]  # device name -> topology device
    rdma: dict[str, dict[str, Any]]  # rdma device name -> topology rdma entry
    rdma_exclusive: bool
    counter_sets: list[dict[str, Any]] = field(default_factory=list)  # MIG dynamic: one set per GPU


def _attribute_value(device: dict[str, Any], name: str) -> str | None:
    value = (device.get("attributes") or {}).get(name)
    if not value:
        return None
    ((_kind, raw),) = value.items()
    return str(raw).lower() if isinstance(raw, bool) else str(raw)


def matches(device: dict[str, Any], rules: list[tuple[str, bool, str]]) -> bool:
    """Whether a published device passes every ``attribute=glob`` / ``attribute!=glob`` rule."""
    import fnmatch

    for attribute, equal, pattern in rules:
        value = _attribute_value(device, attribute)
        hit = value is not None and fnmatch.fnmatchcase(value, pattern)
        if hit != equal:
            return False
    return True


_SELECTORS: dict[str, Any] = {}


def compile_selectors(expressions: list[str]) -> list[Any]:
    """Compiled CEL selectors (kept per expression); raises ValueError naming a bad one."""
    from ..collection import dra_cel

    cel = dra_cel()
    compiled = []
    for expression in expressions:
        if expression not in _SELECTORS:
            try:
                _SELECTORS[expression] = cel.Selector(expression)
            except cel.CelError as exc:
                raise ValueError(f"--selector {expression!r}: {exc}") from exc
        compiled.append(_SELECTORS[expression])
    return compiled


def selected(device: dict[str, Any], expressions: list[str], driver: str) -> bool:
    """Whether every CEL selector is true for the device; an evaluation error counts as false."""
    from ..collection import dra_cel

    cel = dra_cel()
    view = cel.cel_device(device, driver, (driver, dra.STANDARD_DOMAIN))
    for selector in compile_selectors(expressions):
        ok, error = selector.evaluate(view)
        if error:
            LOG.warning("device %s left out: selector %r: %s", device["name"], selector.expression, error)
        if not ok:
            return False
    return True


def read_rdma_netns_mode(sysfs_root: str) -> bool:
    """True when the RDMA subsystem is in exclusive network-namespace mode (ib_core netns_mode=0)."""
    try:
        with open(os.path.join(sysfs_root, "module", "ib_core", "parameters", "netns_mode")) as handle:
            return handle.read().strip() in ("0", "N", "exclusive")
    except OSError:
        return False


def scan(opts: Options) -> Inventory:
    """Probe the node with the topology library and build the published devices (dra module)."""
    topo = topology.probe(opts.sysfs_root, opts.procfs_root)
    rails = opts.rails.evaluate(topo) if opts.rails is not None else None
    devices = dra.devices_from_topology(topo, opts.device_options, rails=rails)
    if opts.match:
        devices = [d for d in devices if matches(d, opts.match)]
    if opts.selectors:
        devices = [d for d in devices if selected(d, opts.selectors, opts.driver_name)]
    counter_sets: list[dict[str, Any]] = []
    mig_gpus: set[str] = set()
    if opts.mig_scanner is not None:  # the selected GPUs' MIG devices in their place (mig.devices; fails closed)
        devices, counter_sets = opts.mig_scanner.apply(devices)
        mig_gpus = opts.mig_scanner.mig_gpus
    if opts.fractional_gpus:  # a GPU run as MIG is never an MPS-shared GPU
        from ..sharing.fractional import make_shareable

        devices = [
            make_shareable(d)
            if _attribute_value(d, "dra.aligned.dev/kind") == "gpu" and d["name"] not in mig_gpus
            else d
            for d in devices
        ]
    candidates: dict[str, dict[str, Any]] = {}
    for device in topo.get("devices") or []:
        for kind in dra.NAME_PREFIX:
            try:
                candidates[dra.device_name(kind, device["pci_address"])] = device
            except dra.DeviceModelError:
                continue
    for device in devices:  # a MIG device stands on its parent GPU's topology entry
        parent = _attribute_value(device, "resource.kubernetes.io/pciBusID")
        if _attribute_value(device, "dra.aligned.dev/kind") == "mig" and parent:
            candidates[device["name"]] = candidates.get(dra.device_name("gpu", parent), {})
    by_name = {d["name"]: candidates[d["name"]] for d in devices if candidates.get(d["name"])}
    rdma = {entry["name"]: entry for entry in topo.get("rdma_devices") or [] if entry.get("name")}
    return Inventory(devices, by_name, rdma, read_rdma_netns_mode(opts.sysfs_root), counter_sets)
