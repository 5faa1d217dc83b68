# SPDX-License-Identifier: Apache-2.0
"""A site's rails, once on the controller: every node's rule read against its probe.

Each host's ``aligned_dra_rails`` (usually set once for the site's group) is
checked with ``node/topology/rails.check_rule`` and read against the host's
probe with ``node/topology/rails.assign``, the same code the driver runs on
the node, so the validation, ``summary.json``, the plan and the published
``dra.aligned.dev/rail`` cannot disagree.

:func:`host_rails` reads one host's rule against its probe: the validation
(``controller/site/validate_rails``), ``summary.json``
(``controller/topology/rails``) and the plan (``controller/planner/rails``)
all call it, so they apply one policy where rails cannot be known:

- a host that was not probed: its rails are unknown, the rule is checked for
  its shape only;
- a ``subnet`` rule on a probe that read no addresses (a captured tree,
  ``netdev_addresses: null``): the NICs the rule would place are on an
  *unknown* rail (``rail: null``, ``unknown: true``, why ``addresses not
  read``), never on none, and that is not a problem the validation refuses;
  :data:`ADDRESSES_NOT_READ` says so in the same words everywhere.

:func:`site_rails` gives every host's NICs and rails and every problem the
validation refuses (naming host, NIC and rule); :func:`rails_file` is the one
file the driver gets for the whole site (``--rails-file``): the distinct
rules, and each node's index into them (read on the node by
``node/topology/rails.rule_for_node``).
"""

from __future__ import annotations

import json

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import rails as node_rails

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

RAILS_FILE_VERSION = node_rails.RAILS_FILE_VERSION
# node_rails.assign's reason for a NIC the subnet rule cannot place without addresses
NOT_READ_WHY = "addresses not read"
ADDRESSES_NOT_READ = (
    "rails unknown: rule {rule} places NICs by their IPv4 addresses, and none were read on this node (a captured tree)"
)


def check_rules(rules: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """``({host: checked rule}, problems)`` for every host that sets ``aligned_dra_rails``."""
    checked: dict[str, dict[str, Any]] = {}
    problems = []
    for host in sorted(rules):
        rule = rules[host]
        if rule is None or rule == {}:
            continue
        try:
            checked[host] = node_rails.check_rule(rule)
        except node_rails.RailRuleError as exc:
            problems.append(f"{host}: {exc}")
    return checked, problems


def nic_unknown(nic: Mapping[str, Any]) -> bool:
    """Whether a NIC's rail is unknown (not none); also for a ``summary.json`` written before the flag."""
    if nic.get("rail") is not None:
        return False
    return bool(nic.get("unknown")) or nic.get("why") == NOT_READ_WHY


def host_rails(
    host: str, rule: Any, node_name: str | None, topology: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """One host's rails under its ``aligned_dra_rails``; ``None`` without a rule (set to null or ``{}``).

    ``node_name`` is the Kubernetes node name a per-node map is keyed by
    (default ``host``); ``topology`` the probe result (``None``: not probed),
    whose ``netdev_addresses`` the ``subnet`` rule reads.

    Returns ``rule`` (checked, ``None`` when malformed), ``node_name``,
    ``nics`` (every RDMA NIC PF: ``pci_address``, ``netdevs``, ``rail`` or
    ``None``, ``why``, ``unknown``), ``rails`` (PCI address -> rail, VFs
    included), ``problems`` (what the validation refuses, without the host
    prefix) and ``unknown`` (why the rails are unknown, or ``None``): not
    probed, or a ``subnet`` rule without addresses (:data:`ADDRESSES_NOT_READ`).
    """
    if rule is None or rule == {}:
        return None
    node_name = node_name or host
    try:
        checked = node_rails.check_rule(rule)
    except node_rails.RailRuleError as exc:
        return {"rule": None, "node_name": node_name, "nics": [], "rails": {}, "problems": [str(exc)], "unknown": None}
    if topology is None:
        unknown = "rails unknown: the node was not probed in this run"
        return {"rule": checked, "node_name": node_name, "nics": [], "rails": {}, "problems": [], "unknown": unknown}
    addresses = topology.get("netdev_addresses")
    addresses = addresses if isinstance(addresses, dict) else None
    result = node_rails.assign(dict(topology), checked, node_name, addresses)
    nics = [dict(nic, unknown=False) for nic in result["nics"]]
    problems = list(result["problems"])
    unknown = None
    if checked["by"] == "subnet" and addresses is None:
        # assign said "needs the addresses" as its one problem; here that is unknown, not wrong
        for nic in nics:
            nic["unknown"] = nic["rail"] is None and nic["why"] == NOT_READ_WHY
        if any(nic["unknown"] for nic in nics):
            problems = []
            unknown = ADDRESSES_NOT_READ.format(rule=node_rails.describe(checked))
    return {
        "rule": checked,
        "node_name": node_name,
        "nics": nics,
        "rails": dict(result["rails"]),
        "problems": problems,
        "unknown": unknown,
    }


def site_rails(hosts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Every host's rails (:func:`host_rails`).

    ``hosts`` maps inventory host to ``rule`` (``aligned_dra_rails`` as set,
    or ``None``), ``node_name`` (the Kubernetes node name; default the host)
    and ``topology`` (the probe result, or ``None`` when the host was not
    probed; the ``subnet`` rule reads its ``netdev_addresses``).

    Returns ``hosts`` (host -> :func:`host_rails`) for hosts with a
    well-formed rule and a probe, and ``problems``: every host's, prefixed
    with the host name. A host with a rule and no probe is left out: its
    rails are unknown, not none.
    """
    found: dict[str, dict[str, Any]] = {}
    problems = []
    for host in sorted(hosts):
        values = hosts[host]
        entry = host_rails(host, values.get("rule"), values.get("node_name"), values.get("topology"))
        if entry is None:
            continue
        problems.extend(f"{host}: {problem}" for problem in entry["problems"])
        if entry["rule"] is not None and values.get("topology") is not None:
            found[host] = entry
    return {"hosts": found, "problems": problems}


def rails_file(rules: Mapping[str, Mapping[str, Any]], node_names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The driver's ``--rails-file`` for a site: ``{"version", "rules", "nodes": {node name: index}}``.

    ``rules`` maps host to its ``aligned_dra_rails``; ``node_names`` maps host
    to its Kubernetes node name where they differ. Hosts without a rule are
    left out (their driver publishes no rail). Raises
    :class:`node_rails.RailRuleError` (prefixed with the host) on a bad rule.
    """
    checked, problems = check_rules(rules)
    if problems:
        raise node_rails.RailRuleError("; ".join(problems))
    distinct: list[dict[str, Any]] = []
    index_of: dict[str, int] = {}
    nodes: dict[str, int] = {}
    for host in sorted(checked):
        key = json.dumps(checked[host], sort_keys=True)
        if key not in index_of:
            index_of[key] = len(distinct)
            distinct.append(checked[host])
        nodes[(node_names or {}).get(host) or host] = index_of[key]
    return {"version": RAILS_FILE_VERSION, "rules": distinct, "nodes": dict(sorted(nodes.items()))}
