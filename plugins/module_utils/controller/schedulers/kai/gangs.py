# SPDX-License-Identifier: Apache-2.0
"""A job's gang on a KAI Scheduler site (engine ``kai``): its own PodGroup, the queue, the topology.

KAI Scheduler (v0.17) schedules a job's pods as one PodGroup. Its pod
grouper would make one for a batch Job by itself, with ``minMember`` 1 unless
the Job's annotation says otherwise; the job here gets an explicit PodGroup
instead, rendered, validated against KAI's CRD and applied beside the Job:

- ``PodGroup`` ``<job>`` (``scheduling.run.ai/v2alpha2``): ``minMember`` =
  the workers, ``queue`` = the job's queue (its ``queue`` or its namespace's
  team's), ``priorityClassName`` = the team tier's PriorityClass,
  ``preemptibility: preemptible`` (KAI keeps a non-preemptible job, which a
  PodGroup of priority 100 or more is by default, within its queue's quota:
  it could not use idle GPUs over quota, and a tier without quota would never
  run), and with a
  placement level ``topologyConstraint`` on the site's KAI Topology
  ``<site>-topology``: ``requiredTopologyLevel`` or
  ``preferredTopologyLevel`` = the level's node label;
- the Job carries ``kai.scheduler/skip-podgrouper: "true"`` (else KAI's pod
  grouper would move the pods to a PodGroup of its own) and the queue label;
- the pods carry ``pod-group-name: <job>`` (KAI's link to the PodGroup),
  the queue label (read by the site's admission policy) and
  ``schedulerName`` (``aligned_dra_teams.kai.scheduler_name``).

KAI enforces the topology constraint and the gang itself: kube-scheduler's
Workload and PodGroup are not rendered for such a job, nor a pod affinity.
:func:`link_problems` checks these links.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import api as kai_api

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SKIP_ANNOTATION = "kai.scheduler/skip-podgrouper"
POD_GROUP_ANNOTATION = "pod-group-name"
LEVEL_FIELDS = {"required": "requiredTopologyLevel", "preferred": "preferredTopologyLevel"}


def pod_group(
    job: dict[str, Any], labels: dict[str, str], queue: str, priority_class: str, topology: str | None
) -> dict[str, Any]:
    """The job's KAI PodGroup (see the module docstring); ``topology``: the site's KAI Topology name."""
    spec: dict[str, Any] = {
        "minMember": job["workers"],
        "queue": queue,
        "priorityClassName": priority_class,
        # KAI holds a PodGroup of priority 100 or more (every tier's) non-preemptible unless it says so, and
        # keeps such a job within its queue's quota: a training job must be able to use idle GPUs above it
        "preemptibility": "preemptible",
    }
    placement = job["placement"]
    if placement and topology:
        spec["topologyConstraint"] = {"topology": topology, LEVEL_FIELDS[placement["mode"]]: placement["label"]}
    return {
        "apiVersion": kai_api.POD_GROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": job["name"],
            "namespace": job["namespace"],
            "labels": dict(labels, **{kai_api.QUEUE_LABEL: queue}),
        },
        "spec": spec,
    }


def link(job_object: dict[str, Any], group: dict[str, Any], scheduler_name: str) -> None:
    """Tie the rendered Job to its PodGroup: skip KAI's pod grouper, name the group, queue and scheduler."""
    queue = group["spec"]["queue"]
    meta = job_object["metadata"]
    meta["labels"][kai_api.QUEUE_LABEL] = queue
    meta.setdefault("annotations", {})[SKIP_ANNOTATION] = "true"
    template = job_object["spec"]["template"]
    template["metadata"]["labels"][kai_api.QUEUE_LABEL] = queue
    template["metadata"].setdefault("annotations", {})[POD_GROUP_ANNOTATION] = group["metadata"]["name"]
    template["spec"]["schedulerName"] = scheduler_name


def is_kai_group(obj: dict[str, Any]) -> bool:
    return obj.get("kind") == "PodGroup" and obj.get("apiVersion") == kai_api.POD_GROUP_API_VERSION


def link_problems(job: dict[str, Any], groups: list[dict[str, Any]]) -> list[str]:
    """The links between a Job and its KAI PodGroup; empty when the Job is not KAI's."""
    template = (job.get("spec") or {}).get("template") or {}
    named = ((template.get("metadata") or {}).get("annotations") or {}).get(POD_GROUP_ANNOTATION)
    if not groups and named is None:
        return []
    if len(groups) != 1:
        return [f"{len(groups)} KAI PodGroups, one expected"]
    group = groups[0]
    spec = group.get("spec") or {}
    problems = []
    if named != group["metadata"]["name"]:
        problems.append(f"the pods name PodGroup {named!r}, the rendered one is {group['metadata']['name']!r}")
    if ((job.get("metadata") or {}).get("annotations") or {}).get(SKIP_ANNOTATION) != "true":
        problems.append(f"the Job lacks {SKIP_ANNOTATION}: 'true' (KAI's pod grouper would regroup the pods)")
    workers = (job.get("spec") or {}).get("parallelism")
    if spec.get("minMember") != workers:
        problems.append(f"the PodGroup's minMember {spec.get('minMember')} is not the worker count {workers}")
    queues = {
        "the PodGroup": spec.get("queue"),
        "the Job": ((job.get("metadata") or {}).get("labels") or {}).get(kai_api.QUEUE_LABEL),
        "the pods": ((template.get("metadata") or {}).get("labels") or {}).get(kai_api.QUEUE_LABEL),
    }
    if len(set(queues.values())) != 1:
        problems.append("the queue differs: " + ", ".join(f"{where} {q!r}" for where, q in queues.items()))
    if not (template.get("spec") or {}).get("schedulerName"):
        problems.append("the pods name no schedulerName: kube-scheduler would place them, not KAI")
    return problems
