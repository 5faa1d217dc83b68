# SPDX-License-Identifier: Apache-2.0
"""Team settings: each refused setting is named in the error (tiers, classes, teams, engine limits)."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import spec as jobs_spec
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import settings as teams_settings

CLASS_KEYS = claims.settings({})["classes"]


def objects(minor: str = "1.36") -> list[dict]:
    return claims.render({}, "s", minor)["objects"]


def check(raw: dict, minor: str = "1.36") -> dict:
    return teams_settings.settings(raw, objects(minor), CLASS_KEYS)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"team": []}, "unknown key 'team'"),
        ({"teams": [{"name": "a", "quotas": {"tpu": 1}}]}, r"teams\[a\].quotas: 'tpu' is not a DeviceClass"),
        ({"teams": [{"name": "a", "quotas": {"gpu": -1}}]}, "must be a non-negative integer"),
        ({"teams": [{"name": "a", "quotas": {"gpu": 1, "aligned-gpu": 2}}]}, "a second time"),
        ({"teams": [{"name": "a", "templates": ["nope"]}]}, "'nope' is not rendered for this site"),
        ({"teams": [{"name": "A"}]}, "is not a DNS label"),
        ({"teams": [{"name": "a"}, {"name": "b", "namespaces": ["a"]}]}, "already belongs to team 'a'"),
        ({"teams": [{"name": "a", "namespaces": ["kube-system"]}]}, "outside kube-"),
        ({"teams": [{"name": "a", "labels": {teams_settings.ADMIN_ACCESS_LABEL: "true"}}]}, "set admin_access: true"),
        ({"teams": [{"name": "a", "labels": {"x": 5}}]}, "is not a valid label value"),
        ({"teams": [{"name": "a", "colour": "red"}]}, "unknown key 'colour'"),
        ({"oversubscription": {"gpu": 0.5}}, "must be a number >= 1"),
        ({"oversubscription": {"tpu": 2}}, "'tpu' is not a DeviceClass"),
        ({"extended_resources": {"gpu": "gpu"}}, "is not a domain/name resource"),
        ({"extended_resources": {"gpu": "kubernetes.io/gpu"}}, "reserved for native resources"),
        ({"extended_resources": {"gpu": "requests.example.com/gpu"}}, "must not start with requests."),
        ({"tiers": {"production": {"name": "system-x"}}}, "not starting with system-"),
        ({"tiers": {"production": {"value": 2000000000}}}, "must be an integer"),
        ({"tiers": {"production": {"preemption_policy": "Sometimes"}}}, "PreemptLowerPriority or Never"),
    ],
)
def test_bad_settings_name_the_setting(raw, message):
    with pytest.raises(teams_settings.TeamsError, match=message):
        check(raw)


@pytest.mark.parametrize(
    ("team", "engine", "message"),
    [
        ({"borrowing_limit": {"gpu": 2}}, "resourcequota", "teams[t].borrowing_limit needs engine kueue or both"),
        ({"lending_limit": {"nic": 1}}, "kueue", "teams[t].lending_limit: aligned-nic has no quota"),
        ({"borrowing_limit": {"gpu": -1}}, "kueue", "teams[t].borrowing_limit.gpu must be a non-negative integer"),
        ({"quotas": {"gpu": "80Gi"}}, "resourcequota", "only engine kueue counts"),
        ({"quotas": {"gpu": "80Gi"}}, "both", "only engine kueue counts"),
        ({"quotas": {"gpu": "lots"}}, "kueue", "teams[t].quotas.gpu: 'lots' is not a non-negative Kubernetes quantity"),
        ({"quotas": {"gpu": "16"}}, "kueue", "teams[t].quotas.gpu: '16' has no unit; give a device count as a number"),
        ({"quotas": {"gpu": 2**64}}, "kueue", "teams[t].quotas.gpu must be a non-negative integer"),
        ({"quotas": {"gpu": "100Ei"}}, "kueue", "teams[t].quotas.gpu: '100Ei' is larger than Kubernetes quantities go"),
        ({"department": "Research Org"}, "kueue", "teams[t].department 'Research Org' is not a DNS label"),
        (
            {"node_group": "h100"},
            "kueue",
            "teams[t].node_group 'h100' is not one of aligned_dra_teams.kueue.node_groups (none set)",
        ),
    ],
)
def test_bad_team_engine_settings_name_the_team(team, engine, message):
    raw = {"engine": engine, "teams": [dict({"name": "t", "quotas": {"gpu": 2}}, **team)]}
    with pytest.raises(ValueError) as info:
        check(raw)
    assert message in str(info.value)


def test_every_reader_defaults_a_teams_namespaces_to_its_name_alike():
    raw = {
        "teams": [
            {"name": "vision"},
            {"name": "llm", "namespaces": ["llm-a", "llm-b"]},
            {"name": "x", "namespaces": []},
        ]
    }
    assert [teams_settings.team_namespaces(t) for t in raw["teams"]] == [["vision"], ["llm-a", "llm-b"], ["x"]]
    checked = {t["name"]: t["namespaces"] for t in check(raw)["teams"]}
    by_namespace = teams_settings.teams_by_namespace(raw)
    _engine, entries = jobs_spec.team_entries(raw)
    assert (
        checked
        == {t["name"]: t["namespaces"] for t in entries}
        == {
            "vision": ["vision"],
            "llm": ["llm-a", "llm-b"],
            "x": ["x"],
        }
    )
    assert by_namespace == {ns: team for team, namespaces in checked.items() for ns in namespaces}
