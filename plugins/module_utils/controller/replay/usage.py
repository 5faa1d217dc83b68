# SPDX-License-Identifier: Apache-2.0
"""Measured GPU use of a trace's pods, read from a CSV file (the replay's ``usage`` input).

``pod,timestamp,memory_used_bytes[,sm_ratio]``, a header line first: the
bytes of GPU memory a pod of the trace used at a time (seconds or RFC 3339,
the trace's own kind of time), and optionally the share of the GPU's
streaming multiprocessors it kept busy (0 to 1; checked, not replayed: the
driver takes back memory, not compute). A pod's use at a time is its latest
sample at or before it, 0 before its first; samples outside the pod's life
(before its creation, at or after its deletion) are counted and ignored, and
so are the pods the trace does not have (a site's week of pods always holds
some the trace's export missed), counted and named (the first ten)
(docs/replay.md, "Thin provisioning on measured use").

Every value is checked, a skipped pod's too; a bad one raises
:class:`ReplayError` naming the option, the line and the column, as the
trace's reader does. Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import read_rows, time_of
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.summary import percentile

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import Pod, _Row

USAGE_REQUIRED = ("pod", "timestamp", "memory_used_bytes")
USAGE_OPTIONAL = ("sm_ratio",)
# More than this on one pod is a unit mixed up (KiB for bytes), not a measurement: 1 PiB.
MAX_BYTES = 2**50
# The result names this many of the pods the trace does not have: enough to recognise them, never a week's list.
EXAMPLES = 10


class Usage:
    """The samples of each pod within its life, by pod name: ``(times, bytes)``, times ascending.

    ``times`` and ``bytes`` are any sequences of numbers (lists when read from
    a file); ``samples`` counts those kept, ``ignored`` those outside their
    pod's life, ``sm_samples`` those that gave ``sm_ratio``; ``not_in_trace``
    names the pods of the file the trace does not have, in the order the file
    first gives them (their samples are skipped). The walk takes the series as
    they are: samples outside a pod's life are left out before
    (:func:`read_usage` does).
    """

    __slots__ = ("path", "series", "samples", "ignored", "sm_samples", "not_in_trace", "_peaks")

    def __init__(
        self,
        series: dict[str, tuple[Sequence[float], Sequence[int]]],
        path: str | None = None,
        ignored: int = 0,
        sm_samples: int = 0,
        not_in_trace: Sequence[str] = (),
    ) -> None:
        self.path = path
        self.series = series
        self.samples = sum(len(times) for times, _values in series.values())
        self.ignored = ignored
        self.sm_samples = sm_samples
        self.not_in_trace = list(not_in_trace)
        self._peaks: dict[str, int | None] = {}  # each walk sizes the pods again: read each series once

    def peak(self, name: str) -> int | None:
        """The pod's largest sample; None when it has none."""
        if name not in self._peaks:
            found = self.series.get(name)
            self._peaks[name] = max(found[1]) if found and len(found[1]) else None
        return self._peaks[name]

    def percentile(self, name: str, rank: Fraction) -> int | None:
        """The nearest-rank ``rank`` percentile of the pod's samples (0 < rank <= 100); None without samples.

        The smallest sample such that at least ``rank`` percent of the pod's
        samples are at or below it (p100 is the largest).
        """
        found = self.series.get(name)
        return percentile(sorted(found[1]), rank) if found else None

    def info(self) -> dict[str, int | str | list[str] | None]:
        """The result's ``usage`` entry: where the samples came from, how many were used, which pods were skipped."""
        return {
            "path": self.path,
            "pods": sum(1 for _times, values in self.series.values() if len(values)),
            "samples": self.samples,
            "samples_outside_life": self.ignored,
            "sm_ratio_samples": self.sm_samples,
            "pods_not_in_trace": len(self.not_in_trace),
            "pods_not_in_trace_examples": self.not_in_trace[:EXAMPLES],
        }


def _bytes(row: _Row) -> int:
    """``memory_used_bytes``: a number of 0 or more (``1073741824``, ``1.073741824e9``), rounded up to a byte."""
    value = row.text("memory_used_bytes")
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise row.error("memory_used_bytes", f"{value!r} is not a number of bytes") from None
    if not number.is_finite() or number < 0:
        raise row.error("memory_used_bytes", f"{value!r} is not a number of bytes of 0 or more")
    if number > MAX_BYTES:
        raise row.error("memory_used_bytes", f"{value!r} is above {MAX_BYTES} bytes (1 PiB): not bytes?")
    return math.ceil(number)


def _sm_ratio(row: _Row) -> bool:
    """Whether the row gives ``sm_ratio`` (checked: a number from 0 to 1)."""
    value = row.text("sm_ratio")
    if not value:
        return False
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise row.error("sm_ratio", f"{value!r} is not a number") from None
    if not number.is_finite() or not 0 <= number <= 1:
        raise row.error("sm_ratio", f"{value!r} is out of range (0 to 1)")
    return True


def _no_second_sample(option: str, name: str, samples: list[tuple[float, int, int]]) -> None:
    """Refuse two samples of the pod at one time (``samples``: ``(time, bytes, line)``, sorted)."""
    for before, after in zip(samples, samples[1:]):
        if before[0] == after[0]:
            raise ReplayError(
                f"{option}: line {max(before[2], after[2])}, column timestamp: pod {name!r} has a sample at "
                f"{after[0]:g} on line {min(before[2], after[2])} too"
            )


def read_usage(path: str, pods: Iterable[Pod], time_kind: str | None, option: str = "usage") -> Usage:
    """The samples of the usage CSV at ``path`` for the trace's ``pods``, whose times are of ``time_kind``.

    A pod the trace does not have is skipped and counted, its rows checked
    all the same. A second sample of a pod at one time, a time of another
    kind than the trace's (or, without one, than the file's first), and
    memory used by a pod without GPUs are refused, naming the line and the
    column.
    """
    by_name = {pod.name: pod for pod in pods}
    found: dict[str, list[tuple[float, int, int]]] = {}  # pod -> (time, bytes, line)
    unknown: dict[str, list[tuple[float, int, int]]] = {}  # the same for pods the trace does not have
    sm_samples = ignored = 0
    for row in read_rows(path, option, USAGE_REQUIRED + USAGE_OPTIONAL, USAGE_REQUIRED):
        name = row.text("pod")
        if not name:
            raise row.error("pod", "is empty")
        pod = by_name.get(name)
        stamp = time_of(row, "timestamp")
        if stamp is None:
            raise row.error("timestamp", "is empty")
        if time_kind is None:
            time_kind = stamp[1]  # a trace without pods: the file's first time sets the kind
        if stamp[1] != time_kind:
            # a clock of the trace's own and dates cannot be compared
            raise row.error("timestamp", f"a time in {stamp[1]}, but the trace's times are in {time_kind}")
        used = _bytes(row)
        ratio = _sm_ratio(row)
        if pod is None:
            # the trace's export missed it (gone before the export): skipped, not a wrong file
            unknown.setdefault(name, []).append((stamp[0], used, row.line))
            continue
        if used and not pod.gpu:
            raise row.error("memory_used_bytes", f"{used} for pod {name!r}, which asks for no GPU")
        sm_samples += ratio
        found.setdefault(name, []).append((stamp[0], used, row.line))
    for name, samples in unknown.items():
        samples.sort()
        _no_second_sample(option, name, samples)  # skipped, but a file that says two things is wrong
    series: dict[str, tuple[Sequence[float], Sequence[int]]] = {}
    for name, samples in found.items():
        samples.sort()
        _no_second_sample(option, name, samples)
        pod = by_name[name]
        # outside the pod's life it did not run, in the replay: counted, not used
        kept = [s for s in samples if s[0] >= pod.created and (pod.deleted is None or s[0] < pod.deleted)]
        ignored += len(samples) - len(kept)
        if kept:
            series[name] = ([sample[0] for sample in kept], [sample[1] for sample in kept])
    return Usage(series, path, ignored, sm_samples, list(unknown))
