# SPDX-License-Identifier: Apache-2.0
"""Whether a site's per-site stages would write what they wrote last time: its inputs and facts unchanged.

A converged re-run of ``site.yml`` still probes every node (a hardware change
must be seen), but a site whose inputs did not change would get its claims,
utilization, teams, placement, replay and report outputs again byte for byte.
``run`` with ``state: check`` says which sites those are; the stages then keep
their outputs and say so. ``state: nodes`` says which nodes are converged: the
site's settings, files and code unchanged, the node's own probe output unchanged,
and its network plan of this run with nothing to change; the network and
driver stages skip those nodes. ``state: record``, at the end of a run in which
no host failed, writes what both checks compare with, per site, in
``<output>/<site>/.aligned-dra-converged.json``.

A site's inputs, hashed into one digest:

- every ``aligned_dra_*`` setting of each of its hosts, in inventory order, as
  the validation read them (templated; extra vars included) - the validation
  stage computes that part (:func:`settings_digest`) in the one read of each
  host it makes anyway;
- every file under the hosts' inventory directories (a trace, usage files,
  claim files named relative to it) and every file an absolute path in the
  settings names;
- the site's probe output as this run wrote it: ``nodes/*.json`` and
  ``summary.json``;
- the collection's own code (plugins, roles, playbooks, the driver's source):
  a new release renders again.

The outputs are compared too: every file of the site's directory but the
probe's (``nodes/``, the summaries) and this record, hashed. An output changed
or removed since the record makes the site render again, and so does a site
that reads or writes the cluster or a Prometheus server (:func:`live_reason`):
this run cannot tell whether those changed.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import hashlib
import json
import os

from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import StageError
from ansible_collections.aligned.dra.plugins.module_utils.json_file import JsonFileError, write_json_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

# This collection's root: run in the controller's process (the module's action), the files users installed.
COLLECTION_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
)
STATE_FILE = ".aligned-dra-converged.json"
FORMAT = 1
# What the probe stage writes in every run (and the record itself): not an output the check compares.
PROBE_OUTPUTS = frozenset(("nodes", "summary.json", "summary.md", STATE_FILE))
# The collection's folders whose files make what the stages write.
CODE_DIRS = ("plugins", "roles", "playbooks", "driver")
STATES = ("check", "nodes", "record")
# The module's arguments, checked by the module and by its action alike.
ARGUMENT_SPEC = {
    "state": {"type": "str", "required": True, "choices": list(STATES)},
    "sites": {"type": "dict", "required": True},
    "digests": {"type": "dict", "default": {}},
}


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr)


def settings_digest(hosts: Iterable[tuple[str, Mapping[str, Any]]], inventory_dirs: Iterable[str]) -> str:
    """The digest of a site's settings: ``(host, settings)`` in inventory order, and its inventory directories."""
    digest = hashlib.sha256()
    for host, settings in hosts:
        digest.update(_canonical([host, dict(settings)]).encode("utf-8"))
        digest.update(b"\n")
    digest.update(_canonical(sorted(set(inventory_dirs))).encode("utf-8"))
    return digest.hexdigest()


def live_reason(settings: Mapping[str, Any]) -> str | None:
    """Why a host's stages read or write something this run cannot compare (the cluster, Prometheus); else None."""
    for name, value in sorted(settings.items()):
        if name.endswith("_apply") and value not in (None, False, "", "false", "no", 0):
            return f"{name} applies to the cluster"
        if name.endswith("_source") and value == "cluster":
            return f"{name} reads the cluster"
        if isinstance(value, dict):
            if value.get("source") == "cluster":
                return f"{name} reads the cluster"
            if value.get("prometheus"):
                return f"{name} reads Prometheus"
    return None


def node_live_reason(setting: Callable[[str, Any], Any]) -> str | None:
    """Why a node's own steps read something live each run (``setting(name, default)`` reads its settings):
    a host-mode driver whose token the role reads from the cluster. Else None."""
    if (
        setting("aligned_dra_driver_mode", "host") == "host"
        and setting("aligned_dra_driver_state", "present") == "present"
        and setting("aligned_dra_driver_kubeconfig", "")
    ):
        return "aligned_dra_driver_kubeconfig: the driver's token is read from the cluster"
    return None


def _files(root: str, leave_out: Iterable[str] = ()) -> list[str]:
    """Every regular file under ``root``, relative, sorted; hidden names, caches and the folders ``leave_out``
    (absolute, normalised) left out."""
    found = []
    leave_out = set(leave_out)
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(
            d
            for d in dirnames
            if not d.startswith(".") and d != "__pycache__" and os.path.join(directory, d) not in leave_out
        )
        for name in filenames:
            if not name.startswith(".") and not name.endswith(".pyc"):
                found.append(os.path.relpath(os.path.join(directory, name), root))
    return sorted(found)


def _file_hash(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def tree_digest(root: str, names: Iterable[str] | None = None, leave_out: Iterable[str] = ()) -> str:
    """The digest of the files under ``root`` (or of ``names`` relative to it): their paths and contents."""
    digest = hashlib.sha256()
    for name in _files(root, leave_out) if names is None else names:
        path = os.path.join(root, name)
        content = _file_hash(path) if os.path.isfile(path) else "absent"
        digest.update(f"{name}\0{content}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def code_digest(collection_root: str) -> str:
    """The digest of the collection's code: a new release, or an edited role, renders every site again."""
    return hashlib.sha256(
        "".join(tree_digest(os.path.join(collection_root, part)) for part in CODE_DIRS).encode("ascii")
    ).hexdigest()


def outputs(site_dir: str) -> dict[str, str]:
    """``{relative path: sha256}`` of the site's outputs: every file but the probe's and the record."""
    found = {}
    for name in _files(site_dir):
        if name.split(os.sep, 1)[0] in PROBE_OUTPUTS:
            continue
        found[name] = _file_hash(os.path.join(site_dir, name))
    return found


def paths_in(value: Any) -> set[str]:
    """Absolute paths of existing files that a setting names anywhere in its value."""
    if isinstance(value, str):
        return {value} if value.startswith("/") and os.path.isfile(value) else set()
    if isinstance(value, dict):
        return set().union(*(paths_in(item) for item in value.values())) if value else set()
    if isinstance(value, (list, tuple)):
        return set().union(*(paths_in(item) for item in value)) if value else set()
    return set()


def _base_parts(site: Mapping[str, Any], code: str) -> list[str]:
    """What every node of the site shares: the format, the code, the settings, inventory files and named files."""
    parts = [f"format {FORMAT}", f"code {code}", f"settings {site['settings']}"]
    # the output directory may lie in the inventory's (the default): what the stages write is not an input
    outputs_dir = [os.path.normpath(os.path.abspath(site["output_dir"]))]
    for directory in sorted(set(site.get("inventory_dirs") or ())):
        tree = tree_digest(os.path.abspath(directory), leave_out=outputs_dir) if os.path.isdir(directory) else "absent"
        parts.append(f"inventory {directory} {tree}")
    for path in sorted(site.get("files") or ()):
        parts.append(f"file {path} {_file_hash(path) if os.path.isfile(path) else 'absent'}")
    return parts


def inputs_digest(site_dir: str, site: Mapping[str, Any], code: str) -> str:
    """The digest of everything the site's stages read: settings, inventory files, named files, probe, code."""
    parts = _base_parts(site, code)
    nodes = os.path.join(site_dir, "nodes")
    parts.append(f"nodes {tree_digest(nodes) if os.path.isdir(nodes) else 'absent'}")
    parts.append(f"summary {tree_digest(site_dir, ['summary.json'])}")
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogateescape")).hexdigest()


def node_digests(site_dir: str, site: Mapping[str, Any], code: str) -> dict[str, str]:
    """``{host: digest}`` of each of the site's hosts: what every node shares (settings of every host - a
    neighbour's rails reach this node's driver -, files, code) and the node's own probe output."""
    shared = hashlib.sha256("\n".join(_base_parts(site, code)).encode("utf-8", "surrogateescape")).hexdigest()
    found = {}
    for host in site.get("hosts") or ():
        path = os.path.join(site_dir, "nodes", f"{host}.json")
        facts = _file_hash(path) if os.path.isfile(path) else "absent"
        found[host] = hashlib.sha256(f"{shared}\n{host}\n{facts}".encode("utf-8", "surrogateescape")).hexdigest()
    return found


def _record(site_dir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(site_dir, STATE_FILE), encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None  # none yet, or damaged: the site renders, and the run's end writes it again
    return record if isinstance(record, dict) and record.get("format") == FORMAT else None


def check(site_dir: str, site: Mapping[str, Any], code: str) -> tuple[str, str | None]:
    """``(digest, reason)``: the site's inputs digest, and why it renders (None: its outputs are kept)."""
    digest = inputs_digest(site_dir, site, code)
    if site.get("live"):
        return digest, f"{site['live']}: this run cannot tell whether that changed"
    record = _record(site_dir)
    if record is None:
        return digest, "no record of an earlier run"
    if record.get("inputs") != digest:
        return digest, "its inputs or facts changed since the last run"
    if record.get("outputs") != outputs(site_dir):
        return digest, "its outputs changed since the last run"
    return digest, None


def converged_nodes(
    site_dir: str, site: Mapping[str, Any], code: str, unsettled: Callable[[str], str | None]
) -> tuple[list[str], dict[str, int]]:
    """``(converged, reasons)``: the site's hosts whose digest is the recorded one, whose driver reads nothing
    live and whose network plan of this run changes nothing (``unsettled(host)``: why not, or None), and how
    many of the others each reason holds back."""
    record = _record(site_dir)
    recorded = record.get("nodes") if record is not None else None
    live = site.get("nodes_live") or {}
    converged: list[str] = []
    reasons: dict[str, int] = {}
    for host, digest in node_digests(site_dir, site, code).items():
        if not isinstance(recorded, dict):
            reason = "no record of an earlier run"
        elif recorded.get(host) != digest:
            reason = "its inputs or facts changed since the last run"
        else:
            reason = live.get(host) or unsettled(host)
        if reason is None:
            converged.append(host)
        else:
            reasons[reason] = reasons.get(reason, 0) + 1
    return converged, reasons


def _check_sites(sites: Mapping[str, Any], code: str) -> dict[str, Any]:
    unchanged, render, digests = [], {}, {}
    for name, site in sorted(sites.items()):
        digests[name], reason = check(os.path.join(site["output_dir"], name), site, code)
        if reason is None:
            unchanged.append(name)
        else:
            render[name] = reason
    return {"changed": False, "unchanged": unchanged, "render": render, "digests": digests}


def _check_nodes(sites: Mapping[str, Any], code: str, unsettled: Callable[[str], str | None]) -> dict[str, Any]:
    converged: list[str] = []
    per_site = {}
    for name, site in sorted(sites.items()):
        found, reasons = converged_nodes(os.path.join(site["output_dir"], name), site, code, unsettled)
        converged.extend(found)
        per_site[name] = {"converged": len(found), "hosts": len(site.get("hosts") or ()), "reasons": reasons}
    return {"changed": False, "converged": converged, "sites": per_site}


def run(
    params: Mapping[str, Any],
    check_mode: bool,
    collection_root: str = COLLECTION_ROOT,
    unsettled: Callable[[str], str | None] | None = None,
) -> dict[str, Any]:
    """The module's result for ``state`` ``check`` (``unchanged``, ``render``, ``digests``), ``nodes``
    (``converged``, ``sites``) or ``record``.

    ``params["sites"]`` maps each site to ``settings`` (its :func:`settings_digest`),
    ``inventory_dirs``, ``files``, ``live`` (:func:`live_reason` of its hosts), ``hosts``
    (in inventory order), ``nodes_live`` (per host, why its stages read something live) as
    the validation returns them, and ``output_dir``. ``unsettled`` says why a host's network
    plan of this run would change something (None: nothing); without it no node is converged.
    ``record`` takes the ``digests`` the check returned and writes each site's record, with
    its nodes' digests as they are now; in check mode it writes nothing.
    """
    code = code_digest(collection_root)
    if params["state"] == "check":
        return _check_sites(params["sites"], code)
    if params["state"] == "nodes":
        return _check_nodes(params["sites"], code, unsettled or (lambda _host: "no network plan of this run"))
    written = []
    for name, digest in sorted((params.get("digests") or {}).items()):
        site = params["sites"].get(name)
        if site is None:
            continue
        site_dir = os.path.join(site["output_dir"], name)
        # the nodes as this run leaves them (probed again where the network changed): the next probe's facts
        record = {
            "format": FORMAT,
            "inputs": digest,
            "outputs": outputs(site_dir),
            "nodes": node_digests(site_dir, site, code),
        }
        try:
            changed, _diff = write_json_file(os.path.join(site_dir, STATE_FILE), record, check_mode, field="output_dir")
        except JsonFileError as exc:
            raise StageError(str(exc)) from None
        if changed:
            written.append(name)
    return {"changed": bool(written), "recorded": written}
