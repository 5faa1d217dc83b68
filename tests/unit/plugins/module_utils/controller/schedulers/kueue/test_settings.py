# SPDX-License-Identifier: Apache-2.0
"""Kueue's settings: ``aligned_dra_teams.kueue`` and the teams' Kueue keys, each refusal naming the setting."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import settings as kueue_settings
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import KueueError
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import settings as teams_settings

CLASS_KEYS = claims.settings({})["classes"]
CLASSES = teams_settings.class_names(claims.render({}, "s", "1.36")["objects"])
KEYS = {k: v for k, v in CLASS_KEYS.items() if v in CLASSES}
TIERS = teams_settings.DEFAULT_TIERS
W = {"team": "vision", "name": "w", "class": "gpu", "devices": 1}


def site(raw, engine: str = schedulers.KUEUE) -> dict:
    return kueue_settings.site_settings(raw, engine, CLASSES, KEYS, TIERS)


def test_the_site_settings_resolve_class_keys_and_default_to_nothing():
    assert site(None) == {"cohort": None, "node_groups": {}, "resource_names": {}, "what_if": [], "minor": "0.19"}
    checked = site(
        {
            "cohort": "lab",
            "node_groups": {"h100": {"node_labels": {"gpu": "h100"}}, "spare": None},
            "resource_names": {"gpu": "example.com/gpu"},
            "what_if": [W],
        }
    )
    assert checked["cohort"] == "lab"
    assert checked["node_groups"] == {"h100": {"node_labels": {"gpu": "h100"}}, "spare": {"node_labels": {}}}
    assert checked["resource_names"] == {KEYS["gpu"]: "example.com/gpu"}
    assert checked["what_if"] == [dict(W, **{"class": KEYS["gpu"]})]


@pytest.mark.parametrize(
    ("raw", "engine", "message"),
    [
        ("cohort", schedulers.KUEUE, "aligned_dra_teams.kueue must be a mapping"),
        ({"cohort": "x"}, schedulers.RESOURCEQUOTA, "aligned_dra_teams.kueue is set but engine is resourcequota"),
        ({"cohort": "x"}, schedulers.KAI, "set engine: kueue or both"),
        ({"bogus": 1}, schedulers.KUEUE, "aligned_dra_teams.kueue: unknown key 'bogus' (known: cohort, node_groups"),
        ({"cohort": "Bad_Cohort"}, schedulers.BOTH, "aligned_dra_teams.kueue.cohort 'Bad_Cohort' is not a DNS label"),
        ({"node_groups": ["h100"]}, schedulers.KUEUE, "aligned_dra_teams.kueue.node_groups must map node group"),
        ({"node_groups": {"H_1": {}}}, schedulers.KUEUE, "node_groups.H_1: 'H_1' is not a DNS subdomain"),
        ({"node_groups": {"h100": {"labels": {}}}}, schedulers.KUEUE, "node_groups.h100: unknown key 'labels'"),
        ({"node_groups": {"h100": {"node_labels": {"a": 5}}}}, schedulers.KUEUE, "node_groups.h100.node_labels.a"),
        ({"node_groups": {"h": {"node_labels": {"a b": "x"}}}}, schedulers.KUEUE, "'a b' is not a valid label name"),
        ({"resource_names": []}, schedulers.KUEUE, "aligned_dra_teams.kueue.resource_names must map DeviceClasses"),
        ({"resource_names": {"tpu": "x/y"}}, schedulers.KUEUE, "resource_names: 'tpu' is not a DeviceClass"),
        ({"resource_names": {"gpu": "a b"}}, schedulers.KUEUE, "resource_names.gpu: 'a b' is not a resource name"),
        ({"resource_names": {"gpu": "x/a", "aligned-gpu": "x/b"}}, schedulers.KUEUE, "names aligned-gpu a second"),
        ({"what_if": {}}, schedulers.KUEUE, "aligned_dra_teams.kueue.what_if must be a list of workloads"),
        ({"what_if": [W, "w"]}, schedulers.KUEUE, "aligned_dra_teams.kueue.what_if must be a list of workloads"),
        ({"what_if": [dict(W, bogus=1)]}, schedulers.KUEUE, "what_if[0]: unknown key 'bogus'"),
        ({"what_if": [dict(W, name="")]}, schedulers.KUEUE, "what_if[0].name must be a name (got '')"),
        ({"what_if": [dict(W, tier="gold")]}, schedulers.KUEUE, "what_if[0].tier 'gold' is not one of opportunistic"),
        ({"what_if": [dict(W, devices=True)]}, schedulers.KUEUE, "what_if[0].devices must be a device count"),
        ({"what_if": [dict(W, **{"class": "tpu"})]}, schedulers.KUEUE, "what_if[0].class: 'tpu' is not a DeviceClass"),
        ({"what_if": [dict(W, running=1)]}, schedulers.KUEUE, "what_if[0].running must be true or false"),
    ],
)
def test_bad_site_settings_raise_a_scheduler_error_naming_the_setting(raw, engine, message):
    with pytest.raises(KueueError) as info:
        site(raw, engine)
    assert message in str(info.value)
    assert isinstance(info.value, schedulers.SchedulerError)


def test_the_site_settings_report_the_first_problem_in_their_order():
    # each key is wrong: the keys, the engine, the cohort, node groups, resource names, what-if, in that order
    raw = {"cohort": "Bad", "node_groups": [], "resource_names": [], "what_if": {}}
    with pytest.raises(KueueError, match="engine is resourcequota"):
        site(raw, schedulers.RESOURCEQUOTA)
    with pytest.raises(KueueError, match="unknown key 'bogus'"):
        site(dict(raw, bogus=1), schedulers.RESOURCEQUOTA)
    expected = ["cohort 'Bad'", "node_groups must map", "resource_names must map", "what_if must be a list"]
    for key, message in zip(("cohort", "node_groups", "resource_names", "what_if"), expected, strict=True):
        with pytest.raises(KueueError, match=message):
            site(raw)
        raw = {k: v for k, v in raw.items() if k != key}
    assert site(raw)["what_if"] == []


def test_a_teams_node_group_is_one_of_the_sites():
    where = "aligned_dra_teams.teams[t]"
    assert kueue_settings.team_node_group(where, {"node_group": "h100"}, {"h100": {}}) == "h100"
    assert kueue_settings.team_node_group(where, {}, {}) is None
    with pytest.raises(KueueError) as info:
        kueue_settings.team_node_group(where, {"node_group": ["h100"]}, {"h100": {}, "a100": {}})
    assert str(info.value) == (
        "aligned_dra_teams.teams[t].node_group ['h100'] is not one of aligned_dra_teams.kueue.node_groups (a100, h100)"
    )


@pytest.mark.parametrize(
    ("count", "engine", "message"),
    [
        ("80Gi", schedulers.BOTH, "q.gpu: '80Gi' is an amount of capacity, which only engine kueue counts"),
        ("-1Gi", schedulers.KUEUE, "q.gpu: '-1Gi' is not a non-negative Kubernetes quantity"),
        ("16", schedulers.KUEUE, "q.gpu: '16' has no unit"),
        ("100Ei", schedulers.KUEUE, "q.gpu: '100Ei' is larger than Kubernetes quantities go"),
    ],
)
def test_a_capacity_amount_is_a_quantity_with_a_unit_under_engine_kueue_only(count, engine, message):
    with pytest.raises(KueueError, match=message):
        kueue_settings.check_capacity_amount("q", "gpu", count, engine)


def test_a_capacity_amount_kueue_counts_passes():
    assert kueue_settings.check_capacity_amount("q", "gpu", "80Gi", schedulers.KUEUE) is None


def test_a_quota_on_a_class_with_an_extended_resource_name_is_refused_naming_the_team():
    teams = [{"name": "a", "quotas": {"c1": 1}}, {"name": "b", "quotas": {"c2": 1, "c3": 2}}]
    kueue_settings.check_extended_resources(teams, {"c9": "example.com/x"})
    with pytest.raises(KueueError) as info:
        kueue_settings.check_extended_resources(teams, {"c3": "example.com/x", "c2": "example.com/y"})
    assert str(info.value).startswith(
        "aligned_dra_teams.teams[b].quotas: c2 has the extended resource name 'example.com/y', whose requests"
    )


def test_the_team_settings_check_kueue_s_part_with_it():
    objects = claims.render({}, "s", "1.36")["objects"]
    with pytest.raises(KueueError, match="aligned_dra_teams.kueue.cohort"):
        teams_settings.settings({"engine": "kueue", "kueue": {"cohort": "Bad"}}, objects, CLASS_KEYS)
    raw = {"engine": "kueue", "kueue": {"node_groups": {"h100": {}}}, "teams": [{"name": "t", "node_group": "h100"}]}
    checked = teams_settings.settings(raw, objects, CLASS_KEYS)
    assert checked["kueue"]["node_groups"] == {"h100": {"node_labels": {}}}
    assert checked["teams"][0]["node_group"] == "h100"
