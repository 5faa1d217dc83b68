# SPDX-License-Identifier: Apache-2.0
"""The driver's checkpoint: what it prepared, kept across restarts and reboots.

``<state-dir>/checkpoint.json`` (written atomically: temporary file, fdatasync,
rename)::

    {
      "version": 1,
      "driver": "dra.aligned.dev",
      "node": "node-a",
      "claims": {
        "<claim uid>": {
          "namespace": "default", "name": "claim",
          "devices": [                       # one per allocated device of ours
            {"pool": "node-a", "device": "nic-0000-1d-00-0", "request_names": ["nic"],
             "pci_address": "0000:1d:00.0", "kind": "nic",
             "cdi_device_ids": ["aligned.dev/claim=<uid>-nic-0000-1d-00-0"],
             "share_id": null,
             "netdev": {"original_name": "ens1f0", "interface_name": "net1", "original_mtu": 1500}}
          ],
          "cdi_spec": {...}                  # the claim's CDI spec, rewritten on start
        }
      }
    }

``claims`` → ``devices`` → ``pci_address`` is the shape the ``sriov`` module
reads to refuse destroying VFs in use (docs/network.md). A claim is in the
checkpoint exactly when it is prepared: Prepare writes the CDI spec first and
the checkpoint second, Unprepare removes the CDI spec and restores the NIC
first and the checkpoint entry last, and a start after a crash removes the CDI
specs the checkpoint does not name and rewrites those it does.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from .fsutil import atomic_write
from .validation import show

FILE_NAME = "checkpoint.json"
VERSION = 1
# what cdi.spec_path accepts: a UID never reaches a path outside the CDI directory
_FILE_SAFE_UID_RE = re.compile(r"[0-9a-zA-Z][0-9a-zA-Z-]{0,127}")


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read: the driver refuses to guess."""


class Checkpoint:
    def __init__(self, state_dir: str, driver: str, node: str, durable: bool = True) -> None:
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, FILE_NAME)
        self.driver = driver
        self.node = node
        self.durable = durable
        self.claims: dict[str, dict[str, Any]] = {}

    def load(self) -> dict[str, dict[str, Any]]:
        """Read the file (a missing one means nothing is prepared)."""
        os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
        try:
            with open(self.path, "rb") as handle:
                raw = handle.read()
        except FileNotFoundError:
            self.claims = {}
            return self.claims
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise CheckpointError(f"{self.path} is not valid JSON ({exc}); move it away to start empty") from exc
        if not isinstance(data, dict) or not isinstance(data.get("claims"), dict):
            raise CheckpointError(f"{self.path}: 'claims' must be a mapping")
        if data.get("version") != VERSION:
            raise CheckpointError(f"{self.path}: version {data.get('version')!r} is not {VERSION}")
        if data.get("driver") not in (None, self.driver):
            raise CheckpointError(f"{self.path} belongs to driver {data.get('driver')!r}, not {self.driver!r}")
        for uid, entry in data["claims"].items():
            if not _FILE_SAFE_UID_RE.fullmatch(uid):
                raise CheckpointError(f"{self.path}: claim UID {show(uid)} cannot name a CDI spec file")
            if not isinstance(entry, dict) or not isinstance(entry.get("devices"), list):
                raise CheckpointError(f"{self.path}: claim {uid!r} has no 'devices' list")
        self.claims = data["claims"]
        return self.claims

    def save(self) -> None:
        data = {"version": VERSION, "driver": self.driver, "node": self.node, "claims": self.claims}
        atomic_write(
            self.path,
            json.dumps(data, separators=(",", ":"), sort_keys=True).encode(),
            mode=0o600,
            durable=self.durable,
        )
