# SPDX-License-Identifier: Apache-2.0
"""Site report inputs: plan files the report cannot use are refused with the field at fault."""

from __future__ import annotations

import re

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import inputs
from ansible_collections.aligned.dra.tests.support.sites.report_sites import identical_site, plan_for


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda p: p.update(tainted_devices=[{"node": "n1"}]), "'tainted_devices' must be a list of objects"),
        (lambda p: p.update(schema_version=2), "schema_version 2 is not supported"),
        (lambda p: p["templates"][0].pop("fits_total"), "templates[0] has no 'fits_total'"),
        (lambda p: p["templates"][1].update(worst_level="FAR"), "worst_level 'FAR' is not one of"),
        (lambda p: p.update(templates={}), "'templates' must be a list"),
        (lambda p: p["templates"][0]["nodes"]["gpu-0001"].pop("fits"), "nodes.gpu-0001 needs 'fits'"),
    ],
)
def test_bad_plans_are_refused_with_the_field(mutate, message):
    plan = plan_for("s", identical_site("vm-flat", 1))
    mutate(plan)
    with pytest.raises(inputs.ReportError, match=re.escape(message)):
        inputs.validate_plan(plan, "p.json")


@pytest.mark.parametrize(
    ("fits", "message"),
    [
        ([1, 2], "templates[0].fits_per_rail must be an object"),
        ({"r0": 1}, "templates[0].fits_per_rail: 'r0' is not a rail number"),
        ({"0": -1}, "templates[0].fits_per_rail.0 -1 is not a count"),
    ],
)
def test_bad_fits_per_rail_is_refused_and_absent_or_null_is_fine(fits, message):
    plan = plan_for("s", identical_site("vm-flat", 1))
    assert inputs.validate_plan(plan, "p.json") is plan
    plan["templates"][0]["fits_per_rail"] = None
    inputs.validate_plan(plan, "p.json")
    plan["templates"][0]["fits_per_rail"] = fits
    with pytest.raises(inputs.ReportError, match=re.escape(message)):
        inputs.validate_plan(plan, "p.json")


def test_summary_rails_are_read_per_node_and_a_bad_entry_is_refused():
    nic = {"pci_address": "0000:1d:00.0", "netdevs": ["ib0"], "rail": 0, "why": "PCI order 0"}
    summary = {"per_node": {"a": {"rails": {"rule": "by pci_order", "nics": [nic]}}, "b": {"rails": None}, "c": {}}}
    assert inputs.summary_rails(summary) == {"a": summary["per_node"]["a"]["rails"], "b": None, "c": None}
    assert inputs.summary_rails(None) == {} and inputs.summary_rails({"per_node": []}) == {}
    for bad, message in (
        ({"rule": "by map"}, "s.json: per_node.a.rails must be an object with a 'nics' list"),
        ({"rule": 3, "nics": []}, "per_node.a.rails.rule 3 is not a text"),
        ({"rule": None, "nics": [{"pci_address": "x"}]}, "per_node.a.rails.nics[0] has no 'rail'"),
        ({"rule": None, "nics": [dict(nic, rail="0")]}, "pci_address must be a text and rail a number or null"),
        ({"rule": None, "nics": [], "problems": [1]}, "per_node.a.rails.problems must be a list of texts"),
        ({"rule": None, "nics": [dict(nic, unknown="yes")]}, "nics[0].unknown must be true (with rail null) or false"),
        ({"rule": None, "nics": [dict(nic, unknown=True)]}, "nics[0].unknown must be true (with rail null) or false"),
    ):
        with pytest.raises(inputs.ReportError, match=re.escape(message)):
            inputs.summary_rails({"per_node": {"a": {"rails": bad}}}, "s.json")


@pytest.mark.parametrize(
    ("thin", "message"),
    [
        ({}, "thin must be a list"),
        ([{"template": "b"}], r"thin\[0\] has no 'request_memory'"),
        (
            [{"template": "b", "request_memory": 1, "limit_memory": 2, "claims": -1, "ratio": 1.0, "bound": False}],
            r"thin\[0\]\.claims -1 is not a count",
        ),
        (
            [{"template": "b", "request_memory": 1, "limit_memory": 2, "claims": 1, "ratio": "2", "bound": False}],
            "'ratio' must be a number or null",
        ),
        (
            [
                {
                    "template": "b",
                    "request_memory": 1,
                    "limit_memory": 2,
                    "claims": 1,
                    "ratio": 1.0,
                    "bound": False,
                    "nodes": {"n1": {"claims": 1, "ratio": "<b>"}},
                }
            ],
            r"thin\[0\]\.nodes\.n1 needs",
        ),
    ],
)
def test_a_bad_thin_entry_is_refused(thin, message):
    plan = {"schema_version": 1, "templates": [], "thin": thin}
    with pytest.raises(inputs.ReportError, match=message):
        inputs.validate_plan(plan)


# ---------------------------------------------------------------- utilization.json with usage


def test_a_utilization_file_with_usage_alone_is_accepted_and_without_it_refused(usage):
    usage_only = {"schema_version": 1, "site": "s", "usage": usage}
    assert inputs.validate_utilization(usage_only, "u.json") is usage_only
    assert not inputs.has_allocation(usage_only)
    with pytest.raises(inputs.ReportError, match=re.escape("u.json: 'totals' must be an object")):
        inputs.validate_utilization({"schema_version": 1, "site": "s"}, "u.json")
    # an allocation part given at all is checked whole, usage or not
    with pytest.raises(inputs.ReportError, match=re.escape("u.json: 'shared' must be a list")):
        inputs.validate_utilization({**usage_only, **dict.fromkeys(inputs.ALLOCATION_KEYS[:-1], {})}, "u.json")


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda u: u.pop("window"), "u.json: usage has no 'window'"),
        (lambda u: u["window"].update(step_seconds="60"), "usage.window.step_seconds '60' is not a number"),
        (lambda u: u["totals"].pop("gpu_hours"), "usage.totals has no 'gpu_hours'"),
        (
            lambda u: u["teams"]["team-a"].update(idle_share="1/3"),
            "usage.teams.team-a.idle_share '1/3' is not a number",
        ),
        (lambda u: u["teams"]["team-a"]["gpu_hours"].pop("idle"), "usage.teams.team-a.gpu_hours has no 'idle'"),
        (lambda u: u["templates"].update(t=[]), "usage.templates.t must be an object"),
        (lambda u: u["claims"][1].update(node=3), "usage.claims[1].node 3 is not a text or null"),
        (lambda u: u["claims"][0]["hours"].update(unknown=None), "usage.claims[0].hours.unknown None is not a number"),
        (lambda u: u["timeline"]["teams"]["team-a"]["idle_gpus"].pop(), "team-a.idle_gpus has 9 values, not 10"),
        (lambda u: u["timeline"].update(bucket_seconds=0), "usage.timeline.bucket_seconds must be above 0"),
        (lambda u: u["timeline"]["teams"]["team-a"].pop("memory_used_gpus"), "team-a has no 'memory_used_gpus'"),
        (lambda u: u["advice"].pop("site"), "usage.advice has no 'site'"),
        (
            lambda u: u["advice"]["fractional"][0]["advice"].pop("limit"),
            "usage.advice.fractional[0].advice has no 'limit'",
        ),
        (
            lambda u: u["advice"]["fractional"][0].update(few_claims="yes"),
            "fractional[0].few_claims 'yes' is not a boolean",
        ),
        (lambda u: u["advice"]["site"].update(advice=None), "usage.advice.site has no 'reason'"),
        (
            lambda u: u["advice"]["whole_gpu_candidates"][0].pop("compute_known"),
            "usage.advice.whole_gpu_candidates[0] has no 'compute_known'",
        ),
        (lambda u: u.update(series_missing=[1]), "usage.series_missing must be a list of texts"),
    ],
)
def test_bad_usage_is_refused_naming_the_key(usage, mutate, message):
    mutate(usage)
    with pytest.raises(inputs.ReportError, match=re.escape(message)):
        inputs.validate_utilization({"schema_version": 1, "site": "s", "usage": usage}, "u.json")
