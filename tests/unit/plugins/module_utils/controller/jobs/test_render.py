# SPDX-License-Identifier: Apache-2.0
"""Job objects per minor and gates: golden files, official schemas, links, Kueue, NCCL, input errors.

Golden files (YAML documents) live in tests/unit/plugins/module_utils/controller/jobs/golden/; after an intended
change, regenerate them with ``ALIGNED_DRA_REGEN_GOLDEN=1`` and review the diff.
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import os
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import render as jobs
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import spec as jobs_spec
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import workload
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import objects as kueue
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates

GOLDEN = Path(__file__).parent / "golden"
LEVELS = [{"name": "block", "label": "aligned.dev/block"}, {"name": "rack", "label": "aligned.dev/rack"}]
RACK, BLOCK = "aligned.dev/rack", "aligned.dev/block"
RAILS = {"gpu-nic-rail-0": [0], "gpu-nic-rails-2-0": [0, 1], "gpu-nic-pair-1": None, "gpu-nic-pair-2": None}
TEAMS = {
    "engine": "both",
    "teams": [{"name": "vision", "namespaces": ["vision", "vision-dev"], "templates": ["gpu-nic-pair-2"]}],
}
JOBS = [
    {
        "name": "train-a",
        "workers": 4,
        "template": "gpu-nic-rails-2-0",
        "placement": {"level": "rack", "mode": "required"},
    },
    {
        "name": "train-b",
        "workers": 2,
        "template": "gpu-nic-pair-2",
        "namespace": "vision",
        "placement": {"level": "block", "mode": "preferred"},
    },
    {"name": "eval", "workers": 1, "template": "gpu-nic-pair-1", "image": "example.com/eval:1", "queue": "adhoc"},
]
ALL = {
    workload.GENERIC_WORKLOAD: True,
    workload.GANG_SCHEDULING: True,
    workload.TOPOLOGY: True,
    workload.PREEMPTION: True,
}
GATE_NAMES = (*ALL, workload.WITH_JOB)
# The gates each minor reads (the others are checked to change nothing); every combination of them is rendered.
RELEVANT = {
    "1.34": (),
    "1.35": (workload.GENERIC_WORKLOAD, workload.GANG_SCHEDULING),
    "1.36": GATE_NAMES,
    "1.37": (workload.GENERIC_WORKLOAD, workload.TOPOLOGY, workload.WITH_JOB),
}


DEFAULT = "the module's example"  # a default that None (meaning: none given) can be told apart from


def render(minor="1.36", gates=None, job_list=None, teams=DEFAULT, rails=DEFAULT, levels=DEFAULT, claims_settings=None):
    return jobs.render_jobs(
        "site-a",
        copy.deepcopy(JOBS if job_list is None else job_list),
        minor,
        gates,
        LEVELS if levels is DEFAULT else levels,
        claims_settings or {},
        TEAMS if teams is DEFAULT else teams,
        RAILS if rails is DEFAULT else rails,
    )


def objects_of(result, job, kind=None):
    return [
        o
        for o in result["objects"]
        if o["metadata"]["labels"][jobs.JOB_LABEL] == job and (kind is None or o["kind"] == kind)
    ]


def the(result, job, kind):
    found = objects_of(result, job, kind)
    assert len(found) == 1, (job, kind, found)
    return found[0]


def pod(result, job):
    return the(result, job, "Job")["spec"]["template"]


def env(result, job):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod(result, job)["spec"]["containers"][0]["env"]}


def reasons(result, job):
    return " | ".join(item["reason"] for item in result["left_out"] if item["name"] == job)


@functools.cache
def _cached(minor, gates):
    return render(minor, dict(gates))


def every_gate_combination(minor):
    """``(gates, result)`` for every combination of the gates ``minor`` reads (renders are shared, never changed)."""
    names = RELEVANT[minor]
    for values in itertools.product((False, True), repeat=len(names)):
        gates = tuple(zip(names, values, strict=True))
        yield dict(gates), _cached(minor, gates)


@pytest.mark.parametrize("minor", [m for m in dra_gates.SUPPORTED_MINORS if set(GATE_NAMES) - set(RELEVANT[m])])
def test_gates_a_minor_does_not_read_change_nothing(minor):
    others = [g for g in GATE_NAMES if g not in RELEVANT[minor]]
    for gates, result in every_gate_combination(minor):
        assert render(minor, dict(gates, **{g: True for g in others}))["objects"] == result["objects"]


# -- golden files and schemas ----------------------------------------------------------------------


@pytest.mark.parametrize("minor", dra_gates.SUPPORTED_MINORS)
def test_golden_rendering_per_minor(minor):
    documents = []
    for label, gates in (("default gates", {}), ("every gate but WorkloadWithJob", ALL)):
        result = render(minor, gates)
        documents += [{"render": label}] + result["objects"] + [{"left_out": result["left_out"]}]
    text = yaml.safe_dump_all(documents, sort_keys=True)
    path = GOLDEN / f"jobs-{minor}.golden"  # YAML, named so that linters leave it alone
    if os.environ.get("ALIGNED_DRA_REGEN_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


@pytest.mark.parametrize("minor", dra_gates.SUPPORTED_MINORS)
def test_every_object_of_every_gate_combination_is_valid_for_its_minor(minor):
    seen_kinds, checked = set(), set()
    for _gates, result in every_gate_combination(minor):
        for obj in result["objects"]:
            text = json.dumps(obj, sort_keys=True)
            if text not in checked:  # many combinations render the same object: check each once
                kubernetes_validate.validate(obj, minor + ".0", strict=True)
                checked.add(text)
            seen_kinds.add((obj["apiVersion"], obj["kind"]))
    expected = {("v1", "Service"), ("batch/v1", "Job")}
    if minor in workload.API:
        version = f"scheduling.k8s.io/{workload.API[minor]['version']}"
        expected.add((version, "Workload"))
        if workload.API[minor]["pod_group"]:
            expected.add((version, "PodGroup"))
    assert seen_kinds == expected


def test_files_are_named_after_the_job_and_kind():
    result = render("1.36", ALL)
    names = [f["name"] for f in result["files"] if f["object"]["metadata"]["name"] == "train-a"]
    assert names == ["train-a-service.yaml", "train-a-job.yaml", "train-a-workload.yaml", "train-a-podgroup.yaml"]
    assert [f["object"] for f in result["files"]] == result["objects"]


# -- links -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("minor", dra_gates.SUPPORTED_MINORS)
def test_links_hold_for_every_minor_and_gate_combination(minor):
    for _gates, result in every_gate_combination(minor):
        for entry in JOBS:
            name, workers = entry["name"], entry["workers"]
            job, service = the(result, name, "Job"), the(result, name, "Service")
            template = job["spec"]["template"]
            assert job["spec"]["completions"] == job["spec"]["parallelism"] == workers
            assert job["spec"]["completionMode"] == "Indexed"
            assert template["spec"]["subdomain"] == service["metadata"]["name"] == name
            selector = service["spec"]["selector"]
            assert selector and all(template["metadata"]["labels"][k] == v for k, v in selector.items())
            claim = template["spec"]["resourceClaims"]
            assert claim == [{"name": "devices", "resourceClaimTemplateName": entry["template"]}]
            assert template["spec"]["containers"][0]["resources"]["claims"] == [{"name": "devices"}]
            assert env(result, name)["MASTER_ADDR"] == f"{name}-0.{name}"
            assert env(result, name)["NNODES"] == str(workers)
            _check_group_links(result, name, workers, minor)


def _check_group_links(result, name, workers, minor):
    job = the(result, name, "Job")
    spec = job["spec"]["template"]["spec"]
    workloads = objects_of(result, name, "Workload")
    groups = objects_of(result, name, "PodGroup")
    if "workloadRef" in spec:
        (w,) = workloads
        assert minor == "1.35"
        assert spec["workloadRef"]["name"] == w["metadata"]["name"]
        (group,) = w["spec"]["podGroups"]
        assert group["name"] == spec["workloadRef"]["podGroup"]
        assert group["policy"]["gang"]["minCount"] == workers
    elif "schedulingGroup" in spec:
        (w,), (g,) = workloads, groups
        assert spec["schedulingGroup"]["podGroupName"] == g["metadata"]["name"]
        ref = g["spec"].get("workloadRef") or g["spec"]["podGroupTemplateRef"]["workload"]
        assert ref["workloadName"] == w["metadata"]["name"]
        template_name = ref.get("templateName") or ref.get("podGroupTemplateName")
        assert template_name in [t["name"] for t in w["spec"]["podGroupTemplates"]]
        for policy in [g["spec"]["schedulingPolicy"]] + [t["schedulingPolicy"] for t in w["spec"]["podGroupTemplates"]]:
            assert policy == {"gang": {"minCount": workers}}
    elif "scheduling" in job["spec"]:
        assert minor == "1.37" and not workloads and not groups
        assert job["spec"]["scheduling"]["schedulingPolicy"] == {"gang": {"minCount": workers}}
    else:
        assert not workloads and not groups


def constraint_keys(result, name):
    job = the(result, name, "Job")
    found = []
    specs = [g["spec"] for g in objects_of(result, name, "PodGroup")]
    for w in objects_of(result, name, "Workload"):
        specs += w["spec"].get("podGroupTemplates") or []
    specs.append(job["spec"].get("scheduling") or {})
    for spec in specs:
        found += [c["key"] for c in (spec.get("schedulingConstraints") or {}).get("topology") or []]
    return found


def affinity_terms(result, name):
    affinity = pod(result, name)["spec"].get("affinity", {}).get("podAffinity", {})
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution", [])
    preferred = [t["podAffinityTerm"] for t in affinity.get("preferredDuringSchedulingIgnoredDuringExecution", [])]
    return required, preferred


@pytest.mark.parametrize("minor", ["1.36", "1.37"])
def test_required_level_is_a_topology_constraint_where_the_gate_is_on(minor):
    for gates in (ALL, dict(ALL, WorkloadWithJob=True)):
        result = render(minor, gates)
        assert set(constraint_keys(result, "train-a")) == {RACK}
        assert affinity_terms(result, "train-a") == ([], [])  # the scheduler keeps the gang in one rack itself
        assert "topology constraint" not in reasons(result, "train-a")


@pytest.mark.parametrize("minor", dra_gates.SUPPORTED_MINORS)
def test_without_the_topology_gate_a_required_level_is_a_required_pod_affinity(minor):
    result = render(minor, dict(ALL, TopologyAwareWorkloadScheduling=False))
    assert constraint_keys(result, "train-a") == []
    required, preferred = affinity_terms(result, "train-a")
    assert preferred == []
    assert required == [
        {
            "labelSelector": {"matchLabels": {jobs.JOB_LABEL: "train-a"}},
            "matchLabelKeys": [jobs.CONTROLLER_UID_LABEL],
            "topologyKey": RACK,
        }
    ]
    assert pod(result, "train-a")["metadata"]["labels"][jobs.JOB_LABEL] == "train-a"
    if minor in ("1.35", "1.36", "1.37"):
        assert "topology constraint on aligned.dev/rack left out" in reasons(result, "train-a")


@pytest.mark.parametrize("minor", dra_gates.SUPPORTED_MINORS)
def test_preferred_level_is_only_a_preferred_pod_affinity(minor):
    for _gates, result in every_gate_combination(minor):
        assert constraint_keys(result, "train-b") == []
        required, preferred = affinity_terms(result, "train-b")
        assert required == [] and [t["topologyKey"] for t in preferred] == [BLOCK]


def test_job_without_placement_gets_no_placement():
    result = render("1.36", ALL)
    assert constraint_keys(result, "eval") == []
    assert affinity_terms(result, "eval") == ([], [])
    assert not any(
        k.startswith("kueue.x-k8s.io/podset") for k in pod(result, "eval")["metadata"].get("annotations", {})
    )


# -- minors and gates ---------------------------------------------------------------------------------


def test_1_34_has_no_workload_api():
    result = render("1.34", ALL)
    assert {o["kind"] for o in result["objects"]} == {"Job", "Service"}
    assert "Kubernetes 1.34 has no Workload API" in reasons(result, "train-a")


def test_1_35_workload_needs_both_gates_and_the_runtime_config():
    for gates in ({}, {workload.GENERIC_WORKLOAD: True}, {workload.GANG_SCHEDULING: True}):
        result = render("1.35", gates)
        assert not objects_of(result, "train-a", "Workload")
        assert "workloadRef" not in pod(result, "train-a")["spec"]  # a pod naming a missing group never schedules
        why = reasons(result, "train-a")
        missing = [g for g in (workload.GENERIC_WORKLOAD, workload.GANG_SCHEDULING) if not gates.get(g)]
        assert all(g in why for g in missing)
        assert "--runtime-config=scheduling.k8s.io/v1alpha1=true" in why
    result = render("1.35", {workload.GENERIC_WORKLOAD: True, workload.GANG_SCHEDULING: True})
    w = the(result, "train-a", "Workload")
    assert w["apiVersion"] == "scheduling.k8s.io/v1alpha1"
    assert pod(result, "train-a")["spec"]["workloadRef"] == {"name": "train-a", "podGroup": "workers"}
    # 1.35's API has no topology constraint: the required rack stays a pod affinity
    assert [t["topologyKey"] for t in affinity_terms(result, "train-a")[0]] == [RACK]


def test_1_36_disruption_mode_follows_its_gate():
    on = render("1.36", ALL)
    off = render("1.36", dict(ALL, WorkloadAwarePreemption=False))
    assert the(on, "train-a", "PodGroup")["spec"]["disruptionMode"] == "PodGroup"
    assert "disruptionMode" not in the(off, "train-a", "PodGroup")["spec"]
    assert "WorkloadAwarePreemption" in reasons(off, "train-a")


def test_1_37_needs_generic_workload_only_and_disrupts_the_gang_together():
    result = render("1.37", {workload.GENERIC_WORKLOAD: True})
    group = the(result, "train-a", "PodGroup")
    assert group["apiVersion"] == "scheduling.k8s.io/v1beta1"
    assert group["spec"]["workloadRef"] == {"workloadName": "train-a", "templateName": "workers"}
    assert group["spec"]["disruptionMode"] == {"all": {}}
    assert "--runtime-config=scheduling.k8s.io/v1beta1=true" in reasons(render("1.37", {}), "train-a")


def test_1_37_with_job_lets_the_job_controller_make_the_groups():
    result = render("1.37", dict(ALL, WorkloadWithJob=True))
    job = the(result, "train-a", "Job")
    assert job["spec"]["scheduling"] == {
        "schedulingPolicy": {"gang": {"minCount": 4}},
        "schedulingConstraints": {"topology": [{"key": RACK}]},
        "disruptionMode": {"all": {}},
    }
    assert "schedulingGroup" not in job["spec"]["template"]["spec"]
    assert not objects_of(result, "train-a", "Workload") and not objects_of(result, "train-a", "PodGroup")
    assert "Job controller creates them" in reasons(result, "train-a")
    # 1.36's Job has no spec.scheduling: the gate there changes nothing in what is rendered
    assert render("1.36", dict(ALL, WorkloadWithJob=True))["objects"] == render("1.36", ALL)["objects"]


# -- Kueue -------------------------------------------------------------------------------------------


def test_no_kueue_objects_under_the_resourcequota_engine():
    result = render("1.36", ALL, teams={"engine": "resourcequota", "teams": TEAMS["teams"]})
    for entry in JOBS:
        job = the(result, entry["name"], "Job")
        assert jobs.QUEUE_LABEL not in job["metadata"]["labels"] and "suspend" not in job["spec"]
        assert not any(
            k.startswith("kueue.x-k8s.io/") for k in job["spec"]["template"]["metadata"].get("annotations", {})
        )
    assert "Kueue queue 'adhoc' left out" in reasons(result, "eval")


@pytest.mark.parametrize("engine", ["kueue", "both"])
def test_kueue_queue_label_suspend_and_topology_annotation(engine):
    result = render("1.36", ALL, teams=dict(TEAMS, engine=engine))
    team = {"name": "vision", "namespaces": ["vision", "vision-dev"]}
    queues = {(q["metadata"]["namespace"], q["metadata"]["name"]) for q in kueue._local_queues(team, {})}
    b = the(result, "train-b", "Job")
    assert ("vision", b["metadata"]["labels"][jobs.QUEUE_LABEL]) in queues  # the team's LocalQueue as kueue.py names it
    assert b["spec"]["suspend"] is True
    assert b["spec"]["template"]["metadata"]["annotations"] == {"kueue.x-k8s.io/podset-preferred-topology": BLOCK}
    e = the(result, "eval", "Job")
    assert e["metadata"]["labels"][jobs.QUEUE_LABEL] == "adhoc" and e["spec"]["suspend"] is True
    # default namespace: no team, no queue named: Kueue would not manage it
    a = the(result, "train-a", "Job")
    assert jobs.QUEUE_LABEL not in a["metadata"]["labels"] and "suspend" not in a["spec"]
    assert "belongs to no team" in reasons(result, "train-a")


def test_kueue_required_topology_annotation_names_the_level_label():
    job_list = [dict(JOBS[0], namespace="vision-dev", template="gpu-nic-pair-2")]
    result = render("1.34", {}, job_list=job_list)
    annotations = pod(result, "train-a")["metadata"]["annotations"]
    assert annotations["kueue.x-k8s.io/podset-required-topology"] == RACK
    assert the(result, "train-a", "Job")["metadata"]["labels"][jobs.QUEUE_LABEL] == "vision"


# -- NCCL ---------------------------------------------------------------------------------------------


def test_nccl_environment_only_where_pinned_rails_justify_it():
    result = render("1.36", ALL)
    # pinned to rails 0 and 1, 4 workers; NCCL_NET_GDR_LEVEL never (no bound over every allocation is known)
    assert {k: v for k, v in env(result, "train-a").items() if k.startswith("NCCL_")} == {"NCCL_CROSS_NIC": "0"}
    assert pod(result, "train-a")["metadata"]["annotations"][jobs.RAILS_ANNOTATION] == "0,1"
    for name in ("train-b", "eval"):  # not pinned
        assert not any(k.startswith("NCCL_") for k in env(result, name))
        assert jobs.RAILS_ANNOTATION not in pod(result, name)["metadata"].get("annotations", {})
    single = render("1.36", ALL, job_list=[dict(JOBS[0], workers=1)])
    assert "NCCL_CROSS_NIC" not in env(single, "train-a")
    unknown = render("1.36", ALL, rails=None)  # catalogue not known: no rails, no NCCL variable
    assert not any(k.startswith("NCCL_") for k in env(unknown, "train-a"))


def test_template_rails_reads_the_claim_catalogue():
    catalogue = claims.render({}, "site-a", "1.36", rail_rules={"h1": {"by": "pci_order", "count": 2}})
    found = jobs.template_rails(catalogue["objects"])
    assert found["gpu-nic-rail-1"] == [1]
    assert found["gpu-nic-rails-2-0"] == [0, 1]
    assert found["gpu-nic-pair-1"] is None
    assert all(o["kind"] == "ResourceClaimTemplate" for o in catalogue["objects"] if o["metadata"]["name"] in found)


# -- input errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # the checks are jobs_spec's (tests/.../jobs/test_spec.py); here: render refuses with them
        ({"name": "7train"}, "aligned_dra_jobs[0].name: '7train' is not a DNS label"),
        ({"placement": {"level": "row"}}, "placement.level: 'row' is not a level of the site"),
        ({"template": "gpu-nic-pair-8"}, "'gpu-nic-pair-8' is not a claim template the site's catalogue renders"),
        ({"namespace": "elsewhere"}, "namespace: 'elsewhere' has no copy of template 'gpu-nic-rails-2-0'"),
        ({"namespace": "vision"}, "is not copied into namespace 'vision': team 'vision' lists gpu-nic-pair-2"),
    ],
)
def test_bad_job_input_is_refused_naming_the_job_and_field(change, message):
    with pytest.raises(jobs.JobsError) as err:
        render("1.36", ALL, job_list=[dict(JOBS[0], **change)])
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("levels", "message"),
    [
        # the levels are checked as everywhere else (placement.levels.check_levels), errors as JobsError
        ([{"name": "host", "label": "kubernetes.io/hostname"}], "[0].label: kubernetes.io/hostname is the implied"),
        ([{"name": "site", "label": "aligned.dev/site"}], "[0].label: aligned.dev/site is set by the collection"),
        ([LEVELS[0], dict(LEVELS[1], label=BLOCK)], "[1].label: 'aligned.dev/block' is also the label of level 0"),
        ([{"name": "Rack", "label": RACK}], "[0].name: 'Rack' is not a DNS label"),
        ({"rack": RACK}, "aligned_dra_placement_levels: must be a list"),
    ],
)
def test_bad_levels_are_refused_as_the_placement_stage_refuses_them(levels, message):
    with pytest.raises(jobs.JobsError) as err:
        render("1.36", ALL, job_list=[JOBS[2]], levels=levels)
    assert message in str(err.value)


def test_two_jobs_of_one_name_are_refused():
    with pytest.raises(jobs.JobsError, match="'train-a' is also the name of aligned_dra_jobs"):
        render("1.36", {}, job_list=[JOBS[0], dict(JOBS[0], workers=2)])


def test_defaults_fill_namespace_image_and_mode():
    result = render(
        "1.36",
        {},
        job_list=[{"name": "j", "workers": 2, "template": "gpu-nic-pair-1", "placement": {"level": "rack"}}],
        claims_settings={"namespace": "ml"},
    )
    job = the(result, "j", "Job")
    assert job["metadata"]["namespace"] == "ml" and the(result, "j", "Service")["metadata"]["namespace"] == "ml"
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == jobs_spec.DEFAULT_IMAGE
    assert [t["topologyKey"] for t in affinity_terms(result, "j")[0]] == [RACK]  # mode required by default


def test_no_jobs_render_nothing():
    assert render("1.37", ALL, job_list=[])["objects"] == []
    assert jobs.render_jobs("s", None, "1.37", None, None, None, None, None)["files"] == []
