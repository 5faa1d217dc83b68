# SPDX-License-Identifier: Apache-2.0
"""A site's rails, once on the controller: every node's rule read against its probe.

Each host's ``aligned_dra_rails`` (usually set once for the site's group) is
checked with ``node/topology/rails.check_rule`` and read against the host's
probe with ``node/topology/rails.assign``, the same code the driver runs on
the node, so the validation, ``summary.json``, the plan and the published
``dra.aligned.dev/rail`` cannot disagree.

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


def site_rails(hosts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Every host's rails.

    ``hosts`` maps inventory host to ``rule`` (``aligned_dra_rails`` as set,
    or ``None``), ``node_name`` (the Kubernetes node name; default the host),
    ``topology`` (the probe result, or ``None`` when the host was not probed)
    and ``addresses`` (interface -> IPv4 addresses read on the node, or
    ``None``).

    Returns ``hosts`` (host -> ``rule``, ``node_name``, ``nics``, ``rails``
    (PCI address -> rail, VFs included), ``problems``) for hosts with a rule
    and a probe, and ``problems``: every host's, prefixed with the host name.
    A host with a rule and no probe is left out: its rails are unknown, not none.
    """
    checked, problems = check_rules({host: values.get("rule") for host, values in hosts.items()})
    found: dict[str, dict[str, Any]] = {}
    for host, rule in checked.items():
        values = hosts[host]
        topology = values.get("topology")
        if not topology:
            continue
        node_name = values.get("node_name") or host
        result = node_rails.assign(topology, rule, node_name, values.get("addresses"))
        found[host] = {"rule": rule, "node_name": node_name, **result}
        problems.extend(f"{host}: {problem}" for problem in result["problems"])
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
