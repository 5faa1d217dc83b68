# SPDX-License-Identifier: Apache-2.0
"""tests/support/suite_timing.py: seconds per test file, the order pytest runs files in, and the table's figures.

The plugin's hooks are driven in this process through pytest's own hook specifications, with fake
reports and a fake CPU clock; a real pytest session with an xdist worker writing the figures is
tests/integration/support/test_suite_timing.py's.
"""

from __future__ import annotations

import json
import resource
from types import SimpleNamespace

import pytest

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


def test_the_process_cpu_is_its_own_and_its_reaped_childrens_user_and_system_time():
    usage = {
        resource.RUSAGE_SELF: SimpleNamespace(ru_utime=1.5, ru_stime=0.25),
        resource.RUSAGE_CHILDREN: SimpleNamespace(ru_utime=4.0, ru_stime=0.5),
    }
    assert suite_timing.process_cpu(usage.__getitem__) == 6.25
    assert suite_timing.process_cpu() > 0  # the real one: this process has run


# -- the plugin's hooks, driven in this process ------------------------------------------------------


class FakeMaker:
    """pytest's own report maker in a worker: a report of each phase, ``durations[phase]`` seconds long."""

    def __init__(self, durations: dict[str, float]) -> None:
        self.durations = durations

    def pytest_runtest_makereport(self, item, call):
        return SimpleNamespace(
            nodeid=item.nodeid, when=call.when, duration=self.durations[call.when], user_properties=[]
        )


def plugin_manager(*plugins) -> pytest.PytestPluginManager:
    """pytest's hook specifications with these plugins only: the hooks are called as a session calls them."""
    manager = pytest.PytestPluginManager()
    for plugin in plugins:
        manager.register(plugin)
    return manager


def run_in_worker(manager: pytest.PytestPluginManager, nodeid: str) -> list:
    """One test's phases as a worker runs them: log start, then each phase's report."""
    manager.hook.pytest_runtest_logstart(nodeid=nodeid, location=(nodeid, 0, nodeid))
    test = item(nodeid)
    return [
        manager.hook.pytest_runtest_makereport(item=test, call=SimpleNamespace(when=when))
        for when in ("setup", "call", "teardown")
    ]


def test_each_phases_report_carries_the_cpu_spent_since_the_previous_phase_ended():
    clock = iter([10.0, 10.5, 12.0, 12.25, 13.0, 16.0, 16.0])  # the worker's CPU, read at each hook
    worker = suite_timing.FileClock(cpu=lambda: next(clock))
    manager = plugin_manager(worker, FakeMaker({"setup": 0.1, "call": 2.0, "teardown": 0.2}))
    first = run_in_worker(manager, "tests/unit/a.py::t1")
    second = run_in_worker(manager, "tests/unit/b.py::t1")
    cpu = [dict(report.user_properties)["cpu_seconds"] for report in first + second]
    # the first test's CPU counts from its start, not from the worker's; the second's from the first's end
    assert cpu == [0.5, 1.5, 0.25, 0.75, 3.0, 0.0]
    assert [report.when for report in first] == ["setup", "call", "teardown"]
    assert next(clock, None) is None  # one reading per hook, none more


def test_where_the_reports_arrive_the_seconds_and_cpu_add_up_per_file_and_are_written(tmp_path, monkeypatch):
    clock = iter(float(reading) for reading in range(100))  # one CPU second per phase
    worker = suite_timing.FileClock(cpu=lambda: next(clock))
    manager = plugin_manager(worker, FakeMaker({"setup": 0.25, "call": 1.0, "teardown": 0.5}))
    reports = [
        report for nodeid in ("tests/unit/a.py::t1", "tests/unit/a.py::t2[x]", "tests/unit/b.py::t")
        for report in run_in_worker(manager, nodeid)
    ]  # fmt: skip
    controller = suite_timing.FileClock(cpu=lambda: pytest.fail("the controller runs no test"))
    for report in reports:  # as xdist hands the workers' reports to the controller
        plugin_manager(controller).hook.pytest_runtest_logreport(report=report)
    assert controller.seconds == {"tests/unit/a.py": 3.5, "tests/unit/b.py": 1.75}
    assert controller.cpu_seconds == {"tests/unit/a.py": 6.0, "tests/unit/b.py": 3.0}

    target = tmp_path / "timings" / "pytest-files.json"
    monkeypatch.setenv("ALIGNED_DRA_TIMINGS", str(target))
    # a worker writes nothing: only the controller has every file's figures
    manager.hook.pytest_sessionfinish(session=SimpleNamespace(config=SimpleNamespace(workerinput={})), exitstatus=0)
    assert not target.parent.exists()
    plugin_manager(controller).hook.pytest_sessionfinish(
        session=SimpleNamespace(config=SimpleNamespace()), exitstatus=0
    )
    assert suite_timing.read_durations(target) == {"tests/unit/a.py": 3.5, "tests/unit/b.py": 1.8}
    assert suite_timing.read_durations(suite_timing.cpu_path(target)) == {
        "tests/unit/a.py": 6.0,
        "tests/unit/b.py": 3.0,
    }


def test_nothing_is_written_unless_asked_or_without_a_test(tmp_path, monkeypatch):
    finished = SimpleNamespace(config=SimpleNamespace())
    monkeypatch.delenv("ALIGNED_DRA_TIMINGS", raising=False)
    clock = suite_timing.FileClock(cpu=lambda: 0.0)
    clock.pytest_runtest_logreport(SimpleNamespace(nodeid="a.py::t", duration=1.0, user_properties=[]))
    clock.pytest_sessionfinish(finished)  # not asked: no file anywhere
    monkeypatch.setenv("ALIGNED_DRA_TIMINGS", str(tmp_path / "empty" / "pytest-files.json"))
    suite_timing.FileClock(cpu=lambda: 0.0).pytest_sessionfinish(finished)  # asked, but no test ran
    assert list(tmp_path.iterdir()) == []


def test_this_session_runs_with_the_clock_registered(request):
    assert isinstance(request.config.pluginmanager.get_plugin("aligned_dra_suite_timing"), suite_timing.FileClock)
