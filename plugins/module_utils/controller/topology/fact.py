# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The node fact ``aligned_dra_topology``: a few counts, and where the whole topology is kept.

A probed topology is large (up to about 600 KB of JSON on a node with 8 PFs
of 64 VFs). Held as a fact for every node of a 1,000-node site, it would keep
gigabytes in the controller and in every fork of it. So the probe keeps the
whole topology in a file of the run's store on the controller and sets as the
fact only its counts, warnings and that file (:func:`fact_of`); whatever needs
the devices reads the file, one node at a time (:func:`full_topology`).

A fact that is a whole topology (set by hand, or by an older release) is used
as it is. Controller-side; no Ansible imports.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The fact's keys: what a play may read without the file (docs/topology.md).
FACT_KEYS = ("schema_version", "hostname", "counts", "warnings", "file")


class TopologyFactError(Exception):
    """The node's whole topology cannot be had; the message names the node and the file."""


def fact_of(topology: dict[str, Any], path: str) -> dict[str, Any]:
    """The fact for ``topology`` kept in ``path``: its counts and warnings, and the path."""
    return {
        "schema_version": topology.get("schema_version"),
        "hostname": topology.get("hostname"),
        "counts": dict(topology.get("counts") or {}),
        "warnings": list(topology.get("warnings") or []),
        "file": path,
    }


def is_whole(fact: Any) -> bool:
    """Whether ``fact`` is a whole topology rather than the slim fact."""
    return isinstance(fact, dict) and "devices" in fact


def keep(path: str, topology: dict[str, Any]) -> None:
    """Write ``topology`` to ``path`` (compact JSON, replaced atomically; the directory is made)."""
    directory = os.path.dirname(path)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(topology, handle, separators=(",", ":"))
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError) as exc:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TopologyFactError(f"cannot keep the topology in {path}: {reason}") from None


def full_topology(host: str, fact: Any) -> dict[str, Any] | None:
    """The whole topology behind ``host``'s fact, or ``None`` when it has none.

    Raises :class:`TopologyFactError` when the fact names a file that cannot
    be read: the store lives as long as the run that probed, so a fact from
    an earlier run (a fact cache) points to nothing.
    """
    if fact is None:
        return None
    if is_whole(fact):
        return fact
    path = fact.get("file") if isinstance(fact, dict) else None
    if not isinstance(path, str) or not path:
        raise TopologyFactError(
            f"{host}: aligned_dra_topology is neither a topology nor the probe's fact (no file): {str(fact)[:200]}"
        )
    try:
        with open(path, encoding="utf-8") as handle:
            topology = json.load(handle)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TopologyFactError(
            f"{host}: the topology of aligned_dra_topology.file cannot be read ({path}: {reason}); "
            "the file lives as long as the run that probed the node: probe it in this run"
        ) from None
    if not isinstance(topology, dict):
        raise TopologyFactError(f"{host}: {path} holds no topology (a JSON object)")
    return topology
