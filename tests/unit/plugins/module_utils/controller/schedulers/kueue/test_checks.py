# SPDX-License-Identifier: Apache-2.0
"""Kueue's objects checked as the API server and Kueue's webhook would: broken objects and configurations."""

from __future__ import annotations

import copy

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import checks as kueue_checks
from ansible_collections.aligned.dra.tests.support.sites.kueue_teams import CAPACITY_TEAMS, GPU, queue, render, rich


def valid_queue() -> dict:
    return copy.deepcopy(queue(rich(), "vision"))


def problems_of(obj: dict) -> list[str]:
    return kueue_checks.validate_objects([obj])


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
    found = kueue_checks.validate_configuration(cfg)
    assert "resources.colour: unknown field" in found
    assert (
        "resources.deviceClassMappings[0].sources[0].capacity: capacity sources require "
        "KueueDRAIntegrationConsumableCapacity to be enabled" in found
    )
    assert (
        "resources.deviceClassMappings[1].deviceClassNames[0]: aligned-gpu is already mapped to aligned.dev/aligned-gpu"
        in (found)
    )
    assert kueue_checks.validate_objects([cfg])[0].startswith("Configuration: ")
