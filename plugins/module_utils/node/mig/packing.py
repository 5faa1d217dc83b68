# SPDX-License-Identifier: Apache-2.0
"""Placements for wanted MIG instances beside a GPU's existing ones, or precisely why they do not fit.

The inputs are :mod:`nvml_state`'s: ``profiles`` (each with ``name``, ``id``, ``instance_count`` and the
``placements`` NVML offers, in memory slices) and ``existing`` instances (``profile`` and ``placement``): the
ones that stay. :func:`pack` places ``wanted`` new instances (``{profile name: count}``) so that

- each goes to a placement NVML offers for its profile,
- no two instances (new or existing) share a memory slice,
- no profile exceeds its ``instance_count``.

It searches every combination (a GPU has at most 8 memory slices, so this is quick), largest profiles first,
each profile's placements in :func:`placement_order`: the one the device model publishes (the placements that
overlap the fewest placements of larger profiles first, ties by the higher start), so small instances leave
the large placements free where the counts allow it.

Node side: Python 3.9, standard library only.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class PackingError(ValueError):
    """The wanted instances cannot be placed; the message says why."""


def _mask(start: int, size: int) -> int:
    return ((1 << size) - 1) << start


def placement_order(profiles: list[dict[str, Any]], name: str) -> list[dict[str, int]]:
    """The placements of profile ``name``, preferred first: those overlapping the fewest placements of larger
    profiles (more memory slices), ties by the higher start."""
    profile = _by_name(profiles)[name]
    size = max((p["size"] for p in profile["placements"]), default=0)
    larger = [_mask(p["start"], p["size"]) for other in profiles for p in other["placements"] if p["size"] > size]
    return sorted(
        (dict(p) for p in profile["placements"]),
        key=lambda p: (sum(1 for m in larger if m & _mask(p["start"], p["size"])), -p["start"]),
    )


def _by_name(profiles: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in profiles}


def _describe(instance: dict[str, Any]) -> str:
    placement = instance["placement"]
    return f"{instance['profile']} at {placement['start']} (slices {_slices(placement)})"


def _slices(placement: dict[str, int]) -> str:
    start, size = placement["start"], placement["size"]
    return str(start) if size == 1 else f"{start}-{start + size - 1}"


def _check(profiles: list[dict[str, Any]], existing: list[dict[str, Any]], wanted: dict[str, Any]) -> None:
    known = _by_name(profiles)
    for name, count in wanted.items():
        if name not in known:
            offered = ", ".join(p["name"] for p in profiles) or "none: MIG mode is off"
            raise PackingError(f"profile {name} is not one of this GPU's ({offered})")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise PackingError(f"the count of {name} must be a whole number >= 0, not {count!r}")
        there = sum(1 for i in existing if i["profile"] == name)
        if there + count > known[name]["instance_count"]:
            beside = f" beside {there} existing" if there else ""
            raise PackingError(
                f"{count} {name} wanted{beside}: the GPU holds at most {known[name]['instance_count']} of them"
            )


def _search(
    items: list[str], orders: dict[str, list[dict[str, int]]], taken: int
) -> tuple[list[dict[str, int]] | None, int]:
    """The first combination in preference order: (a placement per item, their number), or (None, how many
    items the deepest partial combination held)."""
    chosen: list[dict[str, int]] = []
    deepest = 0

    def place(index: int, used: int, floor: int) -> bool:
        nonlocal deepest
        deepest = max(deepest, index)
        if index == len(items):
            return True
        order = orders[items[index]]
        for position in range(floor, len(order)):
            placement = order[position]
            mask = _mask(placement["start"], placement["size"])
            if used & mask:
                continue
            chosen.append(placement)
            same_next = index + 1 < len(items) and items[index + 1] == items[index]
            if place(index + 1, used | mask, position + 1 if same_next else 0):
                return True
            chosen.pop()
        return False

    return (list(chosen), len(items)) if place(0, taken, 0) else (None, deepest)


def pack(
    profiles: list[dict[str, Any]], existing: list[dict[str, Any]], wanted: dict[str, int]
) -> list[dict[str, Any]]:
    """Placements for ``wanted`` new instances beside ``existing``: ``[{"profile", "profile_id", "start",
    "size"}]`` by start; :class:`PackingError` with the reason when they do not fit."""
    _check(profiles, existing, wanted)
    known = _by_name(profiles)
    taken = 0
    for instance in existing:
        taken |= _mask(instance["placement"]["start"], instance["placement"]["size"])
    # largest first (memory slices, then compute slices), so the search fills the hard places first
    items = sorted(
        (name for name, count in wanted.items() for _copy in range(count)),
        key=lambda n: (-known[n]["placements"][0]["size"] if known[n]["placements"] else 0, -known[n]["slices"], n),
    )
    orders = {name: placement_order(profiles, name) for name in wanted}
    found, deepest = _search(items, orders, taken)
    if found is None:
        raise PackingError(_why_not(profiles, existing, wanted, items, deepest, taken))
    placed = [
        {"profile": name, "profile_id": known[name]["id"], "start": p["start"], "size": p["size"]}
        for name, p in zip(items, found)
    ]
    return sorted(placed, key=lambda p: p["start"])


def _why_not(
    profiles: list[dict[str, Any]],
    existing: list[dict[str, Any]],
    wanted: dict[str, int],
    items: list[str],
    deepest: int,
    taken: int,
) -> str:
    total = max((p["start"] + p["size"] for f in profiles for p in f["placements"]), default=0)
    need = sum(max((p["size"] for p in _by_name(profiles)[n]["placements"]), default=0) for n in items)
    free = total - bin(taken & ((1 << total) - 1)).count("1")
    asked = ", ".join(f"{count} {name}" for name, count in sorted(wanted.items()) if count)
    beside = "; existing: " + ", ".join(_describe(i) for i in existing) if existing else ""
    if need > free:
        return f"{asked} need {need} memory slices, {free} of {total} are free{beside}"
    stuck = items[deepest]
    offered = ", ".join(_slices(p) for p in _by_name(profiles)[stuck]["placements"]) or "none"
    if not any(not taken & _mask(p["start"], p["size"]) for p in _by_name(profiles)[stuck]["placements"]):
        return f"no placement of {stuck} is free (offered at slices {offered}){beside}"
    return (
        f"{asked} do not fit together: at most {deepest} of the {len(items)} instances find disjoint placements "
        f"(NVML offers {stuck} only at slices {offered}){beside}"
    )
