# SPDX-License-Identifier: Apache-2.0
"""The validation stage's placement checks: a site's levels, every host's domains, and its jobs.

Read per site, like the other site settings, from the site's first host
(``aligned_dra_placement_levels``, ``aligned_dra_jobs``; the validation's
site check refuses a host whose value differs), and per host
(``aligned_dra_placement``), with the code the placement and teams stages
use (:mod:`controller.domains.levels`, :mod:`controller.jobs.spec`):

- :func:`check_levels` - the levels are well formed (for the ``placement``
  stage, and for ``teams``, whose Kueue Topology has them);
- :func:`check_hosts` - every host has a valid domain at every level and
  nothing else, a domain sits inside one domain of the level above, the site
  name can be the nodes' site label, no two hosts are one node (for
  ``placement``, and for ``teams`` under Kueue with levels: its Topology only
  sees labelled nodes);
- :func:`check_jobs` - the jobs are well formed and name claim templates the
  site's catalogue renders for its minor (``placement``).

Levels read from the cluster or named by a preset
(:mod:`controller.domains.level_specs`) are checked by
:func:`check_sourced_hosts` instead of the inventory check: the hosts'
``aligned_dra_placement`` holds the inventory levels only, and
``aligned_dra_placement_cluster`` says where the Nodes and ResourceSlices
come from; with ``source: files`` they are read here and every node's value
is checked (:func:`sources.sourced_problems`), with ``source: cluster`` the
placement role reads them.

Each returns ``(host, variable, value shown, reason)`` tuples; the validation
makes them its problems. Controller-side; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import level_specs, shared, sources
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels as placement
from ansible_collections.aligned.dra.plugins.module_utils.controller.inputs.site import (
    NODE_NAME_SETTINGS,
    kubernetes_node_name,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import spec as jobs_spec

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Any

    Setting = Callable[[str, str, Any], Any]
    Found = list[tuple[str, str, str, str]]

LEVELS = shared.LEVELS_VARIABLE
PLACEMENT = shared.PLACEMENT_VARIABLE
JOBS = jobs_spec.JOBS_VARIABLE
CLUSTER = sources.CLUSTER_VARIABLE


def _holders(hosts: list[str], setting: Setting, variable: str, key: Callable[[Any], str]) -> list[str]:
    """The hosts whose ``variable`` is the first host's (a site setting: usually all of them)."""
    wanted = key(setting(hosts[0], variable, None))
    return [host for host in hosts if key(setting(host, variable, None)) == wanted]


def check_levels(
    site: str, hosts: list[str], setting: Setting, show: Callable[[Any], str]
) -> tuple[list[dict[str, str]] | None, Found]:
    """``(levels, problems)``: the site's levels from its first host; None when they are wrong."""
    raw = setting(hosts[0], LEVELS, None)
    try:
        levels = placement.check_levels(raw)
    except shared.PlacementError as exc:
        holders = _holders(hosts, setting, LEVELS, show)
        return None, [(host, LEVELS, show(raw), f"site {site}: {exc}") for host in holders]
    return levels, []


def uses_levels(stages: Iterable[str], levels: list[dict[str, str]] | None, teams_settings: Any) -> bool:
    """Whether this run's stages put the nodes' domains to use: placement, or Kueue's Topology."""
    stages = set(stages)
    if "placement" in stages:
        return True
    engine = teams_settings.get("engine") if isinstance(teams_settings, dict) else None
    return "teams" in stages and bool(levels) and schedulers.uses_kueue(engine)


def check_hosts(
    site: str, hosts: list[str], setting: Setting, levels: list[dict[str, str]], show: Callable[[Any], str]
) -> Found:
    """Every host's ``aligned_dra_placement`` against the site's levels, nesting and node names included."""
    if placement.is_sourced(setting(hosts[0], LEVELS, None)):
        return check_sourced_hosts(site, hosts, setting, show)
    per_host = {host: setting(host, PLACEMENT, None) for host in hosts}
    _domains, found = placement.placement_problems(levels, per_host)
    if levels:
        names = {
            host: kubernetes_node_name(host, {name: setting(host, name, None) for name in NODE_NAME_SETTINGS})
            for host in hosts
        }
        found += shared.node_name_problems(names)
        problem = placement.site_label_problem(site)
        if problem:
            found += [shared.HostProblem(host, "aligned_dra_site", show(site), problem) for host in hosts]
    return [(p.host, p.field, p.value, p.reason) for p in found]


def check_sourced_hosts(site: str, hosts: list[str], setting: Setting, show: Callable[[Any], str]) -> Found:
    """Levels read from the cluster: the cluster setting, the hosts' inventory levels and every node's value
    (node, level and value named), read from the files or the API server the setting names (read-only: the
    values are checked before anything changes)."""
    levels = setting(hosts[0], LEVELS, None)
    try:
        specs = level_specs.check_level_specs(levels)
    except shared.PlacementError:
        return []  # check_levels said it
    raw = setting(hosts[0], CLUSTER, None)
    try:
        nodes, slices = sources.read_objects(raw, specs)
    except shared.PlacementError as exc:
        holders = _holders(hosts, setting, CLUSTER, show) if raw is not None else hosts
        return [(host, CLUSTER, show(raw), f"site {site}: {exc}") for host in holders]
    names = {
        host: kubernetes_node_name(host, {name: setting(host, name, None) for name in NODE_NAME_SETTINGS})
        for host in hosts
    }
    per_host = {host: setting(host, PLACEMENT, None) for host in hosts}
    _placement, found = sources.sourced_problems(levels, per_host, names, nodes, slices)
    problem = placement.site_label_problem(site)
    if problem:
        found += [shared.HostProblem(host, "aligned_dra_site", show(site), problem) for host in hosts]
    return [(p.host, p.field, p.value, p.reason) for p in found]


def check_jobs(
    site: str,
    hosts: list[str],
    setting: Setting,
    levels: list[dict[str, str]],
    claims_namespace: str | None,
    catalogue: list[dict[str, Any]],
    minor: str,
    show: Callable[[Any], str],
) -> Found:
    """The site's jobs (from its first host) against its levels and the claim objects it renders for ``minor``."""
    raw = setting(hosts[0], JOBS, None)
    holders = _holders(hosts, setting, JOBS, show)
    try:
        jobs = jobs_spec.check_jobs(raw, levels, claims_namespace)
    except shared.PlacementError as exc:
        return [(host, JOBS, show(raw), f"site {site}: {exc}") for host in holders]
    templates = [o["metadata"]["name"] for o in catalogue if o.get("kind") == "ResourceClaimTemplate"]
    claims = [o["metadata"]["name"] for o in catalogue if o.get("kind") == "ResourceClaim"]
    reasons = jobs_spec.check_job_templates(jobs, templates, minor, claims)
    _engine, teams = jobs_spec.team_entries(setting(hosts[0], "aligned_dra_teams", None))
    reasons += jobs_spec.check_job_namespaces(jobs, claims_namespace, teams)
    return [(host, JOBS, show(raw), f"site {site}: {reason}") for reason in reasons for host in holders]
