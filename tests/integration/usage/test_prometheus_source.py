# SPDX-License-Identifier: Apache-2.0
"""GPU use read from a real Prometheus (Debian's package, its TSDB backfilled with ``promtool tsdb
create-blocks-from openmetrics``) equals GPU use read from the same OpenMetrics text as a file: the files'
evaluation on the grid is Prometheus's own, chunk by chunk or in one go, chunks halved under a small
``--query.max-samples``, and its failures (a refused token, a wrong path, a closed port) say what was wrong.

Two Prometheus processes: one open, one asking basic authentication with ``--query.max-samples=300``."""

from __future__ import annotations

import base64
import math
import socket
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller import usage
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage import source, summary
from ansible_collections.aligned.dra.tests.support.harnesses import prometheus

pytestmark = pytest.mark.skipif(not prometheus.available(), reason="Debian's prometheus package is not installed")

GIB = 2**30
TARGET = {"job": "aligned-dra-driver", "instance": "10.0.0.1:8089", "node": "node-a"}
GPU0 = {"device": "gpu-0", "gpu_uuid": "GPU-aaaa"}
GPU1 = {"device": "gpu-1", "gpu_uuid": "GPU-bbbb"}
GPU2 = {"device": "gpu-2", "gpu_uuid": "GPU-cccc"}
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
    one peak, c4 a NIC (info, no GPU), c5 unprepared halfway with a gap in its request series and DCGM's GPU,
    c6 a GPU prepared (info) but never sampled."""
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
        ({"namespace": "team-c", "claim": "c6", "pod": "p6", **GPU2}, {"info_only": True}),
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
    # NVML failing for 15 minutes: the driver's gauge (no label but the scrape's) drops to 0
    families[usage.USAGE_AVAILABLE] = sample_lines(
        usage.USAGE_AVAILABLE, {}, start, lambda k: 0 if 300 <= k < 360 else 1
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
    assert [s.labels["claim"] for s in files.series[usage.CLAIM_INFO]] == ["c1", "c1", "c3", "c4", "c5", "c6"]
    assert [s.labels["pod"] for s in files.series[usage.CLAIM_SM]] == ["p1"]
    assert [s.labels["UUID"] for s in files.series[usage.DCGM_UTIL]] == ["GPU-aaaa"]
    assert "__name__" not in files.series[usage.CLAIM_INFO][0].labels
    (available,) = files.series[usage.USAGE_AVAILABLE]
    assert available.labels == TARGET and 0.0 in available.values and 1.0 in available.values


def test_an_instant_query_of_a_range_vector_saved_as_a_file_reads_as_the_openmetrics_text(backfilled, tmp_path):
    """docs/utilization.md's export: ``/api/v1/query`` of ``{__name__=~"..."}[window + 5m]`` at ``end``, the raw
    samples (lookback included), saved as Prometheus answers it, reads as the text Prometheus was filled from."""
    server, exported, start = backfilled
    conf = {"window": "4h", "step": "60s", "end": start + 3 * 3600 - 60}
    names = "aligned_dra_claim_.*|aligned_dra_gpu_memory_total_bytes|aligned_dra_usage_available|DCGM_FI_DEV_GPU_UTIL"
    form = {"query": f'{{__name__=~"{names}"}}[4h5m]', "time": str(conf["end"])}
    with urllib.request.urlopen(f"{server.url}/api/v1/query?{urllib.parse.urlencode(form)}", timeout=30) as answer:
        saved = tmp_path / "range-vector.json"
        saved.write_bytes(answer.read())
    assert saved.read_text().startswith('{"status":"success","data":{"resultType":"matrix"')
    same(source.read_files({**conf, "files": [str(saved)]}), source.read_files({**conf, "files": [exported]}))


def test_the_summary_of_what_prometheus_answered_joins_dcgm_and_leaves_a_claim_never_sampled_unknown(backfilled):
    server, _exported, start = backfilled
    data = source.read_prometheus({"prometheus": server.url, "window": "4h", "end": start + 3 * 3600 - 60})
    (c6,) = [s for s in data.series[usage.CLAIM_INFO] if s.labels["claim"] == "c6"]  # info only: no use series
    assert c6.labels["gpu_uuid"] == "GPU-cccc" and not any(
        s.labels.get("claim") == "c6" for name in usage.METRICS if name != usage.CLAIM_INFO for s in data.series[name]
    )
    claims = {claim["claim"]: claim for claim in summary.summarise(data, {}, {})["claims"]}
    assert claims["c5"]["activity_source"] == "dcgm"  # no SM of its own: DCGM's GPU-aaaa, joined on UUID
    assert claims["c6"]["status"] == "unknown" and claims["c6"]["hours"]["idle"] == 0


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


def test_match_selects_the_driver_series_and_dcgm_match_dcgm_s(backfilled):
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
    # the driver's job finds all of the driver's series, and leaves DCGM's (another job) to dcgm_match
    conf = {"prometheus": server.url, "window": "4h", "end": start + 3 * 3600, "match": '{job="aligned-dra-driver"}'}
    found = source.read_prometheus(conf)
    assert len(found.series[usage.CLAIM_INFO]) == 6 and len(found.series[usage.USAGE_AVAILABLE]) == 1
    assert [s.labels["UUID"] for s in found.series[usage.DCGM_UTIL]] == ["GPU-aaaa"]
    assert source.read_prometheus({**conf, "dcgm_match": 'job="dcgm-exporter",UUID="GPU-aaaa"'}) == found
    filtered = source.read_prometheus({**conf, "dcgm_match": 'UUID="GPU-zzzz"'})
    assert (
        filtered.series[usage.DCGM_UTIL] == [] and filtered.series[usage.CLAIM_USED] == found.series[usage.CLAIM_USED]
    )


def test_a_closed_port_is_named_with_its_url(backfilled):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(usage.UsageError, match=rf"Prometheus at {url} cannot be reached .*Connection refused"):
        source.read_prometheus({"prometheus": url, "timeout": 5})


def test_a_path_that_is_not_the_api_base_is_named_as_such(backfilled):
    server, _exported, start = backfilled
    url = f"{server.url}/nothing"
    with pytest.raises(usage.UsageError) as failed:
        source.read_prometheus({"prometheus": url, "window": "4h", "end": start + 3 * 3600})
    assert str(failed.value) == (
        f"aligned_dra_usage: Prometheus at {url} answered HTTP 404 Not Found to the query {usage.CLAIM_INFO}: is "
        f"{url} Prometheus's base URL (its API at {url}/api/v1)? 404 page not found"
    )


USER, PASSWORD = "usage-reader", "prometheus-reader"
# bcrypt of PASSWORD at cost 4 (Prometheus checks it on every request: the cheapest cost keeps that fast), used
# where the bcrypt package is not installed
PASSWORD_HASH = "$2b$04$yGQkHVa7nt.U4TVEb679rOG56/QuxfTiwc3imwuhNSkfYTwXUJXuK"
BASIC = {"Authorization": "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()}
CLAIMS = 20  # 20 series x 200 points over --query.max-samples; one series's 400 samples in one step too
MAX_SAMPLES = 300


def crowd(start: int) -> str:
    """20 claims over 205 minutes, a sample every 30 s (off the minute by a quarter second now and then)."""
    lines = {name: [] for name in usage.REQUIRED}
    for k in range(410):
        at = start + 30 * k + (0.25 if k % 3 else 0)
        lines[usage.GPU_TOTAL].append(f'{usage.GPU_TOTAL}{{gpu_uuid="GPU-0"}} {80 * GIB} {at}')
        for n in range(CLAIMS):
            labels = f'claim="k{n:02d}",gpu_uuid="GPU-0",namespace="team-a",pod="p{n:02d}"'
            for name, value in ((usage.CLAIM_INFO, 1), (usage.CLAIM_REQUEST, GIB), (usage.CLAIM_LIMIT, 2 * GIB)):
                lines[name].append(f"{name}{{{labels}}} {value} {at}")
            lines[usage.CLAIM_USED].append(f"{usage.CLAIM_USED}{{{labels}}} {wobble(k * (n + 1), GIB)} {at}")
    text = [f"# TYPE {name} gauge\n" + "\n".join(family) for name, family in lines.items()]
    return "\n".join(text) + "\n# EOF\n"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A second Prometheus: basic authentication (--web.config.file) and --query.max-samples=300, over
    :func:`crowd`'s series; the same text as a file; the window's end (the 200th minute)."""
    work = tmp_path_factory.mktemp("guarded")
    start = (int(time.time()) // 3600 - 6) * 3600
    text = crowd(start)
    exported = work / "crowd.om"
    exported.write_text(text, encoding="utf-8")
    prometheus.backfill(text, work / "tsdb")
    try:
        import bcrypt  # optional: the fixed hash serves where it is not installed
    except ImportError:
        hashed = PASSWORD_HASH
    else:
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    web = work / "web.yml"
    web.write_text(yaml.safe_dump({"basic_auth_users": {USER: hashed}}), encoding="utf-8")
    flags = [f"--web.config.file={web}", f"--query.max-samples={MAX_SAMPLES}"]
    with prometheus.Prometheus(work, flags=flags, headers=BASIC) as server:
        yield server, str(exported), start + 205 * 60


def test_chunks_over_the_sample_limit_are_halved_and_read_what_the_files_give(guarded):
    server, exported, end = guarded
    conf = {"window": "200m", "step": "60s", "end": end}
    # one query for the whole window is refused: the limit is what the read below works around
    with pytest.raises(prometheus.PrometheusError, match=source.TOO_MANY_SAMPLES):
        server.api("query_range", query=usage.CLAIM_INFO, start=end - 199 * 60, end=end, step="60s")
    data = source.read_prometheus({**conf, "prometheus": server.url, "headers": BASIC})
    same(data, source.read_files({**conf, "files": [exported]}))
    assert len(data.series[usage.CLAIM_USED]) == CLAIMS and data.steps == 200
    assert all(list(s.points) == list(range(200)) for s in data.series[usage.CLAIM_USED])
    # one point that alone loads more samples than the limit: the query, the point and the cures named
    with pytest.raises(usage.UsageError) as failed:
        source.read_prometheus({**conf, "step": "200m", "prometheus": server.url, "headers": BASIC})
    assert str(failed.value) == (
        f"aligned_dra_usage: Prometheus at {server.url} refused the query max_over_time({usage.CLAIM_USED}[3h20m]) "
        f"even for one point ({source.rfc3339(end * 1000)}, step 3h20m): {source.TOO_MANY_SAMPLES} in query "
        "execution; ask for a smaller step or window, or run Prometheus with a larger --query.max-samples"
    )


def test_a_refused_token_or_no_credentials_name_bearer_token_file(guarded, tmp_path):
    server, _exported, end = guarded
    token = tmp_path / "token"
    token.write_text("not-the-right-one\n")
    conf = {"prometheus": server.url, "window": "200m", "end": end}
    with pytest.raises(usage.UsageError) as failed:
        source.read_prometheus({**conf, "bearer_token_file": str(token)})
    assert str(failed.value) == (
        f"aligned_dra_usage: Prometheus at {server.url} refused the token of bearer_token_file {token} "
        "(HTTP 401 Unauthorized); set bearer_token_file or headers to credentials it accepts"
    )
    with pytest.raises(usage.UsageError) as failed:
        source.read_prometheus(conf)
    assert str(failed.value) == (
        f"aligned_dra_usage: Prometheus at {server.url} refused the request's headers (HTTP 401 Unauthorized); "
        "set bearer_token_file or headers to credentials it accepts"
    )
