# SPDX-License-Identifier: Apache-2.0
"""The "Used versus allocated" section: figures as the summary gives them, the chart, unknowns, the advice.

The ``usage`` fixture (conftest.py) is the hand-computed window of ``usage/test_summary.py``: team-a holds
three whole GPUs (one active, one idle, one never measured: unknown) at every bucket, "(no team)" a quarter
of a GPU active for five buckets and idle for five.
"""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import inputs, pages
from ansible_collections.aligned.dra.plugins.module_utils.controller.report import usage as section

EVIL = '"><script src="https://evil.example/x.js"></script><b x=\''


class Tags(HTMLParser):
    """Start tags with their attributes, and each ``<title>``'s text with the tag it belongs to."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.titles: list[tuple[dict, str]] = []
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.titles.append((self.tags[-2][1], data))


def parsed(markup) -> Tags:
    parser = Tags()
    parser.feed(str(markup))
    return parser


def y_at(path: str, x: float) -> float:
    """The height (y) of a step path at column ``x``: its first horizontal run over ``x`` (the top line)."""
    here_x = here_y = 0.0
    for command, argument in re.findall(r"([MHVZ])([^MHVZ]*)", path):
        if command == "M":
            here_x, here_y = map(float, argument.split())
        elif command == "H":
            end = float(argument)
            if min(here_x, end) <= x < max(here_x, end):
                return here_y
            here_x = end
        elif command == "V":
            here_y = float(argument)
    raise AssertionError(f"no run of {path} over {x}")


def chart_paths(html) -> dict[tuple[str, str], str]:
    """``{(team, class): d}`` of the chart's paths; each pair must be drawn once."""
    paths = [(a["data-team"], a["class"], a["d"]) for t, a in parsed(html).tags if t == "path"]
    found = {(team, cls): d for team, cls, d in paths}
    assert len(found) == len(paths)
    return found


# ---------------------------------------------------------------- figures


def test_the_tables_show_the_summary_figures_as_they_are(usage):
    view = section.usage_view(usage)
    rows = {row["name"]: row for row in view["teams"]}
    assert sorted(rows) == sorted(usage["teams"])
    for name, row in [*rows.items(), ("all teams", view["totals"])]:
        source = usage["totals"] if name == "all teams" else usage["teams"][name]
        assert row["gpu_hours"] == {k: section.hours_text(v) for k, v in source["gpu_hours"].items()}
        # unknown GPU-hours may have been idle: the share is shown as a lower bound where there are some
        bound = "\u2265 " if source["idle_share_is_lower_bound"] else ""
        assert row["idle_share"] == bound + section.share_text(source["idle_share"])
        assert row["unknown_hours_share"] == section.share_text(source["unknown_hours_share"])
        assert row["memory"] == section.share_text(source["memory_used_over_requested"])
        assert row["peak"] == section.gib_text(source["memory_peak_bytes"])
        assert (row["claims"], row["measured"], row["unknown"]) == (
            source["claims"],
            source["claims_measured"],
            source["claims_unknown"],
        )
    # team-a by hand: 30 points of whole GPUs, 10 each active, idle (a and e) and unknown (c); peak 10 GiB
    team = rows["team-a"]
    assert (team["idle_share"], team["unknown_hours_share"], team["peak"]) == ("\u2265 33.3 %", "33.3 %", "10.0")
    assert team["gpu_hours"] == {"allocated": "0.50", "active": "0.17", "idle": "0.17", "unknown": "0.17"}
    assert [row["name"] for row in view["templates"]] == ["(unknown)", "fractional-gpu"]
    assert view["window"] == {
        "start": "1970-01-01 00:00 UTC",
        "end": "1970-01-01 00:09 UTC",
        "step": "1.0 min",
        "hours": "0.17",
        "points": 10,
    }
    assert view["threshold"] == "5.0 %" and view["source"] == "test"


def test_what_is_not_known_reads_unknown_never_0(usage):
    team = usage["teams"]["team-a"]
    team.update(claims_without_size=3, idle_share=None, unknown_hours_share=None, memory_used_over_requested=None)
    team.update(memory_peak_bytes=None, gpu_hours=dict.fromkeys(team["gpu_hours"], 0.0))
    usage["claims"][0]["node"] = None
    row = section.aggregate_row("team-a", team)
    assert set(row["gpu_hours"].values()) == {"unknown"}
    assert [row[k] for k in ("idle_share", "unknown_hours_share", "memory", "peak")] == ["unknown"] * 4
    html = pages.utilization_html(inputs.validate_utilization({"schema_version": 1, "site": "s", "usage": usage}))
    cells = re.search(r'<tr data-team="team-a">(.*?)</tr>', str(html)).group(1)
    assert "0.00" not in cells and cells.count(">unknown<") == 8 and "3 of unknown size" in cells
    # a claim on a node the series did not name
    assert section.usage_view(usage)["idle"]["rows"][0]["node"] == "unknown"
    # one claim of three of unknown size: the others' GPU-hours are a lower bound
    some = section.aggregate_row("team-a", dict(usage["teams"]["(no team)"], claims=3, claims_without_size=1))
    assert some["gpu_hours"]["allocated"] == "\u2265 " + section.hours_text(
        usage["teams"]["(no team)"]["gpu_hours"]["allocated"]
    )
    # a team of claims of unknown size only has no timeline: named, not drawn; without any, no chart
    del usage["timeline"]["teams"]["team-a"]
    html = str(pages.utilization_html({"schema_version": 1, "usage": usage}))
    assert "Not drawn, every claim of unknown size: team-a." in html and 'data-team="team-a" d=' not in html
    usage["timeline"]["teams"].clear()
    html = str(pages.utilization_html({"schema_version": 1, "usage": usage}))
    assert "<svg" not in html and "No claim of known size: nothing to draw over time." in html


def test_the_claims_with_the_most_idle_gpu_hours_come_first_twenty_at_most(usage):
    template = next(c for c in usage["claims"] if c["claim"] == "whole-a")
    usage["claims"] = []
    for number in range(25):
        claim = copy.deepcopy(template)
        claim["claim"] = f"c-{number:02d}"
        claim["gpu_hours"]["idle"] = float(number)
        usage["claims"].append(claim)
    usage["claims"][3]["gpu_hours"] = None  # idle, of unknown size: counted, not ranked
    idle = section.idle_claims(usage["claims"])
    assert [row["claim"] for row in idle["rows"]] == [f"c-{n:02d}" for n in range(24, 4, -1)]
    # c-04, c-02 and c-01 left out; c-03 idle but of unknown size; c-00 never idle
    assert idle["more"] == 3 and idle["unsized"] == 1
    assert idle["rows"][0] == {
        "namespace": "ns-a",
        "claim": "c-24",
        "team": "team-a",
        "node": "node-1",
        "device": "gpu-0",
        "gpu": "GPU-a",
        "idle": "24.00",
        "allocated": section.hours_text(template["gpu_hours"]["allocated"]),
        "unknown": "0.00",
    }


# ---------------------------------------------------------------- the chart


def test_each_state_of_each_team_is_one_path_as_high_as_the_timeline_says(usage):
    view = section.usage_view(usage)
    paths = chart_paths(pages.utilization_html({"schema_version": 1, "usage": usage}))
    teams = usage["timeline"]["teams"]
    assert sorted(paths) == sorted((t, c) for t in teams for c in (*section.STATES, "allocated", "memory"))
    bucket_px = section.PLOT_W / usage["timeline"]["buckets"]
    for panel in view["chart"]["panels"]:
        rows, bottom, scale = teams[panel["team"]], panel["bottom"], panel["scale"]
        for bucket in (2, 7):
            x = section.LEFT + (bucket + 0.5) * bucket_px
            below = bottom
            for state in section.STATES:  # each area's visible height above the one below it
                top = y_at(paths[(panel["team"], state)], x)
                assert (below - top) / scale == pytest.approx(rows[f"{state}_gpus"][bucket], abs=0.01)
                below = top
            for series, key in (("allocated", "allocated_gpus"), ("memory", "memory_used_gpus")):
                height = (bottom - y_at(paths[(panel["team"], series)], x)) / scale
                assert height == pytest.approx(rows[key][bucket], abs=0.01)
    # "(no team)": active for the first five buckets, idle for the last five
    first, last = (section.LEFT + (b + 0.5) * bucket_px for b in (2, 7))
    active = paths[("(no team)", "active")]
    assert y_at(active, first) < y_at(active, last) == view["chart"]["panels"][0]["bottom"]


def test_unknown_is_drawn_grey_labelled_and_never_as_idle(usage):
    html = pages.utilization_html({"schema_version": 1, "usage": usage})
    tags = parsed(html)
    fills = {a["class"]: a["fill"] for t, a in tags.tags if t == "path" and a.get("data-team") == "team-a"}
    assert fills["unknown"] == section.STATE_COLOURS["unknown"] != fills["idle"]
    titles = {a["class"]: text for a, text in tags.titles if a.get("data-team") == "team-a"}
    assert titles["unknown"] == "team-a: GPUs unknown (no samples)" and titles["idle"] == "team-a: GPUs idle"
    assert "unknown (no samples)" in re.sub(r"<[^>]+>", "", str(html).split("</svg>")[1])
    svg = next(a for t, a in tags.tags if t == "svg")
    assert svg["role"] == "img" and "unknown (no samples)" in svg["aria-label"]
    # team-a's never-measured GPU: one GPU of unknown at every bucket, drawn above idle
    paths = chart_paths(html)
    x = section.LEFT + 3
    assert y_at(paths[("team-a", "unknown")], x) < y_at(paths[("team-a", "idle")], x)


def test_the_time_axis_reads_minutes_hours_or_days_from_the_start():
    def texts(span):
        return [tick["text"] for tick in section.time_ticks(span)]

    assert texts(600) == ["0 min", "2 min", "4 min", "6 min", "8 min", "10 min"]
    assert texts(24 * 3600) == [f"{h} h" for h in range(0, 25, 3)]
    assert texts(7 * 86400) == [f"{d} d" for d in range(8)]
    assert texts(30 * 86400)[-1] == "28 d" and len(texts(30 * 86400)) <= section.MAX_TIME_TICKS + 1
    ticks = section.time_ticks(24 * 3600)
    assert float(ticks[0]["x"]) == section.LEFT and float(ticks[-1]["x"]) == section.LEFT + section.PLOT_W
    assert [section.nice_top(v) for v in (0, 0.25, 0.3125, 3.0, 7, 130)] == [1.0, 0.25, 0.4, 3.0, 8.0, 150.0]


def test_panels_are_the_teams_with_the_most_gpu_hours(usage):
    rows = usage["timeline"]["teams"]["team-a"]
    for number in range(section.MAX_PANELS + 2):
        usage["timeline"]["teams"][f"t-{number:02d}"] = rows
        usage["teams"][f"t-{number:02d}"] = dict(usage["teams"]["team-a"], gpu_hours={"allocated": float(number)})
    chart = section.timeline_chart(usage["timeline"], usage["window"], usage["teams"])
    drawn = [panel["team"] for panel in chart["panels"]]
    # the twelve with the most: t-13 down to t-02 (team-a has 0.5 GPU-hours), in name order
    assert drawn == [f"t-{n:02d}" for n in range(2, 14)] and chart["left_out"] == 4
    assert chart["height"] == section.PANEL_H * section.MAX_PANELS


# ---------------------------------------------------------------- advice


def test_the_advice_sets_today_against_advised_and_marks_few_claims(usage):
    view = section.advice_view(usage["advice"], usage["claims"])
    (group,) = view["groups"]
    assert (group["team"], group["template"]) == ("(no team)", "fractional-gpu")
    # share-b: 20 GiB request and 40 GiB limit today; its peak 25 GiB is the advised request and limit
    assert group["request"] == {"today": "20Gi", "advised": "25Gi"}
    assert group["limit"] == {"today": "40Gi", "advised": "25Gi"}
    assert group["per_gpu"] == {"today": 4, "advised": 3} and group["few_claims"] is True
    # a request in no exact binary unit is plain bytes: its GiB beside it
    assert section.quantity_text("21474800000", 21474800000) == "21474800000 (20.0 GiB)"
    assert yaml.safe_load(view["snippet"]) == usage["advice"]["inventory_snippet"]
    (candidate,) = view["candidates"]
    assert candidate["claim"] == "dcgm-e" and candidate["compute"] == "40.0 %" and candidate["memory"] == "1.0"
    usage["advice"]["whole_gpu_candidates"][0].update(compute_known=False, compute_max=None)
    usage["advice"]["fractional"].append(
        {"team": "team-a", "template": "tiny", "claims": 2, "claims_measured": 0, "advice": None, "reason": "no sample"}
    )
    html = str(pages.utilization_html({"schema_version": 1, "usage": usage}))
    assert re.search(r'data-claim="ns-a/dcgm-e">.*<td class="num">compute unknown</td>', html)
    assert re.search(r'data-template="tiny">.*<td colspan="6" class="muted no-advice">no advice: no sample</td>', html)
    assert '<span class="warn few-claims">few claims</span>' in html
    assert '<pre class="usage-snippet"><code>aligned_dra_claims:\n  templates:\n' in html


def test_candidates_are_listed_twenty_at_most_the_most_gpu_hours_first(usage):
    one = usage["advice"]["whole_gpu_candidates"][0]
    usage["advice"]["whole_gpu_candidates"] = [
        dict(one, claim=f"w-{n:02d}", gpu_hours=float(n)) for n in range(section.MAX_ROWS + 3)
    ]
    view = section.advice_view(usage["advice"], usage["claims"])
    assert [c["claim"] for c in view["candidates"]][:2] == ["w-22", "w-21"] and view["more_candidates"] == 3
    assert len(view["candidates"]) == section.MAX_ROWS


def test_hostile_team_and_claim_names_stay_text(usage):
    usage["teams"][EVIL] = usage["teams"].pop("team-a")
    usage["timeline"]["teams"][EVIL] = usage["timeline"]["teams"].pop("team-a")
    for claim in usage["claims"]:
        claim["claim"] = EVIL
    html = str(pages.utilization_html({"schema_version": 1, "usage": usage}))
    assert "<script" not in html and 'evil.example/x.js"></script>' not in html
    assert {t for t, _a in parsed(html).tags} <= {
        "section", "h3", "h4", "p", "b", "table", "thead", "tbody", "tfoot", "tr", "th", "td", "span", "code",
        "pre", "svg", "text", "title", "line", "path",
    }  # fmt: skip


def test_claims_never_measured_and_nodes_without_nvml_are_said_not_hidden(usage):
    usage["claims_not_measured"] = [{"namespace": "ns-z", "claim": "ghost", "gpus": 2, "node": "node-9"}]
    html = str(pages.utilization_html(inputs.validate_utilization({"schema_version": 1, "usage": usage})))
    said = " ".join(re.sub(r"<[^>]+>", " ", html).split())
    assert "1 claim holds GPUs now but no series of the window names it" in said and "ns-z/ghost" in said
    # the window's node-1 said NVML was down for its last two one-minute steps
    assert "NVML was not answering on node-1 (0.03 h)" in said
    usage["claims_not_measured"], usage["nvml_unavailable_hours"] = [], {}
    quiet = str(pages.utilization_html({"schema_version": 1, "usage": usage}))
    assert "not-measured" not in quiet and "nvml-down" not in quiet
