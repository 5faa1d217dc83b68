# SPDX-License-Identifier: Apache-2.0
"""The jobs section of the site report: each job of ``<site>/jobs.json`` as a row and on a picture of the site.

Reads what :func:`placement.search.place_checked_jobs` wrote (checked by
:func:`inputs.validate_jobs`) and computes what ``jobs.html.j2`` draws:

- **A row per job**: name, workers requested, template, placement level and
  mode, whether it fits, its domain or domains, rails, the worst GPU-NIC level
  over its workers (a bound stays a bound, unknown stays unknown) and, when it
  does not fit, the planner's reason and the figures that decided it.
- **A compact picture per job**: the site's levels as nested boxes (blocks
  holding racks, ...; ``domains_of_nodes`` in ``jobs.json``), each domain of
  the last level a group of columns of node cells. Nodes holding workers of
  the job are filled, darker for more workers, with the count in the cell
  where it fits and in the tooltip; the chosen domains are outlined. A job
  that does not fit has each domain the planner counted filled from the
  bottom to the share of the job it holds. Without levels the nodes are one
  group; without ``domains_of_nodes`` only the workers' nodes are drawn,
  grouped by the job's domains.
- **Where each level comes from** (``level_sources`` in ``jobs.json``): the
  inventory, a node label the cluster publishes (``rack — node label
  node.coreweave.cloud/rack``, ``nvlink — node label nvidia.com/gpu.clique``)
  or a device attribute of a DRA driver, named beside the level's name.
- **Nodes without a value** at a level (a node label not set, the NVLink
  fabric not ready) are drawn, not dropped: in a box ``no <level>`` (class
  ``missing``) after the level's domains, its tooltip saying which label or
  attribute is not set, and a warning above the table names them.

Sizes: cells shrink with the site (5 px above :data:`CELL_SIZES`' last
limit). Free cells are drawn per column as one dashed stroke whose tooltip
lists the column's nodes top to bottom, so a picture of 1,000 nodes stays a
few dozen kilobytes; only the workers' nodes get a cell element of their own.
Pure Python, no Ansible imports.
"""

from __future__ import annotations

import math

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.levels import natural_key
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.data import badge_level
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.svg import text_label, text_width
from ansible_collections.aligned.dra.plugins.module_utils.dra.device_model import plural, worst_level

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

# Up to this many nodes drawn: this cell size (px); more: SMALL_CELL.
CELL_SIZES = ((64, 18), (400, 8))
SMALL_CELL = 5
GAP = 1  # between two cells of a column (page.html.j2 dashes the free cells with the same gap)
MAX_ROWS = 16  # cells per column; a bigger group gets more columns
MAX_WIDTH = 1160  # boxes wrap into rows beyond this width
LEAF_PAD, PAD, HEAD = 1, 4, 14  # inside a group of cells, inside a box, a box's label line
LEAF_INSET = 2  # a group of cells' label from its left edge (a box's: PAD)
LEAF_SPACE, SPACE = 3, 6  # between groups of cells, between boxes
LABEL_FONT = COUNT_FONT = 10.0  # px; the page's CSS sets the same
COUNT_MIN_CELL = 12  # smaller cells have their count in the tooltip only
LABEL_MAX = 96  # a box is widened for its label up to this width
# Worker cells by workers on the node: 1, 2, 3, 4 or more; white count text on the dark ones.
SHADES = ("#6baed6", "#3182bd", "#08519c", "#08306b")
DARK_FROM = 1  # SHADES index from which the count is written in white


class _Group:
    """A box of the picture: a domain (``level``, ``name``; ``name`` None: hosts without a domain there)."""

    __slots__ = ("level", "name", "above", "children", "hosts", "x", "y", "w", "h")

    def __init__(self, level: str | None, name: str | None, above: list[tuple[str, str | None]]) -> None:
        self.level = level
        self.name = name
        self.above = above  # the domains it sits in, widest first
        self.children: dict[str | None, _Group] = {}
        self.hosts: list[str] = []
        self.x = self.y = self.w = self.h = 0

    def child(self, level: str, name: str | None) -> _Group:
        if name not in self.children:
            above = self.above + ([(self.level, self.name)] if self.level is not None else [])
            self.children[name] = _Group(level, name, above)
        return self.children[name]

    def ordered(self) -> list[_Group]:
        """Children by name in natural order (``r2`` before ``r10``, as the planner), hosts without a domain last."""
        return [self.children[n] for n in sorted(self.children, key=lambda n: (n is None, natural_key(n or "")))]

    def walk(self) -> Iterable[_Group]:
        yield self
        for child in self.ordered():
            yield from child.walk()

    def leaves(self) -> Iterable[_Group]:
        return (group for group in self.walk() if not group.children)


def _domain_text(level: str | None, name: str | None) -> str:
    return f"no {level}" if name is None else f"{level} {name}"


# the label GPU Feature Discovery and NVIDIA's DRA driver set once a node's NVLink fabric is ready
# (controller/domains/presets.py CLIQUE_LABEL, spelt out: the report reads jobs.json only)
CLIQUE_LABEL = "nvidia.com/gpu.clique"
NVLINK_ATTRIBUTES = ("oke.dra.net/gpuMemoryFabricId",)
HOSTS_NAMED = 10  # hosts named in a warning about values that are not set


def source_text(entry: Mapping[str, Any]) -> str:
    """Where a level comes from (an entry of ``level_sources``), as the report names it."""
    if entry.get("source") == "node_label":
        return f"node label {entry.get('key')}"
    if entry.get("source") == "device_attribute":
        return f"device attribute {entry.get('attribute')} of driver {entry.get('driver')}, as node label {entry.get('label')}"
    return f"inventory (aligned_dra_placement.{entry.get('name')}), as node label {entry.get('label')}"


def missing_text(level: str, entry: Mapping[str, Any] | None) -> str:
    """What is not set on a node without a domain at ``level``: its label, attribute or inventory field
    (``entry``: the level's ``level_sources`` entry; None: the inventory, as jobs.json without them)."""
    entry = entry or {"name": level, "source": "inventory"}
    if entry.get("source") == "node_label":
        fabric = ": the NVLink fabric is not ready" if entry.get("key") == CLIQUE_LABEL else ""
        return f"node label {entry.get('key')} not set{fabric}"
    if entry.get("source") == "device_attribute":
        fabric = ": the NVLink fabric is not ready" if entry.get("attribute") in NVLINK_ATTRIBUTES else ""
        return f"device attribute {entry.get('attribute')} not set{fabric}"
    return f"aligned_dra_placement.{entry.get('name')} not set"


# --------------------------------------------------------------------------
# The groups: from domains_of_nodes, or from the job's own workers
# --------------------------------------------------------------------------


def site_tree(domains_of_nodes: Mapping[str, Any]) -> _Group:
    """The site's levels as nested groups, each host in the group of its domain at the last level."""
    levels = list(domains_of_nodes["levels"])
    root = _Group(None, None, [])
    for host in sorted(domains_of_nodes["nodes"], key=natural_key):
        group = root
        for level, name in zip(levels, domains_of_nodes["nodes"][host]):
            group = group.child(level, name)
        group.hosts.append(host)
    return root


def worker_tree(job: Mapping[str, Any]) -> _Group:
    """The nodes of the job's workers only, grouped by the job's domains.

    Workers are indexed in domain then node order (``jobs.json``), so the
    first ``workers`` of the first domain are its own, and so on. Where the
    counts do not split the workers that way, the nodes are one group.
    """
    root = _Group(None, None, [])
    workers = sorted(job["workers"], key=lambda w: w["index"])
    domains = job["domains"] if job["placement"]["level"] is not None else []
    seen: dict[str, str] = {}
    start, split = 0, bool(domains)
    for domain in domains:
        group = root.child(domain["level"], domain["name"])
        for worker in workers[start : start + domain["workers"]]:
            # one node in two domains: the split is not what jobs.json says
            split = split and seen.setdefault(worker["node"], domain["name"]) == domain["name"]
            if worker["node"] not in group.hosts:
                group.hosts.append(worker["node"])
        start += domain["workers"]
    if not split or start != len(workers):
        root = _Group(None, None, [])
        root.hosts = sorted({w["node"] for w in workers})
    return root


# --------------------------------------------------------------------------
# Geometry
# --------------------------------------------------------------------------


class _Shape:
    """The sizes of one picture: cell, pitch, cells per column, whether groups of cells carry a label."""

    def __init__(self, nodes: int, rows: int, labelled: bool) -> None:
        self.cell = next((size for limit, size in CELL_SIZES if nodes <= limit), SMALL_CELL)
        self.pitch = self.cell + GAP
        self.rows = max(1, min(rows, MAX_ROWS))
        # room for a rack's name over its cells: on small sites, where the groups of cells are domains
        self.leaf_head = HEAD if labelled and self.cell >= CELL_SIZES[0][1] else 0


def _label(group: _Group) -> str:
    return group.name if group.name is not None else f"no {group.level}"


def _label_width(group: _Group, inset: int) -> int:
    """The width that holds the group's label (at most LABEL_MAX)."""
    if group.level is None:
        return 0
    return min(LABEL_MAX, math.ceil(text_width(_label(group), LABEL_FONT)) + 2 * inset)


def _flow(children: list[_Group], width: int, space: int) -> tuple[int, int]:
    """Children left to right, a new row where the next would pass ``width``; their size together."""
    x = y = row_h = used = 0
    for child in children:
        if x and x + child.w > width:
            y += row_h + space
            x = row_h = 0
        child.x, child.y = x, y
        x += child.w + space
        row_h = max(row_h, child.h)
        used = max(used, x - space)
    return used, y + row_h


def _measure(group: _Group, width: int, shape: _Shape) -> None:
    """The size of ``group`` and the place of its children inside it."""
    if not group.children:
        columns = max(1, -(-len(group.hosts) // shape.rows))
        cells = columns * shape.pitch - GAP + 2 * LEAF_PAD
        group.w = max(cells, _label_width(group, LEAF_INSET)) if shape.leaf_head else cells
        group.h = shape.rows * shape.pitch - GAP + 2 * LEAF_PAD + shape.leaf_head
        return
    pad, head = (0, 0) if group.level is None else (PAD, HEAD)
    children = group.ordered()
    for child in children:
        _measure(child, width - 2 * pad, shape)
    space = LEAF_SPACE if not children[0].children else SPACE
    used, height = _flow(children, width - 2 * pad, space)
    for child in children:
        child.x += pad
        child.y += pad + head
    group.w = max(used + 2 * pad, _label_width(group, PAD) if head else 0)
    group.h = height + 2 * pad + head


def _absolute(group: _Group, x: int, y: int) -> None:
    group.x += x
    group.y += y
    for child in group.children.values():
        _absolute(child, group.x, group.y)


def _column_path(x: int, y: int, count: int, shape: _Shape) -> str:
    """A column of ``count`` cells as one stroke ``cell`` px wide, dashed ``cell`` on, ``GAP`` off."""
    return f"M{x + shape.cell / 2:g} {y}v{count * shape.pitch - GAP}"


class _Base:
    """The part of every job's picture that is the site: boxes, cells and their tooltips."""

    def __init__(self, root: _Group, sources: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        hosts = sum(len(leaf.hosts) for leaf in root.leaves())
        self.root = root
        self.sources = dict(sources or {})
        self.shape = _Shape(hosts, max((len(leaf.hosts) for leaf in root.leaves()), default=1), bool(root.children))
        _measure(root, MAX_WIDTH, self.shape)
        root.x = root.y = 0
        _absolute(root, 1, 1)  # room for an outline at the edge
        self.width, self.height = root.w + 2, root.h + 2
        self.cells: dict[str, tuple[int, int]] = {}
        self.boxes: dict[tuple[str, str], _Group] = {}
        self.groups = [self._group(group) for group in root.walk() if group.level is not None or not group.children]

    def _group(self, group: _Group) -> dict[str, Any]:
        where = ", ".join(_domain_text(level, name) for level, name in group.above)
        name = _domain_text(group.level, group.name) if group.level is not None else "the nodes"
        missing = group.level is not None and group.name is None
        if missing:
            # nodes without a value at the level: drawn in their own box, which says what is not set
            name = f"{name} ({missing_text(str(group.level), self.sources.get(str(group.level)))})"
        if group.level is not None and group.name is not None:
            self.boxes[(group.level, group.name)] = group
        leaf = not group.children
        count = len(group.hosts) if leaf else sum(len(g.hosts) for g in group.leaves())
        found = {
            "cls": ("leaf" if leaf else "dom") + (" missing" if missing else ""),
            "x": group.x,
            "y": group.y,
            "w": group.w,
            "h": group.h,
            "title": f"{name}{f' in {where}' if where else ''}: {plural(count, 'node')}",
            "label": None,
            "columns": [],
        }
        head, inset = (self.shape.leaf_head, LEAF_INSET) if leaf else (HEAD, PAD)
        if head and group.level is not None:
            label = text_label(group.x + inset, group.y + head - 3, _label(group), group.w - 2 * inset, LABEL_FONT)
            label["anchor"] = "start"
            # a label cut to a letter says nothing: the tooltip names the domain
            found["label"] = label if len(label["text"]) > 2 or not label["full"] else None
        if leaf:
            found["columns"] = self._columns(group, found["title"])
            if len(found["columns"]) == 1:  # the column's tooltip says it all
                found["title"] = None
        return found

    def _columns(self, group: _Group, title: str) -> list[dict[str, str]]:
        """The cells of a group, a column at a time; each column's tooltip lists its nodes top to bottom."""
        rows, top = self.shape.rows, group.y + LEAF_PAD + self.shape.leaf_head
        columns = []
        for start in range(0, len(group.hosts), rows):
            hosts = group.hosts[start : start + rows]
            x = group.x + LEAF_PAD + start // rows * self.shape.pitch
            for row, host in enumerate(hosts):
                self.cells[host] = (x, top + row * self.shape.pitch)
            head = title if len(group.hosts) <= rows else f"{title}, column {start // rows + 1}"
            columns.append({"d": _column_path(x, top, len(hosts), self.shape), "title": "\n".join([head, *hosts])})
        return columns


# --------------------------------------------------------------------------
# One job on the picture
# --------------------------------------------------------------------------


def _ranges(numbers: Iterable[int]) -> str:
    """``0-3, 6``: sorted numbers, runs joined."""
    spans: list[list[int]] = []
    for number in sorted(set(numbers)):
        if spans and number == spans[-1][1] + 1:
            spans[-1][1] = number
        else:
            spans.append([number, number])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _level_text(level: str | None, exact: bool) -> str:
    shown, shown_exact = badge_level(level, exact)
    return "none" if shown is None else ("" if shown_exact else "\u2264 ") + shown


def _worker_cells(base: _Base, job: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """A filled cell per node holding workers; the nodes the picture does not have."""
    per_node: dict[str, list[Mapping[str, Any]]] = {}
    for worker in job["workers"]:
        per_node.setdefault(worker["node"], []).append(worker)
    cell = base.shape.cell
    cells, missing = [], []
    for host in sorted(per_node):
        if host not in base.cells:
            missing.append(host)
            continue
        workers = sorted(per_node[host], key=lambda w: w["index"])
        x, y = base.cells[host]
        shade = min(len(workers), len(SHADES)) - 1
        level = worst_level((w["worst_level"], w["worst_level_exact"]) for w in workers)
        count = str(len(workers))
        fits_text = cell >= COUNT_MIN_CELL and text_width(count, COUNT_FONT) <= cell - 2
        cells.append(
            {
                "x": x,
                "y": y,
                "fill": SHADES[shade],
                "title": f"{host}: {plural(len(workers), 'worker')} (index {_ranges(w['index'] for w in workers)}), "
                f"worst level {_level_text(*level)}",
                "count": {"x": x + cell // 2, "y": y + (cell + 7) // 2, "text": count} if fits_text else None,
                "ink": "#fff" if shade >= DARK_FROM else "#1d232a",
            }
        )
    return cells, missing


# How a count that is a bound is written, by jobs.json's capacity_bound, and what the mark means.
BOUND_MARKS = {
    "lower": ("\u2265", "\u2265: at least (more may fit)"),
    "upper": ("\u2264", "\u2264: at most (fewer may fit)"),
    "unknown": ("~", "~: a bound of unknown direction (more or fewer may fit)"),
}


def _bound_of(job: Mapping[str, Any]) -> str | None:
    """The direction of a job's counts: None where they are exact; ``unknown`` where jobs.json does not say."""
    if job.get("capacity_exact", True):
        return None
    bound = job.get("capacity_bound")
    return bound if bound in BOUND_MARKS else "unknown"


def _bound(count: int, bound: str | None) -> str:
    return str(count) if bound is None else f"{BOUND_MARKS[bound][0]} {count}"


def _gauges(base: _Base, job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each domain the planner counted for a job that does not fit, filled to the share of the job it holds."""
    capacity = job["capacity"] or {}
    level, asked, bound = capacity.get("level"), job["worker_count"], _bound_of(job)
    gauges = []
    for name, count in (capacity.get("domains") or {}).items():
        group = base.boxes.get((level, name))
        if group is None:
            continue
        height = -(-group.h * min(count, asked) // asked)  # rounded up: a domain that holds one worker shows it
        if not height:
            continue
        gauges.append(
            {
                "x": group.x,
                "y": group.y + group.h - height,
                "w": group.w,
                "h": height,
                "title": f"{level} {name} holds {_bound(count, bound)} of {plural(asked, 'worker')}",
            }
        )
    return gauges


def _outlines(base: _Base, job: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chosen domains (1 px outside their box: the outline is 2 px wide)."""
    found = []
    for domain in job["domains"] if job["fits"] else []:
        group = base.boxes.get((domain["level"], domain["name"]))
        if group is not None:
            found.append({"x": group.x - 1, "y": group.y - 1, "w": group.w + 2, "h": group.h + 2})
    return found


def job_picture(base: _Base, job: Mapping[str, Any]) -> dict[str, Any] | None:
    """Geometry of one job's picture on ``base``; None when it would show nothing of the job."""
    cells, missing = _worker_cells(base, job)
    gauges = [] if job["fits"] else _gauges(base, job)
    if not cells and not gauges:
        return None
    return {
        "width": base.width,
        "height": base.height,
        "cell": base.shape.cell,
        "groups": base.groups,
        "cells": cells,
        "outlines": _outlines(base, job),
        "gauges": gauges,
        "missing": missing,
    }


# --------------------------------------------------------------------------
# The section's data
# --------------------------------------------------------------------------


def _where(job: Mapping[str, Any]) -> str:
    if not job["fits"] or job["placement"]["level"] is None:
        return "-"
    if job["domain"] is not None:
        return _domain_text(job["domain"]["level"], job["domain"]["name"])
    return ", ".join(f"{_domain_text(d['level'], d['name'])} ({d['workers']})" for d in job["domains"])


def _rails(job: Mapping[str, Any]) -> str:
    """The rails of every worker; none for a job that does not fit (its figures name the closest)."""
    if job["rails"] is None or not job["fits"]:
        return "-"
    shown = _ranges(job["rails"]) or "none"
    return shown if job.get("rails_pinned", True) else f"{shown} (the planner's choice)"


def figures(job: Mapping[str, Any]) -> list[str]:
    """The capacity that decided a job that does not fit, in words; bounds marked by their direction.

    ``≥`` at least, ``≤`` at most, ``~`` either way (:data:`BOUND_MARKS`); the
    causes are in the reason the row shows next to them.
    """
    capacity = job["capacity"]
    if job["fits"] or not capacity:
        return []
    bound = _bound_of(job)
    exact = bound is None
    rails = f" with rails {_ranges(capacity['rails'])}" if capacity.get("rails") is not None else ""
    asked = job["worker_count"]
    found = [f"the site holds {_bound(capacity['site'], bound)} workers{rails} ({asked} requested)"]
    level, domains = capacity.get("level"), capacity.get("domains") or {}
    if level is not None and domains:
        found.append(f"per {level}, the biggest: " + ", ".join(f"{n} {_bound(c, bound)}" for n, c in domains.items()))
    left_out = capacity.get("domains_left_out") or 0
    if left_out:
        most = f", each at most {min(domains.values())}" if exact and domains else ""
        found.append(f"{left_out} more {level}{'' if left_out == 1 else 's'} not listed{most}")
    nodes = sorted(((int(k), v) for k, v in capacity["nodes"].items()), reverse=True)
    if nodes:
        found.append("workers per node: " + ", ".join(f"{_bound(k, bound)} on {plural(v, 'node')}" for k, v in nodes))
    without = capacity.get("hosts_without_domain") or 0
    if without:
        found.append(f"{plural(without, 'host')} without a {level}, left out")
    if bound is not None:
        found.append(BOUND_MARKS[bound][1] + ": see the reason for why")
    return found


def _fits_text(job: Mapping[str, Any]) -> str:
    """``yes`` or ``no``, and where it rests on a bound, what may be otherwise."""
    if job.get("fits_exact", True):
        return "yes" if job["fits"] else "no"
    return "yes, not proven (fewer may fit)" if job["fits"] else "no, not proven (more may fit)"


def _row(job: Mapping[str, Any]) -> dict[str, Any]:
    placement = job["placement"]
    worst, worst_exact = badge_level(job["worst_level"], job["worst_level_exact"])
    return {
        "name": str(job["name"]),
        "namespace": str(job["namespace"]) if job.get("namespace") else "",
        "workers": job["worker_count"],
        "template": str(job["template"]),
        "placement": "anywhere"
        if placement["level"] is None
        else f"{placement['level']}, {placement['mode'] or 'required'}",
        "fits": job["fits"],
        "fits_text": _fits_text(job),
        "where": _where(job),
        "rails": _rails(job),
        "worst": worst,
        "worst_exact": worst_exact,
        # a job that fits has no reason, but its notes say where its figures are only bounds
        "reason": str(job["reason"]) if job.get("reason") else "; ".join(str(n) for n in job.get("notes") or []),
        "figures": figures(job),
    }


def _caption(job: Mapping[str, Any]) -> str:
    proven = "" if job.get("fits_exact", True) else ", not proven"
    if not job["fits"]:
        return f"does not fit{proven}: {job['reason']}" if job.get("reason") else f"does not fit{proven}"
    nodes = len({w["node"] for w in job["workers"]})
    where = f" in {_where(job)}" if job["placement"]["level"] is not None else " anywhere on the site"
    notes = f" ({'; '.join(str(n) for n in job.get('notes') or [])})" if proven else ""
    return f"{plural(job['worker_count'], 'worker')} on {plural(nodes, 'node')}{where}{proven}{notes}"


def _levels_text(levels: list[str], sources: Mapping[str, Mapping[str, Any]]) -> str:
    """The levels, widest first, each with where it comes from where ``jobs.json`` says it."""
    if not sources:
        return ", ".join(str(level) for level in levels)
    return "; ".join(f"{level} — {source_text(sources[level])}" if level in sources else str(level) for level in levels)


def missing_warnings(mapped: Mapping[str, Any] | None, sources: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Per level, the nodes of ``domains_of_nodes`` without a value there, and what is not set."""
    if not mapped:
        return []
    found = []
    for index, level in enumerate(mapped["levels"]):
        hosts = sorted((h for h, row in mapped["nodes"].items() if row[index] is None), key=natural_key)
        if not hosts:
            continue
        named = ", ".join(hosts[:HOSTS_NAMED]) + (
            f" and {len(hosts) - HOSTS_NAMED} more" if len(hosts) > HOSTS_NAMED else ""
        )
        found.append(
            f"{plural(len(hosts), 'node')} without a {level} ({missing_text(level, sources.get(level))}): {named}; "
            f"drawn in the box 'no {level}', never in a {level} of their own"
        )
    return found


def jobs_view(jobs: Mapping[str, Any]) -> dict[str, Any]:
    """What the jobs section shows: what was placed on what, a row and a picture per job."""
    mapped = jobs.get("domains_of_nodes")
    sources = {str(entry["name"]): entry for entry in jobs.get("level_sources") or []}
    base = _Base(site_tree(mapped), sources) if mapped and mapped["nodes"] else None
    pictures = []
    for job in jobs["jobs"]:
        own = base or (_Base(worker_tree(job), sources) if job["workers"] else None)
        pictures.append(
            {
                "name": str(job["name"]),
                "caption": _caption(job),
                "fits": bool(job["fits"]),
                "svg": job_picture(own, job) if own else None,
            }
        )
    levels = list(mapped["levels"]) if base is not None else list(jobs.get("levels") or [])
    return {
        "minor": str(jobs.get("kubernetes_version") or ""),
        "free": str(jobs.get("free_devices") or ""),
        "levels": _levels_text(levels, sources),
        "level_sources": [{"name": str(n), "source": source_text(e)} for n, e in sources.items()],
        "mapped": base is not None,
        "warnings": [str(w) for w in jobs.get("warnings") or []] + missing_warnings(mapped, sources),
        "rows": [_row(job) for job in jobs["jobs"]],
        "pictures": pictures,
        "shades": [
            {"colour": c, "text": f"{i + 1}{'+' if i == len(SHADES) - 1 else ''}"} for i, c in enumerate(SHADES)
        ],
    }
