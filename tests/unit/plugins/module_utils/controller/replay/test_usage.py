# SPDX-License-Identifier: Apache-2.0
"""Reading measured use: samples per pod within its life, percentiles and peaks, errors naming line and column."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import ReplayError, trace, usage

TRACE = "name,submit,end,gpus\na,100,200,0.5\nb,100,,0.25\ncpu,100,200,0\n"
HEADER = "pod,timestamp,memory_used_bytes,sm_ratio"


def pods(tmp_path: Path, text: str = TRACE) -> trace.Trace:
    path = tmp_path / "trace.csv"
    path.write_text(text)
    return trace.read_trace(str(path), "csv")


def read(tmp_path: Path, *lines: str, text: str = TRACE) -> usage.Usage:
    found = pods(tmp_path, text)
    path = tmp_path / "usage.csv"
    path.write_text("\n".join(lines) + "\n")
    return usage.read_usage(str(path), found, found.time_kind)


def test_samples_are_kept_per_pod_in_time_order_within_its_life(tmp_path):
    found = read(
        tmp_path,
        HEADER,
        "a,150,3000,0.5",
        "a,100,1000,",
        "a,99,7,",  # before the creation: ignored
        "a,200,9,",  # at the deletion: the pod is gone, ignored
        "b,5000,1.5e3,1",  # b never ends: kept; 1.5e3 bytes read as 1500
        "b,120,10.2,0",  # a fraction of a byte rounds up
        "cpu,150,0,",  # a pod without GPUs may report nothing used
        "",
    )
    assert found.series == {"a": ([100, 150], [1000, 3000]), "b": ([120, 5000], [11, 1500]), "cpu": ([150], [0])}
    assert (found.samples, found.ignored, found.sm_samples) == (5, 2, 3)
    assert found.info() == {
        "path": str(tmp_path / "usage.csv"),
        "pods": 3,
        "samples": 5,
        "samples_outside_life": 2,
        "sm_ratio_samples": 3,
        "pods_not_in_trace": 0,
        "pods_not_in_trace_examples": [],
    }
    assert (found.peak("a"), found.peak("b"), found.peak("cpu"), found.peak("zz")) == (3000, 1500, 0, None)


def test_percentiles_are_nearest_rank_over_the_pods_samples(tmp_path):
    rows = [f"a,{100 + i},{value}," for i, value in enumerate([50, 10, 40, 20, 30, 60, 70, 80, 90, 100])]
    found = read(tmp_path, HEADER, *rows)
    # sorted: 10 20 ... 100; p95 -> the 10th (ceil(9.5)), p50 -> the 5th, p10 -> the 1st, p100 the largest
    assert [found.percentile("a", Fraction(rank)) for rank in (95, 50, 10, 100)] == [100, 50, 10, 100]
    assert found.percentile("a", Fraction("0.1")) == 10
    assert found.percentile("b", Fraction(95)) is None


def test_rfc3339_usage_goes_with_an_rfc3339_trace(tmp_path):
    text = "name,submit,end,gpus\na,2025-03-01T08:00:00Z,2025-03-01T09:00:00Z,0.5\n"
    found = read(tmp_path, HEADER, "a,2025-03-01T08:30:00+00:00,5,", text=text)
    assert found.series["a"] == ([1740817800], [5])


def test_the_utilization_stages_file_namespaced_pods_in_utc(tmp_path):
    # as usage-pods.csv writes it: pods named namespace/pod, RFC 3339 times in UTC with Z
    text = "name,submit,end,gpus\nml/train-0,2026-11-18T04:00:00Z,2026-11-18T05:00:00Z,0.5\n"
    found = read(
        tmp_path, HEADER, "ml/train-0,2026-11-18T04:30:00Z,2048,0.25", "ml/gone,2026-11-18T04:30:00Z,1,", text=text
    )
    # 2026-11-18 is day 20775 after 1970-01-01; 04:30 UTC on it
    assert found.series == {"ml/train-0": ([20775 * 86400 + 4 * 3600 + 30 * 60], [2048])}
    assert found.info()["pods_not_in_trace_examples"] == ["ml/gone"]


def test_pods_the_trace_does_not_have_are_skipped_counted_and_named(tmp_path):
    # twelve pods the trace's export missed, each with samples: none is replayed, all are counted, ten named in
    # the order the file first gives them
    gone = [f"ns/gone-{index:02d}" for index in (11, 3, 7, 0, 1, 2, 4, 5, 6, 8, 9, 10)]
    rows = [f"{name},{100 + index},{1000 + index},0.5" for index, name in enumerate(gone)]
    rows += [f"{gone[0]},300,5,", "a,150,3000,"]
    found = read(tmp_path, HEADER, *rows)
    assert found.series == {"a": ([150], [3000])}
    # their samples count nowhere: not as samples, not as sm_ratio samples, not as outside a life
    assert (found.samples, found.sm_samples, found.ignored) == (1, 0, 0)
    info = found.info()
    assert info["pods_not_in_trace"] == 12 and info["pods"] == 1
    assert info["pods_not_in_trace_examples"] == gone[:10]


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["pod,timestamp"], "usage: line 1: missing column(s) memory_used_bytes"),
        (
            [HEADER + ",gpu"],
            "usage: line 1: unknown column(s) gpu (known: pod, timestamp, memory_used_bytes, sm_ratio)",
        ),
        ([HEADER, "a,150,1"], "usage: line 2, column sm_ratio: missing (3 values for 4 columns)"),
        ([HEADER, " ,150,1,"], "usage: line 2, column pod: is empty"),
        # a pod the trace does not have is skipped, but its rows are checked as any other
        ([HEADER, "a,150,1,", "zz,150,lots,"], "usage: line 3, column memory_used_bytes: 'lots' is not a number"),
        ([HEADER, "zz,150,1,2"], "usage: line 2, column sm_ratio: '2' is out of range (0 to 1)"),
        (
            [HEADER, "zz,2025-03-01T08:00:00Z,1,"],
            "usage: line 2, column timestamp: a time in rfc3339, but the trace's times are in seconds",
        ),
        ([HEADER, "zz,7,1,", "a,150,1,", "zz,7,2,"], "usage: line 4, column timestamp: pod 'zz' has a sample at 7"),
        ([HEADER, "a,,1,"], "usage: line 2, column timestamp: is empty"),
        ([HEADER, "a,soon,1,"], "usage: line 2, column timestamp: 'soon' is not a time"),
        ([HEADER, "a,-5,1,"], "usage: line 2, column timestamp: '-5' is not a time"),
        (
            [HEADER, "a,2025-03-01T08:00:00Z,1,"],
            "usage: line 2, column timestamp: a time in rfc3339, but the trace's times are in seconds",
        ),
        (
            [HEADER, "a,2025-03-01T08:00:00,1,"],
            "usage: line 2, column timestamp: '2025-03-01T08:00:00' has no time zone",
        ),
        ([HEADER, "a,150,lots,"], "usage: line 2, column memory_used_bytes: 'lots' is not a number of bytes"),
        ([HEADER, "a,150,-1,"], "usage: line 2, column memory_used_bytes: '-1' is not a number of bytes of 0 or more"),
        (
            [HEADER, "a,150,inf,"],
            "usage: line 2, column memory_used_bytes: 'inf' is not a number of bytes of 0 or more",
        ),
        ([HEADER, "a,150,,"], "usage: line 2, column memory_used_bytes: '' is not a number of bytes"),
        ([HEADER, f"a,150,{2**50 + 1},"], "usage: line 2, column memory_used_bytes: '1125899906842625' is above"),
        ([HEADER, "cpu,150,1,"], "usage: line 2, column memory_used_bytes: 1 for pod 'cpu', which asks for no GPU"),
        ([HEADER, "a,150,1,x"], "usage: line 2, column sm_ratio: 'x' is not a number"),
        ([HEADER, "a,150,1,1.5"], "usage: line 2, column sm_ratio: '1.5' is out of range (0 to 1)"),
        ([HEADER, "a,150,1,-0.1"], "usage: line 2, column sm_ratio: '-0.1' is out of range (0 to 1)"),
        (
            [HEADER, "a,150,1,", "b,150,1,", "a,150.0,2,"],
            "usage: line 4, column timestamp: pod 'a' has a sample at 150 on line 2 too",
        ),
        # a second sample outside the pod's life is refused all the same: the file is wrong
        ([HEADER, "a,50,1,", "a,50,2,"], "usage: line 3, column timestamp: pod 'a' has a sample at 50 on line 2 too"),
    ],
)
def test_errors_name_the_option_the_line_and_the_column(tmp_path, lines, message):
    with pytest.raises(ReplayError) as raised:
        read(tmp_path, *lines)
    assert str(raised.value).startswith(message)


def test_unreadable_files_name_the_option(tmp_path):
    found = pods(tmp_path)
    with pytest.raises(ReplayError, match=r"^usage: cannot read .*missing.csv: No such file"):
        usage.read_usage(str(tmp_path / "missing.csv"), found, found.time_kind)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ReplayError, match=r"^usage: .*empty.csv is empty \(no header line\)"):
        usage.read_usage(str(empty), found, found.time_kind)


def test_a_header_only_file_has_no_samples(tmp_path):
    found = read(tmp_path, "pod,timestamp,memory_used_bytes")
    assert (found.series, found.samples, found.ignored) == ({}, 0, 0)


def test_without_pods_in_the_trace_the_files_first_time_sets_the_kind(tmp_path):
    # no time of the trace to hold the file's to: its times may still not mix
    empty = "name,submit,end,gpus\n"
    found = read(tmp_path, HEADER, "x,5,1,", "y,6,1,", text=empty)
    assert found.series == {} and found.not_in_trace == ["x", "y"]
    with pytest.raises(ReplayError, match=r"^usage: line 3, column timestamp: a time in rfc3339, but the trace's"):
        read(tmp_path, HEADER, "x,5,1,", "y,2025-03-01T08:00:00Z,1,", text=empty)
