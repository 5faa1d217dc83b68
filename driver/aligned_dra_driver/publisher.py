# SPDX-License-Identifier: Apache-2.0
"""Publishing the node's ResourceSlices (one pool named after the node).

The slices are :func:`dra.slices.resource_slices` with the Node as
controlling owner. A publication compares what the API server has with what
the node has now; when they differ, every slice of the pool moves to a new
generation (one above the highest seen), created or replaced, and slices that
are no longer needed are deleted last, so a reader either sees the complete old
pool or waits for ``resourceSliceCount`` slices of the new generation.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from .collection import dra_slices
from .kube import ApiError

LOG = logging.getLogger(__name__)


def slice_limit(devices: list[dict[str, Any]]) -> int:
    """Devices per slice: 64 once a device uses taints, counters or list-typed attributes, else 128."""
    return dra_slices.slice_device_limit(devices)


def build_slices(
    node: str,
    driver: str,
    devices: list[dict[str, Any]],
    generation: int,
    node_uid: str | None,
    counter_sets: list[dict[str, Any]] | None = None,
    minor: str = "",
) -> list[dict[str, Any]]:
    """The pool's slices; with MIG's counter sets (``--mig=dynamic``) in the shape the cluster's ``minor`` takes."""
    if counter_sets:
        slices = dra_slices.partitioned_slices(node, devices, counter_sets, minor, driver, generation)
    else:
        slices = dra_slices.resource_slices(node, devices, driver, generation, slice_limit(devices))
    if node_uid:
        owner = [{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}]
        for item in slices:
            item["metadata"]["ownerReferences"] = owner
    return slices


def _instant(text: Any) -> Any:
    """A metav1.Time as a comparable instant: ``...Z`` and ``...+00:00`` are the same time."""
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return text


def _comparable(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Devices with their taints' timeAdded as instants (the API server may answer another form)."""
    out = []
    for device in devices:
        if device.get("taints"):
            taints = [dict(t, timeAdded=_instant(t.get("timeAdded"))) for t in device["taints"]]
            device = dict(device, taints=taints)
        out.append(device)
    return out


def _content(items: list[dict[str, Any]]) -> list[tuple[str, Any, Any, int]]:
    return sorted(
        (
            item["metadata"]["name"],
            _comparable(item["spec"].get("devices") or []),
            item["spec"].get("sharedCounters") or [],
            item["spec"]["pool"]["resourceSliceCount"],
        )
        for item in items
    )


def taints_dropped(sent: dict[str, Any], stored: Any) -> bool:
    """True when a slice was sent with device taints and the API server stored none of them.

    The API server drops fields of a feature gate that is off (``DRADeviceTaints``) without an error.
    """
    tainted = {d["name"] for d in sent["spec"].get("devices") or [] if d.get("taints")}
    if not tainted:
        return False
    spec = stored.get("spec") if isinstance(stored, dict) else None
    devices = spec.get("devices") if isinstance(spec, dict) else None
    kept = {d.get("name") for d in devices or [] if isinstance(d, dict) and d.get("taints")}
    return not tainted & kept


class Publisher:
    def __init__(self, kube: Any, node: str, driver: str) -> None:
        self.kube = kube
        self.node = node
        self.driver = driver
        self.node_uid: str | None = None
        self.generation = 0
        self.last_error: str | None = None
        self.published = 0
        self.slices = 0
        self.taints_dropped = False  # the last write sent taints and the API server kept none
        self.minor = ""  # the API server's minor, asked once the pool has counter sets (their slices differ by it)

    def _owner_uid(self) -> str | None:
        if self.node_uid is None:
            try:
                self.node_uid = self.kube.get_node(self.node)["metadata"]["uid"]
            except ApiError as exc:
                LOG.warning("Node %s not readable (%s): slices get no owner", self.node, exc)
        return self.node_uid

    def publish(self, devices: list[dict[str, Any]], counter_sets: list[dict[str, Any]] | None = None) -> bool:
        """Bring the pool in line with ``devices`` (and MIG's ``counter_sets``); True when something was written."""
        try:
            if counter_sets and not self.minor:
                self.minor = self.kube.server_minor()
            changed = self._publish(devices, counter_sets or [])
        except ApiError as exc:
            self.last_error = str(exc)
            raise
        self.last_error = None
        return changed

    def _publish(self, devices: list[dict[str, Any]], counter_sets: list[dict[str, Any]]) -> bool:
        existing = self.kube.list_slices(self.node, self.driver)
        newest = max((s["spec"]["pool"].get("generation", 0) for s in existing), default=0)
        current = [s for s in existing if s["spec"]["pool"].get("generation", 0) == newest]
        owner = self._owner_uid()
        wanted = build_slices(self.node, self.driver, devices, newest, owner, counter_sets, self.minor)
        owners_ok = all(
            (s["metadata"].get("ownerReferences") or [{}])[0].get("uid") == owner for s in existing if owner
        )
        if existing and len(current) == len(existing) and _content(current) == _content(wanted) and owners_ok:
            self.generation = newest
            self.published = len(devices)
            self.slices = len(current)
            self.taints_dropped = False  # what is stored is what was wanted, taints included
            return False
        generation = newest + 1
        wanted = build_slices(self.node, self.driver, devices, generation, owner, counter_sets, self.minor)
        by_name = {s["metadata"]["name"]: s for s in existing}
        dropped = False
        for item in wanted:
            name = item["metadata"]["name"]
            old = by_name.pop(name, None)
            if old is None:
                stored = self.kube.create_slice(item)
            else:
                item["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
                stored = self.kube.replace_slice(name, item)
            dropped = dropped or taints_dropped(item, stored)
        self.taints_dropped = dropped
        for name in by_name:
            try:
                self.kube.delete_slice(name)
            except ApiError as exc:
                if exc.status != 404:
                    raise
        self.generation = generation
        self.published = len(devices)
        self.slices = len(wanted)
        LOG.info("published %d device(s) in %d slice(s), generation %d", len(devices), len(wanted), generation)
        return True
