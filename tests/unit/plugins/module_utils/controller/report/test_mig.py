# SPDX-License-Identifier: Apache-2.0
"""The MIG part of the site report: each static layout drawn on its memory slices, and the replay's MIG
figures (the driver's order against the fragmentation-aware one) beside the other policies."""

from __future__ import annotations

import json
import re

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import result
from ansible_collections.aligned.dra.plugins.module_utils.controller.report import inputs, pages
from ansible_collections.aligned.dra.plugins.module_utils.controller.report import mig as section
from ansible_collections.aligned.dra.tests.support.sites.report_sites import plan_for, topology_of, write_site

MIXED = {
    "mixed": [
        {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
        {"devices": [2, 3, 4, 5, 6, 7], "mig-enabled": True, "mig-devices": {"3g.40gb": 2}},
    ]
}
STATIC = {"mode": "static", "layout": "mixed", "mig_configs": MIXED}


@pytest.fixture(scope="module")
def dgx():
    return topology_of("dgx-h100")


def test_identical_static_gpus_share_a_row_with_a_box_per_instance_on_its_slices(dgx):
    view = section.layout_view({"b": dgx, "a": dgx}, {"a": STATIC, "b": STATIC}, "lab")
    assert view["static_gpus"] == 16 and view["layouts"] == 2 and view["dynamic"] == []
    assert view["sources"] == [{"source": "documented", "gpus": 16}]
    rows = view["picture"]["rows"]
    assert [r["gpus"] for r in rows] == [4, 12]  # GPUs 0-1 of each node, then 2-7
    first = rows[0]
    assert first["hosts"].startswith("a (") and ", b (" in first["hosts"]
    # packed as the node packs it (node/mig/packing), drawn by start
    boxes = [(b["profile"], b["start"]) for b in first["boxes"]]
    assert boxes == [("1g.10gb", 0), ("1g.10gb", 1), ("2g.20gb", 2), ("3g.40gb", 4)]
    # each box spans its placement's slices: x from the slice, width from the size
    for box in first["boxes"]:
        size = 4 if box["profile"].startswith("3g") else 2 if box["profile"].startswith("2g") else 1
        assert int(box["x"]) == section.MARGIN + section.LABEL_W + box["start"] * section.SLICE_W + 1
        assert int(box["width"]) == size * section.SLICE_W - 2
    assert first["free"] == []
    second = rows[1]
    assert [(b["profile"], b["start"]) for b in second["boxes"]] == [("3g.40gb", 0), ("3g.40gb", 4)]
    assert second["free"] == []


def test_slices_without_an_instance_are_drawn_free(dgx):
    layout = {"one": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1}}]}
    view = section.layout_view({"a": dgx}, {"a": {"mode": "static", "layout": "one", "mig_configs": layout}}, "lab")
    (row,) = view["picture"]["rows"]
    taken = {s for b in row["boxes"] for s in range(b["start"], b["start"] + 4)}
    assert len(row["boxes"]) == 1 and sorted(f["slice"] for f in row["free"]) == sorted(set(range(8)) - taken)
    assert [h["label"]["text"] for h in view["picture"]["head"]] == [str(s) for s in range(8)]


def test_dynamic_gpus_are_counted_not_drawn_and_a_site_without_mig_has_no_section(dgx):
    view = section.layout_view({"a": dgx}, {"a": {"mode": "dynamic"}}, "lab")
    assert view["picture"] is None and view["dynamic"] == [{"model": "H100-SXM5-80GB", "gpus": 8}]
    assert section.layout_view({"a": dgx}, {}, "lab") is None
    assert section.layout_view({"a": dgx}, {"a": {"mode": "off"}}, "lab") is None


def test_the_site_page_draws_the_layouts_only_with_mig(tmp_path, dgx):
    write_site(tmp_path, "lab", {"a": dgx})
    without = pages.build_reports(str(tmp_path))["files"]["lab/report.html"]
    assert "MIG layouts" not in without
    page = pages.build_reports(str(tmp_path), mig={"a": STATIC})["files"]["lab/report.html"]
    assert "<h2>MIG layouts</h2>" in page and page.index("MIG layouts") < page.index("<h2>Nodes")
    assert page.count('class="mig-instance"') == 4 + 2
    assert page.count('class="mig-layout"') == 2
    assert re.search(r'data-profile="3g.40gb" data-start="4"', page)
    assert "8 GPUs with a static layout (2 distinct layouts)" in page
    with pytest.raises(inputs.ReportError, match=r"mig: site lab: a: .*layout"):
        pages.build_reports(str(tmp_path), mig={"a": {"mode": "static", "layout": "nope", "mig_configs": MIXED}})


def _replay_with_mig(tmp_path, dgx) -> dict:
    write_site(tmp_path, "lab", {"a": dgx})
    plan = plan_for("lab", {"a": dgx})
    plan.update(nodes=["a"], classes={"aligned-gpu": {"nodes": {"a": 8}}})
    (tmp_path / "lab" / "plan.json").write_text(json.dumps(plan))
    trace = tmp_path / "trace.csv"
    rows = [f"p{i},{i},,{0.4 if i % 2 else 0.1}," for i in range(40)]
    trace.write_text("name,submit,end,gpus,gpu_memory\n" + "\n".join(rows) + "\n")
    runs = result.replay_policies(
        str(trace),
        ["whole", "fractional", "mig"],
        trace_format="csv",
        plan=str(tmp_path / "lab" / "plan.json"),
        mig={"a": {"mode": "dynamic"}},
    )
    replay = json.loads(json.dumps({"schema_version": 1, "site": "lab", "policies": runs}))
    (tmp_path / "lab" / "replay.json").write_text(json.dumps(replay))
    return replay


def test_the_replay_section_compares_the_mig_orders_beside_the_other_policies(tmp_path, dgx):
    replay = _replay_with_mig(tmp_path, dgx)
    figures = replay["policies"]["mig"]["mig"]["orders"]
    page = pages.build_reports(str(tmp_path), mig={"a": {"mode": "dynamic"}})["files"]["lab/report.html"]
    assert '<tr data-policy="mig"><td>mig</td>' in page  # a row beside whole and fractional
    for key in ("first_fit", "fragmentation_aware"):
        row = re.search(rf'<tr data-order="{key}">(.*?)</tr>', page).group(1)
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        assert cells[1] == f"{figures[key]['gpu_pods_placed']} / 40"
        assert cells[3] == str(figures[key]["gpus_needed"]["peak"])
        stranded = figures[key]["stranded"]
        assert cells[4].startswith(f"{stranded['slices']} on {stranded['gpus']} GPU")
    first = figures["first_fit"]["not_placed"][0]
    assert f"{first['pod']}: {first['reason']}" in page
    assert "8 MIG GPUs (8 H100-SXM5-80GB (dynamic); 64 memory slices; profiles from documented 8)" in page


def test_malformed_mig_figures_are_refused(tmp_path, dgx):
    replay = _replay_with_mig(tmp_path, dgx)
    broken = json.loads(json.dumps(replay))
    del broken["policies"]["mig"]["mig"]["orders"]["first_fit"]["gpus_needed"]
    with pytest.raises(inputs.ReportError, match=r"policies.mig.mig.orders.first_fit has no 'gpus_needed'"):
        section.validate_replay_mig(broken)
    broken = json.loads(json.dumps(replay))
    broken["policies"]["mig"]["mig"]["gpus"] = "8"
    with pytest.raises(inputs.ReportError, match=r"policies.mig.mig.gpus '8' is not a count"):
        section.validate_replay_mig(broken)


def test_the_mig_table_shows_what_decided_the_profiles_first_fits_range_and_the_sizes_used(tmp_path, dgx):
    replay = _replay_with_mig(tmp_path, dgx)
    figures = replay["policies"]["mig"]["mig"]
    page = pages.build_reports(str(tmp_path), mig={"a": {"mode": "dynamic"}})["files"]["lab/report.html"]
    row = re.search(r'<tr data-order="first_fit">(.*?)</tr>', page).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert cells[0] == "the driver&#39;s order (first fit), nodes by name"
    # shares without memory: their compute share decided every profile
    assert cells[5] == f"compute {figures['orders']['first_fit']['decided_by']['compute']}"
    spread = figures["first_fit_range"]
    row = re.search(r'<tr data-order="first_fit_range">(.*?)</tr>', page).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    assert cells[0] == "the driver&#39;s order, random ties among nodes (10 draws, seed 0)"
    low, high = spread["gpu_pods_placed"]["min"], spread["gpu_pods_placed"]["max"]
    placed = f"{low}" if low == high else f"{low} to {high}"
    assert cells[1] == f"{placed} (median {spread['gpu_pods_placed']['median']:g}) / 40"
    assert "Profile sizes used: H100-SXM5-80GB (dynamic, documented): 1g.10gb 10 GiB, 1g.20gb 20 GiB" in page
    assert "No draw of 10 placed more GPU pods than the name order: here it is the best case." in page
    assert "here it is not the best case" not in page
    beaten = json.loads(json.dumps(replay))
    beaten["policies"]["mig"]["mig"]["first_fit_range"]["best_case"]["draws_placing_more"] = 2
    (tmp_path / "lab" / "replay.json").write_text(json.dumps(beaten))
    page = pages.build_reports(str(tmp_path), mig={"a": {"mode": "dynamic"}})["files"]["lab/report.html"]
    assert "2 of 10 draws placed more GPU pods than the name order: here it is not the best case." in page


def test_a_malformed_range_is_refused_and_a_replay_without_one_shows_no_row(tmp_path, dgx):
    replay = _replay_with_mig(tmp_path, dgx)
    broken = json.loads(json.dumps(replay))
    broken["policies"]["mig"]["mig"]["first_fit_range"]["gpu_pods_placed"]["max"] = -1
    with pytest.raises(inputs.ReportError, match=r"first_fit_range.gpu_pods_placed.max -1 is not a count"):
        section.validate_replay_mig(broken)
    older = json.loads(json.dumps(replay))
    del older["policies"]["mig"]["mig"]["first_fit_range"]
    view = section.replay_mig_view(section.validate_replay_mig(older)["policies"]["mig"])
    assert [row["key"] for row in view["orders"]] == ["first_fit", "fragmentation_aware"]
