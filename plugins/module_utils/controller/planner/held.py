# SPDX-License-Identifier: Apache-2.0
"""The devices a site's claims hold now, read from this run's ``utilization.json``.

The job planner starts from these: a held device is not free. Labels are the
planner's (:class:`allocator.Device` ``label``: the device name for the
bundled driver, ``<driver>/<name>`` for the others), which is how
``utilization.json`` names them too. Nodes are named by Kubernetes in the
measurement and by inventory host in the planner: ``node_names`` (host ->
Kubernetes node name) joins them; a node without an entry is named alike.

A device that claims share (consumable capacity, several consumers) is
counted as held whole: a job may fit more than the planner says there, never
less; :func:`held_devices` says how many such devices there are, so the
placement can say its count is a lower bound; a claim with devices on several
nodes cannot be taken off any one node's count, and is counted apart too.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


class HeldError(ValueError):
    """A utilization file that cannot be read or has the wrong shape; the message names the file."""


def read_utilization(path: str) -> dict[str, Any]:
    """The measurement in ``path``; an unreadable or malformed file raises :class:`HeldError` naming it."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise HeldError(f"utilization_file: cannot read {path}: {reason}") from None
    if not isinstance(data, dict) or not isinstance(data.get("allocations", []), list):
        raise HeldError(f"utilization_file: {path} is not a utilization.json (no list of allocations)")
    return data


def held_devices(utilization: Mapping[str, Any] | None, node_names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``{"held": {host: {device label}} | None, "shared": n, "spanning": m}`` of the claims' allocations.

    ``held`` is None without a measurement (an empty site). ``shared``: held devices that several claims
    or consumers share (counted as held whole: fits may be more). ``spanning``: claims with devices on
    several nodes, which no node's count can take off (fits may be less): the placement says so.
    """
    if utilization is None:
        return {"held": None, "shared": 0, "spanning": 0}
    host_of = {name: host for host, name in (node_names or {}).items()}
    held: dict[str, set[str]] = {}
    spanning = 0
    for index, row in enumerate(utilization.get("allocations") or []):
        if not isinstance(row, dict) or not isinstance(row.get("devices", {}), dict):
            raise HeldError(f"utilization_file: allocations[{index}] is not an allocation row")
        node = row.get("node")
        if node is None:
            # devices on several nodes (or none): labels alone do not say which node's they are
            spanning += 1 if any(row.get("devices").values()) else 0
            continue
        labels = held.setdefault(host_of.get(node, node), set())
        for devices in (row.get("devices") or {}).values():
            if not isinstance(devices, list):
                raise HeldError(f"utilization_file: allocations[{index}].devices: each class must list device names")
            labels.update(str(label) for label in devices)
    return {"held": held, "shared": len(utilization.get("shared") or []), "spanning": spanning}
