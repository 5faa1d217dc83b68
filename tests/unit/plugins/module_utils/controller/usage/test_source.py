# SPDX-License-Identifier: Apache-2.0
"""Reading GPU use: the window and its chunks, both file formats, the grid's evaluation (Prometheus 2.42's
semantics), the HTTP exchange with a fake Prometheus on loopback, and every error's message."""

from __future__ import annotations

import datetime
import http.server
import json
import math
import re
import socket
import time
import urllib.parse
from array import array

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller import usage
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import UsageError, exported, source
from ansible_collections.aligned.dra.tests.support.fakes.apiserver.serving import Serving

INFO, USED, REQUEST, LIMIT, SM, TOTAL, DCGM = (
    usage.CLAIM_INFO,
    usage.CLAIM_USED,
    usage.CLAIM_REQUEST,
    usage.CLAIM_LIMIT,
    usage.CLAIM_SM,
    usage.GPU_TOTAL,
    usage.DCGM_UTIL,
)


def required(at: float, claim: str = "c") -> list[str]:
    """One sample of every required metric, so that a file is complete."""
    return [f'{name}{{claim="{claim}"}} 1 {at}' for name in usage.REQUIRED]


def write(tmp_path, lines: list[str], name: str = "usage.om") -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def by_labels(data, metric: str) -> dict[tuple, tuple[list, list]]:
    return {tuple(sorted(s.labels.items())): (list(s.points), list(s.values)) for s in data.series[metric]}


# ---- the window


@pytest.mark.parametrize(("points", "most"), [(20, 7), (21, 7), (5, 11000), (3, 1), (11000, 11000)])
def test_chunks_cover_every_point_exactly_once_in_order(points, most):
    parts = source.chunks(points, most)
    covered = [i for first, last in parts for i in range(first, last + 1)]
    assert covered == list(range(points))
    assert all(last - first + 1 <= most for first, last in parts)
    assert len(parts) == math.ceil(points / most)
    if (points, most) == (20, 7):
        assert parts == [(0, 6), (7, 13), (14, 19)]


@pytest.mark.parametrize(
    ("value", "ms"),
    [("7d", 604_800_000), ("1h30m", 5_400_000), ("90m", 5_400_000), ("60s", 60_000), ("1500ms", 1500)]
    + [("1w", 604_800_000), ("1y", 31_536_000_000), (60, 60_000), ("0.5", 500), (1.25, 1250), (" 12h ", 43_200_000)],
)
def test_durations_read_as_prometheus_writes_them(value, ms):
    assert source.parse_duration(value, "window") == ms


@pytest.mark.parametrize(
    ("value", "message"),
    [("", "not a duration"), ("7x", "not a duration"), ("30m1h", "not a duration"), ("m5", "not a duration")]
    + [(True, "not a duration"), (None, "not a duration"), ("0s", "longer than 0"), (-1, "longer than 0")]
    + [("1.0005", "whole number of milliseconds")],
)
def test_bad_durations_name_the_key(value, message):
    with pytest.raises(UsageError, match=rf"^opt\.step: .*{message}"):
        source.parse_duration(value, "step", "opt")


def test_durations_are_written_back_for_range_selectors():
    assert [source.format_duration(ms) for ms in (60_000, 5_400_000, 604_800_000, 1500, 250)] == [
        "1m",
        "1h30m",
        "7d",
        "1s500ms",
        "250ms",
    ]


def test_ends_in_rfc3339_or_seconds():
    assert source.parse_end("2025-01-31T00:00:00Z") == 1_738_281_600_000
    assert source.parse_end("2025-01-31T01:00:00.250+01:00") == 1_738_281_600_250
    assert source.parse_end(1_738_281_600) == source.parse_end("1738281600.0") == 1_738_281_600_000
    assert source.parse_end(datetime.datetime(2025, 1, 31)) == 1_738_281_600_000  # YAML's: UTC
    for bad, message in (
        ("2025-01-31T00:00:00", "has no offset"),
        ("yesterday", "neither RFC 3339"),
        (True, "neither RFC 3339"),
        (math.nan, "is not a time"),
    ):
        with pytest.raises(UsageError, match=rf"^aligned_dra_usage\.end: .*{message}"):
            source.parse_end(bad)


def test_the_window_is_whole_steps_and_no_shorter_than_one(tmp_path):
    path = write(tmp_path, required(3600))
    with pytest.raises(UsageError, match=r"step 2h is larger than window 1h"):
        source.read_files({"files": [path], "window": "1h", "step": "2h"})
    with pytest.raises(UsageError, match=r"window 1h is not a whole number of steps of 7m"):
        source.read_files({"files": [path], "window": "1h", "step": "7m"})
    data = source.read_files({"files": [path], "window": "1h", "step": "1h", "end": 3600})
    # one step: one point, the step ending at end (start = end - window + step)
    assert (data.start, data.end, data.step, data.steps) == (3600, 3600, 3600, 1)


# ---- files: the formats


def test_openmetrics_text_labels_comments_and_ignored_metrics(tmp_path):
    path = write(
        tmp_path,
        [
            f"# HELP {INFO} 1 per prepared device.",
            f"# TYPE {INFO} gauge",
            # escapes, a comma, a brace and spaces inside values; an empty label is no label (as Prometheus stores it)
            f'{INFO}{{claim="a,b}} c",pod="say \\"hi\\"\\\\n",gpu_uuid="", namespace = "n" ,}} 1 3599.9999',
            'aligned_dra_gpu_memory_used_bytes{device="gpu-0"} not-even-a-number 3600',  # not read: not checked
            "",
            f"{TOTAL} 80 3600",
            *required(3600, "x")[:-1],
            # 3539.9999 s is 3539999 ms as promtool truncates it: out of [3540 s, 3600 s], in [3480 s, 3540 s]
            f'{USED}{{claim="x"}} 7 3539.9999',
            "# EOF",
            "anything after the end of the exposition is not read",
        ],
    )
    data = source.read_files({"files": [path], "window": "2m", "step": "1m"})
    assert data.end == 3600 and data.source == path
    (info, _other) = sorted(data.series[INFO], key=lambda s: s.labels["claim"])
    assert info.labels == {"claim": "a,b} c", "pod": 'say "hi"\\n', "namespace": "n"}
    assert (data.start, data.steps) == (3540, 2)  # the grid 3540, 3600
    assert (list(info.points), list(info.values)) == ([1], [1.0])
    assert by_labels(data, USED) == {(("claim", "x"),): ([0, 1], [7.0, 1.0])}
    assert [s.labels for s in data.series[TOTAL]] == [{}]
    assert data.series[SM] == [] and data.series[DCGM] == []
    assert set(data.series) == set(usage.METRICS)


def test_files_merge_unordered_and_repeated_samples_the_last_read_winning(tmp_path):
    first = write(tmp_path, [*required(3600), f'{REQUEST}{{claim="d"}} 5 3540', f'{REQUEST}{{claim="d"}} 6 3480'], "a")
    second = write(tmp_path, [f'{REQUEST}{{claim="d"}} 7 3540', f'{REQUEST}{{claim="d"}} 8 3600'], "b.om")
    data = source.read_files({"files": [first, second], "window": "3m", "step": "1m"})
    assert data.start == 3480  # the grid 3480, 3540, 3600
    assert by_labels(data, REQUEST)[(("claim", "d"),)] == ([0, 1, 2], [6.0, 7.0, 8.0])
    assert data.source == f"{first}, {second}"


def answer(result: list[dict], kind: str = "matrix") -> dict:
    return {"status": "success", "data": {"resultType": kind, "result": result}}


def test_saved_query_answers_compact_pretty_or_instant_read_alike(tmp_path):
    result = [
        {"metric": {"__name__": name, "claim": "c", "gpu_uuid": ""}, "values": [[3540, "2"], [3600.5, "3"]]}
        for name in usage.REQUIRED
    ] + [{"metric": {"__name__": "up", "job": "x"}, "values": [[3600, "1"]]}]
    compact = write(tmp_path, [json.dumps(answer(result), separators=(",", ":"))], "compact.json")
    pretty = write(tmp_path, ["  " + json.dumps(answer(result), indent=2)], "pretty.json")
    conf = {"window": "3m", "step": "1m", "end": 3660}
    left, right = source.read_files({**conf, "files": [compact]}), source.read_files({**conf, "files": [pretty]})
    assert left.series == right.series and left.start == 3540  # the grid 3540, 3600, 3660
    assert by_labels(left, USED) == {(("claim", "c"),): ([0, 1, 2], [2.0, 2.0, 3.0])}  # the max of [t - 1m, t]
    assert by_labels(left, INFO) == {(("claim", "c"),): ([0, 1, 2], [2.0, 2.0, 3.0])}
    instant = [{"metric": {"__name__": name, "claim": "c"}, "value": [3600, "4"]} for name in usage.REQUIRED]
    vector = write(tmp_path, [json.dumps(answer(instant, "vector"))], "vector.json")
    assert by_labels(source.read_files({**conf, "files": [vector]}), LIMIT) == {(("claim", "c"),): ([1, 2], [4.0] * 2)}


def test_an_instant_query_of_a_range_vector_reads_as_the_same_samples_in_text(tmp_path):
    """``/api/v1/query`` of ``{__name__=~"..."}[7d]`` (docs/utilization.md) answers every raw sample, each series
    with its name: a matrix that reads exactly as the same samples in OpenMetrics text, irregular times included."""
    series: dict[tuple, list[tuple[float, float]]] = {}
    for number, name in enumerate(usage.METRICS):
        labels = (("UUID", "GPU-a"),) if name == DCGM else (("claim", "c"), ("gpu_uuid", "GPU-a"))
        # about every 15 s, off the grid by irregular milliseconds, from before the window's lookback to its end
        times = [2990 + 15 * k + ((k * 37 + number) % 1000) / 1000 for k in range(41)] + [3600.0]
        series[(name, labels)] = [(t, round(((k * 7919 + number) % 97) / 9.7, 3)) for k, t in enumerate(times)]
    text = [
        f"{name}{{{','.join(f'{k}="{v}"' for k, v in labels)}}} {v} {t}"
        for (name, labels), pairs in series.items()
        for t, v in pairs
    ]
    result = [
        {"metric": {"__name__": name, **dict(labels)}, "values": [[t, str(v)] for t, v in pairs]}
        for (name, labels), pairs in series.items()
    ]
    saved = write(tmp_path, [json.dumps(answer(result), separators=(",", ":"))], "range-vector.json")
    conf = {"window": "10m", "step": "1m"}
    from_json = source.read_files({**conf, "files": [saved]})
    from_text = source.read_files({**conf, "files": [write(tmp_path, [*text, "# EOF"])]})
    assert (from_json.start, from_json.end) == (from_text.start, from_text.end) == (3060, 3600)
    assert from_json.series == from_text.series
    assert all(len(from_json.series[name]) == 1 for name in usage.METRICS)
    assert list(from_json.series[USED][0].points) == list(range(10))


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ([f'{INFO}{{claim="c"}} 1'], r"line 1: no timestamp \(seconds since the epoch\)"),
        (["", f'{INFO}{{claim="c"}} 1 2 3'], r"line 2: not name\{labels\} value timestamp"),
        ([f'{INFO}{{claim="c"}} one 3600'], r"line 1: bad value or timestamp one 3600"),
        ([f'{INFO}{{claim="c"}} 1 soon'], r"line 1: bad value or timestamp 1 soon"),
        ([f'{INFO}{{claim="c"}} 1 1738281600000'], r"line 1: timestamp 1738281600000 is not seconds since the epoch"),
        ([f'{INFO}{{claim="c}} 1 3600'], r"line 1: cannot read the labels"),
        ([f"{INFO}{{claim=c}} 1 3600"], r"line 1: cannot read the labels \{claim=c\}"),
        ([f'9{INFO}{{claim="c"}} 1 3600'], r"line 1: '9aligned_dra_claim_device_info' is not a metric name"),
        ([f"{INFO}"], r"line 1: not name\{labels\} value timestamp"),
    ],
)
def test_bad_text_lines_are_named_with_file_and_line(tmp_path, lines, message):
    path = write(tmp_path, lines)
    with pytest.raises(UsageError, match=rf"^aligned_dra_usage: {re.escape(path)} {message}"):
        source.read_files({"files": [path]})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (answer([{"metric": {"claim": "c"}, "values": [[1, "1"]]}]), r"result 1 \({'claim': 'c'}\) has no __name__"),
        ({"status": "error", "error": "bad"}, r"not a Prometheus query answer: status 'error': bad"),
        ({"data": {"resultType": "scalar", "result": []}}, r"resultType 'scalar', not matrix or vector"),
        ({"data": {}}, r'no "data": \{"result": \[\.\.\.\]\}'),
        (answer([{"metric": {"__name__": INFO}, "values": [[1]]}]), r"a value is not a \[time, \"value\"\] pair"),
        (answer([{"metric": {"__name__": INFO}, "values": [[1, "x"]]}]), r"could not convert string to float"),
    ],
)
def test_bad_json_answers_name_the_file(tmp_path, body, message):
    path = write(tmp_path, [json.dumps(body, separators=(",", ":"))], "saved.json")
    with pytest.raises(UsageError, match=rf"^aligned_dra_usage: {re.escape(path)}: .*{message}"):
        source.read_files({"files": [path]})


def test_files_that_cannot_be_read_or_are_not_given(tmp_path):
    with pytest.raises(UsageError, match=rf"^aligned_dra_usage\.files: cannot read {tmp_path}/none: .*No such file"):
        source.read_files({"files": [str(tmp_path / "none")]})
    (tmp_path / "binary").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(UsageError, match=r"cannot read .*binary: 'utf-8' codec"):
        source.read_files({"files": [str(tmp_path / "binary")]})
    for files in (None, [], "", [""], [3]):
        with pytest.raises(UsageError, match=r"^aligned_dra_usage\.files: .* names no file: give a list of paths"):
            source.read_files({"files": files})
    one = write(tmp_path, required(3600))
    assert source.read_files({"files": one, "window": "1m", "step": "1m"}).source == one  # one path alone


# ---- files: the grid, as Prometheus 2.42 evaluates it


def test_a_plain_selector_takes_the_latest_sample_within_a_lookback_that_includes_both_ends(tmp_path):
    lines = [
        *required(3600),
        f'{TOTAL}{{gpu="a"}} 1 3000',  # exactly 5 minutes before the first grid time: counts there, only there
        f'{TOTAL}{{gpu="b"}} 2 2999.999',  # a millisecond earlier: never
        f'{TOTAL}{{gpu="c"}} 3 3330',
        f'{TOTAL}{{gpu="c"}} 4 3360',  # exactly at a grid time: counts at it
        f'{TOTAL}{{gpu="c"}} 5 3361',
        f'{TOTAL}{{gpu="c"}} 6 3601',  # after the end: not read
    ]
    data = source.read_files({"files": [write(tmp_path, lines)], "window": "6m", "step": "1m", "end": 3600})
    assert data.start == 3300  # the grid 3300, 3360, ..., 3600
    assert by_labels(data, TOTAL) == {
        (("gpu", "a"),): ([0], [1.0]),
        (("gpu", "c"),): ([1, 2, 3, 4, 5], [4.0, 5.0, 5.0, 5.0, 5.0]),
        (("claim", "c"),): ([5], [1.0]),
    }
    gap = [*required(0), f'{REQUEST}{{claim="g"}} 7 0', f'{REQUEST}{{claim="g"}} 8 600']
    data = source.read_files({"files": [write(tmp_path, gap, "gap")], "window": "15m", "step": "1m", "end": 900})
    assert data.start == 60  # the grid 60, 120, ..., 900: point i at 60 + 60 i
    # 0's sample counts up to 300 (exactly 5 minutes later), 600's from 600 on: nothing at 360 .. 540
    assert by_labels(data, REQUEST)[(("claim", "g"),)] == (
        [0, 1, 2, 3, 4, 9, 10, 11, 12, 13, 14],
        [7.0] * 5 + [8.0] * 6,
    )


def test_max_and_avg_over_a_step_include_both_ends_of_the_range(tmp_path):
    lines = [
        *required(3600),
        f"{USED} 9 3240",  # exactly a step before the first grid time: counts there
        f"{USED} 1 3300",  # exactly at it: counts there and at the next one
        f"{USED} 5 3330",
        f"{USED} 2 3360",
        f"{USED} NaN 3540",  # alone in its step: NaN
        f"{USED} 4 3550",  # Prometheus's max replaces a NaN it started with
        f"{SM} 0.25 3300",
        f"{SM} 0.5 3330",
        f"{SM} 0.75 3360",
        f'{DCGM}{{UUID="GPU-a"}} +Inf 3590',
        f'{DCGM}{{UUID="GPU-a"}} 3 3600',
    ]
    data = source.read_files({"files": [write(tmp_path, lines)], "window": "6m", "step": "1m", "end": 3600})
    assert data.start == 3300  # the grid 3300, 3360, ..., 3600
    (used,) = [s for s in data.series[USED] if not s.labels]
    assert list(used.points) == [0, 1, 2, 4, 5]
    assert used.values[:3].tolist() == [9.0, 5.0, 2.0] and math.isnan(used.values[3]) and used.values[4] == 4.0
    assert by_labels(data, SM) == {(): ([0, 1, 2], [0.25, 0.5, 0.75])}
    assert by_labels(data, DCGM) == {(("UUID", "GPU-a"),): ([5], [math.inf])}


@pytest.mark.parametrize(
    ("values", "mean"),
    [  # Prometheus 2.42's own cases (promql/testdata/functions.test, avg_over_time)
        ([1, 2, 3, 4, 5], 3),
        ([1, 2, 3, 4, math.inf], math.inf),
        ([1, 2, 3, 4, -math.inf], -math.inf),
        ([1, 2, 3, math.inf, -math.inf], math.nan),
        ([math.inf, 0, math.inf], math.inf),
        ([math.inf, math.inf, math.inf, -math.inf], math.nan),
        ([-math.inf, 0, -math.inf], -math.inf),
        ([1, 2, -math.inf, -math.inf, math.inf], math.nan),
        ([9.988465674311579e307] * 2, 9.988465674311579e307),  # a sum would overflow
        ([-9.988465674311579e307] * 3, -9.988465674311579e307),
        ([-9.988465674311579e307, 9.988465674311579e307], 0),
    ],
)
def test_the_mean_is_prometheus_own(values, mean):
    found = exported._avg(array("d", values))
    assert found == mean or (math.isnan(mean) and math.isnan(found))


def test_the_default_end_is_the_last_sample_rounded_down_to_a_step(tmp_path):
    path = write(tmp_path, [*required(3600), f'{INFO}{{claim="late"}} 1 7259.5'])
    data = source.read_files({"files": [path], "step": "1h", "window": "2h"})
    assert (data.start, data.end) == (3600, 7200)  # end 7259.5 rounded down; start = end - window + step


def test_missing_required_series_are_all_named_optional_ones_are_empty(tmp_path):
    path = write(tmp_path, [f'{INFO}{{claim="c"}} 1 3600', f'{USED}{{claim="c"}} 1 3600', f"{SM} 1 3600"])
    with pytest.raises(UsageError) as failed:
        source.read_files({"files": [path], "window": "1h"})
    assert str(failed.value) == (
        f"aligned_dra_usage: no series of {REQUEST}, {LIMIT}, {TOTAL} in {path} over the 1h window ending "
        "1970-01-01T01:00:00Z: the driver's metrics must be scraped, with --usage=on (the default) on the driver "
        "(docs/monitoring.md)"
    )
    # series outside the window are no series
    late = write(tmp_path, [*required(3600), f'{INFO}{{claim="c"}} 1 9000'], "late")
    with pytest.raises(UsageError, match=rf"no series of {USED}, {REQUEST}, {LIMIT}, {TOTAL} in .*late over the 1h"):
        source.read_files({"files": [late], "window": "1h"})
    empty = write(tmp_path, ["# nothing here", "up 1 3600"], "empty")
    last = usage.METRICS[-1]
    with pytest.raises(UsageError, match=rf"^aligned_dra_usage: no sample of {INFO}, .*{last} in {re.escape(empty)}: "):
        source.read_files({"files": [empty]})


# ---- which source, which keys


def test_exactly_one_source_and_only_known_keys(tmp_path):
    path = write(tmp_path, required(3600))
    for conf, message in (
        ({"prometheus": "http://p", "files": [path]}, r"set exactly one of prometheus .* not prometheus and files"),
        ({"window": "1h"}, r"set exactly one of prometheus \(a Prometheus base URL\) and files .* not neither"),
        ({"files": [path], "step": "1m", "colour": 1, "size": 2}, r"unknown key\(s\) colour, size; known: bearer_"),
        ({"files": [path], "timeout": 3, "match": "x"}, r"not used when reading from files: match, timeout"),
        ({"prometheus": "http://p", "files": None, "x": 1}, r"unknown key\(s\) x"),
    ):
        with pytest.raises(UsageError, match=rf"^u: {message}"):
            source.read_usage(conf, "u")
    with pytest.raises(UsageError, match=r"^aligned_dra_usage: not used when reading from prometheus: files$"):
        source.read_prometheus({"prometheus": "http://p", "files": [path]})
    with pytest.raises(UsageError, match=r"must be a mapping with prometheus or files, not list"):
        source.read_usage([path])
    data = source.read_usage({"files": [path], "window": "1h", "idle_threshold": 0.1}, others=["idle_threshold"])
    assert data.steps == 60 and data.series[INFO][0].labels == {"claim": "c"}
    with pytest.raises(UsageError, match=r"unknown key\(s\) idle_threshold; known: .*files, .*match"):
        source.read_usage({"files": [path], "idle_threshold": 0.1})


# ---- Prometheus's HTTP API, asked of a fake on loopback (the real one: tests/integration/usage)

NAME = re.compile(r"(aligned_dra_\w+|DCGM_\w+)")
END = 1_700_000_040  # a whole minute


def grid_reply(pretty: bool = False, gap: int = 0, empty: tuple[str, ...] = ()):
    """What Prometheus answers for two pods' series: p1 at every grid time of the request, p2 not at every
    ``gap``-th one; no series for the metrics of ``empty``. Compact JSON as Prometheus writes it, or indented."""

    def reply(form: dict[str, str]) -> tuple[int, str]:
        metric = NAME.search(form["query"]).group(1)
        start, end = float(form["start"]), float(form["end"])
        step = source.parse_duration(form["step"], "step") / 1000
        times = [start + k * step for k in range(round((end - start) / step) + 1)]
        result = []
        for pod in ("p1", "p2") if metric not in empty else ():
            labels = {"pod": pod} if "(" in form["query"] else {"__name__": metric, "pod": pod}
            kept = [t for t in times if not (pod == "p2" and gap and round(t / step) % gap == 0)]
            result.append({"metric": labels, "values": [[t, str(t % 997 + (pod == "p2"))] for t in kept]})
        body = answer(result)
        return 200, json.dumps(body, indent=1) if pretty else json.dumps(body, separators=(",", ":"))

    return reply


class FakePrometheus(http.server.ThreadingHTTPServer):
    """A fake Prometheus on loopback for the HTTP exchange: it records every request and answers
    ``reply(form) -> (status, body)``."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.requests: list[tuple[str, dict[str, str], dict[str, str]]] = []
        self.reply = grid_reply()
        self.serving = Serving(self, "fake-prometheus")  # its stop() answers at once: no poll interval

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def close(self) -> None:
        self.serving.stop()


class FakeHandler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        form = dict(urllib.parse.parse_qsl(self.rfile.read(int(self.headers["Content-Length"])).decode()))
        self.server.requests.append((self.path, form, dict(self.headers)))
        status, body = self.server.reply(form)
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:  # keep pytest's output clean
        pass


@pytest.fixture
def fake():
    server = FakePrometheus()
    yield server
    server.close()


def test_each_metric_is_asked_chunk_by_chunk_and_its_series_merged(fake, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    fake.reply = grid_reply(gap=3)
    conf = {"prometheus": fake.url + "/", "window": "20m", "step": "1m", "end": END, "max_points": 7}
    conf |= {"match": 'job="d"', "dcgm_match": '{job="dcgm"}', "bearer_token_file": str(token)}
    conf |= {"headers": {"X-Scope-OrgID": "t1"}}
    data = source.read_prometheus(conf)
    assert (data.start, data.end, data.step, data.steps, data.source) == (END - 1140, END, 60, 20, fake.url)
    # 20 points in chunks of at most 7: three queries per metric, every grid time asked once, the last one END
    start = END - 1140
    chunks = [(f"{start + 60 * a:.3f}", f"{start + 60 * b:.3f}", "1m") for a, b in ((0, 6), (7, 13), (14, 19))]
    assert chunks[-1][1] == f"{END:.3f}"
    asked: dict[str, list] = {}
    for path, form, headers in fake.requests:
        assert path == "/api/v1/query_range"
        assert headers["Authorization"] == "Bearer s3cret" and headers["X-Scope-OrgID"] == "t1"
        asked.setdefault(form["query"], []).append((form["start"], form["end"], form["step"]))
    assert asked == {source.query_for(metric, 60_000, 'job="d"', 'job="dcgm"'): chunks for metric in usage.METRICS}
    assert set(asked) >= {  # match is the driver's, dcgm_match DCGM's: another job
        f'max_over_time({USED}{{job="d"}}[1m])',
        f'avg_over_time({SM}{{job="d"}}[1m])',
        f'avg_over_time({DCGM}{{job="dcgm"}}[1m])',
        f'{INFO}{{job="d"}}',
        f'{REQUEST}{{job="d"}}',
        f'{usage.USAGE_AVAILABLE}{{job="d"}}',
    }
    every = list(range(20))
    sparse = [i for i in every if round((start + 60 * i) / 60) % 3]
    for metric in usage.METRICS:
        p1, p2 = data.series[metric]
        assert (p1.metric, p1.labels, p2.labels) == (metric, {"pod": "p1"}, {"pod": "p2"})
        assert list(p1.points) == every and list(p1.values) == [(start + 60 * i) % 997 for i in every]
        assert list(p2.points) == sparse and list(p2.values) == [(start + 60 * i) % 997 + 1 for i in sparse]
    # the same answers, indented (not Prometheus's own form), read the same
    fake.reply = grid_reply(pretty=True, gap=3)
    assert source.read_prometheus(conf).series == data.series


def test_prometheus_end_defaults_to_now_rounded_down_and_optional_series_may_be_missing(fake):
    fake.reply = grid_reply(empty=(SM, DCGM))
    before = time.time()
    data = source.read_prometheus({"prometheus": fake.url, "window": "1h", "step": "5m"})
    after = time.time()
    assert before // 300 * 300 <= data.end <= after // 300 * 300 and data.end % 300 == 0
    assert data.series[SM] == [] and data.series[DCGM] == [] and len(data.series[INFO]) == 2
    fake.reply = grid_reply(empty=(LIMIT, TOTAL, SM))
    with pytest.raises(UsageError) as failed:
        source.read_prometheus({"prometheus": fake.url, "window": "1h", "end": END, "match": 'job="x"'})
    assert str(failed.value).startswith(
        f'aligned_dra_usage: no series of {LIMIT}, {TOTAL} in Prometheus at {fake.url} (match job="x") over the 1h '
        "window ending 2023-11-14T22:14:00Z: the driver's metrics must be scraped, with --usage=on"
    )


def error(kind: str, text: str) -> str:
    return json.dumps({"status": "error", "errorType": kind, "error": text})


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (403, "forbidden", r"Prometheus at URL refused the request's headers \(HTTP 403 Forbidden\); set bearer_"),
        (
            400,
            error("bad_data", "parse error at char 5"),
            r"refused the query QUERY \(HTTP 400, bad_data\): parse error",
        ),
        (422, error("execution", "query timed out"), r"refused the query QUERY \(HTTP 422, execution\): query timed"),
        (200, error("execution", "too many samples"), r"refused the query QUERY \(HTTP 200, execution\): too many"),
        (500, "<html>oops</html>", r"Prometheus at URL answered HTTP 500 Internal Server Error to the query QUERY: <h"),
        (
            404,
            "404 page not found",
            r"HTTP 404 Not Found to the query QUERY: is URL Prometheus's base .*its API at URL/api/v1",
        ),
        (200, "<html>Grafana</html>", r"the answer of URL to the query QUERY is not Prometheus's JSON \(is it Prom"),
        (200, json.dumps(answer([], "vector")), r"the answer of URL to the query QUERY cannot be read: resultType vec"),
        (200, json.dumps({"data": {"resultType": "matrix", "result": []}, "status": "success"}), r"no series of"),
    ],
)
def test_what_prometheus_refuses_is_named_with_its_reason_and_the_query(fake, status, body, message):
    fake.reply = lambda form: (status, body)
    pattern = message.replace("URL", re.escape(fake.url)).replace("QUERY", re.escape(INFO))
    with pytest.raises(UsageError, match=rf"^aligned_dra_usage: .*{pattern}"):
        source.read_prometheus({"prometheus": fake.url, "window": "1h", "end": END})


def test_a_chunk_over_prometheus_sample_limit_is_halved_down_to_one_point(fake):
    """Prometheus's --query.max-samples refusal (422, execution): the chunk is halved and asked again, the
    halved size kept for the rest of the query; at one point the message names the query, the point and the cure."""
    limit = {"points": 3}

    def reply(form: dict[str, str]) -> tuple[int, str]:
        points = round((float(form["end"]) - float(form["start"])) / 60) + 1
        if form["query"].startswith("max_over_time") and points > limit["points"]:
            return 422, error("execution", f"{source.TOO_MANY_SAMPLES} in query execution")
        return grid_reply()(form)

    def asked() -> list[tuple[int, int]]:
        return [
            (round((float(form["start"]) - start) / 60), round((float(form["end"]) - start) / 60))
            for _path, form, _headers in fake.requests
            if form["query"].startswith("max_over_time")
        ]

    fake.reply, start = reply, END - 1140
    conf = {"prometheus": fake.url, "window": "20m", "step": "1m", "end": END, "max_points": 7}
    data = source.read_prometheus(conf)
    assert asked() == [(0, 6), (0, 2), (3, 5), (6, 8), (9, 11), (12, 14), (15, 17), (18, 19)]
    p1, _p2 = data.series[USED]
    assert list(p1.points) == list(range(20)) and list(p1.values) == [(start + 60 * i) % 997 for i in range(20)]
    fake.reply = grid_reply()
    assert source.read_prometheus(conf).series == data.series  # as read without a limit
    fake.reply, limit["points"] = reply, 0
    fake.requests.clear()
    with pytest.raises(UsageError) as failed:
        source.read_prometheus(conf)
    assert asked() == [(0, 6), (0, 2), (0, 0)]
    assert str(failed.value) == (
        f"aligned_dra_usage: Prometheus at {fake.url} refused the query max_over_time({USED}[1m]) even for one "
        f"point (2023-11-14T21:55:00Z, step 1m): {source.TOO_MANY_SAMPLES} in query execution; ask for a smaller "
        "step or window, or run Prometheus with a larger --query.max-samples"
    )


def test_a_refused_token_names_its_file(fake, tmp_path):
    token = tmp_path / "token"
    token.write_text("expired")
    fake.reply = lambda form: (401, "Unauthorized")
    with pytest.raises(UsageError) as failed:
        source.read_prometheus({"prometheus": fake.url, "bearer_token_file": str(token)})
    assert str(failed.value) == (
        f"aligned_dra_usage: Prometheus at {fake.url} refused the token of bearer_token_file {token} "
        "(HTTP 401 Unauthorized); set bearer_token_file or headers to credentials it accepts"
    )


def test_an_unreachable_or_silent_prometheus_is_named_with_its_url_and_timeout():
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    with pytest.raises(UsageError) as failed:
        source.read_prometheus({"prometheus": url})
    assert str(failed.value) == (
        f"aligned_dra_usage: Prometheus at {url} cannot be reached (connection refused, unknown host or no route; "
        "timeout 30 s): [Errno 111] Connection refused"
    )
    # listens (the kernel accepts the connection) but never answers: any timeout ends in the same error, so a short one
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(UsageError) as failed:
            source.read_prometheus({"prometheus": url, "timeout": 0.02})
    assert str(failed.value) == (
        f"aligned_dra_usage: Prometheus at {url} did not answer within the timeout of 0.02 s (query {INFO})"
    )


def test_tls_that_fails_names_the_ca_file(fake, tmp_path):
    ca = tmp_path / "ca.pem"
    ca.write_text("not a certificate")
    with pytest.raises(
        UsageError, match=rf"^aligned_dra_usage: Prometheus at https://.*: TLS verification with ca_file {ca} failed"
    ):
        source.read_prometheus({"prometheus": fake.url.replace("http:", "https:"), "ca_file": str(ca), "timeout": 5})


def test_bad_prometheus_settings_name_their_key(tmp_path):
    token = tmp_path / "token"
    token.write_text("t")
    (tmp_path / "blank").write_text(" \n")
    base = {"prometheus": "http://127.0.0.1:9"}
    for conf, message in (
        ({"prometheus": "ftp://p"}, r"\.prometheus: 'ftp://p' is not an http:// or https:// URL"),
        ({"prometheus": None}, r"\.prometheus: None is not an http:// or https:// URL"),
        ({**base, "timeout": 0}, r"\.timeout: 0 is not a number of seconds above 0"),
        ({**base, "timeout": "5"}, r"\.timeout: '5' is not a number of seconds above 0"),
        ({**base, "max_points": 0}, r"\.max_points: 0 is not a whole number above 0"),
        ({**base, "max_points": True}, r"\.max_points: True is not a whole number above 0"),
        ({**base, "match": 3}, r"\.match: 3 is not label matchers such as job=\"aligned-dra-driver\""),
        ({**base, "dcgm_match": ["x"]}, r"\.dcgm_match: \['x'\] is not label matchers such as"),
        ({**base, "headers": {"X": 1}}, r"\.headers: \{'X': 1\} is not a mapping of header names to strings"),
        ({**base, "bearer_token_file": str(tmp_path / "none")}, r"\.bearer_token_file: cannot read .*none: .*No such"),
        ({**base, "bearer_token_file": str(tmp_path / "blank")}, r"\.bearer_token_file: .*blank is empty"),
        ({**base, "ca_file": str(tmp_path)}, r"\.ca_file: cannot read .*: .*Is a directory"),
        (
            {**base, "bearer_token_file": str(token), "headers": {"authorization": "Basic x"}},
            r": give bearer_token_file or an Authorization header, not both",
        ),
        ({**base, "window": "1h", "step": "1d"}, r": step 1d is larger than window 1h"),
        ({**base, "end": "tomorrow"}, r"\.end: 'tomorrow' is neither RFC 3339"),
    ):
        with pytest.raises(UsageError, match=rf"^aligned_dra_usage{message}"):
            source.read_prometheus(conf)
