# SPDX-License-Identifier: Apache-2.0
"""The report's teams part shows the GPUs given whole or as MIG partitions, counted once, and who holds which
part (report/data.shared_rows, from the teams stage's ``shared``)."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.report import data
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of


def test_the_teams_part_lists_the_shared_gpus_and_their_holders():
    dgx = topology_of("dgx-h100")
    mig = {"h1": {"mode": "dynamic"}}
    objects = burst.render({}, "s", "1.36", None, mig=mig, topologies={"h1": dgx})["objects"]
    raw = {
        "engine": "kueue",
        "teams": [
            {"name": "inference", "tier": "production", "quotas": {"mig": "240Gi"}},
            {"name": "training", "tier": "production", "quotas": {"gpu": 4}},
        ],
    }
    plan = {"classes": {"aligned-gpu": {"devices": 8}}}
    result = teams.render(
        raw,
        "s",
        objects,
        "1.36",
        plan=plan,
        class_keys=claims.settings({})["classes"],
        mig=schedulers_mig.site(mig, {"h1": dgx}),
    )
    summary = {
        "teams": result["teams"],
        "capacity": result["capacity"],
        "kueue": result["kueue"],
        "shared": result["shared"],
    }
    view = data.teams_view(summary)["shared"]
    assert {(h["team"], h["kind"], h["gpus"]) for h in view["holders"]} == {
        ("training", "whole", "4"),
        ("inference", "memory", "3"),
    }
    assert (view["needed"], view["capacity"], view["free"], view["warn"]) == ("7", "8", "1", False)
    assert "8 H100-SXM5-80GB (shared, documented)" in view["sets"][0]
    # a site without MIG, or with one kind of quota only, shows no such table
    assert data.teams_view(dict(summary, shared=None))["shared"] is None
