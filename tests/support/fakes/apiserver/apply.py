# SPDX-License-Identifier: Apache-2.0
"""TEST FAKE: patches and server-side apply in the fake API server.

Merge patches (RFC 7386), strategic merge patches (merged like merge patches,
except the list-map fields of ``LIST_MAP_KEYS``, merged by key), JSON patches
(RFC 6902) and server-side apply (``Patching``), and the apply's field
ownership of ``metadata.labels`` keys (``LabelOwnership``).

Only label keys are tracked; every other field is merged as the fake API server
always did, without ownership. Per object, each field manager entry - a
manager name with its operation, ``Apply`` or ``Update``, as the real server's
``managedFields`` list them - owns a set of label keys:

- an apply (``application/apply-patch+yaml``) makes its manager's ``Apply``
  entry own exactly the label keys of the applied configuration. A key it owned
  before and leaves out now is removed from the object unless another entry
  still owns it (then only the ownership goes). A key it applies with a value
  other than the live one, while another entry owns the key, is a conflict
  (409) unless the request says ``force=true``, which takes the key from the
  other owners. The same value is no conflict: the key is then shared;
- any other write (create, update, patch) makes the writer's ``Update`` entry
  own every key it adds or changes, taken from the other entries; a key it
  removes is owned by nobody. The writer is the request's ``fieldManager``,
  else the first part of its User-Agent, as on the real server;
- labels nobody owns (the server's own, such as a Namespace's
  ``kubernetes.io/metadata.name``, or ones a test stored directly) are never
  removed by an apply;
- ``dryRun=All`` answers the result and changes no ownership; creating an
  object starts its ownership afresh.

The real semantics (Kubernetes "Server-Side Apply": field management,
conflicts, "fields removed from a configuration ... removed when no other
manager owns them"), restricted to label keys.
"""

from __future__ import annotations

import copy
from typing import Any

from .resources import ApiError, Resource

APPLY = "Apply"
UPDATE = "Update"

Owners = dict[tuple[str, str], set[str]]


class ApplyConflict(ValueError):
    """An apply that would change label keys another manager owns (answered 409 Conflict)."""


def manager_of(query: dict[str, str], headers: Any) -> str:
    """The field manager of a request: ``fieldManager``, else the User-Agent's first part."""
    if query.get("fieldManager"):
        return query["fieldManager"]
    agent = (headers.get("User-Agent") if headers is not None else None) or "unknown"
    return agent.split("/", 1)[0] or "unknown"


def _labels(obj: dict[str, Any] | None) -> dict[str, Any]:
    labels = ((obj or {}).get("metadata") or {}).get("labels")
    return dict(labels) if isinstance(labels, dict) else {}


class LabelOwnership:
    """Which field manager entries own which label keys, per stored object."""

    def __init__(self) -> None:
        self.owners: dict[tuple[str, str, str], Owners] = {}

    def of(self, key: tuple[str, str, str]) -> dict[str, list[str]]:
        """``{"manager (operation)": sorted keys}`` of one object, for tests to read."""
        return {f"{m} ({op})": sorted(keys) for (m, op), keys in sorted(self.owners.get(key, {}).items()) if keys}

    def apply(
        self,
        key: tuple[str, str, str],
        live: dict[str, Any] | None,
        applied: dict[str, Any],
        manager: str,
        force: bool,
    ) -> tuple[dict[str, Any], Owners]:
        """The labels after ``manager`` applies ``applied``, and the ownership they leave.

        Raises :class:`ApplyConflict` where another entry owns a key whose value would change.
        """
        me = (manager, APPLY)
        owners = {} if live is None else {k: set(v) for k, v in self.owners.get(key, {}).items()}
        current = _labels(live)
        wanted = _labels(applied)
        conflicts = []
        for label, value in sorted(wanted.items()):
            others = sorted(m for m, keys in owners.items() if m != me and label in keys)
            if others and label in current and current[label] != value:
                if not force:
                    conflicts += [f'conflict with "{m}" using v1: .metadata.labels.{label}' for m, _op in others]
                    continue
                for other in others:
                    owners[other].discard(label)
        if conflicts:
            count = len(conflicts)
            raise ApplyConflict(
                f"Apply failed with {count} conflict{'s' if count != 1 else ''}: " + "\n".join(conflicts)
            )
        given_up = owners.get(me, set()) - set(wanted)
        owners[me] = set(wanted)
        labels = dict(current)
        labels.update(wanted)
        for label in given_up:
            if not any(label in keys for keys in owners.values()):
                labels.pop(label, None)
        return labels, owners

    def updated(
        self, key: tuple[str, str, str], old: dict[str, Any] | None, new: dict[str, Any], manager: str
    ) -> Owners:
        """The ownership after a write by ``manager`` that is not an apply (create, update, patch)."""
        me = (manager, UPDATE)
        owners = {} if old is None else {k: set(v) for k, v in self.owners.get(key, {}).items()}
        before, after = _labels(old), _labels(new)
        changed = {label for label, value in after.items() if before.get(label, object()) != value}
        removed = set(before) - set(after)
        for entry, keys in owners.items():
            if entry != me:
                keys -= changed
            keys -= removed
        owners.setdefault(me, set()).update(changed)
        return owners

    def store(self, key: tuple[str, str, str], owners: Owners) -> None:
        self.owners[key] = {entry: keys for entry, keys in owners.items() if keys}


# ---------------------------------------------------------------------------
# Merging
# ---------------------------------------------------------------------------


# Lists that strategic merge and server-side apply merge by key (x-kubernetes-list-map-keys).
LIST_MAP_KEYS: dict[str, tuple[str, ...]] = {
    "metadata.ownerReferences": ("uid",),
    "status.devices": ("driver", "pool", "device", "shareID"),
    "status.devices.conditions": ("type",),
    "status.conditions": ("type",),
    "status.reservedFor": ("uid",),
    "spec.containers": ("name",),
    "spec.initContainers": ("name",),
    "spec.tolerations": ("key",),
    "status.disruptedPods": ("name",),
}


def merge(live: Any, patch: Any, path: str = "", delete_nulls: bool = True) -> Any:
    """Merge ``patch`` into ``live`` (RFC 7386), merging known list-maps by key."""
    if isinstance(patch, dict) and isinstance(live, dict):
        out = dict(live)
        for key, value in patch.items():
            child = f"{path}.{key}" if path else key
            if value is None and delete_nulls:
                out.pop(key, None)
            elif key in out:
                out[key] = merge(out[key], value, child, delete_nulls)
            else:
                out[key] = copy.deepcopy(value)
        return out
    keys = LIST_MAP_KEYS.get(path)
    if keys and isinstance(patch, list) and isinstance(live, list):
        out = [copy.deepcopy(item) for item in live]
        index = {tuple(item.get(k) for k in keys): i for i, item in enumerate(out)}
        for item in patch:
            key = tuple(item.get(k) for k in keys)
            if key in index:
                out[index[key]] = merge(out[index[key]], item, path, delete_nulls)
            else:
                index[key] = len(out)
                out.append(copy.deepcopy(item))
        return out
    return copy.deepcopy(patch)


def json_patch(doc: Any, operations: list[dict[str, Any]]) -> Any:
    """Apply an RFC 6902 JSON patch (add, remove, replace, test)."""
    doc = copy.deepcopy(doc)
    for op in operations:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op.get("path", "").split("/")[1:]]
        if not parts:
            raise ApiError(400, "json patch: empty path")
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        kind = op.get("op")
        try:
            if kind == "add":
                if isinstance(parent, list):
                    parent.insert(len(parent) if last == "-" else int(last), op["value"])
                else:
                    parent[last] = op["value"]
            elif kind == "replace":
                target_key: Any = int(last) if isinstance(parent, list) else last
                if not isinstance(parent, list) and last not in parent:
                    raise ApiError(422, f"json patch: replace of missing path {op['path']}")
                parent[target_key] = op["value"]
            elif kind == "remove":
                del parent[int(last) if isinstance(parent, list) else last]
            elif kind == "test":
                if parent[int(last) if isinstance(parent, list) else last] != op.get("value"):
                    raise ApiError(422, f"json patch: test failed at {op['path']}")
            else:
                raise ApiError(400, f"json patch: unsupported op {kind!r}")
        except (KeyError, IndexError, ValueError) as exc:
            raise ApiError(422, f"json patch: {op.get('path')}: {exc}") from exc
    return doc


def _rfc7386(live: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(live) if isinstance(live, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _rfc7386(out.get(key), value)
    return out


# ---------------------------------------------------------------------------
# PATCH and server-side apply
# ---------------------------------------------------------------------------


class Patching:
    """PATCH requests: the four patch types, apply's label ownership (mixed into FakeApiServer)."""

    store: dict[tuple[str, str, str], dict[str, Any]]
    label_owners: LabelOwnership
    _writer: tuple[str, dict[Any, set[str]] | None] | None

    def _patch(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        subresource: str,
        query: dict[str, str],
        content_type: str,
        body: bytes,
        dry_run: bool,
    ) -> tuple[int, Any]:
        key = (resource.key, namespace, name)
        live = copy.deepcopy(self.store.get(key))
        patch = self._decode(body, content_type)
        wanted_uid = ((patch.get("metadata") or {}) if isinstance(patch, dict) else {}).get("uid")
        if live is not None and wanted_uid and wanted_uid != live["metadata"].get("uid"):
            # metadata.uid in a patch is a precondition on the real server too
            raise ApiError(
                409,
                f"Precondition failed: UID in precondition: {wanted_uid}, UID in object meta: {live['metadata']['uid']}",
                "Conflict",
            )
        if content_type == "application/apply-patch+yaml":
            if not query.get("fieldManager"):
                raise ApiError(422, "PatchOptions.meta.k8s.io: fieldManager: Required value: is required for apply")
            if not isinstance(patch, dict):
                raise ApiError(400, "apply patch must be an object")
            if live is None:
                if subresource:
                    raise ApiError(404, f'{resource.plural} "{name}" not found', "NotFound")
                patch.setdefault("metadata", {})["name"] = name
                self._apply_labels(key, None, patch, patch, query)
                return 201, self._create(resource, namespace, patch, keep_status=False, dry_run=dry_run)
            if patch.get("apiVersion") != resource.api_version or patch.get("kind") != resource.kind:
                raise ApiError(400, "apply patch must carry the resource's apiVersion and kind")
            meta_patch = patch.get("metadata") or {}
            if meta_patch.get("name", name) != name:
                raise ApiError(400, "the name of the object does not match the name on the URL")
            merged = merge(live, patch, delete_nulls=False)
            if not subresource:
                self._apply_labels(key, live, patch, merged, query)
            return 200, self._update(resource, namespace, name, merged, subresource, dry_run, check_version=False)
        if live is None:
            raise ApiError(404, f'{resource.plural} "{name}" not found', "NotFound")
        if content_type == "application/json-patch+json":
            if not isinstance(patch, list):
                raise ApiError(400, "json patch must be a list of operations")
            merged = json_patch(live, patch)
        elif content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            if not isinstance(patch, dict):
                raise ApiError(400, "merge patch must be an object")
            merged = merge(live, patch) if content_type.startswith("application/strategic") else _rfc7386(live, patch)
        else:
            raise ApiError(415, f"the patch content type {content_type!r} is not supported", "UnsupportedMediaType")
        return 200, self._update(resource, namespace, name, merged, subresource, dry_run)

    def _apply_labels(
        self, key: tuple[str, str, str], live: Any, patch: dict[str, Any], merged: dict[str, Any], query: dict[str, str]
    ) -> None:
        """Set ``merged``'s labels as the apply leaves them (LabelOwnership); 409 on a conflict."""
        manager = query["fieldManager"]
        try:
            labels, owners = self.label_owners.apply(key, live, patch, manager, query.get("force") == "true")
        except ApplyConflict as exc:
            raise ApiError(409, str(exc), "Conflict") from None
        meta = merged.setdefault("metadata", {})
        if labels:
            meta["labels"] = labels
        else:
            meta.pop("labels", None)  # an empty map is not kept (omitempty)
        self._writer = (manager, owners)

    def _owned(self, key: tuple[str, str, str], old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """Record the label ownership of the request's write; writes of the fake's own change none."""
        writer, self._writer = self._writer, None
        if writer is None:
            if old is None:
                self.label_owners.store(key, {})
            return
        manager, owners = writer
        self.label_owners.store(
            key, owners if owners is not None else self.label_owners.updated(key, old, new, manager)
        )
