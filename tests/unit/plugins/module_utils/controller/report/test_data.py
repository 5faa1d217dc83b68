# SPDX-License-Identifier: Apache-2.0
"""Site report data: the alignment score of a site."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import data
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology.summary import site_summary
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of


def test_alignment_score_buckets():
    nodes = {"a": topology_of("dgx-h100"), "b": topology_of("mi300x"), "c": topology_of("hyperv-ndv4")}
    score = data.alignment_score(site_summary("s", nodes))
    assert score["gpus"] == 24
    counts = {b["key"]: b["count"] for b in score["buckets"]}
    assert counts == {"aligned": 8, "host": 16, "sys": 0, "none": 0}
    assert sum(b["share"] for b in score["buckets"]) == pytest.approx(1.0)


def test_alignment_score_counts_sys_and_gpus_without_nic():
    # The score reads the probe's links, as the planner does: one GPU sees
    # every NIC at SYS, another has no level to any NIC.
    topology = topology_of("dgx-h100")
    gpus = sorted(topology["links"])
    topology["links"][gpus[0]] = {nic: "SYS" for nic in topology["links"][gpus[0]]}
    topology["links"][gpus[1]] = {}
    counts = {b["key"]: b["count"] for b in data.alignment_score(site_summary("s", {"a": topology}))["buckets"]}
    assert counts == {"aligned": 6, "host": 0, "sys": 1, "none": 1}


def test_an_unknown_level_is_shown_as_unknown_and_nothing_as_none():
    assert data.badge_level(None, False) == ("unknown", True)
    assert data.badge_level(None, True) == (None, True)  # the badge reads None as "none": nothing measured
    assert data.badge_level("PHB", False) == ("PHB", False)
    from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import utilization
    from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import p5_slices

    claim = {"metadata": {"name": "blind", "namespace": "ns"}, "status": {"allocation": {"devices": {"results": [
        {"request": "g", "driver": "gpu.nvidia.com", "pool": "p5", "device": "gpu-4"},
        {"request": "n", "driver": "dra.net", "pool": "p5", "device": "pci-0000-61-00-0"}]}}}}  # fmt: skip
    used = utilization.utilization(p5_slices("p5", efa_numa=False), [claim], teams={"ns": "team"})
    assert data.utilization_view(used)["teams"][0]["levels"] == [("unknown", True, 1)]


def test_plan_view_gives_capacity_per_rail_in_rail_order_and_nothing_without_it():
    from ansible_collections.aligned.dra.tests.support.sites.report_sites import identical_site, plan_for

    plan = plan_for("s", identical_site("vm-flat", 2))
    assert data.plan_view(plan)["rails"] == []
    assert [t["per_rail"] for t in data.plan_view(plan)["templates"]] == [None, None]
    plan["templates"][0]["fits_per_rail"] = {"10": 1, "2": 4, "0": 3}
    plan["templates"][1]["fits_per_rail"] = {"1": 0}
    view = data.plan_view(plan)
    assert view["rails"] == ["0", "1", "2", "10"]
    assert list(view["templates"][0]["per_rail"].items()) == [("0", 3), ("2", 4), ("10", 1)]


def test_inventory_rows_and_layout_facts_show_the_rails():
    from ansible_collections.aligned.dra.plugins.module_utils.controller.report.layouts import group_layouts
    from ansible_collections.aligned.dra.plugins.module_utils.controller.topology.summary import node_summary

    nodes = {"a": topology_of("dgx-h100"), "b": topology_of("dgx-h100")}
    rule = {"by": "pci_order", "count": 8, "exclude": ["eno*"]}
    summary = site_summary("s", nodes)
    summary["per_node"]["a"]["rails"] = node_summary(nodes["a"], rails=rule)["rails"]
    other = dict(rule, count=None, exclude=["eno*", "ibp208s0"])
    summary["per_node"]["b"]["rails"] = node_summary(nodes["b"], rails=other)["rails"]
    rows = {row["host"]: row["rails"] for row in data.inventory_rows(summary, {"a": 1, "b": 1})}
    assert rows == {"a": "rails 0-7, 2 on no rail", "b": "rails 0-6, 3 on no rail"}
    (group,) = group_layouts(nodes)
    view = data.layout_view(0, group, summary, [])
    assert view["facts"].endswith(" \u00b7 RDMA NICs on 7 rails \u00b7 1 NIC on a rail that differs between nodes")
    nics = {nic["bdf"]: nic for nic in view["matrix"]["nics"]}
    assert nics["0000:1d:00.0"]["rail"] == "rail 0"
    assert nics["0000:d0:00.0"]["rail"] == "rail varies"
    assert "rail varies: no rail on b; rail 7 on a" in nics["0000:d0:00.0"]["bits"]
    assert nics["0000:5a:00.0"]["rail"] == "no rail"
    assert "no rail: excluded by the rule" in nics["0000:5a:00.0"]["bits"]
    assert view["matrix"]["rails"] is True
    assert "RDMA NICs on" not in data.layout_view(0, group, site_summary("s", nodes), [])["facts"]


def test_thin_rows_mark_bounds_and_unknown_ratios():
    entry = {
        "template": "b",
        "request_memory": 20 * 2**30,
        "limit_memory": 40 * 2**30,
        "claims": 5,
        "ratio": 1.25,
        "bound": True,
        "nodes": {
            "a": {"claims": 4, "ratio": 2.0, "bound": False},
            "b": {"claims": 1, "ratio": None, "bound": False},
            "c": {"claims": 0, "ratio": None, "bound": False},
            "d": {"claims": 4, "ratio": 2.0, "bound": True},
        },
    }
    (row,) = data.thin_rows([entry])
    assert row["ratio"] == "\u2265 1.25" and row["request"] == "20 GiB" and row["limit"] == "40 GiB" and row["over"]
    assert {g["ratio"]: g["nodes"] for g in row["groups"]} == {"2.00": "a", "unknown": "b", "\u2265 2.00": "d"}
    assert data.thin_text(None, True) == "unknown"
    assert data.thin_rows([]) == []
