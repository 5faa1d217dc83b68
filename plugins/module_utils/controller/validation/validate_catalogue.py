# Copyright: aligned.dra contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The validation's site catalogue: the site's claim settings rendered as the claims stage renders them, the
teams' quotas and templates against it, and the site's jobs (:func:`check_catalogue`).

MIG: the catalogue is rendered with the site's MIG hosts (``aligned_dra_mig``) and the probes this run has of
them, so a team may name a ``mig-<profile>`` template or a MIG class. Before the first probe of a MIG host
its GPUs' profiles are unknown: a team's MIG template or per-profile class that only those GPUs could give is
then not refused here (:func:`without_pending_mig`); the teams stage, after the probe, renders the catalogue
with every topology and refuses it there if no GPU offers it.

Runs on the controller; no Ansible imports. :mod:`validate` calls it from ``check_site``; problems are built
with the caller's ``problem`` (its ``Problem``) and ``site_problem`` (the same value said for every host
that carries it).
"""

from __future__ import annotations

import copy
import re

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import mig as claims_mig
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.controller.fabric import rails as fabric_rails
from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import checks as mig_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import settings as teams_settings
from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate_placement
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def site_mig(hosts: list[str], setting: Callable[[str, str, Any], Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(mig, topologies)``: the site's MIG hosts' ``aligned_dra_mig`` and the probes this run has of them."""
    mig = claims_mig.hosts_with_mig({host: setting(host, mig_checks.VARIABLE, None) for host in hosts})
    topologies = {}
    for host in mig:
        topology = mig_checks.topology_of(host, setting(host, "aligned_dra_topology", None))
        if topology is not None:
            topologies[host] = topology
    return mig, topologies


def _pattern(template: str, placeholder: str) -> re.Pattern[str]:
    head, _sep, tail = template.partition("{" + placeholder + "}")
    return re.compile(re.escape(head) + r"[a-z0-9][a-z0-9-]*" + re.escape(tail) + r"$")


def without_pending_mig(
    team_settings: dict[str, Any], claim_conf: dict[str, Any], rendered: dict[str, Any], pending: bool
) -> dict[str, Any]:
    """``team_settings`` less the MIG template names and per-profile class keys the catalogue does not have yet
    because a MIG host was not probed (``pending``); unchanged otherwise."""
    if not pending or not isinstance(team_settings, dict) or not isinstance(team_settings.get("teams"), list):
        return team_settings
    options = claim_conf["templates"][claims_mig.KEY]
    names = [_pattern(options[key], "profile") for key in ("name", "nic_name")]
    names.append(_pattern(options["prioritized_name"], "profiles"))
    have = {obj["metadata"]["name"] for obj in rendered["objects"]}
    class_key = re.compile(re.escape(claims_mig.KEY) + r"-[a-z0-9][a-z0-9-]*$")
    kept = copy.deepcopy(team_settings)
    for team in kept["teams"]:
        if not isinstance(team, dict):
            continue
        if isinstance(team.get("templates"), list):
            team["templates"] = [t for t in team["templates"] if t in have or not any(p.match(str(t)) for p in names)]
        for key in ("quotas", "borrowing_limit", "lending_limit"):
            if isinstance(team.get(key), dict):
                team[key] = {k: v for k, v in team[key].items() if not class_key.match(str(k))}
    return kept


def check_catalogue(
    site: str,
    hosts: list[str],
    setting: Callable[[str, str, Any], Any],
    stages: set[str],
    site_input: dict[str, Any],
    problem: Callable[..., Any],
    site_problem: Callable[[Exception, str], list[Any]],
) -> list[Any]:
    """The site's catalogue, teams and jobs. ``site_input``: ``version``, ``gates``, ``minor``,
    ``device_options`` and ``placement_levels`` as ``check_site`` found them, and ``show`` (how a value is
    said)."""
    first = hosts[0]
    problems: list[Any] = []
    claim_settings = setting(first, "aligned_dra_claims", {}) or {}
    # The rail templates a site's rules declare (a malformed rule is refused once, by the rails check).
    rail_rules, _malformed = fabric_rails.check_rules(
        {host: setting(host, "aligned_dra_rails", None) for host in hosts}
    )
    mig, topologies = site_mig(hosts, setting)
    try:
        rendered = burst.render(
            claim_settings,
            site,
            site_input["version"],
            site_input["gates"],
            None,
            rail_rules,
            site_input["device_options"],
            setting(first, "aligned_dra_fractional_burst", None),
            mig=mig,
            topologies=topologies,
        )
        claim_conf = claims.settings(claim_settings)
        class_keys = claim_conf["classes"]
    except (claims.ClaimsError, claims_mig.MigClaimsError, dra.DeviceModelError, dra_cel.CelError) as exc:
        return site_problem(exc, "aligned_dra_claims")
    placement_levels = site_input["placement_levels"]
    if stages & {"teams", "utilization"}:
        team_settings = setting(first, "aligned_dra_teams", {}) or {}
        team_settings = without_pending_mig(team_settings, claim_conf, rendered, len(topologies) < len(mig))
        try:
            teams.render(
                team_settings,
                site,
                rendered["objects"],
                site_input["version"],
                site_input["gates"],
                None,
                class_keys,
                placement_levels=placement_levels or [],
                drivers=claims.published_drivers(claim_conf, site_input["device_options"]),
            )
        except (teams_settings.TeamsError, schedulers.SchedulerError, dra.DeviceModelError, dra_cel.CelError) as exc:
            problems.extend(site_problem(exc, "aligned_dra_teams"))
    if "placement" in stages and placement_levels is not None:
        found = validate_placement.check_jobs(
            site,
            hosts,
            setting,
            placement_levels,
            claim_conf["namespace"],
            rendered["objects"],
            site_input["minor"],
            site_input["show"],
        )
        problems += [problem(*item) for item in found]
    return problems
