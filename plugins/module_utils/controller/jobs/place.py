# SPDX-License-Identifier: Apache-2.0
"""A job list as the inventory gives it placed on a site: checked first (:func:`spec.check_jobs`), then searched.

:func:`place_jobs` is what the planner's and the gang search's tests, and
benchmarks, call with jobs as ``aligned_dra_jobs`` holds them; the ``jobs``
stage checks and renders its jobs itself and places them with
:func:`search.place_checked_jobs`.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.shared import PlacementError
from ansible_collections.aligned.dra.plugins.module_utils.controller.gangs import search
from ansible_collections.aligned.dra.plugins.module_utils.controller.jobs import spec as jobs_spec
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner.consumption import PlanError
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any


def place_jobs(
    site: str,
    jobs: Any,
    nodes: dict[str, dict[str, Any]],
    classes: list[dict[str, Any]],
    templates: list[dict[str, Any]],
    placement: Mapping[str, Any],
    held: Mapping[str, Iterable[str]] | None = None,
    kubernetes_version: str | None = None,
    driver: str = dra.DRIVER_NAME,
    step_limit: int = planner.DEFAULT_STEP_LIMIT,
    held_uncertain: Mapping[str, int] | None = None,
    claims_namespace: str | None = None,
) -> dict[str, Any]:
    """``jobs.json`` of ``jobs`` as the inventory gives them (``aligned_dra_jobs``).

    The jobs are checked and normalised by :func:`spec.check_jobs` against the
    placement's levels, their namespaces defaulting to ``claims_namespace``
    (its output passes unchanged; a malformed job raises :class:`PlanError`
    naming it), then placed by :func:`search.place_checked_jobs`, which takes
    the other arguments.
    """
    placement = placement or {}
    try:
        checked = jobs_spec.check_jobs(jobs, placement.get("levels") or [], claims_namespace, where="jobs")
    except PlacementError as exc:
        raise PlanError(str(exc)) from None
    return search.place_checked_jobs(
        site,
        checked,
        nodes,
        classes,
        templates,
        placement,
        held=held,
        kubernetes_version=kubernetes_version,
        driver=driver,
        step_limit=step_limit,
        held_uncertain=held_uncertain,
    )
