# SPDX-License-Identifier: Apache-2.0
"""Publishing the node's ResourceSlices (one pool named after the node).

The slices are :func:`dra.slices.resource_slices` with the Node as
controlling owner. A publication compares what the API server has with what
the node has now; when they differ, every slice of the pool moves to a new
generation (one above the highest seen), created or replaced, and slices that
are no longer needed are deleted last, so a reader either sees the complete old
pool or waits for ``resourceSliceCount`` slices of the new generation.

A pool with counter sets (``--mig=dynamic``) takes the shape of the API server's
minor, which a control-plane upgrade changes under a running driver: the minor
is asked again every :data:`MINOR_INTERVAL` seconds, and when a slice write is
refused (400, 404, 422), at most once per :data:`MINOR_REASK_AFTER` seconds; a
minor that changed rebuilds the pool in its shape at once. A refusal that a
re-read minor does not explain fails the publication (the caller backs off) and
is logged once with the devices it names.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any

from ..collection import dra_slices
from ..kube import ApiError

LOG = logging.getLogger(__name__)

MINOR_INTERVAL = 60.0  # seconds between two reads of the API server's minor while the pool has counter sets
MINOR_REASK_AFTER = 30.0  # seconds: a refused slice write asks the minor again at most this often
SHAPE_REFUSALS = (400, 404, 422)  # a refused write that a changed minor (the slices' shape) may explain
REFUSALS_REMEMBERED = 64  # distinct refusals logged since the last successful publication
_ITEM = re.compile(r"spec\.(devices|sharedCounters)\[(\d+)\]")


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


def refused_items(item: dict[str, Any], exc: ApiError) -> list[str]:
    """What a refused slice's write got wrong, by name: ``gpu-0 (spec.devices[3]: Duplicate value: "gpu-0")``.

    The items are the ones the Status's causes (else its message) name by index in the slice that was sent.
    """
    spec = item.get("spec") or {}
    found = []
    for cause in exc.causes or [{"field": "", "message": str(exc)}]:
        text = f"{cause.get('field', '')}: {cause.get('message', '')}".strip(": ")
        match = _ITEM.search(cause.get("field") or "") or _ITEM.search(cause.get("message") or "")
        if match is None:
            continue
        listed = spec.get(match.group(1)) or []
        index = int(match.group(2))
        name = listed[index].get("name") if index < len(listed) and isinstance(listed[index], dict) else None
        kind = "device" if match.group(1) == "devices" else "counter set"
        entry = f"{kind} {name or '?'} ({text})"
        if entry not in found:
            found.append(entry)
    return found


class Publisher:
    def __init__(
        self,
        kube: Any,
        node: str,
        driver: str,
        minor_interval: float = MINOR_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
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
        self.minor_interval = minor_interval
        self._clock = clock
        self._minor_due = 0.0  # clock() after which the minor is asked again
        self._reasked: float | None = None  # clock() of the last read a refusal caused
        self._refused: tuple[dict[str, Any], ApiError] | None = None  # the slice write the server refused
        self._logged: set[tuple[str, str]] = set()  # refusals logged since the last success

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
            if counter_sets and (not self.minor or self._clock() >= self._minor_due):
                self._read_minor()
            try:
                changed = self._publish(devices, counter_sets or [])
            except ApiError as exc:
                if not (counter_sets and self._minor_changed_by(exc)):
                    raise
                changed = self._publish(devices, counter_sets)  # once, in the new minor's shape
        except ApiError as exc:
            self.last_error = str(exc)
            self._log_refusal()
            raise
        self.last_error = None
        self._logged.clear()
        return changed

    def _ask_minor(self) -> bool:
        """Read the API server's minor; True when it differs from the one the pool was built for."""
        minor = self.kube.server_minor()
        self._minor_due = self._clock() + self.minor_interval
        changed = bool(self.minor) and minor != self.minor
        if changed:
            LOG.warning("the API server is Kubernetes %s now (was %s): the pool takes its shape", minor, self.minor)
        self.minor = minor
        return changed

    def _read_minor(self) -> None:
        """The first read (its failure fails the publication), or the periodic one (a failure keeps the minor)."""
        if not self.minor:
            self._ask_minor()
            return
        try:
            self._ask_minor()
        except ApiError as exc:
            LOG.warning(
                "the API server's version is not readable (%s): the pool keeps the shape of %s", exc, self.minor
            )
            self._minor_due = self._clock() + min(MINOR_REASK_AFTER, self.minor_interval)

    def _minor_changed_by(self, exc: ApiError) -> bool:
        """After a refused slice write: ask the minor again (at most once per MINOR_REASK_AFTER); True if it changed."""
        if self._refused is None or exc.status not in SHAPE_REFUSALS:
            return False
        now = self._clock()
        if self._reasked is not None and now - self._reasked < MINOR_REASK_AFTER:
            return False
        self._reasked = now
        if not self._ask_minor():
            return False
        self._refused = None  # explained by the upgrade
        return True

    def _log_refusal(self) -> None:
        """Log a refused slice with what the refusal names, once per distinct refusal until a success."""
        if self._refused is None:
            return
        item, exc = self._refused
        self._refused = None
        if exc.status not in (400, 422):
            return
        name = item["metadata"]["name"]
        key = (name, str(exc))
        if key in self._logged:
            return
        if len(self._logged) >= REFUSALS_REMEMBERED:
            self._logged.clear()
        self._logged.add(key)
        named = refused_items(item, exc)
        LOG.error(
            "the API server refused ResourceSlice %s of pool %s: %s; the pool is not published whole until it is fixed",
            name,
            self.node,
            "; ".join(named) if named else f"names no device ({exc})",
        )

    def _publish(self, devices: list[dict[str, Any]], counter_sets: list[dict[str, Any]]) -> bool:
        self._refused = None
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
            try:
                if old is None:
                    stored = self.kube.create_slice(item)
                else:
                    item["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
                    stored = self.kube.replace_slice(name, item)
            except ApiError as exc:
                if exc.status in SHAPE_REFUSALS:
                    self._refused = (item, exc)
                raise
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
