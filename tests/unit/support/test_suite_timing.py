# SPDX-License-Identifier: Apache-2.0
"""tests/support/suite_timing.py: seconds per test file, the order pytest runs files in, and the table's figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

from ansible_collections.aligned.dra.tests.support import suite_timing


def item(nodeid: str) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid)


def test_slowest_files_first_and_a_files_tests_keep_their_order():
    items = [item("a.py::t1"), item("b.py::t1"), item("a.py::t2"), item("c.py::t1"), item("b.py::t2")]
    suite_timing.slowest_files_first(items, {"b.py": 30.0, "c.py": 5.0})
    assert [i.nodeid for i in items] == ["b.py::t1", "b.py::t2", "c.py::t1", "a.py::t1", "a.py::t2"]


def test_files_without_figures_keep_their_collection_order_after_the_known_ones():
    items = [item("z.py::t"), item("y.py::t"), item("x.py::t[1]"), item("x.py::t[2]")]
    suite_timing.slowest_files_first(items, {"x.py": 1.0})
    assert [i.nodeid for i in items] == ["x.py::t[1]", "x.py::t[2]", "z.py::t", "y.py::t"]


def test_later_figures_override_earlier_ones_and_damaged_files_count_as_empty(tmp_path):
    committed, last, damaged = tmp_path / "committed.json", tmp_path / "last.json", tmp_path / "damaged.json"
    committed.write_text(json.dumps({"a.py": 10, "b.py": 20}))
    last.write_text(json.dumps({"b.py": 2.5, "bad.py": "slow"}))
    damaged.write_text("{not json")
    assert suite_timing.read_durations(committed, last, damaged, tmp_path / "missing.json") == {
        "a.py": 10.0,
        "b.py": 2.5,
    }


def test_written_figures_read_back_slowest_first_and_the_table_names_the_slowest(tmp_path, capsys):
    target = tmp_path / "timings" / "pytest-files.json"
    suite_timing.write_durations({"fast.py": 0.04, "slow.py": 12.345, "mid.py": 3.0}, target)
    assert list(json.loads(target.read_text())) == ["slow.py", "mid.py", "fast.py"]
    assert suite_timing.read_durations(target) == {"slow.py": 12.3, "mid.py": 3.0, "fast.py": 0.0}
    assert list(target.parent.iterdir()) == [target]  # no partial file left behind
    assert suite_timing.main([str(target), "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[0].endswith("slow.py") and lines[1].endswith("mid.py")
    assert "all 3 files" in lines[2]


def test_the_table_gives_each_files_cpu_where_the_cpu_file_has_every_file(tmp_path, capsys):
    target = tmp_path / "pytest-files.json"
    suite_timing.write_durations({"slow.py": 12.0, "fast.py": 1.0}, target)
    suite_timing.write_durations({"slow.py": 20.5, "fast.py": 0.5}, suite_timing.cpu_path(target))
    assert suite_timing.cpu_path(target).name == "pytest-files-cpu.json"
    assert suite_timing.main([str(target)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["12.0s", "CPU", "20.5s", "slow.py"]
    assert lines[2].split()[:3] == ["13.0s", "CPU", "21.0s"]
    # a CPU file of another run (a file missing from it) is not shown beside these seconds
    suite_timing.write_durations({"slow.py": 20.5}, suite_timing.cpu_path(target))
    suite_timing.main([str(target)])
    assert "CPU" not in capsys.readouterr().out


def test_the_process_cpu_counts_the_children_it_reaped():
    before = suite_timing.process_cpu()
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
    assert suite_timing.process_cpu() - before >= 0.1


def test_a_pytest_run_writes_each_files_cpu_beside_its_seconds(tmp_path):
    """The figures of scripts/test.sh's table: pytest with an xdist worker, as the suite runs, on the test above."""
    target = tmp_path / "pytest-files.json"
    this = "tests/unit/support/test_suite_timing.py"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "1", "-q",
         f"{this}::test_the_process_cpu_counts_the_children_it_reaped"],
        cwd=suite_timing.REPO, env={**os.environ, "ALIGNED_DRA_TIMINGS": str(target)},
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    assert suite_timing.read_durations(target)[this] > 0
    assert suite_timing.read_durations(suite_timing.cpu_path(target))[this] >= 0.1
