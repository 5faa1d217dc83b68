# SPDX-License-Identifier: Apache-2.0
"""The replay section of the site report: the ratio, the chart that never shows less, the table, the file."""

from __future__ import annotations

import copy
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import result
from ansible_collections.aligned.dra.plugins.module_utils.controller.report import inputs, pages
from ansible_collections.aligned.dra.plugins.module_utils.controller.report import replay as section
from ansible_collections.aligned.dra.tests.support.sites.report_sites import plan_for, topology_of, write_site

FIXTURES = Path(__file__).resolve().parents[5] / "fixtures" / "replay"
EVIL = '"><script src="https://evil.example/x.js"></script><b x=\''


def replayed(mode: str = "timeline", plan: str = "plan-1.36.json") -> dict:
    """replay.json as playbooks/replay.yml writes it: both policies of the openb fixture on a plan."""
    runs = {
        policy: result.replay(str(FIXTURES / "openb-pods.csv"), plan=str(FIXTURES / plan), policy=policy, mode=mode)
        for policy in ("whole", "fractional")
    }
    return json.loads(json.dumps({"schema_version": 1, "site": "lab", "policies": runs}))


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parsed(markup: str) -> Tags:
    parser = Tags()
    parser.feed(str(markup))
    return parser


# ---------------------------------------------------------------- figures


def test_the_envelope_draws_each_interval_at_its_highest_value():
    # 0..10: 2 from t=0, a spike to 9 at t=3 for 1 s, 4 from t=4, 0 from t=8; two columns of 5 s
    times, values = [0, 3, 4, 8], [2, 9, 4, 0]
    assert section.envelope(times, values, 0, 10, 2) == [9, 4]
    assert section.envelope(times, values, 0, 10, 10) == [2, 2, 2, 9, 4, 4, 4, 4, 0, 0]
    # before its first point a series is 0; a trace of one instant is its last value
    assert section.envelope([5], [7], 0, 10, 2) == [0, 7]
    assert section.envelope([5], [7], 5, 5, 3) == [7, 7, 7]
    assert section.envelope([], [], 0, 10, 2) == [0, 0]


def test_the_ratio_of_pods_placed():
    replay = replayed()
    ratio = section.placed_ratio(replay)
    assert (ratio["fractional"], ratio["whole"]) == (9, 7) and ratio["ratio"] == 9 / 7
    one = copy.deepcopy(replay)
    del one["policies"]["whole"]
    assert section.placed_ratio(one) is None
    one = copy.deepcopy(replay)
    one["policies"]["whole"]["pods_placed"] = 0
    assert section.placed_ratio(one)["ratio"] is None


def test_the_time_chart_has_both_policies_occupied_and_requested_on_the_capacity():
    chart = section.time_chart(replayed())
    assert [(line["policy"], line["series"], line["dashed"]) for line in chart["lines"]] == [
        ("whole", "occupied", False),
        ("whole", "requested", True),
        ("fractional", "occupied", False),
        ("fractional", "requested", True),
    ]
    assert chart["capacity"] == "6" and chart["ticks"][-1]["text"] == "6" and chart["span"] == "16.7 min"
    # whole GPUs reach the capacity (6 of 6) at their peak: the path touches the capacity line
    whole = chart["lines"][0]["path"]
    assert f"V{chart['capacity_y']}" in whole
    assert section.time_chart(replayed("saturation")) is None


# ---------------------------------------------------------------- the section


def test_the_section_says_the_ratio_the_basis_and_the_fallback():
    html = str(pages.replay_html(replayed()))
    page = parsed(html)
    text = " ".join(page.text)
    assert "Pods placed, fractional / whole: 9 / 7 = 1.29" in text
    assert "6 GPUs (6000 milli-GPUs), time-weighted mean, over 16.7 min" in text
    assert "CPU and memory are not limited" in text
    assert [a["data-policy"] for t, a in page.tags if t == "tr" and "data-policy" in a] == ["whole", "fractional"]
    assert sum(1 for t, _a in page.tags if t == "path") == 4 and "openb-pods.csv" in text
    old = " ".join(parsed(pages.replay_html(replayed(plan="plan-1.35.json"))).text)
    assert "fractional (as whole)" in old and "renders fractional-gpu as the shared ResourceClaim" in old
    assert "= 1.00" in old


def test_saturation_shows_bars_at_the_stop():
    page = parsed(pages.replay_html(replayed("saturation")))
    bars = [(a["data-policy"], a["class"]) for t, a in page.tags if t == "rect" and "data-policy" in a]
    assert bars == [
        ("whole", "allocated"),
        ("whole", "requested"),
        ("fractional", "allocated"),
        ("fractional", "requested"),
    ]
    assert "pods not tried" in " ".join(page.text) and not [t for t, _a in page.tags if t == "path"]


def test_names_from_the_trace_are_escaped():
    replay = replayed()
    for run in replay["policies"].values():
        run["first_unplaced"]["name"] = EVIL
        run["trace"]["path"] = "/x/" + EVIL
        run["nodes"]["notes"] = [EVIL]
    html = str(pages.replay_html(replay))
    assert "<script" not in html and "evil.example" in html
    assert [t for t, _a in parsed(html).tags if t in ("script", "img")] == []


# ---------------------------------------------------------------- the file


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(schema_version=2), "expected a JSON object with schema_version 1"),
        (lambda r: r.update(policies={}), "'policies' must be an object"),
        (lambda r: r["policies"]["whole"].pop("pods_placed"), "policies.whole has no 'pods_placed'"),
        (lambda r: r["policies"]["whole"].update(gpus_total=-1), "policies.whole.gpus_total -1 is not a count"),
        (lambda r: r["policies"]["whole"].update(gpu_allocated_share="half"), "gpu_allocated_share 'half' is not"),
        (lambda r: r["policies"]["whole"]["trace"].pop("pods"), "policies.whole.trace has no 'pods'"),
        (lambda r: r["policies"]["whole"].update(first_unplaced={}), "first_unplaced has no 'name'"),
        (lambda r: r["policies"]["whole"]["timeline"]["time"].pop(), "must be of one length"),
        (lambda r: r["policies"]["whole"]["timeline"].update(time="x"), "must be lists of numbers"),
        (lambda r: r["policies"]["whole"].pop("timeline"), "policies.whole.timeline has no 'start'"),
    ],
)
def test_a_replay_file_the_report_cannot_read_is_refused(change, message):
    replay = replayed()
    change(replay)
    with pytest.raises(inputs.ReportError, match=message):
        inputs.validate_replay(replay, "lab/replay.json")


def test_the_site_page_shows_the_replay_after_the_plan(tmp_path):
    nodes = {"a": topology_of("vm-flat")}
    write_site(tmp_path, "lab", nodes)
    (tmp_path / "lab" / "plan.json").write_text(json.dumps(plan_for("lab", nodes)))
    without = pages.build_reports(str(tmp_path))["files"]["lab/report.html"]
    assert 'class="replay"' not in without
    (tmp_path / "lab" / "replay.json").write_text(json.dumps(replayed()))
    page = pages.build_reports(str(tmp_path))["files"]["lab/report.html"]
    assert page.index("Claim templates (planner)") < page.index("Replay of a workload trace") < page.index("<h2>Nodes")
    (tmp_path / "lab" / "replay.json").write_text('{"schema_version": 1}')
    with pytest.raises(inputs.ReportError, match=r"lab/replay.json: 'policies' must be an object"):
        pages.build_reports(str(tmp_path))


def thin_replay(tmp_path, mode="saturation"):
    trace = tmp_path / "t.csv"
    trace.write_text("name,submit,gpus,gpu_limit\na,0,0.25,0.5\nb,1,0.25,\nc,2,0.5,1\nd,3,0.25,0.5\n")
    nodes = tmp_path / "n.csv"
    nodes.write_text("sn,cpu_milli,memory_mib,gpu,model\nn1,64000,1000000,1,V100\n")
    runs = {
        policy: result.replay(str(trace), "csv", nodes=str(nodes), policy=policy, mode=mode)
        for policy in ("thin", "whole", "fractional")
    }
    return json.loads(json.dumps({"schema_version": 1, "site": "lab", "policies": runs}))


@pytest.mark.parametrize("mode", ["saturation", "timeline"])
def test_the_thin_policy_shows_memory_promised_against_guaranteed(tmp_path, mode):
    replay = inputs.validate_replay(thin_replay(tmp_path, mode))
    page = parsed(pages.replay_html(replay))
    assert [a["data-policy"] for t, a in page.tags if t == "tr" and "data-policy" in a] == [
        "whole",
        "fractional",
        "thin",
        "thin",  # the row of the thin table
    ]
    text = " ".join(page.text)
    assert "GPU memory promised" in text and "evicting pods" in text
    if mode == "saturation":
        assert "1.75" in text and "175.0 %" in text and "at saturation" in text


def test_bad_thin_figures_are_refused(tmp_path):
    replay = thin_replay(tmp_path)
    replay["policies"]["thin"]["thin"]["promised_milli"] = "<b>"
    with pytest.raises(inputs.ReportError, match=r"policies\.thin\.thin\.promised_milli '<b>' is not a count"):
        inputs.validate_replay(replay)
    del replay["policies"]["thin"]["thin"]["basis"]
    with pytest.raises(inputs.ReportError, match=r"policies\.thin\.thin has no 'basis'"):
        inputs.validate_replay(replay)


# ---------------------------------------------------------------- on measured use

GI = 2**30
# docs/replay.md's worked example: four quarter-GPU pods on one node of 4 GPUs of 80 GiB; b and c burst at 1800 s
WORKED = (
    "name,submit,end,gpus,priority\na,0,3600,0.25,100\nb,0,3600,0.25,0\nc,0,3600,0.25,0\nd,0,3600,0.25,0\n",
    "pod,timestamp,memory_used_bytes\n"
    + "".join(f"{pod},0,{15 * GI}\n" for pod in "abcd")
    + f"a,1800,{35 * GI}\nb,1800,{30 * GI}\nc,1800,{30 * GI}\n"
    + "".join(f"{pod},2700,{15 * GI}\n" for pod in "abc"),
    "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,4,\n",
)
# GPUs of 1000 bytes, 2 of them: b bursts to 700 at 10 s; evicted (limit above 600), it leaves room on GPU 0 for c
# at 20 s, so thin needs one GPU, else two (fractional, by peak use, needs two)
FREED = (
    "name,submit,end,gpus\na,0,100,0.5\nb,0,100,0.5\nc,20,100,0.5\n",
    "pod,timestamp,memory_used_bytes\na,0,400\nb,0,400\nb,10,700\nc,20,300\n",
    "sn,cpu_milli,memory_mib,gpu,model\nn1,64000,262144,2,\n",
)


def measured_replay(tmp_path: Path, files: tuple[str, str, str], factors: list, gpu_memory: str, **options) -> dict:
    """replay.json of the three policies replayed on measured use, thin once more per burst factor."""
    paths = []
    for name, text in zip(("trace", "usage", "nodes"), files, strict=True):
        paths.append(tmp_path / f"{name}.csv")
        paths[-1].write_text(text)
    runs = {
        policy: result.replay(
            str(paths[0]),
            "csv",
            nodes=str(paths[2]),
            policy=policy,
            mode="timeline",
            usage=str(paths[1]),
            gpu_memory=gpu_memory,
            **options,
            **({"burst_factors": factors} if policy == "thin" else {}),
        )  # fmt: skip
        for policy in ("whole", "fractional", "thin")
    }
    return json.loads(json.dumps({"schema_version": 1, "site": "lab", "policies": runs}))


def cells(page: str, figure: str) -> list[str]:
    """The measured table's cells of one figure (a row), a policy each."""
    row = re.search(rf'<tr data-figure="{figure}">(.*?)</tr>', page)
    assert row, figure
    return re.findall(r"<td[^>]*>(.*?)</td>", row.group(1))


def test_the_figures_on_measured_use_come_from_the_result(tmp_path):
    replay = inputs.validate_replay(measured_replay(tmp_path, WORKED, [1.0, 1.5, 2.0], "80Gi"))
    thin = replay["policies"]["thin"]["measured"]
    page = str(pages.replay_html(replay))
    assert re.findall(r'<th data-policy="([^"]+)"', page) == ["whole", "fractional", "thin"]
    assert cells(page, "evictions") == ["0", "0", str(thin["evictions"])] == ["0", "0", "2"]
    assert cells(page, "per_day") == ["0.0", "0.0", f"{thin['evictions_per_day']:.1f}"] == ["0.0", "0.0", "48.0"]
    assert cells(page, "gpus_peak") == ["4 of 4", "2 of 4", "1 of 4"]
    assert cells(page, "placed") == ["4 of 4"] * 3 and cells(page, "pods_evicted")[2] == "2"
    # 50 GiB used on average of 320 GiB (15.6 %), 60 at the peak; 115 GiB promised at the peak
    assert cells(page, "used_mean")[2] == "15.6 %" and cells(page, "used_peak")[2] == "18.8 %"
    assert cells(page, "promised_peak")[2] == f"{115 / 320 * 100:.1f} %"
    assert cells(page, "request") == ["whole GPUs", "peak use", "the trace&#39;s request"]
    assert cells(page, "limit")[2] == "its largest sample" and cells(page, "margin") == ["5 %"] * 3
    assert cells(page, "gpu_memory") == ["80 GiB (gpu_memory)"] * 3
    assert "capacity, 320 GiB" in page and "the mean over 1.0 h" in page
    # b and c dropped; the GPU fits after the evictions, but b's went from 110 GiB of use on an 80 GiB GPU
    assert cells(page, "pods_dropped") == ["0", "0", "2"] and cells(page, "over_memory") == ["none"] * 3
    assert cells(page, "evictions_over_memory") == ["0", "0", "1"] and cells(page, "reserve") == ["0 GiB"] * 3
    note = re.search(r'<p class="muted evictions-bound">(.*?)</p>', page)
    assert note and note.group(1).startswith("Replayed without a GPU reserve (whole, fractional, thin)")


def test_a_reserve_and_a_gpu_over_its_memory_show(tmp_path):
    # two halves of a GPU of 1000 bytes at 495 each at 10 s, with 40 bytes of reserve: over memory until 20 s,
    # under thin (fractional packs them on one GPU too, by their peaks 495 and 300); whole keeps a GPU each
    files = (
        "name,submit,end,gpus\na,0,100,0.5\nb,0,100,0.5\n",
        "pod,timestamp,memory_used_bytes\na,0,300\nb,0,300\na,10,495\nb,10,495\na,20,300\nb,20,300\n",
        WORKED[2],
    )
    page = str(
        pages.replay_html(inputs.validate_replay(measured_replay(tmp_path, files, [1.0], "1000", gpu_reserve=40)))
    )
    assert cells(page, "over_memory") == [
        "none",
        "1 step, 10 s of GPU time, 2 pods",
        "1 step, 10 s of GPU time, 2 pods",
    ]
    assert cells(page, "reserve") == ["0 GiB"] * 3  # 40 bytes, in GiB to a tenth
    assert 'class="muted evictions-bound"' not in page


def points_of(page: str) -> list[dict]:
    """The attributes of the factor chart's points."""
    return [a for t, a in parsed(page).tags if t == "circle"]


def test_the_chart_puts_each_factor_where_its_numbers_say(tmp_path):
    replay = measured_replay(tmp_path, FREED, [1.5, 1.0, 1.2], "1000")
    factors = replay["policies"]["thin"]["thin_factors"]
    chart = section.factor_chart(sorted(factors, key=lambda f: f["factor"]))
    x_axis, y_axis = chart["x_axis"], chart["y_axis"]
    for point, factor in zip(chart["points"], sorted(factors, key=lambda f: f["factor"]), strict=True):
        x = x_axis["low"] + (float(point["x"]) - chart["left"]) / (chart["right"] - chart["left"]) * (
            x_axis["high"] - x_axis["low"]
        )
        y = y_axis["low"] + (chart["bottom"] - float(point["y"])) / (chart["bottom"] - chart["top"]) * (
            y_axis["high"] - y_axis["low"]
        )
        assert (round(x, 3), round(y, 1)) == (factor["gpus_saved"], factor["evictions_per_day"])
    # by hand: x from 0 to 1 GPU saved, y from 0 to 1000 a day; x1.0 saves none and evicts none, x1.2 and x1.5
    # evict b (864 a day) and so save its GPU
    assert (x_axis, y_axis) == ({"low": 0, "high": 1}, {"low": 0, "high": 1000})
    assert [(p["label"], p["x"], p["y"]) for p in chart["points"]] == [
        ("×1", "56.0", "214.0"),
        ("×1.2", "416.0", f"{214 - 0.864 * 200:.1f}"),
        ("×1.5", "416.0", f"{214 - 0.864 * 200:.1f}"),
    ]
    assert chart["path"] == "M56.0 214.0L416.0 41.2L416.0 41.2"  # in factor order, not the order given
    assert [label["text"] for label in chart["labels"]] == ["×1", "×1.2, ×1.5"]  # one spot, one label
    assert [t["text"] for t in chart["x_ticks"]] == ["0", "1"] and chart["y_ticks"][-1]["text"] == "1000"
    page = str(pages.replay_html(replay))
    assert [a["data-factor"] for a in points_of(page)] == ["1", "1.2", "1.5"]
    assert 'aria-label="Evictions per day against GPUs saved, per burst factor, policy thin"' in page
    rows = re.findall(r'<tr data-factor="([^"]+)"[^>]*>(.*?)</tr>', page)
    # b is dropped under x1.2 and x1.5: the GPU it frees for c is marked, not counted as a saving unsaid
    assert [(f, re.findall(r"<td[^>]*>(.*?)</td>", r)) for f, r in rows] == [
        ("1", ["×1", "2", "0", "0", "0.0", "0", "0", "0"]),
        ("1.2", ["×1.2", "1", "1<sup>*</sup>", "1", "864.0", "1", "1", "0"]),
        ("1.5", ["×1.5", "1", "1<sup>*</sup>", "1", "864.0", "1", "1", "0"]),
    ]
    assert [p["open"] for p in chart["points"]] == [False, True, True]
    assert [a.get("fill") for a in points_of(page)] == [section.COLOURS["thin"], "#ffffff", "#ffffff"]
    assert "GPUs saved move only through evicted pods" in page and "which needs 2 GPUs at the peak" in page
    assert "<sup>*</sup> GPUs saved partly by pods dropped or never started" in page


def test_a_factor_whose_pods_never_started_is_marked_and_an_older_file_is_not(tmp_path):
    replay = measured_replay(tmp_path, WORKED, [1.0, 2.0], "80Gi")
    factors = replay["policies"]["thin"]["thin_factors"]
    # x2.0 drops b and c; x1.0 drops none and, made to leave a pod unstarted, is marked for that alone
    assert [(f["pods_dropped"], section.partly_unplaced(f)) for f in factors] == [(0, False), (2, True)]
    factors[0].update(all_placed=False, pods_unstarted=1)
    view = section.factor_view("thin", {"thin_factors": factors})
    assert [(r["partly"], r["pods_unstarted"]) for r in view["rows"]] == [(True, "1"), (True, "0")]
    for factor in factors:  # a replay.json written before these figures: nothing to mark, nothing to show
        for key in ("all_placed", "pods_dropped", "pods_unstarted"):
            factor.pop(key)
    for run in replay["policies"].values():
        for key in ("pods_dropped", "over_memory", "evictions_bound"):
            run["measured"].pop(key, None)
        run["measured"]["rules"].pop("gpu_reserve_bytes")
    page = str(pages.replay_html(inputs.validate_replay(replay)))
    assert "partly" not in page and "<sup>*</sup>" not in page and "evictions-bound" not in page
    for figure in ("reserve", "pods_dropped", "over_memory", "evictions_over_memory"):
        assert cells(page, figure) == ["-"] * 3, figure
    assert [a.get("fill") for a in points_of(page)] == [section.COLOURS["thin"]] * 2
    assert re.findall(r'<tr data-factor="2">(.*?)</tr>', page)[0].endswith(
        '<td class="num">-</td><td class="num">-</td>'
    )


def test_one_factor_without_evictions_and_a_trace_without_a_window(tmp_path):
    replay = measured_replay(tmp_path, WORKED, [1.0], "80Gi")
    chart = section.factor_chart(replay["policies"]["thin"]["thin_factors"])
    # one point, no eviction: the y axis still spans a unit, the point sits on 0, no line joins it to anything
    assert chart["y_axis"] == {"low": 0, "high": 1} and chart["path"] is None
    assert [(p["x"], p["y"]) for p in chart["points"]] == [(f"{chart['right']:.1f}", f"{chart['bottom']:.1f}")]
    instant = ("name,submit,gpus\na,0,0.5\n", "pod,timestamp,memory_used_bytes\na,0,100\n", WORKED[2])
    (tmp_path / "one").mkdir()
    replay = measured_replay(tmp_path / "one", instant, [1.0, 2.0], "1000")
    assert section.factor_chart(replay["policies"]["thin"]["thin_factors"]) is None
    page = str(pages.replay_html(inputs.validate_replay(replay)))
    assert "No chart: the trace has no window" in page and not points_of(page)
    assert cells(page, "per_day") == ["-"] * 3 and "<td>×2</td>" in page


def test_a_replay_without_measured_use_renders_as_before(tmp_path):
    replay = measured_replay(tmp_path, WORKED, [1.0, 2.0], "80Gi")
    page = str(pages.replay_html(replay))
    for run in replay["policies"].values():
        run.pop("measured")
        run.pop("thin_factors", None)
    before = str(pages.replay_html(inputs.validate_replay(replay)))
    assert "<h4>" not in before and "<circle" not in before and 'class="measured"' not in before
    assert page.startswith(before[: before.index("</section>")]) and "<h4>On measured use</h4>" in page
    assert "On measured use" not in str(pages.replay_html(replayed()))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t["measured"]["rules"].pop("limit"), r"measured\.rules has no 'limit'"),
        (lambda t: t["measured"].update(evictions=-1), r"measured\.evictions -1 is not a count"),
        (lambda t: t["measured"].update(evictions_per_day="x"), r"measured\.evictions_per_day 'x' is not a number"),
        (lambda t: t["measured"]["memory"].pop("used_bytes"), r"measured\.memory\.used_bytes must be an object"),
        (lambda t: t["measured"]["gpu_memory"].update(source=1), r"measured\.gpu_memory\.source 1 is not a text"),
        (lambda t: t.update(thin_factors={}), r"thin_factors must be a list"),
        (lambda t: t["thin_factors"][0].pop("gpus_saved"), r"thin_factors\[0\] has no 'gpus_saved'"),
        (lambda t: t["thin_factors"][1].update(gpus_saved=math.inf), r"thin_factors\[1\]\.gpus_saved inf is not a"),
        (
            lambda t: t["thin_factors"][1].update(evictions_per_day=math.nan),
            r"thin_factors\[1\]\.evictions_per_day nan is not a finite",
        ),
    ],
)
def test_bad_figures_on_measured_use_are_refused_by_name(tmp_path, change, message):
    replay = measured_replay(tmp_path, WORKED, [1.0, 2.0], "80Gi")
    change(replay["policies"]["thin"])
    with pytest.raises(inputs.ReportError, match=r"lab/replay\.json: policies\.thin\." + message):
        inputs.validate_replay(replay, "lab/replay.json")


def test_the_site_page_with_measured_use_is_valid_html_and_escapes_the_rules(tmp_path):
    import html5lib

    nodes = {"a": topology_of("vm-flat")}
    write_site(tmp_path, "lab", nodes)
    (tmp_path / "lab" / "plan.json").write_text(json.dumps(plan_for("lab", nodes)))
    (tmp_path / "data").mkdir()
    replay = measured_replay(tmp_path / "data", FREED, [1.0, 1.5], "1000")
    replay["policies"]["thin"]["measured"]["rules"]["request"] = EVIL
    (tmp_path / "lab" / "replay.json").write_text(json.dumps(replay))
    page = pages.build_reports(str(tmp_path))["files"]["lab/report.html"]
    assert page.count('<circle class="factor') == 2 and "<h4>On measured use</h4>" in page
    assert "<script" not in page and "evil.example" in page
    parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
    parser.parse(page)  # raises on the first parse error
