# SPDX-License-Identifier: Apache-2.0
"""Placement levels of a site from the inventory: checked, per host, as node labels and as a tree.

A site declares its levels widest first in ``aligned_dra_placement_levels``
(``[{name: block, label: aligned.dev/block}, {name: rack, label: aligned.dev/rack}]``)
and each node its domain at every level in ``aligned_dra_placement``
(``{block: b1, rack: r07}``). ``kubernetes.io/hostname`` is the implied last
level, so it may not be declared.

- :func:`check_levels` checks and normalises the levels (raises
  :class:`PlacementError` naming the field);
- :func:`site_placement` reads every host's domains into the site placement the
  planner, the job objects and the report share, with every problem found: a
  host without a domain at a level, a level the site does not declare, a domain
  that is not a label value, a domain that sits in two domains of the level
  above (``r07`` in block ``b1`` and in block ``b2``: domain names are unique
  site-wide at their level), a placement on a site without levels, and two
  hosts on one Kubernetes node;
- :func:`node_label_objects` turns a placement into one server-side apply
  configuration per node holding only the level labels (and the site label
  Kueue's flavors select), so a field manager that applies them owns exactly
  those keys: a level removed from the inventory leaves its key out, and the
  apply removes the label; other labels are never touched;
- :func:`domain_tree` gives, per level, each domain with its parent and hosts.

Levels read from what the cluster publishes (node labels, DRA device
attributes) or named by a provider's preset take other forms
(:func:`is_sourced`): :mod:`controller.domains.level_specs` checks them and
:mod:`controller.domains.sources` reads each node's domains into the same
site placement; :func:`check_levels` and :func:`site_placement` hand them on,
and :func:`node_labels` writes no label the cluster already has.

Controller-side; no Ansible imports.
"""

from __future__ import annotations

import re

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import level_specs, sources
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.level_specs import PRESET_KEYS, SOURCE_KEYS
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.shared import (
    HOSTNAME_LABEL,
    LEVELS_VARIABLE,
    MAX_LEVELS,
    PLACEMENT_VARIABLE,
    HostProblem,
    PlacementError,
    check_name_label,
    did_you_mean,
    group_problems,
    node_name_problems,
    shown,
    who,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import SITE_LABEL, label_value_problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

LEVEL_KEYS = ("name", "label")


def is_sourced(levels: Any) -> bool:
    """Whether ``levels`` take the preset form (a mapping with :data:`PRESET_KEYS`) or name a ``source``.

    Such levels are checked by :func:`level_specs.check_level_specs`; the
    inventory form (``[{name, label}]``) stays with this module unchanged.
    """
    if isinstance(levels, dict):
        return any(key in levels for key in PRESET_KEYS)
    return isinstance(levels, list) and any(
        isinstance(level, dict) and any(key in level for key in SOURCE_KEYS) for level in levels
    )


def check_levels(levels: Any, where: str = LEVELS_VARIABLE) -> list[dict[str, str]]:
    """The site's levels, widest first, as ``[{"name", "label"}]``; raises :class:`PlacementError`.

    ``None`` is no levels. Each name is a DNS label and each label a label key,
    both unique; ``kubernetes.io/hostname`` (the implied last level) and
    :data:`SITE_LABEL` (the collection sets it) are refused, and so are
    more than :data:`MAX_LEVELS` levels. Levels in the preset form or with
    a ``source`` (:func:`is_sourced`) are checked by
    :func:`level_specs.check_level_specs` and come back in the same shape,
    ``label`` being the key the schedulers read (the cluster's own for a
    level read from a node label).
    """
    if levels is None:
        return []
    if is_sourced(levels):
        return level_specs.levels_of(level_specs.check_level_specs(levels, where))
    if not isinstance(levels, list):
        raise PlacementError(
            f"{where}: must be a list of {{name, label}}, widest level first (got {type(levels).__name__})"
        )
    if len(levels) > MAX_LEVELS:
        raise PlacementError(
            f"{where}: {len(levels)} levels; at most {MAX_LEVELS} (Kueue's Topology takes 16 with "
            f"{HOSTNAME_LABEL}, the implied last level)"
        )
    out: list[dict[str, str]] = []
    names: dict[str, int] = {}
    labels: dict[str, int] = {}
    for index, level in enumerate(levels):
        at = f"{where}[{index}]"
        if not isinstance(level, dict):
            raise PlacementError(f"{at}: must be a mapping with name and label (got {type(level).__name__})")
        unknown = sorted(set(level) - set(LEVEL_KEYS), key=str)
        if unknown:
            hint = did_you_mean(unknown[0], LEVEL_KEYS)
            raise PlacementError(f"{at}: unknown key {unknown[0]!r}{hint} (known: name, label)")
        name, label = level.get("name"), level.get("label")
        check_name_label(at, name, label, names, labels)
        names[name] = labels[label] = index
        out.append({"name": name, "label": label})
    return out


def site_label_problem(site: str) -> str | None:
    """Why the site name cannot be the value of :data:`SITE_LABEL`, or None."""
    problem = label_value_problem(site)
    return (
        None if problem is None else f"site name {problem}; nodes of a site with placement levels carry it as a label"
    )


# -- a site's placement ------------------------------------------------------------------------


def placement_problems(
    levels: list[dict[str, str]], per_host: Mapping[str, Any]
) -> tuple[dict[str, dict[str, str | None]], list[HostProblem]]:
    """``(domains, problems)``: each host's valid domain per level (None where not), and every problem.

    ``levels`` are checked ones (:func:`check_levels`).
    """
    names = [level["name"] for level in levels]
    listed = ", ".join(names)
    domains: dict[str, dict[str, str | None]] = {}
    problems: list[HostProblem] = []
    for host in sorted(per_host):
        raw = per_host[host]
        row: dict[str, str | None] = dict.fromkeys(names)
        domains[host] = row
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            problems.append(
                HostProblem(host, PLACEMENT_VARIABLE, shown(raw), "must map each level name to the host's domain")
            )
            continue
        if raw and not names:
            problems.append(
                HostProblem(
                    host,
                    PLACEMENT_VARIABLE,
                    shown(raw),
                    f"the site declares no levels ({LEVELS_VARIABLE}); set them in the site's group_vars",
                )
            )
            continue
        for key in sorted(set(raw) - set(names), key=str):
            field = f"{PLACEMENT_VARIABLE}.{key}"
            hint = did_you_mean(key, names)
            problems.append(
                HostProblem(
                    host, field, shown(raw[key]), f"the site declares no level {key!r}{hint} (levels: {listed})"
                )
            )
        for name in names:
            field = f"{PLACEMENT_VARIABLE}.{name}"
            if name not in raw or raw[name] is None:
                problems.append(
                    HostProblem(
                        host, field, "(not set)", f"every host needs a domain at every level (levels: {listed})"
                    )
                )
                continue
            problem = label_value_problem(raw[name])
            if problem:
                problems.append(HostProblem(host, field, shown(raw[name]), problem))
                continue
            row[name] = raw[name]
    problems += _nesting_problems(names, domains)
    return domains, problems


def _nesting_problems(names: list[str], domains: dict[str, dict[str, str | None]]) -> list[HostProblem]:
    """A domain inside two domains of the level above: said for each of its hosts."""
    problems = []
    for upper, lower in zip(names, names[1:]):
        parents: dict[str, dict[str, list[str]]] = {}
        for host, row in domains.items():
            if row[upper] is not None and row[lower] is not None:
                parents.setdefault(row[lower], {}).setdefault(row[upper], []).append(host)
        for domain, by_parent in sorted(parents.items()):
            if len(by_parent) < 2:
                continue
            where = " and ".join(f"{upper} {parent} ({who(hosts)})" for parent, hosts in sorted(by_parent.items()))
            reason = f"{lower} {domain} is in {where}; a domain sits inside one domain of the level above"
            for hosts in by_parent.values():
                field = f"{PLACEMENT_VARIABLE}.{lower}"
                problems += [HostProblem(host, field, shown(domain), reason) for host in hosts]
    return problems


def site_placement(
    levels: Any,
    per_host: Mapping[str, Any],
    node_names: Mapping[str, str],
    nodes: Any = None,
    slices: Any = None,
) -> tuple[dict[str, Any], list[str]]:
    """The site placement of the hosts of ``per_host`` (``{host: its aligned_dra_placement}``), and its problems.

    Returns ``({"levels", "domains", "node_names"}, problems)``: ``levels`` as
    :func:`check_levels` gives them (which raises :class:`PlacementError` for
    bad levels), ``domains`` ``{host: {level: domain}}`` for every host and
    level (None where the host's domain is missing or invalid: then a problem
    says why), ``node_names`` ``{host: Kubernetes node name}`` (the host where
    ``node_names`` has none). ``problems`` are sentences naming host(s), level
    and value; empty when the placement may be used.

    Levels read from the cluster (:func:`is_sourced`) are read by
    :func:`sources.sourced_placement` from ``nodes`` and ``slices`` (the
    cluster's Node and ResourceSlice objects); the placement then also has
    ``sources``, which :func:`node_labels` reads.
    """
    if is_sourced(levels):
        return sources.sourced_placement(levels, per_host, node_names, nodes, slices)
    checked = check_levels(levels)
    domains, found = placement_problems(checked, per_host)
    names = {host: str(node_names.get(host) or host) for host in domains}
    if checked:
        found += node_name_problems(names)
    return {"levels": checked, "domains": domains, "node_names": names}, group_problems(found)


# -- node labels ---------------------------------------------------------------------------------


def node_labels(placement: Mapping[str, Any], host: str, site: str | None = None) -> dict[str, str]:
    """The labels the collection owns on ``host``'s node: each level's domain, and the site label.

    A level read from a label the cluster already has (``written`` false in
    the placement's ``sources``) is used as it is: the collection writes no
    label of its own for it.
    """
    levels = placement.get("levels") or []
    if not levels:
        return {}
    row = placement["domains"].get(host) or {}
    written = written_levels(placement)
    labels = {
        level["label"]: row[level["name"]]
        for level in levels
        if level["name"] in written and row.get(level["name"]) is not None
    }
    if site is not None:
        labels[SITE_LABEL] = site
    return labels


def written_levels(placement: Mapping[str, Any]) -> set[str]:
    """The names of the levels whose node label the collection writes: all of them without ``sources``."""
    sources = placement.get("sources")
    if sources is None:
        return {level["name"] for level in placement.get("levels") or []}
    return {source["name"] for source in sources if source.get("written")}


def node_label_objects(placement: Mapping[str, Any], site: str | None = None) -> list[dict[str, Any]]:
    """One server-side apply configuration per node (sorted by node name), holding only the owned labels.

    With levels: each level's label with the node's domain, and with ``site``
    :data:`SITE_LABEL`. Without levels ``labels`` is empty, so that the
    field manager applying it gives up the keys it owned and the labels go.
    """
    names = placement.get("node_names") or {}
    hosts = sorted(placement.get("domains") or {}, key=lambda host: (names.get(host, host), host))
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": names.get(host, host), "labels": node_labels(placement, host, site)},
        }
        for host in hosts
    ]


def topology_name(site: str) -> str:
    """The name of a site's scheduler Topology object (Kueue's and KAI's alike)."""
    return f"{site}-topology"


def topology_levels(levels: list[dict[str, str]]) -> list[dict[str, str]]:
    """A Topology's ``spec.levels`` (Kueue's and KAI's share the shape): the checked levels' node labels,
    widest first, then :data:`HOSTNAME_LABEL`."""
    return [{"nodeLabel": level["label"]} for level in levels] + [{"nodeLabel": HOSTNAME_LABEL}]


# -- the tree of domains ---------------------------------------------------------------------------


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that puts ``r2`` before ``r10``."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text) if part)


def domain_tree(placement: Mapping[str, Any]) -> dict[str, Any]:
    """The site's domains per level, for the report and the planner.

    Returns ``{"levels": [names, widest first], "domains": {level: [{"name",
    "parent" (the domain of the level above, None at the widest level),
    "hosts" (every host inside it, sorted)}]}}``, each level's domains in the
    order of their parents, then by name (``r2`` before ``r10``). Hosts
    without a valid domain at a level are left out of that level.
    """
    names = [level["name"] for level in placement.get("levels") or []]
    domains = placement.get("domains") or {}
    tree: dict[str, list[dict[str, Any]]] = {}
    order: dict[str | None, int] = {None: 0}
    for depth, name in enumerate(names):
        parent_level = names[depth - 1] if depth else None
        found: dict[str, dict[str, Any]] = {}
        for host in sorted(domains, key=natural_key):
            domain = domains[host].get(name)
            if domain is None:
                continue
            parent = domains[host].get(parent_level) if parent_level else None
            entry = found.setdefault(domain, {"name": domain, "parent": parent, "hosts": []})
            entry["hosts"].append(host)
        rows = sorted(found.values(), key=lambda e: (order.get(e["parent"], len(order)), natural_key(e["name"])))
        tree[name] = rows
        order = {row["name"]: index for index, row in enumerate(rows)}
    return {"levels": names, "domains": tree}
