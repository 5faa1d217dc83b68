# SPDX-License-Identifier: Apache-2.0
"""What every form of the placement levels shares: the variables' names, the error, a host's problem, the wording.

The inventory form (:mod:`controller.domains.levels`), the source and preset
forms (:mod:`controller.domains.level_specs`) and each node's domains read
from the cluster (:mod:`controller.domains.sources`) raise :class:`PlacementError`
and report :class:`HostProblem` alike, check a level's name and node label
with :func:`check_name_label`, and say values and hosts the same way
(:func:`shown`, :func:`who`, :func:`group_problems`). Below all three, so
none imports another to reach them.

Controller-side; no Ansible imports.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs.site import NODE_NAME_VARIABLE
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import SITE_LABEL, is_label_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

LEVELS_VARIABLE = "aligned_dra_placement_levels"
PLACEMENT_VARIABLE = "aligned_dra_placement"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# Kueue's Topology takes at most 16 levels (spec.levels maxItems); the hostname is the last one.
MAX_LEVELS = 15
_HOSTS_SHOWN = 3
_VALUE_WIDTH = 80


class PlacementError(ValueError):
    """Placement input that cannot be used; the message names the field."""


@dataclass(frozen=True, order=True)
class HostProblem:
    """One wrong placement input of one host: the field (``aligned_dra_placement.rack``), its value, why."""

    host: str
    field: str
    value: str
    reason: str


def closest(name: object, known: Iterable[str]) -> str | None:
    """The known name closest to ``name``, if one is close enough."""
    if not isinstance(name, str):
        return None
    found = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(name: object, known: Iterable[str]) -> str:
    """``"; did you mean x?"`` or nothing."""
    close = closest(name, known)
    return f"; did you mean {close}?" if close else ""


def check_name_label(at: str, name: Any, label: Any, names: Mapping[str, int], labels: Mapping[str, int]) -> None:
    """Level ``at``'s name (a DNS label) and node label key, neither used by an earlier level (``names``,
    ``labels``: ``{name or label: index}``); raises :class:`PlacementError` naming the field."""
    if not dra.is_dns_label(name):
        raise PlacementError(f"{at}.name: {name!r} is not a DNS label (lower-case letters, digits and '-', at most 63)")
    if name in names:
        raise PlacementError(f"{at}.name: {name!r} is also the name of level {names[name]}")
    if not isinstance(label, str) or not is_label_name(label):
        raise PlacementError(
            f"{at}.label: {label!r} is not a label key ([DNS subdomain/]name, the name at most 63 "
            "letters, digits, '-', '_' or '.')"
        )
    if label == HOSTNAME_LABEL:
        raise PlacementError(f"{at}.label: {HOSTNAME_LABEL} is the implied last level; leave it out")
    if label == SITE_LABEL:
        raise PlacementError(f"{at}.label: {SITE_LABEL} is set by the collection (the node's site)")
    if label in labels:
        raise PlacementError(f"{at}.label: {label!r} is also the label of level {labels[label]}")


def shown(value: Any) -> str:
    """A value as messages (and :mod:`sources`') write it: JSON, cut to one short line."""
    try:
        text = json.dumps(value, sort_keys=True, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= _VALUE_WIDTH else text[: _VALUE_WIDTH - 3] + "..."


def who(hosts: list[str]) -> str:
    """Hosts as a message names them: one by name, many with the count."""
    if len(hosts) == 1:
        return f"host {hosts[0]}"
    more = f" and {len(hosts) - _HOSTS_SHOWN} more" if len(hosts) > _HOSTS_SHOWN else ""
    return f"{len(hosts)} hosts ({', '.join(hosts[:_HOSTS_SHOWN])}{more})"


def group_problems(problems: Iterable[HostProblem]) -> list[str]:
    """Problems as sentences, the same problem on many hosts said once with the host count."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for problem in sorted(set(problems)):
        grouped.setdefault((problem.field, problem.value, problem.reason), []).append(problem.host)
    return sorted(f"{who(hosts)}: {field} = {value}: {reason}" for (field, value, reason), hosts in grouped.items())


def node_name_problems(node_names: Mapping[str, str]) -> list[HostProblem]:
    """Hosts that are one Kubernetes node: their labels would be applied to one Node twice."""
    by_node: dict[str, list[str]] = {}
    for host, node in node_names.items():
        by_node.setdefault(node, []).append(host)
    problems = []
    for node, hosts in sorted(by_node.items()):
        if len(hosts) > 1:
            reason = f"{who(sorted(hosts))} are all Kubernetes node {node}; one host per node"
            problems += [HostProblem(host, NODE_NAME_VARIABLE, shown(node), reason) for host in hosts]
    return problems
