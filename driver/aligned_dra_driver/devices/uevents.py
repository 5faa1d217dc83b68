# SPDX-License-Identifier: Apache-2.0
"""Kernel uevents (hotplug, driver binds, VF creation, netdev renames) wake the rescan early.

The driver rescans every ``--rescan-interval`` seconds anyway; listening to
the kernel's ``NETLINK_KOBJECT_UEVENT`` broadcast makes a change visible in
well under a second. Events of the subsystems that can change what is
published (``pci``, ``net``, ``infiniband``, ``infiniband_verbs``, ``drm``)
call ``wake``; bursts (hundreds of VFs) are coalesced by the caller's scan.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable

LOG = logging.getLogger(__name__)
NETLINK_KOBJECT_UEVENT = 15
KERNEL_GROUP = 1
SUBSYSTEMS = frozenset((b"pci", b"net", b"infiniband", b"infiniband_verbs", b"drm"))


def subsystem(message: bytes) -> bytes | None:
    """The SUBSYSTEM of one kernel uevent message (``ACTION@DEVPATH\\0KEY=VALUE\\0...``)."""
    for field in message.split(b"\0")[1:]:
        if field.startswith(b"SUBSYSTEM="):
            return field[len(b"SUBSYSTEM=") :]
    return None


class UeventWatcher:
    def __init__(self, wake: Callable[[], None]) -> None:
        self.wake = wake
        self.sock: socket.socket | None = None
        self.thread: threading.Thread | None = None
        self.stopping = threading.Event()

    def start(self) -> bool:
        """Listen; False (with a log line) where the kernel refuses (no privilege, no netlink)."""
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_KOBJECT_UEVENT)
            sock.bind((0, KERNEL_GROUP))
            sock.settimeout(0.5)
        except (OSError, AttributeError) as exc:
            LOG.info("kernel uevents not available (%s): changes show at the next periodic scan", exc)
            return False
        self.sock = sock
        self.thread = threading.Thread(target=self._run, name="uevents", daemon=True)
        self.thread.start()
        return True

    def _run(self) -> None:
        assert self.sock is not None
        while not self.stopping.is_set():
            try:
                message = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if subsystem(message) in SUBSYSTEMS:
                self.wake()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(2)
        if self.sock is not None:
            self.sock.close()
