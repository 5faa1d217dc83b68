# SPDX-License-Identifier: Apache-2.0
"""Gang and topology scheduling per minor: the gate table, what each minor gets, what is left out."""

from __future__ import annotations

import kubernetes_validate
import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import workload
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates

LABELS = {"aligned.dev/job": "j"}
RACK = "aligned.dev/rack"
ON = {g: True for g in workload.WORKLOAD_GATES}


def gang(minor, gates, key=RACK, workers=8):
    return workload.gang("j", "ns", workers, minor, gates, key, LABELS)


def test_every_gate_is_in_the_catalogue_for_every_supported_minor():
    for gate in workload.WORKLOAD_GATES:
        assert set(dra_gates.FEATURE_GATES[gate]) == set(dra_gates.SUPPORTED_MINORS), gate
        assert gate in workload.GATE_COMPONENTS
    for minor, api in workload.API.items():
        assert minor in dra_gates.SUPPORTED_MINORS
        assert set(api["gates"]) <= set(workload.WORKLOAD_GATES)


@pytest.mark.parametrize("minor", dra_gates.SUPPORTED_MINORS)
def test_every_gate_is_off_by_default_and_a_site_may_turn_it_on(minor):
    for gate in workload.WORKLOAD_GATES:
        assert workload.gate_on(gate, minor) is False
        assert workload.gate_on(gate, minor, {gate: True}) is True
    assert gang(minor, {}).objects == []
    assert gang(minor, {}).pod_link == {}


@pytest.mark.parametrize("minor", ["1.35", "1.36", "1.37"])
def test_group_objects_are_valid_for_their_minor(minor):
    found = gang(minor, ON)
    if minor == "1.37":
        assert found.objects == [] and found.job_scheduling is not None
        found = gang(minor, dict(ON, WorkloadWithJob=False))
    assert found.objects
    for obj in found.objects:
        kubernetes_validate.validate(obj, minor + ".0", strict=True)
        assert obj["metadata"] == {"name": "j", "namespace": "ns", "labels": LABELS}


def test_api_versions_per_minor():
    assert gang("1.35", ON).objects[0]["apiVersion"] == "scheduling.k8s.io/v1alpha1"
    assert {o["apiVersion"] for o in gang("1.36", ON).objects} == {"scheduling.k8s.io/v1alpha2"}
    off = dict(ON, WorkloadWithJob=False)
    assert {o["apiVersion"] for o in gang("1.37", off).objects} == {"scheduling.k8s.io/v1beta1"}


def test_topology_is_enforced_only_where_the_api_and_gate_have_it():
    assert not gang("1.34", ON).topology_enforced
    assert not gang("1.35", ON).topology_enforced
    assert gang("1.36", ON).topology_enforced
    assert not gang("1.36", dict(ON, TopologyAwareWorkloadScheduling=False)).topology_enforced
    assert gang("1.37", ON).topology_enforced
    assert not gang("1.36", ON, key=None).topology_enforced
    assert all("topology" not in item["reason"] for item in gang("1.36", ON, key=None).left_out)


def test_gang_holds_every_worker():
    pod_group = gang("1.36", ON, workers=16).objects[1]
    assert pod_group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 16}}
    assert gang("1.37", ON, workers=16).job_scheduling["schedulingPolicy"] == {"gang": {"minCount": 16}}


def test_reasons_name_gates_components_and_runtime_config():
    (item,) = gang("1.36", {}).left_out
    assert item["name"] == "j"
    for text in (
        "GenericWorkload (kube-apiserver, kube-scheduler, kube-controller-manager)",
        "GangScheduling (kube-scheduler)",
        "--runtime-config=scheduling.k8s.io/v1alpha2=true",
        "aligned_dra_feature_gates",
    ):
        assert text in item["reason"]
    (item,) = gang("1.37", {}).left_out
    assert "GangScheduling" not in item["reason"]  # merged into GenericWorkload in 1.37
