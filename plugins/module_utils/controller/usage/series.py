# SPDX-License-Identifier: Apache-2.0
"""What a usage source read: per metric, one series per label set, on the window's grid.

The grid is ``start, start + step, ..., end`` (both ends included, as
Prometheus's ``query_range`` answers), each point standing for the step that
ends at it: ``start`` is one step after the window's beginning, so the points
cover the window exactly. A series holds the grid points where
it has a value: a point where the metric had no sample (no scrape within
Prometheus's lookback, the claim not prepared yet) is absent from it, never 0.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field


@dataclass(slots=True)
class Series:
    """One label set of one metric: ``points[i]`` is the grid index of ``values[i]``, ascending."""

    metric: str
    labels: dict[str, str]
    points: array = field(default_factory=lambda: array("l"))
    values: array = field(default_factory=lambda: array("d"))


@dataclass(slots=True)
class UsageData:
    """The window read: ``start`` and ``end`` in seconds since the epoch, ``step`` in seconds, the series per
    metric name (every metric of :data:`~.METRICS` is a key, with an empty list where none was found), and
    where it came from (``source``: the URL or the files, for the result)."""

    start: float
    end: float
    step: float
    series: dict[str, list[Series]]
    source: str

    @property
    def steps(self) -> int:
        """The grid's points."""
        return int(round((self.end - self.start) / self.step)) + 1
