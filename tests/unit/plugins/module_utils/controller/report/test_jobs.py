# SPDX-License-Identifier: Apache-2.0
"""The jobs section of the site report: the rows, each job's picture on the site, and jobs.json as the report reads it.

A small site is placed by the job planner itself (six nodes of two GPU-NIC pairs on rails 0-1, racks
r1 and r2 in block b1, r3 in block b2), so the section reads what the planner writes; the other
sites are written by hand to reach the cases one by one.
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import inputs, pages
from ansible_collections.aligned.dra.plugins.module_utils.controller.report import jobs as section
from ansible_collections.aligned.dra.tests.support.sites.report_jobs import (
    DOMAINS,
    JOBS,
    box,
    figure,
    inside,
    job,
    jobs_file,
    of,
    parsed,
    planned,
    thousand_nodes,
    worker,
)
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of, write_site

EVIL = '"><img src=x onerror=alert(1)><script src="https://evil.example/x.js"></script><b x=\''


# ---------------------------------------------------------------- the planner's own jobs.json


def test_the_rows_say_what_the_planner_placed_and_why_not():
    view = section.jobs_view(planned())
    rows = {row["name"]: row for row in view["rows"]}
    assert rows["two"]["fits"] and rows["two"]["where"] in ("rack r1", "rack r2", "rack r3")
    assert (rows["two"]["placement"], rows["two"]["rails"], rows["two"]["worst"]) == ("rack, required", "0", "PIX")
    assert rows["three"]["fits"] and rows["three"]["where"].count("rack") == 2
    assert rows["anywhere"]["placement"] == "anywhere" and rows["anywhere"]["where"] == "-"
    # one rail-0 NIC per node: a rack holds 2
    refused = rows["rack-of-3"]
    assert not refused["fits"] and refused["rails"] == "-" and refused["worst"] is None
    assert refused["reason"] == "no rack holds 3 workers: the most is rack r1 with 2 (rails [0]); the site holds 6"
    assert refused["figures"][:2] == [
        "the site holds 6 workers with rails 0 (3 requested)",
        "per rack, the biggest: r1 2, r2 2, r3 2",
    ]


def test_the_nodes_of_the_workers_are_filled_and_the_chosen_rack_outlined():
    jobs = planned()
    html = pages.jobs_html(jobs)
    two = next(j for j in jobs["jobs"] if j["name"] == "two")
    rack = two["domain"]["name"]
    svg = figure(html, "two")
    cells = of(svg, "g", "worker")
    assert sorted(c["title"].split(":")[0] for c in cells) == sorted(w["node"] for w in two["workers"])
    rack_box = box(svg, f"rack {rack}")
    filled = [e for e in of(svg, "rect") if e.get("fill") in section.SHADES]
    assert len(filled) == 2 and all(inside(cell, rack_box) for cell in filled)
    (outline,) = of(svg, "rect", "chosen")
    assert [int(outline[k]) for k in ("x", "y", "width", "height")] == [
        int(rack_box["x"]) - 1, int(rack_box["y"]) - 1, int(rack_box["width"]) + 2, int(rack_box["height"]) + 2,
    ]  # fmt: skip
    # every node of the site is drawn, in its rack, in its block
    columns = of(svg, "path", "free")
    assert sorted(h for c in columns for h in c["title"].split("\n")[1:]) == sorted(DOMAINS)
    assert int(box(svg, "block b1")["width"]) > int(box(svg, "rack r1")["width"]) * 2
    assert [t["text"] for t in of(svg, "text") if not t.get("class")] == ["b1", "r1", "r2", "b2", "r3"]
    # the preferred job over two racks: both outlined
    assert len(of(figure(html, "three"), "rect", "chosen")) == 2


def test_a_job_that_does_not_fit_shows_each_domain_filled_to_its_share():
    html = pages.jobs_html(planned())
    svg = figure(html, "rack-of-3")
    assert of(svg, "g", "worker") == [] and of(svg, "rect", "chosen") == []
    gauges = of(svg, "rect", "gauge")
    assert sorted(g["title"] for g in gauges) == [f"rack r{i} holds 2 of 3 workers" for i in (1, 2, 3)]
    for gauge in gauges:
        rack = box(svg, gauge["title"].split(" holds")[0])
        assert int(gauge["height"]) == -(-int(rack["height"]) * 2 // 3)  # two thirds, rounded up
        assert int(gauge["y"]) + int(gauge["height"]) == int(rack["y"]) + int(rack["height"])
    assert "the site holds 6 workers with rails 0 (3 requested)" in str(html)


# ---------------------------------------------------------------- by hand


def test_several_workers_on_a_node_show_their_count_and_indexes():
    nodes = {"n1": ["r1"], "n2": ["r1"], "n3": ["r2"]}
    placed = [worker(0, "n1"), worker(1, "n1"), worker(2, "n1"), worker(3, "n2", "PHB", False)]
    view = section.jobs_view(jobs_file([job("j", placed, "rack", [("r1", 4)])], ["rack"], nodes))
    cells = {c["title"].split(":")[0]: c for c in view["pictures"][0]["svg"]["cells"]}
    assert cells["n1"]["count"]["text"] == "3" and cells["n1"]["fill"] == section.SHADES[2]
    assert cells["n1"]["title"] == "n1: 3 workers (index 0-2), worst level PIX"
    assert cells["n2"]["title"] == "n2: 1 worker (index 3), worst level \u2264 PHB"  # a bound stays a bound
    assert cells["n2"]["fill"] == section.SHADES[0] and "n3" not in cells


def test_the_worst_level_is_shown_as_the_planner_says_it_bound_or_unknown():
    nodes = {"n1": ["r1"]}
    bound = job("bound", [worker(0, "n1", "PHB", False)], "rack", [("r1", 1)], worst_level="PHB")
    bound["worst_level_exact"] = False
    unknown = job("unknown", [worker(0, "n1", None, False)], "rack", [("r1", 1)], worst_level=None)
    unknown["worst_level_exact"] = False
    html = str(pages.jobs_html(jobs_file([bound, unknown], ["rack"], nodes)))
    assert re.search(r'data-job="bound">.*?class="bound"[^>]*>\u2264 PHB</b>', html)
    assert re.search(r'data-job="unknown">.*?>unknown</b>', html)
    assert "n1: 1 worker (index 0), worst level unknown" in html


def test_lower_bounds_and_domains_the_planner_did_not_list_are_said_so():
    capacity = {"rails": None, "site": 9, "nodes": {"3": 3, "0": 1}, "level": "rack", "domains": {"r1": 6, "r2": 3}}
    capacity.update(domains_left_out=2, hosts_without_domain=1)
    refused = job("big", [], fits=False, worker_count=8, capacity=capacity, reason="no rack holds 8 workers")
    exact = section.figures(refused)
    assert exact == [
        "the site holds 9 workers (8 requested)",
        "per rack, the biggest: r1 6, r2 3",
        "2 more racks not listed, each at most 3",
        "workers per node: 3 on 3 nodes, 0 on 1 node",
        "1 host without a rack, left out",
    ]
    refused.update(capacity_exact=False, capacity_bound="lower", fits_exact=False)
    bounds = section.figures(refused)
    assert bounds[0] == "the site holds \u2265 9 workers (8 requested)" and bounds[2] == "2 more racks not listed"
    assert bounds[-1] == "\u2265: at least (more may fit): see the reason for why"
    (row,) = section.jobs_view(jobs_file([refused], ["rack"]))["rows"]
    assert row["fits_text"] == "no, not proven (more may fit)"


@pytest.mark.parametrize(
    ("bound", "mark", "meaning"),
    [
        ("upper", "\u2264", "\u2264: at most (fewer may fit)"),
        ("unknown", "~", "~: a bound of unknown direction (more or fewer may fit)"),
        (None, "~", "~: a bound of unknown direction"),  # a file that says not which way: either
    ],
)
def test_a_bound_is_marked_by_its_direction(bound, mark, meaning):
    capacity = {"rails": None, "site": 4, "nodes": {"2": 2}, "level": "rack", "domains": {"r1": 2, "r2": 2}}
    refused = job("big", [], fits=False, worker_count=3, capacity=capacity, reason="no rack holds 3 workers")
    refused.update(capacity_exact=False, capacity_bound=bound)
    found = section.figures(refused)
    assert found[0] == f"the site holds {mark} 4 workers (3 requested)"
    assert found[1] == f"per rack, the biggest: r1 {mark} 2, r2 {mark} 2"
    assert found[-1].startswith(meaning)


def test_without_levels_the_nodes_are_one_group():
    nodes = {f"n{i:02d}": [] for i in range(20)}
    html = pages.jobs_html(jobs_file([job("j", [worker(0, "n07"), worker(1, "n19")], None)], [], nodes))
    svg = figure(html, "j")
    (group,) = of(svg, "g", "leaf")
    assert of(svg, "g", "dom") == [] and of(svg, "rect", "chosen") == []
    assert [t["text"] for t in of(svg, "text")] == ["1", "1"]  # no label, a count in each worker's cell
    columns = of(svg, "path", "free")
    assert [len(c["title"].split("\n")) - 1 for c in columns] == [16, 4]  # 16 cells a column
    assert columns[0]["title"].startswith("the nodes: 20 nodes, column 1\nn00\n")
    assert all(inside(c, box(svg, "the nodes")) for c in of(svg, "rect") if c.get("fill"))


def test_without_domains_of_nodes_only_the_workers_nodes_are_drawn_by_the_jobs_domains():
    placed = [worker(0, "a"), worker(1, "a"), worker(2, "b"), worker(3, "c")]
    spread = job("spread", placed, "rack", [("r1", 3), ("r2", 1)])
    html = pages.jobs_html(jobs_file([spread], ["rack"]))
    svg = figure(html, "spread")
    columns = {c["title"].split("\n")[0]: c["title"].split("\n")[1:] for c in of(svg, "path", "free")}
    assert columns == {"rack r1: 2 nodes": ["a", "b"], "rack r2: 1 node": ["c"]}
    assert len(of(svg, "rect", "chosen")) == 2
    assert "only the nodes of each job" in str(html)
    # counts that do not split the workers by domain: one group, nothing outlined
    odd = copy.deepcopy(spread)
    odd["domains"][0]["workers"] = 2
    svg = figure(pages.jobs_html(jobs_file([odd], ["rack"])), "spread")
    assert [c["title"] for c in of(svg, "path", "free")] == ["the nodes: 3 nodes\na\nb\nc"]
    # a job that does not fit has nothing to draw without the site's domains
    capacity = {"site": 0, "nodes": {"0": 3}, "level": "rack", "domains": {"r1": 0}}
    refused = job("no", [], fits=False, worker_count=2, capacity=capacity)
    html = str(pages.jobs_html(jobs_file([refused], ["rack"])))
    assert "<svg" not in html and "No picture: no worker is placed, and without domains_of_nodes" in html


def test_worker_nodes_missing_from_domains_of_nodes_are_named():
    html = str(pages.jobs_html(jobs_file([job("j", [worker(0, "n1"), worker(1, "ghost")], None)], [], {"n1": []})))
    assert "Not drawn: 1 node of the workers (ghost) is not in" in html


def test_a_thousand_nodes_and_three_jobs_stay_small():
    jobs = thousand_nodes()
    html = str(pages.jobs_html(jobs))
    # measured 92,678 bytes for the three pictures and the table; a cell element only for a worker's node
    assert len(html.encode()) < 120_000
    svg = parsed(html)
    assert len(of(svg, "svg")) == 3 and len(of(svg, "path", "free")) == 3 * 100
    assert len(of(svg, "g", "worker")) == 64 + 3 and len(of(svg, "rect", "gauge")) == 10
    assert {int(s["width"]) for s in of(svg, "svg")} == {max(int(s["width"]) for s in of(svg, "svg"))}
    assert max(int(s["width"]) for s in of(svg, "svg")) <= section.MAX_WIDTH + 2
    block = box(figure(html, "pretrain"), "block b03")
    assert all(inside(c, block) for c in of(figure(html, "pretrain"), "rect") if c.get("fill"))


# ---------------------------------------------------------------- escaping


def test_names_reasons_and_domains_from_jobs_json_are_escaped():
    def site(text: str) -> dict:
        capacity = {"site": 1, "nodes": {}, "level": "rack"}
        refused = job(text, [], fits=False, worker_count=2, reason=text, capacity=capacity)
        refused["capacity"]["domains"] = {text: 1}
        placed = job(text + "2", [worker(0, text)], "rack", [(text, 1)], template=text, namespace=text)
        return jobs_file([placed, refused], ["rack"], {text: [text]}) | {"warnings": [text]}

    def shape(markup: str) -> list[tuple[str, list[str]]]:
        """Elements and attribute names, less the tooltips of labels cut to fit (a long name's full text)."""
        found = [(e["tag"], sorted(k for k in e if k not in ("tag", "title", "text"))) for e in parsed(markup).elements]
        return [
            (tag, keys) for index, (tag, keys) in enumerate(found) if tag != "title" or found[index - 1][0] != "text"
        ]

    plain, hostile = str(pages.jobs_html(site("plain"))), str(pages.jobs_html(site(EVIL)))
    assert "<script" not in hostile and "<img" not in hostile
    # the same elements with the same attributes: the strings stayed text and attribute values
    assert shape(hostile) == shape(plain)
    assert hostile.count("&lt;script src=&#34;https://evil.example/x.js&#34;&gt;") >= 8


# ---------------------------------------------------------------- jobs.json as the report reads it


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda j: j.update(schema_version=2), "jobs.json: expected a JSON object with schema_version 1"),
        (lambda j: j.update(jobs={}), "'jobs' must be a list"),
        (lambda j: j["jobs"][0].pop("fits"), r"jobs\[0\] \(two\) has no 'fits'"),
        (lambda j: j["jobs"][0].update(worker_count="2"), r"jobs\[0\] \(two\)\.worker_count '2' is not"),
        (lambda j: j["jobs"][0].update(fits="yes"), r"\(two\)\.fits 'yes' is not a boolean"),
        (lambda j: j["jobs"][0].update(worst_level="FAR"), r"\(two\)\.worst_level 'FAR' is not one of"),
        (lambda j: j["jobs"][0].update(rails=["0"]), r"\(two\)\.rails \['0'\] must be a list of rail numbers"),
        (lambda j: j["jobs"][0]["workers"][0].update(index=-1), r"\(two\)\.workers\[0\]: index must be a count"),
        (lambda j: j["jobs"][0]["domains"][0].update(workers=None), r"\(two\)\.domains\[0\]\.workers None"),
        (lambda j: j["jobs"][0]["placement"].update(mode="maybe"), r"\(two\)\.placement: level must be"),
        (lambda j: j["jobs"][2]["capacity"].update(site=1.5), r"\(rack-of-3\)\.capacity\.site 1\.5 is not a count"),
        (lambda j: j["jobs"][2]["capacity"]["nodes"].update(x=1), r"capacity\.nodes: every key must be a number"),
        (lambda j: j["domains_of_nodes"]["nodes"].update(a1=["b1"]), r"domains_of_nodes\.nodes\.a1 must list"),
        (lambda j: j["domains_of_nodes"].update(levels="rack"), r"domains_of_nodes\.levels must be a list"),
    ],
)
def test_a_jobs_file_the_report_cannot_read_is_refused_naming_the_field(change, message):
    jobs = planned()
    change(jobs)
    with pytest.raises(inputs.ReportError, match=message):
        inputs.validate_jobs(jobs, "jobs.json")


def test_the_site_page_has_the_jobs_section_when_jobs_json_exists(tmp_path):
    write_site(tmp_path, "s", {"a1": topology_of("vm-flat")})
    page = pages.build_reports(str(tmp_path))["files"]["s/report.html"]
    assert "<h2>Jobs</h2>" not in page and 'href="jobs.json"' not in page
    (tmp_path / "s" / "jobs.json").write_text(json.dumps(planned()))
    page = pages.build_reports(str(tmp_path))["files"]["s/report.html"]
    assert "<h2>Jobs</h2>" in page and 'href="jobs.json"' in page
    assert page.index("<h2>Claim templates") < page.index("<h2>Jobs</h2>") < page.index("<h2>Nodes</h2>")
    assert len(re.findall(r'<figure class="job"', page)) == len(JOBS)
    (tmp_path / "s" / "jobs.json").write_text(json.dumps({"schema_version": 1, "jobs": [{"name": "x"}]}))
    with pytest.raises(inputs.ReportError, match=r"s/jobs.json: jobs\[0\] \(x\) has no 'template'"):
        pages.build_reports(str(tmp_path))


def test_a_job_that_fits_on_bounds_says_why_in_its_row():
    note = "1 host of rack r2 has no topology (not probed or failed): the counts are lower bounds"
    bounded = job("two", [worker(0, "n1"), worker(1, "n2")], "rack", [("r1", 2)], capacity_exact=False, notes=[note])
    (row,) = section.jobs_view(jobs_file([bounded], ["rack"]))["rows"]
    assert row["fits"] and row["reason"] == note and row["fits_text"] == "yes"
    # a fit on counts that are at most what they say is not proven, in the row and under the picture
    spanning = "1 claim holds devices on several nodes (not taken off any node: fewer may fit)"
    bounded.update(capacity_bound="upper", fits_exact=False, notes=[spanning])
    view = section.jobs_view(jobs_file([bounded], ["rack"]))
    assert view["rows"][0]["fits_text"] == "yes, not proven (fewer may fit)"
    assert view["pictures"][0]["caption"] == f"2 workers on 2 nodes in rack r1, not proven ({spanning})"
    (plain,) = section.jobs_view(jobs_file([job("two", [worker(0, "n1")], "rack", [("r1", 1)])], ["rack"]))["rows"]
    assert plain["reason"] == ""


def test_domains_and_nodes_are_drawn_in_natural_order_as_the_planner_names_them():
    tree = section.site_tree({"levels": ["rack"], "nodes": {"n10": ["r10"], "n2": ["r2"], "n1": ["r2"], "x": [None]}})
    assert [group.name for group in tree.ordered()] == ["r2", "r10", None]
    assert tree.children["r2"].hosts == ["n1", "n2"]
    flat = section.site_tree({"levels": [], "nodes": {"n10": [], "n9": [], "n1": []}})
    assert flat.hosts == ["n1", "n9", "n10"]
