# SPDX-License-Identifier: Apache-2.0
"""The checks of rendered job objects: every broken link, gated field and schema problem is reported."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import checks, workload
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import render as jobs

LEVELS = [{"name": "rack", "label": "aligned.dev/rack"}]
GATES_136 = {
    workload.GENERIC_WORKLOAD: True,
    workload.GANG_SCHEDULING: True,
    workload.TOPOLOGY: True,
    workload.PREEMPTION: True,
}
JOB = {"name": "train", "workers": 4, "template": "gpu-nic-pair-1", "placement": {"level": "rack"}, "queue": "q"}


def rendered(minor="1.36", gates=None, engine="kueue", job=None):
    result = jobs.render_jobs(
        "s", [dict(job or JOB)], minor, GATES_136 if gates is None else gates, LEVELS, {}, {"engine": engine}, None
    )
    return copy.deepcopy(result["objects"])


def find(objects, kind):
    return next(o for o in objects if o["kind"] == kind)


def pod_spec(objects):
    return find(objects, "Job")["spec"]["template"]["spec"]


@pytest.mark.parametrize(
    ("minor", "gates"),
    [
        ("1.34", {}),
        ("1.35", {workload.GENERIC_WORKLOAD: True, workload.GANG_SCHEDULING: True}),
        ("1.36", GATES_136),
        ("1.37", {workload.GENERIC_WORKLOAD: True, workload.TOPOLOGY: True}),
        ("1.37", {workload.GENERIC_WORKLOAD: True, workload.TOPOLOGY: True, workload.WITH_JOB: True}),
    ],
)
def test_rendered_objects_pass(minor, gates):
    assert checks.validate(rendered(minor, gates), minor, gates) == []


def _min_count(objects):
    find(objects, "PodGroup")["spec"]["schedulingPolicy"]["gang"]["minCount"] = 3


def _workload_min_count(objects):
    find(objects, "Workload")["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = 5


def _group_name(objects):
    pod_spec(objects)["schedulingGroup"]["podGroupName"] = "other"


def _group_ref(objects):
    find(objects, "PodGroup")["spec"]["podGroupTemplateRef"]["workload"]["podGroupTemplateName"] = "leaders"


def _unlinked(objects):
    del pod_spec(objects)["schedulingGroup"]


def _selector(objects):
    find(objects, "Service")["spec"]["selector"] = {jobs.JOB_LABEL: "other"}


def _subdomain(objects):
    pod_spec(objects)["subdomain"] = "elsewhere"


def _not_headless(objects):
    find(objects, "Service")["spec"]["clusterIP"] = "10.0.0.1"


def _claim(objects):
    pod_spec(objects)["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]


def _completions(objects):
    find(objects, "Job")["spec"]["parallelism"] = 2


def _master(objects):
    pod_spec(objects)["containers"][0]["env"][0]["value"] = "train-1.train"


def _key(objects):
    find(objects, "PodGroup")["spec"]["schedulingConstraints"]["topology"][0]["key"] = "aligned.dev/block"


def _suspend(objects):
    del find(objects, "Job")["spec"]["suspend"]


def _unknown_field(objects):
    find(objects, "PodGroup")["spec"]["minMember"] = 4


def _namespace(objects):
    find(objects, "Workload")["metadata"]["namespace"] = "other"


def _label(objects):
    find(objects, "Job")["metadata"]["labels"]["bad key!"] = "x"


def _restart(objects):
    pod_spec(objects)["restartPolicy"] = "OnFailure"


@pytest.mark.parametrize(
    ("breaking", "message"),
    [
        (_min_count, "PodGroup train: gang minCount 3 is not the 4 workers"),
        (_workload_min_count, "Workload train: gang minCount 5 is not the 4 workers"),
        (_group_name, "pods name PodGroup 'other', not rendered"),
        (_group_ref, "names Workload 'train' template 'leaders', not rendered"),
        (_unlinked, "a PodGroup is rendered but the pods do not name it"),
        (_selector, "does not select the pods"),
        (_subdomain, "the pods' subdomain 'elsewhere' is not the Service 'train'"),
        (_not_headless, "the Service must be headless"),
        (_claim, "uses claim 'gpus', not a pod claim"),
        (_completions, "completions = parallelism = workers"),
        (_master, "MASTER_ADDR must be worker 0"),
        (_key, "the level appears with different keys"),
        (_suspend, "must be created suspended"),
        (_unknown_field, "schema: Additional properties are not allowed ('minMember' was unexpected)"),
        (_namespace, "Workload train is in namespace 'other'"),
        (_label, "'bad key!': 'x' is not a label"),
        (_restart, "restartPolicy must be Never"),
    ],
)
def test_a_broken_link_is_reported(breaking, message):
    objects = rendered()
    breaking(objects)
    problems = checks.validate(objects, "1.36", GATES_136)
    assert any(message in p for p in problems), problems


def test_1_35_workload_link_is_checked():
    gates = {workload.GENERIC_WORKLOAD: True, workload.GANG_SCHEDULING: True}
    objects = rendered("1.35", gates)
    pod_spec(objects)["workloadRef"]["podGroup"] = "leaders"
    assert any("pods name Workload 'train' group 'leaders'" in p for p in checks.validate(objects, "1.35", gates))
    objects = rendered("1.35", gates)
    del pod_spec(objects)["workloadRef"]
    assert any("do not name it (spec.workloadRef)" in p for p in checks.validate(objects, "1.35", gates))


def test_job_scheduling_and_rendered_groups_exclude_each_other():
    gates = {workload.GENERIC_WORKLOAD: True, workload.WITH_JOB: True}
    objects = rendered("1.37", gates)
    objects += [o for o in rendered("1.37", {workload.GENERIC_WORKLOAD: True}) if o["kind"] == "PodGroup"]
    problems = checks.validate(objects, "1.37", gates)
    assert any("none may be rendered" in p for p in problems), problems


@pytest.mark.parametrize(
    ("gate", "message"),
    [
        (workload.TOPOLOGY, "schedulingConstraints needs feature gate TopologyAwareWorkloadScheduling"),
        (workload.PREEMPTION, "disruptionMode needs feature gate WorkloadAwarePreemption"),
        (workload.GANG_SCHEDULING, "needs feature gate GangScheduling, off on Kubernetes 1.36"),
    ],
)
def test_a_field_whose_gate_is_off_is_reported(gate, message):
    objects = rendered()
    problems = checks.validate(objects, "1.36", dict(GATES_136, **{gate: False}))
    assert any(message in p for p in problems), problems


def test_job_scheduling_needs_its_gate():
    objects = rendered("1.37", {workload.GENERIC_WORKLOAD: True, workload.WITH_JOB: True})
    problems = checks.validate(objects, "1.37", {workload.GENERIC_WORKLOAD: True})
    assert any("spec.scheduling needs feature gate WorkloadWithJob" in p for p in problems), problems


def test_a_group_on_a_minor_without_it_is_reported():
    objects = rendered("1.36")
    problems = checks.validate(objects, "1.35", {workload.GENERIC_WORKLOAD: True, workload.GANG_SCHEDULING: True})
    assert any("schema: SchemaNotFoundError" in p for p in problems), problems
    assert any("Kubernetes 1.34 has no PodGroup" in p for p in checks.validate(objects, "1.34", {})), problems


def test_an_object_without_the_job_label_is_reported():
    objects = rendered()
    del find(objects, "Service")["metadata"]["labels"][jobs.JOB_LABEL]
    assert any(f"no {jobs.JOB_LABEL} label" in p for p in checks.validate(objects, "1.36", GATES_136))


def test_render_refuses_objects_that_do_not_validate(monkeypatch):
    monkeypatch.setattr(jobs, "MASTER_PORT", 29500)  # an int where the schema wants a string
    with pytest.raises(jobs.JobsError, match="a bug in the renderer"):
        rendered()
