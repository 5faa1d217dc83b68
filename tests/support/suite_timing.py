# SPDX-License-Identifier: Apache-2.0
"""TEST HELPER: the suite's own clock, per test file. Never shipped.

A file's time is the sum of its tests' setup, call and teardown as the workers
report them (:class:`FileClock`, the plugin tests/conftest.py registers, adds them up) (module fixtures included, since they run in a test's setup),
and its CPU the same phases' user and system time of the worker and the children it reaped
(ansible-playbook runs, driver processes; not podman's containers), in ``<name>-cpu.json`` beside.
scripts/test.sh asks for the figures (``ALIGNED_DRA_TIMINGS``: where to write
them) and prints the ten slowest files at the end of the run.

The same figures order the run: files that took longest start first, so that
with whole files per worker (``--dist=loadfile``) a slow file never starts last
while the other worker idles. ``tests/durations.json`` holds the figures of a
full run (committed, so a fresh clone is ordered too); the last run on this
machine (``.cache/timings/pytest-files.json``) overrides them file by file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Generator, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "tests" / "durations.json"
LAST_RUN = REPO / ".cache" / "timings" / "pytest-files.json"


def file_of(nodeid: str) -> str:
    """``tests/unit/test_x.py`` of ``tests/unit/test_x.py::test_y[param]``."""
    return nodeid.split("::", 1)[0]


def read_durations(*paths: Path) -> dict[str, float]:
    """Seconds per test file, later paths overriding earlier ones; unreadable files count as empty."""
    known: dict[str, float] = {}
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            known.update({str(k): float(v) for k, v in data.items() if isinstance(v, (int, float))})
    return known


def slowest_files_first(items: list[Any], durations: Mapping[str, float]) -> None:
    """Reorder pytest ``items`` in place: files by known duration, longest first; tests of a file keep their order."""
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        first_seen.setdefault(file_of(item.nodeid), index)
    items.sort(key=lambda item: (-durations.get(file_of(item.nodeid), 0.0), first_seen[file_of(item.nodeid)]))


def write_durations(seconds: Mapping[str, float], path: Path) -> None:
    """Write seconds per file (rounded to 0.1 s, slowest first) atomically to ``path``."""
    ordered = dict(sorted(((f, round(s, 1)) for f, s in seconds.items()), key=lambda kv: (-kv[1], kv[0])))
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
    partial.replace(path)


def process_cpu(getrusage: Callable[[int], Any] | None = None) -> float:
    """This process's CPU seconds and those of the children it has waited for (user and system);
    ``getrusage`` is ``resource.getrusage`` unless a test gives its own."""
    import resource

    usage = getrusage or resource.getrusage
    own, children = usage(resource.RUSAGE_SELF), usage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def cpu_path(path: Path) -> Path:
    """Where the CPU seconds per file go beside the seconds at ``path``: ``name-cpu.json``."""
    return path.with_name(f"{path.stem}-cpu{path.suffix}")


class FileClock:
    """The pytest plugin that adds the figures up (tests/conftest.py registers one per process).

    In a worker (or a run without xdist) each test phase's report gets its CPU as the user property
    ``cpu_seconds``: the process's CPU (``cpu``, :func:`process_cpu` unless a test gives its own clock)
    since the previous phase ended, from the first test's start. Where the reports arrive (xdist's
    controller, or the one process) the seconds and CPU add up per file, and at the end of the session
    they are written where ``ALIGNED_DRA_TIMINGS`` says (never from a worker).
    """

    def __init__(self, cpu: Callable[[], float] = process_cpu) -> None:
        self.cpu = cpu
        self.seconds: dict[str, float] = {}
        self.cpu_seconds: dict[str, float] = {}
        self._mark: float | None = None  # the CPU when the current test phase began

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        if self._mark is None:  # the first test of this process: its CPU counts from here
            self._mark = self.cpu()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: Any, call: Any) -> Generator[None, Any, Any]:
        report = yield
        now = self.cpu()
        report.user_properties.append(("cpu_seconds", now - (now if self._mark is None else self._mark)))
        self._mark = now
        return report

    def pytest_runtest_logreport(self, report: Any) -> None:
        name = file_of(report.nodeid)
        self.seconds[name] = self.seconds.get(name, 0.0) + report.duration
        cpu = sum(value for key, value in report.user_properties if key == "cpu_seconds")
        self.cpu_seconds[name] = self.cpu_seconds.get(name, 0.0) + cpu

    def pytest_sessionfinish(self, session: Any) -> None:
        target = os.environ.get("ALIGNED_DRA_TIMINGS")
        if target and not hasattr(session.config, "workerinput") and self.seconds:
            write_durations(self.seconds, Path(target))
            write_durations(self.cpu_seconds, cpu_path(Path(target)))


def slowest(durations: Mapping[str, float], count: int = 10) -> Iterable[tuple[str, float]]:
    return sorted(durations.items(), key=lambda kv: (-kv[1], kv[0]))[:count]


def main(argv: list[str] | None = None) -> int:
    """``python tests/support/suite_timing.py FILE [COUNT]``: print the COUNT (10) slowest test files of FILE,
    with their CPU where FILE's ``-cpu`` file has every one of them."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: suite_timing.py FILE [COUNT]", file=sys.stderr)
        return 2
    durations = read_durations(Path(args[0]))
    # the CPU beside (tests/conftest.py writes both): shown where it is there for every file
    cpu = read_durations(cpu_path(Path(args[0])))
    cpu = cpu if set(durations) <= set(cpu) else {}
    total = sum(durations.values())
    for name, seconds in slowest(durations, int(args[1]) if len(args) > 1 else 10):
        print(f"    {seconds:7.1f}s" + (f"  CPU {cpu[name]:6.1f}s" if cpu else "") + f"  {name}")
    print(
        f"    {total:7.1f}s"
        + (f"  CPU {sum(cpu.values()):6.1f}s" if cpu else "")
        + f"  all {len(durations)} files (summed over workers)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
