# SPDX-License-Identifier: Apache-2.0
"""One GPU counted once: the guaranteed quotas of every team against one model of the shared hardware.

A GPU in dynamic MIG (Hopper and newer) is given whole or as partitions, never both: the class of whole GPUs
(``aligned-gpu``) and the MIG classes (``mig.aligned.dev`` and one per profile) take the same GPUs. Each class's
own check (``teams/render.capacity_check``, ``kueue/checks.capacity_rows``) counts the GPUs in full, so
together they could promise every GPU twice. :func:`check` counts them once, per set of GPUs that both kinds
of class can take (``schedulers/mig.gpu_sets``, kind ``shared``):

- a whole-GPU quota takes the GPUs of its class that are not MIG GPUs first (the plan's devices of the class
  less the shared GPUs the class selects, their published whole device read with the class's selectors), and
  the rest of it from the shared set, one GPU each;
- a quota on MIG devices takes at least the fewest GPUs that hold it: GPU memory (Kueue counts the partitions'
  memory) over the most Kueue can charge on one GPU at once (``mig.most_charged``), a device count over the
  most devices of its profile one GPU holds at once (every MIG device: the most of any profile); GPUs given
  only as partitions (static MIG, Ampere in dynamic MIG) count toward the partitions;
- guaranteed tiers only (nominal quotas; opportunistic teams borrow).

The figure is a bound: a quota is counted at the fewest GPUs it may take (seven 1g.10gb partitions hold one
H100, charged 70Gi of its 80Gi), so a refusal is certain and an acceptance says the quotas can hold at once in
the layout that suits them best. GPUs of different models are converted at the largest figure among them.
Above the set's GPUs the check fails, naming the quotas and the capacity, unless the site's oversubscription
factor allows it: the smallest ``aligned_dra_teams.oversubscription`` factor of the classes involved (the
shared GPUs may be promised beyond what exists only where every class that takes them allows it).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import math
from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers import mig as schedulers_mig
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SETTING = "aligned_dra_teams.oversubscription"


def _gpus_text(value: Fraction) -> str:
    """A number of GPUs: whole where it is, else to two decimals (a bound, rounded up)."""
    if value.denominator == 1:
        return str(int(value))
    return f"{math.ceil(float(value) * 100) / 100:.2f}"


def _selects(device_class: dict[str, Any], device: dict[str, Any] | None, driver: str | None) -> bool:
    """Whether every selector of ``device_class`` keeps ``device`` (published by ``driver``)."""
    if device is None or driver is None:
        return False
    view = dra_cel.cel_device(device, driver, ["resource.kubernetes.io", dra_mig.DOMAIN])
    for selector in (device_class.get("spec") or {}).get("selectors") or []:
        expression = (selector.get("cel") or {}).get("expression") or ""
        matched, _error = dra_cel.Selector(expression).evaluate(view)
        if not matched:
            return False
    return True


def _amount(quota: Any) -> Fraction:
    """A checked quota as an exact number: a device count, or a Kubernetes quantity string."""
    return Fraction(quota) if isinstance(quota, int) else dra_cel.parse_quantity(str(quota))


def _guaranteed(conf: dict[str, Any]) -> list[tuple[dict[str, Any], str, Any]]:
    """``(team, class, quota x namespaces)`` of every guaranteed team's quota."""
    found = []
    for team in conf["teams"]:
        if not conf["tiers"][team["tier"]]["guaranteed"]:
            continue
        for cls, quota in sorted(team["quotas"].items()):
            namespaces = len(team["namespaces"])
            total = _amount(quota) * namespaces
            found.append((team, cls, total if isinstance(quota, str) else int(total)))
    return found


def _whole_side(
    conf: dict[str, Any], classes: dict[str, dict[str, Any]], plan: dict[str, Any] | None, shared: list
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str | None]:
    """The whole-GPU classes that take shared GPUs: ``(class rows, holders, unknown reason)``."""
    mig_classes = schedulers_mig.mig_classes(list(classes.values()))
    driver = schedulers_mig.class_driver(classes[next(iter(mig_classes))]) if mig_classes else None
    wholes = [device for entry in shared for device in entry["_whole"]]
    planned = (plan or {}).get("classes") or {}
    rows, holders, unknown = [], [], None
    quotas = [q for q in _guaranteed(conf) if q[1] not in mig_classes and isinstance(q[2], int)]
    for cls in sorted({q[1] for q in quotas}):
        if cls not in classes:
            continue
        taken = sum(1 for device in wholes if _selects(classes[cls], device, driver))
        if not taken:
            continue
        guaranteed = sum(q[2] for q in quotas if q[1] == cls)
        devices = (planned.get(cls) or {}).get("devices") if plan is not None else None
        row: dict[str, Any] = {"class": cls, "guaranteed": guaranteed, "shared_gpus": taken}
        if devices is None:
            unknown = f"no plan.json: the GPUs of {cls} without MIG are unknown"
            row.update(outside=None, on_shared=None)
        else:
            row["outside"] = max(0, int(devices) - taken)
            row["on_shared"] = max(0, guaranteed - row["outside"])
        rows.append(row)
        for team, qcls, total in quotas:
            if qcls == cls:
                holders.append({"team": team["name"], "class": cls, "kind": "whole", "quota": total, "gpus": total})
    return rows, holders, unknown


def _partition_side(
    conf: dict[str, Any], classes: dict[str, str | None], sets: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each guaranteed quota on a MIG class, with the fewest GPUs it takes (``gpus``, a Fraction)."""
    charge = max((s["per_gpu"]["charge_bytes"] for s in sets), default=0)
    at_once: dict[str, int] = {}
    for entry in sets:
        for profile, count in entry["at_once"].items():
            at_once[profile] = max(at_once.get(profile, 0), count)
    holders = []
    for team, cls, total in _guaranteed(conf):
        if cls not in classes:
            continue
        holder: dict[str, Any] = {"team": team["name"], "class": cls, "quota": total}
        if isinstance(total, Fraction):
            holder.update(kind="memory", quota=dra_mig.quantity(int(total)))
            holder["gpus"] = total / charge if charge else None
            holder["per_gpu"] = dra_mig.quantity(charge)
        else:
            profile = classes[cls]
            most = at_once.get(profile, 0) if profile else max(at_once.values(), default=0)
            holder.update(kind="devices", profile=profile)
            holder["gpus"] = Fraction(total, most) if most else None
            holder["per_gpu"] = most
        holders.append(holder)
    return holders


def check(
    conf: dict[str, Any], claim_objects: list[dict[str, Any]], plan: dict[str, Any] | None, mig: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, list[str]]:
    """The shared capacity and who holds which part: ``(section for teams.json, problems)``; ``(None, [])``
    without MIG. The section: ``sets`` (the MIG GPU sets, ``schedulers/mig.gpu_sets``), ``gpus`` (those given
    whole or as partitions), ``partitions_only`` (GPUs given only as partitions), ``classes`` (per whole-GPU class
    that takes shared GPUs: its guaranteed GPUs, those outside the shared set, those on it), ``holders`` (per
    guaranteed quota: team, class, kind, quota, the fewest GPUs it takes), ``needed``, ``capacity``, ``free``,
    ``factor``, ``factor_of``, ``status`` (ok, oversubscribed, over_limit, unknown, or none: nothing shared),
    ``bound`` and ``counted_as``."""
    if mig is None:
        return None, []
    sets = mig.get("sets")
    section: dict[str, Any] = {"sets": schedulers_mig.public(sets), "bound": True}
    if sets is None:
        section.update(status="unknown", reason=(mig.get("capacity") or {}).get("reason") or "unknown")
        return section, []
    shared = [s for s in sets if s["kind"] == schedulers_mig.SHARED]
    partitions_only = sum(s["gpus"] for s in sets if s["kind"] == schedulers_mig.PARTITIONS)
    section.update(gpus=sum(s["gpus"] for s in shared), partitions_only=partitions_only)
    classes = {o["metadata"]["name"]: o for o in claim_objects if o.get("kind") == "DeviceClass"}
    mig_classes = mig.get("classes") or schedulers_mig.mig_classes(claim_objects)
    rows, wholes, unknown = _whole_side(conf, classes, plan, shared)
    parts = _partition_side(conf, mig_classes, sets)
    exact = [h["gpus"] for h in parts]
    for holder in parts:
        holder["gpus"] = None if holder["gpus"] is None else _gpus_text(holder["gpus"])
    section.update(classes=rows, holders=wholes + parts)
    section["counted_as"] = (
        "the fewest GPUs each guaranteed quota takes: a whole GPU each beyond its class's GPUs without MIG; GPU "
        "memory over the most Kueue charges on one GPU at once; MIG devices over the most of their profile one GPU "
        "holds at once (a bound: a refusal is certain)"
    )
    if not shared or not rows or not parts:
        section.update(status="none", needed=None, capacity=None, free=None, factor=None, factor_of=[])
        return section, []
    involved = sorted({r["class"] for r in rows} | {h["class"] for h in parts})
    factor = min(float((conf.get("oversubscription") or {}).get(cls, 1.0)) for cls in involved)
    capacity = section["gpus"] + partitions_only
    section.update(capacity=capacity, factor=factor, factor_of=involved)
    if unknown or any(value is None for value in exact):
        section.update(status="unknown", needed=None, free=None, reason=unknown or "a MIG quota's GPUs are unknown")
        return section, []
    needed = sum((Fraction(r["on_shared"]) for r in rows), Fraction(0)) + sum(exact, Fraction(0))
    section.update(needed=_gpus_text(needed), free=_gpus_text(max(Fraction(0), capacity - needed)))
    if needed <= capacity:
        section["status"] = "ok"
        return section, []
    if needed <= capacity * Fraction(factor):
        section["status"] = "oversubscribed"
        return section, []
    section["status"] = "over_limit"
    return section, [_problem(section, rows, wholes, parts, shared)]


def _problem(
    section: dict[str, Any], rows: list[dict[str, Any]], wholes: list, parts: list, shared: list[dict[str, Any]]
) -> str:
    outside = {r["class"]: r["outside"] for r in rows}
    whole = [
        f"{h['team']} {h['quota']} whole GPUs on {h['class']} ({outside[h['class']]} of its GPUs without MIG)"
        for h in wholes
    ]
    partition = [
        f"{h['team']} {h['quota']} of GPU memory on {h['class']} (at least {h['gpus']} GPUs: Kueue charges at "
        f"most {h['per_gpu']} per GPU at once)"
        if h["kind"] == "memory"
        else f"{h['team']} {h['quota']} MIG devices on {h['class']} (at least {h['gpus']} GPUs: at most "
        f"{h['per_gpu']} per GPU at once)"
        for h in parts
    ]
    where = ", ".join(f"{s['gpus']} {s['model']} on {', '.join(sorted(s['hosts']))}" for s in shared)
    extra = f" and {section['partitions_only']} given only as partitions" if section["partitions_only"] else ""
    factor = section["factor"]
    allowed = (
        "no oversubscription is allowed"
        if factor == 1.0
        else f"the factor is {factor:g} (the smallest of {', '.join(section['factor_of'])})"
    )
    return (
        f"GPUs given whole or as MIG partitions ({where}{extra}): the guaranteed quotas "
        f"{'; '.join(whole + partition)} take at least {section['needed']} GPUs at once, the site has "
        f"{section['capacity']} and {allowed} ({SETTING}); a GPU is given whole or as partitions, never both"
    )
