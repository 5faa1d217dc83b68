# SPDX-License-Identifier: Apache-2.0
"""Teams: objects per team, schema validity for every minor, refused settings, quotas against capacity."""

from __future__ import annotations

import kubernetes_validate
import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import KueueError
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import render as teams_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import settings as teams_settings
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates

CLASS_KEYS = claims.settings({})["classes"]


def objects(minor: str = "1.36") -> list[dict]:
    return claims.render({}, "s", minor)["objects"]


def render(raw: dict, minor: str = "1.36", plan: dict | None = None, **kwargs) -> dict:
    return teams.render(raw, "s", objects(minor), minor, plan=plan, class_keys=CLASS_KEYS, **kwargs)


TWO_TEAMS = {
    "extended_resources": {"gpu": "example.com/gpu"},
    "teams": [
        {
            "name": "vision",
            "namespaces": ["vision-a", "vision-b"],
            "labels": {"cost-center": "ml-1"},
            "tier": "production",
            "templates": ["gpu-nic-pair-1"],
            "quotas": {"gpu": 4, "aligned-nic": 2},
        },
        {"name": "mon", "tier": "opportunistic", "admin_access": True, "quotas": {"gpu": 3}},
    ],
}


def by_kind(result: dict) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for obj in result["objects"]:
        found.setdefault(obj["kind"], []).append(obj)
    return found


@pytest.mark.parametrize("minor", dra_gates.SUPPORTED_MINORS)
def test_everything_rendered_is_valid_for_every_minor(minor):
    result = render(TWO_TEAMS, minor)
    assert teams.validate_all(result["objects"], minor) == []
    for obj in result["objects"]:
        kubernetes_validate.validate(obj, minor + ".0", strict=True)
    assert {o["kind"] for o in result["objects"]} == {
        "PriorityClass",
        "Namespace",
        "ResourceQuota",
        "ResourceClaimTemplate",
    }


def test_namespaces_quotas_templates_and_admin_access():
    kinds = by_kind(render(TWO_TEAMS))
    assert [p["metadata"]["name"] for p in kinds["PriorityClass"]] == [
        "aligned-opportunistic",
        "aligned-production",
        "aligned-research",
    ]
    opportunistic = kinds["PriorityClass"][0]
    assert opportunistic["preemptionPolicy"] == "Never" and opportunistic["value"] == 100
    namespaces = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kinds["Namespace"]}
    assert sorted(namespaces) == ["mon", "vision-a", "vision-b"]
    assert namespaces["vision-a"]["cost-center"] == "ml-1" and namespaces["vision-a"]["aligned.dev/team"] == "vision"
    assert teams_settings.ADMIN_ACCESS_LABEL not in namespaces["vision-a"]
    assert namespaces["mon"][teams_settings.ADMIN_ACCESS_LABEL] == "true"
    quotas = {q["metadata"]["namespace"]: q["spec"]["hard"] for q in kinds["ResourceQuota"]}
    assert quotas["vision-b"] == {
        "aligned-gpu.deviceclass.resource.k8s.io/devices": "4",
        "requests.example.com/gpu": "4",
        "aligned-nic.deviceclass.resource.k8s.io/devices": "2",
    }
    assert quotas["mon"] == {"aligned-gpu.deviceclass.resource.k8s.io/devices": "3", "requests.example.com/gpu": "3"}
    copies = [(t["metadata"]["namespace"], t["metadata"]["name"]) for t in kinds["ResourceClaimTemplate"]]
    assert ("vision-a", "gpu-nic-pair-1") in copies and ("vision-b", "gpu-nic-pair-1") in copies
    copy = next(t for t in kinds["ResourceClaimTemplate"] if t["metadata"]["namespace"] == "vision-a")
    assert copy["metadata"]["annotations"][teams_model.PRIORITY_ANNOTATION] == "aligned-production"
    assert copy["spec"] == next(o for o in objects() if o["metadata"]["name"] == "gpu-nic-pair-1")["spec"]
    admin = [t for t in kinds["ResourceClaimTemplate"] if t["metadata"]["name"].endswith("-admin-access")]
    assert {t["metadata"]["namespace"] for t in admin} == {"mon"}
    assert sorted(t["metadata"]["name"] for t in admin) == [
        "aligned-gpu-admin-access",
        "aligned-nic-admin-access",
        "aligned-vf-admin-access",
    ]
    request = admin[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["adminAccess"] is True and request["allocationMode"] == "All"


def test_tiers_can_be_changed_added_and_removed():
    raw = {
        "tiers": {"research": None, "batch": {"value": 500, "guaranteed": False}, "production": {"value": 7}},
        "teams": [{"name": "a", "tier": "batch"}],
    }
    result = render(raw)
    pcs = {p["metadata"]["name"]: p["value"] for p in by_kind(result)["PriorityClass"]}
    assert pcs == {"aligned-batch": 500, "aligned-opportunistic": 100, "aligned-production": 7}
    with pytest.raises(teams_settings.TeamsError, match="tier 'research' is not one of"):
        render({"tiers": {"research": None}, "teams": [{"name": "a", "tier": "research"}]})


def test_admin_access_needs_the_gate():
    raw = {"teams": [{"name": "mon", "admin_access": True}]}
    with pytest.raises(teams_settings.TeamsError, match="DRAAdminAccess"):
        render(raw, feature_gates={"DRAAdminAccess": False})


def test_class_declaring_an_extended_resource_name_gets_the_requests_quota():
    objs = objects()
    gpu = next(o for o in objs if o["metadata"]["name"] == "aligned-gpu")
    gpu["spec"]["extendedResourceName"] = "example.com/h100"
    result = teams.render({"teams": [{"name": "a", "quotas": {"gpu": 2}}]}, "s", objs, "1.36", class_keys=CLASS_KEYS)
    quota = by_kind(result)["ResourceQuota"][0]
    assert quota["spec"]["hard"]["requests.example.com/h100"] == "2"


def test_team_extended_resource_must_match_the_name_the_class_declares():
    declared = claims.render({"extended_resources": {"gpu": "aligned.dev/gpu"}}, "s", "1.36")["objects"]
    team = {"teams": [{"name": "a", "quotas": {"gpu": 2}}]}
    mismatch = dict(team, extended_resources={"gpu": "example.com/gpu"})
    with pytest.raises(teams_settings.TeamsError, match="differs from the extendedResourceName 'aligned.dev/gpu'"):
        teams.render(mismatch, "s", declared, "1.36", class_keys=CLASS_KEYS)
    for raw in (team, dict(team, extended_resources={"gpu": "aligned.dev/gpu"})):
        quota = by_kind(teams.render(raw, "s", declared, "1.36", class_keys=CLASS_KEYS))["ResourceQuota"][0]
        assert quota["spec"]["hard"]["requests.aligned.dev/gpu"] == "2"
        assert "requests.example.com/gpu" not in quota["spec"]["hard"]


PLAN = {"classes": {"aligned-gpu": {"devices": 10}, "aligned-nic": {"devices": 4}}}


def capacity(raw: dict, plan: dict | None = None, no_plan: bool = False) -> tuple[dict, list[str]]:
    result = render(raw, plan=None if no_plan else (plan or PLAN))
    return {row["class"]: row for row in result["capacity"]}, result["problems"]


def test_guaranteed_quotas_within_capacity_opportunistic_not_counted():
    rows, problems = capacity(TWO_TEAMS)
    # vision: 4 GPUs x 2 namespaces guaranteed; mon: 3 opportunistic
    assert rows["aligned-gpu"] | {"teams": None} == {
        "class": "aligned-gpu",
        "capacity": 10,
        "guaranteed": 8,
        "opportunistic": 3,
        "factor": 1.0,
        "ratio": 0.8,
        "status": "ok",
        "teams": None,
    }
    assert rows["aligned-nic"]["guaranteed"] == 4 and rows["aligned-nic"]["status"] == "ok"
    assert problems == []


def test_oversubscription_needs_an_explicit_factor():
    raw = {"teams": [{"name": "a", "quotas": {"gpu": 6}}, {"name": "b", "tier": "production", "quotas": {"gpu": 6}}]}
    rows, problems = capacity(raw)
    assert rows["aligned-gpu"]["status"] == "over_limit" and rows["aligned-gpu"]["ratio"] == 1.2
    assert problems == [
        "DeviceClass aligned-gpu: guaranteed quotas add up to 12 devices, the site has 10 and no "
        "oversubscription is allowed (aligned_dra_teams.oversubscription)"
    ]
    rows, problems = capacity(dict(raw, oversubscription={"gpu": 1.2}))
    assert rows["aligned-gpu"]["status"] == "oversubscribed" and problems == []
    rows, problems = capacity(dict(raw, oversubscription={"gpu": 1.1}))
    assert rows["aligned-gpu"]["status"] == "over_limit" and "the factor is 1.1" in problems[0]


def test_without_a_plan_the_capacity_is_unknown():
    rows, problems = capacity({"teams": [{"name": "a", "quotas": {"gpu": 600}}]}, no_plan=True)
    assert rows["aligned-gpu"]["status"] == "unknown" and rows["aligned-gpu"]["capacity"] is None
    assert problems == []


def test_file_names_and_namespace_map():
    result = render(TWO_TEAMS)
    names = [teams.file_name(o) for o in result["objects"]]
    assert "quota-vision-a-aligned-dra-devices.yaml" in names and "priorityclass-aligned-research.yaml" in names
    assert len(names) == len(set(names))
    assert teams_settings.teams_by_namespace(TWO_TEAMS) == {"vision-a": "vision", "vision-b": "vision", "mon": "mon"}


# -- engines: ResourceQuota, Kueue, both ----------------------------------------------------------

KUEUE_TEAMS = {
    "engine": "kueue",
    "teams": [
        {
            "name": "vision",
            "namespaces": ["vision-a", "vision-b"],
            "tier": "production",
            "templates": ["gpu-only"],
            "quotas": {"gpu": 4},
            "borrowing_limit": {"gpu": 2},
            "lending_limit": {"gpu": 6},
        },
        {"name": "llm", "tier": "research", "templates": ["gpu-only"], "quotas": {"gpu": 8}},
    ],
}


def test_engine_kueue_renders_queues_instead_of_resource_quotas():
    result = render(KUEUE_TEAMS)
    kinds = by_kind(result)
    assert "ResourceQuota" not in kinds
    assert sorted(q["metadata"]["name"] for q in kinds["ClusterQueue"]) == ["llm", "vision"]
    assert sorted(q["metadata"]["namespace"] for q in kinds["LocalQueue"]) == ["llm", "vision-a", "vision-b"]
    assert result["engine"] == "kueue"
    assert result["kueue"]["configuration"]["featureGates"]["KueueDRAIntegration"] is True
    vision = next(t for t in result["kueue"]["teams"] if t["name"] == "vision")
    # quota 4 per namespace x 2 namespaces; lends at most 6 of those 8
    assert vision["nominal"] == {"aligned-gpu": 8}
    assert vision["borrowable"] == {"aligned-gpu": 2}
    assert vision["lendable"] == {"aligned-gpu": 6}
    # Kueue's objects are checked against Kueue's schemas, the others against Kubernetes'
    assert teams.validate_all(result["objects"], "1.36") == []
    broken = [dict(o, spec=dict(o["spec"], bogus=1)) if o["kind"] == "ClusterQueue" else o for o in result["objects"]]
    assert any("bogus" in p for p in teams.validate_all(broken, "1.36"))


def test_template_copies_name_the_local_queue_for_kueue_workloads():
    result = render(KUEUE_TEAMS)
    copies = [o for o in by_kind(result)["ResourceClaimTemplate"] if o["metadata"]["namespace"] == "vision-b"]
    assert copies
    for copy_ in copies:
        annotations = copy_["metadata"]["annotations"]
        assert annotations[teams.QUEUE_ANNOTATION] == "vision"
        assert "kueue.x-k8s.io/queue-name: vision" in annotations[teams_model.USAGE_ANNOTATION]
        assert "kueue.x-k8s.io/queue-name" not in (copy_["metadata"].get("labels") or {})
    # without Kueue the copies say nothing about queues
    plain = render(
        dict(
            KUEUE_TEAMS,
            engine="resourcequota",
            teams=[dict(t, borrowing_limit=None, lending_limit=None) for t in KUEUE_TEAMS["teams"]],
        )
    )
    assert all(
        teams.QUEUE_ANNOTATION not in o["metadata"]["annotations"] for o in by_kind(plain)["ResourceClaimTemplate"]
    )


def test_engine_both_renders_quotas_and_queues_and_reports_an_over_limit_class_once():
    raw = dict(KUEUE_TEAMS, engine="both")
    kinds = by_kind(render(raw))
    assert len(kinds["ResourceQuota"]) == 3 and len(kinds["ClusterQueue"]) == 2
    # 8 (vision) + 8 (llm) guaranteed GPUs on a site of 10: both engines see it, one problem is reported
    result = render(raw, plan={"classes": {"aligned-gpu": {"devices": 10}}})
    assert len([p for p in result["problems"] if p.startswith("DeviceClass aligned-gpu:")]) == 1
    # engine kueue alone: the same check, the same one problem
    result = render(KUEUE_TEAMS, plan={"classes": {"aligned-gpu": {"devices": 10}}})
    assert len([p for p in result["problems"] if p.startswith("DeviceClass aligned-gpu:")]) == 1


def test_idle_devices_come_from_what_each_team_holds_now():
    result = render(KUEUE_TEAMS, in_use={"vision": {"aligned-gpu": 5}, "llm": {"aligned-gpu": 8}})
    idle = {t["name"]: t["idle"] for t in result["kueue"]["teams"]}
    # vision: nominal 8, 5 in use -> 3 idle (within its lending limit of 6); llm: all 8 in use
    assert idle == {"vision": {"aligned-gpu": 3}, "llm": {"aligned-gpu": 0}}


def test_what_if_workloads_may_name_the_class_key():
    raw = dict(KUEUE_TEAMS, kueue={"what_if": [{"team": "vision", "name": "sweep", "class": "gpu", "devices": 10}]})
    outcome = render(raw)["kueue"]["what_if"]["teams"]["vision"]
    # 8 by its own quota, 2 borrowed from llm's idle 8 (borrowing limit 2)
    assert outcome["by_nominal"] == {"aligned-gpu": 8}
    assert outcome["by_borrowing"] == {"aligned-gpu": 2}


W = {"team": "vision", "name": "w", "class": "gpu", "devices": 1}


W = {"team": "vision", "name": "w", "class": "gpu", "devices": 1}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"engine": "slurm"}, "aligned_dra_teams.engine must be one of resourcequota, kueue, both"),
        (
            {"engine": "resourcequota", "kueue": {"cohort": "x"}},
            "aligned_dra_teams.kueue is set but engine is resourcequota",
        ),
        ({"kueue": {"cohort": "Bad_Cohort"}}, "aligned_dra_teams.kueue.cohort"),
        ({"kueue": {"bogus": 1}}, "aligned_dra_teams.kueue: unknown key 'bogus'"),
        ({"kueue": {"node_groups": {"h100": {"labels": {}}}}}, "aligned_dra_teams.kueue.node_groups.h100: unknown key"),
        ({"kueue": {"node_groups": {"h100": {"node_labels": {"a": 5}}}}}, "node_groups.h100.node_labels.a"),
        (
            {"kueue": {"resource_names": {"tpu": "x/y"}}},
            "aligned_dra_teams.kueue.resource_names: 'tpu' is not a DeviceClass",
        ),
        ({"kueue": {"resource_names": {"gpu": "a b"}}}, "aligned_dra_teams.kueue.resource_names.gpu"),
        ({"kueue": {"resource_names": {"gpu": "x/a", "aligned-gpu": "x/b"}}}, "names aligned-gpu a second time"),
        (
            {"kueue": {"what_if": [{"team": "vision", "bogus": 1}]}},
            "aligned_dra_teams.kueue.what_if[0]: unknown key 'bogus'",
        ),
        ({"kueue": {"what_if": [dict(W, **{"class": "tpu"})]}}, "aligned_dra_teams.kueue.what_if[0].class"),
        ({"kueue": {"what_if": [dict(W, **{"class": ["gpu"]})]}}, "what_if[0].class must be a name (got ['gpu'])"),
        ({"kueue": {"what_if": [dict(W, team={"a": 1})]}}, "what_if[0].team must be a name"),
        ({"kueue": {"what_if": [dict(W, name=None)]}}, "what_if[0].name must be a name (got None)"),
        ({"kueue": {"what_if": [dict(W, tier=["a"])]}}, "what_if[0].tier ['a'] is not one of"),
        ({"kueue": {"what_if": [dict(W, devices=[1])]}}, "what_if[0].devices must be a device count"),
        ({"kueue": {"what_if": [dict(W, running="yes")]}}, "what_if[0].running must be true or false"),
        ({"kueue": {"what_if": [dict(W, team="ghost")]}}, "aligned_dra_teams.kueue.what_if[0].team 'ghost'"),
        ({"kueue": {"what_if": "x"}}, "aligned_dra_teams.kueue.what_if must be a list"),
        ({"kueue": {"what_if": {}}}, "aligned_dra_teams.kueue.what_if must be a list"),
        ({"kueue": {"node_groups": ""}}, "aligned_dra_teams.kueue.node_groups must map"),
    ],
)
def test_bad_engine_settings_name_the_setting(change, message):
    with pytest.raises(ValueError) as info:
        render(dict(KUEUE_TEAMS, **change))
    assert message in str(info.value)


def test_engine_kueue_refuses_a_quota_class_with_an_extended_resource_name_and_both_takes_it():
    raw = dict(KUEUE_TEAMS, extended_resources={"gpu": "example.com/gpu"})
    with pytest.raises(KueueError) as err:
        render(raw)
    assert "aligned_dra_teams.teams[vision].quotas: aligned-gpu has the extended resource name" in str(err.value)
    quotas = by_kind(render(dict(raw, engine="both")))["ResourceQuota"]
    assert all(q["spec"]["hard"]["requests.example.com/gpu"] for q in quotas)


def test_the_kueue_example_of_the_docs_renders_as_documented():
    from pathlib import Path

    import yaml

    text = (Path(__file__).resolve().parents[6] / "docs" / "teams.md").read_text(encoding="utf-8")
    block = text.split("```yaml\naligned_dra_teams:\n  engine: kueue\n", 1)[1].split("```", 1)[0]
    raw = yaml.safe_load("aligned_dra_teams:\n  engine: kueue\n" + block)["aligned_dra_teams"]
    result = render(raw)
    kinds = by_kind(result)
    queue = kinds["ClusterQueue"][0]["spec"]
    assert kinds["ClusterQueue"][0]["metadata"]["name"] == "llm-training"
    assert queue["cohortName"] == "ai-west-research-org"
    assert {c["metadata"]["name"]: (c.get("spec") or {}).get("parentName") for c in kinds["Cohort"]} == {
        "ai-west": None,
        "ai-west-research-org": "ai-west",
    }
    assert sorted(f["metadata"]["name"] for f in kinds["ResourceFlavor"]) == ["s-a100", "s-h100"]
    own = queue["resourceGroups"][0]["flavors"][0]
    assert own["name"] == "s-h100"
    assert own["resources"] == [{"name": "example.com/gpu", "nominalQuota": 16, "borrowingLimit": 8, "lendingLimit": 4}]
    assert teams.validate_all(result["objects"], "1.36") == []


def test_the_what_if_example_of_the_docs_preempts_the_borrower():
    from pathlib import Path

    import yaml

    text = (Path(__file__).resolve().parents[6] / "docs" / "teams.md").read_text(encoding="utf-8")
    block = text.split("### What if", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    raw = yaml.safe_load(block)["aligned_dra_teams"]
    outcome = render(raw)["kueue"]["what_if"]
    # sweep ran on 4 + 2 borrowed; pretrain needs llm-training's 4 and only 2 are free: the borrower is
    # preempted (reclaimWithinCohort Any) and cannot come back (llm-training now lends nothing)
    assert outcome["teams"]["llm-training"]["by_nominal"] == {"aligned-gpu": 4}
    assert outcome["teams"]["vision"]["pending"] == {"aligned-gpu": 6}
    assert [(p["name"], p["by"]) for p in outcome["preemptions"]] == [("sweep", "llm-training/pretrain")]


@pytest.mark.parametrize("site", ["", "Site With Spaces", "-edge", None])
def test_a_site_that_cannot_be_a_label_value_is_refused(site):
    with pytest.raises(teams_settings.TeamsError, match=r"^site: "):
        teams.render({}, site, objects("1.36"), "1.36", class_keys=CLASS_KEYS)
