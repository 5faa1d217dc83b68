# SPDX-License-Identifier: Apache-2.0
"""Kueue queues of a site's teams: objects valid for Kueue's CRDs, refusals, capacity, idle."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import api as kueue_api
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import checks as kueue_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import objects as kueue
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import schemas as kueue_schemas
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import render as teams_model
from ansible_collections.aligned.dra.tests.support.sites.kueue_teams import (
    CAPACITY_TEAMS,
    GPU,
    NIC,
    NODE_GROUPS,
    PLAN,
    RICH,
    claim_objects,
    conf_for,
    queue,
    render,
    rich,
)

REPO = Path(__file__).resolve().parents[7]
FIXTURES = REPO / "tests" / "fixtures" / "kueue-v0.19.2"


def by_kind(result: dict) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for obj in result["objects"]:
        found.setdefault(obj["kind"], []).append(obj)
    return found


def quotas(cq: dict) -> dict[str, dict[str, dict]]:
    """``{flavor: {resource: quota item}}`` of a ClusterQueue."""
    group = cq["spec"]["resourceGroups"][0]
    return {f["name"]: {r["name"]: r for r in f["resources"]} for f in group["flavors"]}


NLP = dict(RICH[1], department=None, node_group=None)  # without node groups


# -- objects ---------------------------------------------------------------------------------


def test_every_object_and_the_configuration_validate_against_the_embedded_crds():
    result = rich()
    assert kueue_checks.validate_objects(result["objects"] + [result["configuration"]]) == []
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
    pcs = {p["metadata"]["name"]: p["value"] for p in teams_model.priority_classes(conf, "s")}
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
    assert kueue_checks.validate_objects(result["objects"] + [result["configuration"]]) == []


def test_device_counts_on_a_class_with_a_fractional_template_are_noted():
    result = render([NLP])
    assert "sources" not in result["configuration"]["resources"]["deviceClassMappings"][0]
    assert any("fractional-gpu" in n and "whole device" in n for n in result["notes"])


def test_shared_resource_claim_fallback_is_refused_for_capacity_amounts():
    # 1.35 has no consumable capacity: the fractional GPU is the shared ResourceClaim fractional-gpu-shared
    objects = claim_objects("1.35")
    assert any(o["kind"] == "ResourceClaim" for o in objects)
    with pytest.raises(kueue_api.KueueError) as err:
        render(CAPACITY_TEAMS[:1], minor="1.35", objects=objects)
    assert "aligned_dra_teams.teams[vision].quotas.aligned-gpu" in str(err.value)
    assert "Kueue cannot account shared ResourceClaims" in str(err.value)


def test_shared_resource_claim_copied_to_a_team_is_refused():
    objects = claim_objects("1.35")
    team = {"name": "nlp", "tier": "research", "templates": ["fractional-gpu-shared"], "quotas": {"gpu": 2}}
    with pytest.raises(kueue_api.KueueError) as err:
        render([team], minor="1.35", objects=objects)
    assert "aligned_dra_teams.teams[nlp].templates" in str(err.value)
    assert "Kueue cannot account shared ResourceClaims" in str(err.value)
    # the same team without the shared claim is served, counted in devices
    team["templates"] = ["gpu-only"]
    assert queue(render([team], minor="1.35", objects=objects), "nlp")


def test_capacity_amount_needs_a_capacity_template():
    team = {"name": "net", "tier": "research", "quotas": {"nic": "100G"}}
    with pytest.raises(kueue_api.KueueError) as err:
        render([team])
    assert "aligned_dra_teams.teams[net].quotas.aligned-nic" in str(err.value)
    assert "requests capacity" in str(err.value)


def test_capacity_needs_the_kubernetes_gate():
    with pytest.raises(kueue_api.KueueError) as err:
        render(CAPACITY_TEAMS, feature_gates={"DRAConsumableCapacity": False})
    assert "aligned_dra_teams.teams[vision].quotas.aligned-gpu" in str(err.value)
    assert "DRAConsumableCapacity" in str(err.value)


def test_mixed_units_on_one_class_are_refused():
    mixed = [CAPACITY_TEAMS[0], {"name": "nlp", "tier": "research", "quotas": {"gpu": 2}}]
    with pytest.raises(kueue_api.KueueError) as err:
        render(mixed)
    # both settings are named: the one that gives capacity and the one that gives devices
    assert "aligned_dra_teams.teams[vision].quotas.aligned-gpu: a capacity amount" in str(err.value)
    assert "aligned_dra_teams.teams[nlp].quotas.aligned-gpu is a device count" in str(err.value)


def test_capacity_with_an_extended_resource_name_is_refused():
    objects = claims.render({"extended_resources": {"gpu": "example.com/gpu"}}, "s", "1.36")["objects"]
    with pytest.raises(kueue_api.KueueError) as err:
        render(CAPACITY_TEAMS[:1], objects=objects)
    assert "aligned_dra_teams.teams[vision].quotas.aligned-gpu" in str(err.value)
    assert "extended resource name" in str(err.value)


# -- refusals ------------------------------------------------------------------------------------


def refusal(teams_raw: list[dict], **kwargs) -> str:
    with pytest.raises(kueue_api.KueueError) as err:
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


# -- the embedded schemas ------------------------------------------------------------------------


def test_embedded_schemas_match_the_crds():
    spec = importlib.util.spec_from_file_location("crd_schemas_generator", REPO / "scripts" / "crd_schemas.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    generated = generator.render("kueue", FIXTURES)
    committed = (REPO / "plugins" / "module_utils" / "controller" / "schedulers" / "kueue" / "schemas.py").read_text(
        encoding="utf-8"
    )
    assert generated == committed, "run: .venv/bin/python scripts/crd_schemas.py kueue tests/fixtures/kueue-v0.19.2"
    assert set(kueue_schemas.SCOPES) == {
        "ClusterQueue",
        "Cohort",
        "LocalQueue",
        "ResourceFlavor",
        "Topology",
        "WorkloadPriorityClass",
    }
    assert set(kueue_schemas.API_VERSIONS.values()) == {"kueue.x-k8s.io/v1beta2"}
    assert kueue_schemas.KUEUE_COMMIT == "8eab6877"
    assert "Apache License" in (REPO / "licenses" / "kueue-v0.19.2-LICENSE").read_text(encoding="utf-8")


def test_a_site_with_the_shared_fractional_claim_says_kueue_cannot_account_it():
    # 1.35 renders the fractional GPU as one shared ResourceClaim: device-count quotas still work, with a note
    objects = claims.render({}, "s", "1.35")["objects"]
    rendered = render([{"name": "vision", "tier": "production", "quotas": {"gpu": 2}}], objects=objects, minor="1.35")
    assert any("shared ResourceClaim" in note and "cannot account" in note for note in rendered["notes"])
    # a 1.36 site renders a template instead: no such note
    assert not any(
        "shared ResourceClaim" in note for note in render([{"name": "vision", "quotas": {"gpu": 2}}])["notes"]
    )


# -- Topology Aware Scheduling: the placement levels ---------------------------------------------

LEVELS = [{"name": "block", "label": "aligned.dev/block"}, {"name": "rack", "label": "aligned.dev/rack"}]


_UNSET = object()


def with_levels(teams_raw: object = _UNSET, placement_levels: object = _UNSET, **conf: object) -> dict:
    teams_raw = RICH if teams_raw is _UNSET else teams_raw
    placement_levels = LEVELS if placement_levels is _UNSET else placement_levels
    objects = claim_objects()
    conf.setdefault("kueue_conf", {"node_groups": NODE_GROUPS})
    return kueue.render(
        conf_for(teams_raw, objects=objects, **conf),
        "s",
        objects,
        plan=PLAN,
        minor="1.36",
        placement_levels=placement_levels,
    )


def test_levels_give_a_topology_with_the_hostname_last_and_every_flavor_names_it():
    result = with_levels()
    kinds = by_kind(result)
    (topology,) = kinds["Topology"]
    assert topology["metadata"]["name"] == "s-topology"
    assert topology["spec"] == {
        "levels": [
            {"nodeLabel": "aligned.dev/block"},
            {"nodeLabel": "aligned.dev/rack"},
            {"nodeLabel": "kubernetes.io/hostname"},
        ]
    }
    assert {f["metadata"]["name"]: f["spec"] for f in kinds["ResourceFlavor"]} == {
        "s-a100": {
            "nodeLabels": {"aligned.dev/gpu-model": "a100", "aligned.dev/pool": "batch"},
            "topologyName": "s-topology",
        },
        "s-h100": {"nodeLabels": {"aligned.dev/gpu-model": "h100"}, "topologyName": "s-topology"},
    }
    # the Topology comes before the flavors that name it
    assert [o["kind"] for o in result["objects"]][3:7] == ["Cohort", "Cohort", "Topology", "ResourceFlavor"]
    assert kueue_checks.validate_objects(result["objects"]) == []
    assert any("does not count DRA devices" in note and "kueue#10548" in note for note in result["notes"])
    assert teams.file_name(topology) == "kueue-topology-s-topology.yaml"


def test_the_default_flavor_selects_the_site_label_kueue_needs_node_labels_with_a_topology():
    result = with_levels([NLP], kueue_conf={})
    (flavor,) = by_kind(result)["ResourceFlavor"]
    assert flavor["spec"] == {"nodeLabels": {"aligned.dev/site": "s"}, "topologyName": "s-topology"}
    assert kueue_checks.validate_objects(result["objects"]) == []
    # Kueue's own rule: a flavor with a topology and no node labels is refused
    bare = dict(flavor, spec={"topologyName": "s-topology"})
    assert kueue_checks.validate_object(bare) != []


def node_label_notes(result: dict) -> list[str]:
    return [note for note in result["notes"] if "counts only the nodes" in note]


def test_a_topology_notes_the_node_labels_tas_needs_and_that_every_workload_waits_without_them():
    # the default flavor selects the site label: the placement stage applies it only when asked
    (note,) = node_label_notes(with_levels([NLP], kueue_conf={}))
    assert note.startswith("the ResourceFlavor s-default selects aligned.dev/site=s, ")
    assert "every level label (aligned.dev/block, aligned.dev/rack)" in note
    assert "kubernetes.io/hostname" not in note  # the kubelet sets it
    assert "aligned_dra_placement_apply: true" in note and "s/placement/node-labels.yaml" in note
    # every flavor of the queues has a topology: Kueue sends unannotated workloads through TAS too
    assert "with or without a topology annotation" in note and "every one of them waits" in note
    # node groups: the flavors select the groups' labels; TAS still needs the level labels
    (grouped,) = node_label_notes(with_levels())
    assert grouped.startswith("the ResourceFlavors s-a100, s-h100 select their node groups' labels")
    assert "aligned.dev/site" not in grouped and "every level label (aligned.dev/block, aligned.dev/rack)" in grouped
    # no Topology, no note
    assert node_label_notes(with_levels([NLP], kueue_conf={}, placement_levels=[])) == []
    assert node_label_notes(rich()) == []


def test_kueue_refuses_a_topology_without_the_hostname_last_or_with_a_level_twice():
    (topology,) = by_kind(with_levels())["Topology"]
    levels = topology["spec"]["levels"]
    first = dict(topology, spec={"levels": [levels[-1], *levels[:-1]]})
    assert any(
        "kubernetes.io/hostname label can only be used at the lowest level" in p
        for p in kueue_checks.validate_object(first)
    )
    twice = dict(topology, spec={"levels": [levels[0], *levels]})
    assert any("must be unique" in p for p in kueue_checks.validate_object(twice))
    assert any("levels" in p for p in kueue_checks.validate_object(dict(topology, spec={"levels": []})))


def test_without_levels_nothing_changes():
    before = rich()
    for empty in (None, []):
        after = with_levels(placement_levels=empty)
        assert after["objects"] == before["objects"]
        assert after["notes"] == before["notes"]
    assert "Topology" not in by_kind(before)
    assert all("topologyName" not in f["spec"] for f in by_kind(before)["ResourceFlavor"])
    # engine resourcequota renders no Kueue object at all
    assert with_levels(engine="resourcequota")["objects"] == []


def test_bad_levels_or_a_site_name_that_is_no_label_value_are_refused():
    with pytest.raises(kueue_api.KueueError, match=r"aligned_dra_placement_levels\[0\]\.label: kubernetes.io/hostname"):
        with_levels(placement_levels=[{"name": "host", "label": "kubernetes.io/hostname"}])
    objects = claim_objects()
    conf = conf_for([NLP], objects=objects)
    long_site = "s" * 64  # a site name that makes valid object names but no label value
    with pytest.raises(kueue_api.KueueError, match=f"site name '{long_site}' is not a valid label value"):
        kueue.render(conf, long_site, objects, minor="1.36", placement_levels=LEVELS)


def test_the_teams_render_passes_the_levels_on():
    objects = claim_objects()
    raw = {"engine": "both", "teams": [{"name": "vision", "templates": ["gpu-only"], "quotas": {"aligned-gpu": 2}}]}
    result = teams.render(raw, "s", objects, "1.36", placement_levels=LEVELS)
    assert [o["metadata"]["name"] for o in result["objects"] if o["kind"] == "Topology"] == ["s-topology"]
    assert teams.validate_all(result["objects"], "1.36") == []
    assert (
        teams.render(raw, "s", objects, "1.36")["objects"]
        == teams.render(raw, "s", objects, "1.36", placement_levels=[])["objects"]
    )
