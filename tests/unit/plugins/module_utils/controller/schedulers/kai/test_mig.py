# SPDX-License-Identifier: Apache-2.0
"""MIG on a KAI Scheduler site (schedulers/kai/mig.py, through the teams stage's render): KAI v0.17 counts
every device of a driver whose name contains "gpu" as one GPU, so the stage says how many GPUs KAI would
count on the MIG hosts, refuses GPU memory on MIG classes and quotas or templates on MIG classes named with
"gpu", naming the reason and the alternative, and keeps device counts on the default MIG class as
ResourceQuotas."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import mig as kai_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai.api import KaiError
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams.settings import TeamsError
from ansible_collections.aligned.dra.plugins.module_utils.dra import scheduler_counts
from ansible_collections.aligned.dra.tests.support.sites.mig_settings import DYNAMIC
from ansible_collections.aligned.dra.tests.support.sites.mig_settings import HALF as STATIC
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

SPLIT = {"split_gpu_driver": "gpu.aligned.dev"}
CLAIMS = {"gpu_driver": "dra.aligned.dev"}


@pytest.fixture(scope="module")
def dgx():
    return topology_of("dgx-h100")


def render(teams_: list[dict], dgx: dict, mig=None, claims_settings=None) -> dict:
    """A ``kai`` site (the collection's driver split by kind, as KAI needs) of one DGX H100 host ``h1``."""
    mig = {"h1": DYNAMIC} if mig is None else mig
    settings = dict(CLAIMS, **(claims_settings or {}))
    topologies = {"h1": dgx}
    objects = burst.render(settings, "s", "1.36", mig=mig, topologies=topologies, device_options=SPLIT)["objects"]
    site = schedulers_mig.site(mig, topologies)
    if site is not None:
        site["published"] = schedulers_mig.published_per_gpu(topologies, mig)
    keys = claims.settings(settings)["classes"]
    drivers = claims.published_drivers(claims.settings(settings), SPLIT)
    return teams.render(
        {"engine": "kai", "teams": teams_}, "s", objects, "1.36", class_keys=keys, drivers=drivers, mig=site
    )


def test_the_stage_says_how_many_gpus_kai_would_count_on_the_mig_hosts(dgx):
    result = render([{"name": "llm", "tier": "production", "quotas": {"gpu": 2}}], dgx)
    # one H100 publishes every placement of every profile (7+1+4+3+2+1+1) and the GPU whole: 26 devices, x 8
    (counted,) = [n for n in result["kai"]["notes"] if "publish" in n]
    assert counted.startswith("MIG: h1 publish 208 MIG devices for 8 MIG GPUs under gpu.aligned.dev")
    assert "KAI counts 208 GPUs there, not 8" in counted and "has no counters" in counted
    assert counted in result["warnings"]
    assert result["mig"]["published"] == {"h1": {"gpus": 8, "devices": 208}}
    # KAI's own rule agrees: the driver's name contains gpu, so every one of its devices is a GPU
    assert scheduler_counts.kai_counts_as_gpu("gpu.aligned.dev")
    (plain,) = [n for n in result["kai"]["notes"] if "count as no GPU" in n]
    assert "mig.aligned.dev" in plain
    assert teams.validate_all(result["objects"], "1.36") == []


def test_static_hosts_count_their_instances(dgx):
    result = render([{"name": "llm", "quotas": {"gpu": 1}}], dgx, mig={"h1": STATIC})
    assert result["mig"]["published"] == {"h1": {"gpus": 8, "devices": 16}}
    assert any("publish 16 MIG devices for 8 MIG GPUs" in n for n in result["kai"]["notes"])


def test_gpu_memory_on_a_mig_class_is_refused_with_the_reason_and_the_alternative(dgx):
    with pytest.raises(TeamsError) as refused:
        render([{"name": "llm", "quotas": {"mig": "80Gi"}}], dgx)
    message = str(refused.value)
    assert message.startswith(
        "aligned_dra_teams.teams[llm].quotas.mig: '80Gi' is GPU memory on the MIG class mig.aligned.dev"
    )
    assert "has no counters" in message and "a MIG partition counts as a whole GPU" in message
    assert "use engine kueue or both" in message


def test_a_mig_class_named_with_gpu_is_refused_for_quotas_and_templates(dgx):
    renamed = {
        "classes": {"mig": "mig-gpu.aligned.dev"},
        "templates": {"mig": {"class_name": "gpu-{profile}.aligned.dev"}},
    }
    with pytest.raises(KaiError) as refused:
        render([{"name": "llm", "templates": ["mig-3g-40gb"], "quotas": {"mig": 2}}], dgx, claims_settings=renamed)
    message = str(refused.value)
    assert "teams[llm].quotas.mig-gpu.aligned.dev: the class selects MIG devices and its name contains 'gpu'" in message
    assert "template mig-3g-40gb: request mig asks for MIG devices of class gpu-3g-40gb.aligned.dev" in message
    assert "count each partition as a whole GPU" in message and kai_mig.ALTERNATIVE in message
    # without the quota, the template alone is refused too
    with pytest.raises(KaiError, match="template mig-3g-40gb: request mig asks for MIG devices"):
        render([{"name": "llm", "templates": ["mig-3g-40gb"]}], dgx, claims_settings=renamed)


def test_a_device_count_on_the_default_mig_class_stays_a_resource_quota(dgx):
    result = render(
        [{"name": "llm", "tier": "production", "templates": ["mig-3g-40gb"], "quotas": {"gpu": 2, "mig": 4}}], dgx
    )
    (quota,) = [o for o in result["objects"] if o["kind"] == "ResourceQuota"]
    assert quota["spec"]["hard"] == {"mig.aligned.dev.deviceclass.resource.k8s.io/devices": "4"}
    (leaf,) = [q for q in result["kai"]["queues"] if q.get("team") == "llm"]
    assert leaf["quota"] == 2  # the queue counts the GPU class only
    assert teams.validate_all(result["objects"], "1.36") == []


def test_no_mig_no_mig_notes(dgx):
    result = render([{"name": "llm", "quotas": {"gpu": 2}}], dgx, mig={})
    assert "mig" not in result and "warnings" not in result
    assert not [n for n in result["kai"]["notes"] if n.startswith("MIG:")]
    assert kai_mig.notes(None, {}, {"gpu": "gpu.aligned.dev"}, {}) == []
