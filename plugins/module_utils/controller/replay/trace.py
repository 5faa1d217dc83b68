# SPDX-License-Identifier: Apache-2.0
"""The pods of a workload trace, read from a CSV file.

Two formats (docs/replay.md):

- ``openb``: the pod list of a published production GPU-sharing trace,
  ``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
  creation_time,deletion_time,scheduled_time`` (times in whole seconds);
- ``csv``: the collection's generic format, ``name,submit,end,gpus`` and,
  optionally, ``team,tier,gpu_memory,cpu,memory,gpu_model,gpu_limit,priority``
  (times in seconds or RFC 3339, GPUs as a decimal, resources as Kubernetes
  quantities, the pod's priority as an integer).

Every value is checked; a bad one raises :class:`ReplayError` naming the
option, the file's line and the column. Runs on the controller; no Ansible
imports.
"""

from __future__ import annotations

import csv
import datetime
import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import GPU_MILLI, MAX_NODE_GPUS, ReplayError
from ansible_collections.aligned.dra.plugins.module_utils.dra.cel import parse_quantity

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

OPENB_COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
CSV_REQUIRED = ("name", "submit", "gpus")
CSV_OPTIONAL = ("end", "team", "tier", "gpu_memory", "cpu", "memory", "gpu_model", "gpu_limit", "priority")
_INTEGER = re.compile(r"-?[0-9]+")
# Times beyond this (some 31,000 years) are typos, not traces.
MAX_SECONDS = 10**12
MIB = Fraction(2**20)
MILLI = Fraction(1, 1000)
BYTE = Fraction(1)
# Kubernetes pod priorities are 32-bit integers.
PRIORITY_RANGE = (-(2**31), 2**31 - 1)


class Pod:
    """One pod of a trace: its requests, its GPU models, its times and the line it came from."""

    __slots__ = (
        "name",
        "line",
        "cpu_milli",
        "memory_mib",
        "num_gpu",
        "gpu_milli",
        "models",
        "created",
        "deleted",
        "team",
        "tier",
        "gpu_memory_mib",
        "gpu_limit_milli",
        "gpu_memory_bytes",
        "priority",
    )

    def __init__(
        self,
        name: str,
        line: int,
        cpu_milli: int,
        memory_mib: int,
        num_gpu: int,
        gpu_milli: int,
        models: tuple[str, ...] | None,
        created: float,
        deleted: float | None,
        team: str | None = None,
        gpu_memory_mib: int | None = None,
        tier: str | None = None,
        gpu_limit_milli: int | None = None,
        gpu_memory_bytes: int | None = None,
        priority: int = 0,
    ) -> None:
        self.name = name
        self.line = line
        self.cpu_milli = cpu_milli
        self.memory_mib = memory_mib
        self.num_gpu = num_gpu
        self.gpu_milli = gpu_milli  # per GPU, 1..1000 for a GPU pod, 0 for a CPU-only pod
        self.models = models  # the GPU models it accepts; None: any
        self.created = created
        self.deleted = deleted  # None: runs to the end of the trace
        self.team = team
        self.tier = tier
        self.gpu_memory_mib = gpu_memory_mib
        # per GPU, what the pod may use above its request while the GPU has room (thin); None: its request
        self.gpu_limit_milli = gpu_limit_milli
        # the trace's gpu_memory in bytes (rounded up to a byte); None: not given
        self.gpu_memory_bytes = gpu_memory_bytes
        self.priority = priority  # the pod's priority: the reclaim rule evicts the lowest first

    @property
    def gpu(self) -> bool:
        return self.num_gpu > 0

    @property
    def requested_milli(self) -> int:
        """Milli-GPUs the pod asks for: its share of each of its GPUs."""
        return self.num_gpu * self.gpu_milli

    @property
    def limit_milli(self) -> int:
        """Milli-GPUs the pod is promised (its limit on each GPU; without one, its request)."""
        return self.num_gpu * (self.gpu_milli if self.gpu_limit_milli is None else self.gpu_limit_milli)

    def __repr__(self) -> str:
        return f"Pod({self.name!r}, gpus={self.num_gpu}x{self.gpu_milli}, t={self.created}..{self.deleted})"


class Trace(list):
    """The pods of a trace, in file order, and the kind of its times (``seconds`` or ``rfc3339``; None: none read)."""

    time_kind: str | None = None


# -- reading ------------------------------------------------------------------------------------


class _Row:
    """One record of a CSV file: its cells by column, and where it is, for the messages."""

    def __init__(self, option: str, line: int, cells: dict[str, str]) -> None:
        self.option = option
        self.line = line
        self.cells = cells

    def error(self, column: str, reason: str) -> ReplayError:
        return ReplayError(f"{self.option}: line {self.line}, column {column}: {reason}")

    def text(self, column: str) -> str:
        return self.cells.get(column, "").strip()

    def integer(self, column: str, low: int = 0, high: int | None = None, empty: int | None = None) -> int:
        value = self.text(column)
        if value == "" and empty is not None:
            return empty
        if not _INTEGER.fullmatch(value):
            raise self.error(column, f"{value!r} is not a whole number")
        number = int(value)
        if number < low or (high is not None and number > high):
            bounds = f"{low} to {high}" if high is not None else f"at least {low}"
            raise self.error(column, f"{number} is out of range ({bounds})")
        return number


def read_rows(path: str, option: str, known: tuple[str, ...], required: tuple[str, ...]) -> Iterator[_Row]:
    """The records of the CSV file ``path``, after its header is checked against the ``known`` columns.

    A record's line is the line it starts on (a quoted value may span lines).
    """
    line = 1
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            if header is None:
                raise ReplayError(f"{option}: {path} is empty (no header line)")
            header = [column.strip() for column in header]
            _check_header(option, header, known, required)
            while True:
                line = reader.line_num + 1
                cells = next(reader, None)
                if cells is None:
                    break
                if not cells or all(not cell.strip() for cell in cells):
                    continue
                if len(cells) != len(header):
                    raise ReplayError(f"{option}: line {line}, {_count_mismatch(header, cells)}")
                yield _Row(option, line, dict(zip(header, cells)))
    except ReplayError:
        raise
    except UnicodeDecodeError as exc:
        raise ReplayError(f"{option}: {path} is not a readable CSV file: {exc}") from None
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ReplayError(f"{option}: cannot read {path}: {reason}") from None
    except csv.Error as exc:
        raise ReplayError(f"{option}: line {line}: not readable as CSV: {exc}") from None


def _count_mismatch(header: list[str], cells: list[str]) -> str:
    """Which column a record of the wrong length lacks, or where its extra values start."""
    if len(cells) < len(header):
        return f"column {header[len(cells)]}: missing ({len(cells)} values for {len(header)} columns)"
    return f"column {header[-1]}: {len(cells) - len(header)} value(s) after it ({len(cells)} values for {len(header)} columns)"


def _check_header(option: str, header: list[str], known: tuple[str, ...], required: tuple[str, ...]) -> None:
    doubled = sorted({column for column in header if header.count(column) > 1})
    if doubled:
        raise ReplayError(f"{option}: line 1: column(s) {', '.join(doubled)} more than once")
    unknown = [column for column in header if column not in known]
    if unknown:
        raise ReplayError(f"{option}: line 1: unknown column(s) {', '.join(unknown)} (known: {', '.join(known)})")
    missing = [column for column in required if column not in header]
    if missing:
        raise ReplayError(f"{option}: line 1: missing column(s) {', '.join(missing)}")


def models_of(row: _Row, column: str) -> tuple[str, ...] | None:
    """``A|B`` as ``("A", "B")``; empty: None (any model)."""
    value = row.text(column)
    if not value:
        return None
    names = tuple(part.strip() for part in value.split("|"))
    if any(not name for name in names):
        raise row.error(column, f"{value!r} has an empty model name (names are separated by '|')")
    return names


# -- openb ----------------------------------------------------------------------------------------


def read_openb(path: str, option: str = "trace") -> Trace:
    """The pods of an openb pod list."""
    pods: list[Pod] = []
    for row in read_rows(path, option, OPENB_COLUMNS, OPENB_COLUMNS):
        num_gpu = row.integer("num_gpu", 0, MAX_NODE_GPUS)
        gpu_milli = row.integer("gpu_milli", 0, GPU_MILLI)
        if num_gpu and not gpu_milli:
            raise row.error("gpu_milli", f"0 with num_gpu {num_gpu}: a GPU pod asks for 1 to {GPU_MILLI} per GPU")
        if gpu_milli and not num_gpu:
            raise row.error("gpu_milli", f"{gpu_milli} with num_gpu 0: a pod without GPUs asks for none")
        created = row.integer("creation_time", high=MAX_SECONDS)
        deleted = row.integer("deletion_time", high=MAX_SECONDS, empty=-1)
        pods.append(
            Pod(
                name=_name(row),
                line=row.line,
                cpu_milli=row.integer("cpu_milli"),
                memory_mib=row.integer("memory_mib"),
                num_gpu=num_gpu,
                gpu_milli=gpu_milli,
                models=models_of(row, "gpu_spec"),
                created=created,
                deleted=_end(row, "deletion_time", created, None if deleted < 0 else deleted),
            )
        )
        # not replayed (the replay schedules every pod itself), checked all the same
        row.integer("scheduled_time", high=MAX_SECONDS, empty=0)
    read = Trace(_unique(pods, option))
    read.time_kind = "seconds"
    return read


def _name(row: _Row) -> str:
    name = row.text("name")
    if not name:
        raise row.error("name", "is empty")
    return name


def _end(row: _Row, column: str, created: float, deleted: float | None) -> float | None:
    if deleted is not None and deleted < created:
        raise row.error(column, f"{deleted:g} is before the pod's creation ({created:g})")
    return deleted


def _unique(pods: list[Pod], option: str) -> list[Pod]:
    seen: dict[str, int] = {}
    for pod in pods:
        if pod.name in seen:
            raise ReplayError(f"{option}: line {pod.line}, column name: {pod.name!r} is on line {seen[pod.name]} too")
        seen[pod.name] = pod.line
    return pods


# -- the generic CSV --------------------------------------------------------------------------------


def _decimal(row: _Row, column: str) -> Decimal:
    value = row.text(column)
    try:
        number = Decimal(value)
    except InvalidOperation:
        raise row.error(column, f"{value!r} is not a decimal number") from None
    if not number.is_finite() or number < 0:
        raise row.error(column, f"{value!r} is not a number of 0 or more")
    return number


def _gpus(row: _Row) -> tuple[int, int]:
    """``(num_gpu, gpu_milli)`` of the ``gpus`` column: below 1 a share of one GPU, else whole GPUs."""
    number = _decimal(row, "gpus")
    if number == 0:
        return 0, 0
    if number < 1:
        milli = number * GPU_MILLI
        if milli != milli.to_integral_value():
            raise row.error("gpus", f"{row.text('gpus')!r} is finer than a milli-GPU (0.001)")
        return 1, int(milli)
    if number != number.to_integral_value():
        raise row.error("gpus", f"{row.text('gpus')!r}: above 1, GPUs are whole (a share is of one GPU, below 1)")
    if number > MAX_NODE_GPUS:
        raise row.error(
            "gpus", f"{row.text('gpus')!r} is out of range (a pod runs on one node: at most {MAX_NODE_GPUS})"
        )
    return int(number), GPU_MILLI


def _limit(row: _Row, num_gpu: int, gpu_milli: int) -> int | None:
    """The ``gpu_limit`` column: milli of one GPU, at least the request's share and at most one GPU; None: empty."""
    if not row.text("gpu_limit"):
        return None
    number = _decimal(row, "gpu_limit")
    milli = number * GPU_MILLI
    if milli != milli.to_integral_value():
        raise row.error("gpu_limit", f"{row.text('gpu_limit')!r} is finer than a milli-GPU (0.001)")
    if number > 1:
        raise row.error("gpu_limit", f"{row.text('gpu_limit')!r} is above 1: a limit is a fraction of one GPU")
    if not num_gpu:
        raise row.error("gpu_limit", f"{row.text('gpu_limit')!r}: a pod without GPUs has no GPU limit")
    if milli < gpu_milli:
        raise row.error(
            "gpu_limit", f"{row.text('gpu_limit')!r} is below the request ({row.text('gpus')}): a limit is at least it"
        )
    return int(milli)


def _quantity(row: _Row, column: str, unit: Fraction, empty: int | None) -> int | None:
    """A Kubernetes quantity in ``unit`` (rounded up); ``empty`` when the cell is empty."""
    value = row.text(column)
    if not value:
        return empty
    try:
        amount = parse_quantity(value)
    except ValueError:
        raise row.error(column, f"{value!r} is not a Kubernetes quantity (such as 500m, 2, 16Gi)") from None
    if amount < 0:
        raise row.error(column, f"{value!r} is negative")
    return math.ceil(amount / unit)


def time_of(row: _Row, column: str) -> tuple[float, str] | None:
    """``(seconds, kind)`` of a time cell (``seconds`` or ``rfc3339``); None when empty."""
    value = row.text(column)
    if not value:
        return None
    try:
        number = Decimal(value)
    except InvalidOperation:
        number = None
    if number is not None:
        if not number.is_finite() or number < 0:
            raise row.error(column, f"{value!r} is not a time (seconds of 0 or more, or RFC 3339)")
        if number > MAX_SECONDS:
            raise row.error(column, f"{value!r} is too large a time (at most {MAX_SECONDS} seconds)")
        return (int(number) if number == number.to_integral_value() else float(number)), "seconds"
    try:
        stamp = datetime.datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value)
    except ValueError:
        raise row.error(
            column, f"{value!r} is not a time (seconds, or RFC 3339 such as 2025-01-31T08:00:00Z)"
        ) from None
    if stamp.tzinfo is None:
        raise row.error(column, f"{value!r} has no time zone (RFC 3339 needs Z or an offset)")
    seconds = stamp.timestamp()
    return (int(seconds) if seconds == int(seconds) else seconds), "rfc3339"


def read_generic(path: str, option: str = "trace") -> Trace:
    """The pods of the collection's generic CSV trace."""
    pods: list[Pod] = []
    kinds: dict[str, tuple[int, str]] = {}  # time kind -> first line and column with it
    for row in read_rows(path, option, CSV_REQUIRED + CSV_OPTIONAL, CSV_REQUIRED):
        submit = time_of(row, "submit")
        if submit is None:
            raise row.error("submit", "is empty")
        end = time_of(row, "end")
        for column, found in (("submit", submit), ("end", end)):
            if found is None:
                continue
            kinds.setdefault(found[1], (row.line, column))
            for kind, (line, where) in kinds.items():
                if kind != found[1]:
                    # seconds of a clock of the trace's own and dates cannot be compared
                    raise row.error(column, f"a time in {found[1]}, but line {line} ({where}) has one in {kind}")
        num_gpu, gpu_milli = _gpus(row)
        pods.append(
            Pod(
                name=_name(row),
                line=row.line,
                cpu_milli=_quantity(row, "cpu", MILLI, 0),
                memory_mib=_quantity(row, "memory", MIB, 0),
                num_gpu=num_gpu,
                gpu_milli=gpu_milli,
                models=models_of(row, "gpu_model"),
                created=submit[0],
                deleted=_end(row, "end", submit[0], end[0] if end else None),
                team=row.text("team") or None,
                tier=row.text("tier") or None,
                gpu_memory_mib=_quantity(row, "gpu_memory", MIB, None),
                gpu_limit_milli=_limit(row, num_gpu, gpu_milli),
                gpu_memory_bytes=_quantity(row, "gpu_memory", BYTE, None),
                priority=row.integer("priority", PRIORITY_RANGE[0], PRIORITY_RANGE[1], empty=0),
            )
        )
    read = Trace(_unique(pods, option))
    read.time_kind = next(iter(kinds), None)  # one kind at most: mixing them is refused above
    return read


READERS: dict[str, Callable[[str, str], Trace]] = {"openb": read_openb, "csv": read_generic}


def read_trace(path: str, trace_format: str, option: str = "trace") -> Trace:
    """The pods of the trace at ``path`` in ``trace_format`` (``openb`` or ``csv``)."""
    reader = READERS.get(trace_format)
    if reader is None:
        raise ReplayError(f"trace_format: {trace_format!r} is not one of {', '.join(READERS)}")
    return reader(path, option)
