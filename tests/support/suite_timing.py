# SPDX-License-Identifier: Apache-2.0
"""TEST HELPER: the suite's own clock, per test file. Never shipped.

A file's time is the sum of its tests' setup, call and teardown as the workers
report them (tests/conftest.py adds them up) (module fixtures included, since they run in a test's setup),
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
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

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


def process_cpu() -> float:
    """This process's CPU seconds and those of the children it has waited for (user and system)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def cpu_path(path: Path) -> Path:
    """Where the CPU seconds per file go beside the seconds at ``path``: ``name-cpu.json``."""
    return path.with_name(f"{path.stem}-cpu{path.suffix}")


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
