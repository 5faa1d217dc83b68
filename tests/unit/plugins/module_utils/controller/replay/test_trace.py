# SPDX-License-Identifier: Apache-2.0
"""Reading traces: the openb pod list and the generic CSV, and errors that name the line and the column."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError, trace

FIXTURES = Path(__file__).resolve().parents[5] / "fixtures" / "replay"
OPENB_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
)
GOOD_ROW = "p1,4000,16384,1,500,,BE,Running,0,600,0"


def write(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "trace.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_the_openb_fixture_is_read():
    pods = trace.read_trace(str(FIXTURES / "openb-pods.csv"), "openb")
    assert [p.name for p in pods] == [f"pod-{i:02d}" for i in range(1, 11)]
    first, spec, cpu_only, pending = pods[0], pods[2], pods[3], pods[7]
    assert (first.cpu_milli, first.memory_mib, first.num_gpu, first.gpu_milli) == (4000, 16384, 1, 500)
    assert (first.created, first.deleted, first.line, first.requested_milli) == (0, 600, 2, 500)
    assert spec.models == ("V100M32", "V100M16") and spec.requested_milli == 2000
    assert cpu_only.deleted is None and not cpu_only.gpu and cpu_only.models is None
    assert pending.name == "pod-08" and pending.num_gpu == 4  # a pod the trace never scheduled is replayed too


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([OPENB_HEADER.replace(",scheduled_time", "")], "trace: line 1: missing column(s) scheduled_time"),
        ([OPENB_HEADER + ",gpu_mili"], "trace: line 1: unknown column(s) gpu_mili"),
        ([OPENB_HEADER + ",qos"], "trace: line 1: column(s) qos more than once"),
        (
            [OPENB_HEADER, "p1,4000,16384,1,500"],
            "trace: line 2, column gpu_spec: missing (5 values for 11 columns)",
        ),
        (
            [OPENB_HEADER, GOOD_ROW + ",x,y"],
            "trace: line 2, column scheduled_time: 2 value(s) after it (13 values for 11 columns)",
        ),
        (
            [OPENB_HEADER, GOOD_ROW.replace(",1,500,", ",65,500,")],
            "line 2, column num_gpu: 65 is out of range (0 to 64)",
        ),
        ([OPENB_HEADER, GOOD_ROW.replace("4000", "4k")], "trace: line 2, column cpu_milli: '4k' is not a whole number"),
        (
            [OPENB_HEADER, GOOD_ROW.replace("4000", "--5")],
            "trace: line 2, column cpu_milli: '--5' is not a whole number",
        ),
        (
            [OPENB_HEADER, GOOD_ROW.replace(",0,600,", ",0,10000000000000,")],
            "column deletion_time: 10000000000000 is out",
        ),
        ([OPENB_HEADER, GOOD_ROW.replace("16384", "-1")], "trace: line 2, column memory_mib: -1 is out of range"),
        (
            [OPENB_HEADER, GOOD_ROW.replace(",500,", ",1001,")],
            "line 2, column gpu_milli: 1001 is out of range (0 to 1000)",
        ),
        ([OPENB_HEADER, GOOD_ROW.replace(",500,", ",0,")], "line 2, column gpu_milli: 0 with num_gpu 1"),
        ([OPENB_HEADER, GOOD_ROW.replace(",1,500,", ",0,500,")], "line 2, column gpu_milli: 500 with num_gpu 0"),
        ([OPENB_HEADER, GOOD_ROW.replace(",0,600,", ",700,600,")], "line 2, column deletion_time: 600 is before"),
        ([OPENB_HEADER, GOOD_ROW.replace(",600,0", ",600,x")], "line 2, column scheduled_time: 'x' is not"),
        ([OPENB_HEADER, GOOD_ROW.replace(",,BE", ",A||B,BE")], "line 2, column gpu_spec: 'A||B' has an empty model"),
        ([OPENB_HEADER, GOOD_ROW.replace("p1,", " ,")], "line 2, column name: is empty"),
        ([OPENB_HEADER, GOOD_ROW, "", GOOD_ROW], "trace: line 4, column name: 'p1' is on line 2 too"),
        ([""], "trace: line 1: missing column(s) name"),
    ],
)
def test_openb_errors_name_the_line_and_the_column(tmp_path, lines, message):
    with pytest.raises(ReplayError) as raised:
        trace.read_trace(write(tmp_path, *lines), "openb")
    assert message in str(raised.value)


def test_a_record_is_named_by_the_line_it_starts_on(tmp_path):
    """A quoted value over two lines: the record after it is still named by its own first line."""
    quoted = GOOD_ROW.replace("Running", '"Run\nning"')
    bad = GOOD_ROW.replace("p1,", "p2,").replace("4000", "4k")
    with pytest.raises(ReplayError, match=r"^trace: line 4, column cpu_milli: '4k'"):
        trace.read_trace(write(tmp_path, OPENB_HEADER, quoted, bad), "openb")
    short = "p2,4000"
    with pytest.raises(ReplayError, match=r"^trace: line 4, column memory_mib: missing"):
        trace.read_trace(write(tmp_path, OPENB_HEADER, quoted, short), "openb")


def test_a_line_the_csv_reader_refuses_is_named(tmp_path):
    huge = GOOD_ROW.replace("p1,", "p" + "x" * 200_000 + ",")
    with pytest.raises(ReplayError, match=r"^trace: line 3: not readable as CSV: field larger than field limit"):
        trace.read_trace(write(tmp_path, OPENB_HEADER, GOOD_ROW, huge), "openb")


def test_unreadable_files_name_the_option(tmp_path):
    with pytest.raises(ReplayError, match=r"^trace: cannot read .*missing.csv: No such file"):
        trace.read_trace(str(tmp_path / "missing.csv"), "openb")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ReplayError, match=r"^trace: .*empty.csv is empty \(no header line\)"):
        trace.read_trace(str(empty), "openb")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage\x80\n")
    with pytest.raises(ReplayError, match=r"^trace: .*binary.csv is not a readable CSV file"):
        trace.read_trace(str(binary), "openb")
    with pytest.raises(ReplayError, match=r"^trace: cannot read nul.byte: embedded null byte"):
        trace.read_trace("nul\x00byte", "openb")
    with pytest.raises(ReplayError, match=r"^trace_format: 'json' is not one of openb, csv"):
        trace.read_trace(str(empty), "json")


def test_a_header_only_trace_has_no_pods(tmp_path):
    assert trace.read_trace(write(tmp_path, OPENB_HEADER), "openb") == []


# ---------------------------------------------------------------- the generic CSV


def test_the_generic_fixture_is_read():
    pods = trace.read_trace(str(FIXTURES / "generic.csv"), "csv")
    train, notebook, evaluation, big, batch = pods
    start = datetime.datetime(2025, 3, 1, 8, tzinfo=datetime.UTC).timestamp()
    assert (train.created, train.deleted) == (start, start + 7200)
    assert (train.num_gpu, train.gpu_milli, train.cpu_milli, train.memory_mib) == (1, 1000, 8000, 65536)
    assert (notebook.num_gpu, notebook.gpu_milli, notebook.gpu_memory_mib, notebook.team) == (1, 250, 10240, "vision")
    assert evaluation.deleted is None and evaluation.gpu_milli == 500
    assert (big.num_gpu, big.gpu_milli, big.requested_milli) == (2, 1000, 2000)
    assert (batch.num_gpu, batch.cpu_milli, batch.memory_mib, batch.gpu_memory_mib) == (0, 500, 2048, None)


def test_generic_times_in_seconds_and_optional_columns(tmp_path):
    path = write(tmp_path, "name,submit,end,gpus", "a,12.5,20,0.125", "b,3,,1")
    a, b = trace.read_trace(path, "csv")
    assert (a.created, a.deleted, a.num_gpu, a.gpu_milli, a.cpu_milli, a.team, a.models) == (
        12.5,
        20,
        1,
        125,
        0,
        None,
        None,
    )
    assert (b.created, b.deleted, b.num_gpu, b.gpu_milli) == (3, None, 1, 1000)


GENERIC = "name,submit,end,gpus,cpu,memory,gpu_memory,gpu_model"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("a,0,1,1.5,,,,", "line 2, column gpus: '1.5': above 1, GPUs are whole"),
        ("a,0,1,1e400,,,,", "line 2, column gpus: '1e400' is out of range (a pod runs on one node: at most 64)"),
        ("a,0,1,65,,,,", "line 2, column gpus: '65' is out of range"),
        ("a,0,1,0.0005,,,,", "line 2, column gpus: '0.0005' is finer than a milli-GPU"),
        ("a,0,1,-1,,,,", "line 2, column gpus: '-1' is not a number of 0 or more"),
        ("a,0,1,two,,,,", "line 2, column gpus: 'two' is not a decimal number"),
        ("a,,1,1,,,,", "line 2, column submit: is empty"),
        ("a,2025-03-01T08:00:00,,1,,,,", "line 2, column submit: '2025-03-01T08:00:00' has no time zone"),
        ("a,yesterday,,1,,,,", "line 2, column submit: 'yesterday' is not a time"),
        (
            "a,0,2025-03-01T08:00:00Z,1,,,,",
            "line 2, column end: a time in rfc3339, but line 2 (submit) has one in seconds",
        ),
        ("a,5,4,1,,,,", "line 2, column end: 4 is before the pod's creation (5)"),
        ("a,0,1,1,lots,,,", "line 2, column cpu: 'lots' is not a Kubernetes quantity"),
        ("a,0,1,1,,-2Gi,,", "line 2, column memory: '-2Gi' is negative"),
        ("a,0,1,1,,,,A|", "line 2, column gpu_model: 'A|' has an empty model name"),
        ("a,1e400,,1,,,,", "line 2, column submit: '1e400' is too large a time (at most"),
        ("a,0.5,1e400,1,,,,", "line 2, column end: '1e400' is too large a time (at most"),
    ],
)
def test_generic_errors_name_the_line_and_the_column(tmp_path, row, message):
    with pytest.raises(ReplayError) as raised:
        trace.read_trace(write(tmp_path, GENERIC, row), "csv")
    assert str(raised.value).startswith("trace: ") and message in str(raised.value)


def test_generic_times_of_two_kinds_are_refused_across_rows(tmp_path):
    path = write(tmp_path, "name,submit,gpus", "a,2025-03-01T08:00:00+01:00,1", "b,3600,1")
    with pytest.raises(ReplayError, match=r"line 3, column submit: a time in seconds, but line 2 \(submit\) has one"):
        trace.read_trace(path, "csv")


def test_generic_needs_its_columns(tmp_path):
    with pytest.raises(ReplayError, match=r"trace: line 1: missing column\(s\) gpus"):
        trace.read_trace(write(tmp_path, "name,submit", "a,0"), "csv")
    with pytest.raises(ReplayError, match=r"unknown column\(s\) num_gpu"):
        trace.read_trace(write(tmp_path, "name,submit,gpus,num_gpu", "a,0,1,1"), "csv")


# -- gpu_limit: what a burstable fractional pod may use above its request ----------------------------


def test_generic_gpu_limit_is_read_as_milli_of_one_gpu(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("name,submit,gpus,gpu_limit\na,0,0.25,0.5\nb,0,0.25,\nc,0,2,1\nd,0,0,\n")
    pods = {pod.name: pod for pod in trace.read_generic(str(path))}
    assert (pods["a"].gpu_limit_milli, pods["a"].requested_milli, pods["a"].limit_milli) == (500, 250, 500)
    assert (pods["b"].gpu_limit_milli, pods["b"].limit_milli) == (None, 250)
    assert (pods["c"].gpu_limit_milli, pods["c"].limit_milli) == (1000, 2000)
    assert pods["d"].limit_milli == 0


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("a,0,0.5,0.25", r"line 2, column gpu_limit: '0.25' is below the request \(0.5\)"),
        ("a,0,0.5,1.5", r"column gpu_limit: '1.5' is above 1: a limit is a fraction of one GPU"),
        ("a,0,0.5,0.0005", r"column gpu_limit: '0.0005' is finer than a milli-GPU"),
        ("a,0,0,0.5", r"column gpu_limit: '0.5': a pod without GPUs has no GPU limit"),
        ("a,0,2,0.5", r"column gpu_limit: '0.5' is below the request \(2\)"),
        ("a,0,0.5,lots", r"column gpu_limit: 'lots' is not a decimal number"),
    ],
)
def test_generic_gpu_limit_errors_name_the_line_and_the_column(tmp_path, row, message):
    path = tmp_path / "t.csv"
    path.write_text("name,submit,gpus,gpu_limit\n" + row + "\n")
    with pytest.raises(ReplayError, match=r"^trace: line 2, " + message.removeprefix("line 2, ")):
        trace.read_generic(str(path))


# -- priority: the reclaim rule evicts the lowest first ---------------------------------------------


def test_generic_priority_and_the_kind_of_the_traces_times(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("name,submit,gpus,priority,gpu_memory\na,0,0.25,-5,1.5G\nb,1,0.25,,\nc,2,0,1000000000,\n")
    pods = trace.read_trace(str(path), "csv")
    assert [(pod.priority, pod.gpu_memory_bytes) for pod in pods] == [(-5, 1_500_000_000), (0, None), (10**9, None)]
    assert pods.time_kind == "seconds"
    dated = tmp_path / "dated.csv"
    dated.write_text("name,submit,gpus\na,2025-03-01T08:00:00Z,1\n")
    assert trace.read_trace(str(dated), "csv").time_kind == "rfc3339"
    assert trace.read_trace(write(tmp_path, "name,submit,gpus"), "csv").time_kind is None
    openb = trace.read_trace(str(FIXTURES / "openb-pods.csv"), "openb")
    assert openb.time_kind == "seconds" and {pod.priority for pod in openb} == {0}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("high", "'high' is not a whole number"),
        ("1.5", "'1.5' is not a whole number"),
        (str(2**31), "2147483648 is out of range (-2147483648 to 2147483647)"),
    ],
)
def test_generic_priority_errors_name_the_line_and_the_column(tmp_path, value, message):
    path = tmp_path / "t.csv"
    path.write_text(f"name,submit,gpus,priority\na,0,1,{value}\n")
    with pytest.raises(ReplayError) as raised:
        trace.read_generic(str(path))
    assert str(raised.value) == f"trace: line 2, column priority: {message}"
