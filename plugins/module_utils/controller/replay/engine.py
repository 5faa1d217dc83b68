# SPDX-License-Identifier: Apache-2.0
"""Placement of a trace's pods on nodes' GPUs: saturation and timeline.

The rules (docs/replay.md, "Semantics"):

- A pod needs its CPU and memory on the node and, when it names GPU models,
  a node of one of them. Under ``whole`` a GPU pod takes ``num_gpu`` whole
  GPUs (a share below one GPU rounds up to one); under ``fractional`` a
  1-GPU pod with a share below 1000 milli takes that share of one GPU, any
  other GPU pod whole GPUs; ``thin`` places as ``fractional`` (by request:
  limits are not counted, the result says what they promise).
- ``pack``: the feasible node with the least free GPU milli after placement
  (ties: least free CPU, then the node's name); ``spread``: the most (ties:
  most free CPU, then the name). On the node, each request (larger first)
  goes to the fullest GPU that still fits it, ties by index.
- Saturation: pods in creation order (ties by name), none leaves; the replay
  stops at the first GPU pod that cannot be placed; a CPU-only pod that does
  not fit is skipped. Timeline: the same placement, pods leave at their
  deletion time (before pods created at that instant), and a pod that does
  not fit when it is created never starts.

The search is exact, not a heuristic: nodes are kept per GPU model in
buckets of what their GPUs can still take (whole GPUs free, else the largest
free share), each bucket sorted by the order's key, so a pod reads the first
node of each bucket that can take it instead of every node.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import GPU_MILLI

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.nodes import NodeSpec
    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import Pod

# Buckets: a node with f whole GPUs free is in FULL + f; one without is in
# (largest free share) // SHARE_STEP, or NO_ROOM when no GPU has any left.
FULL = 1 << 20
SHARE_STEP = 50
NO_ROOM = -1
UNLIMITED = float("inf")


class Need:
    """What a pod takes under a policy: ``whole`` GPUs, or a ``share`` of one; ``taken`` milli in all."""

    __slots__ = ("whole", "share", "taken")

    def __init__(self, whole: int, share: int) -> None:
        self.whole = whole
        self.share = share
        self.taken = whole * GPU_MILLI + share


def need_of(pod: Pod, policy: str) -> Need:
    """What the pod takes under the policy: whole GPUs, except a share of one GPU under ``fractional`` and ``thin``."""
    if not pod.num_gpu:
        return Need(0, 0)
    if policy in ("fractional", "thin") and pod.num_gpu == 1 and pod.gpu_milli < GPU_MILLI:
        return Need(0, pod.gpu_milli)
    return Need(pod.num_gpu, 0)


def needs_text(pod: Pod, need: Need, models: bool, limited: bool = True) -> str:
    """What a pod needed, in words (for the pod that could not be placed); CPU and memory where nodes limit them."""
    text = (
        f"{need.whole} whole GPU(s)" if need.whole else (f"{need.share} milli of one GPU" if need.share else "no GPU")
    )
    if limited:
        text += f", {pod.cpu_milli} CPU milli, {pod.memory_mib} MiB"
    if models and pod.models:
        text += f", a GPU model among {'|'.join(pod.models)}"
    return text


class _Node:
    __slots__ = ("index", "name", "model", "cpu", "memory", "gpus", "free", "full", "bucket", "key")

    def __init__(self, index: int, spec: NodeSpec) -> None:
        self.index = index
        self.name = spec.name
        self.model = spec.model
        self.cpu = UNLIMITED if spec.cpu_milli is None else spec.cpu_milli
        self.memory = UNLIMITED if spec.memory_mib is None else spec.memory_mib
        self.gpus = [GPU_MILLI] * spec.gpus  # free milli per GPU, by index
        self.free = GPU_MILLI * spec.gpus
        self.full = spec.gpus
        self.bucket = 0
        self.key: tuple = ()


class Cluster:
    """The nodes' free CPU, memory and GPU milli, indexed for the order's search."""

    def __init__(self, specs: Iterable[NodeSpec], order: str, match_models: bool = True) -> None:
        self.spread = order == "spread"
        self.match_models = match_models
        self.nodes = [_Node(index, spec) for index, spec in enumerate(specs)]
        self.capacity = sum(node.free for node in self.nodes)
        # whether any node limits CPU or memory (a plan's nodes do not)
        self.limited = any(node.cpu != UNLIMITED or node.memory != UNLIMITED for node in self.nodes)
        self.taken = 0
        # model -> bucket -> sorted keys (the best node first)
        self.groups: dict[str | None, dict[int, list[tuple]]] = {}
        self._by_models: dict[tuple[str, ...] | None, list[dict[int, list[tuple]]]] = {}
        for node in self.nodes:
            self.groups.setdefault(node.model, {})
            self._index(node)

    # -- the index ------------------------------------------------------------------------

    def _index(self, node: _Node) -> None:
        if node.full:
            node.bucket = FULL + node.full
        else:
            largest = max(node.gpus) if node.gpus else 0
            node.bucket = largest // SHARE_STEP if largest else NO_ROOM
        if self.spread:
            node.key = (-node.free, -node.cpu, node.name, node.index)
        else:
            node.key = (node.free, node.cpu, node.name, node.index)
        insort(self.groups[node.model].setdefault(node.bucket, []), node.key)

    def _unindex(self, node: _Node) -> None:
        buckets = self.groups[node.model]
        keys = buckets[node.bucket]
        del keys[bisect_left(keys, node.key)]
        if not keys:
            del buckets[node.bucket]

    def _groups_for(self, models: tuple[str, ...] | None) -> list[dict[int, list[tuple]]]:
        if not self.match_models:
            models = None
        found = self._by_models.get(models)
        if found is None:
            found = [b for model, b in self.groups.items() if models is None or model in models]
            self._by_models[models] = found
        return found

    # -- the search -----------------------------------------------------------------------

    def best(self, pod: Pod, need: Need) -> _Node | None:
        """The node the order picks for the pod, or None when none can take it."""
        best: tuple | None = None
        share_bucket = need.share // SHARE_STEP
        cpu, memory = pod.cpu_milli, pod.memory_mib
        for buckets in self._groups_for(pod.models):
            for bucket, keys in buckets.items():
                boundary = False
                if need.whole:
                    if bucket < FULL + need.whole:
                        continue
                elif need.share and bucket < FULL:
                    if bucket < share_bucket:
                        continue
                    boundary = bucket == share_bucket
                if best is not None and keys[0] >= best:
                    continue
                for key in keys:
                    if best is not None and key >= best:
                        break
                    node = self.nodes[key[-1]]
                    if node.cpu < cpu or node.memory < memory:
                        continue
                    if boundary and max(node.gpus) < need.share:
                        continue
                    best = key
                    break
        return None if best is None else self.nodes[best[-1]]

    # -- changes ---------------------------------------------------------------------------

    def place(self, node: _Node, pod: Pod, need: Need) -> list[tuple[int, int]]:
        """Take the pod's CPU, memory and GPUs on the node; returns ``[(GPU index, milli)]``."""
        pieces: list[tuple[int, int]] = []
        gpus = node.gpus
        if need.whole:
            for index, free in enumerate(gpus):
                if free == GPU_MILLI:
                    pieces.append((index, GPU_MILLI))
                    if len(pieces) == need.whole:
                        break
        elif need.share:
            # the fullest GPU that still fits the share, ties by index
            chosen = min((free, index) for index, free in enumerate(gpus) if free >= need.share)[1]
            pieces.append((chosen, need.share))
        self._unindex(node)
        for index, milli in pieces:
            if gpus[index] == GPU_MILLI:
                node.full -= 1
            gpus[index] -= milli
        node.free -= need.taken
        node.cpu -= pod.cpu_milli
        node.memory -= pod.memory_mib
        self.taken += need.taken
        self._index(node)
        return pieces

    def release(self, node: _Node, pod: Pod, pieces: list[tuple[int, int]]) -> None:
        """Give back what :meth:`place` took."""
        self._unindex(node)
        gpus = node.gpus
        for index, milli in pieces:
            gpus[index] += milli
            if gpus[index] == GPU_MILLI:
                node.full += 1
            node.free += milli
            self.taken -= milli
        node.cpu += pod.cpu_milli
        node.memory += pod.memory_mib
        self._index(node)


class Outcome:
    """What a replay did: where each pod went, what could not be placed, and the GPUs over time."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.placed: dict[str, tuple[str, list[tuple[int, int]]]] = {}  # pod -> (node, pieces)
        self.first_unplaced: tuple[Pod, str] | None = None  # (pod, what it needed)
        self.cpu_skipped: list[str] = []
        self.not_tried = 0
        self.unstarted: list[str] = []
        self.unstarted_gpu = 0
        self.taken = 0  # milli taken from the nodes (saturation: at the stop)
        self.requested = 0  # milli the placed pods asked for (saturation: at the stop)
        self.capacity = 0
        self.times: list[float] = []
        self.occupied: list[int] = []
        self.asked: list[int] = []
        self.end: float | None = None


def _ordered(pods: Iterable[Pod]) -> list[Pod]:
    return sorted(pods, key=lambda pod: (pod.created, pod.name))


def saturation(pods: Iterable[Pod], specs: Iterable[NodeSpec], policy: str, order: str, models: bool = True) -> Outcome:
    """Pods in creation order, none leaves, until the first GPU pod that cannot be placed."""
    cluster = Cluster(specs, order, models)
    outcome = Outcome("saturation")
    outcome.capacity = cluster.capacity
    ordered = _ordered(pods)
    for position, pod in enumerate(ordered):
        need = need_of(pod, policy)
        node = cluster.best(pod, need)
        if node is None:
            if pod.gpu:
                outcome.first_unplaced = (pod, needs_text(pod, need, models, cluster.limited))
                outcome.not_tried = len(ordered) - position - 1
                break
            outcome.cpu_skipped.append(pod.name)
            continue
        outcome.placed[pod.name] = (node.name, cluster.place(node, pod, need))
        outcome.requested += pod.requested_milli
    outcome.taken = cluster.taken
    return outcome


def _events(pods: list[Pod]) -> list[tuple[float, int, str, int]]:
    """``(time, phase, name, pod)``: at one instant pods leave (phase 0), then arrive (1), then the
    pods that lived no time at all leave (2)."""
    events = []
    for index, pod in enumerate(pods):
        events.append((pod.created, 1, pod.name, index))
        if pod.deleted is not None:
            events.append((pod.deleted, 0 if pod.deleted > pod.created else 2, pod.name, index))
    events.sort()
    return events


def timeline(pods: Iterable[Pod], specs: Iterable[NodeSpec], policy: str, order: str, models: bool = True) -> Outcome:
    """The same placement with pods leaving at their deletion time; a pod that does not fit never starts."""
    cluster = Cluster(specs, order, models)
    outcome = Outcome("timeline")
    outcome.capacity = cluster.capacity
    ordered = list(pods)
    running: dict[int, tuple[_Node, list[tuple[int, int]]]] = {}
    requested = 0
    events = _events(ordered)
    for position, (time, phase, _name, index) in enumerate(events):
        pod = ordered[index]
        if phase == 1:
            need = need_of(pod, policy)
            node = cluster.best(pod, need)
            if node is None:
                outcome.unstarted.append(pod.name)
                if pod.gpu:
                    outcome.unstarted_gpu += 1
                    if outcome.first_unplaced is None:
                        outcome.first_unplaced = (pod, needs_text(pod, need, models, cluster.limited))
                else:
                    outcome.cpu_skipped.append(pod.name)
            else:
                pieces = cluster.place(node, pod, need)
                running[index] = (node, pieces)
                outcome.placed[pod.name] = (node.name, pieces)
                requested += pod.requested_milli
        elif index in running:
            node, pieces = running.pop(index)
            cluster.release(node, pod, pieces)
            requested -= pod.requested_milli
        last = position + 1 == len(events) or events[position + 1][0] != time
        if last and (not outcome.times or (outcome.occupied[-1], outcome.asked[-1]) != (cluster.taken, requested)):
            outcome.times.append(time)
            outcome.occupied.append(cluster.taken)
            outcome.asked.append(requested)
    outcome.end = events[-1][0] if events else None
    outcome.taken = cluster.taken
    outcome.requested = requested
    return outcome


def replay(
    pods: Iterable[Pod], specs: Iterable[NodeSpec], policy: str, order: str, mode: str, models: bool = True
) -> Outcome:
    """Saturation or timeline (``mode``); ``models``: whether the pods' GPU models are matched."""
    run = timeline if mode == "timeline" else saturation
    return run(pods, specs, policy, order, models)
