# SPDX-License-Identifier: Apache-2.0
"""TEST FAKE: server-side apply field ownership of ``metadata.labels`` keys, for ``fake_apiserver``.

Only label keys are tracked; every other field is merged as ``fake_apiserver``
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

from typing import Any

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
