# SPDX-License-Identifier: Apache-2.0
"""The rails' plan view: which rail each allocated NIC is on, and how many claims fit per rail.

A NIC's rail is what the bundled driver publishes (``dra.aligned.dev/rail``),
or, for other drivers' NICs joined to the probe, what the site's rule gives
the probed function (``device_model.device_rail``; the node's rule is read
here, with the code the driver and the validation run:
``controller/fabric/rails``). The plan gives each allocation ``rails`` (the
rail of each of its NICs, ``None`` where unknown), and each node and template
pinned to rails (:func:`pinned_to_rails`: the claims role's rail templates)
``fits_per_rail``: per rail of the site, the claims that fit with a NIC on
it. A template that does not pin its rails gets ``None``: its allocations'
rails are the planner's picks, and the scheduler may pick NICs on other
rails, so a count per rail would not be what a job can have.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims.rails import RAILS_ANNOTATION
from ansible_collections.aligned.dra.plugins.module_utils.controller.fabric import rails as fabric_rails
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.consumption import PlanError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any


def node_rules(
    nodes: Iterable[str], rules: Mapping[str, Any] | None, rule: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """``{node: rule}`` for the planned ``nodes``: ``rules`` per node, ``rule`` for the nodes it leaves out.

    Every rule is checked first; a malformed one raises :class:`PlanError`
    naming ``rail_rules.<node>`` (or ``rail_rule``) and the field.
    """
    rules = dict(rules or {})
    if rule:
        _checked({"rail_rule": rule}, "")
    _checked(rules, "rail_rules.")
    found = {}
    for node in nodes:
        given = rules.get(node, rule)
        if given:
            found[node] = given
    return found


def _checked(rules: Mapping[str, Any], prefix: str) -> None:
    _checked_rules, problems = fabric_rails.check_rules(rules)
    if problems:
        raise PlanError("; ".join(prefix + problem for problem in problems))


def node_rails(
    node: str,
    topology: Mapping[str, Any] | None,
    rule: Mapping[str, Any] | None,
    node_name: str | None = None,
    addresses: Mapping[str, list[str]] | None = None,
) -> tuple[dict[str, int], list[str]]:
    """``({PCI address: rail}, warnings)`` of one node under its rule (VFs included).

    Read by :func:`fabric_rails.host_rails`, as the validation and
    ``summary.json`` read it. ``addresses`` (interface -> IPv4 addresses, for
    the ``subnet`` rule) replace the topology's ``netdev_addresses``, read by
    the probe on the live node. The warnings, each prefixed with the node,
    are the validation stage's problems (a missing rail of ``count``, a rail
    on two NICs...) and why the rails are unknown where they are (a
    ``subnet`` rule on a captured tree: those NICs' rails in the plan are
    ``None``, unknown).
    """
    if not rule or not topology:
        return {}, []
    if addresses is not None:
        topology = dict(topology, netdev_addresses=dict(addresses))
    entry = fabric_rails.host_rails(node, rule, node_name or node, topology)
    if entry is None:
        return {}, []
    notes = [*entry["problems"], *([entry["unknown"]] if entry["unknown"] else [])]
    return dict(entry["rails"]), [f"{node}: {note}" for note in notes]


def pinned_to_rails(template: Mapping[str, Any]) -> bool:
    """Whether a claim template (or ResourceClaim) is pinned to rails: it carries ``aligned.dev/rails``.

    The claims role puts the annotation on every rail template, whose requests
    select each NIC by its rail, so every claim of it is on those rails
    whichever NICs the scheduler picks.
    """
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(RAILS_ANNOTATION) if isinstance(annotations, dict) else None
    return isinstance(value, str) and bool(value.strip())


def allocation_rails(devices: Iterable[Any]) -> list[int | None]:
    """The rail of each NIC (and VF) of an allocation, in its order; ``None`` where unknown."""
    return [d.rail for d in devices if d.join["role"] == "nic"]


def fits_per_rail(allocations: Iterable[Mapping[str, Any]], rails: Iterable[int]) -> dict[str, int]:
    """``{"<rail>": claims}``: per rail, the allocations with a NIC on it (a claim on two rails counts on both)."""
    counts = {rail: 0 for rail in rails}
    for allocation in allocations:
        for rail in {r for r in allocation.get("rails") or () if r is not None}:
            if rail in counts:
                counts[rail] += 1
    return {str(rail): counts[rail] for rail in sorted(counts)}


def site_fits_per_rail(
    results: Iterable[Mapping[str, Any]], rails: Iterable[int], cap: int | None = None
) -> dict[str, int]:
    """The sum of the nodes' ``fits_per_rail`` over the site's ``rails`` (at most ``cap`` each: a shared claim)."""
    totals = {str(rail): 0 for rail in sorted(rails)}
    for result in results:
        for rail, count in (result.get("fits_per_rail") or {}).items():
            if rail in totals:
                totals[rail] += count
    if cap is not None:
        totals = {rail: min(count, cap) for rail, count in totals.items()}
    return totals
