# SPDX-License-Identifier: Apache-2.0
"""tests/support/suite_timing.py: seconds per test file, the order pytest runs files in, and the table's figures."""

from __future__ import annotations

import json
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
