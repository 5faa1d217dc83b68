# SPDX-License-Identifier: Apache-2.0
"""Multi-node jobs of a site, rendered per Kubernetes minor.

:func:`render_jobs` turns the site's jobs (``aligned_dra_jobs``, documented in docs/jobs.md) into,
per job, in the job's namespace:

- a headless ``Service`` ``<job>`` (no cluster IP, selecting the job's pods, publishing pods before
  they are ready) so worker *i* is ``<job>-<i>.<job>`` as soon as it has an address;
- an Indexed ``Job`` ``<job>``: ``completions`` = ``parallelism`` = workers, ``subdomain`` = the
  Service, ``restartPolicy: Never`` and ``backoffLimit: 0`` (a replacement worker cannot rejoin a
  running NCCL communicator, so one failed worker fails the job rather than holding the gang's devices
  while the others hang); every worker claims its devices from the job's ResourceClaimTemplate and gets
  the rendezvous environment (``MASTER_ADDR`` = worker 0, ``MASTER_PORT`` = 29500, torchrun's default,
  ``NNODES``, ``NODE_RANK`` = its completion index) and the NCCL environment its template justifies
  (:mod:`nccl`);
- the gang and topology scheduling objects the minor and gates allow (:mod:`workload`); where the
  scheduler does not enforce a required level itself, a required pod affinity on the level's label
  keeps every worker in the domain of the first (a preferred level: a preferred affinity);
- under a Kueue engine (``kueue``/``both``): the queue label (the job's ``queue``, else its namespace's
  team LocalQueue), ``suspend: true`` (Kueue admits the job) and Kueue's topology annotation for the
  level (:mod:`kueue_gangs`);
- under engine ``kai``: a KAI PodGroup with the gang, queue, priority and topology constraint instead of
  kube-scheduler's gang objects and affinity (:mod:`kai_gang`).

``gangs`` says per job which mechanism keeps its workers together (one per job).

What a minor or the site's gates leave out is listed in ``left_out`` with the reason; every object is
validated (:func:`checks.validate`) and a failure is an error, since the input was already checked.
Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import rails as claim_rails
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels as placement_levels
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.levels import check_levels
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.shared import PlacementError
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import checks, nccl, workload
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import spec as jobs_spec
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs.checks import JOB_LABEL
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import gangs as kai_gang
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import settings as kai_settings
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import gangs as kueue_gangs
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import QUEUE_LABEL
from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import settings as teams_conf
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import MANAGED, SITE_LABEL

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any


RAILS_ANNOTATION = claim_rails.RAILS_ANNOTATION
CLAIM_NAME = "devices"
CONTAINER = "worker"
MASTER_PORT = "29500"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# Set by the Job controller on every pod of one run: the affinity counts only this run's workers.
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
PREFERRED_WEIGHT = 100


class JobsError(ValueError):
    """Jobs that cannot be rendered; the message names the job and field."""


# -- input ---------------------------------------------------------------------------------------


def _levels(placement_levels: Any) -> list[dict[str, str]]:
    """The site's levels as :func:`levels.check_levels` checks them (its errors as :class:`JobsError`)."""
    try:
        return check_levels(placement_levels)
    except PlacementError as exc:
        raise JobsError(str(exc)) from None


def _claims_namespace(claims_settings: Mapping[str, Any] | None) -> str:
    namespace = (claims_settings or {}).get("namespace") or jobs_spec.DEFAULT_NAMESPACE
    if not dra.is_dns_label(namespace):
        raise JobsError(f"aligned_dra_claims.namespace {namespace!r} is not a DNS label")
    return namespace


def _with_label(placement: dict[str, Any] | None, levels: Mapping[str, str]) -> dict[str, Any] | None:
    """The job's placement with its level's node label key."""
    return dict(placement, label=levels[placement["level"]]) if placement else None


def team_queue(teams: list[dict[str, Any]], namespace: str) -> str | None:
    """The LocalQueue of ``namespace``'s team: one per team namespace, named like the team (schedulers/kueue/objects.py)."""
    for team in teams:
        if namespace in team["namespaces"]:
            return team["name"]
    return None


def template_rails(objects: list[dict[str, Any]]) -> dict[str, list[int] | None]:
    """``{template: rails it is pinned to, or None}`` for every ResourceClaimTemplate of a claim catalogue."""
    out: dict[str, list[int] | None] = {}
    for index, obj in enumerate(objects):
        if obj.get("kind") != "ResourceClaimTemplate":
            continue
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise JobsError(f"objects[{index}]: a ResourceClaimTemplate without metadata.name")
        text = (meta.get("annotations") or {}).get(RAILS_ANNOTATION)
        try:
            out[meta["name"]] = [int(r) for r in str(text).split(",")] if text else None
        except ValueError:
            raise JobsError(
                f"objects[{index}] ({meta['name']}): {RAILS_ANNOTATION} {text!r} is not a list of rails"
            ) from None
    return out


# -- objects ---------------------------------------------------------------------------------------


def _labels(site: str, job: dict[str, Any]) -> dict[str, str]:
    return dict(MANAGED, **{SITE_LABEL: site, JOB_LABEL: job["name"]})


def _service(job: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": job["name"], "namespace": job["namespace"], "labels": dict(labels)},
        "spec": {
            "clusterIP": "None",
            "selector": {JOB_LABEL: job["name"]},
            # workers look each other up before they are ready (NCCL's rendezvous comes first)
            "publishNotReadyAddresses": True,
        },
    }


def _affinity(job: dict[str, Any], key: str, mode: str) -> dict[str, Any]:
    term = {
        "labelSelector": {"matchLabels": {JOB_LABEL: job["name"]}},
        "matchLabelKeys": [CONTROLLER_UID_LABEL],
        "topologyKey": key,
    }
    if mode == "required":
        return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return {
        "podAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": PREFERRED_WEIGHT, "podAffinityTerm": term}]
        }
    }


def _env(job: dict[str, Any], nccl_entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    index = {"fieldRef": {"fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"}}
    return [
        {"name": "MASTER_ADDR", "value": f"{job['name']}-0.{job['name']}"},
        {"name": "MASTER_PORT", "value": MASTER_PORT},
        {"name": "NNODES", "value": str(job["workers"])},
        {"name": "NODE_RANK", "valueFrom": index},
    ] + nccl_entries


def _pod_template(
    job: dict[str, Any],
    labels: dict[str, str],
    env: list[dict[str, Any]],
    annotations: dict[str, str],
    affinity: dict[str, Any] | None,
    pod_link: dict[str, Any],
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "subdomain": job["name"],
        "restartPolicy": "Never",
        "resourceClaims": [{"name": CLAIM_NAME, "resourceClaimTemplateName": job["template"]}],
        "containers": [
            {
                "name": CONTAINER,
                "image": job["image"],
                "env": env,
                "resources": {"claims": [{"name": CLAIM_NAME}]},
            }
        ],
    }
    if affinity:
        spec["affinity"] = affinity
    spec.update(pod_link)
    metadata: dict[str, Any] = {"labels": dict(labels)}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"metadata": metadata, "spec": spec}


def _job(
    job: dict[str, Any],
    labels: dict[str, str],
    template: dict[str, Any],
    kueue_queue: str | None,
    scheduling: dict[str, Any] | None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": job["workers"],
        "parallelism": job["workers"],
        "backoffLimit": 0,
        "template": template,
    }
    if scheduling is not None:
        spec["scheduling"] = scheduling
    job_labels = dict(labels)
    if kueue_queue:
        job_labels[QUEUE_LABEL] = kueue_queue
        spec["suspend"] = True  # Kueue admits the job by unsuspending it
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job["name"], "namespace": job["namespace"], "labels": job_labels},
        "spec": spec,
    }


def _kai_site(site: str, engine: str, raw: Mapping[str, Any] | None, levels: list[dict[str, str]]) -> dict | None:
    """What a KAI site's jobs need: the scheduler name, the site's KAI Topology, each tier's PriorityClass."""
    if not schedulers.uses_kai(engine):
        return None
    raw = raw or {}
    teams = [t for t in raw.get("teams") or [] if isinstance(t, dict)]
    try:
        classes = teams_conf.tier_classes(dict(raw))
        scheduler_name = kai_settings.site_settings(raw.get("kai"), site, teams)["scheduler_name"]
    except (teams_conf.TeamsError, schedulers.SchedulerError) as exc:
        raise JobsError(str(exc)) from None
    return {
        "scheduler_name": scheduler_name,
        "topology": placement_levels.topology_name(site) if levels else None,
        "classes": classes,
    }


def _kai_job(
    job: dict[str, Any],
    labels: dict[str, str],
    teams: list[dict[str, Any]],
    kai_site: dict[str, Any],
    rails: list[int] | None,
    queue: str,
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The Service, the Job and its KAI PodGroup; the gang as ``gangs`` says it."""
    team = next((t for t in teams if job["namespace"] in t["namespaces"]), None)
    tier = team["tier"] if team else teams_conf.DEFAULT_TIER
    priority_class = kai_site["classes"].get(tier) or kai_site["classes"][teams_conf.DEFAULT_TIER]
    annotations = {RAILS_ANNOTATION: ",".join(str(r) for r in rails)} if rails else {}
    env = _env(job, nccl.nccl_env(job["workers"], rails))
    template = _pod_template(job, labels, env, annotations, None, {})
    job_object = _job(job, labels, template, None, None)
    group = kai_gang.pod_group(job, labels, queue, priority_class, kai_site["topology"])
    kai_gang.link(job_object, group, kai_site["scheduler_name"])
    gang = {"mechanism": "kai", "objects": [f"PodGroup {group['metadata']['name']}"], "queue": queue}
    return [_service(job, labels), job_object, group], gang


def _gang_summary(gang: workload.Gang) -> dict[str, Any]:
    kinds = [f"{o['kind']} {o['metadata']['name']}" for o in gang.objects]
    mechanism = "workload" if gang.objects else ("job-scheduling" if gang.job_scheduling else "none")
    return {"mechanism": mechanism, "objects": kinds}


def _one_job(
    site: str,
    job: dict[str, Any],
    minor: str,
    gates: dict[str, bool],
    engine: str,
    teams: list[dict[str, Any]],
    rails: list[int] | None,
    kai_site: dict[str, Any] | None,
) -> tuple[list[dict[str, Any]], list[dict[str, str]], dict[str, Any]]:
    labels = _labels(site, job)
    left_out: list[dict[str, str]] = []
    if kai_site is not None:
        owner = team_queue(teams, job["namespace"])
        if job["queue"] and owner and job["queue"] != owner:
            # the site's admission policy (teams/kai_admission.py) would refuse it at apply: say it now
            raise JobsError(
                f"aligned_dra_jobs {job['name']}: queue {job['queue']!r} is not the queue of team {owner!r}, "
                f"whose namespace {job['namespace']!r} it runs in; on a kai site a team's namespaces use its own queue"
            )
        queue = job["queue"] or owner
        if queue:
            objects, kai = _kai_job(job, labels, teams, kai_site, rails, queue)
            return objects, [], kai
        reason = (
            f"KAI queue left out: namespace {job['namespace']!r} belongs to no team and the job names no queue; "
            "kube-scheduler places the job, outside the teams' quotas"
        )
        left_out.append({"name": job["name"], "reason": reason})
    placement = job["placement"]
    required_key = placement["label"] if placement and placement["mode"] == "required" else None
    gang = workload.gang(job["name"], job["namespace"], job["workers"], minor, gates, required_key, labels)
    affinity = None
    if placement and not gang.topology_enforced:
        affinity = _affinity(job, placement["label"], placement["mode"])
    queue, annotations, kueue_left_out = kueue_gangs.job_queue(
        job, engine if kai_site is None else schedulers.KAI, team_queue(teams, job["namespace"])
    )
    if rails:
        annotations[RAILS_ANNOTATION] = ",".join(str(r) for r in rails)
    env = _env(job, nccl.nccl_env(job["workers"], rails))
    template = _pod_template(job, labels, env, annotations, affinity, gang.pod_link)
    objects = [_service(job, labels), _job(job, labels, template, queue, gang.job_scheduling)] + gang.objects
    return objects, gang.left_out + kueue_left_out + left_out, _gang_summary(gang)


def render_jobs(
    site: str,
    jobs: list[dict[str, Any]] | None,
    minor: str,
    feature_gates: dict[str, bool] | None,
    placement_levels: list[dict[str, Any]] | None,
    claims_settings: Mapping[str, Any] | None,
    teams_settings: Mapping[str, Any] | None,
    rails: Mapping[str, list[int] | None] | None,
) -> dict[str, Any]:
    """``{"objects", "files": [{"name", "object"}], "left_out": [{"name", "reason"}], "minor", "jobs", "gangs"}``.

    ``jobs``: the entries of ``aligned_dra_jobs`` (:func:`jobs_spec.check_jobs` checks them and fills the
    defaults; the result's ``jobs`` are those); ``placement_levels``: ``aligned_dra_placement_levels``; ``claims_settings``:
    ``aligned_dra_claims`` (its ``namespace``); ``teams_settings``: ``aligned_dra_teams`` (raw or
    checked: its ``engine`` and teams' names, namespaces and templates); ``rails``: every template of
    the site's catalogue with the rails it is pinned to or None (:func:`template_rails`), or None when the
    catalogue is not known (then no template is checked and no rail environment set).
    """
    minor = dra_gates.minor_of(minor)
    gates = dict(feature_gates or {})
    for gate in gates:
        if gate not in dra_gates.FEATURE_GATES:
            raise JobsError(f"feature_gates: unknown gate {gate!r} (aligned_dra_feature_gates)")
    levels = _levels(placement_levels)
    claims_namespace = _claims_namespace(claims_settings)
    engine, teams = jobs_spec.team_entries(teams_settings)
    labels = {level["name"]: level["label"] for level in levels}
    try:
        entries = jobs_spec.check_jobs(jobs, levels, claims_namespace)
    except PlacementError as exc:
        raise JobsError(str(exc)) from None
    problems = jobs_spec.check_job_namespaces(entries, claims_namespace, teams)
    if rails is not None:
        problems = jobs_spec.check_job_templates(entries, rails, minor) + problems
    if problems:
        raise JobsError("; ".join(problems))
    kai_site = _kai_site(site, engine, teams_settings, levels)
    objects: list[dict[str, Any]] = []
    left_out: list[dict[str, str]] = []
    gangs: dict[str, dict[str, Any]] = {}
    for job in entries:
        job = dict(job, placement=_with_label(job["placement"], labels))
        pinned = (rails or {}).get(job["template"])
        made, dropped, gangs[job["name"]] = _one_job(site, job, minor, gates, engine, teams, pinned, kai_site)
        objects += made
        left_out += dropped
    problems = checks.validate(objects, minor, gates)
    if problems:
        raise JobsError("rendered job objects do not validate (a bug in the renderer): " + "; ".join(problems))
    return {
        "objects": objects,
        "files": [{"name": file_name(o), "object": o} for o in objects],
        "left_out": left_out,
        "minor": minor,
        "jobs": entries,
        "gangs": gangs,
    }


def file_name(obj: dict[str, Any]) -> str:
    """``<job>-job.yaml``, ``<job>-service.yaml``, ``<job>-workload.yaml``, ``<job>-podgroup.yaml``
    (``<job>-kai-podgroup.yaml`` for KAI's)."""
    kind = "kai-podgroup" if kai_gang.is_kai_group(obj) else obj["kind"].lower()
    return f"{obj['metadata']['name']}-{kind}.yaml"
