# SPDX-License-Identifier: Apache-2.0
"""TEST FIXTURE: jobs.json files for the site report's jobs section, and a reader of the figures it draws.
Never shipped.

- ``planned``: jobs.json of a small site (``DOMAINS``, ``JOBS``) as the ``aligned.dra.jobs`` module writes it;
  ``thousand_nodes``: 1,000 nodes and three jobs; ``job``, ``worker``, ``jobs_file``: jobs.json by hand;
- ``figure``, ``parsed``, ``of``, ``box``, ``inside``: a job's SVG figure read back as elements (``Svg``).
"""

from __future__ import annotations

import itertools
import json
import re
from html.parser import HTMLParser

from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import place as job_planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.report import inputs
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    NIC_NAME_RULE,
    aligned_node,
    rail_objects,
    rail_planner_nodes,
    site_placement,
    split_objects,
)

DOMAINS = {"a1": ("b1", "r1"), "a2": ("b1", "r1"), "b1": ("b1", "r2"), "b2": ("b1", "r2"), "c1": ("b2", "r3")}
DOMAINS["c2"] = ("b2", "r3")


JOBS = [
    {"name": "two", "workers": 2, "template": "gpu-nic-rail-0", "placement": {"level": "rack", "mode": "required"}},
    {"name": "three", "workers": 3, "template": "gpu-nic-rail-0", "placement": {"level": "rack", "mode": "preferred"}},
    {"name": "rack-of-3", "workers": 3, "template": "gpu-nic-rail-0", "placement": {"level": "rack"}},
    {"name": "anywhere", "workers": 4, "template": "gpu-nic-pair-1"},
]


def planned() -> dict:
    """jobs.json of the small site as the ``aligned.dra.jobs`` module writes it (``domains_of_nodes`` added)."""
    rules = {host: dict(NIC_NAME_RULE, count=2) for host in DOMAINS}
    nodes, problems = rail_planner_nodes({host: aligned_node(2) for host in DOMAINS}, rules)
    assert problems == []
    classes, templates = split_objects(rail_objects(rules))
    placement = site_placement(["block", "rack"], {h: {"block": b, "rack": r} for h, (b, r) in DOMAINS.items()})
    result = job_planner.place_jobs("s", JOBS, nodes, classes, templates, placement, kubernetes_version="1.36")
    result["domains_of_nodes"] = {"levels": ["block", "rack"], "nodes": {h: list(d) for h, d in DOMAINS.items()}}
    return inputs.validate_jobs(json.loads(json.dumps(result)))


def worker(index: int, node: str, level: str | None = "PIX", exact: bool = True) -> dict:
    return {"index": index, "node": node, "devices": {}, "worst_level": level, "worst_level_exact": exact, "rails": [0]}


def job(name: str, workers: list[dict], level: str | None = "rack", domains: list | None = None, **extra) -> dict:
    """A job of jobs.json that fits, in ``domains`` (``[(name, workers)]``) of ``level``."""
    domains = domains or []
    found = {
        "name": name,
        "namespace": "ml",
        "template": "gpu-nic-rail-0",
        "worker_count": len(workers),
        "placement": {"level": level, "mode": "required" if level else None},
        "fits": True,
        "domain": {"level": level, "name": domains[0][0]} if len(domains) == 1 else None,
        "domains": [{"level": level, "name": d, "workers": n} for d, n in domains],
        "rails": [0],
        "rails_pinned": True,
        "worst_level": "PIX",
        "worst_level_exact": True,
        "capacity_exact": True,
        "capacity": None,
        "workers": workers,
        "reason": None,
    }
    found.update(extra)
    return found


def jobs_file(jobs: list[dict], levels: list[str] | None = None, nodes: dict | None = None) -> dict:
    found = {"schema_version": 1, "site": "s", "kubernetes_version": "1.36", "levels": levels or [], "jobs": jobs}
    found.update(free_devices="empty site", warnings=[])
    if nodes is not None:
        found["domains_of_nodes"] = {"levels": levels or [], "nodes": nodes}
    return inputs.validate_jobs(found)


def thousand_nodes() -> dict:
    """1,000 nodes in 100 racks of 10 blocks and three jobs: 64 workers in a block, 24 over two racks, one too big."""
    host = "gpu-{:04d}".format
    nodes = {host(i): [f"b{i // 100:02d}", f"r{i // 10:03d}"] for i in range(1000)}
    block = job("pretrain", [worker(i, host(300 + i)) for i in range(64)], "block", [("b03", 64)])
    spread = [worker(i, host(420 + i // 8)) for i in range(16)] + [worker(16 + i, host(537)) for i in range(8)]
    sweep = job("sweep", spread, "rack", [("r042", 16), ("r053", 8)], placement={"level": "rack", "mode": "preferred"})
    capacity = {"rails": [0], "site": 700, "nodes": {"1": 700, "0": 300}, "level": "rack"}
    capacity.update(domains={f"r{k:03d}": 10 - k // 4 for k in range(10)}, domains_left_out=90, hosts_without_domain=0)
    wide = job("wide", [], fits=False, worker_count=16, capacity=capacity, reason="no rack holds 16 workers")
    return jobs_file([block, sweep, wide], ["block", "rack"], nodes)


class Svg(HTMLParser):
    """Every element of the markup with its attributes and the text of its title, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[dict] = []
        self.open: list[dict] = []

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, **dict(attrs), "title": None, "text": ""}
        self.elements.append(element)
        self.open.append(element)

    def handle_endtag(self, tag):
        while self.open:
            element = self.open.pop()
            if element["tag"] == tag:
                break

    def handle_startendtag(self, tag, attrs):
        self.elements.append({"tag": tag, **dict(attrs), "title": None, "text": ""})

    def handle_data(self, data):
        if not self.open:
            return
        if self.open[-1]["tag"] == "title" and len(self.open) > 1:
            self.open[-2]["title"] = data  # the tooltip of the element that holds it
        else:
            self.open[-1]["text"] += data


def parsed(markup) -> Svg:
    parser = Svg()
    parser.feed(str(markup))
    return parser


def figure(markup, name: str) -> Svg:
    """The elements of job ``name``'s figure."""
    found = re.search(rf'<figure class="job" data-job="{re.escape(name)}".*?</figure>', str(markup), re.S)
    assert found, name
    return parsed(found.group(0))


def of(svg: Svg, tag: str, cls: str | None = None) -> list[dict]:
    return [e for e in svg.elements if e["tag"] == tag and (cls is None or e.get("class") == cls)]


def box(svg: Svg, title_start: str) -> dict:
    """The rect of the group whose tooltip, or whose only column's, starts with ``title_start``."""
    found = []
    starts = [i for i, e in enumerate(svg.elements) if e["tag"] == "g"] + [len(svg.elements)]
    for start, end in itertools.pairwise(starts):
        inner = svg.elements[start:end]
        columns = [e for e in inner if e.get("class") == "free"]
        title = inner[0]["title"] or (columns[0]["title"] if columns else "")
        if title.startswith(title_start + ":") or title.startswith(title_start + " in "):
            found.append(next(e for e in inner if e["tag"] == "rect"))
    assert len(found) == 1, title_start
    return found[0]


def inside(cell: dict, outer: dict) -> bool:
    x, y, ox, oy = (int(cell["x"]), int(cell["y"]), int(outer["x"]), int(outer["y"]))
    right, bottom = x + int(cell["width"]), y + int(cell["height"])
    return ox <= x and oy <= y and right <= ox + int(outer["width"]) and bottom <= oy + int(outer["height"])
