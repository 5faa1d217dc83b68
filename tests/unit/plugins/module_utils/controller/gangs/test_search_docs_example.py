# SPDX-License-Identifier: Apache-2.0
"""The two-rack example of docs/jobs.md, read from the page and placed: what the page says is what the planner gives.

The section "A two-rack example" gives the site's group_vars and hosts (YAML blocks), the lines the
placement role prints, and what it labels and renders; "The placement, by simulation" gives the site's
``jobs.json``. This test takes all of it from the page: it builds the site from the two YAML blocks as the
placement role does (the ``aligned.dra.placement`` filter on the hosts' variables, the claim catalogue of
the site's minor and rail rule, the ``aligned.dra.jobs`` module on four nodes of eight aligned GPU+NIC
pairs, which the page's prose describes), prints each job with the role's own message template
(roles/placement/tasks/jobs.yml), and compares with the page. "..." in the page's JSON stands for what it
leaves out; every other figure there must be the module's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.filter.placement import placement_filter
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.modules import jobs as jobs_module
from ansible_collections.aligned.dra.tests.support.harnesses.role_messages import role_message, run_module
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import aligned_node

REPO = Path(__file__).resolve().parents[6]
PAGE = REPO / "docs" / "jobs.md"
ROLE_TASKS = REPO / "roles" / "placement" / "tasks" / "jobs.yml"
SAY_TASK = "Jobs | Say where each job goes"
EXAMPLE = "A two-rack example"
JSON_SECTION = "The placement, by simulation (`jobs.json`)"
# "each node with eight GPUs and eight RDMA NICs": one aligned pair per PCIe root, all on one NUMA node
PAIRS = 8
WORDS = {"one": 1, "two": 2, "three": 3, "four": 4}


def section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section (up to the next heading of the same level)."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"docs/jobs.md has no section '## {heading}'"
    return match.group(1)


def fenced(body: str) -> list[tuple[str, str]]:
    """Every fenced block of ``body``: ``(info string, content)``."""
    return re.findall(r"^```(\w*)\n(.*?)^```$", body, re.M | re.S)


class Page:
    """What the page says about the example."""

    def __init__(self, text: str) -> None:
        example = section(text, EXAMPLE)
        self.prose = example
        documents = [yaml.safe_load(content) for info, content in fenced(example) if info == "yaml"]
        group_vars = [d for d in documents if "aligned_dra_jobs" in d]
        inventories = [d for d in documents if any("hosts" in (v or {}) for v in d.values())]
        assert len(group_vars) == 1 and len(inventories) == 1, "the example needs one group_vars and one hosts block"
        self.group_vars, self.inventory = group_vars[0], inventories[0]
        self.site = self.group_vars["aligned_dra_site"]
        self.hosts = self.inventory[self.site]["hosts"]
        printed = [c for info, c in fenced(example) if not info and c.startswith(f"{self.site}: job ")]
        assert len(printed) == 2, "the example prints the jobs placed, then the job that does not fit"
        self.placed_lines, self.variant_lines = (block.splitlines() for block in printed)
        (found,) = [c for info, c in fenced(section(text, JSON_SECTION)) if info == "json"]
        self.jobs_json = json.loads(found)

    def variant_jobs(self) -> list[dict[str, Any]]:
        """The jobs of the second block of lines: "Had `<job>` said `mode: <mode>`", named as printed."""
        base, mode = re.search(r"Had `([\w-]+)` said `mode: (\w+)`", self.prose).groups()
        (job,) = [dict(j) for j in self.group_vars["aligned_dra_jobs"] if j["name"] == base]
        names = [re.match(rf"{re.escape(self.site)}: job ([\w-]+):", line).group(1) for line in self.variant_lines]
        return [dict(job, name=name, placement=dict(job["placement"], mode=mode)) for name in names]


def run_jobs_module(page: Page, job_list: list[dict[str, Any]], dest: Path) -> dict[str, Any]:
    """``aligned.dra.jobs`` on the page's site, with the arguments the placement role gives it."""
    group_vars = page.group_vars
    hostvars = {host: {**group_vars, **(variables or {})} for host, variables in page.hosts.items()}
    placement = placement_filter(hostvars, list(hostvars), page.site)
    assert placement["problems"] == []
    rules = {host: variables["aligned_dra_rails"] for host, variables in hostvars.items()}
    gates = group_vars.get("aligned_dra_feature_gates") or {}
    minor = group_vars["aligned_dra_kubernetes_version"]
    objects = claims.render({}, page.site, minor, gates, rail_rules=rules)["objects"]
    args = {
        "site": page.site,
        "kubernetes_version": minor,
        "feature_gates": gates,
        "jobs": job_list,
        "placement": placement,
        "objects": objects,
        "topologies": {host: aligned_node(PAIRS) for host in hostvars},
        "rail_rules": rules,
        "dest": str(dest),
    }
    result = run_module(jobs_module, args)
    assert json.loads(dest.read_text()) == result["placement"]
    return dict(result, label_objects=placement["label_objects"])


def printed_lines(site: str, placed: dict[str, Any]) -> list[str]:
    """The role's line per job: its debug message, rendered as Ansible renders it."""
    context = {"aligned_dra_placement_site": site}
    return [role_message(ROLE_TASKS, SAY_TASK, dict(context, item=job)) for job in placed["jobs"]]


def disagreements(page: Any, actual: Any, where: str = "") -> list[str]:
    """Where the page's JSON differs from the module's; "..." stands for anything (a value, keys, more items)."""
    if page == "...":
        return []
    if isinstance(page, dict):
        if not isinstance(actual, dict):
            return [f"{where}: {actual!r} is not a mapping"]
        found = []
        for key, value in page.items():
            if key == "...":
                continue
            if key not in actual:
                found.append(f"{where}.{key}: not in jobs.json")
            else:
                found += disagreements(value, actual[key], f"{where}.{key}")
        return found
    if isinstance(page, list):
        items = [item for item in page if item != "..."]
        if not isinstance(actual, list) or len(actual) < len(items) or (len(items) == len(page) != len(actual)):
            return [f"{where}: the page has {page!r}, jobs.json {actual!r}"]
        return [problem for i, item in enumerate(items) for problem in disagreements(item, actual[i], f"{where}[{i}]")]
    return [] if page == actual else [f"{where}: the page has {page!r}, jobs.json {actual!r}"]


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> tuple[Page, dict[str, Any], dict[str, Any]]:
    page = Page(PAGE.read_text(encoding="utf-8"))
    scratch = tmp_path_factory.mktemp("jobs-docs")
    placed = run_jobs_module(page, page.group_vars["aligned_dra_jobs"], scratch / "jobs.json")
    variant = run_jobs_module(page, page.variant_jobs(), scratch / "variant.json")
    return page, placed, variant


def test_the_lines_the_page_prints_are_the_roles(example):
    page, placed, variant = example
    assert printed_lines(page.site, placed["placement"]) == page.placed_lines
    assert printed_lines(page.site, variant["placement"]) == page.variant_lines


def test_the_jobs_json_of_the_page_is_the_modules(example):
    page, placed, _variant = example
    actual = placed["placement"]
    expected = {key: value for key, value in page.jobs_json.items() if key != "jobs"}
    problems = disagreements(expected, actual)
    by_name = {job["name"]: job for job in actual["jobs"]}
    for job in page.jobs_json["jobs"]:
        problems += disagreements(job, by_name.get(job["name"]), f".jobs[{job['name']}]")
    assert problems == []


def test_the_labels_files_and_domains_the_page_names(example):
    page, placed, _variant = example
    prose = page.prose
    # "labels the four nodes `aligned.dev/block=b1`, `aligned.dev/rack=r1|r2` and `aligned.dev/site=west`"
    labels = placed["label_objects"]
    assert len(labels) == len(page.hosts)
    said = dict(re.findall(r"`(aligned\.dev/[\w.-]+)=([\w|.-]+)`", prose))
    assert said, "the example names no node label"
    for key, values in said.items():
        assert {o["metadata"]["labels"][key] for o in labels} == set(values.split("|")), key
    # "renders `west/jobs/pretrain-job.yaml`, `pretrain-service.yaml`, ... and the same for `sweep`"
    sentence = re.search(r"renders (`[^;]*?) and the same for `([\w-]+)`", prose)
    first = [Path(name).name for name in re.findall(r"`([\w./-]+\.yaml)`", sentence.group(1))]
    job, other = first[0].split("-")[0], sentence.group(2)
    assert re.findall(r"`([\w.-]+)/jobs/", sentence.group(1)) == [page.site]
    assert sorted(f["name"] for f in placed["files"]) == sorted(first + [n.replace(job, other, 1) for n in first])
    # "for the required job, a topology constraint on `aligned.dev/rack`" (the preferred one has none)
    label = re.search(r"topology constraint on `([\w./-]+)`", prose).group(1)
    groups = {
        f["object"]["metadata"]["name"]: f["object"] for f in placed["files"] if f["object"]["kind"] == "PodGroup"
    }
    assert groups[job]["spec"]["schedulingConstraints"]["topology"] == [{"key": label}]
    assert "schedulingConstraints" not in groups[other]["spec"]
    # "`domains` lists them with their workers: r1 two, r2 one"
    listed = re.search(r"with their workers: ([^)]*)\)", prose).group(1)
    wanted = [(name, WORDS[count]) for name, count in re.findall(r"([\w-]+) (one|two|three|four)", listed)]
    (spread,) = [j for j in placed["placement"]["jobs"] if j["domain"] is None and j["fits"]]
    assert [(d["name"], d["workers"]) for d in spread["domains"]] == wanted
