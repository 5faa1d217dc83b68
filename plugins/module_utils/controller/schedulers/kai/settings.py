# SPDX-License-Identifier: Apache-2.0
"""The KAI Scheduler settings of a site and its teams, read and checked (engine ``kai``).

``aligned_dra_teams.kai`` (:func:`site_settings`): ``scheduler_name`` (the
name the pods' ``schedulerName`` gives, ``kai-scheduler`` by default),
``parent_queue`` (the site's top Queue, ``aligned-<site>`` by default) and
``what_if`` (``{team: {gpu: GPUs wanted}}``, the demand the fair-share what-if
divides the site's GPUs for). Per team (:func:`team_settings`):
``over_quota_weight`` (default 1, at least 0) and ``kai`` (``{cpu: {quota,
limit}, memory: {quota, limit}}`` in KAI's units, millicores and megabytes;
unset: unlimited). Every problem raises :class:`kai_api.KaiError` naming the
setting.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai.api import (
    DEFAULT_SCHEDULER_NAME,
    RESERVED_QUEUES,
    UNLIMITED,
    KaiError,
)
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import is_label_value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SITE_KEYS = ("scheduler_name", "parent_queue", "what_if")
TEAM_RESOURCE_KEYS = ("cpu", "memory")
AMOUNT_KEYS = ("quota", "limit")
WHAT_IF_KEYS = ("gpu",)
MAX_WEIGHT = 10**6  # a weight is a ratio between queues; far above any ratio a site means


def _keys(where: str, value: Any, known: tuple[str, ...]) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise KaiError(f"{where} must be a mapping (keys: {', '.join(known)})")
    for key in value:
        if key not in known:
            raise KaiError(f"{where}.{key} is not a setting (known: {', '.join(known)})")
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def queue_name(where: str, name: Any) -> str:
    """A Queue name that is also a label value: pods name their queue in the label ``kai.scheduler/queue``."""
    if not isinstance(name, str) or not dra.is_dns_subdomain(name) or not is_label_value(name):
        raise KaiError(
            f"{where}: {name!r} is not a queue name (a DNS subdomain of at most 63 characters: pods name "
            "their queue in a label)"
        )
    if name in RESERVED_QUEUES:
        raise KaiError(f"{where}: {name!r} is a queue KAI Scheduler makes for itself; choose another name")
    return name


def site_settings(raw: Any, site: str, teams: list[dict[str, Any]]) -> dict[str, Any]:
    """``aligned_dra_teams.kai`` checked: ``{"scheduler_name", "parent_queue", "what_if"}``."""
    raw = _keys("aligned_dra_teams.kai", raw, SITE_KEYS)
    scheduler = raw.get("scheduler_name", DEFAULT_SCHEDULER_NAME)
    if not isinstance(scheduler, str) or not dra.is_dns_subdomain(scheduler):
        raise KaiError(f"aligned_dra_teams.kai.scheduler_name {scheduler!r} is not a DNS subdomain")
    parent = queue_name("aligned_dra_teams.kai.parent_queue", raw.get("parent_queue", f"aligned-{site}"))
    names = {t["name"] for t in teams}
    what_if: dict[str, float] | None = None
    if raw.get("what_if") is not None:
        demands = _keys("aligned_dra_teams.kai.what_if", raw["what_if"], tuple(sorted(names)) or ("(no teams)",))
        what_if = {}
        for team, wanted in demands.items():
            where = f"aligned_dra_teams.kai.what_if.{team}"
            gpus = _keys(where, wanted, WHAT_IF_KEYS).get("gpu", 0)
            if not _number(gpus) or gpus < 0:
                raise KaiError(f"{where}.gpu must be a number of GPUs, at least 0 (got {gpus!r})")
            what_if[team] = gpus
    return {"scheduler_name": scheduler, "parent_queue": parent, "what_if": what_if}


def _amount(where: str, value: Any, minimum: float) -> float:
    if not _number(value) or (value != UNLIMITED and value < minimum):
        raise KaiError(f"{where} must be -1 (unlimited) or a number of at least {minimum:g} (got {value!r})")
    return value


def team_settings(team: dict[str, Any]) -> dict[str, Any]:
    """A team's ``over_quota_weight`` and its ``kai`` cpu/memory amounts, checked.

    ``{"over_quota_weight": w, "cpu": {"quota", "limit"}, "memory": {...}}``;
    an unset cpu or memory amount is -1 (unlimited). A limit below the quota
    is refused: KAI would never let the queue reach its own quota.
    """
    where = f"aligned_dra_teams.teams[{team['name']}]"
    weight = team.get("over_quota_weight", 1)
    if not _number(weight) or not 0 <= weight <= MAX_WEIGHT:
        raise KaiError(
            f"{where}.over_quota_weight must be a number from 0 (no share of idle GPUs) to {MAX_WEIGHT} "
            f"(got {weight!r})"
        )
    out: dict[str, Any] = {"over_quota_weight": weight}
    raw = _keys(f"{where}.kai", team.get("kai"), TEAM_RESOURCE_KEYS)
    for resource in TEAM_RESOURCE_KEYS:
        rwhere = f"{where}.kai.{resource}"
        amounts = _keys(rwhere, raw.get(resource), AMOUNT_KEYS)
        quota = _amount(f"{rwhere}.quota", amounts.get("quota", UNLIMITED), 0)
        limit = _amount(f"{rwhere}.limit", amounts.get("limit", UNLIMITED), 0)
        if limit != UNLIMITED and (quota == UNLIMITED or limit < quota):
            raise KaiError(f"{rwhere}.limit {limit:g} is below the quota ({quota:g}); KAI would cap the queue under it")
        out[resource] = {"quota": quota, "limit": limit}
    return out
