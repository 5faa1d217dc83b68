# SPDX-License-Identifier: Apache-2.0
"""Rails: which of a node's RDMA NICs is cabled to which leaf (rail) of a rail-optimised fabric.

A site declares one rule (``aligned_dra_rails``) and this part reads it
against a probe result. The validation stage, the driver (which publishes
``dra.aligned.dev/rail``), the planner and the report all call
:func:`assign`, so they cannot disagree on a NIC's rail.

The NICs a rule looks at are the node's RDMA NIC physical functions (probe
kind ``rdma``, no ``physfn``); a VF is on its PF's rail. A NIC a pod holds is
out of the host's view; ``rail_record.with_last_seen`` reads it as the driver
last saw it on the host (the driver's record, ``rails-nics.json``). Rules:

- ``pci_order``: those NICs, sorted by PCI address, are rails 0..n-1;
- ``netdev_name``: ``pattern`` (a regular expression matched against the whole
  interface name) whose first group is the rail;
- ``subnet``: ``subnets`` (IPv4 networks), index = rail; a NIC is on the rail
  whose subnet holds one of its interface's IPv4 addresses;
- ``map``: ``map`` (PCI address -> rail, every node; nodes of one layout share
  PCI addresses) and ``nodes`` (node name -> such a map, which wins).

Every rule takes ``exclude`` (globs of PCI addresses or interface names
that are on no rail: storage, in-band management) and ``count`` (the rails
every node must have, 0..count-1). A NIC the rule leaves out is on no rail
(``None``), with the reason. A NIC the ``subnet`` rule would place on a probe
that read no addresses is on :data:`UNKNOWN_RAIL`: some rail, not known here.
Runs on nodes and in the driver (Python >= 3.9, standard library only).
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

RULES = ("pci_order", "netdev_name", "subnet", "map")
RULE_KEYS = {
    "pci_order": frozenset(),
    "netdev_name": frozenset(("pattern",)),
    "subnet": frozenset(("subnets",)),
    "map": frozenset(("map", "nodes")),
}
COMMON_KEYS = frozenset(("by", "count", "exclude"))
MAX_RAILS = 64
# The driver's --rails-file: {"version": 1, "rules": [rule...], "nodes": {node name: index}}
RAILS_FILE_VERSION = 1
PCI_ADDRESS_RE = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$")


class RailRuleError(ValueError):
    """The rule itself is malformed (not a NIC that disagrees with it)."""


class UnknownRail:
    """The rail of a NIC that the rule would place but cannot here: :data:`UNKNOWN_RAIL`, its one value.

    The ``subnet`` rule on a probe that read no addresses (a captured tree):
    the NIC is on a rail, which the node knows, not on none (``None``).
    Output files show it as ``rail: null`` with ``unknown: true`` and
    :attr:`why` (``controller/fabric/rails``).
    """

    __slots__ = ()
    why = "addresses not read"

    def __repr__(self) -> str:
        return "UNKNOWN_RAIL"


UNKNOWN_RAIL = UnknownRail()


def _rail_number(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < MAX_RAILS:
        raise RailRuleError(f"{where}: a rail is an integer from 0 to {MAX_RAILS - 1} (got {value!r})")
    return value


def _pci_map(value: Any, where: str) -> dict[str, int]:
    if not isinstance(value, dict) or not value:
        raise RailRuleError(f"{where}: a mapping of PCI address to rail (got {value!r})")
    out = {}
    for address, rail in value.items():
        key = str(address).lower()
        if not PCI_ADDRESS_RE.match(key):
            raise RailRuleError(f"{where}: {address!r} is not a PCI address (dddd:bb:dd.f)")
        out[key] = _rail_number(rail, f"{where}[{address}]")
    return out


def check_rule(rule: Any) -> dict[str, Any]:
    """The rule with defaults, or :class:`RailRuleError` naming the bad field (``aligned_dra_rails.<field>``)."""
    where = "aligned_dra_rails"
    if not isinstance(rule, dict):
        raise RailRuleError(f"{where}: a mapping with 'by' (got {type(rule).__name__})")
    by = rule.get("by")
    if by not in RULES:
        raise RailRuleError(f"{where}.by: one of {', '.join(RULES)} (got {by!r})")
    unknown = sorted(set(rule) - COMMON_KEYS - RULE_KEYS[by])
    if unknown:
        raise RailRuleError(f"{where}: {', '.join(unknown)} not used with by: {by}")
    out: dict[str, Any] = {"by": by, "count": None, "exclude": []}
    if rule.get("count") is not None:
        count = rule["count"]
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_RAILS:
            raise RailRuleError(f"{where}.count: an integer from 1 to {MAX_RAILS} (got {count!r})")
        out["count"] = count
    exclude = rule.get("exclude") or []
    if not isinstance(exclude, list) or not all(isinstance(p, str) and p for p in exclude):
        raise RailRuleError(f"{where}.exclude: a list of globs of PCI addresses or interface names")
    out["exclude"] = list(exclude)
    if by == "netdev_name":
        out["pattern"] = _pattern(rule.get("pattern"), f"{where}.pattern")
    elif by == "subnet":
        out["subnets"] = _subnets(rule.get("subnets"), f"{where}.subnets")
    elif by == "map":
        # empty is unset: a checked rule ({"map": {}, "nodes": {...}}) checks again as it is
        if not rule.get("map") and not rule.get("nodes"):
            raise RailRuleError(f"{where}: by: map needs 'map' (every node) or 'nodes' (per node)")
        out["map"] = _pci_map(rule["map"], f"{where}.map") if rule.get("map") else {}
        nodes = rule.get("nodes")
        if nodes is not None and not isinstance(nodes, dict):
            raise RailRuleError(f"{where}.nodes: a mapping of node name to a PCI address -> rail mapping")
        out["nodes"] = {str(n): _pci_map(m, f"{where}.nodes[{n}]") for n, m in (nodes or {}).items()}
    return out


def _pattern(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise RailRuleError(f"{where}: a regular expression whose first group is the rail (got {value!r})")
    try:
        compiled = re.compile(value)
    except re.error as exc:
        raise RailRuleError(f"{where}: {value!r} is not a regular expression: {exc}") from exc
    if compiled.groups < 1:
        raise RailRuleError(f"{where}: {value!r} has no group; its first group is the rail (e.g. '^nic(\\d+)$')")
    return value


def _subnets(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not value or len(value) > MAX_RAILS:
        raise RailRuleError(f"{where}: a list of 1 to {MAX_RAILS} IPv4 networks, index = rail (got {value!r})")
    networks = []
    for index, text in enumerate(value):
        try:
            network = ipaddress.IPv4Network(str(text), strict=True)
        except ValueError as exc:
            raise RailRuleError(f"{where}[{index}]: {text!r} is not an IPv4 network: {exc}") from exc
        for other_index, other in enumerate(networks):
            if network.overlaps(other):
                raise RailRuleError(f"{where}[{index}]: {network} overlaps rail {other_index}'s {other}")
        networks.append(network)
    return [str(n) for n in networks]


def describe(rule: dict[str, Any]) -> str:
    """The rule in a few words, for messages: ``by netdev_name '^nic(\\d+)$'``."""
    by = rule["by"]
    if by == "netdev_name":
        return f"by netdev_name '{rule['pattern']}'"
    if by == "subnet":
        return f"by subnet ({len(rule['subnets'])} subnets)"
    return f"by {by}"


def rail_nics(topology: dict[str, Any]) -> list[dict[str, Any]]:
    """The node's RDMA NIC physical functions, by PCI address: the NICs a rule looks at."""
    found = [
        d
        for d in topology.get("devices") or []
        if d.get("kind") == "rdma" and not d.get("physfn") and d.get("pci_address")
    ]
    return sorted(found, key=lambda d: d["pci_address"])


def netdev_names(device: dict[str, Any]) -> list[str]:
    """The interface names of a probed device, as the rules and the driver's record read them."""
    return [n["name"] for n in device.get("netdevs") or [] if n.get("name")]


def _label(device: dict[str, Any]) -> str:
    return _entry_label({"pci_address": device["pci_address"], "netdevs": netdev_names(device)})


def _excluded(device: dict[str, Any], patterns: list[str]) -> bool:
    keys = [device["pci_address"], *netdev_names(device)]
    return any(fnmatch.fnmatchcase(key, pattern) for key in keys for pattern in patterns)


def _by_netdev_name(device: dict[str, Any], rule: dict[str, Any]) -> tuple[int | None, str]:
    compiled = re.compile(rule["pattern"])
    for name in netdev_names(device):
        found = compiled.fullmatch(name)
        if found:
            group = found.group(1)
            if group is None or not group.isdigit() or int(group) >= MAX_RAILS:
                return None, f"interface {name}: the pattern's first group {group!r} is not a rail number"
            return int(group), f"interface {name}"
    return None, "no interface name matches the pattern"


def _by_subnet(device: dict[str, Any], rule: dict[str, Any], addresses: dict[str, list[str]]) -> tuple[int | None, str]:
    networks = [ipaddress.IPv4Network(s) for s in rule["subnets"]]
    hits = []
    for name in netdev_names(device):
        for text in addresses.get(name) or []:
            try:
                address = ipaddress.IPv4Interface(text).ip
            except ValueError:
                continue
            hits.extend((rail, f"{name} {text}") for rail, net in enumerate(networks) if address in net)
    rails = sorted({rail for rail, _why in hits})
    if len(rails) > 1:
        seen = "; ".join(f"{why} (rail {rail})" for rail, why in hits)
        return None, f"addresses in the subnets of rails {rails}: {seen}"
    if rails:
        return rails[0], hits[0][1]
    return None, "no IPv4 address in a rail subnet"


def assign(
    topology: dict[str, Any],
    rule: dict[str, Any],
    node: str | None = None,
    addresses: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """The rails of one node's RDMA NICs under a checked rule (:func:`check_rule`).

    ``addresses`` maps interface names to IPv4 addresses with their prefix
    (``192.168.128.5/21``), as read on the node; ``None`` when they were not
    read (the ``subnet`` rule then places no NIC: each it would place is on
    :data:`UNKNOWN_RAIL`, and the one problem says why).

    Returns ``nics`` (every RDMA NIC PF: ``pci_address``, ``netdevs``,
    ``rail`` (a number, ``None`` for on no rail, or :data:`UNKNOWN_RAIL`),
    ``why``, and ``out_of_view: True`` for a NIC read as the driver last saw
    it, ``rail_record.with_last_seen``), ``rails`` (PCI address -> rail, VFs
    included) and ``problems``: what the validation refuses (a missing rail
    of ``count``, a rail given to two NICs, a rule or map entry that matches
    nothing), each naming the NIC and the rule.
    """
    by = rule["by"]
    nics = rail_nics(topology)
    rule_text = describe(rule)
    problems: list[str] = []
    entries = []
    placeable = [d for d in nics if not _excluded(d, rule["exclude"])]
    node_map: dict[str, int] = {}
    if by == "map":
        node_map = dict(rule["map"])
        node_map.update(rule["nodes"].get(node or "", {}))
        known = {d["pci_address"] for d in nics}
        problems.extend(
            f"{address}: not an RDMA NIC of this node (rule {rule_text}, entry {address}: {rail})"
            for address, rail in sorted(node_map.items())
            if address not in known
        )
    if by == "subnet" and addresses is None and placeable:
        # Said once; the rails the rule would have found are not counted missing on top.
        return {
            "nics": [
                _entry(d, None, "excluded by the rule")
                if _excluded(d, rule["exclude"])
                else _entry(d, UNKNOWN_RAIL, UNKNOWN_RAIL.why)
                for d in nics
            ],
            "rails": {},
            "problems": [f"rule {rule_text} needs the NICs' IPv4 addresses, and none were read on this node"],
        }
    order = {d["pci_address"]: index for index, d in enumerate(placeable)}
    for device in nics:
        rail: int | None = None
        if _excluded(device, rule["exclude"]):
            why = "excluded by the rule"
        elif by == "pci_order":
            rail, why = order[device["pci_address"]], f"PCI order {order[device['pci_address']]}"
        elif by == "netdev_name":
            rail, why = _by_netdev_name(device, rule)
        elif by == "subnet":
            rail, why = _by_subnet(device, rule, addresses or {})
        else:
            rail = node_map.get(device["pci_address"])
            why = "map entry" if rail is not None else "not in the map"
        if rail is not None and rule["count"] is not None and rail >= rule["count"]:
            problems.append(
                f"{_label(device)}: rail {rail} is outside count {rule['count']} "
                f"(rails 0 to {rule['count'] - 1}; rule {rule_text}, {why})"
            )
        elif rail is None and (why.startswith("addresses in the subnets") or why.endswith("is not a rail number")):
            problems.append(f"{_label(device)}: {why} (rule {rule_text})")
        entries.append(_entry(device, rail, why))
    problems.extend(_rail_problems(entries, rule, rule_text, bool(placeable)))
    return {"nics": entries, "rails": _with_vfs(topology, entries), "problems": problems}


def _entry(device: dict[str, Any], rail: int | UnknownRail | None, why: str) -> dict[str, Any]:
    entry = {"pci_address": device["pci_address"], "netdevs": netdev_names(device), "rail": rail, "why": why}
    if device.get("out_of_view"):
        # read as the driver last saw it on the host (rail_record.with_last_seen): said where the NIC is listed
        entry["out_of_view"] = True
    return entry


def _entry_label(entry: dict[str, Any]) -> str:
    return f"{entry['pci_address']} ({', '.join(entry['netdevs'])})" if entry["netdevs"] else entry["pci_address"]


def _rail_problems(entries: list[dict[str, Any]], rule: dict[str, Any], rule_text: str, placeable: bool) -> list[str]:
    problems = []
    holders: dict[int, list[dict[str, Any]]] = {}
    for entry in entries:
        if entry["rail"] is not None:
            holders.setdefault(entry["rail"], []).append(entry)
    for rail, held in sorted(holders.items()):
        if len(held) > 1:
            names = " and ".join(_entry_label(e) for e in held)
            problems.append(f"rail {rail} given to {len(held)} NICs: {names} (rule {rule_text})")
    if placeable and not holders:
        seen = ", ".join(_entry_label(e) for e in entries)
        problems.append(f"rule {rule_text} matches none of the RDMA NICs {seen}")
    if rule["count"] is not None:
        missing = [r for r in range(rule["count"]) if r not in holders]
        if missing:
            problems.append(
                f"rails {', '.join(map(str, missing))} of count {rule['count']}: no RDMA NIC is on them (rule {rule_text})"
            )
    return problems


def _with_vfs(topology: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, int]:
    rails = {e["pci_address"]: e["rail"] for e in entries if e["rail"] is not None}
    for device in topology.get("devices") or []:
        parent = device.get("physfn")
        if parent in rails and device.get("pci_address"):
            rails[device["pci_address"]] = rails[parent]
    return rails


def rule_for_node(document: dict[str, Any], node_name: str) -> dict[str, Any] | None:
    """The checked rule a ``--rails-file`` document gives a node, or ``None``; ValueError on a bad document."""
    if not isinstance(document, dict) or document.get("version") != RAILS_FILE_VERSION:
        raise ValueError(f"rails file: version {RAILS_FILE_VERSION} expected")
    rules, nodes = document.get("rules"), document.get("nodes")
    if not isinstance(rules, list) or not isinstance(nodes, dict):
        raise ValueError("rails file: 'rules' (a list) and 'nodes' (a mapping) expected")
    index = nodes.get(node_name)
    if index is None:
        return None
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(rules):
        raise ValueError(f"rails file: nodes[{node_name}] = {index!r} is not an index into rules")
    try:
        return check_rule(rules[index])
    except RailRuleError as exc:
        raise ValueError(f"rails file: rules[{index}]: {exc}") from exc
