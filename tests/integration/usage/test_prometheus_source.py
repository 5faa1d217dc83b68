# SPDX-License-Identifier: Apache-2.0
"""GPU use read from a real Prometheus (Debian's package, its TSDB backfilled with ``promtool tsdb
create-blocks-from openmetrics``) equals GPU use read from the same OpenMetrics text as a file: the files'
evaluation on the grid is Prometheus's own, chunk by chunk or in one go, and its failures say what was wrong."""

from __future__ import annotations

import http.server
import math
import socket
import threading
import time

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller import usage
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import source
from ansible_collections.aligned.dra.tests.support.harnesses import prometheus

pytestmark = pytest.mark.skipif(not prometheus.available(), reason="Debian's prometheus package is not installed")

GIB = 2**30
TARGET = {"job": "aligned-dra-driver", "instance": "10.0.0.1:8089", "node": "node-a"}
GPU0 = {"device": "gpu-0", "gpu_uuid": "GPU-aaaa"}
GPU1 = {"device": "gpu-1", "gpu_uuid": "GPU-bbbb"}
SAMPLES = 720  # 3 hours of 15 s polls
SCRAPE = 15
# c3's used memory peaks once, on a sample exactly at a minute: which grid points see it measures the range's ends
PEAK_SAMPLE = 400
# c5 is unprepared after this sample (exactly at a minute): how long its last value lasts measures the lookback
LAST_C5 = 360


def stamp(start: int, k: int) -> float:
    """Sample k's time: every fourth exactly on a minute, the others off it by irregular fractions of a second."""
    return start + SCRAPE * k + (0 if k % 4 == 0 else ((k * 7) % 5) * 0.125 + 0.001 * (k % 3))


def wobble(k: int, scale: float, period: int = 97) -> float:
    """Values irregular enough that a step's maximum and mean differ from its last sample."""
    return scale * ((k * 7919) % period) / period


def claims() -> list[tuple[dict[str, str], dict[str, object]]]:
    """(labels, what the claim exports): c1 shared by two pods with SM samples on one, c3 whole and idle with
    one peak, c4 prepared (info) but never used, c5 unprepared halfway with a gap in its request series."""
    shared = {"namespace": "team-a", "claim": "c1", **GPU0}
    return [
        ({**shared, "pod": "p1"}, {"request": 10 * GIB, "limit": 20 * GIB, "used": 8 * GIB, "sm": True}),
        ({**shared, "pod": "p2"}, {"request": 10 * GIB, "limit": 20 * GIB, "used": 3 * GIB}),
        ({"namespace": "team-b", "claim": "c3", "pod": "p3", **GPU1}, {"request": 80 * GIB, "limit": 80 * GIB}),
        ({"namespace": "team-b", "claim": "c4", "pod": "p4", "device": "nic-0", "gpu_uuid": ""}, {"info_only": True}),
        (
            {"namespace": "team-c", "claim": "c5", "pod": "", **GPU0},
            {"request": 5 * GIB, "limit": 5 * GIB, "stop": True},
        ),
    ]


def sample_lines(name: str, labels: dict[str, str], start: int, value, keep=lambda k: True) -> list[str]:
    shown = ",".join(f'{key}="{val}"' for key, val in sorted({**TARGET, **labels}.items()))
    return [f"{name}{{{shown}}} {value(k)} {stamp(start, k)}" for k in range(SAMPLES) if keep(k)]


def openmetrics(start: int) -> str:
    """The driver's series as a Prometheus scraping it would hold them, and DCGM's, as OpenMetrics text."""
    families: dict[str, list[str]] = {}
    for labels, spec in claims():
        stop = (lambda k: k <= LAST_C5) if spec.get("stop") else (lambda k: True)
        info = {**labels, "pool": "node-a", "pci_bus_id": "0000:3b:00.0"}
        families.setdefault(usage.CLAIM_INFO, []).extend(sample_lines(usage.CLAIM_INFO, info, start, lambda k: 1, stop))
        if spec.get("info_only"):
            continue
        gap = (
            (lambda k, stop=stop: stop(k) and not 100 <= k < 150) if spec.get("stop") else stop
        )  # 12.5 min: beyond the lookback
        for key, name in (("request", usage.CLAIM_REQUEST), ("limit", usage.CLAIM_LIMIT)):
            families.setdefault(name, []).extend(sample_lines(name, labels, start, lambda k, v=spec[key]: v, gap))
        used = spec.get("used", 0)
        values = (
            (lambda k: 70 * GIB if k == PEAK_SAMPLE else 0)
            if not used
            else (lambda k, used=used: used + wobble(k, GIB))
        )
        families.setdefault(usage.CLAIM_USED, []).extend(sample_lines(usage.CLAIM_USED, labels, start, values, stop))
        if spec.get("sm"):  # NVML samples the process only now and then: absent, not 0, in between
            lines = sample_lines(usage.CLAIM_SM, labels, start, lambda k: wobble(k, 1.0, 89), lambda k: k % 3 != 1)
            families.setdefault(usage.CLAIM_SM, []).extend(lines)
    for gpu in (GPU0, GPU1):
        families.setdefault(usage.GPU_TOTAL, []).extend(sample_lines(usage.GPU_TOTAL, gpu, start, lambda k: 80 * GIB))
        # the GPU's own used memory: not read by the source, so ignored in files too
        families.setdefault("aligned_dra_gpu_memory_used_bytes", []).extend(
            sample_lines("aligned_dra_gpu_memory_used_bytes", gpu, start, lambda k: 11 * GIB)
        )
    dcgm = {"job": "dcgm-exporter", "namespace": "gpu-operator", "pod": "dcgm-exporter-x", "gpu": "0"}
    shown = ",".join(f'{k}="{v}"' for k, v in sorted({**dcgm, "UUID": "GPU-aaaa", "Hostname": "node-a"}.items()))
    families[usage.DCGM_UTIL] = [
        f"{usage.DCGM_UTIL}{{{shown}}} {round(wobble(k, 100))} {stamp(start, k)}" for k in range(SAMPLES)
    ]
    text = []
    for name, lines in families.items():
        text += [f"# HELP {name} {name}.", f"# TYPE {name} gauge", *lines]
    return "\n".join(text) + "\n# EOF\n"


@pytest.fixture(scope="module")
def backfilled(tmp_path_factory):
    """A Prometheus over the backfilled series, the same text as a file, and the samples' first time."""
    work = tmp_path_factory.mktemp("usage")
    start = (int(time.time()) // 3600 - 5) * 3600  # whole hours, well before the head block
    text = openmetrics(start)
    exported = work / "exported.om"
    exported.write_text(text, encoding="utf-8")
    prometheus.backfill(text, work / "tsdb")
    with prometheus.Prometheus(work) as server:
        yield server, str(exported), start


def same(left: usage.series.UsageData, right: usage.series.UsageData) -> None:
    """Equal window and series (labels, points, values to the last bit); the sources differ by design."""
    assert (left.start, left.end, left.step) == (right.start, right.end, right.step)
    assert left.series.keys() == right.series.keys()
    for metric in left.series:
        assert [s.labels for s in left.series[metric]] == [s.labels for s in right.series[metric]], metric
        assert left.series[metric] == right.series[metric], metric


def test_prometheus_chunk_by_chunk_and_in_one_go_reads_what_the_files_evaluation_gives(backfilled):
    server, exported, start = backfilled
    files = source.read_files({"files": [exported], "window": "4h", "step": "60s"})
    # the default end: the last sample (3 h in, at ...59:45 plus a fraction) rounded down to the minute
    assert files.end == start + 3 * 3600 - 60
    conf = {"prometheus": server.url, "window": "4h", "step": "60s", "end": files.end}
    chunked = source.read_prometheus({**conf, "max_points": 50})  # 241 points: 5 chunks per metric
    same(chunked, files)
    same(source.read_prometheus(conf), files)
    assert chunked.source == server.url and files.source == exported
    # every series is there: two pods of c1, c3, c5 (c4 has an info series only), SM of p1 only, one DCGM GPU
    assert [s.labels["claim"] for s in files.series[usage.CLAIM_USED]] == ["c1", "c1", "c3", "c5"]
    assert [s.labels["claim"] for s in files.series[usage.CLAIM_INFO]] == ["c1", "c1", "c3", "c4", "c5"]
    assert [s.labels["pod"] for s in files.series[usage.CLAIM_SM]] == ["p1"]
    assert [s.labels["UUID"] for s in files.series[usage.DCGM_UTIL]] == ["GPU-aaaa"]
    assert "__name__" not in files.series[usage.CLAIM_INFO][0].labels


def test_the_range_and_the_lookback_include_both_ends_as_prometheus_2_42_measures_them(backfilled):
    server, exported, start = backfilled
    data = source.read_prometheus(
        {"prometheus": server.url, "window": "4h", "step": "60s", "end": start + 3 * 3600 - 60, "max_points": 100}
    )

    def index(at: float) -> int:
        return round((at - data.start) / data.step)

    # the peak sample sits exactly on a grid time t: max_over_time(...[60s]) sees it at t and at t + 60 s
    (c3,) = [s for s in data.series[usage.CLAIM_USED] if s.labels["claim"] == "c3"]
    peak = index(stamp(start, PEAK_SAMPLE))
    assert [p for p, v in zip(c3.points, c3.values, strict=True) if v == 70 * GIB] == [peak, peak + 1]
    # c5's last sample sits exactly on a grid time: a plain selector still returns it 5 minutes later, not after
    (c5,) = [s for s in data.series[usage.CLAIM_INFO] if s.labels["claim"] == "c5"]
    assert c5.points[-1] == index(stamp(start, LAST_C5)) + 5
    # a gap of 12.5 minutes in c5's request: absent (not 0) from the first grid time more than 5 minutes after
    # its last sample before the gap to the last one before the gap's end
    (request,) = [s for s in data.series[usage.CLAIM_REQUEST] if s.labels["claim"] == "c5"]
    first = math.floor((stamp(start, 99) + 300 - data.start) / 60) + 1
    last = math.ceil((stamp(start, 150) - data.start) / 60) - 1
    assert last - first == 7
    assert [p for p in range(first - 10, last + 10) if p not in set(request.points)] == list(range(first, last + 1))


def test_a_step_beyond_prometheus_resolution_is_chunked_and_prometheus_own_refusal_surfaces(backfilled):
    server, exported, start = backfilled
    conf = {"window": "4h", "step": "1s", "end": start + 3 * 3600}  # 14,401 points per series
    same(source.read_prometheus({**conf, "prometheus": server.url}), source.read_files({**conf, "files": [exported]}))
    with pytest.raises(usage.UsageError) as failed:
        source.read_prometheus({**conf, "prometheus": server.url, "max_points": 20000})
    message = str(failed.value)
    assert "exceeded maximum resolution of 11,000 points per timeseries" in message
    assert f"Prometheus at {server.url} refused the query {usage.CLAIM_INFO}" in message


def test_a_match_that_selects_nothing_names_every_required_series(backfilled):
    server, _exported, start = backfilled
    with pytest.raises(usage.UsageError) as failed:
        source.read_prometheus(
            {"prometheus": server.url, "window": "4h", "end": start + 3 * 3600, "match": 'job="nothing"'}
        )
    message = str(failed.value)
    for metric in usage.REQUIRED:
        assert metric in message
    assert usage.CLAIM_SM not in message and usage.DCGM_UTIL not in message
    assert f'Prometheus at {server.url} (match job="nothing") over the 4h window' in message
    assert "--usage=on" in message
    # the same matcher on the driver's job finds them all
    found = source.read_prometheus(
        {"prometheus": server.url, "window": "4h", "end": start + 3 * 3600, "match": '{job="aligned-dra-driver"}'}
    )
    assert found.series[usage.DCGM_UTIL] == [] and len(found.series[usage.CLAIM_INFO]) == 5


def test_a_closed_port_is_named_with_its_url(backfilled):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(usage.UsageError, match=rf"Prometheus at {url} cannot be reached .*Connection refused"):
        source.read_prometheus({"prometheus": url, "timeout": 5})


class Refusing(http.server.BaseHTTPRequestHandler):
    """A fake Prometheus that refuses every request with 401, as an authenticating proxy in front of one does
    (Prometheus 2.42 itself offers basic authentication only)."""

    def _refuse(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Bearer realm="prometheus"')
        self.send_header("Content-Length", "13")
        self.end_headers()
        self.wfile.write(b"Unauthorized\n")

    do_GET = do_POST = _refuse

    def log_message(self, *args: object) -> None:  # keep pytest's output clean
        pass


def test_a_refused_token_names_its_file(tmp_path):
    token = tmp_path / "token"
    token.write_text("not-the-right-one\n")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        with pytest.raises(usage.UsageError) as failed:
            source.read_prometheus({"prometheus": url, "bearer_token_file": str(token)})
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert f"Prometheus at {url} refused the token of bearer_token_file {token} (HTTP 401 Unauthorized)" in str(
        failed.value
    )
