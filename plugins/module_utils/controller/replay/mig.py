# SPDX-License-Identifier: Apache-2.0
"""The ``mig`` policy's placement: each GPU pod on a MIG partition of the smallest profile that holds it.

The rules (docs/replay.md, "MIG"):

- **Sizing** (:mod:`mig_sizing`). A share of one GPU is rounded up to the smallest profile of each GPU model
  (:func:`controller.mig.model.smallest_profile`, the driver's order: memory slices, then compute slices) that
  holds both its memory - its peak measured use where the replay has ``usage`` samples of it (with
  ``mig_headroom`` of the profile's memory kept free), else the trace's ``gpu_memory`` - and its share of the
  GPU in compute slices (``0.25`` of 7 slices: 2). A share no profile holds takes the GPU whole where its memory
  fits the GPU's. A pod of whole GPUs keeps them:
  the GPU whole of dynamic MIG GPUs with no partition in use, all on one node. A static GPU publishes no GPU
  whole (MIG mode is on), so only its instances take pods, each the instance's own profile; nor does a dynamic
  Ampere GPU (A100, A30: its MIG mode changes only with a reset, ``dra.mig.publishes_whole``), so only its
  partitions take pods there.
- **First fit** (``first_fit``): what the scheduler does with the driver's order. The nodes in the plan's order
  (by name), each node's MIG GPUs in PCI order, each GPU's devices in the driver's published order
  (:func:`dra.mig.publish_order`; the GPU whole last, static instances by start): the first free device of the
  pod's profile. The scheduler's node scores do not see MIG devices and it picks at random among nodes that
  score the same, so the name order is the best case as a rule; with an ``rng`` (the seeded draws of
  :mod:`mig_draws`) each pod's node is drawn at random among the nodes with a free device of its profile
  (uniformly: a feasible GPU drawn, kept with probability one over its node's feasible GPUs), and on that node
  the driver's order decides.
- **Fragmentation-aware** (``fragmentation_aware``): for comparison, the device whose taking loses the fewest
  large partitions: per size in memory slices, largest first, how many disjoint devices of that size can still
  be made (dynamic) or are free (static), before and after; the smallest loss, compared largest size first,
  then the fullest GPU, then the driver's order. Only the GPU taken changes, so this is the placement that
  leaves the site the most large profiles placeable.
- A dynamic GPU's devices exclude each other by memory slices, as the driver's counters do; the GPU whole
  takes every slice.

The search reads a GPU's state (its used memory slices, or a static GPU's used instances) and GPUs of one kind
(one model's profiles under one mode and layout) in the same state answer alike, so GPUs are kept per kind in
buckets of their state, each sorted by position: a pod reads the first GPU of each bucket.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import GPU_MILLI, engine, mig_sizing
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from random import Random
    from typing import Any

    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import Pod

FIRST_FIT = "first_fit"
FRAGMENTATION_AWARE = "fragmentation_aware"
ORDERS = (FIRST_FIT, FRAGMENTATION_AWARE)
# Sizes of the loss vector, in memory slices, largest first (GPUs have 4 or 8 memory slices).
MAX_SLICES = 16


class Slot:
    """One device of a GPU kind: its profile (None: the GPU whole), placement and the state bits it takes."""

    __slots__ = ("profile", "start", "size", "mask", "position")

    def __init__(self, profile: str | None, start: int, size: int, mask: int, position: int) -> None:
        self.profile = profile
        self.start = start
        self.size = size
        self.mask = mask
        self.position = position


class Kind:
    """GPUs that publish the same devices: one model's profiles under one mode (and, static, one layout).

    A dynamic GPU's state is the mask of its memory slices in use; a static GPU's, the mask of its instances
    (in published order) in use.
    """

    def __init__(self, gpu: dict[str, Any], index: int, headroom: float = 0.0) -> None:
        state = gpu["state"]
        self.index = index
        self.mode = gpu["mode"]
        self.source = str(gpu.get("source") or state.get("source") or "")
        self.headroom = headroom
        self.gpus = 0  # GPUs of this kind on the site
        # the driver publishes this GPU whole (dynamic, and its MIG mode can change live)
        self.whole = self.mode == "dynamic" and dra_mig.publishes_whole(state)
        self.model = str(gpu.get("model") or state.get("name") or "GPU")
        self.memory_slices = int(gpu.get("memory_slices") or dra_mig.memory_slices(state))
        self.memory_bytes = int(state.get("memory_bytes") or 0)
        # the profiles a pod may be rounded to: media-extension ones exist once per GPU and hold no more
        self.profiles = [p for p in dra_mig.ordered_profiles(state.get("profiles") or []) if "+" not in p["name"]]
        # each profile's memory, as the GPU's state gives it (NVML's, else documented: ``source``)
        self.profile_memory = {str(p["name"]): int(p.get("memory_bytes") or 0) for p in state.get("profiles") or []}
        self.slots: list[Slot] = []
        if self.mode == "dynamic":
            for profile, placement in dra_mig.publish_order(state):
                if "+" in profile["name"]:
                    continue
                start, size = int(placement["start"]), int(placement["size"])
                self.slots.append(Slot(profile["name"], start, size, ((1 << size) - 1) << start, len(self.slots)))
            if self.whole:
                full = (1 << self.memory_slices) - 1
                self.slots.append(Slot(None, 0, self.memory_slices, full, len(self.slots)))
        else:
            ordered = sorted(gpu["instances"], key=lambda i: (i["start"], i["profile"]))
            for position, instance in enumerate(ordered):
                start, size = int(instance["start"]), int(instance["size"])
                self.slots.append(Slot(instance["profile"], start, size, 1 << position, position))
        self._fit: dict[tuple[int, str | None], Slot | None] = {}
        self._best: dict[tuple[int, str | None], tuple[tuple, Slot] | None] = {}
        self._counts: dict[int, tuple[int, ...]] = {}
        self._free: dict[int, int] = {}
        self._targets: dict[tuple, tuple[str | None | bool, str]] = {}

    # -- a state's figures ------------------------------------------------------------------------------------

    def free_slices(self, state: int) -> int:
        """Memory slices no pod holds: of the GPU (dynamic), or of its free instances (static)."""
        found = self._free.get(state)
        if found is None:
            if self.mode == "dynamic":
                found = self.memory_slices - bin(state).count("1")
            else:
                found = sum(slot.size for slot in self.slots if not state & slot.mask)
            self._free[state] = found
        return found

    def counts(self, state: int) -> tuple[int, ...]:
        """Per size in memory slices (``MAX_SLICES`` first): how many disjoint devices can still be had (dynamic:
        the placements of every profile of that size on the free slices, at once; static: free instances)."""
        found = self._counts.get(state)
        if found is None:
            per_size = [0] * (MAX_SLICES + 1)
            if self.mode == "dynamic":
                by_size: dict[int, set[int]] = {}
                for slot in self.slots:
                    by_size.setdefault(slot.size, set()).add(slot.start)
                for size, starts in by_size.items():
                    taken = state
                    for start in sorted(starts):  # one size: the earliest end first is optimal
                        mask = ((1 << size) - 1) << start
                        if not taken & mask:
                            taken |= mask
                            per_size[min(size, MAX_SLICES)] += 1
            else:
                for slot in self.slots:
                    if not state & slot.mask:
                        per_size[min(slot.size, MAX_SLICES)] += 1
            found = tuple(reversed(per_size[1:]))
            self._counts[state] = found
        return found

    # -- the devices a state offers ---------------------------------------------------------------------------

    def fit(self, state: int, profile: str | None) -> Slot | None:
        """The first free device of ``profile`` in the driver's order (None: the GPU whole)."""
        key = (state, profile)
        if key not in self._fit:
            self._fit[key] = next((s for s in self.slots if s.profile == profile and not state & s.mask), None)
        return self._fit[key]

    def best(self, state: int, profile: str | None) -> tuple[tuple, Slot] | None:
        """``((loss, free slices after), slot)``: the free device of ``profile`` that loses the fewest large ones."""
        key = (state, profile)
        if key not in self._best:
            before = self.counts(state)
            found = None
            for slot in self.slots:
                if slot.profile != profile or state & slot.mask:
                    continue
                after = state | slot.mask
                loss = tuple(b - a for b, a in zip(before, self.counts(after), strict=True))
                rank = (loss, self.free_slices(after), slot.position)
                if found is None or rank < found[0]:
                    found = (rank, slot)
            self._best[key] = None if found is None else (found[0][:2], found[1])
        return self._best[key]

    def target(self, sizing: tuple) -> str | None | bool:
        """What a pod of ``sizing`` (:func:`mig_sizing.sizing_of`) takes on a GPU of this kind: a profile, None
        (the GPU whole), or False (nothing here holds it)."""
        return self._sized(sizing)[0]

    def decided(self, sizing: tuple) -> str:
        """What decided the pod's device on a GPU of this kind: ``memory``, ``compute``, ``both`` or ``whole``."""
        return self._sized(sizing)[1]

    def _sized(self, sizing: tuple) -> tuple[str | None | bool, str]:
        found = self._targets.get(sizing)
        if found is None:
            found = mig_sizing.target(self.profiles, self.whole, self.memory_bytes, sizing, self.headroom)
            self._targets[sizing] = found
        return found


class Gpu:
    """One MIG GPU of the site: where it is, its kind and its state."""

    __slots__ = ("position", "node", "node_index", "address", "device", "kind", "state", "pods")

    def __init__(self, position: int, node: str, node_index: int, gpu: dict[str, Any], kind: Kind) -> None:
        self.position = position
        self.node = node
        self.node_index = node_index
        self.address = str(gpu.get("pci_address"))
        self.device = str(gpu.get("device"))
        self.kind = kind
        self.state = 0
        self.pods = 0


def kind_key(gpu: dict[str, Any]) -> tuple:
    """GPUs with the same key publish the same devices in the same order."""
    state = gpu["state"]
    profiles = tuple(
        (p["name"], int(p.get("slices") or 0), int(p.get("memory_bytes") or 0))
        + tuple((int(x["start"]), int(x["size"])) for x in p.get("placements") or [])
        for p in state.get("profiles") or []
    )
    instances = tuple((i["profile"], int(i["start"]), int(i["size"])) for i in gpu.get("instances") or [])
    whole = dra_mig.publishes_whole(state)
    source = str(gpu.get("source"))
    return (gpu["mode"], str(gpu.get("model")), source, int(gpu.get("memory_slices") or 0), whole, profiles, instances)


class Site:
    """The site's MIG GPUs, nodes in order and each node's GPUs in PCI order, kept per kind in state buckets.

    ``headroom``: ``mig_headroom``, the fraction of a device's memory a measured peak leaves free."""

    def __init__(self, nodes: Iterable[tuple[str, list[dict[str, Any]]]], headroom: float = 0.0) -> None:
        self.kinds: list[Kind] = []
        self.gpus: list[Gpu] = []
        self.nodes: list[tuple[str, list[Gpu]]] = []
        known: dict[tuple, Kind] = {}
        for node_index, (node, gpus) in enumerate(nodes):
            mine = []
            for gpu in gpus:
                key = kind_key(gpu)
                if key not in known:
                    known[key] = Kind(gpu, len(self.kinds), headroom)
                    self.kinds.append(known[key])
                known[key].gpus += 1
                found = Gpu(len(self.gpus), node, node_index, gpu, known[key])
                self.gpus.append(found)
                mine.append(found)
            self.nodes.append((node, mine))
        self.buckets: list[dict[int, list[int]]] = [{} for _kind in self.kinds]
        for gpu in self.gpus:
            self.buckets[gpu.kind.index].setdefault(0, []).append(gpu.position)
        self.memory_slices = sum(gpu.kind.memory_slices for gpu in self.gpus)
        self.in_use = 0  # GPUs holding a pod
        free = [gpu.kind.free_slices(0) for gpu in self.gpus]
        self.free, self.with_free = sum(free), sum(1 for count in free if count)
        self._initial = (self.free, self.with_free)

    def _move(self, gpu: Gpu, state: int) -> None:
        bucket = self.buckets[gpu.kind.index]
        positions = bucket[gpu.state]
        del positions[bisect_left(positions, gpu.position)]
        if not positions:
            del bucket[gpu.state]
        before, after = gpu.kind.free_slices(gpu.state), gpu.kind.free_slices(state)
        self.free += after - before
        self.with_free += (after > 0) - (before > 0)
        gpu.state = state
        insort(bucket.setdefault(state, []), gpu.position)

    def take(self, gpu: Gpu, slot: Slot) -> None:
        self._move(gpu, gpu.state | slot.mask)
        gpu.pods += 1
        self.in_use += gpu.pods == 1

    def give_back(self, gpu: Gpu, slot: Slot) -> None:
        self._move(gpu, gpu.state & ~slot.mask)
        gpu.pods -= 1
        self.in_use -= gpu.pods == 0

    def free_slices(self) -> tuple[int, int]:
        """``(free memory slices, GPUs with some free)`` over the site's MIG GPUs."""
        return self.free, self.with_free

    def gpus_in_use(self) -> int:
        return self.in_use

    def find_one(self, sizing: tuple, order: str, rng: Random | None = None) -> tuple[Gpu, Slot] | None:
        """The device a one-GPU pod of ``sizing`` takes under ``order``; None when no GPU has one free. With
        ``rng`` (first fit only) the node is drawn at random among those with a free device (:meth:`_drawn`)."""
        if rng is not None and order == FIRST_FIT:
            return self._drawn(sizing, rng)
        best: tuple | None = None
        for kind in self.kinds:
            target = kind.target(sizing)
            if target is False:
                continue
            for state, positions in self.buckets[kind.index].items():
                if order == FIRST_FIT:
                    slot = kind.fit(state, target)
                    key = None if slot is None else (positions[0], slot.position)
                else:
                    found = kind.best(state, target)
                    slot = None if found is None else found[1]
                    key = None if found is None else (*found[0], positions[0], slot.position)
                if key is not None and (best is None or key < best[0]):
                    best = (key, self.gpus[positions[0]], slot)
        return None if best is None else (best[1], best[2])

    def _fits(self, gpu: Gpu, sizing: tuple) -> Slot | None:
        target = gpu.kind.target(sizing)
        return None if target is False else gpu.kind.fit(gpu.state, target)

    def _drawn(self, sizing: tuple, rng: Random) -> tuple[Gpu, Slot] | None:
        """First fit on a node drawn uniformly among the nodes with a free device for ``sizing``.

        Each such node has one first such GPU in PCI order (the one first fit takes there), so drawing a node
        uniformly is drawing one of those GPUs uniformly: a GPU is drawn among all GPUs with a free device (the
        state buckets that have one, weighted by their size) until it is the first such GPU of its node.
        """
        pools: list[list[int]] = []
        ends: list[int] = []
        total = 0
        for kind in self.kinds:
            target = kind.target(sizing)
            if target is False:
                continue
            for state, positions in self.buckets[kind.index].items():
                if kind.fit(state, target) is not None:
                    pools.append(positions)
                    total += len(positions)
                    ends.append(total)
        while total:
            pick = rng.randrange(total)
            pool = bisect_right(ends, pick)
            gpu = self.gpus[pools[pool][pick - (ends[pool - 1] if pool else 0)]]
            node = self.nodes[gpu.node_index][1]
            if any(self._fits(other, sizing) is not None for other in node[: node.index(gpu)]):
                continue  # not its node's first: drawn again, so each node weighs one GPU
            return gpu, self._fits(gpu, sizing)
        return None

    def find_whole(self, count: int, order: str, rng: Random | None = None) -> list[tuple[Gpu, Slot]] | None:
        """``count`` GPUs whole on one node: dynamic GPUs published whole (not Ampere) with no partition in use;
        None when no node has them.

        First fit: the first node that has them, its first ones (with ``rng``: a node drawn among those that
        have them). Fragmentation-aware: the node with the fewest such GPUs that still has enough (every GPU
        taken whole loses the same), then the first.
        """
        chosen: list[Gpu] | None = None
        drawn: list[list[Gpu]] = []
        for _node, gpus in self.nodes:
            free = [g for g in gpus if g.kind.whole and g.state == 0]
            if len(free) < count:
                continue
            if rng is not None and order == FIRST_FIT:
                drawn.append(free)
                continue
            if order == FIRST_FIT:
                chosen = free
                break
            if chosen is None or len(free) < len(chosen):
                chosen = free
        if drawn and rng is not None:
            chosen = drawn[rng.randrange(len(drawn))]
        if chosen is None:
            return None
        return [(gpu, gpu.kind.fit(0, None)) for gpu in chosen[:count]]


def needs_of(site: Site, sizing: tuple) -> dict[str, str]:
    """Per GPU model of the site, what the pod takes there (a profile, ``GPU whole``, or ``nothing``)."""
    found: dict[str, str] = {}
    for kind in site.kinds:
        target = kind.target(sizing)
        text = "nothing" if target is False else ("GPU whole" if target is None else str(target))
        label = f"{kind.model} ({kind.mode})"
        if label in found and found[label] != text:
            text = f"{found[label]} or {text}"
        found[label] = text
    return dict(sorted(found.items()))


def needs_text(site: Site, sizing: tuple) -> str:
    """What the pod needed, in words: its size and what that rounds to per GPU model."""
    per_model = ", ".join(f"{text} on {model}" for model, text in needs_of(site, sizing).items())
    return f"{mig_sizing.amount_text(sizing)}: {per_model or 'no MIG GPU'}"


def reason_of(site: Site, sizing: tuple, devices: int) -> str:
    """Why a pod found no device: too large for every MIG GPU, no whole GPU free, or fragmentation."""
    targets = [kind.target(sizing) for kind in site.kinds]
    if not site.gpus:
        return "the site has no MIG GPU"
    if all(target is False for target in targets):
        if sizing[0] == "whole":
            return "a pod of whole GPUs needs the GPU whole, which only dynamic MIG GPUs of Hopper and newer publish"
        return "larger than every profile and every memory of a GPU published whole"
    if devices > 1:
        return f"no node has {devices} dynamic MIG GPUs published whole with no partition in use"
    free, gpus = site.free_slices()
    wanted = sorted({"GPU whole" if t is None else str(t) for t in targets if t is not False})
    return f"no free {' or '.join(wanted)} device ({free} memory slices free on {gpus} GPUs)"


class MigOutcome(engine.Outcome):
    """An engine outcome (milli-GPUs: a partition counts its memory slices over the GPU's) with every placement,
    the pods not placed and why, the GPUs in use over time and the slices stranded at the first failure."""

    def __init__(self, mode: str, order: str) -> None:
        super().__init__(mode)
        self.order = order
        self.placements: list[dict[str, Any]] = []
        self.not_placed: list[dict[str, Any]] = []
        self.stranded: dict[str, Any] | None = None
        self.gpus_used: list[int] = []
        self.gpus_used_at_stop = 0
        self.sized_by: dict[str, int] = {}
        self.decided_by: dict[str, int] = {}
        self.profiles: dict[str, int] = {}


def _milli(slot: Slot, gpu: Gpu) -> int:
    return slot.size * GPU_MILLI // gpu.kind.memory_slices if gpu.kind.memory_slices else GPU_MILLI


class _Run:
    """One replay of the pods on the site under one order (with ``rng``: first fit on nodes drawn at random;
    ``detail`` False keeps the counts only: no placement list, no reason per pod not placed)."""

    def __init__(
        self, site: Site, order: str, mode: str, measured: dict[str, int], rng: Random | None, detail: bool
    ) -> None:
        self.site = site
        self.order = order
        self.measured = measured
        self.rng = rng
        self.detail = detail
        self.outcome = MigOutcome(mode, order)
        self.outcome.capacity = len(site.gpus) * GPU_MILLI
        self.running: dict[str, list[tuple[Gpu, Slot]]] = {}
        self.requested = 0

    def arrive(self, pod: Pod, time: float) -> bool:
        """Place the pod; False when a GPU pod finds no device (recorded with its reason)."""
        outcome = self.outcome
        if not pod.gpu:
            outcome.placed[pod.name] = ("", [])
            return True
        sizing, devices = mig_sizing.sizing_of(pod, self.measured.get(pod.name))
        if devices == 1:
            found = self.site.find_one(sizing, self.order, self.rng)
            taken = None if found is None else [found]
        else:
            taken = self.site.find_whole(devices, self.order, self.rng)
        if taken is None:
            free, gpus = self.site.free_slices()
            if not self.detail:
                if outcome.first_unplaced is None:
                    outcome.first_unplaced = (pod, "")
                    outcome.stranded = {"pod": pod.name, "time": time, "slices": free, "gpus": gpus}
                return False
            needs = needs_text(self.site, sizing)
            outcome.not_placed.append(
                {
                    "pod": pod.name,
                    "time": time,
                    "needs": needs,
                    "reason": reason_of(self.site, sizing, devices),
                    "free_slices": free,
                    "gpus_with_free_slices": gpus,
                }
            )
            if outcome.first_unplaced is None:
                outcome.first_unplaced = (pod, needs)
                outcome.stranded = {"pod": pod.name, "time": time, "slices": free, "gpus": gpus}
            return False
        outcome.sized_by[sizing[0]] = outcome.sized_by.get(sizing[0], 0) + 1
        decided = taken[0][0].kind.decided(sizing)
        outcome.decided_by[decided] = outcome.decided_by.get(decided, 0) + 1
        pieces = []
        for gpu, slot in taken:
            self.site.take(gpu, slot)
            milli = _milli(slot, gpu)
            pieces.append((gpu.position, milli))
            self.outcome.taken += milli
            label = slot.profile or "GPU whole"
            outcome.profiles[label] = outcome.profiles.get(label, 0) + 1
            if self.detail:
                outcome.placements.append(self._placement(pod, time, gpu, slot, sizing[0], decided))
        self.running[pod.name] = taken
        outcome.placed[pod.name] = (taken[0][0].node, pieces)
        self.requested += pod.requested_milli
        return True

    @staticmethod
    def _placement(pod: Pod, time: float, gpu: Gpu, slot: Slot, basis: str, decided: str) -> dict[str, Any]:
        kind = gpu.kind
        memory = kind.memory_bytes if slot.profile is None else kind.profile_memory[slot.profile]
        return {
            "pod": pod.name,
            "time": time,
            "node": gpu.node,
            "gpu": gpu.address,
            "device": gpu.device if slot.profile is None else dra_mig.device_name(gpu.device, slot.profile, slot.start),
            "profile": slot.profile,
            "start": slot.start,
            "size": slot.size,
            "memory_bytes": memory,
            "memory_source": kind.source,
            "sized_by": basis,
            "decided_by": decided,
        }

    def leave(self, pod: Pod) -> None:
        for gpu, slot in self.running.pop(pod.name, []):
            self.site.give_back(gpu, slot)
            self.outcome.taken -= _milli(slot, gpu)
        if pod.gpu and pod.name in self.outcome.placed:
            self.requested -= pod.requested_milli


def _fresh(site: Site) -> None:
    for gpu in site.gpus:
        if gpu.state:
            site._move(gpu, 0)
        gpu.pods = 0
    site.in_use = 0
    site.free, site.with_free = site._initial


def saturation(pods: Iterable[Pod], site: Site, order: str, measured: dict[str, int], **how: Any) -> MigOutcome:
    """Pods in creation order, none leaves, until the first GPU pod that finds no device."""
    _fresh(site)
    run = _Run(site, order, "saturation", measured, how.get("rng"), how.get("detail", True))
    ordered = sorted(pods, key=lambda pod: (pod.created, pod.name))
    for position, pod in enumerate(ordered):
        if not run.arrive(pod, pod.created):
            run.outcome.not_tried = len(ordered) - position - 1
            break
    run.outcome.requested = run.requested
    run.outcome.gpus_used_at_stop = site.gpus_in_use()
    return run.outcome


def timeline(pods: Iterable[Pod], site: Site, order: str, measured: dict[str, int], **how: Any) -> MigOutcome:
    """Pods leave at their deletion time (before pods arrive at one instant); a pod that finds no device when
    it is created never starts."""
    _fresh(site)
    run = _Run(site, order, "timeline", measured, how.get("rng"), how.get("detail", True))
    outcome = run.outcome
    ordered = list(pods)
    events = engine._events(ordered)
    for position, (time, phase, _name, index) in enumerate(events):
        pod = ordered[index]
        if phase == 1:
            if not run.arrive(pod, time):
                outcome.unstarted.append(pod.name)
                outcome.unstarted_gpu += 1
        else:
            run.leave(pod)
        last = position + 1 == len(events) or events[position + 1][0] != time
        if not last:
            continue
        point = (outcome.taken, run.requested, site.gpus_in_use())
        if not outcome.times or (outcome.occupied[-1], outcome.asked[-1], outcome.gpus_used[-1]) != point:
            outcome.times.append(time)
            outcome.occupied.append(point[0])
            outcome.asked.append(point[1])
            outcome.gpus_used.append(point[2])
    outcome.end = events[-1][0] if events else None
    outcome.requested = run.requested
    outcome.gpus_used_at_stop = site.gpus_in_use()
    return outcome


def replay(
    pods: Iterable[Pod],
    site: Site,
    order: str,
    mode: str,
    measured: dict[str, int] | None = None,
    rng: Random | None = None,
    detail: bool = True,
) -> MigOutcome:
    """The pods on the site's MIG GPUs under ``order`` (``first_fit`` or ``fragmentation_aware``); with ``rng``
    (first fit), each pod's node drawn at random among those with a free device; ``detail`` False: counts only."""
    run = timeline if mode == "timeline" else saturation
    return run(list(pods), site, order, measured or {}, rng=rng, detail=detail)
