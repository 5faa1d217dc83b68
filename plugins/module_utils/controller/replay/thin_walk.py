# SPDX-License-Identifier: Apache-2.0
"""Thin provisioning replayed on measured use: the walk through time (timeline mode).

The rules (docs/replay.md, "Thin provisioning on measured use"):

- Every pod is sized in bytes of GPU memory: a *request*, which the
  scheduler places (a share of one GPU takes ``ceil(request / gpu_memory x
  1000)`` milli, at least 1, in the engine's placement: the sum of a GPU's
  requests fits its memory), and a *limit*, up to which it may use memory
  (MPS enforces it). Pods the trace gives whole GPUs keep them under every
  policy (request = limit = their GPUs' memory); under ``whole`` every GPU pod
  does. A share's request is, under ``fractional``, its peak use (limit: the
  request, so it is never evicted); under ``thin`` the trace's request or a
  percentile of its samples, and the limit its largest sample or a factor of
  the request, at least the request and at most one GPU's memory.
- The walk's steps are the trace's events and the pods' sample times. A pod's
  use at a step is its latest sample at or before it (0 before its first),
  capped at its limit. At each step, in order: pods leave; evicted pods
  waiting to be placed again (``on_evict: requeue``) are tried, in the order
  they were evicted; pods arrive (by name; one that does not fit never
  starts); then every GPU whose pods' use plus ``reserve`` (the memory of
  what is not a pod: the MPS server, CUDA contexts) is above ``gpu_memory x
  (1 - margin / 100)`` evicts, as the driver's reclaim does, among its pods
  using more than their request: the lowest priority first, then the largest
  use above the request, then the name, one after the other until the GPU is
  under the mark again or no such pod is left. A GPU of shares whose pods'
  use plus the reserve is still above its memory then is *over memory* at
  the step (on a GPU, an allocation fails there): counted, not replayed.
- ``drop`` ends an evicted pod; ``requeue`` places it again at the next step
  where it fits (the next step at the earliest), for the time it had left
  (its use stays its measured use at each step, and after its own end in the
  trace its last sample; the step at or after its new end ends it).

The walk is exact on the steps, and fast where it can be: each running pod's
capped use is one array over the steps it holds its GPU, the site's use is
one array, and a GPU is scanned for pressure only while one of its pods can
use more than its request (or, with a reserve, while its pods' requests and
the reserve pass its memory), ``CHUNK`` steps at a time, with C-level
iteration.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from fractions import Fraction
from heapq import heapify, heappop, heappush
from itertools import accumulate, compress, count, repeat
from operator import add, sub

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import GPU_MILLI
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.engine import Cluster, Need

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.nodes import NodeSpec
    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import Pod
    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.usage import Usage

# Steps of a GPU scanned for pressure at once: a pod arriving on the GPU makes
# the rest of a scan moot, so a scan does not run far ahead.
CHUNK = 256
EMPTY = array("q")


class Rules:
    """How pods are sized and what an eviction does.

    ``request``: ``"request"`` (the trace's) or a percentile (0 < p <= 100);
    ``limit``: ``"max"`` (the largest sample) or a factor of the request (at
    least 1); ``margin``: percent of a GPU's memory kept free; ``on_evict``:
    ``drop`` or ``requeue``; ``reserve``: bytes of each GPU used by no pod (0
    or more, below the GPU's memory), added to the pods' use where it is
    weighed against the mark and the memory. ``policy`` ``whole`` and
    ``fractional`` ignore ``request`` and ``limit`` (they never evict).
    """

    __slots__ = ("policy", "request", "limit", "margin", "on_evict", "reserve")

    def __init__(
        self,
        policy: str,
        request: str | Fraction = "request",
        limit: str | Fraction = "max",
        margin: Fraction | int = 5,
        on_evict: str = "drop",
        reserve: int = 0,
    ) -> None:
        self.policy = policy
        self.request = request
        self.limit = limit
        self.margin = margin
        self.on_evict = on_evict
        self.reserve = reserve


def trace_request(pod: Pod, gpu_memory: int) -> int:
    """The pod's request as the trace has it, in bytes: its ``gpu_memory``, else its share of the GPUs' memory."""
    if pod.gpu_memory_bytes is not None:
        return pod.gpu_memory_bytes
    return math.ceil(pod.requested_milli * gpu_memory / GPU_MILLI)


def size(pod: Pod, usage: Usage, gpu_memory: int, rules: Rules) -> tuple[Need, int, int]:
    """``(need, request bytes, limit bytes)`` of the pod under the rules.

    A pod without samples keeps the trace's request (and, under ``thin`` with
    ``limit: max``, the request as its limit).
    """
    if not pod.gpu:
        return Need(0, 0), 0, 0
    if rules.policy == "whole" or pod.num_gpu > 1 or pod.gpu_milli >= GPU_MILLI:
        whole = pod.num_gpu * gpu_memory
        return Need(pod.num_gpu, 0), whole, whole
    asked = trace_request(pod, gpu_memory)
    peak = usage.peak(pod.name)
    if rules.policy == "fractional":
        request = limit = asked if peak is None else peak
    else:
        if rules.request == "request":
            request = asked
        else:
            found = usage.percentile(pod.name, rules.request)
            request = asked if found is None else found
        limit = max(peak or 0, request) if rules.limit == "max" else math.ceil(rules.limit * request)
    request = min(request, gpu_memory)
    limit = min(max(limit, request), gpu_memory)
    milli = max(1, math.ceil(request * GPU_MILLI / gpu_memory))
    return (Need(1, 0) if milli >= GPU_MILLI else Need(0, milli)), request, limit


class Walk:
    """What a walk did, for the result: the steps, the per-step figures, the placements and the evictions.

    The per-step arrays hold the figure after everything at that step:
    ``used`` bytes, ``requested`` bytes, ``promised`` bytes (the limits) of
    the running GPU pods, and ``busy`` GPUs (holding at least one pod).
    ``over_memory`` lists ``(step, GPU)`` where a GPU of shares was over its
    memory after its evictions, ``over_memory_pods`` the pods it held then.
    """

    def __init__(self) -> None:
        self.times: list[float] = []
        self.gpus_total = 0
        self.gpu_memory = 0
        self.gpu_reserve = 0
        self.gpu_pods = 0
        self.placed = 0  # GPU pods started when created
        self.unstarted: list[str] = []  # GPU pods that did not fit when created
        self.placements: list[tuple[str, float, str, list[int]]] = []  # (pod, time, node, GPU indexes)
        self.evictions: list[dict[str, object]] = []
        self.requeued = 0  # placements of evicted pods
        self.waiting: list[str] = []  # evicted pods still waiting at the end (requeue)
        self.dropped: list[str] = []  # evicted pods that did not run again: every one (drop), those waiting (requeue)
        self.over_memory: list[tuple[int, int]] = []  # (step, GPU index on the site)
        self.over_memory_pods: set[str] = set()
        self.used: Sequence[int] = EMPTY
        self.requested: Sequence[int] = EMPTY
        self.promised: Sequence[int] = EMPTY
        self.busy: Sequence[int] = EMPTY


def _grid(pods: Sequence[Pod], usage: Usage) -> list[float]:
    """The steps: every creation, deletion and sample time, ascending."""
    stamps = {pod.created for pod in pods}
    stamps.update(pod.deleted for pod in pods if pod.deleted is not None)
    for times, _values in usage.series.values():
        stamps.update(times)
    return sorted(stamps)


class _Walker:
    """One walk's state: the cluster, the running pods' arrays, the events still to come."""

    def __init__(
        self,
        pods: Sequence[Pod],
        specs: Sequence[NodeSpec],
        order: str,
        models: bool,
        usage: Usage,
        gpu_memory: int,
        rules: Rules,
    ) -> None:
        self.pods = pods
        self.rules = rules
        self.usage = usage
        self.cluster = Cluster(specs, order, models)
        self.offsets = list(accumulate((spec.gpus for spec in specs), initial=0))
        self.times = _grid(pods, usage)
        self.index = {time: step for step, time in enumerate(self.times)}
        steps = len(self.times)
        # bytes above this on a GPU is pressure: free below margin percent of it, as the driver reads it
        self.mark = math.floor(Fraction(gpu_memory) * (100 - Fraction(rules.margin)) / 100)
        self.memory = gpu_memory
        # NVML's used memory counts what is no pod's too (the MPS server, contexts): the driver sees it, the
        # samples do not
        self.reserve = rules.reserve
        sized = [size(pod, usage, gpu_memory, rules) for pod in pods]
        self.needs = [entry[0] for entry in sized]
        self.request = [entry[1] for entry in sized]
        self.limit = [entry[2] for entry in sized]
        self.series = [usage.series.get(pod.name) for pod in pods]
        self.runs = [self._run_start(found) for found in self.series]
        count_pods = len(pods)
        self.gen = [0] * count_pods  # residence number; departures carry it
        self.running = [False] * count_pods
        self.start = [0] * count_pods  # the step the current residence began
        self.stop = [0] * count_pods  # the step it ends (steps: runs to the end)
        self.end = [None] * count_pods  # its exact end time (None: none)
        self.use: list[array] = [EMPTY] * count_pods  # capped use over [start, stop)
        self.hot = [False] * count_pods  # can use more than its request in this residence
        self.where: list[tuple | None] = [None] * count_pods  # (node, pieces, GPU ids)
        self.gpu_of = [-1] * count_pods  # the one GPU of a single-GPU pod
        gpus = self.offsets[-1]
        self.on_gpu: list[list[int]] = [[] for _gpu in range(gpus)]
        self.holders = [0] * gpus
        self.version = [0] * gpus
        self.used = array("q", bytes(8 * steps))
        self.diff_requested = [0] * (steps + 1)
        self.diff_promised = [0] * (steps + 1)
        self.diff_busy = [0] * (steps + 1)
        self.pressure: dict[int, list[tuple[int, int]]] = {}
        self.departures: dict[int, list[tuple[int, int]]] = {}
        self.arrivals: dict[int, list[int]] = {}
        self.queue: list[tuple[int, float | None]] = []  # (pod, time it had left), in eviction order
        self.dirty = False  # capacity freed or pods queued since the queue was last tried
        self.heap: list[int] = []
        self.changed: set[int] = set()  # GPUs whose pods changed at the step
        self.out = Walk()
        self.out.times = self.times
        self.out.gpus_total = gpus
        self.out.gpu_memory = gpu_memory
        self.out.gpu_reserve = rules.reserve
        self.out.gpu_pods = sum(1 for pod in pods if pod.gpu)

    def _run_start(self, found: tuple[Sequence[float], Sequence[int]] | None) -> int:
        """The step of the pod's first sample when its samples fall on consecutive steps, else -1."""
        if not found or not len(found[0]):
            return -1
        times = found[0]
        first = self.index[times[0]]
        return first if self.index[times[-1]] - first == len(times) - 1 else -1

    # -- a pod's use over steps ------------------------------------------------------------

    def _filled(self, p: int, low: int, high: int) -> array:
        """The pod's use at the steps ``low`` to ``high`` (excluded): the latest sample at or before each, 0 before
        its first, its last after its last."""
        size_ = high - low
        found = self.series[p]
        if size_ <= 0:
            return EMPTY
        if found is None or not len(found[0]):
            return array("q", bytes(8 * size_))
        times, values = found
        first = self.runs[p]
        if first < 0:
            # samples between steps of other pods: look each step up (C-level: bisect over a map)
            padded = [0, *values]
            return array("q", map(padded.__getitem__, map(bisect_right, repeat(times), self.times[low:high])))
        last = first + len(values)  # one past the last sample's step
        before = max(0, min(high, first) - low)
        out = array("q", bytes(8 * before))
        out.extend(values[max(low, first) - first : max(0, min(high, last) - first)])
        after = high - max(low, last)
        if after > 0:
            out.extend(repeat(values[-1], after))
        return out

    # -- placing and removing --------------------------------------------------------------

    def _place(self, p: int, step: int, stop: int, end: float | None) -> bool:
        """Place the pod at the step for ``[step, stop)``; False when it fits nowhere."""
        pod = self.pods[p]
        need = self.needs[p]
        node = self.cluster.best(pod, need)
        if node is None:
            return False
        pieces = self.cluster.place(node, pod, need)
        ids = tuple(self.offsets[node.index] + index for index, _milli in pieces)
        self.where[p] = (node, pieces, ids)
        self.gen[p] += 1
        self.running[p] = True
        self.start[p], self.stop[p], self.end[p] = step, stop, end
        if step < stop < len(self.times):
            self._at(self.departures, stop, (p, self.gen[p]))
        if not pod.gpu:
            return True  # CPU and memory only: held on the node until it leaves
        self.out.placements.append((pod.name, self.times[step], node.name, [index for index, _milli in pieces]))
        filled = self._filled(p, step, stop)
        limit = self.limit[p]
        if self.gen[p] == 1:
            # the first stay holds every sample of the pod (and zeros before them): its peak, read once
            top = (self.usage.peak(pod.name) or 0) if len(filled) else 0
        else:
            top = max(filled) if len(filled) else 0
        if top > limit:
            filled = array("q", map(min, filled, repeat(limit)))
            top = limit
        self.use[p] = filled
        self.hot[p] = top > self.request[p]
        if len(filled):
            self.used[step:stop] = array("q", map(add, self.used[step:stop], filled))
        self.diff_requested[step] += self.request[p]
        self.diff_promised[step] += limit
        for gpu in ids:
            self.holders[gpu] += 1
            if self.holders[gpu] == 1:
                self.diff_busy[step] += 1
        if len(ids) == 1:
            self.gpu_of[p] = ids[0]
            self.on_gpu[ids[0]].append(p)
        return True

    def _remove(self, p: int, step: int) -> None:
        """Take the pod off its GPUs at the step (it left or was evicted)."""
        node, pieces, ids = self.where[p]
        self.cluster.release(node, self.pods[p], pieces)
        self.where[p] = None
        self.running[p] = False
        self.dirty = True  # what it held may let an evicted pod back in
        if not ids:
            return
        start, stop = self.start[p], self.stop[p]
        if step < stop:  # evicted: its use from this step on is gone
            self.used[step:stop] = array("q", map(sub, self.used[step:stop], self.use[p][step - start :]))
        self.use[p] = EMPTY
        self.diff_requested[step] -= self.request[p]
        self.diff_promised[step] -= self.limit[p]
        for gpu in ids:
            self.holders[gpu] -= 1
            if not self.holders[gpu]:
                self.diff_busy[step] -= 1
        if self.gpu_of[p] >= 0:
            self.on_gpu[self.gpu_of[p]].remove(p)
            self.gpu_of[p] = -1

    def _at(self, table: dict[int, list], step: int, item: object) -> None:
        """File the item under the step, and make sure the walk visits it."""
        found = table.get(step)
        if found is None:
            table[step] = [item]
            heappush(self.heap, step)
        else:
            found.append(item)

    # -- pressure ------------------------------------------------------------------------------

    def _scan(self, gpu: int, step: int) -> None:
        """File the GPU's next pressure from the step on (or where to look further), while a pod of it can take more
        than its request, or its pods' requests and the reserve pass its memory."""
        self.version[gpu] += 1
        held = self.on_gpu[gpu]
        if any(self.hot[p] for p in held):
            bound = self.mark - self.reserve
        elif (
            self.reserve
            and held
            and self.needs[held[0]].share
            and sum(self.request[p] for p in held) + self.reserve > self.memory
        ):
            # no pod can be evicted, but within their requests the pods and the reserve may not fit: over memory
            bound = self.memory - self.reserve
        else:
            return  # no pod could be evicted, and the GPU cannot be over memory: nothing to find
        until = min(self.stop[p] for p in held)  # the first of them leaves: the GPU is scanned again then
        high = min(until, step + CHUNK)
        if step >= high:
            return
        start = self.start
        if len(held) == 1:
            sums = self.use[held[0]][step - start[held[0]] : high - start[held[0]]]
        else:
            sums = map(sum, zip(*(self.use[p][step - start[p] : high - start[p]] for p in held)))
        hit = next(compress(count(step), map(bound.__lt__, sums)), None)
        if hit is not None:
            self._at(self.pressure, hit, (gpu, self.version[gpu]))
        elif high < until:
            self._at(self.pressure, high, (gpu, self.version[gpu]))  # not yet: look further from there

    def _relieve(self, gpu: int, step: int) -> None:
        """Evict from the GPU at the step until it is under the mark or no pod uses more than its request; note the
        GPU over memory when it still is."""
        held = self.on_gpu[gpu]
        uses = {p: self.use[p][step - self.start[p]] for p in held}
        used = sum(uses.values())
        if used + self.reserve > self.mark:
            pods, request = self.pods, self.request
            above = sorted(
                (p for p in held if uses[p] > request[p]),
                key=lambda p: (pods[p].priority, request[p] - uses[p], pods[p].name),
            )
            for p in above:
                if used + self.reserve <= self.mark:
                    break
                node = self.where[p][0]
                self.out.evictions.append(
                    {
                        "time": self.times[step],
                        "node": node.name,
                        "gpu": gpu - self.offsets[node.index],
                        "pod": pods[p].name,
                        "used_bytes": uses[p],
                        "request_bytes": request[p],
                        "limit_bytes": self.limit[p],
                        "priority": pods[p].priority,
                        "gpu_used_bytes": used,
                    }
                )
                used -= uses[p]
                end = self.end[p]
                self._remove(p, step)
                if self.rules.on_evict == "requeue":
                    self.queue.append((p, None if end is None else end - self.times[step]))
                    if step + 1 < len(self.times):
                        heappush(self.heap, step + 1)
                else:
                    self.out.dropped.append(pods[p].name)
        if held and used + self.reserve > self.memory and self.needs[held[0]].share:
            # still above the memory after the evictions: an allocation of one of these pods fails on a GPU
            self.out.over_memory.append((step, gpu))
            self.out.over_memory_pods.update(self.pods[p].name for p in held)
        self._scan(gpu, step + 1)

    # -- the walk ------------------------------------------------------------------------------

    def _requeue(self, step: int) -> None:
        """Place the evicted pods that fit now, in the order they were evicted."""
        self.dirty = False
        waiting = []
        for p, left in self.queue:
            if left is None:
                stop, end = len(self.times), None
            else:
                end = self.times[step] + left
                stop = min(bisect_left(self.times, end), len(self.times))
            if self._place(p, step, stop, end):
                self.out.requeued += 1
                if self.gpu_of[p] >= 0:
                    self.changed.add(self.gpu_of[p])
            else:
                waiting.append((p, left))
        self.queue = waiting

    def run(self) -> Walk:
        """Walk every step with something to do; the figures per step."""
        steps = len(self.times)
        for p, pod in enumerate(self.pods):
            self.arrivals.setdefault(self.index[pod.created], []).append(p)
        for found in self.arrivals.values():
            found.sort(key=lambda p: self.pods[p].name)
        self.heap = list(self.arrivals)
        heapify(self.heap)
        last = -1
        while self.heap:
            step = heappop(self.heap)
            if step == last:
                continue
            last = step
            self.changed = set()
            for p, gen in self.departures.pop(step, ()):
                if self.running[p] and self.gen[p] == gen:
                    if self.gpu_of[p] >= 0:
                        self.changed.add(self.gpu_of[p])
                    self._remove(p, step)
            if self.queue and self.dirty:
                self._requeue(step)
            leaving = []
            for p in self.arrivals.get(step, ()):
                pod = self.pods[p]
                instant = pod.deleted is not None and pod.deleted == pod.created
                stop = steps if pod.deleted is None else self.index[pod.deleted]
                if not self._place(p, step, stop, pod.deleted):
                    if pod.gpu:
                        self.out.unstarted.append(pod.name)
                    continue
                self.out.placed += int(pod.gpu)
                if instant:
                    leaving.append(p)  # placed and gone at the same instant, after the arrivals
                elif self.gpu_of[p] >= 0:
                    self.changed.add(self.gpu_of[p])
            for p in leaving:
                self._remove(p, step)
            for gpu in sorted(self.changed):
                self._scan(gpu, step)
            for gpu, version in sorted(self.pressure.pop(step, ())):
                if version == self.version[gpu]:
                    self._relieve(gpu, step)
        self.out.waiting = [self.pods[p].name for p, _left in self.queue]
        if self.rules.on_evict == "requeue":
            self.out.dropped = list(self.out.waiting)
        self.out.used = self.used
        self.out.requested = array("q", accumulate(self.diff_requested[:steps]))
        self.out.promised = array("q", accumulate(self.diff_promised[:steps]))
        self.out.busy = array("q", accumulate(self.diff_busy[:steps]))
        return self.out


def walk(
    pods: Sequence[Pod],
    specs: Sequence[NodeSpec],
    order: str,
    models: bool,
    usage: Usage,
    gpu_memory: int,
    rules: Rules,
) -> Walk:
    """Replay the pods on the nodes' GPUs on their measured use, under the rules (the module's docstring)."""
    return _Walker(pods, specs, order, models, usage, gpu_memory, rules).run()
