# SPDX-License-Identifier: Apache-2.0
"""controller/validation/validate_catalogue.py: the validation renders the site's catalogue with its MIG hosts,
so teams may name MIG templates; before a MIG host's first probe those names wait for the teams stage."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import stage
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of

DYNAMIC = {"mode": "dynamic"}


@pytest.fixture(scope="module")
def dgx():
    return topology_of("dgx-h100")


def run(settings: dict[str, dict], stages=("claims", "teams")):
    return stage.run(list(settings), lambda h: list(settings[h]), lambda h, n, d: settings[h].get(n, d), stages)


def teams(*templates: str, quotas=None) -> dict:
    team = {"name": "inference", "namespaces": ["inference"], "templates": list(templates)}
    if quotas:
        team["quotas"] = quotas
    return {"engine": "kueue", "teams": [team]}


def host(**more) -> dict:
    return {"aligned_dra_site": "south", "aligned_dra_kubernetes_version": "1.36", **more}


def test_a_team_may_name_the_mig_templates_of_the_probed_gpus(dgx):
    team = teams("mig-3g-40gb", quotas={"mig": "160Gi"})
    settings = {"a": host(aligned_dra_mig=DYNAMIC, aligned_dra_topology=dgx, aligned_dra_teams=team)}
    result, message = run(settings)
    assert message is None, message


def test_a_profile_the_probed_gpus_do_not_offer_is_refused_naming_the_template(dgx):
    settings = {"a": host(aligned_dra_mig=DYNAMIC, aligned_dra_topology=dgx, aligned_dra_teams=teams("mig-1g-5gb"))}
    result, message = run(settings)
    assert message is not None and "'mig-1g-5gb' is not rendered for this site" in message


def test_before_the_first_probe_mig_names_wait_for_the_teams_stage_and_others_are_still_refused():
    waiting = {"a": host(aligned_dra_mig=DYNAMIC, aligned_dra_teams=teams("mig-3g-40gb", "mig-3g-40gb-nic"))}
    result, message = run(waiting)
    assert message is None, message
    unknown = {"a": host(aligned_dra_mig=DYNAMIC, aligned_dra_teams=teams("mig-3g-40gb", "gpu-pair-9"))}
    result, message = run(unknown)
    assert message is not None and "'gpu-pair-9' is not rendered for this site" in message


def test_without_mig_a_mig_template_is_refused_as_any_unknown_one():
    settings = {"a": host(aligned_dra_teams=teams("mig-3g-40gb"))}
    result, message = run(settings)
    assert message is not None and "'mig-3g-40gb' is not rendered for this site" in message
