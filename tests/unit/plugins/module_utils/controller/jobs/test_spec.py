# SPDX-License-Identifier: Apache-2.0
"""controller/jobs/spec.py: a site's jobs, normalised, and their templates against the catalogue."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.shared import PlacementError
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs.spec import (
    DEFAULT_IMAGE,
    check_job_namespaces,
    check_job_templates,
    check_jobs,
    team_entries,
)

LEVELS = [{"name": "block", "label": "aligned.dev/block"}, {"name": "rack", "label": "aligned.dev/rack"}]
JOB = {"name": "train", "workers": 4, "template": "gpu-nic-pair-1"}


def one(**changes: object) -> dict:
    job = dict(JOB, **changes)
    return check_jobs([job], LEVELS, "ml")[0]


def test_defaults_are_filled_in():
    assert check_jobs([JOB], LEVELS, None) == [
        {
            "name": "train",
            "workers": 4,
            "template": "gpu-nic-pair-1",
            "namespace": "default",
            "placement": None,
            "image": DEFAULT_IMAGE,
            "queue": None,
        }
    ]
    assert one()["namespace"] == "ml"  # the claims namespace
    assert one(placement={"level": "rack"})["placement"] == {"level": "rack", "mode": "required"}
    assert one(placement={"level": "block", "mode": "preferred"})["placement"] == {
        "level": "block",
        "mode": "preferred",
    }
    assert one(namespace="team-a", image="example.com/nccl:1", queue="vision")["namespace"] == "team-a"
    assert check_jobs(None, LEVELS, "ml") == [] and check_jobs([], [], None) == []


def test_the_limits_that_are_allowed():
    assert one(name="j" * 50, workers=4096)["workers"] == 4096
    assert one(workers=1)["workers"] == 1


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"name": "Train"}, r"^aligned_dra_jobs\[0\]\.name: 'Train' is not a DNS label of at most 50"),
        ({"name": "j" * 51}, r"^aligned_dra_jobs\[0\]\.name: 'j{51}' is not a DNS label of at most 50"),
        ({"name": None}, r"^aligned_dra_jobs\[0\]\.name: None"),
        ({"worker": 4}, r"^aligned_dra_jobs\[0\]: unknown key 'worker'; did you mean workers\?"),
        ({"workers": 0}, r"^aligned_dra_jobs\[0\] \(job train\)\.workers: 0 is not a whole number from 1 to 4096"),
        ({"workers": 4097}, r"\.workers: 4097 is not"),
        ({"workers": True}, r"\.workers: True is not"),
        ({"workers": "4"}, r"\.workers: '4' is not"),
        ({"workers": 2.0}, r"\.workers: 2.0 is not"),
        ({"template": ""}, r"\(job train\)\.template: '' is not a claim template name"),
        ({"template": None}, r"\.template: None is not"),
        ({"namespace": "Team_A"}, r"\(job train\)\.namespace: 'Team_A' is not a namespace name"),
        ({"image": "a b"}, r"\.image: 'a b' is not a container image reference"),
        ({"image": ""}, r"\.image: '' is not"),
        ({"queue": "Vision"}, r"\.queue: 'Vision' is not a LocalQueue name"),
        ({"queue": "q" * 64}, r"\.queue: 'q{64}' is not"),
        ({"placement": "rack"}, r"\(job train\)\.placement: must be a mapping with level and mode \(got str\)"),
        ({"placement": {"mode": "required"}}, r"\(job train\)\.placement\.level: required \(one of the site's levels"),
        (
            {"placement": {"level": "rck"}},
            r"^aligned_dra_jobs\[0\] \(job train\)\.placement\.level: 'rck' is not a level of the site; "
            r"did you mean rack\? \(levels: block, rack\)",
        ),
        ({"placement": {"level": "rack", "mode": "strict"}}, r"\.placement\.mode: 'strict' is not one of required"),
        ({"placement": {"level": "rack", "mod": "required"}}, r"\.placement: unknown key 'mod'; did you mean mode\?"),
    ],
)
def test_bad_jobs_name_the_field(changes, message):
    with pytest.raises(PlacementError, match=message):
        one(**changes)


def test_not_a_list_or_not_a_mapping():
    with pytest.raises(PlacementError, match=r"^aligned_dra_jobs: must be a list of jobs \(got dict\)"):
        check_jobs({"train": JOB}, LEVELS, None)
    with pytest.raises(PlacementError, match=r"^aligned_dra_jobs\[1\]: must be a mapping"):
        check_jobs([JOB, "eval"], LEVELS, None)


def test_names_are_unique_on_the_site():
    with pytest.raises(
        PlacementError, match=r"^aligned_dra_jobs\[2\]\.name: 'train' is also the name of aligned_dra_jobs\[0\]"
    ):
        check_jobs([JOB, dict(JOB, name="eval"), dict(JOB, namespace="other")], LEVELS, None)


def test_a_placement_level_on_a_site_without_levels():
    with pytest.raises(PlacementError, match="'rack': the site declares no levels"):
        check_jobs([dict(JOB, placement={"level": "rack"})], [], None)
    assert check_jobs([dict(JOB, placement=None)], [], None)[0]["placement"] is None


def test_the_field_name_is_the_callers():
    with pytest.raises(PlacementError, match=r"^jobs\[0\]\.name"):
        check_jobs([dict(JOB, name="X")], LEVELS, None, where="jobs")


# -- templates ------------------------------------------------------------------------------------


def test_templates_the_catalogue_does_not_render():
    jobs = check_jobs(
        [JOB, dict(JOB, name="b", template="gpu-nic-piar-1"), dict(JOB, name="c", template="zzz")], LEVELS, None
    )
    problems = check_job_templates(jobs, ["gpu-nic-pair-1", "gpu-nic-pair-2", "gpu-1"], "1.36")
    assert problems == [
        "aligned_dra_jobs[1].template (job b): 'gpu-nic-piar-1' is not a claim template the site's catalogue "
        "renders for Kubernetes 1.36; did you mean gpu-nic-pair-1?",
        "aligned_dra_jobs[2].template (job c): 'zzz' is not a claim template the site's catalogue renders for "
        "Kubernetes 1.36",
    ]


def test_a_shared_claim_is_not_a_template():
    # 1.35 renders the fractional GPU as one shared ResourceClaim (no consumable capacity)
    rendered = claims.render({}, "lab", "1.35")["objects"]
    templates = [o["metadata"]["name"] for o in rendered if o["kind"] == "ResourceClaimTemplate"]
    shared = [o["metadata"]["name"] for o in rendered if o["kind"] == "ResourceClaim"]
    assert shared, "the 1.35 catalogue renders a shared claim"
    jobs = check_jobs([dict(JOB, template=shared[0])], LEVELS, None)
    problems = check_job_templates(jobs, templates, "1.35", shared)
    assert len(problems) == 1
    assert f"'{shared[0]}' is a shared ResourceClaim on Kubernetes 1.35, not a claim template" in problems[0]
    assert check_job_templates(check_jobs([dict(JOB, template=templates[0])], LEVELS, None), templates, "1.35") == []


def test_a_name_must_start_with_a_letter_for_the_service():
    with pytest.raises(PlacementError, match=r"aligned_dra_jobs\[0\]\.name: '7train' .* starting with a letter"):
        one(name="7train")


TEAMS = {
    "engine": "kueue",
    "teams": [
        {"name": "llm", "namespaces": ["llm-train"], "templates": ["gpu-nic-pair-1"]},
        {"name": "vision", "templates": ["gpu-only"]},
    ],
}


def test_team_entries_default_the_namespaces_to_the_team_name():
    engine, teams = team_entries(TEAMS)
    assert engine == "kueue"
    assert teams[1] == {"name": "vision", "namespaces": ["vision"], "templates": ["gpu-only"], "tier": "research"}
    assert team_entries(None) == ("resourcequota", [])


def test_the_template_must_be_in_the_jobs_namespace():
    _engine, teams = team_entries(TEAMS)
    jobs = check_jobs(
        [
            JOB,  # the claims namespace holds the catalogue
            dict(JOB, name="a", namespace="llm-train"),  # copied into the team's namespace
            dict(JOB, name="b", namespace="vision"),  # the team lists another template
            dict(JOB, name="c", namespace="elsewhere"),  # no team has it
        ],
        LEVELS,
        "ml",
    )
    assert check_job_namespaces(jobs, "ml", teams) == [
        "aligned_dra_jobs[2] (job b).template: 'gpu-nic-pair-1' is not copied into namespace 'vision': "
        "team 'vision' lists gpu-only",
        "aligned_dra_jobs[3] (job c).namespace: 'elsewhere' has no copy of template 'gpu-nic-pair-1': the "
        "catalogue is in 'ml' and no team of aligned_dra_teams has this namespace",
    ]
