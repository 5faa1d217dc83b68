# SPDX-License-Identifier: Apache-2.0
"""The driver's record of the NICs it saw on the host: NICs out of the host's view, read as last seen.

A NIC given to a pod leaves the host's view: its interface (and, in exclusive
RDMA netns mode, its RDMA device) moves into the pod's namespace, so the probe
sees an RDMA NIC without an interface, or a plain NIC. Read as it is, the
rail rule (``rails``) would renumber the other NICs under ``pci_order`` and
lose it under ``netdev_name`` or ``subnet``. The driver records at every scan
what the rules read of each NIC PF in view (``rails-nics.json`` in its state
directory); the driver and the probe module read a PF that is on the PCI bus
but out of view as the record has it (:func:`with_last_seen`), so the
validation, the summaries and the planner see the rails the driver publishes.

Runs on nodes and in the driver (Python >= 3.9, standard library only).
"""

from __future__ import annotations

import ipaddress
import json
import re

from .rails import PCI_ADDRESS_RE, netdev_names

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection
    from typing import Any

RECORD_NAME = "rails-nics.json"
RECORD_VERSION = 1
# The driver's --state-dir default (and the driver role's aligned_dra_driver_state_dir).
DEFAULT_RECORD = "/var/lib/aligned-dra/" + RECORD_NAME
# one entry per NIC PF of a node: a few KiB; anything near this is not the driver's file
MAX_RECORD_BYTES = 4 * 1024 * 1024
NIC_PF_KINDS = ("rdma", "nic")
# Linux interface names: 1-15 bytes without "/", ":" or white space (stricter, as the driver checks them)
_IFNAME_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}")


class RailRecordError(ValueError):
    """The driver's record cannot be used; the message says why (without the path)."""


def _is_ifname(value: Any) -> bool:
    return isinstance(value, str) and _IFNAME_RE.fullmatch(value) is not None and value not in (".", "..")


def _is_ipv4_interface(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        ipaddress.IPv4Interface(value)
    except ValueError:
        return False
    return True


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def record_document(node: str, nics: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The record as the driver writes it: ``{"version": 1, "node": ..., "nics": {pci address: nic}}``.

    A nic is ``{"rdma": bool, "netdevs": [interface names], "addresses":
    {interface: ["a.b.c.d/len"]}}`` (``addresses`` only when a ``subnet``
    rule had them read). ``netdevs`` is empty for an RDMA NIC without an
    interface (InfiniBand without IPoIB).
    """
    return {"version": RECORD_VERSION, "node": node, "nics": nics}


def check_record(document: Any, node: str | None = None) -> dict[str, dict[str, Any]]:
    """The NICs of a record (:func:`record_document`), or :class:`RailRecordError` saying what is wrong.

    ``node``: the Kubernetes node name the record must be written for; ``None``
    takes any (the probe module does not know the node name; a record sits in
    the state directory of the node it describes).
    """
    if not isinstance(document, dict) or document.get("version") != RECORD_VERSION:
        raise RailRecordError(f"version {RECORD_VERSION} expected")
    if node is not None and document.get("node") != node:
        raise RailRecordError(f"written for node {_shown(document.get('node'))}, not {node}")
    if not isinstance(document.get("node"), str):
        raise RailRecordError(f"'node' is not a string (got {_shown(document.get('node'))})")
    nics = document.get("nics")
    if not isinstance(nics, dict):
        raise RailRecordError("'nics' is not an object")
    out: dict[str, dict[str, Any]] = {}
    for bdf, entry in nics.items():
        where = f"nics[{_shown(bdf)}]"
        if not isinstance(bdf, str) or not PCI_ADDRESS_RE.fullmatch(bdf) or not isinstance(entry, dict):
            raise RailRecordError(f"{where}: not a PCI address with an object")
        names = entry.get("netdevs")
        if not isinstance(entry.get("rdma"), bool) or not isinstance(names, list) or not all(map(_is_ifname, names)):
            raise RailRecordError(f"{where}: 'rdma' (true or false) and 'netdevs' (interface names) expected")
        nic: dict[str, Any] = {"rdma": entry["rdma"], "netdevs": list(names)}
        addresses = entry.get("addresses")
        if addresses is not None:
            if not isinstance(addresses, dict) or not all(
                _is_ifname(name) and isinstance(found, list) and all(map(_is_ipv4_interface, found))
                for name, found in addresses.items()
            ):
                raise RailRecordError(f"{where}.addresses: interface name -> IPv4 addresses with prefix expected")
            nic["addresses"] = {name: list(found) for name, found in addresses.items()}
        out[bdf] = nic
    return out


def read_record(path: str, node: str | None = None) -> dict[str, dict[str, Any]] | None:
    """The NICs of the record at ``path``; ``None`` when there is none; :class:`RailRecordError` when unusable."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_RECORD_BYTES + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RailRecordError(f"cannot be read: {exc.strerror or exc}") from None
    if len(data) > MAX_RECORD_BYTES:
        raise RailRecordError(f"is larger than {MAX_RECORD_BYTES} bytes")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RailRecordError(f"is not JSON: {exc}") from None
    try:
        return check_record(document, node)
    except RailRecordError as exc:
        raise RailRecordError(f"is not the driver's record: {exc}") from None


def nic_pfs(topology: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The NIC physical functions on the PCI bus (kind ``rdma`` or ``nic``, no ``physfn``), by PCI address."""
    return {
        d["pci_address"]: d
        for d in topology.get("devices") or []
        if d.get("kind") in NIC_PF_KINDS
        and not d.get("physfn")
        and isinstance(d.get("pci_address"), str)
        and PCI_ADDRESS_RE.fullmatch(d["pci_address"])
    }


def nics_in_view(
    topology: dict[str, Any], last_seen: dict[str, dict[str, Any]], away: Collection[str] = ()
) -> dict[str, dict[str, Any]]:
    """The NIC PFs the host sees as the rules read them (``{"rdma": bool, "netdevs": [names]}``), by PCI address.

    Out of view (so left out): a PF in ``away`` (the driver's NICs back from a
    pod under their name in the pod), a PF the record (``last_seen``) has as
    an RDMA NIC that is not one now (exclusive mode took its RDMA device), a PF
    the record has with interfaces that has none now (its interface is in a
    pod), and a plain NIC without an interface. An RDMA NIC without an
    interface that the record does not have with one is in view: an
    InfiniBand NIC without IPoIB has none on the host either.
    """
    out: dict[str, dict[str, Any]] = {}
    for bdf, device in nic_pfs(topology).items():
        names = netdev_names(device)
        fact = last_seen.get(bdf)
        rdma = device.get("kind") == "rdma"
        if bdf in away or (fact is not None and fact["rdma"] and not rdma):
            continue
        if not names and (not rdma or (fact is not None and fact["netdevs"])):
            continue
        out[bdf] = {"rdma": rdma, "netdevs": names}
    return out


def with_last_seen(
    topology: dict[str, Any], last_seen: dict[str, dict[str, Any]], away: Collection[str] = ()
) -> dict[str, Any]:
    """``topology`` with each NIC PF out of the host's view read as the record ``last_seen`` has it.

    Such a PF (on the PCI bus, not in :func:`nics_in_view`) that the record
    has as an RDMA NIC becomes kind ``rdma`` with the recorded interfaces, and
    carries ``out_of_view``: ``{"kind", "netdevs"}`` as the host sees it now.
    ``counts`` follow the kind; a ``netdev_addresses`` mapping gets the
    recorded addresses of its interfaces. A PF the record does not have, or
    has as a plain NIC, stays as the host sees it. ``topology`` is not changed;
    without a PF to read so, it is returned as it is.
    """
    seen = nics_in_view(topology, last_seen, away)
    patched: dict[str, dict[str, Any]] = {}
    for bdf, device in sorted(nic_pfs(topology).items()):
        fact = last_seen.get(bdf)
        if bdf in seen or fact is None or not fact["rdma"]:
            continue
        patched[bdf] = dict(
            device,
            kind="rdma",
            netdevs=[{"name": name} for name in fact["netdevs"]],
            out_of_view={"kind": device.get("kind"), "netdevs": netdev_names(device)},
        )
    if not patched:
        return topology
    view = dict(topology, devices=[patched.get(d.get("pci_address"), d) for d in topology.get("devices") or []])
    counts = topology.get("counts")
    if isinstance(counts, dict):
        counts = dict(counts)
        for device in patched.values():
            was = device["out_of_view"]["kind"]
            if was != "rdma" and isinstance(counts.get(was), int) and isinstance(counts.get("rdma"), int):
                counts[was] -= 1
                counts["rdma"] += 1
        view["counts"] = counts
    if isinstance(topology.get("netdev_addresses"), dict):
        addresses = dict(topology["netdev_addresses"])
        for bdf in patched:
            addresses.update(last_seen[bdf].get("addresses") or {})
        view["netdev_addresses"] = addresses
    return view


def with_record(topology: dict[str, Any], path: str) -> dict[str, Any]:
    """The live probe's ``topology`` read with the driver's record at ``path`` (:func:`with_last_seen`).

    No record (no driver, or one without ``--rails-file``): ``topology`` as it
    is. A record that cannot be used adds a warning to ``topology["warnings"]``
    and reads the NICs as the host sees them; never an error: the rails of a
    NIC in a pod may then look short, as without a record.
    """
    try:
        record = read_record(path)
    except RailRecordError as exc:
        warning = f"rails record {path} {exc}: NICs out of the host's view (in pods) are read as the host sees them"
        return dict(topology, warnings=[*(topology.get("warnings") or []), warning])
    if not record:
        return topology
    return with_last_seen(topology, record)
