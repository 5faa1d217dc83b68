# SPDX-License-Identifier: Apache-2.0
"""Engine kai: the queue tree, what KAI would miscount, who may use a queue, KAI's CRD schemas."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import api as kai_api
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import checks as kai_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import objects as kai
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import schemas as kai_schemas
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams.settings import TeamsError
from ansible_collections.aligned.dra.tests.support.harnesses.admission_policies import evaluate_policy

REPO = Path(__file__).resolve().parents[7]
FIXTURES = REPO / "tests" / "fixtures" / "kai-scheduler-v0.17.0"
# NVIDIA's GPU driver and DRANET: the GPU driver's name contains "gpu" and its slices hold GPUs only
CLAIMS = {"drivers": ["gpu.nvidia.com", "dra.net"], "gpu_driver": "gpu.nvidia.com", "nic_driver": "dra.net"}
GPU, NIC = "nvidia-gpu", "dranet-nic"
SITE_TEAMS = [
    {
        "name": "train",
        "tier": "production",
        "namespaces": ["train-a", "train-b"],
        "quotas": {"gpu": 4, "nic": 4},
        "templates": ["gpu-nic-pair-1"],
        "department": "ml",
    },
    {
        "name": "infer",
        "tier": "production",
        "quotas": {"gpu": 4},
        "borrowing_limit": {"gpu": 2},
        "department": "ml",
        "over_quota_weight": 2,
    },
    {"name": "research", "tier": "research", "quotas": {"gpu": 4}, "kai": {"cpu": {"quota": 8000, "limit": 16000}}},
    {"name": "batch", "tier": "opportunistic", "quotas": {"gpu": 8}, "templates": ["fractional-gpu"]},
]

# the team model's refusals and the schedulers' (KAI's own, Kueue's for its settings)
REFUSED = (TeamsError, schedulers.SchedulerError)


def claim_objects(settings: dict | None = None) -> list[dict]:
    return claims.render(CLAIMS if settings is None else settings, "lab", "1.36")["objects"]


def render(raw: dict, settings: dict | None = None, **kwargs) -> dict:
    conf = claims.settings(CLAIMS if settings is None else settings)
    # the catalogue's keys: gpu and nic name NVIDIA's and DRANET's classes on this site
    keys = dict(conf["classes"], gpu=conf["classes"]["nvidia-gpu"], nic=conf["classes"]["dranet-nic"])
    drivers = kwargs.pop("drivers", {"gpu": conf["gpu_driver"], "nic": conf["nic_driver"]})
    return teams.render(raw, "lab", claim_objects(settings), "1.36", class_keys=keys, drivers=drivers, **kwargs)


def site(**extra) -> dict:
    return dict({"engine": "kai", "teams": copy.deepcopy(SITE_TEAMS)}, **extra)


def queues_of(result: dict) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in result["objects"] if o["kind"] == "Queue"}


def test_the_queue_tree_follows_the_teams():
    result = render(site())
    queues = queues_of(result)
    assert list(queues) == ["aligned-lab", "aligned-lab-ml", "train", "infer", "research", "batch"]
    gpu = {name: q["spec"]["resources"]["gpu"] for name, q in queues.items()}
    # quota x namespaces; a borrowing limit on each GPU class gives a limit, none gives -1
    assert gpu["train"] == {"quota": 8, "limit": -1, "overQuotaWeight": 1}
    assert gpu["infer"] == {"quota": 4, "limit": 6, "overQuotaWeight": 2}
    # a tier that is not guaranteed: no quota, its quota is its limit
    assert gpu["batch"] == {"quota": 0, "limit": 8, "overQuotaWeight": 1}
    # parents: sums, -1 when a child has no limit, the children's highest priority
    assert gpu["aligned-lab-ml"] == {"quota": 12, "limit": -1, "overQuotaWeight": 3}
    assert gpu["aligned-lab"] == {"quota": 16, "limit": -1, "overQuotaWeight": 5}
    assert queues["aligned-lab-ml"]["spec"]["parentQueue"] == "aligned-lab"
    assert queues["train"]["spec"]["parentQueue"] == "aligned-lab-ml"
    assert queues["research"]["spec"]["parentQueue"] == "aligned-lab"
    assert "parentQueue" not in queues["aligned-lab"]["spec"]
    assert queues["train"]["spec"]["priority"] == 100000 and queues["research"]["spec"]["priority"] == 10000
    assert queues["aligned-lab"]["spec"]["priority"] == 100000
    # cpu and memory unlimited unless a team sets them
    assert queues["train"]["spec"]["resources"]["memory"] == {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    assert queues["research"]["spec"]["resources"]["cpu"] == {"quota": 8000, "limit": 16000, "overQuotaWeight": 1}
    assert queues["aligned-lab"]["spec"]["resources"]["cpu"]["quota"] == -1
    assert teams.validate_all(result["objects"], "1.36") == []
    assert result["engine"] == "kai" and result["kueue"] is None
    assert result["kai"]["gpu_classes"] == [GPU]


def test_gpu_quotas_go_to_the_queues_and_the_others_stay_resource_quotas():
    result = render(site())
    quotas = {o["metadata"]["namespace"]: o for o in result["objects"] if o["kind"] == "ResourceQuota"}
    assert set(quotas) == {"train-a", "train-b"}  # only train has a quota on a class KAI does not count
    assert quotas["train-a"]["spec"]["hard"] == {f"{NIC}.deviceclass.resource.k8s.io/devices": "4"}
    copies = [o for o in result["objects"] if o["kind"] == "ResourceClaimTemplate" and o["metadata"]["namespace"]]
    usage = {o["metadata"]["namespace"]: o["metadata"]["annotations"]["aligned.dev/usage"] for o in copies}
    assert "kai.scheduler/queue: train" in usage["train-a"] and "schedulerName: kai-scheduler" in usage["train-a"]
    assert "kai.scheduler/queue: batch" in usage["batch"]


def test_the_site_settings_name_the_parent_queue_and_scheduler():
    result = render(site(kai={"parent_queue": "gpu-west", "scheduler_name": "kai-custom"}))
    assert list(queues_of(result))[:2] == ["gpu-west", "gpu-west-ml"]
    assert result["kai"]["scheduler_name"] == "kai-custom"
    assert result["kai"]["queue_label"] == kai_api.QUEUE_LABEL


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"over_quota_weight": -1}, "teams[research].over_quota_weight must be a number from 0"),
        ({"over_quota_weight": True}, "teams[research].over_quota_weight must be a number"),
        ({"kai": {"cpu": {"quota": 8, "limit": 4}}}, "teams[research].kai.cpu.limit 4 is below the quota (8)"),
        ({"kai": {"cpu": {"quota": -2}}}, "teams[research].kai.cpu.quota must be -1 (unlimited) or a number"),
        ({"kai": {"gpu": {}}}, "teams[research].kai.gpu is not a setting (known: cpu, memory)"),
        ({"kai": {"cpu": {"weight": 1}}}, "teams[research].kai.cpu.weight is not a setting"),
        ({"lending_limit": {"gpu": 1}}, "teams[research].lending_limit: KAI Scheduler has no lending limit"),
        ({"borrowing_limit": {"nic": 1}, "quotas": {"gpu": 4, "nic": 2}}, "borrowing_limit.dranet-nic: KAI lends"),
    ],
)
def test_bad_team_settings_are_refused_by_name(change, message):
    raw = site()
    raw["teams"][2].update(change)
    with pytest.raises(REFUSED, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        render(raw)


def test_bad_site_settings_are_refused_by_name():
    for extra, message in (
        ({"kai": {"queue": "x"}}, "aligned_dra_teams.kai.queue is not a setting"),
        ({"kai": {"parent_queue": "Not_A_Name"}}, "aligned_dra_teams.kai.parent_queue: 'Not_A_Name' is not a queue"),
        ({"kai": {"parent_queue": "q" * 64}}, "at most 63 characters"),
        ({"kai": {"what_if": {"nobody": {"gpu": 1}}}}, "aligned_dra_teams.kai.what_if.nobody is not a setting"),
        ({"kai": {"what_if": {"train": {"gpu": -1}}}}, "what_if.train.gpu must be a number of GPUs"),
        ({"kai": {"scheduler_name": "Bad Name"}}, "scheduler_name 'Bad Name' is not a DNS subdomain"),
        ({"kai": {"parent_queue": ""}}, "aligned_dra_teams.kai.parent_queue: '' is not a queue name"),
        ({"kai": {"parent_queue": "default-queue"}}, "'default-queue' is a queue KAI Scheduler makes for itself"),
    ):
        with pytest.raises(REFUSED, match=message.replace("[", r"\[")):
            render(site(**extra))
    with pytest.raises(REFUSED, match="aligned_dra_teams.kai is set but engine is kueue"):
        render({"engine": "kueue", "kai": {"scheduler_name": "kai-scheduler"}, "teams": []})
    with pytest.raises(REFUSED, match=r"teams\[t\].over_quota_weight is read by engine kai only"):
        render({"engine": "kueue", "teams": [{"name": "t", "over_quota_weight": 2}]})
    with pytest.raises(REFUSED, match="aligned_dra_teams.kueue is set but engine is kai"):
        render(site(kueue={"cohort": "c"}))
    clash = site()
    clash["teams"][2]["name"] = "aligned-lab"
    with pytest.raises(REFUSED, match="the queue name 'aligned-lab' is given twice"):
        render(clash)


# -- what KAI would miscount -----------------------------------------------------------------------


def test_a_gpu_driver_whose_name_lacks_gpu_is_refused():
    ours = {"drivers": ["dra.aligned.dev"]}
    raw = {"engine": "kai", "teams": [{"name": "t", "quotas": {"aligned-gpu": 1}}]}
    with pytest.raises(REFUSED, match="gpu_driver dra.aligned.dev: the name lacks 'gpu', so KAI counts no GPU"):
        render(raw, ours)
    with pytest.raises(REFUSED, match="nic_driver gpu.example.com is the GPU driver"):
        render(site(), drivers={"gpu": "gpu.example.com", "nic": "gpu.example.com"})


def test_templates_kai_would_miscount_are_refused_naming_them():
    renamed = dict(CLAIMS, classes={"nvidia-gpu": "nvidia-accelerators", "dranet-nic": "dranet-gpu-nics"})
    raw = {"engine": "kai", "teams": [{"name": "t", "templates": ["gpu-nic-pair-1"], "quotas": {"gpu": 1}}]}
    with pytest.raises(REFUSED) as caught:
        render(raw, renamed)
    text = str(caught.value)
    assert "template gpu-nic-pair-1: request gpu-0 asks for GPUs of class nvidia-accelerators" in text
    assert "request nic-0 asks for class dranet-gpu-nics, which selects no GPUs" in text
    assert "teams[t].quotas.nvidia-accelerators: the class selects GPUs, but its name lacks 'gpu'" in text
    # a GPU asked for through firstAvailable is not counted by KAI
    objects = claim_objects()
    template = next(o for o in objects if o["metadata"]["name"] == "gpu-only")
    problems = kai._request_problems(
        "gpu-only",
        [{"name": "gpu", "firstAvailable": [{"name": "any", "deviceClassName": GPU}]}],
        {GPU},
    )
    assert problems == [
        "template gpu-only: request gpu asks for GPUs through firstAvailable (gpu/any), which KAI does not "
        "count; use an exactly request"
    ]
    assert kai._request_problems("gpu-only", template["spec"]["spec"]["devices"]["requests"], {GPU}) == []


def test_the_gpus_kai_counts_per_node_come_from_the_plan_and_size_the_what_if():
    counts = {"n1": {"published": 8, "counted_by_kai": 8}, "n2": {"published": 8, "counted_by_kai": 0}}
    plan = {"classes": {GPU: {"devices": 16}}, "gpu_counts": counts}
    result = render(site(kai={"what_if": {"train": {"gpu": 20}}}), plan=plan)
    assert result["kai"]["nodes"] == [
        {"node": "n1", "published": 8, "counted_by_kai": 8},
        {"node": "n2", "published": 8, "counted_by_kai": 0},
    ]
    # KAI divides the 8 GPUs it counts, not the 16 published; the site's quota (16) takes more than that and
    # KAI does not scale it down: the site queue deserves 16, and train, the only team wanting GPUs, gets all
    # of it (its quota 8, then the rest over quota)
    outcome = result["kai"]["what_if"]
    assert outcome["gpus"] == 8 and outcome["fair_share"]["aligned-lab"]["gpu"] == 16
    assert outcome["fair_share"]["train"]["gpu"] == 16 and outcome["fair_share"]["train"]["beyond_quota"] == 8
    assert outcome["notes"] == [
        "the fair shares add up to 16 GPUs of the 8 KAI counts: the quotas take more than there is, and KAI "
        "does not scale them down"
    ]
    # a plan written before the counts: the GPU classes' devices; no plan: unknown
    assert render(site(kai={"what_if": {}}), plan={"classes": {GPU: {"devices": 16}}})["kai"]["what_if"]["gpus"] == 16
    assert render(site())["kai"]["nodes"] is None


# -- who may use a queue -----------------------------------------------------------------------------


def namespace(name: str, team: str | None) -> dict:
    labels = {"aligned.dev/site": "lab"} | ({"aligned.dev/team": team} if team else {})
    return {"metadata": {"name": name, "labels": labels}}


def pod(queue: str | None, kind: str = "Pod", spec_queue: str | None = None) -> dict:
    obj = {"kind": kind, "metadata": {"name": "w", "labels": {kai_api.QUEUE_LABEL: queue} if queue else {}}}
    obj["spec"] = {"queue": spec_queue} if spec_queue else {}
    return obj


def site_policies(**extra) -> dict[str, dict]:
    objects = [o for o in render(site(**extra))["objects"] if o["kind"].startswith("ValidatingAdmissionPolicy")]
    bindings = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"}
    policies = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"}
    assert set(bindings) == set(policies)
    for name, binding in bindings.items():
        assert binding["spec"]["policyName"] == name and binding["spec"]["validationActions"] == ["Deny"]
        selector = policies[name]["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
        assert {"key": "aligned.dev/team", "operator": "Exists"} in selector
    return policies


def resources_of(policy: dict) -> set[str]:
    return {r["resources"][0] for r in policy["spec"]["matchConstraints"]["resourceRules"]}


def admit(policy: dict, obj: dict, resource: str = "pods", operation: str = "CREATE", old=None, ns=None):
    request = {"operation": operation, "resource": {"resource": resource}}
    return evaluate_policy(policy, request, obj, old, ns or namespace("train-a", "train"))


def test_the_admission_policies_keep_each_team_to_its_own_queue():
    policies = site_policies()
    assert set(policies) == {"aligned-lab-kai-queues", "aligned-lab-kai-podgroups", "aligned-lab-kai-scheduler"}
    labels, groups = policies["aligned-lab-kai-queues"], policies["aligned-lab-kai-podgroups"]
    assert resources_of(labels) == {"pods", "jobs", "jobsets", "podgroups"}
    # one resource per policy that reads a field of its own: each expression is typed on its object
    assert resources_of(groups) == {"podgroups"}
    assert admit(labels, pod("train")) is None
    assert admit(labels, pod(None)) is None
    assert admit(labels, pod("infer", kind="Job"), "jobs") == (
        "namespace train-a belongs to team train, whose KAI queue is train; kai.scheduler/queue names queue infer"
    )
    assert admit(groups, pod(None, "PodGroup", "train"), "podgroups") is None
    # KAI's pod grouper gives a workload that names no queue the default queue
    assert admit(groups, pod(None, "PodGroup", "default-queue"), "podgroups") is None
    assert "the PodGroup names queue research" in admit(groups, pod(None, "PodGroup", "research"), "podgroups")
    # an update that keeps the queue an object had (made before the policy) passes; a change to it does not
    assert admit(labels, pod("infer"), operation="UPDATE", old=pod("infer")) is None
    assert "names queue infer" in admit(labels, pod("infer"), operation="UPDATE", old=pod("train"))
    old_group = pod(None, "PodGroup", "research")
    assert admit(groups, pod(None, "PodGroup", "research"), "podgroups", "UPDATE", old_group) is None
    assert "names queue research" in admit(
        groups, pod(None, "PodGroup", "research"), "podgroups", "UPDATE", pod(None, "PodGroup", "train")
    )


def device_pod(scheduler: str | None, claims: int = 1) -> dict:
    obj = pod("train")
    obj["spec"] = {"resourceClaims": [{"name": f"c{i}", "resourceClaimTemplateName": "t"} for i in range(claims)]}
    if scheduler:
        obj["spec"]["schedulerName"] = scheduler
    return obj


def test_device_pods_of_a_team_go_through_kais_scheduler():
    policy = site_policies()["aligned-lab-kai-scheduler"]
    assert resources_of(policy) == {"pods"}
    assert policy["spec"]["matchConstraints"]["resourceRules"][0]["operations"] == ["CREATE"]
    assert admit(policy, device_pod("kai-scheduler")) is None
    # kube-scheduler would place it beside the queue, uncapped: a GPU class has no ResourceQuota on a kai site
    assert admit(policy, device_pod(None)) == (
        "namespace train-a belongs to team train, whose devices KAI shares out: a pod that claims devices sets "
        "schedulerName kai-scheduler (it names none)"
    )
    assert "(it names default-scheduler)" in admit(policy, device_pod("default-scheduler"))
    # pods without claims, and namespaces allowed admin access (monitoring DaemonSets), are not its business
    assert admit(policy, device_pod(None, claims=0)) is None
    assert admit(policy, pod(None)) is None
    watched = namespace("observability", "train")
    watched["metadata"]["labels"]["resource.kubernetes.io/admin-access"] = "true"
    assert admit(policy, device_pod(None), ns=watched) is None
    # the site's scheduler name is the one required
    other = site_policies(kai={"scheduler_name": "kai-gpu"})["aligned-lab-kai-scheduler"]
    assert admit(other, device_pod("kai-gpu")) is None and admit(other, device_pod("kai-scheduler"))


def test_the_topology_lists_the_placement_levels_hostname_last():
    levels = [{"name": "block", "label": "aligned.dev/block"}, {"name": "rack", "label": "aligned.dev/rack"}]
    result = render(site(), placement_levels=levels)
    topology = next(o for o in result["objects"] if o["kind"] == "Topology")
    assert topology["apiVersion"] == "kai.scheduler/v1alpha1"
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
        "aligned.dev/block",
        "aligned.dev/rack",
        "kubernetes.io/hostname",
    ]
    assert teams.file_name(topology) == "kai-topology-lab-topology.yaml"
    assert teams.validate_all(result["objects"], "1.36") == []


# -- KAI's CRD schemas -------------------------------------------------------------------------------


def test_objects_are_checked_against_kais_crds():
    queue = queues_of(render(site()))["train"]
    assert kai_checks.validate_objects([queue]) == []
    broken = copy.deepcopy(queue)
    broken["spec"]["resources"]["gpu"]["borrow"] = 1
    broken["spec"]["priority"] = "high"
    problems = kai_checks.validate_objects([broken])
    assert "Queue train: spec.priority: 'high' is not of type 'integer'" in problems
    assert any(p.startswith("Queue train: spec.resources.gpu.borrow: unknown field") for p in problems)
    assert kai_checks.validate_objects([dict(queue, apiVersion="scheduling.run.ai/v1")]) == [
        "Queue train: no embedded schema for scheduling.run.ai/v1 Queue (KAI v0.17.0)"
    ]
    # the CRD's own CEL rules run too: a Topology's node labels must be unique
    topology = {
        "apiVersion": kai_api.TOPOLOGY_API_VERSION,
        "kind": "Topology",
        "metadata": {"name": "t"},
        "spec": {"levels": [{"nodeLabel": "a/b"}, {"nodeLabel": "a/b"}]},
    }
    assert kai_checks.validate_objects([topology]) == ["Topology t: spec.levels: nodeLabel must be unique"]


def test_embedded_schemas_match_the_crds():
    spec = importlib.util.spec_from_file_location("crd_schemas_generator", REPO / "scripts" / "crd_schemas.py")
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    committed = (REPO / "plugins" / "module_utils" / "controller" / "schedulers" / "kai" / "schemas.py").read_text(
        encoding="utf-8"
    )
    assert generator.render("kai", FIXTURES) == committed, (
        "run: .venv/bin/python scripts/crd_schemas.py kai tests/fixtures/kai-scheduler-v0.17.0"
    )
    assert kai_schemas.SCOPES == {"PodGroup": "Namespaced", "Queue": "Cluster", "Topology": "Cluster"}
    assert kai_schemas.KAI_COMMIT == "f218c69b"
    assert "Apache License" in (REPO / "licenses" / "kai-scheduler-v0.17.0-LICENSE").read_text(encoding="utf-8")
