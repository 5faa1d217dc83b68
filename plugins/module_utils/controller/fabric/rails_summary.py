# SPDX-License-Identifier: Apache-2.0
"""The rails' summary view: a node's and a site's rails as ``summary.json``, ``summary.md`` and the report show them.

Each node's ``aligned_dra_rails`` is read against its probe by
:func:`controller.fabric.rails.host_rails`, the code the validation stage and
the plan use, so the summary shows the rails the validation checked and the
driver publishes. A node without a rule has no rails (``None``): no NIC of it
is on a rail, and nothing says otherwise. A NIC whose rail cannot be known
here (a ``subnet`` rule on a captured tree) is on an unknown rail, never shown
as on none.

Controller-side; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.fabric import rails as fabric_rails
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import rails as rail_rule

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any


def node_rails_summary(topology: Mapping[str, Any], rule: Any, node_name: str) -> dict[str, Any] | None:
    """The rails of one probed node under its ``aligned_dra_rails`` as its summary shows them; ``None`` without a rule.

    ``node_name`` is its Kubernetes node name (a per-node map is keyed by it).

    Returns ``rule`` (the rule in a few words, ``None`` when it is malformed),
    ``count``, ``nics`` (every RDMA NIC physical function: ``pci_address``,
    ``netdevs``, ``rail`` or ``None``, ``why``, ``unknown``) and ``problems``
    (what the validation refuses). Read by :func:`fabric_rails.host_rails`:
    a ``subnet`` rule on a probe without addresses (a captured tree) leaves
    its NICs on an unknown rail (``rail: null``, ``unknown: true`` and the
    reason), which is no problem.
    """
    # an empty probe is a node without NICs, not an unknown one
    entry = fabric_rails.host_rails(node_name, rule, node_name, topology or {"devices": []})
    if entry is None:
        return None
    if entry["rule"] is None:
        return {"rule": None, "count": None, "nics": [], "problems": entry["problems"]}
    return {
        "rule": rail_rule.describe(entry["rule"]),
        "count": entry["rule"]["count"],
        "nics": [dict(nic) for nic in entry["nics"]],
        "problems": entry["problems"],
    }


def site_rails_summary(nodes: Iterable[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """A site's rails from its nodes' :func:`node_rails_summary`; ``None`` when no node has a rule.

    ``nodes``: the nodes with a rule; ``per_rail``: RDMA NICs per rail (string
    keys, numeric order); ``on_no_rail``: RDMA NICs of those nodes on no rail;
    ``unknown``: those whose rail is unknown (:func:`fabric_rails.nic_unknown`),
    never counted on no rail.
    """
    entries = [entry for entry in nodes if entry is not None]
    if not entries:
        return None
    per_rail: dict[int, int] = {}
    on_no_rail = 0
    unknown = 0
    for entry in entries:
        for nic in entry["nics"]:
            if nic["rail"] is not None:
                per_rail[nic["rail"]] = per_rail.get(nic["rail"], 0) + 1
            elif fabric_rails.nic_unknown(nic):
                unknown += 1
            else:
                on_no_rail += 1
    return {
        "nodes": len(entries),
        "per_rail": {str(rail): per_rail[rail] for rail in sorted(per_rail)},
        "on_no_rail": on_no_rail,
        "unknown": unknown,
    }


def nic_rail_text(nic: Mapping[str, Any]) -> str:
    """``rail 3``, ``rail unknown (addresses not read)`` or ``on no rail (excluded by the rule)``."""
    why = nic.get("why") or "no reason given"
    if nic.get("rail") is not None:
        return f"rail {nic['rail']}"
    return f"rail unknown ({why})" if fabric_rails.nic_unknown(nic) else f"on no rail ({why})"


def nic_label(nic: Mapping[str, Any]) -> str:
    """``0000:1d:00.0 (ibp29s0)``: a NIC as the rails' messages name it."""
    names = ", ".join(nic.get("netdevs") or [])
    return f"{nic['pci_address']} ({names})" if names else str(nic["pci_address"])


def rails_in_short(entry: Mapping[str, Any] | None) -> str:
    """One node's rails in a few words: ``rails 0-7, 2 on no rail``, ``8 rails unknown``; ``-`` without a rule."""
    if entry is None:
        return "-"
    if entry["rule"] is None:
        return "rule not readable"
    nics = entry["nics"]
    rails = sorted(nic["rail"] for nic in nics if nic["rail"] is not None)
    unknown = sum(1 for nic in nics if fabric_rails.nic_unknown(nic))
    off = sum(1 for nic in nics if nic["rail"] is None) - unknown
    parts = []
    if rails:
        parts.append(_ranges(rails))
    elif not unknown:
        parts.append("no NIC on a rail")
    if unknown:
        parts.append(f"{unknown} {'rail' if unknown == 1 else 'rails'} unknown")
    if off:
        parts.append(f"{off} on no rail")
    return ", ".join(parts)


def _ranges(rails: list[int]) -> str:
    """``rails 0-7`` / ``rail 2`` / ``rails 0, 2-3`` (a rail given twice is listed once)."""
    distinct = sorted(set(rails))
    spans: list[list[int]] = []
    for rail in distinct:
        if spans and rail == spans[-1][1] + 1:
            spans[-1][1] = rail
        else:
            spans.append([rail, rail])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
    return f"rail {text}" if len(distinct) == 1 else f"rails {text}"
