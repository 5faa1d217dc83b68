# SPDX-License-Identifier: Apache-2.0
"""Device health, fed by every topology scan and streamed to the kubelet.

A device is healthy when its PCI function is present with a kernel driver
bound and, for RDMA NICs, every RDMA port is ACTIVE. A device that disappears
from a scan stays in the table as unhealthy ("no longer present").
"""

from __future__ import annotations

import threading
import time
from typing import Any


def check(topo: dict[str, Any] | None, rdma: dict[str, dict[str, Any]]) -> tuple[bool, str]:
    if topo is None:
        return False, "no longer present on the node"
    if not topo.get("driver"):
        return False, f"{topo['pci_address']}: no kernel driver bound"
    for name in topo.get("rdma_devices") or []:
        for port in (rdma.get(name) or {}).get("ports") or []:
            state = str(port.get("state") or "").upper()
            if state and state != "ACTIVE":
                return False, f"{name} port {port.get('port')}: {state}"
    return True, "ok"


class HealthMonitor:
    def __init__(self, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.cond = threading.Condition()
        self.version = 0
        self.table: dict[str, tuple[bool, float, str]] = {}

    def update(self, inventory: Any) -> bool:
        """Recompute from an inventory; True when any device changed state."""
        now = time.time()
        names = set(self.table) | {d["name"] for d in inventory.devices}
        changed = False
        with self.cond:
            for name in sorted(names):
                healthy, message = check(inventory.by_name.get(name), inventory.rdma)
                old = self.table.get(name)
                if old is None or old[0] != healthy or old[2] != message:
                    self.table[name] = (healthy, now, message)
                    changed = True
            if changed:
                self.version += 1
                self.cond.notify_all()
        return changed

    def unhealthy(self) -> int:
        with self.cond:
            return sum(1 for healthy, _t, _m in self.table.values() if not healthy)

    def wait_change(self, seen: int, timeout: float) -> tuple[int, dict[str, tuple[bool, float, str]] | None]:
        """Block until the table's version differs from ``seen``; (version, table or None on timeout)."""
        with self.cond:
            if self.version == seen:
                self.cond.wait(timeout)
            if self.version == seen:
                return seen, None
            return self.version, dict(self.table)
