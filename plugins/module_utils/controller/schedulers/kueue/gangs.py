# SPDX-License-Identifier: Apache-2.0
"""A job under a Kueue engine (``kueue``/``both``): its queue and Topology Aware Scheduling's annotation.

:func:`job_queue` gives a job's LocalQueue (the job's ``queue``, else its
namespace's team queue), the pod template's topology annotation for its
placement, and what is left out, and why, when Kueue does not manage the job.
The job's objects themselves are the job model's (``controller/jobs/render``):
it labels the Job with the queue and suspends it, for Kueue to admit it.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue.api import TOPOLOGY_ANNOTATIONS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def job_queue(
    job: dict[str, Any], engine: str, team_queue: str | None
) -> tuple[str | None, dict[str, str], list[dict[str, str]]]:
    """``(queue, pod template annotations, left_out)`` of a checked job; ``team_queue`` is its namespace's team's
    LocalQueue (None when the namespace belongs to no team)."""
    if not schedulers.uses_kueue(engine):
        if job["queue"]:
            reason = (
                f"Kueue queue {job['queue']!r} left out: aligned_dra_teams.engine is {engine}, Kueue manages no job"
            )
            return None, {}, [{"name": job["name"], "reason": reason}]
        return None, {}, []
    queue = job["queue"] or team_queue
    if not queue:
        reason = (
            f"Kueue queue label left out: namespace {job['namespace']!r} belongs to no team and the job names no "
            "queue; Kueue does not manage the job, which runs outside the teams' quotas"
        )
        return None, {}, [{"name": job["name"], "reason": reason}]
    placement = job["placement"]
    annotations = {TOPOLOGY_ANNOTATIONS[placement["mode"]]: placement["label"]} if placement else {}
    return queue, annotations, []
