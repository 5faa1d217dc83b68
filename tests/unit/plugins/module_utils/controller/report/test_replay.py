# SPDX-License-Identifier: Apache-2.0
"""The replay section of the site report: the ratio, the chart that never shows less, the table, the file."""

from __future__ import annotations

import copy
import json
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
