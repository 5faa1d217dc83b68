# SPDX-License-Identifier: Apache-2.0
"""One GPU counted once (schedulers/shared.py, through the teams stage's render): whole-GPU quotas and MIG
quotas together against the GPUs both kinds of class take; refused naming both quotas and the capacity unless
the site's oversubscription factor allows it; static and Ampere GPUs given as partitions only; who holds
which part in the result."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

DYNAMIC = {"mode": "dynamic"}
STATIC = {
    "mode": "static",
    "layout": "half",
    "mig_configs": {"half": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]},
}


@pytest.fixture(scope="module")
def dgx():
    """Eight H100 SXM5 80GB; a captured tree, so the geometry NVIDIA documents."""
    return topology_of("dgx-h100")


def plan_of(gpus: int) -> dict:
    return {"classes": {"aligned-gpu": {"devices": gpus}, "aligned-nic": {"devices": 8}}}


def render(teams_: list[dict], dgx: dict, mig=None, plan=None, engine="kueue", **raw) -> dict:
    mig = {"h1": DYNAMIC} if mig is None else mig
    topologies = {host: dgx for host in mig}
    objects = burst.render({}, "s", "1.36", None, mig=mig, topologies=topologies)["objects"]
    site = schedulers_mig.site(mig, topologies)
    if site is not None:
        site["published"] = schedulers_mig.published_per_gpu(topologies, mig)
    settings = {"engine": engine, "teams": teams_, **raw}
    keys = claims.settings({})["classes"]
    return teams.render(
        settings, "s", objects, "1.36", plan=plan_of(8) if plan is None else plan, class_keys=keys, mig=site
    )


def training(gpus: int, tier: str = "production") -> dict:
    return {"name": "training", "tier": tier, "quotas": {"gpu": gpus}}


def inference(quota) -> dict:
    return {"name": "inference", "tier": "production", "templates": ["mig-1g-10gb"], "quotas": {"mig": quota}}


def test_the_issues_site_is_refused_naming_both_quotas_and_the_capacity(dgx):
    result = render([training(8), inference("240Gi")], dgx)
    (problem,) = result["problems"]
    assert "training 8 whole GPUs on aligned-gpu" in problem
    assert "inference 240Gi of GPU memory on mig.aligned.dev (at least 3 GPUs" in problem
    assert "take at least 11 GPUs at once, the site has 8" in problem
    assert "aligned_dra_teams.oversubscription" in problem
    # each class alone is within its capacity: only the one count of the shared GPUs sees it
    assert all(row["status"] == "ok" for row in result["capacity"])
    assert all(row["status"] == "ok" for row in result["kueue"]["capacity"])
    assert result["shared"]["status"] == "over_limit" and result["shared"]["needed"] == "11"


def test_what_fits_at_once_passes_and_says_who_holds_which_part(dgx):
    result = render([training(4), inference("240Gi")], dgx)
    assert result["problems"] == []
    shared = result["shared"]
    assert (shared["gpus"], shared["needed"], shared["free"], shared["status"]) == (8, "7", "1", "ok")
    holders = {h["team"]: h for h in shared["holders"]}
    assert (holders["training"]["kind"], holders["training"]["gpus"]) == ("whole", 4)
    assert (holders["inference"]["kind"], holders["inference"]["gpus"], holders["inference"]["per_gpu"]) == (
        "memory",
        "3",
        "80Gi",
    )
    (whole,) = shared["classes"]
    assert whole == {"class": "aligned-gpu", "guaranteed": 4, "shared_gpus": 8, "outside": 0, "on_shared": 4}
    (gpu_set,) = shared["sets"]
    assert gpu_set["kind"] == "shared" and gpu_set["source"] == "documented" and "_whole" not in gpu_set
    # one GPU more of either kind no longer fits
    assert render([training(5), inference("240Gi")], dgx)["shared"]["free"] == "0"
    assert render([training(6), inference("240Gi")], dgx)["problems"]
    assert render([training(4), inference("321Gi")], dgx)["problems"]


def test_the_oversubscription_factor_of_every_class_involved_must_allow_it(dgx):
    result = render([training(8), inference("240Gi")], dgx, oversubscription={"gpu": 1.5, "mig": 1.5})
    assert result["problems"] == [] and result["shared"]["status"] == "oversubscribed"
    assert result["shared"]["factor"] == 1.5
    # the smallest factor applies: MIG at 1.0 keeps the shared GPUs from being promised twice
    (problem,) = render([training(8), inference("240Gi")], dgx, oversubscription={"gpu": 1.5})["problems"]
    assert "no oversubscription is allowed" in problem


def test_gpus_without_mig_take_whole_quotas_first(dgx):
    # the plan's aligned-gpu counts 4 more GPUs than the MIG host's 8: 12 whole quota fits with 240Gi?
    # 12 - 4 = 8 on the shared GPUs, and 3 more for the memory: refused; 9 whole: 5 + 3 = 8 fits
    assert render([training(12), inference("240Gi")], dgx, plan=plan_of(12))["problems"]
    result = render([training(9), inference("240Gi")], dgx, plan=plan_of(12))
    assert result["problems"] == []
    assert result["shared"]["classes"][0]["outside"] == 4 and result["shared"]["classes"][0]["on_shared"] == 5


def test_device_counts_on_mig_classes_count_the_gpus_their_profile_fills(dgx):
    # 8 x 1g.10gb at most 7 per GPU: at least 2 GPUs (8/7), with 7 whole GPUs that is more than 8
    team = {"name": "inference", "tier": "production", "quotas": {"mig-1g-10gb.aligned.dev": 8}}
    (problem,) = render([training(7), team], dgx)["problems"]
    assert "8 MIG devices on mig-1g-10gb.aligned.dev (at least 1.15 GPUs: at most 7 per GPU at once)" in problem
    assert render([training(6), team], dgx)["problems"] == []


def test_opportunistic_quotas_are_not_guaranteed_and_not_counted(dgx):
    result = render([training(8, tier="opportunistic"), inference("240Gi")], dgx)
    assert result["problems"] == [] and result["shared"]["status"] == "none"


def test_static_gpus_are_partitions_only(dgx):
    result = render([training(4)], dgx, mig={"s": STATIC}, engine="resourcequota")
    (gpu_set,) = result["shared"]["sets"]
    assert gpu_set["kind"] == "partitions" and gpu_set["per_gpu"]["charge"] == "80Gi"
    assert result["shared"]["gpus"] == 0 and result["shared"]["partitions_only"] == 8


def test_an_ampere_gpu_in_dynamic_mig_is_partitions_only():
    a100 = copy.deepcopy(topology_of("dgx-h100"))
    for device in a100["devices"]:
        if device.get("kind") == "gpu":
            device["device_id"] = "0x20b0"  # A100 SXM4 40GB: Ampere, no GPU whole in MIG mode
    result = render([training(4), inference("80Gi")], a100, plan=plan_of(0))
    (gpu_set,) = result["shared"]["sets"]
    assert gpu_set["kind"] == "partitions" and "Ampere" in gpu_set["why"]
    assert result["shared"]["gpus"] == 0 and result["shared"]["status"] == "none"


def test_without_a_plan_the_whole_side_is_unknown_never_zero(dgx):
    objects = burst.render({}, "s", "1.36", None, mig={"h1": DYNAMIC}, topologies={"h1": dgx})["objects"]
    result = teams.render(
        {"engine": "kueue", "teams": [training(8), inference("240Gi")]},
        "s",
        objects,
        "1.36",
        plan=None,
        class_keys=claims.settings({})["classes"],
        mig=schedulers_mig.site({"h1": DYNAMIC}, {"h1": dgx}),
    )
    assert result["problems"] == []
    assert result["shared"]["status"] == "unknown" and "no plan.json" in result["shared"]["reason"]
    assert result["shared"]["needed"] is None and result["shared"]["classes"][0]["outside"] is None


def test_most_charged_is_the_largest_sum_of_partitions_that_exist_together(dgx):
    (gpu,) = schedulers_mig.site({"h1": DYNAMIC}, {"h1": dgx})["sets"]
    state = {
        "memory_slices": 8,
        "profiles": [
            # seven 1g at 10 units each (slices 0-6) against one 7g at 60: the seven win
            {
                "name": "1g",
                "slices": 1,
                "instance_count": 7,
                "memory_bytes": 10,
                "placements": [{"start": s, "size": 1} for s in range(7)],
            },
            {
                "name": "7g",
                "slices": 7,
                "instance_count": 1,
                "memory_bytes": 60,
                "placements": [{"start": 0, "size": 8}],
            },
        ],
    }
    assert schedulers_mig.most_charged(state) == 70
    state["profiles"][1]["memory_bytes"] = 75
    assert schedulers_mig.most_charged(state) == 75
    state["profiles"][0]["instance_count"] = 3
    state["profiles"][1]["memory_bytes"] = 20
    assert schedulers_mig.most_charged(state) == 30
    assert gpu["per_gpu"]["charge"] == "80Gi"
