# SPDX-License-Identifier: Apache-2.0
"""A site's model (the planner's nodes, built from the node files) built once per run.

The claims plan and the placement's jobs both plan on the planner's nodes of a
site, built from its node files (0.6 s at 200 nodes, five times that at
1,000). In ansible-playbook's own process, where the stages' actions run them,
a directory of the run is given (:func:`using`): the first stage keeps the
nodes it built there, named by a digest of everything they are built from, and
a later stage of the same run with the same inputs takes them instead of
building them again. The digest holds each node file's path, size,
modification time and inode (a file written again is another file) and every
option the nodes depend on; anything else makes another name, so a stage
never takes nodes built from other inputs.

Outside such a run (the modules, the unit tests) nothing is kept or taken.
The directory is the run's own store (Ansible's local temporary directory,
private to the user and removed when the run ends): what is kept there is
this collection's own pickled data, read back by the same code in the same
run.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import pickle
import tempfile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping
    from typing import Any

# The options of the plan and jobs modules the planner's nodes are built from (besides the node files).
BUILT_FROM = (
    "nodes_failed",
    "device_options",
    "kubernetes_version",
    "feature_gates",
    "rail_rules",
    "rail_rule",
    "rail_node_names",
    "rail_addresses",
    "mig",  # the GPUs MIG takes are published as partitions
)
FORMAT = 1

_DIRECTORY: contextvars.ContextVar[str | None] = contextvars.ContextVar("aligned_dra_model_store", default=None)


@contextlib.contextmanager
def using(directory: str | None) -> Iterator[None]:
    """Keep and take site models in ``directory`` (None: neither) while the block runs."""
    token = _DIRECTORY.set(directory)
    try:
        yield
    finally:
        _DIRECTORY.reset(token)


def key(options: Mapping[str, Any], files: Mapping[str, Any], nodes: Iterable[str]) -> str | None:
    """The name of the model built from ``nodes``' files (``files``: node -> path) with ``options`` (those
    of :data:`BUILT_FROM`, as the planner reads them: an empty default for one not given); None outside a
    run with a store, or when a file cannot be looked at (building then says why)."""
    if _DIRECTORY.get() is None:
        return None
    looked_at = {}
    try:
        for node in sorted(nodes):
            status = os.stat(str(files[node]))
            looked_at[node] = [str(files[node]), status.st_size, status.st_mtime_ns, status.st_ino]
    except (OSError, KeyError, TypeError):
        return None
    text = json.dumps(
        [FORMAT, {name: options.get(name) for name in BUILT_FROM}, looked_at], sort_keys=True, default=repr
    )
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _path(name: str) -> str:
    return os.path.join(str(_DIRECTORY.get()), f"site-model-{name}.pickle")


def take(name: str | None) -> Any:
    """The model kept under ``name`` in this run, or None."""
    if name is None:
        return None
    try:
        with open(_path(name), "rb") as handle:
            return pickle.load(handle)
    except (OSError, EOFError, pickle.UnpicklingError):
        return None


def keep(name: str | None, model: Any) -> None:
    """Keep ``model`` under ``name`` for the run's later stages (written whole, or not at all)."""
    if name is None:
        return
    directory = str(_DIRECTORY.get())
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".site-model-")
        with os.fdopen(handle, "wb") as out:
            pickle.dump(model, out, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(temporary, _path(name))
    except OSError:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(temporary)  # a full disk: the later stage builds the model itself
