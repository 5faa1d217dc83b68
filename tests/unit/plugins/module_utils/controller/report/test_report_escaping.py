# SPDX-License-Identifier: Apache-2.0
"""The report with hostile strings in everything a node, an inventory or a plan file can name.

Node names and the site come from the inventory; GPU models, netdev and RDMA
names, the local CPU list and driver names from the node's sysfs (node root
writes them); template names, error messages and counts from plan.json. None
of them may add an element, an attribute or a remote load to the page.
"""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import inputs, pages
from ansible_collections.aligned.dra.tests.support.sites.report_sites import plan_for, topology_of

EVIL = '"><img src=x onerror=alert(1)><script src="https://evil.example/x.js"></script><b x=\''


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def tags_of(page: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Tags()
    parser.feed(page)
    return parser.tags


def hostile_node() -> dict:
    topology = topology_of("dgx-h100")
    for device in topology["devices"]:
        if device.get("gpu"):
            device["gpu"]["model"] = EVIL
        for netdev in device.get("netdevs") or []:
            netdev["name"] = EVIL
        if device.get("rdma_devices"):
            device["rdma_devices"] = [EVIL]
        device["driver"] = EVIL
        device["local_cpulist"] = EVIL
    return topology


def assert_inert(page: str, reference: str) -> None:
    """The hostile page has exactly the elements and attribute names of the same page with plain strings.

    Long strings are cut to fit their box in the SVG, with the full text in a
    ``<title>`` of the text: those tooltips are left out of the comparison.
    """

    def shape_of(html: str) -> list[tuple[str, list[str]]]:
        tags = [(tag, sorted(attrs)) for tag, attrs in tags_of(html)]
        return [tags[0]] + [t for t in tags[1:] if t != ("title", [])]

    assert [t for t in tags_of(page) if t[0] == "title"][0] == ("title", {})
    assert shape_of(page) == shape_of(reference)
    assert "evil.example" not in "".join(str(v) for _t, attrs in tags_of(page) for v in attrs.values() if v)
    assert "<script" not in page and "<img" not in page


def test_hostile_node_name_site_and_sysfs_strings_are_escaped():
    plain = pages.site_report("site", {"node-a": topology_of("dgx-h100")})["html"]
    page = pages.site_report("site", {"node-a": hostile_node()})["html"]
    assert_inert(page, plain)
    hostile_name = pages.site_report(EVIL, {EVIL: topology_of("dgx-h100")})["html"]
    assert "<script" not in hostile_name and "<img" not in hostile_name
    # Everything but the node name and site: the same elements as the plain page.
    assert {t for t, _a in tags_of(hostile_name)} == {t for t, _a in tags_of(plain)}


def test_hostile_plan_strings_are_escaped():
    nodes = {"node-a": topology_of("dgx-h100")}
    plain = pages.site_report("s", nodes, plan=inputs.validate_plan(plan_for("s", nodes)))["html"]
    plan = plan_for("s", nodes)
    for template in plan["templates"]:
        template["name"] = EVIL
        template["reason"] = EVIL
        template["satisfiable"] = False
        template["errors"] = [{"node": EVIL, "device": EVIL, "request": EVIL, "message": EVIL, "expression": EVIL}]
        template["nodes"] = {EVIL: {"fits": 0, "worst_level": None}}
    plan["kubernetes_version"] = EVIL
    plan["driver"] = EVIL
    page = pages.site_report("s", nodes, plan=inputs.validate_plan(plan))["html"]
    assert "<script" not in page and "<img" not in page
    assert {t for t, _a in tags_of(page)} <= {t for t, _a in tags_of(plain)}


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("fits_total",), EVIL, "fits_total"),
        (("fits_total",), True, "fits_total"),
        (("satisfiable",), EVIL, "satisfiable"),
        (("required",), "yes", "required"),
        (("nodes", "node-a", "fits"), EVIL, "fits"),
        (("nodes", "node-a", "worst_level"), EVIL, "worst_level"),
    ],
)
def test_plan_counts_and_flags_that_are_not_numbers_or_booleans_are_refused(path, value, message):
    """Counts, flags and levels are written into the page unescaped: only their own types get there."""
    nodes = {"node-a": topology_of("dgx-h100")}
    plan = plan_for("s", nodes)
    target = plan["templates"][0]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(inputs.ReportError, match=message):
        inputs.validate_plan(plan)


def test_hostile_job_names_reasons_and_domains_are_escaped():
    """jobs.json carries the inventory's job, template, namespace, node and domain names, and the planner's reasons."""

    def jobs(text: str) -> dict:
        placed = {
            "name": text, "namespace": text, "template": text, "worker_count": 1,
            "placement": {"level": "rack", "mode": "required"}, "fits": True, "domain": {"level": "rack", "name": text},
            "domains": [{"level": "rack", "name": text, "workers": 1}], "rails": [0], "worst_level": "PIX",
            "worst_level_exact": True, "capacity": None, "reason": None,
            "workers": [{"index": 0, "node": text, "worst_level": "PIX", "worst_level_exact": True}],
        }  # fmt: skip
        refused = dict(placed, name=text + "-2", fits=False, domain=None, domains=[], workers=[], reason=text)
        refused["capacity"] = {"site": 0, "nodes": {"0": 1}, "level": "rack", "domains": {text: 0}}
        found = {"schema_version": 1, "levels": ["rack"], "warnings": [text], "jobs": [placed, refused]}
        found["domains_of_nodes"] = {"levels": ["rack"], "nodes": {text: [text]}}
        return inputs.validate_jobs(found)

    nodes = {"node-a": topology_of("dgx-h100")}
    plain = pages.site_report("s", nodes, jobs=jobs("plain"))["html"]
    page = pages.site_report("s", nodes, jobs=jobs(EVIL))["html"]
    assert "<script" not in page and "<img" not in page
    assert {t for t, _a in tags_of(page)} <= {t for t, _a in tags_of(plain)}
    assert not [a for _t, attrs in tags_of(page) for a in attrs if a in ("src", "onerror")]
