# SPDX-License-Identifier: Apache-2.0
"""TEST REFERENCE: a small allocator for partitionable devices, written from KEP-4815's rules alone.

It shares no code with the planner (no CEL, no planner module): requests are Python predicates over a
device's attributes, quantities are parsed here. The rules (KEP-4815 "DRA: Partitionable Devices", and
the scheduler's structured-parameters allocator it extends):

- devices are tried in the order the driver publishes them, and the first one that fits is taken;
- a device is taken by at most one claim, and by one request of a claim;
- a device that consumes counters fits only while, for every counter of its counter set, what it consumes
  plus what the allocated devices (earlier claims, and the earlier requests of this claim) consume is no
  more than the set holds;
- the GPU whole consumes every counter of its set, so it and any partition of it exclude each other;
- a claim's requests are placed in order, each of ``count`` devices, and when a later request cannot be
  placed the earlier ones are tried with their next choices (the search is exhaustive).

:func:`alone` repeats one template until it no longer fits; :func:`mix` takes templates round-robin, one
claim each in turn, dropping a template when its next claim does not fit, until none fits. Never shipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Predicate = Callable[[dict[str, Any]], bool]
# a template: its requests, each (predicate over a device's flat attributes, count)
Template = list[tuple[Predicate, int]]

_UNITS = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "k": 10**3, "M": 10**6, "G": 10**9}


def quantity(text: str) -> int:
    """A whole Kubernetes quantity (``40Gi``, ``4864Mi``, ``7``)."""
    text = str(text)
    for suffix in sorted(_UNITS, key=len, reverse=True):
        if text.endswith(suffix):
            return int(text[: -len(suffix)]) * _UNITS[suffix]
    return int(text)


def flat(device: dict[str, Any]) -> dict[str, Any]:
    """A device's attributes without their type wrapper, by their short name (``kind``, ``profile``)."""
    return {
        name.rsplit("/", 1)[-1]: next(iter(value.values())) for name, value in (device.get("attributes") or {}).items()
    }


class Node:
    """One node's published devices (in order) and counter sets, and what the claims placed so far hold."""

    def __init__(self, devices: list[dict[str, Any]], counter_sets: dict[str, dict[str, Any]]) -> None:
        self.devices = devices
        self.attributes = [flat(d) for d in devices]
        self.sets = {name: {c: quantity(v) for c, v in values.items()} for name, values in counter_sets.items()}
        self.needs = [
            [
                (entry["counterSet"], {c: quantity(v["value"]) for c, v in entry["counters"].items()})
                for entry in d.get("consumesCounters") or []
            ]
            for d in devices
        ]
        self.taken: set[int] = set()
        self.spent: dict[str, dict[str, int]] = {}

    def fits(self, index: int) -> bool:
        if index in self.taken:
            return False
        for counter_set, needs in self.needs[index]:
            if counter_set not in self.sets:
                return False
            for counter, amount in needs.items():
                held = self.spent.get(counter_set, {}).get(counter, 0)
                if held + amount > self.sets[counter_set].get(counter, 0):
                    return False
        return True

    def take(self, index: int, sign: int = 1) -> None:
        (self.taken.add if sign > 0 else self.taken.discard)(index)
        for counter_set, needs in self.needs[index]:
            spent = self.spent.setdefault(counter_set, {})
            for counter, amount in needs.items():
                spent[counter] = spent.get(counter, 0) + sign * amount

    def claim(self, template: Template) -> list[int] | None:
        """One claim placed (its devices' positions, kept taken), or None (nothing changed)."""
        chosen: list[int] = []
        if self._place(template, 0, 0, 0, chosen):
            return chosen
        return None

    def _place(self, template: Template, request: int, start: int, picked: int, chosen: list[int]) -> bool:
        if request == len(template):
            return True
        predicate, count = template[request]
        if picked == count:
            return self._place(template, request + 1, 0, 0, chosen)
        for index in range(start, len(self.devices)):
            if not predicate(self.attributes[index]) or not self.fits(index):
                continue
            self.take(index)
            chosen.append(index)
            if self._place(template, request, index + 1, picked + 1, chosen):
                return True
            chosen.pop()
            self.take(index, -1)
        return False


def alone(node: Node, template: Template, limit: int = 64) -> list[list[int]]:
    """Claims of ``template`` one after another until the next does not fit."""
    claims = []
    while len(claims) < limit:
        found = node.claim(template)
        if found is None:
            break
        claims.append(found)
    return claims


def mix(node: Node, templates: list[tuple[str, Template]], limit: int = 64) -> list[tuple[str, list[int]]]:
    """The templates round-robin, one claim each in turn, a template dropped when its next claim does not fit."""
    claims: list[tuple[str, list[int]]] = []
    active = list(templates)
    while active and len(claims) < limit:
        for item in list(active):
            found = node.claim(item[1])
            if found is None:
                active.remove(item)
            else:
                claims.append((item[0], found))
    return claims
