# SPDX-License-Identifier: Apache-2.0
"""A site's rails on the controller, the one entry: every host's rule read against its probe.

Each host's ``aligned_dra_rails`` (usually set once for the site's group) is
checked with ``node/topology/rails.check_rule`` and read against the host's
probe with ``node/topology/rails.assign``, the same code the driver runs on
the node, so the validation, ``summary.json``, the plan and the published
``dra.aligned.dev/rail`` cannot disagree.

:func:`host_rails` reads one host's rule against its probe, and every view
of the rails calls it: the validation (``controller/validation/validate_rails``),
``summary.json``, ``summary.md`` and the report
(``controller/fabric/rails_summary``) and the plan
(``controller/planner/rails``). The rail templates (``controller/claims/rails``)
need only the checked rules (:func:`check_rules`). So all of them apply one
policy where rails cannot be known:

- a host that was not probed: its rails are unknown, the rule is checked for
  its shape only;
- a ``subnet`` rule on a probe that read no addresses (a captured tree,
  ``netdev_addresses: null``): the NICs the rule would place are on
  ``node/topology/rails.UNKNOWN_RAIL``, shown as ``rail: null``,
  ``unknown: true`` and its reason (:func:`nic_unknown` reads it back), never
  on none, and that is not a problem the validation refuses;
  :data:`UNKNOWN_RAILS_NOTE` says so in the same words everywhere.

:func:`rails_file` is the one file the driver gets for the whole site
(``--rails-file``): the distinct rules, and each node's index into them (read
on the node by ``node/topology/rails.rule_for_node``).
"""

from __future__ import annotations

import json

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import rails as rail_rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

RAILS_FILE_VERSION = rail_rule.RAILS_FILE_VERSION
UNKNOWN_RAILS_NOTE = (
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
            checked[host] = rail_rule.check_rule(rule)
        except rail_rule.RailRuleError as exc:
            problems.append(f"{host}: {exc}")
    return checked, problems


def nic_unknown(nic: Mapping[str, Any]) -> bool:
    """Whether a NIC of :func:`host_rails` (as ``summary.json`` has it) is on an unknown rail, not on none.

    A ``summary.json`` written before the ``unknown`` flag says so only by the
    unknown rail's reason.
    """
    if nic.get("rail") is not None:
        return False
    return bool(nic.get("unknown")) or nic.get("why") == rail_rule.UNKNOWN_RAIL.why


def host_rails(
    host: str, rule: Any, node_name: str | None, topology: Mapping[str, Any] | None
) -> dict[str, Any] | None:
    """One host's rails under its ``aligned_dra_rails``; ``None`` without a rule (set to null or ``{}``).

    ``node_name`` is the Kubernetes node name a per-node map is keyed by
    (default ``host``; ``controller/inputs/site.kubernetes_node_name``);
    ``topology`` the probe result (``None``: not probed), whose
    ``netdev_addresses`` the ``subnet`` rule reads.

    Returns ``rule`` (checked, ``None`` when malformed), ``node_name``,
    ``nics`` (every RDMA NIC PF: ``pci_address``, ``netdevs``, ``rail`` or
    ``None``, ``why``, ``unknown``: ``True`` for a NIC on
    ``node/topology/rails.UNKNOWN_RAIL``, whose ``rail`` is ``None`` here),
    ``rails`` (PCI address -> rail, VFs included), ``problems`` (what the
    validation refuses, without the host prefix) and ``unknown`` (why the
    rails are unknown, or ``None``): not probed, or a ``subnet`` rule without
    addresses (:data:`UNKNOWN_RAILS_NOTE`).
    """
    if rule is None or rule == {}:
        return None
    node_name = node_name or host
    try:
        checked = rail_rule.check_rule(rule)
    except rail_rule.RailRuleError as exc:
        return {"rule": None, "node_name": node_name, "nics": [], "rails": {}, "problems": [str(exc)], "unknown": None}
    if topology is None:
        unknown = "rails unknown: the node was not probed in this run"
        return {"rule": checked, "node_name": node_name, "nics": [], "rails": {}, "problems": [], "unknown": unknown}
    addresses = topology.get("netdev_addresses")
    addresses = addresses if isinstance(addresses, dict) else None
    result = rail_rule.assign(dict(topology), checked, node_name, addresses)
    # as summary.json shows it: an unknown rail is null, with the flag
    nics = [
        dict(nic, rail=None, unknown=True) if nic["rail"] is rail_rule.UNKNOWN_RAIL else dict(nic, unknown=False)
        for nic in result["nics"]
    ]
    problems = list(result["problems"])
    unknown = None
    if any(nic["unknown"] for nic in nics):
        # assign said "needs the addresses" as its one problem; here that is unknown, not wrong
        problems = []
        unknown = UNKNOWN_RAILS_NOTE.format(rule=rail_rule.describe(checked))
    return {
        "rule": checked,
        "node_name": node_name,
        "nics": nics,
        "rails": dict(result["rails"]),
        "problems": problems,
        "unknown": unknown,
    }


def rails_file(rules: Mapping[str, Mapping[str, Any]], node_names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The driver's ``--rails-file`` for a site: ``{"version", "rules", "nodes": {node name: index}}``.

    ``rules`` maps host to its ``aligned_dra_rails``; ``node_names`` maps host
    to its Kubernetes node name where they differ. Hosts without a rule are
    left out (their driver publishes no rail). Raises
    :class:`rail_rule.RailRuleError` (prefixed with the host) on a bad rule.
    """
    checked, problems = check_rules(rules)
    if problems:
        raise rail_rule.RailRuleError("; ".join(problems))
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
