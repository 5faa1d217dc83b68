# SPDX-License-Identifier: Apache-2.0
"""Device health, fed by every topology scan: one table for the health stream, the metrics and the taints.

Each scan checks every published device; the first failing check is the
device's *cause*, and each cause has the device taint effect the driver
publishes for it (with ``--device-taints=on``, under the key
``<driver name>/unhealthy``, the cause as the value):

================  ==========================================================  ==========
cause             check                                                       effect
================  ==========================================================  ==========
gone              the PCI function is no longer in sysfs                      NoExecute
not-responding    its config space reads as all ones (fell off the bus)       NoExecute
gpu-lost          NVML answers ``GPU_IS_LOST`` for the GPU                     NoExecute
no-driver         no kernel driver is bound                                   NoSchedule
link-down         a netdev of the function is up but has no carrier           NoSchedule
rdma-port-down    an RDMA port of the function is not ACTIVE                  NoSchedule
aer-fatal         ``aer_dev_fatal`` grew within the last ``aer_hold`` seconds NoSchedule
xid               NVML reported a critical XID error within ``aer_hold`` s     NoSchedule
================  ==========================================================  ==========

``gpu-lost`` and ``xid`` are NVML's word on a GPU (:meth:`HealthMonitor.gpu_signal`, from the GPU
watcher): they apply to every device of that PCI address, the GPU whole and its MIG devices alike (a MIG
device's scan entry is its parent GPU's), as the PCI checks do.

A device that can no longer work for the pods that have it (gone, not
responding) gets ``NoExecute``, so the eviction controller moves them; a device
that may come back by itself (a cable, a port, a driver reload, a burst of
errors) gets ``NoSchedule``, which keeps new claims away and leaves running
pods alone. A device that a scan no longer publishes while its PCI function is
still in sysfs is not gone: in RDMA exclusive mode a whole NIC given to a pod
takes its RDMA device (and netdev) into the pod's namespace, so the host's scan
sees a plain NIC. It stays healthy, and published untainted in its last form
while a prepared claim holds it, so that the pod using it is not evicted. A
device that disappears from a scan stays in the table until it comes back; with taints on it stays in the ResourceSlice too, in its last
published form, while a prepared claim holds it (else for ``GONE_GRACE``
seconds). The taint goes when the check passes again. The AER count a device has
when the driver first sees it is its baseline: errors from before the start
never taint.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from . import pcihealth

# cause -> taint effect, in the order the checks run (the first failing one is the cause)
CAUSES: dict[str, str] = {
    "gone": "NoExecute",
    "not-responding": "NoExecute",
    "gpu-lost": "NoExecute",
    "no-driver": "NoSchedule",
    "link-down": "NoSchedule",
    "rdma-port-down": "NoSchedule",
    "aer-fatal": "NoSchedule",
    "xid": "NoSchedule",
}
TAINT_NAME = "unhealthy"  # the taint key is <driver name>/unhealthy
AER_HOLD = 600.0  # seconds a fatal AER error keeps its device tainted
# seconds a gone device stays published (tainted NoExecute) when no prepared claim holds it: long enough
# for the scheduler to see the taint, short enough that removed VFs do not linger in the slice
GONE_GRACE = 300.0


class Health(NamedTuple):
    healthy: bool
    since: float  # unix time of the entry's last change (the health stream's last_updated_time)
    message: str
    cause: str = ""  # one of CAUSES; empty while healthy
    cause_since: float = 0.0  # unix time the cause began (the taint's timeAdded)


def taint_key(driver: str) -> str:
    return f"{driver}/{TAINT_NAME}"


def check(
    topo: dict[str, Any] | None,
    rdma: dict[str, dict[str, Any]],
    responds: bool | None = None,
    aer_message: str = "",
    no_carrier: str = "",
) -> tuple[str, str]:
    """``(cause, message)`` of one device; the cause is empty when every check passes."""
    if topo is None:
        return "gone", "no longer present on the node"
    bdf = topo["pci_address"]
    if responds is False:
        return "not-responding", f"{bdf}: config space reads all ones (fell off the bus)"
    if not topo.get("driver"):
        return "no-driver", f"{bdf}: no kernel driver bound"
    if no_carrier:
        return "link-down", f"{no_carrier}: link down (up, no carrier)"
    for name in topo.get("rdma_devices") or []:
        for port in (rdma.get(name) or {}).get("ports") or []:
            state = str(port.get("state") or "").upper()
            if state and state != "ACTIVE":
                return "rdma-port-down", f"{name} port {port.get('port')}: {state}"
    if aer_message:
        return "aer-fatal", f"{bdf}: {aer_message}"
    return "", "ok"


def rfc3339(seconds: float) -> str:
    """A metav1.Time: UTC, whole seconds."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


class HealthMonitor:
    def __init__(
        self,
        timeout: float = 60.0,
        sysfs_root: str | None = None,
        aer_hold: float = AER_HOLD,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.timeout = timeout
        self.sysfs_root = sysfs_root  # None: only what the topology scan says (no config or AER reads)
        self.aer_hold = aer_hold
        self.clock = clock
        self.cond = threading.Condition()
        self.version = 0
        self.table: dict[str, Health] = {}
        self.known: dict[str, dict[str, Any]] = {}  # last published form of every device seen
        self._aer_count: dict[str, int] = {}  # PCI address -> last fatal count read
        self._aer_rise: dict[str, tuple[float, int]] = {}  # PCI address -> (time of the last rise, count)
        self._address: dict[str, str] = {}  # device name -> PCI address, from the scans that published it
        self._gpu: dict[str, tuple[str, str, float]] = {}  # PCI address -> NVML's (cause, message, since)

    def gpu_signal(self, pci: str, cause: str = "", message: str = "") -> None:
        """NVML's word on a GPU (``gpu-lost``, ``xid``; empty clears it), taken by the next :meth:`update`."""
        with self.cond:
            if cause:
                self._gpu[pci] = (cause, message, self.clock())
            else:
                self._gpu.pop(pci, None)

    def _signal(self, pci: str, cause: str, message: str, now: float) -> tuple[str, str]:
        """The check's cause, or NVML's signal on the GPU where that comes first in CAUSES (an XID: for aer_hold)."""
        with self.cond:
            signal = self._gpu.get(pci)
            if signal is not None and signal[0] == "xid" and now - signal[2] >= self.aer_hold:
                del self._gpu[pci]
                signal = None
        order = list(CAUSES)
        if signal is None or (cause and order.index(cause) <= order.index(signal[0])):
            return cause, message
        return signal[0], f"{pci}: {signal[1]}"

    def _aer_message(self, bdf: str, now: float) -> str:
        count = pcihealth.aer_fatal_count(self.sysfs_root, bdf) if self.sysfs_root else None
        if count is not None:
            before = self._aer_count.get(bdf)
            if before is not None and count > before:
                self._aer_rise[bdf] = (now, count)
            self._aer_count[bdf] = count
        rise = self._aer_rise.get(bdf)
        if rise is None:
            return ""
        if now - rise[0] >= self.aer_hold:
            del self._aer_rise[bdf]
            return ""
        return f"{rise[1]} fatal AER error(s), the last {now - rise[0]:.0f} s ago"

    def _check(
        self, name: str, topo: dict[str, Any] | None, rdma: dict[str, dict[str, Any]], now: float
    ) -> tuple[str, str]:
        address = self._address.get(name)
        if topo is None and self.sysfs_root and address and pcihealth.present(self.sysfs_root, address):
            return (
                "",
                f"{address}: on the bus, not published by this scan (e.g. its RDMA device is in a pod's namespace)",
            )
        responds = None
        aer = no_carrier = ""
        if topo is not None and self.sysfs_root:
            responds = pcihealth.responds(self.sysfs_root, topo["pci_address"])
            aer = self._aer_message(topo["pci_address"], now)
            no_carrier = next(
                (
                    n["name"]
                    for n in topo.get("netdevs") or []
                    if n.get("name") and pcihealth.carrier_lost(self.sysfs_root, n["name"])
                ),
                "",
            )
        cause, message = check(topo, rdma, responds, aer, no_carrier)
        return self._signal(topo["pci_address"], cause, message, now) if topo is not None else (cause, message)

    def update(self, inventory: Any) -> bool:
        """Recompute from an inventory; True when any device changed state.

        One scan thread calls it; the sysfs reads happen before the lock is taken,
        so the health stream and a metrics scrape never wait on them.
        """
        now = self.clock()
        names = sorted(set(self.table) | set(self.known) | {d["name"] for d in inventory.devices})
        for name, topo in inventory.by_name.items():
            if topo.get("pci_address"):
                self._address[name] = topo["pci_address"]
        results = {name: self._check(name, inventory.by_name.get(name), inventory.rdma, now) for name in names}
        changed = False
        with self.cond:
            for device in inventory.devices:
                self.known[device["name"]] = device
            for name, (cause, message) in results.items():
                old = self.table.get(name)
                if old is not None and old.cause == cause and (old.message == message or cause == "aer-fatal"):
                    continue  # unchanged (the age in an AER message is no change)
                cause_since = old.cause_since if old is not None and old.cause == cause else now
                self.table[name] = Health(not cause, now, message, cause, cause_since if cause else 0.0)
                changed = True
            if changed:
                self.version += 1
                self.cond.notify_all()
        return changed

    def unhealthy(self) -> int:
        with self.cond:
            return sum(1 for entry in self.table.values() if not entry.healthy)

    def snapshot(self) -> dict[str, Health]:
        with self.cond:
            return dict(self.table)

    def taint(self, entry: Health, driver: str) -> dict[str, Any] | None:
        """The DeviceTaint (resource.k8s.io/v1) of a table entry; None while healthy."""
        if entry.healthy:
            return None
        return {
            "key": taint_key(driver),
            "value": entry.cause,
            "effect": CAUSES[entry.cause],
            "timeAdded": rfc3339(entry.cause_since),
        }

    def tainted_devices(
        self, inventory: Any, driver: str, in_use: set[str] | frozenset[str] = frozenset()
    ) -> list[dict[str, Any]]:
        """The devices to publish with taints: the scan's devices, then the gone ones in their last form.

        A gone device is published while a prepared claim (``in_use``) holds it, so that the
        eviction controller moves its pods, and else for ``GONE_GRACE`` seconds.
        """
        now = self.clock()
        with self.cond:
            present = {d["name"] for d in inventory.devices}
            gone = [
                self.known[n]
                for n in sorted(self.known)
                if n not in present
                and n in self.table
                and (n in in_use or now - self.table[n].cause_since < GONE_GRACE)
            ]
            out = []
            for device in list(inventory.devices) + gone:
                entry = self.table.get(device["name"])
                taint = self.taint(entry, driver) if entry is not None else None
                out.append(dict(device, taints=[taint]) if taint else device)
            return out

    def wait_change(self, seen: int, timeout: float) -> tuple[int, dict[str, Health] | None]:
        """Block until the table's version differs from ``seen``; (version, table or None on timeout)."""
        with self.cond:
            if self.version == seen:
                self.cond.wait(timeout)
            if self.version == seen:
                return seen, None
            return self.version, dict(self.table)
