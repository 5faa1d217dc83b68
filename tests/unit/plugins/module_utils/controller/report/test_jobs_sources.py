# SPDX-License-Identifier: Apache-2.0
"""The jobs section on a site whose levels the cluster publishes: each level's source named, NVLink domains
drawn, nodes without a value marked instead of dropped; ``level_sources`` as the report reads it.

The GKE A4X site of ``tests/support/sites/nvlink_site.py`` (block → subblock → nvlink from ``nvidia.com/gpu.clique`` →
host, four cliques of two nodes) is placed by the job planner itself; the rest is written by hand.
"""

from __future__ import annotations

import copy

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import inputs, pages
from ansible_collections.aligned.dra.plugins.module_utils.controller.report import jobs as section
from ansible_collections.aligned.dra.tests.support.sites.nvlink_site import (
    CLIQUE,
    CLIQUES,
    gke_placement,
    nvlink_job,
    place,
)
from ansible_collections.aligned.dra.tests.support.sites.report_jobs import (
    box,
    figure,
    inside,
    job,
    jobs_file,
    of,
    worker,
)

NOT_READY = ("gke-a4x-pool-6", "gke-a4x-pool-7")
GKE_LEVELS = (
    "block — node label cloud.google.com/gce-topology-block; "
    "subblock — node label cloud.google.com/gce-topology-subblock; "
    "nvlink — node label nvidia.com/gpu.clique; "
    "host — node label cloud.google.com/gce-topology-host"
)
FABRIC = "node label nvidia.com/gpu.clique not set: the NVLink fabric is not ready"


def planned(not_ready: tuple[str, ...] = ()) -> dict:
    placement, _problems = gke_placement(not_ready)
    return inputs.validate_jobs(place([nvlink_job("two", 2), nvlink_job("three", 3)], placement))


def test_each_level_is_named_with_its_source_and_the_job_is_drawn_in_its_clique():
    jobs = planned()
    view = section.jobs_view(jobs)
    assert view["levels"] == GKE_LEVELS
    assert view["level_sources"][2] == {"name": "nvlink", "source": f"node label {CLIQUE}"}
    assert view["warnings"] == []
    html = pages.jobs_html(jobs)
    assert GKE_LEVELS in str(html)
    two = jobs["jobs"][0]
    clique = two["domain"]["name"]
    assert "." in clique and clique in CLIQUES
    svg = figure(html, "two")
    clique_box = box(svg, f"nvlink {clique}")
    filled = [e for e in of(svg, "rect") if e.get("fill") in section.SHADES]
    assert len(filled) == 2 and all(inside(cell, clique_box) for cell in filled)
    (outline,) = of(svg, "rect", "chosen")
    assert int(outline["x"]) == int(clique_box["x"]) - 1 and int(outline["width"]) == int(clique_box["width"]) + 2
    # the job no clique holds: each clique filled to its share, the closest named in the row
    gauges = of(figure(html, "three"), "rect", "gauge")
    assert sorted(g["title"] for g in gauges) == sorted(f"nvlink {c} holds 2 of 3 workers" for c in CLIQUES)


def test_nodes_without_a_clique_are_drawn_in_a_marked_box_and_named_in_a_warning():
    jobs = planned(NOT_READY)
    view = section.jobs_view(jobs)
    assert view["warnings"] == [
        f"2 nodes without a nvlink ({FABRIC}): gke-a4x-pool-6, gke-a4x-pool-7; drawn in the box 'no nvlink', "
        "never in a nvlink of their own"
    ]
    groups = view["pictures"][0]["svg"]["groups"]
    (missing,) = [g for g in groups if "missing" in g["cls"]]
    assert missing["cls"] == "dom missing" and missing["label"]["text"] == "no nvlink"
    assert missing["title"].startswith(f"no nvlink ({FABRIC}) in block ")
    assert missing["title"].endswith(": 2 nodes")
    html = pages.jobs_html(jobs)
    assert '<ul class="warnings"><li>2 nodes without a nvlink' in str(html)
    svg = figure(html, "two")
    marked = box(svg, f"no nvlink ({FABRIC})")
    hosts = [e for e in of(svg, "path", "free") if set(e["title"].split("\n")[1:]) & set(NOT_READY)]
    assert sorted(h for e in hosts for h in e["title"].split("\n")[1:]) == list(NOT_READY)
    assert all(
        int(marked["x"]) <= float(e["d"].split()[0][1:]) <= int(marked["x"]) + int(marked["width"]) for e in hosts
    )


def test_an_inventory_site_names_its_levels_as_before_and_marks_a_host_without_a_domain():
    nodes = {"n1": ["r1"], "n2": ["r1"], "x": [None]}
    jobs = jobs_file([job("two", [worker(0, "n1"), worker(1, "n2")], "rack", [("r1", 2)])], ["rack"], nodes)
    view = section.jobs_view(jobs)
    assert view["levels"] == "rack" and view["level_sources"] == []
    assert view["warnings"] == [
        "1 node without a rack (aligned_dra_placement.rack not set): x; drawn in the box 'no rack', never in a rack "
        "of their own"
    ]
    (missing,) = [g for g in view["pictures"][0]["svg"]["groups"] if "missing" in g["cls"]]
    assert missing["cls"] == "leaf missing" and missing["label"]["text"] == "no rack"


@pytest.mark.parametrize(
    ("entry", "text"),
    [
        ({"source": "node_label", "key": "node.coreweave.cloud/rack"}, "rack — node label node.coreweave.cloud/rack"),
        (
            {"source": "device_attribute", "driver": "dra.net", "attribute": "oke.dra.net/rackId"},
            "rack — device attribute oke.dra.net/rackId of driver dra.net, as node label aligned.dev/rack",
        ),
        ({"source": "inventory"}, "rack — inventory (aligned_dra_placement.rack), as node label aligned.dev/rack"),
    ],
)
def test_every_source_is_named(entry, text):
    jobs = jobs_file([job("two", [worker(0, "n1")], "rack", [("r1", 1)])], ["rack"], {"n1": ["r1"]})
    jobs["level_sources"] = [dict(entry, name="rack", label="aligned.dev/rack")]
    view = section.jobs_view(inputs.validate_jobs(jobs))
    assert view["levels"] == text


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("rack", "level_sources must be a list of the levels' sources"),
        ([{"name": "rack"}], "level_sources[0] has no 'source'"),
        ([{"name": "rack", "source": "label", "label": "l"}], "level_sources[0].source 'label' is not one of"),
        ([{"name": "rack", "source": "node_label", "label": "k"}], "level_sources[0].key None is not a text"),
        ([{"name": "rack", "source": "inventory"}], "level_sources[0].label None is not a text"),
        (
            [{"name": "rack", "source": "device_attribute", "label": "l", "attribute": "a"}],
            "level_sources[0].driver None is not a text",
        ),
        (
            [{"name": "row", "source": "inventory", "label": "l"}],
            "level_sources names ['row'], not the levels ['rack']",
        ),
    ],
)
def test_level_sources_the_report_cannot_read_are_refused_naming_the_field(change, message):
    jobs = copy.deepcopy(jobs_file([], ["rack"], {"n1": ["r1"]}))
    jobs["level_sources"] = change
    with pytest.raises(inputs.ReportError) as found:
        inputs.validate_jobs(jobs)
    assert f"jobs.json: {message}" in str(found.value)
