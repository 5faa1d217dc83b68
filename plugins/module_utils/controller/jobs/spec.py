# SPDX-License-Identifier: Apache-2.0
"""The multi-node jobs of a site (``aligned_dra_jobs``), checked and normalised.

:func:`check_jobs` reads the list and returns each job with its defaults
filled in, or raises :class:`PlacementError` naming the field
(``aligned_dra_jobs[2].placement.level``). :func:`check_job_templates` says
which jobs name a claim template the site's catalogue does not render for its
minor. The placement search and the job objects read what they return.

Controller-side; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.shared import PlacementError, did_you_mean
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams.settings import DEFAULT_TIER, team_namespaces
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

JOBS_VARIABLE = "aligned_dra_jobs"
JOB_KEYS = ("name", "workers", "template", "namespace", "placement", "image", "queue")
PLACEMENT_KEYS = ("level", "mode")
MODES = ("required", "preferred")
DEFAULT_MODE = "required"
DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"
DEFAULT_NAMESPACE = "default"  # aligned_dra_claims.namespace's default
# Object names add suffixes to the job's (the headless Service, the Workload, a pod's
# "-<index>-<random>"): 50 leaves room within a DNS label's 63.
MAX_NAME = 50
MAX_WORKERS = 4096
MAX_LABEL_VALUE = 63


def _keys(at: str, value: dict[str, Any], known: tuple[str, ...]) -> None:
    unknown = sorted(set(value) - set(known), key=str)
    if unknown:
        raise PlacementError(
            f"{at}: unknown key {unknown[0]!r}{did_you_mean(unknown[0], known)} (known: {', '.join(known)})"
        )


def _placement(at: str, raw: Any, level_names: list[str]) -> dict[str, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise PlacementError(f"{at}: must be a mapping with level and mode (got {type(raw).__name__})")
    _keys(at, raw, PLACEMENT_KEYS)
    level = raw.get("level")
    if level is None:
        raise PlacementError(f"{at}.level: required (one of the site's levels: {', '.join(level_names) or 'none'})")
    if not level_names:
        raise PlacementError(
            f"{at}.level: {level!r}: the site declares no levels (aligned_dra_placement_levels); "
            "leave placement out to place the job anywhere on the site"
        )
    if level not in level_names:
        raise PlacementError(
            f"{at}.level: {level!r} is not a level of the site{did_you_mean(level, level_names)} "
            f"(levels: {', '.join(level_names)})"
        )
    mode = raw.get("mode", DEFAULT_MODE)
    if mode is None:
        mode = DEFAULT_MODE
    if mode not in MODES:
        raise PlacementError(f"{at}.mode: {mode!r} is not one of {', '.join(MODES)}{did_you_mean(mode, MODES)}")
    return {"level": level, "mode": mode}


def _job(at: str, raw: Any, level_names: list[str], namespace: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise PlacementError(f"{at}: must be a mapping (name, workers, template, ...) (got {type(raw).__name__})")
    _keys(at, raw, JOB_KEYS)
    name = raw.get("name")
    # the headless Service takes the job's name, and a Service name starts with a letter (DNS-1035)
    if not dra.is_dns_label(name) or len(name) > MAX_NAME or not name[0].isalpha():
        raise PlacementError(
            f"{at}.name: {name!r} is not a DNS label of at most {MAX_NAME} characters starting with a letter "
            "(lower-case letters, digits and '-'; the Service takes the name, the objects add suffixes to it)"
        )
    at = f"{at} (job {name})"
    workers = raw.get("workers")
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise PlacementError(f"{at}.workers: {workers!r} is not a whole number from 1 to {MAX_WORKERS}")
    template = raw.get("template")
    if not isinstance(template, str) or not template:
        raise PlacementError(f"{at}.template: {template!r} is not a claim template name (required)")
    job_namespace = raw.get("namespace")
    if job_namespace is None:
        job_namespace = namespace
    if not dra.is_dns_label(job_namespace):
        raise PlacementError(f"{at}.namespace: {job_namespace!r} is not a namespace name (a DNS label)")
    image = raw.get("image")
    if image is None:
        image = DEFAULT_IMAGE
    if not isinstance(image, str) or not image or any(c.isspace() for c in image):
        raise PlacementError(f"{at}.image: {image!r} is not a container image reference")
    queue = raw.get("queue")
    if queue is not None and not (
        isinstance(queue, str) and dra.is_dns_subdomain(queue) and len(queue) <= MAX_LABEL_VALUE
    ):
        raise PlacementError(
            f"{at}.queue: {queue!r} is not a LocalQueue name that fits a label value "
            f"(a DNS subdomain of at most {MAX_LABEL_VALUE} characters)"
        )
    return {
        "name": name,
        "workers": workers,
        "template": template,
        "namespace": job_namespace,
        "placement": _placement(f"{at}.placement", raw.get("placement"), level_names),
        "image": image,
        "queue": queue,
    }


def check_jobs(
    raw: Any, levels: list[dict[str, str]], claims_namespace: str | None, where: str = JOBS_VARIABLE
) -> list[dict[str, Any]]:
    """The site's jobs, normalised: ``[{"name", "workers", "template", "namespace", "placement", "image", "queue"}]``.

    ``levels`` are the site's checked levels; ``claims_namespace`` is
    ``aligned_dra_claims.namespace`` (None: ``default``), every job's default
    namespace. ``placement`` is None (anywhere on the site) or ``{"level",
    "mode"}`` (mode default ``required``); ``image`` defaults to
    :data:`DEFAULT_IMAGE`; ``queue`` stays None when not set (the job objects
    pick the team's queue under Kueue). Raises :class:`PlacementError` naming
    the field; job names are unique on the site.
    """
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise PlacementError(f"{where}: must be a list of jobs (got {type(raw).__name__})")
    level_names = [level["name"] for level in levels]
    namespace = claims_namespace or DEFAULT_NAMESPACE
    jobs: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(raw):
        job = _job(f"{where}[{index}]", item, level_names, namespace)
        if job["name"] in seen:
            raise PlacementError(
                f"{where}[{index}].name: {job['name']!r} is also the name of {where}[{seen[job['name']]}]; "
                "job names are unique on a site"
            )
        seen[job["name"]] = index
        jobs.append(job)
    return jobs


def team_entries(teams_settings: Mapping[str, Any] | None) -> tuple[str, list[dict[str, Any]]]:
    """``(engine, teams)`` of ``aligned_dra_teams`` (raw or checked): each team's name, namespaces
    (:func:`settings.team_namespaces`, as the teams stage reads them), the templates copied into them and
    its tier."""
    conf = teams_settings or {}
    engine = conf.get("engine") or schedulers.DEFAULT_ENGINE
    listed = conf.get("teams") or []
    if not isinstance(listed, list):
        raise PlacementError(f"aligned_dra_teams.teams: must be a list of teams (got {type(listed).__name__})")
    teams = []
    for index, team in enumerate(listed):
        if not (isinstance(team, dict) and isinstance(team.get("name"), str)):
            continue  # the teams stage says what is wrong with it
        entry = {
            "name": team["name"],
            "namespaces": team_namespaces(team),
            "templates": team.get("templates") or [],
            "tier": team.get("tier") or DEFAULT_TIER,
        }
        for key in ("namespaces", "templates"):
            if not isinstance(entry[key], list) or not all(isinstance(v, str) for v in entry[key]):
                raise PlacementError(f"aligned_dra_teams.teams[{index}].{key}: must be a list of names")
        teams.append(entry)
    return engine, teams


def check_job_namespaces(
    jobs: list[dict[str, Any]],
    claims_namespace: str | None,
    teams: list[dict[str, Any]],
    where: str = JOBS_VARIABLE,
) -> list[str]:
    """Problems of jobs whose template has no copy in the job's namespace: the catalogue is in the claims
    namespace, a team namespace holds copies of its team's ``templates``; elsewhere the workers would wait
    for the template forever. ``teams`` as :func:`team_entries` gives them."""
    namespace = claims_namespace or DEFAULT_NAMESPACE
    problems = []
    for index, job in enumerate(jobs):
        if job["namespace"] == namespace:
            continue
        at = f"{where}[{index}] (job {job['name']})"
        team = next((t for t in teams if job["namespace"] in t["namespaces"]), None)
        if team is None:
            problems.append(
                f"{at}.namespace: {job['namespace']!r} has no copy of template {job['template']!r}: the catalogue "
                f"is in {namespace!r} and no team of aligned_dra_teams has this namespace"
            )
        elif job["template"] not in team["templates"]:
            problems.append(
                f"{at}.template: {job['template']!r} is not copied into namespace {job['namespace']!r}: "
                f"team {team['name']!r} lists {', '.join(team['templates']) or 'no templates'}"
            )
    return problems


def check_job_templates(
    jobs: list[dict[str, Any]],
    catalogue_template_names: Iterable[str],
    minor: str,
    shared_claim_names: Iterable[str] = (),
    where: str = JOBS_VARIABLE,
) -> list[str]:
    """Problems of jobs whose template the site's catalogue does not render as a ResourceClaimTemplate.

    ``jobs`` as :func:`check_jobs` returns them (in the same order);
    ``catalogue_template_names`` the ResourceClaimTemplates the catalogue
    renders for ``minor``; ``shared_claim_names`` its ResourceClaims (a name
    there is said to be a shared claim, which workers on several nodes cannot
    use). Each problem names the job, the template, the minor and the closest
    template name.
    """
    templates = sorted(set(catalogue_template_names))
    shared = set(shared_claim_names)
    problems = []
    for index, job in enumerate(jobs):
        template = job["template"]
        if template in templates:
            continue
        at = f"{where}[{index}].template (job {job['name']})"
        if template in shared:
            problems.append(
                f"{at}: {template!r} is a shared ResourceClaim on Kubernetes {minor}, not a claim template: "
                f"one claim is allocated on one node, so the workers cannot use it{did_you_mean(template, templates)}"
            )
            continue
        problems.append(
            f"{at}: {template!r} is not a claim template the site's catalogue renders for Kubernetes {minor}"
            f"{did_you_mean(template, templates)}"
        )
    return problems
