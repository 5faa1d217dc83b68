# SPDX-License-Identifier: Apache-2.0
"""Jobs on a KAI site: one KAI PodGroup per job, linked to its Job, queue and topology; no kube gang."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import render as jobs
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import gangs as kai_gang

LEVELS = [{"name": "block", "label": "aligned.dev/block"}, {"name": "rack", "label": "aligned.dev/rack"}]
RAILS = {"gpu-nic-rail-0": [0], "gpu-nic-pair-1": None}
KAI = {
    "engine": "kai",
    "kai": {"scheduler_name": "kai-custom"},
    "tiers": {"production": {"name": "prod-class"}},
    "teams": [
        {"name": "llm", "tier": "production", "namespaces": ["llm-train"], "templates": ["gpu-nic-rail-0"]},
        {"name": "vision", "templates": ["gpu-nic-pair-1"]},
    ],
}
JOBS = [
    {"name": "pretrain", "workers": 4, "template": "gpu-nic-rail-0", "namespace": "llm-train",
     "placement": {"level": "rack", "mode": "required"}},
    {"name": "sweep", "workers": 2, "template": "gpu-nic-pair-1", "namespace": "vision",
     "placement": {"level": "block", "mode": "preferred"}},
    {"name": "loose", "workers": 1, "template": "gpu-nic-pair-1"},
]  # fmt: skip


def render(minor: str = "1.36", teams: dict | None = None, job_list: list | None = None) -> dict:
    return jobs.render_jobs(
        "west",
        copy.deepcopy(JOBS if job_list is None else job_list),
        minor,
        None,
        LEVELS,
        {},
        copy.deepcopy(KAI if teams is None else teams),
        RAILS,
    )


def of(result: dict, job: str) -> dict[str, dict]:
    found = [o for o in result["objects"] if o["metadata"]["labels"][jobs.JOB_LABEL] == job]
    return {("KaiPodGroup" if kai_gang.is_kai_group(o) else o["kind"]): o for o in found}


@pytest.mark.parametrize("minor", ["1.34", "1.36", "1.37"])
def test_each_team_job_gets_one_kai_pod_group_and_no_kube_gang(minor):
    result = render(minor)
    objects = of(result, "pretrain")
    assert set(objects) == {"Service", "Job", "KaiPodGroup"}  # no Workload, no kube-scheduler PodGroup
    group = objects["KaiPodGroup"]["spec"]
    assert group == {
        "minMember": 4,
        "queue": "llm",
        "priorityClassName": "prod-class",
        "preemptibility": "preemptible",
        "topologyConstraint": {"topology": "west-topology", "requiredTopologyLevel": "aligned.dev/rack"},
    }
    job = objects["Job"]
    assert job["metadata"]["annotations"] == {kai_gang.SKIP_ANNOTATION: "true"}
    assert job["metadata"]["labels"]["kai.scheduler/queue"] == "llm" and "suspend" not in job["spec"]
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"]["pod-group-name"] == "pretrain"
    assert template["metadata"]["labels"]["kai.scheduler/queue"] == "llm"
    assert template["spec"]["schedulerName"] == "kai-custom"
    assert "affinity" not in template["spec"] and "schedulingGroup" not in template["spec"]
    # a team without a tier is research; a preferred level is KAI's preferred placement
    sweep = of(result, "sweep")["KaiPodGroup"]["spec"]
    assert sweep["priorityClassName"] == "aligned-research" and sweep["queue"] == "vision"
    assert sweep["topologyConstraint"]["preferredTopologyLevel"] == "aligned.dev/block"
    assert result["gangs"]["pretrain"] == {"mechanism": "kai", "objects": ["PodGroup pretrain"], "queue": "llm"}
    assert jobs.file_name(objects["KaiPodGroup"]) == "pretrain-kai-podgroup.yaml"
    assert checks.validate(result["objects"], minor) == []


def test_a_job_outside_the_teams_is_left_to_kube_scheduler_and_says_so():
    result = render()
    assert "KaiPodGroup" not in of(result, "loose")
    reasons = " | ".join(item["reason"] for item in result["left_out"] if item["name"] == "loose")
    assert "KAI queue left out: namespace 'default' belongs to no team" in reasons
    assert result["gangs"]["loose"]["mechanism"] in ("workload", "none")
    # a job that names its queue gets it, whatever its namespace
    named = render(job_list=[dict(JOBS[2], queue="vision")])
    assert of(named, "loose")["KaiPodGroup"]["spec"]["queue"] == "vision"


def test_a_job_in_a_team_namespace_naming_another_queue_is_refused_before_apply():
    with pytest.raises(
        jobs.JobsError, match="queue 'vision' is not the queue of team 'llm', whose namespace 'llm-train'"
    ):
        render(job_list=[dict(JOBS[0], queue="vision")])
    assert of(render(job_list=[dict(JOBS[0], queue="llm")]), "pretrain")["KaiPodGroup"]["spec"]["queue"] == "llm"


def test_the_scheduler_name_is_the_checked_site_setting():
    teams = copy.deepcopy(KAI)
    teams["kai"]["scheduler_name"] = "Not A Name"
    with pytest.raises(jobs.JobsError, match="aligned_dra_teams.kai.scheduler_name 'Not A Name'"):
        render(teams=teams)
    del teams["kai"]
    assert of(render(teams=teams), "pretrain")["Job"]["spec"]["template"]["spec"]["schedulerName"] == "kai-scheduler"


def test_broken_links_are_found():
    result = render()
    objects = of(result, "pretrain")
    job, group = objects["Job"], objects["KaiPodGroup"]
    assert kai_gang.link_problems(job, [group]) == []
    broken = copy.deepcopy(job)
    del broken["metadata"]["annotations"][kai_gang.SKIP_ANNOTATION]
    broken["spec"]["template"]["metadata"]["labels"]["kai.scheduler/queue"] = "vision"
    del broken["spec"]["template"]["spec"]["schedulerName"]
    other = copy.deepcopy(group)
    other["spec"]["minMember"] = 3
    problems = kai_gang.link_problems(broken, [other])
    assert problems == [
        "the Job lacks kai.scheduler/skip-podgrouper: 'true' (KAI's pod grouper would regroup the pods)",
        "the PodGroup's minMember 3 is not the worker count 4",
        "the queue differs: the PodGroup 'llm', the Job 'llm', the pods 'vision'",
        "the pods name no schedulerName: kube-scheduler would place them, not KAI",
    ]
    assert kai_gang.link_problems(job, []) == ["0 KAI PodGroups, one expected"]
    # a KAI PodGroup is checked against KAI's CRD
    bad = dict(group, spec=dict(group["spec"], minMember="four"))
    assert any("minMember" in p for p in checks.object_problems(bad, "1.36"))
