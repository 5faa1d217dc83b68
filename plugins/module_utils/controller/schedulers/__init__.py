# SPDX-License-Identifier: Apache-2.0
"""The quota and gang schedulers a site's teams and jobs run under: the engine list, defined once here.

``aligned_dra_teams.engine`` is one of :data:`ENGINES`: ``resourcequota``
(ResourceQuotas only), ``kueue``, ``both`` (ResourceQuotas and Kueue) or
``kai`` (KAI Scheduler). :func:`schedulers_of` says which scheduler packages
an engine runs; :func:`uses_kueue` and :func:`uses_kai` ask it for one.

Each scheduler package offers the same small interface, a module each:

- settings: ``kueue.settings`` and ``kai.settings``, each scheduler's part of
  ``aligned_dra_teams`` (the site's ``kueue`` or ``kai`` and its keys of each
  team), checked when the team settings (``teams.settings``) are read;
- objects: ``render`` of ``kueue.objects`` and ``kai.objects``, the scheduler's
  objects for the site's teams;
- checks: ``validate_objects`` of ``kueue.checks`` and ``kai.checks``, the objects
  against the scheduler's CRDs (:mod:`crd_checks`);
- what-if: ``kueue.what_if`` (admission and preemption) and ``kai.fair_share``
  (the fair-share division), each run by ``render`` when the site asks for it;
- gangs: what a multi-node job carries for the scheduler (``kueue.gangs``: the
  queue and the topology annotation; ``kai.gangs``: its PodGroup).

Packages and modules: :mod:`kueue` (``api``, ``schemas``, ``settings``,
``objects``, ``mappings``, ``mig``, ``checks``, ``what_if``, ``gangs``), :mod:`kai` (``api``,
``schemas``, ``settings``, ``objects``, ``mig``, ``admission``, ``checks``,
``fair_share``, ``gangs``), :mod:`crd_checks`: a CRD's objects checked as
its API server would (both schedulers' ``checks``), and :mod:`mig`: the site's
MIG classes and capacity, which the team model and both schedulers' ``mig``
modules read (Kueue's GPU-memory quotas, what KAI would miscount).
:mod:`shared`: one GPU counted once, the guaranteed whole-GPU and MIG quotas of
all teams together against the GPUs that both kinds of class take.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

RESOURCEQUOTA = "resourcequota"
KUEUE = "kueue"
BOTH = "both"
KAI = "kai"
# the values of aligned_dra_teams.engine, in the order messages list them
ENGINES = (RESOURCEQUOTA, KUEUE, BOTH, KAI)
DEFAULT_ENGINE = RESOURCEQUOTA
# the scheduler packages each engine runs (ResourceQuotas are the team model's own)
_SCHEDULERS = {RESOURCEQUOTA: (), KUEUE: (KUEUE,), BOTH: (KUEUE,), KAI: (KAI,)}


class SchedulerError(ValueError):
    """Team settings a scheduler cannot serve (or would miscount); the message names the setting.

    Each scheduler package raises its own subclass (Kueue's ``KueueError``, KAI's ``KaiError``).
    """


def schedulers_of(engine: str) -> tuple[str, ...]:
    """The scheduler packages (``kueue``, ``kai``) an engine runs; none for ``resourcequota`` or an unknown name."""
    return _SCHEDULERS.get(engine, ())


def uses_kueue(engine: str) -> bool:
    """Whether the engine renders Kueue's objects (``kueue``, ``both``)."""
    return KUEUE in schedulers_of(engine)


def uses_kai(engine: str) -> bool:
    """Whether the engine renders KAI Scheduler's objects (``kai``)."""
    return KAI in schedulers_of(engine)
