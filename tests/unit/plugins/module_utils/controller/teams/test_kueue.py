# SPDX-License-Identifier: Apache-2.0
"""Kueue queues of a site's teams: objects valid for Kueue's CRDs, refusals, capacity, idle, what-if."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import kueue, kueue_schemas
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import render as teams

REPO = Path(__file__).resolve().parents[6]
FIXTURES = REPO / "tests" / "fixtures" / "kueue-v0.19.2"
CLASS_KEYS = claims.settings({})["classes"]
KUEUE_TEAM_KEYS = ("quotas", "borrowing_limit", "lending_limit", "department", "node_group")
GPU, NIC = "aligned-gpu", "aligned-nic"


def claim_objects(minor: str = "1.36", **gates: bool) -> list[dict]:
    return claims.render({}, "s", minor, gates or None)["objects"]


def conf_for(
    teams_raw: list[dict],
    minor: str = "1.36",
    objects: list[dict] | None = None,
    engine: str = "kueue",
    kueue_conf: dict | None = None,
    **raw: object,
) -> dict:
    """Checked settings as teams.settings gives them, with the Kueue keys of each team laid over.

    The team settings' own checks (names, tiers, templates) run in teams.settings;
    the amounts go in as the settings would give them (DeviceClass names), so the
    checks under test are kueue's.
    """
    objects = objects if objects is not None else claim_objects(minor)
    base = [{k: v for k, v in t.items() if k not in KUEUE_TEAM_KEYS} for t in teams_raw]
    conf = teams.settings(dict(raw, teams=base), objects, CLASS_KEYS)
    for team, given in zip(conf["teams"], teams_raw, strict=True):
        for key in ("quotas", "borrowing_limit", "lending_limit"):
            team[key] = {CLASS_KEYS.get(k, k): v for k, v in (given.get(key) or {}).items()}
        team["department"] = given.get("department")
        team["node_group"] = given.get("node_group")
    conf["engine"] = engine
    conf["kueue"] = dict({"cohort": None, "node_groups": {}, "resource_names": {}}, **(kueue_conf or {}))
    return conf


def render(teams_raw: list[dict], minor: str = "1.36", objects: list[dict] | None = None, **kwargs) -> dict:
    options = {k: kwargs.pop(k) for k in ("plan", "feature_gates", "in_use") if k in kwargs}
    objects = objects if objects is not None else claim_objects(minor)
    conf = conf_for(teams_raw, minor, objects, **kwargs)
    return kueue.render(conf, "s", objects, minor=minor, **options)


def by_kind(result: dict) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for obj in result["objects"]:
        found.setdefault(obj["kind"], []).append(obj)
    return found


def queue(result: dict, name: str) -> dict:
    return next(o for o in result["objects"] if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == name)


def quotas(cq: dict) -> dict[str, dict[str, dict]]:
    """``{flavor: {resource: quota item}}`` of a ClusterQueue."""
    group = cq["spec"]["resourceGroups"][0]
    return {f["name"]: {r["name"]: r for r in f["resources"]} for f in group["flavors"]}


RICH = [
    {
        "name": "vision",
        "namespaces": ["vision-a", "vision-b"],
        "tier": "production",
        "templates": ["gpu-only", "gpu-nic-pair-1"],
        "quotas": {"gpu": 4, "nic": 2},
        "borrowing_limit": {"gpu": 2},
        "lending_limit": {"gpu": 6},
        "department": "ml",
        "node_group": "h100",
    },
    {
        "name": "nlp",
        "tier": "research",
        "templates": ["gpu-only"],
        "quotas": {"gpu": 2},
        "department": "ml",
        "node_group": "a100",
    },
    {"name": "batch", "tier": "opportunistic", "quotas": {"gpu": 3}, "node_group": "a100"},
]
NODE_GROUPS = {
    "h100": {"node_labels": {"aligned.dev/gpu-model": "h100"}},
    "a100": {"node_labels": {"aligned.dev/gpu-model": "a100", "aligned.dev/pool": "batch"}},
}
NLP = dict(RICH[1], department=None, node_group=None)  # without node groups
PLAN = {"classes": {GPU: {"devices": 16}, NIC: {"devices": 8}}}


def rich(**kwargs) -> dict:
    return render(RICH, kueue_conf={"node_groups": NODE_GROUPS}, plan=PLAN, **kwargs)


# -- objects ---------------------------------------------------------------------------------


def test_every_object_and_the_configuration_validate_against_the_embedded_crds():
    result = rich()
    assert kueue.validate_objects(result["objects"] + [result["configuration"]]) == []
    assert [o["kind"] for o in result["objects"]] == (
        ["WorkloadPriorityClass"] * 3
        + ["Cohort"] * 2
        + ["ResourceFlavor"] * 2
        + ["ClusterQueue"] * 3
        + ["LocalQueue"] * 4
    )
    assert all(o["apiVersion"] == "kueue.x-k8s.io/v1beta2" for o in result["objects"])


def test_cohorts_flavors_queues_and_priorities():
    result = rich()
    kinds = by_kind(result)
    cohorts = {c["metadata"]["name"]: c.get("spec") for c in kinds["Cohort"]}
    assert cohorts == {"aligned-s": None, "aligned-s-ml": {"parentName": "aligned-s"}}
    assert {f["metadata"]["name"]: f["spec"] for f in kinds["ResourceFlavor"]} == {
        "s-a100": {"nodeLabels": {"aligned.dev/gpu-model": "a100", "aligned.dev/pool": "batch"}},
        "s-h100": {"nodeLabels": {"aligned.dev/gpu-model": "h100"}},
    }
    vision = queue(result, "vision")
    assert vision["spec"]["cohortName"] == "aligned-s-ml"
    assert vision["spec"]["namespaceSelector"] == {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["vision-a", "vision-b"]}
        ]
    }
    assert vision["spec"]["resourceGroups"][0]["coveredResources"] == [
        "aligned.dev/aligned-gpu",
        "aligned.dev/aligned-nic",
    ]
    # own flavor first; nominal = quota per namespace x 2 namespaces; limits team-wide; lending only where quota is
    assert [f["name"] for f in vision["spec"]["resourceGroups"][0]["flavors"]] == ["s-h100", "s-a100"]
    q = quotas(vision)
    assert q["s-h100"]["aligned.dev/aligned-gpu"] == {
        "name": "aligned.dev/aligned-gpu",
        "nominalQuota": 8,
        "borrowingLimit": 2,
        "lendingLimit": 6,
    }
    assert q["s-a100"]["aligned.dev/aligned-gpu"] == {
        "name": "aligned.dev/aligned-gpu",
        "nominalQuota": 0,
        "borrowingLimit": 2,
    }
    assert q["s-h100"]["aligned.dev/aligned-nic"] == {"name": "aligned.dev/aligned-nic", "nominalQuota": 4}
    # the opportunistic team: no nominal quota, borrows up to its quota on every flavor
    batch = quotas(queue(result, "batch"))
    assert batch["s-a100"]["aligned.dev/aligned-gpu"] == {
        "name": "aligned.dev/aligned-gpu",
        "nominalQuota": 0,
        "borrowingLimit": 3,
    }
    assert batch["s-h100"]["aligned.dev/aligned-gpu"]["nominalQuota"] == 0
    assert queue(result, "batch")["spec"]["cohortName"] == "aligned-s"
    local = {(o["metadata"]["namespace"], o["metadata"]["name"]): o["spec"] for o in kinds["LocalQueue"]}
    assert local == {
        ("vision-a", "vision"): {"clusterQueue": "vision"},
        ("vision-b", "vision"): {"clusterQueue": "vision"},
        ("nlp", "nlp"): {"clusterQueue": "nlp"},
        ("batch", "batch"): {"clusterQueue": "batch"},
    }
    # WorkloadPriorityClasses mirror the tiers' PriorityClasses
    conf = conf_for(RICH, kueue_conf={"node_groups": NODE_GROUPS})
    pcs = {p["metadata"]["name"]: p["value"] for p in teams.priority_classes(conf, "s")}
    assert {w["metadata"]["name"]: w["value"] for w in kinds["WorkloadPriorityClass"]} == pcs
    labels = vision["metadata"]["labels"]
    assert labels["app.kubernetes.io/managed-by"] == "aligned.dra" and labels["aligned.dev/site"] == "s"


def test_preemption_follows_the_tier():
    result = rich()
    # production: the next lower tier is research (10000)
    assert queue(result, "vision")["spec"]["preemption"] == {
        "reclaimWithinCohort": "Any",
        "withinClusterQueue": "LowerPriority",
        "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 10000},
    }
    # research: the next lower tier is opportunistic (100)
    assert queue(result, "nlp")["spec"]["preemption"]["borrowWithinCohort"] == {
        "policy": "LowerPriority",
        "maxPriorityThreshold": 100,
    }
    assert queue(result, "batch")["spec"]["preemption"] == {
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
        "borrowWithinCohort": {"policy": "Never"},
    }
    # the lowest tier that preempts has no lower tier to preempt while borrowing
    tiers = {"low": {"name": "low", "value": 1, "preemption_policy": "PreemptLowerPriority", "guaranteed": False}}
    assert kueue.preemption(tiers, "low") == {
        "reclaimWithinCohort": "LowerPriority",
        "withinClusterQueue": "LowerPriority",
        "borrowWithinCohort": {"policy": "Never"},
    }


def test_configuration_maps_each_quota_class_once():
    result = rich()
    assert result["configuration"] == {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "featureGates": {"KueueDRAIntegration": True, "QuotaCheckStrategy": True},
        "resources": {
            "quotaCheckStrategy": "IgnoreUndeclared",
            "deviceClassMappings": [
                {"name": "aligned.dev/aligned-gpu", "deviceClassNames": [GPU]},
                {"name": "aligned.dev/aligned-nic", "deviceClassNames": [NIC]},
            ],
        },
    }
    renamed = render([NLP], kueue_conf={"resource_names": {GPU: "example.com/gpu"}})
    assert renamed["configuration"]["resources"]["deviceClassMappings"] == [
        {"name": "example.com/gpu", "deviceClassNames": [GPU]}
    ]
    assert quotas(queue(renamed, "nlp"))["s-default"] == {
        "example.com/gpu": {"name": "example.com/gpu", "nominalQuota": 2}
    }


def test_default_flavor_and_custom_cohort():
    result = render([NLP], kueue_conf={"cohort": "lab"})
    assert [o["metadata"]["name"] for o in result["objects"] if o["kind"] == "ResourceFlavor"] == ["s-default"]
    assert by_kind(result)["ResourceFlavor"][0]["spec"] == {}
    assert queue(result, "nlp")["spec"]["cohortName"] == "lab"


def test_engine_resourcequota_renders_nothing():
    result = render([NLP], engine="resourcequota")
    assert result["objects"] == [] and result["configuration"] is None and result["teams"] == []


# -- consumable capacity ------------------------------------------------------------------------


CAPACITY_TEAMS = [
    {"name": "vision", "namespaces": ["vision-a", "vision-b"], "tier": "production", "quotas": {"gpu": "160Gi"}},
    {
        "name": "nlp",
        "tier": "research",
        "templates": ["fractional-gpu"],
        "quotas": {"gpu": "80Gi"},
        "lending_limit": {"gpu": "40Gi"},
    },
]


def test_capacity_amounts_map_the_class_by_gpu_memory():
    result = render(CAPACITY_TEAMS, plan=PLAN)
    mapping = result["configuration"]["resources"]["deviceClassMappings"]
    assert mapping == [
        {
            "name": "aligned.dev/aligned-gpu",
            "deviceClassNames": [GPU],
            "sources": [
                {
                    "capacity": {
                        "name": "memory",  # what the fractional template requests and the driver publishes
                        "driver": "dra.aligned.dev",
                        "deviceSelector": {
                            "cel": {
                                "expression": 'device.driver == "dra.aligned.dev" && device.allowMultipleAllocations == true'
                            }
                        },
                    }
                }
            ],
        }
    ]
    assert result["configuration"]["featureGates"]["KueueDRAIntegrationConsumableCapacity"] is True
    # 160Gi per namespace x 2 namespaces
    assert quotas(queue(result, "vision"))["s-default"]["aligned.dev/aligned-gpu"]["nominalQuota"] == "320Gi"
    assert quotas(queue(result, "nlp"))["s-default"]["aligned.dev/aligned-gpu"] == {
        "name": "aligned.dev/aligned-gpu",
        "nominalQuota": "80Gi",
        "lendingLimit": "40Gi",
    }
    assert result["mappings"][GPU] == {
        "unit": "capacity",
        "capacity": "memory",
        "driver": "dra.aligned.dev",
        "resource": "aligned.dev/aligned-gpu",
    }
    rows = {r["name"]: r for r in result["teams"]}
    assert rows["nlp"]["nominal"] == {GPU: "80Gi"} and rows["nlp"]["lendable"] == {GPU: "40Gi"}
    # the plan counts devices, not memory: not compared
    assert result["capacity"][0]["status"] == "unknown" and result["problems"] == []
    assert kueue.validate_objects(result["objects"] + [result["configuration"]]) == []


def test_device_counts_on_a_class_with_a_fractional_template_are_noted():
    result = render([NLP])
    assert "sources" not in result["configuration"]["resources"]["deviceClassMappings"][0]
    assert any("fractional-gpu" in n and "whole device" in n for n in result["notes"])


def test_shared_resource_claim_fallback_is_refused_for_capacity_amounts():
    # 1.35 has no consumable capacity: the fractional GPU is the shared ResourceClaim fractional-gpu-shared
    objects = claim_objects("1.35")
    assert any(o["kind"] == "ResourceClaim" for o in objects)
    with pytest.raises(kueue.KueueError) as err:
        render(CAPACITY_TEAMS[:1], minor="1.35", objects=objects)
    assert "aligned_dra_teams.teams[vision].quotas.aligned-gpu" in str(err.value)
    assert "Kueue cannot account shared ResourceClaims" in str(err.value)


def test_shared_resource_claim_copied_to_a_team_is_refused():
    objects = claim_objects("1.35")
    team = {"name": "nlp", "tier": "research", "templates": ["fractional-gpu-shared"], "quotas": {"gpu": 2}}
    with pytest.raises(kueue.KueueError) as err:
        render([team], minor="1.35", objects=objects)
    assert "aligned_dra_teams.teams[nlp].templates" in str(err.value)
    assert "Kueue cannot account shared ResourceClaims" in str(err.value)
    # the same team without the shared claim is served, counted in devices
    team["templates"] = ["gpu-only"]
    assert queue(render([team], minor="1.35", objects=objects), "nlp")


def test_capacity_amount_needs_a_capacity_template():
    team = {"name": "net", "tier": "research", "quotas": {"nic": "100G"}}
    with pytest.raises(kueue.KueueError) as err:
        render([team])
    assert "aligned_dra_teams.teams[net].quotas.aligned-nic" in str(err.value)
    assert "requests capacity" in str(err.value)


def test_capacity_needs_the_kubernetes_gate():
    with pytest.raises(kueue.KueueError) as err:
        render(CAPACITY_TEAMS, feature_gates={"DRAConsumableCapacity": False})
    assert "aligned_dra_teams.teams[vision].quotas.aligned-gpu" in str(err.value)
    assert "DRAConsumableCapacity" in str(err.value)


def test_mixed_units_on_one_class_are_refused():
    mixed = [CAPACITY_TEAMS[0], {"name": "nlp", "tier": "research", "quotas": {"gpu": 2}}]
    with pytest.raises(kueue.KueueError) as err:
        render(mixed)
    # both settings are named: the one that gives capacity and the one that gives devices
    assert "aligned_dra_teams.teams[vision].quotas.aligned-gpu: a capacity amount" in str(err.value)
    assert "aligned_dra_teams.teams[nlp].quotas.aligned-gpu is a device count" in str(err.value)


def test_capacity_with_an_extended_resource_name_is_refused():
    objects = claims.render({"extended_resources": {"gpu": "example.com/gpu"}}, "s", "1.36")["objects"]
    with pytest.raises(kueue.KueueError) as err:
        render(CAPACITY_TEAMS[:1], objects=objects)
    assert "aligned_dra_teams.teams[vision].quotas.aligned-gpu" in str(err.value)
    assert "extended resource name" in str(err.value)


# -- refusals ------------------------------------------------------------------------------------


def refusal(teams_raw: list[dict], **kwargs) -> str:
    with pytest.raises(kueue.KueueError) as err:
        render(teams_raw, **kwargs)
    return str(err.value)


def test_lending_above_nominal_is_refused():
    team = {"name": "vision", "tier": "production", "quotas": {"gpu": 8}, "lending_limit": {"gpu": 10}}
    assert refusal([team]) == (
        "aligned_dra_teams.teams[vision].lending_limit.aligned-gpu: 10 is above the team's nominal quota 8 "
        "(8 per namespace x 1 namespaces)"
    )
    # per namespace x namespaces: 2 x 4 = 8 >= 6, accepted
    team.update(namespaces=["v1", "v2"], quotas={"gpu": 4}, lending_limit={"gpu": 6})
    assert quotas(queue(render([team]), "vision"))["s-default"]["aligned.dev/aligned-gpu"]["lendingLimit"] == 6


def test_opportunistic_teams_cannot_lend_or_set_a_borrowing_limit():
    team = {"name": "batch", "tier": "opportunistic", "quotas": {"gpu": 2}, "borrowing_limit": {"gpu": 1}}
    assert "aligned_dra_teams.teams[batch].borrowing_limit.aligned-gpu" in refusal([team])
    team = {"name": "batch", "tier": "opportunistic", "quotas": {"gpu": 2}, "lending_limit": {"gpu": 1}}
    message = refusal([team])
    assert "aligned_dra_teams.teams[batch].lending_limit.aligned-gpu" in message and "not guaranteed" in message


def test_limit_without_quota_is_refused():
    team = {"name": "vision", "tier": "production", "quotas": {"gpu": 2}, "borrowing_limit": {"nic": 1}}
    assert "aligned_dra_teams.teams[vision].borrowing_limit.aligned-nic: the team has no quota" in refusal([team])


def test_quota_on_a_class_the_site_does_not_render_is_refused():
    team = {"name": "vision", "tier": "production", "quotas": {"tpu": 2}}
    assert "aligned_dra_teams.teams[vision].quotas.tpu: not a DeviceClass" in refusal([team])


def test_first_available_templates_are_refused():
    team = {
        "name": "vision",
        "tier": "production",
        "templates": ["gpu-nic-pair-1-fallback"],
        "quotas": {"gpu": 2, "nic": 2},
    }
    message = refusal([team])
    assert message.startswith("aligned_dra_teams.teams[vision].templates:") and "firstAvailable" in message


def test_admin_access_teams_are_refused():
    team = {"name": "mon", "tier": "research", "admin_access": True, "quotas": {"gpu": 1}}
    message = refusal([team])
    assert message.startswith("aligned_dra_teams.teams[mon].admin_access:")
    assert "adminAccess" in message and "allocationMode All" in message


def test_template_with_an_unmapped_class_is_refused():
    # gpu-nic-pair-1 asks for a NIC too; nobody has a NIC quota, so Kueue would not admit it
    team = {"name": "vision", "tier": "production", "templates": ["gpu-nic-pair-1"], "quotas": {"gpu": 2}}
    message = refusal([team])
    assert message.startswith(
        "aligned_dra_teams.teams[vision].templates: gpu-nic-pair-1 requests DeviceClass aligned-nic"
    )


def test_template_refusals_name_what_kueue_refuses():
    template = {
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "a", "exactly": {"deviceClassName": GPU, "allocationMode": "All", "adminAccess": True}}
                    ]
                }
            }
        },
    }
    reasons = kueue.template_refusals(template)
    assert reasons == [
        "t request a uses adminAccess, which Kueue v0.19.2 refuses",
        "t request a uses allocationMode All, which Kueue v0.19.2 refuses",
    ]


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ({GPU: "example.com/x", NIC: "example.com/x"}, "both map to 'example.com/x'"),
        ({GPU: "cpu"}, "aligned_dra_teams.kueue.resource_names.aligned-gpu: 'cpu' is not a Kueue resource name"),
        ({GPU: "kubernetes.io/gpu"}, "reserved"),
        ({GPU: "Bad Name"}, "is not a Kueue resource name"),
        ({"tpu": "example.com/tpu"}, "aligned_dra_teams.kueue.resource_names.tpu: not a DeviceClass"),
    ],
)
def test_bad_resource_names_are_refused(names, expected):
    assert expected in refusal(RICH[:1], kueue_conf={"node_groups": NODE_GROUPS, "resource_names": names})


def test_node_group_settings_are_checked():
    team = dict(RICH[1], node_group=None)
    assert "aligned_dra_teams.teams[nlp].node_group: the site has node groups" in refusal(
        [team], kueue_conf={"node_groups": NODE_GROUPS}
    )
    assert "aligned_dra_teams.teams[nlp].node_group 'a100': the site has no node groups" in refusal(RICH[1:2])
    assert "aligned_dra_teams.kueue.node_groups.a100.node_labels: a node group needs at least one" in refusal(
        RICH[1:2], kueue_conf={"node_groups": {"a100": {"node_labels": {}}}}
    )
    many = {f"l{i}": "x" for i in range(9)}
    assert "9 labels, a ResourceFlavor takes 8" in refusal(
        RICH[1:2], kueue_conf={"node_groups": {"a100": {"node_labels": many}}}
    )


def test_bad_department_is_refused():
    team = dict(NLP, department="Bad_Dept")
    assert "aligned_dra_teams.teams[].department 'Bad_Dept' is not a DNS label" in refusal([team])


# -- capacity and idle -------------------------------------------------------------------------------


def test_nominal_quotas_against_the_plan():
    teams_raw = [
        {"name": "a", "namespaces": ["a1", "a2"], "tier": "production", "quotas": {"gpu": 4}},
        {"name": "b", "tier": "research", "quotas": {"gpu": 3}},
        {"name": "c", "tier": "opportunistic", "quotas": {"gpu": 5}},
    ]
    # guaranteed nominal: 4 x 2 + 3 = 11; the opportunistic 5 only borrows
    result = render(teams_raw, plan={"classes": {GPU: {"devices": 10}}})
    row = result["capacity"][0]
    assert (row["nominal"], row["borrow_only"], row["capacity"], row["status"]) == (11, 5, 10, "over_limit")
    assert result["problems"] == [
        "DeviceClass aligned-gpu: the ClusterQueues' nominal quotas in cohort add up to 11 devices, the site has 10 "
        "and no oversubscription is allowed (aligned_dra_teams.oversubscription)"
    ]
    # 11 <= 10 x 1.25
    result = render(teams_raw, plan={"classes": {GPU: {"devices": 10}}}, oversubscription={"gpu": 1.25})
    assert result["capacity"][0]["status"] == "oversubscribed" and result["problems"] == []
    assert render(teams_raw)["capacity"][0]["status"] == "unknown"


def test_idle_is_what_could_be_lent_now():
    teams_raw = [
        {"name": "a", "namespaces": ["a1", "a2"], "tier": "production", "quotas": {"gpu": 4, "nic": 2}},
        {"name": "b", "tier": "research", "quotas": {"gpu": 4}, "lending_limit": {"gpu": 1}},
        {"name": "c", "tier": "opportunistic", "quotas": {"gpu": 2}},
    ]
    in_use = {"a": {GPU: 3, NIC: 5}, "b": {GPU: 1}}
    rows = {r["name"]: r for r in render(teams_raw, in_use=in_use)["teams"]}
    # a: nominal 8, lends all of it: min(8, 8 - 3) = 5 GPUs; NICs: nominal 4, 5 in use: 0
    assert rows["a"]["idle"] == {GPU: 5, NIC: 0}
    assert rows["a"]["borrowable"] == {GPU: None, NIC: None} and rows["a"]["lendable"] == {GPU: 8, NIC: 4}
    # b: nominal 4, 1 in use, lends at most 1: min(1, 3) = 1; no NIC quota
    assert rows["b"]["idle"] == {GPU: 1, NIC: 0} and rows["b"]["lendable"] == {GPU: 1, NIC: 0}
    # c: no nominal quota, nothing to lend; nothing in use is reported as 0
    assert rows["c"]["idle"] == {GPU: 0, NIC: 0} and rows["c"]["borrowable"] == {GPU: 2, NIC: 0}
    assert "idle" not in render(teams_raw)["teams"][0]


# -- validation of broken objects ----------------------------------------------------------------


def valid_queue() -> dict:
    return copy.deepcopy(queue(rich(), "vision"))


def problems_of(obj: dict) -> list[str]:
    return kueue.validate_objects([obj])


def test_unknown_fields_are_refused_with_their_path():
    cq = valid_queue()
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuotas"] = 3
    cq["spec"]["colour"] = "red"
    found = problems_of(cq)
    assert any(p.startswith("ClusterQueue vision: spec.colour: unknown field") for p in found)
    assert any("spec.resourceGroups[0].flavors[0].resources[0].nominalQuotas: unknown field" in p for p in found)
    cq = valid_queue()
    cq["metadata"]["uid"] = "x"
    assert problems_of(cq) == [
        "ClusterQueue vision: metadata.uid: unknown field (rendered objects set name, namespace, labels, annotations)"
    ]


def test_negative_quota_is_refused():
    cq = valid_queue()
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = -1
    assert (
        "ClusterQueue vision: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: -1 must be non-negative"
        in (problems_of(cq))
    )


def test_wrong_enum_and_pattern_are_refused():
    cq = valid_queue()
    cq["spec"]["preemption"]["withinClusterQueue"] = "Always"
    found = problems_of(cq)
    assert len(found) == 1 and found[0].startswith("ClusterQueue vision: spec.preemption.withinClusterQueue: 'Always'")
    cq = valid_queue()
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "lots"
    assert any("spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit" in p for p in problems_of(cq))


def test_cel_rules_of_the_crd_are_evaluated():
    cq = valid_queue()
    cq["spec"]["preemption"]["reclaimWithinCohort"] = "Never"  # borrowWithinCohort stays LowerPriority
    assert "ClusterQueue vision: spec.preemption: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never" in (
        problems_of(cq)
    )
    cq = valid_queue()
    del cq["spec"]["resourceGroups"][0]["flavors"][1]["resources"][1]
    found = problems_of(cq)
    assert (
        "ClusterQueue vision: spec.resourceGroups[0]: flavors must have the same number of resources as the coveredResources"
        in (found)
    )
    cq = valid_queue()
    del cq["spec"]["cohortName"]
    found = problems_of(cq)
    assert "ClusterQueue vision: spec: borrowingLimit must be nil when cohort is empty" in found
    # the webhook's rules as well
    assert any("lendingLimit: must be unset without spec.cohortName" in p for p in found)
    # flavorFungibility: preference needs both TryNextFlavor, after defaulting whenCanBorrow to MayStopSearch
    cq = valid_queue()
    cq["spec"]["flavorFungibility"] = {"preference": "BorrowingOverPreemption", "whenCanPreempt": "TryNextFlavor"}
    assert problems_of(cq) == [
        "ClusterQueue vision: spec.flavorFungibility: preference can only be set when both whenCanBorrow and "
        "whenCanPreempt are TryNextFlavor"
    ]


def test_lending_above_nominal_and_mismatched_resources_are_refused():
    cq = valid_queue()
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = 9
    assert any(
        "resources[0].lendingLimit: must be less than or equal to the nominalQuota" in p for p in problems_of(cq)
    )
    cq = valid_queue()
    resources = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    resources.reverse()
    assert any(
        "resources[0].name: 'aligned.dev/aligned-nic' must match coveredResources[0]" in p for p in problems_of(cq)
    )


def test_scope_int32_and_unknown_kinds():
    result = rich()
    local = copy.deepcopy(next(o for o in result["objects"] if o["kind"] == "LocalQueue"))
    del local["metadata"]["namespace"]
    assert any("metadata.namespace: LocalQueue is namespaced" in p for p in problems_of(local))
    wpc = copy.deepcopy(next(o for o in result["objects"] if o["kind"] == "WorkloadPriorityClass"))
    wpc["value"] = 2**31
    assert any(p.startswith("WorkloadPriorityClass aligned-opportunistic: value:") for p in problems_of(wpc))
    assert problems_of({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "x"}}) == [
        "ClusterQueue x: no embedded schema for kueue.x-k8s.io/v1beta1 ClusterQueue (Kueue v0.19.2)"
    ]


def test_broken_configuration_is_refused():
    cfg = copy.deepcopy(render(CAPACITY_TEAMS)["configuration"])
    del cfg["featureGates"]["KueueDRAIntegrationConsumableCapacity"]
    cfg["resources"]["deviceClassMappings"].append({"name": "example.com/again", "deviceClassNames": [GPU]})
    cfg["resources"]["colour"] = "red"
    found = kueue.validate_configuration(cfg)
    assert "resources.colour: unknown field" in found
    assert (
        "resources.deviceClassMappings[0].sources[0].capacity: capacity sources require "
        "KueueDRAIntegrationConsumableCapacity to be enabled" in found
    )
    assert (
        "resources.deviceClassMappings[1].deviceClassNames[0]: aligned-gpu is already mapped to aligned.dev/aligned-gpu"
        in (found)
    )
    assert kueue.validate_objects([cfg])[0].startswith("Configuration: ")


# -- the embedded schemas ------------------------------------------------------------------------


def test_embedded_schemas_match_the_crds():
    spec = importlib.util.spec_from_file_location("kueue_schemas_generator", REPO / "scripts" / "kueue_schemas.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    generated = generator.render(FIXTURES)
    committed = (REPO / "plugins" / "module_utils" / "controller" / "teams" / "kueue_schemas.py").read_text(
        encoding="utf-8"
    )
    assert generated == committed, "run: .venv/bin/python scripts/kueue_schemas.py tests/fixtures/kueue-v0.19.2"
    assert set(kueue_schemas.SCOPES) == {
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "ResourceFlavor",
        "WorkloadPriorityClass",
    }
    assert kueue_schemas.KUEUE_COMMIT == "8eab6877"
    assert "Apache License" in (REPO / "licenses" / "kueue-v0.19.2-LICENSE").read_text(encoding="utf-8")


# -- what if -------------------------------------------------------------------------------------


def two_teams(b_lend: int | None = None, b_tier: str = "production") -> dict:
    b = {"name": "b", "tier": b_tier, "quotas": {"gpu": 4}}
    if b_lend is not None:
        b["lending_limit"] = {"gpu": b_lend}
    return render([{"name": "a", "tier": "production", "quotas": {"gpu": 4}}, b])


def w(team: str, name: str, devices: int, running: bool = False, **extra) -> dict:
    return dict({"team": team, "name": name, "class": GPU, "devices": devices, "running": running}, **extra)


def test_what_if_borrows_idle_quota():
    # 8 GPUs: a nominal 4, b nominal 4, b idle. a asks for 3 x 2 = 6: 4 by its nominal quota + 2 borrowed from b
    out = kueue.what_if(two_teams(), {GPU: 8}, [w("a", "a1", 2), w("a", "a2", 2), w("a", "a3", 2)])
    a = out["teams"]["a"]
    assert (a["by_nominal"][GPU], a["by_borrowing"][GPU], a["pending"][GPU]) == (4, 2, 0)
    assert a["admitted"] == ["a1", "a2", "a3"] and out["preemptions"] == []
    # 6 admitted of 8 GPUs: nothing over the hardware
    assert out["over_capacity"] == {}
    # with 5 GPUs on the site the quotas (4 + 4) promise more than there is: 6 admitted, 1 over
    out = kueue.what_if(two_teams(), {GPU: 5}, [w("a", "a1", 2), w("a", "a2", 2), w("a", "a3", 2)])
    assert out["over_capacity"] == {GPU: {"capacity": 5, "admitted": 6, "over": 1}}


def test_what_if_refuses_a_running_workload_no_queue_could_have_admitted():
    # a: nominal 4, b lends 4: at most 8 can run for a; a running workload of 9 is not a state Kueue has
    with pytest.raises(kueue.KueueError) as err:
        kueue.what_if(two_teams(), {GPU: 8}, [w("a", "big", 9, running=True)])
    assert "what_if[0]: running workload big of team a does not fit" in str(err.value)


def test_what_if_over_capacity_leaves_out_classes_counted_in_memory():
    rendered = render(CAPACITY_TEAMS[:1])
    cls = next(iter(rendered["mappings"]))
    assert rendered["mappings"][cls]["unit"] == kueue.UNIT_CAPACITY
    out = kueue.what_if(rendered, {cls: 1}, [{"team": "vision", "name": "m", "class": cls, "devices": "20Gi"}])
    assert out["over_capacity"] == {}


def test_what_if_reclaims_lent_quota():
    # a runs 6 (4 nominal + 2 borrowed); b now asks for 4 = its nominal quota. Cohort: 6 + 4 = 10 > 8, so b
    # reclaims (reclaimWithinCohort Any): the candidates are a's workloads (a borrows), the most recently
    # admitted first: a3 (2 GPUs) goes, a is back at 4, 4 + 4 = 8 fits.
    demands = [w("a", "a1", 2, True), w("a", "a2", 2, True), w("a", "a3", 2, True), w("b", "b1", 4)]
    out = kueue.what_if(two_teams(), {GPU: 8}, demands)
    assert out["preemptions"] == [
        {"name": "a3", "team": "a", "class": GPU, "devices": 2, "by": "b/b1", "reason": "reclaim within cohort"}
    ]
    assert out["teams"]["a"]["by_nominal"][GPU] == 4 and out["teams"]["a"]["by_borrowing"][GPU] == 0
    assert out["teams"]["a"]["pending_workloads"] == ["a3"] and out["teams"]["a"]["pending"][GPU] == 2
    assert out["teams"]["b"]["by_nominal"][GPU] == 4 and out["teams"]["b"]["admitted"] == ["b1"]


def test_what_if_lending_limit_keeps_quota_back():
    # b lends at most 2 of its 4: the cohort pool is a's 4 + b's 2 = 6, so a gets 4 + 2 and a third
    # workload of 2 waits, even though b's other 2 GPUs are idle
    out = kueue.what_if(
        two_teams(b_lend=2), {GPU: 8}, [w("a", "a1", 2), w("a", "a2", 2), w("a", "a3", 2), w("a", "a4", 2)]
    )
    a = out["teams"]["a"]
    assert (a["by_nominal"][GPU], a["by_borrowing"][GPU]) == (4, 2)
    assert a["pending_workloads"] == ["a4"]
    # b can still use the 2 it keeps back without preempting anyone: its reserved part is outside the pool
    out = kueue.what_if(
        two_teams(b_lend=2),
        {GPU: 8},
        [w("a", "a1", 2, True), w("a", "a2", 2, True), w("a", "a3", 2, True), w("b", "b1", 2)],
    )
    assert out["preemptions"] == [] and out["teams"]["b"]["by_nominal"][GPU] == 2


def test_what_if_opportunistic_team_borrows_only_and_is_reclaimed():
    # c (opportunistic, quota 3) has no nominal quota: it borrows a's idle GPUs, at most 3
    result = render(
        [
            {"name": "a", "tier": "production", "quotas": {"gpu": 4}},
            {"name": "c", "tier": "opportunistic", "quotas": {"gpu": 3}},
        ]
    )
    out = kueue.what_if(result, None, [w("c", "c1", 2), w("c", "c2", 2)])
    c = out["teams"]["c"]
    # c1: 2 borrowed; c2 would make 4 > borrowingLimit 3: pending
    assert (c["by_nominal"][GPU], c["by_borrowing"][GPU], c["pending_workloads"]) == (0, 2, ["c2"])
    # a asks for its 4: 2 + 4 = 6 > 4 in the cohort; c borrows, a reclaims c1
    out = kueue.what_if(result, None, [w("c", "c1", 2, True), w("a", "a1", 4)])
    assert [(e["name"], e["reason"]) for e in out["preemptions"]] == [("c1", "reclaim within cohort")]
    assert out["teams"]["c"]["by_borrowing"][GPU] == 0 and out["teams"]["a"]["by_nominal"][GPU] == 4


def test_what_if_priority_within_the_cluster_queue():
    # a alone (nominal 4, no cohort members to borrow from): an opportunistic-tier workload of a holds 4;
    # a production workload of a asks for 2: withinClusterQueue LowerPriority preempts the lower one
    result = render([{"name": "a", "tier": "production", "quotas": {"gpu": 4}}])
    demands = [w("a", "low", 4, True, tier="opportunistic"), w("a", "high", 2)]
    out = kueue.what_if(result, None, demands)
    assert out["preemptions"] == [
        {"name": "low", "team": "a", "class": GPU, "devices": 4, "by": "a/high", "reason": "within cluster queue"}
    ]
    assert out["teams"]["a"]["admitted"] == ["high"]
    # pending workloads are admitted in priority order: with nothing running, high goes first, then low
    # does not fit (2 + 4 > 4) and waits
    out = kueue.what_if(result, None, [w("a", "low", 4, tier="opportunistic"), w("a", "high", 2)])
    assert out["teams"]["a"]["admitted"] == ["high"] and out["teams"]["a"]["pending_workloads"] == ["low"]


def borrow_cohort(threshold: int | None = None) -> dict:
    """p (production, nominal 2), r (research, nominal 4), o (opportunistic, quota 4) share 6 GPUs."""
    result = render(
        [
            {"name": "p", "tier": "production", "quotas": {"gpu": 2}},
            {"name": "r", "tier": "research", "quotas": {"gpu": 4}},
            {"name": "o", "tier": "opportunistic", "quotas": {"gpu": 4}},
        ]
    )
    if threshold is not None:
        queue(result, "p")["spec"]["preemption"]["borrowWithinCohort"]["maxPriorityThreshold"] = threshold
    return result


def test_what_if_borrow_within_cohort_and_its_threshold():
    # o borrows 4 (r idle). p asks for 4: above its nominal 2, so it must borrow; the pool is 2 + 4 = 6,
    # 4 (o) + 4 (p) = 8 > 6. borrowWithinCohort LowerPriority (threshold 10000) lets p preempt o's
    # borrowers of priority 100: o2 (the most recent) goes, 2 + 4 = 6 fits.
    demands = [w("o", "o1", 2, True), w("o", "o2", 2, True), w("p", "p1", 4)]
    out = kueue.what_if(borrow_cohort(), None, demands)
    assert out["preemptions"] == [
        {"name": "o2", "team": "o", "class": GPU, "devices": 2, "by": "p/p1", "reason": "borrow within cohort"}
    ]
    assert (out["teams"]["p"]["by_nominal"][GPU], out["teams"]["p"]["by_borrowing"][GPU]) == (2, 2)
    # with the threshold below o's priority (50 < 100) no borrower may be preempted: p1 waits
    out = kueue.what_if(borrow_cohort(threshold=50), None, demands)
    assert out["preemptions"] == [] and out["teams"]["p"]["pending_workloads"] == ["p1"]


def test_what_if_reclaim_needs_the_workload_within_nominal():
    # r (research, nominal 4) runs 6: 4 + 2 borrowed from p's idle 2. p asks for 2 = its nominal quota:
    # reclaim (Any) takes r's most recent workload; the preemption set is minimised to one 2-GPU workload
    demands = [w("r", "r1", 2, True), w("r", "r2", 2, True), w("r", "r3", 2, True), w("p", "p1", 2)]
    out = kueue.what_if(borrow_cohort(), None, demands)
    assert [(e["name"], e["reason"]) for e in out["preemptions"]] == [("r3", "reclaim within cohort")]
    assert out["teams"]["r"]["by_nominal"][GPU] == 4 and out["teams"]["r"]["by_borrowing"][GPU] == 0


def test_what_if_from_settings_and_bad_demands():
    conf = conf_for([{"name": "a", "tier": "production", "quotas": {"gpu": 4}}])
    out = kueue.what_if(conf, {GPU: 2}, [w("a", "a1", 3)])
    # admitted by quota (3 <= 4), over the hardware (3 > 2): its pods would wait for devices
    assert out["teams"]["a"]["admitted"] == ["a1"] and out["over_capacity"][GPU] == {
        "capacity": 2,
        "admitted": 3,
        "over": 1,
    }
    result = render([{"name": "a", "tier": "production", "quotas": {"gpu": 4}}])
    with pytest.raises(kueue.KueueError, match=r"what_if\[0\].team 'zz' is not a team"):
        kueue.what_if(result, None, [w("zz", "x", 1)])
    with pytest.raises(kueue.KueueError, match=r"what_if\[0\].class 'aligned-nic' has no Kueue quota"):
        kueue.what_if(result, None, [dict(w("a", "x", 1), **{"class": NIC})])
    with pytest.raises(kueue.KueueError, match=r"what_if\[0\].tier 'gold'"):
        kueue.what_if(result, None, [w("a", "x", 1, tier="gold")])
    with pytest.raises(kueue.KueueError, match=r"what_if\[0\].devices must be an integer"):
        kueue.what_if(result, None, [w("a", "x", "2Gi")])


def test_render_runs_the_sites_what_if():
    conf = conf_for(
        [{"name": "a", "tier": "production", "quotas": {"gpu": 4}}], kueue_conf={"what_if": [w("a", "a1", 6)]}
    )
    result = kueue.render(conf, "s", claim_objects(), plan={"classes": {GPU: {"devices": 8}}})
    # alone in the cohort, a cannot borrow: 6 > 4 waits
    assert result["what_if"]["teams"]["a"]["pending_workloads"] == ["a1"]


def test_quantities():
    assert kueue.quantity_text(kueue.amount("160Gi") * 2) == "320Gi"
    assert kueue.quantity_text(kueue.amount("1500m")) == "1500m"
    assert kueue.quantity_text(kueue.amount(3)) == "3"


def test_a_site_with_the_shared_fractional_claim_says_kueue_cannot_account_it():
    # 1.35 renders the fractional GPU as one shared ResourceClaim: device-count quotas still work, with a note
    objects = claims.render({}, "s", "1.35")["objects"]
    rendered = render([{"name": "vision", "tier": "production", "quotas": {"gpu": 2}}], objects=objects, minor="1.35")
    assert any("shared ResourceClaim" in note and "cannot account" in note for note in rendered["notes"])
    # a 1.36 site renders a template instead: no such note
    assert not any(
        "shared ResourceClaim" in note for note in render([{"name": "vision", "quotas": {"gpu": 2}}])["notes"]
    )
