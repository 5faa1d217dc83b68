# SPDX-License-Identifier: Apache-2.0
"""Site report: the pages, their plan, teams and utilization sections, and the files they are built from."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import inputs, pages
from ansible_collections.aligned.dra.tests.support.sites.report_sites import (
    DEMO_FIXTURES,
    identical_site,
    parse,
    plan_for,
    topology_of,
    write_site,
)

# ---------------------------------------------------------------- pages


def test_site_page_is_self_contained_and_lists_every_node():
    nodes = {f"n-{f}": topology_of(f) for f in DEMO_FIXTURES}
    page = pages.site_report("demo", nodes)["html"]
    tags = parse(page)
    assert not [t for t, _a in tags if t in ("script", "link", "img", "iframe", "object")]
    assert not re.search(r"url\(|@import|@font-face", page)
    external = set(re.findall(r"https?://[^\s\"'<>]+", page))
    assert external <= {"http://www.w3.org/2000/svg"}
    rows = [a["data-host"] for t, a in tags if t == "tr" and a.get("data-host")]
    assert rows == sorted(nodes)
    drawn = [h for t, a in tags if t == "section" and a.get("data-hosts") for h in a["data-hosts"].split()]
    assert sorted(drawn) == sorted(nodes)


def test_pages_are_deterministic():
    nodes = {"a": topology_of("dgx-h100"), "b": topology_of("vm-flat")}
    assert pages.site_report("x", nodes)["html"] == pages.site_report("x", dict(reversed(nodes.items())))["html"]


def test_names_are_escaped():
    nodes = {"<b>evil</b>": topology_of("vm-flat")}
    page = pages.site_report("s&p", nodes)["html"]
    assert "<b>evil</b>" not in page and "&lt;b&gt;evil&lt;/b&gt;" in page and "s&amp;p" in page


def test_warnings_are_listed_per_layout():
    nodes = {"vm": topology_of("hyperv-ndv4")}
    page = pages.site_report("s", nodes)["html"]
    assert "no resource.kubernetes.io/pcieRoot" in page


def test_a_large_site_of_identical_machines_is_drawn_once_and_small():
    nodes = identical_site("dgx-h100", 500)
    result = pages.site_report("big", nodes)
    assert len(result["layouts"]) == 1 and len(result["layouts"][0]["hosts"]) == 500
    html = result["html"]
    assert html.count("<svg") == 1
    assert len(html.encode()) < 2 * 1024 * 1024
    assert html.count('<tr id="node-') == 500


# ---------------------------------------------------------------- plan


def test_plan_section_shows_capacity_worst_level_and_errors():
    nodes = identical_site("dgx-h100", 3)
    plan = inputs.validate_plan(plan_for("s", nodes))
    page = pages.site_report("s", nodes, plan=plan)["html"]
    tags = parse(page)
    rows = {a["data-template"] for t, a in tags if t == "tr" and a.get("data-template")}
    assert rows == {"gpu-nic-pair-1", "eight-gpus-one-root"}
    assert "UNSATISFIABLE" in page and "no matching overload" in page
    assert "Why: a selector fails to evaluate" in page
    assert re.search(r"8 claims per node, worst level <b[^>]*>PXB</b>: 3 nodes", page)
    assert '<td class="num">24</td>' in page


def test_plan_node_groups_are_ordered_by_claims_then_level():
    nodes = identical_site("vm-flat", 3)
    plan = plan_for("s", nodes)
    per_node = plan["templates"][0]["nodes"]
    per_node["gpu-0001"].update(worst_level="PXB")
    per_node["gpu-0002"].update(worst_level="PHB")
    per_node["gpu-0003"].update(worst_level="PIX")
    html = pages.plan_html(inputs.validate_plan(plan))
    assert [html.index(f">{lv}</b>: 1 node") for lv in ("PIX", "PXB", "PHB")] == sorted(
        html.index(f">{lv}</b>: 1 node") for lv in ("PIX", "PXB", "PHB")
    )


def test_plan_section_shows_tainted_devices_and_why():
    from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
    from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner

    nodes = identical_site("dgx-h100", 2)
    planned = planner.nodes_from_topologies(nodes)
    first = sorted(planned)[0]
    gone = planned[first]["devices"][0]
    gone["taints"] = [
        {
            "key": "dra.aligned.dev/unhealthy",
            "value": "gone",
            "effect": "NoExecute",
            "timeAdded": "2026-11-23T18:41:01Z",
        }
    ]
    rendered = claims.render({}, "s", "1.36")["objects"]
    classes = [o for o in rendered if o["kind"] == "DeviceClass"]
    templates = [o for o in rendered if o["kind"] != "DeviceClass"]
    plan = inputs.validate_plan(planner.plan("s", planned, classes, templates, kubernetes_version="1.36"))
    html = pages.plan_html(plan)
    rows = [a["data-device"] for t, a in parse(html) if t == "tr" and a.get("data-device")]
    assert rows == [gone["name"]]
    assert "<code>dra.aligned.dev/unhealthy=gone</code>" in html
    assert (
        "the PCI function is no longer on the node" in html and "NoExecute" in html and "2026-11-23T18:41:01Z" in html
    )
    # no taint in the input: no section
    untainted = inputs.validate_plan(plan_for("s", nodes))
    assert "Tainted devices" not in pages.plan_html(untainted)


def test_a_bounded_plan_level_is_shown_as_a_bound():
    nodes = identical_site("vm-flat", 2)
    plan = plan_for("s", nodes)
    template = plan["templates"][0]
    template.update(worst_level="PHB", worst_level_exact=False)
    template["nodes"]["gpu-0001"].update(worst_level="PHB", worst_level_exact=False)
    template["nodes"]["gpu-0002"].update(worst_level="PHB", worst_level_exact=True)
    html = pages.plan_html(inputs.validate_plan(plan))
    assert re.search(r"<td><b [^>]*>≤ PHB</b></td>", html)
    assert re.search(r"worst level <b [^>]*>PHB</b>: 1 node \(gpu-0002\)", html)
    assert re.search(r"worst level <b [^>]*>≤ PHB</b>: 1 node \(gpu-0001\)", html)


def test_an_unknown_plan_level_is_shown_as_unknown_never_as_a_level():
    # p5-like nodes whose EFA NICs publish no numaNode: one PHB bound and unknown pairs in every allocation
    from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
    from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import p5_objects, p5_slices

    objects = p5_objects()
    classes = [o for o in objects if o["kind"] == "DeviceClass"]
    templates = [o for o in objects if o["metadata"]["name"] in ("gpu-efa-unaligned", "gpu-only")]
    slices = p5_slices("p5-0001", efa_numa=False) + p5_slices("p5-0002", efa_numa=False)
    plan = inputs.validate_plan(planner.plan("p5", planner.nodes_from_slices(slices), classes, templates))
    html = pages.plan_html(plan)
    rows = {a["data-template"]: i for i, (t, a) in enumerate(parse(html)) if t == "tr" and a.get("data-template")}
    assert set(rows) == {"gpu-efa-unaligned", "gpu-only"}
    unaligned = html.split('<tr data-template="gpu-efa-unaligned">')[1].split("</tr>")[0]
    assert re.search(r"<td><b [^>]*>unknown</b></td>", unaligned) and "PHB" not in unaligned
    assert re.search(r"worst level <b [^>]*>unknown</b>: 2 nodes \(p5-0001, p5-0002\)", html)
    assert "PHB" not in html and "≤" not in html
    # a template without accelerator-NIC pairs has no level: "none"
    gpu_only = html.split('<tr data-template="gpu-only">')[1].split("</tr>")[0]
    assert '<span class="muted">none</span>' in gpu_only


def test_a_team_whose_claims_have_unknown_levels_shows_unknown():
    from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import utilization
    from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import p5_slices

    claim = {"metadata": {"name": "blind", "namespace": "ns"}, "status": {"allocation": {"devices": {"results": [
        {"request": "g", "driver": "gpu.nvidia.com", "pool": "p5", "device": "gpu-4"},
        {"request": "n", "driver": "dra.net", "pool": "p5", "device": "pci-0000-61-00-0"}]}}}}  # fmt: skip
    used = utilization.utilization(p5_slices("p5", efa_numa=False), [claim], teams={"ns": "team"})
    html = pages.utilization_html(inputs.validate_utilization(used))
    assert re.search(r'<tr data-team="team">.*<td><b [^>]*>unknown</b> 1</td></tr>', html)
    # against a promise: a claim of unknown level may have got less, so no "every claim got it"
    used["alignment"].update(promised_level="PHB", below_promise=[], maybe_below_promise=["ns/blind"])
    html = pages.utilization_html(inputs.validate_utilization(used))
    assert "every measured claim got it" not in html and "no claim is known to have got less" in html
    assert re.search(r'class="muted maybe-below">1 claim whose level is unknown or a bound worse', html)


# ---------------------------------------------------------------- files


def test_build_reports_reads_what_the_topology_role_wrote(tmp_path):
    write_site(tmp_path, "east", identical_site("dgx-h100", 2))
    write_site(tmp_path, "west", {"vm": topology_of("vm-flat")})
    (tmp_path / "east" / "plan.json").write_text(json.dumps(plan_for("east", identical_site("dgx-h100", 2))))
    built = pages.build_reports(str(tmp_path))
    assert sorted(built["files"]) == ["east/report.html", "index.html", "west/report.html"]
    assert built["sites"]["east"]["plan"] is True and built["sites"]["west"]["plan"] is False
    assert built["sites"]["east"]["score"] == {"aligned": 16, "host": 0, "sys": 0, "none": 0}
    index = parse(built["files"]["index.html"])
    assert [a["href"] for t, a in index if t == "a"] == ["east/report.html", "west/report.html"]


def test_build_reports_one_site_keeps_the_others_in_the_index(tmp_path):
    write_site(tmp_path, "east", {"a": topology_of("vm-flat")})
    write_site(tmp_path, "west", {"b": topology_of("vm-flat")})
    (tmp_path / "west" / "report.html").write_text("built earlier")
    built = pages.build_reports(str(tmp_path), sites=["east"])
    assert sorted(built["files"]) == ["east/report.html", "index.html"]
    assert 'href="west/report.html"' in built["files"]["index.html"]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: None, "index.json does not exist: run the topology role"),
        (lambda d: (d / "index.json").write_text("{"), "site index"),
        (
            lambda d: (d / "index.json").write_text('{"sites": [{"site": "s", "node_files": ["s/nodes/x.json"]}]}'),
            "site s: node file",
        ),
        (lambda d: (write_site(d, "s", {"a": {}}), None), "s/nodes/a.json is not a topology"),
        (
            lambda d: (write_site(d, "s", {"a": topology_of("vm-flat")}), (d / "s" / "plan.json").write_text("[]")),
            "plan.json: expected a JSON object",
        ),
    ],
)
def test_build_reports_names_the_bad_file(tmp_path, setup, message):
    setup(tmp_path)
    with pytest.raises(inputs.ReportError, match=re.escape(message)):
        pages.build_reports(str(tmp_path))


def test_build_reports_refuses_unknown_sites_and_levels(tmp_path):
    write_site(tmp_path, "s", {"a": topology_of("vm-flat")})
    with pytest.raises(inputs.ReportError, match=r"sites \['nope'\] are not in"):
        pages.build_reports(str(tmp_path), sites=["nope"])
    with pytest.raises(inputs.ReportError, match="unknown level"):
        pages.build_reports(str(tmp_path), warn_levels=["FAR"])


def test_a_call_with_its_own_templates_leaves_the_next_call_the_collections(tmp_path):
    """Templates passed to one call (bad ones here, as a fuzzed argument passes them) end with that call."""
    write_site(tmp_path, "s", {"a": topology_of("vm-flat")})
    with pytest.raises(inputs.ReportError, match="templates: page.html.j2"):
        pages.build_reports(str(tmp_path), templates={"page.html.j2": 1})
    assert "<html" in pages.site_report("s", {"a": topology_of("vm-flat")})["html"]


# ---------------------------------------------------------------- teams and utilization


def _teams_and_utilization():
    from pathlib import Path

    import yaml

    from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
    from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import utilization
    from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams
    from ansible_collections.aligned.dra.plugins.module_utils.controller.teams import settings as teams_settings

    objects = claims.render({"drivers": ["dra.aligned.dev", "gpu.nvidia.com", "dra.net"]}, "east", "1.36")["objects"]
    raw = {
        "oversubscription": {"gpu": 1.5},
        "teams": [
            {"name": "llm-training", "namespaces": ["llm-train"], "tier": "production", "quotas": {"gpu": 5}},
            {"name": "vision-research", "namespaces": ["vision"], "quotas": {"gpu": 2, "nic": 1}},
        ],
    }
    plan = {"classes": {"aligned-gpu": {"devices": 6}, "aligned-nic": {"devices": 4}}}
    rendered = teams.render(raw, "east", objects, "1.36", plan=plan, class_keys=claims.settings({})["classes"])
    summary = {"schema_version": 1, "teams": rendered["teams"], "capacity": rendered["capacity"]}
    recorded = Path(__file__).resolve().parents[5] / "fixtures" / "utilization" / "ai-lab"
    used = utilization.utilization(
        yaml.safe_load((recorded / "slices.yaml").read_text())["items"],
        yaml.safe_load((recorded / "claims.yaml").read_text())["items"],
        [o for o in objects if o["kind"] == "DeviceClass"],
        teams_settings.teams_by_namespace(raw),
        site="east",
    )
    return summary, json.loads(json.dumps(used))


def test_site_page_shows_quotas_against_capacity_and_utilization():
    summary, used = _teams_and_utilization()
    page = pages.site_report("east", identical_site("vm-flat", 1), teams=summary, utilization=used)["html"]
    tags = parse(page)
    quota_rows = {a["data-class"] for t, a in tags if t == "tr" and "data-class" in a}
    assert {"aligned-gpu", "aligned-nic", "aligned-vf", "nvidia-gpu", "dranet-nic"} <= quota_rows
    # aligned-gpu: 5 + 2 guaranteed of 6, within the 1.5 factor
    assert re.search(r'data-class="aligned-gpu"><td>aligned-gpu</td><td class="num">6</td><td class="num">7</td>', page)
    assert "oversubscribed (allowed)" in page
    assert "10 of 14 devices allocated (71 %), 4 idle" in page
    assert [a.get("class") for t, a in tags if t == "svg" and a.get("class") == "usage"] == ["usage"]
    bars = [a for t, a in tags if t == "rect" and a.get("class") in ("used", "idle")]
    assert len(bars) == 2 * 5  # one allocated and one idle bar per class with devices
    assert "<script" not in page and 'href="utilization.json"' in page and 'href="teams.json"' in page
    assert "4 claims hold GPUs and NICs" in page and "gpu-0000-3d-00-0: 2 claims, 2 consumers, memory 75 % used" in page
    # without topologies, a pair on one pcieRoot is PHB at worst: shown as a bound, not as unknown
    assert used["alignment"]["bounds"] == {"PHB": 2} and used["alignment"]["levels"]["unknown"] == 0
    assert re.search(r'GPUs and NICs: .*<b [^>]*class="bound"[^>]*>≤ PHB</b> 2', page)


def test_build_reports_reads_teams_and_utilization_and_refuses_bad_files(tmp_path):
    summary, used = _teams_and_utilization()
    write_site(tmp_path, "east", identical_site("vm-flat", 1))
    (tmp_path / "east" / "teams.json").write_text(json.dumps(summary))
    (tmp_path / "east" / "utilization.json").write_text(json.dumps(used))
    page = pages.build_reports(str(tmp_path))["files"]["east/report.html"]
    assert "<h2>Teams and quotas</h2>" in page and "<h2>Utilization</h2>" in page
    (tmp_path / "east" / "utilization.json").write_text(json.dumps(dict(used, shared=None)))
    with pytest.raises(inputs.ReportError, match="'shared' must be a list"):
        pages.build_reports(str(tmp_path))
    (tmp_path / "east" / "teams.json").write_text(json.dumps({"schema_version": 2}))
    with pytest.raises(inputs.ReportError, match="teams.json: expected a JSON object with schema_version 1"):
        pages.build_reports(str(tmp_path))


def test_site_page_shows_kueue_queues_idle_devices_and_the_what_if_outcome(tmp_path):
    from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
    from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams

    objects = claims.render({}, "east", "1.36")["objects"]
    raw = {
        "engine": "kueue",
        "teams": [
            {"name": "vision", "tier": "production", "templates": ["gpu-only"], "quotas": {"gpu": 4}},
            {
                "name": "llm",
                "tier": "research",
                "templates": ["gpu-only"],
                "quotas": {"gpu": 4},
                "lending_limit": {"gpu": 2},
            },  # fmt: skip
        ],
        "kueue": {
            "what_if": [
                {"team": "vision", "name": "sweep", "class": "gpu", "devices": 6},
                {"team": "vision", "name": "extra", "class": "gpu", "devices": 1},
            ]
        },
    }
    rendered = teams.render(
        raw, "east", objects, "1.36", class_keys=claims.settings({})["classes"], in_use={"vision": {"aligned-gpu": 1}}
    )
    summary = {
        "schema_version": 1,
        "teams": rendered["teams"],
        "capacity": rendered["capacity"],
        "engine": rendered["engine"],
        "kueue": rendered["kueue"],
    }
    summary = json.loads(json.dumps(summary))
    page = pages.site_report("east", identical_site("vm-flat", 1), teams=summary)["html"]
    # vision: nominal 4, 1 in use: 3 idle; llm holds nothing, lends at most 2
    assert re.search(r'data-queue="vision">.*?<td>aligned-gpu 4</td><td>aligned-gpu no limit</td>'
                     r'<td>aligned-gpu 4</td><td>aligned-gpu 3</td>', page)  # fmt: skip
    assert re.search(r'data-queue="llm">.*?<td>aligned-gpu 2</td><td>aligned-gpu 2</td></tr>', page)
    # sweep (6): 4 by vision's quota + 2 borrowed (llm lends at most 2); extra (1) finds nothing left: pending
    assert re.search(r'data-what-if="vision"><td>vision</td><td>aligned-gpu 4</td><td>aligned-gpu 2</td>'
                     r'<td>aligned-gpu 1</td>', page)  # fmt: skip
    # a damaged kueue part of teams.json is refused by name
    write_site(tmp_path, "east", identical_site("vm-flat", 1))
    (tmp_path / "east" / "teams.json").write_text(json.dumps(dict(summary, kueue={"teams": [{"name": "x"}]})))
    with pytest.raises(inputs.ReportError, match=r"kueue.teams\[0\] has no 'cluster_queue'"):
        pages.build_reports(str(tmp_path))


def test_a_site_with_usage_alone_has_a_valid_page_with_used_versus_allocated(tmp_path, usage):
    import html5lib

    write_site(tmp_path, "east", identical_site("vm-flat", 1))
    (tmp_path / "east" / "utilization.json").write_text(
        json.dumps({"schema_version": 1, "site": "east", "usage": usage})
    )
    page = pages.build_reports(str(tmp_path))["files"]["east/report.html"]
    assert "<h2>Utilization</h2>" in page and "<h3>Used versus allocated</h3>" in page
    assert "devices allocated" not in page and 'class="usage-classes"' not in page  # no allocation part
    tags = parse(page)
    assert sum(1 for t, a in tags if t == "path" and a.get("class") == "unknown") == 2  # a team each
    parser = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)
    parser.parse(page)  # raises on the first parse error
    ids = [a["id"] for _t, a in tags if a.get("id")]
    assert len(ids) == len(set(ids))
    # both parts where the site has ResourceSlices too; a bad usage names its key
    _summary, used = _teams_and_utilization()
    (tmp_path / "east" / "utilization.json").write_text(json.dumps(dict(used, usage=usage)))
    page = pages.build_reports(str(tmp_path))["files"]["east/report.html"]
    assert "10 of 14 devices allocated" in page and page.index("devices allocated") < page.index("Used versus")
    broken = copy.deepcopy(usage)
    del broken["timeline"]["teams"]["team-a"]["active_gpus"]
    (tmp_path / "east" / "utilization.json").write_text(json.dumps(dict(used, usage=broken)))
    with pytest.raises(
        inputs.ReportError, match=r"east/utilization.json: usage.timeline.teams.team-a has no 'active_gpus'"
    ):
        pages.build_reports(str(tmp_path))


# ---------------------------------------------------------------- templates


def test_report_package_writes_no_html_tags():
    """Markup lives in the Jinja2 templates; the report's modules compute data and geometry only."""
    modules = sorted(Path(pages.__file__).parent.glob("*.py"))
    assert {"pages.py", "data.py", "svg.py", "layouts.py", "inputs.py"} <= {m.name for m in modules}
    for module in modules:
        source = module.read_text(encoding="utf-8")
        code = re.sub(r'"""(?:.|\n)*?"""', "", source)  # docstrings may name files like <output_dir>
        assert not re.findall(r"</?[a-zA-Z][a-zA-Z0-9]*[\s>/]", code), module.name


def test_templates_escape_names_and_models():
    topology = topology_of("dgx-h100")
    for device in topology["devices"]:
        if device.get("gpu"):
            device["gpu"]["model"] = "<script>alert(1)</script> & Co"
    page = pages.site_report("R&D <lab>", {"<script>x</script>": topology})["html"]
    assert "<script" not in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "R&amp;D &lt;lab&gt;" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; &amp; Co" in page


def test_plurals_on_a_one_node_page():
    page = pages.site_report("one", {"solo": topology_of("pci-domain-5digit")})["html"]
    text = re.sub(r"<[^>]+>", "", page)
    assert "1 node " in text and "1 GPU " in text and "1 RDMA NIC " in text
    assert not re.search(r"\b1 (nodes|GPUs|RDMA NICs|layouts|warnings|NUMA nodes)\b", text)
    assert not re.search(r"\b([02-9]|\d\d+) (node|GPU|RDMA NIC|warning|NUMA node)\b(?!s)", text)


def test_failed_nodes_from_summary_json_are_listed_with_stage_error_and_stale_facts():
    failed = {
        "gpu-9": {
            "state": "unreachable",
            "stage": "probe",
            "task": None,
            "error": "ssh: <timeout> & gone",
            "stale_facts": {"file": "nodes/gpu-9.json", "age_s": 7200, "used": False},
        }
    }
    summary_file = {"nodes_failed": failed, "node_counts": {"ok": 1, "failed": 0, "unreachable": 1}}
    result = pages.site_report("s", {"a": topology_of("vm-flat")}, summary_file=summary_file)
    page = result["html"]
    assert 'data-failed-host="gpu-9"' in page and "ssh: &lt;timeout&gt; &amp; gone" in page
    assert "nodes/gpu-9.json, 2 hours old, not used" in page
    assert 'data-ok="1" data-failed="0" data-unreachable="1"' in page
    # Old files without the keys: no section, counts from the nodes drawn.
    old = pages.site_report("s", {"a": topology_of("vm-flat")}, summary_file={"site": "s"})["html"]
    assert "data-failed-host" not in old and 'data-ok="1" data-failed="0" data-unreachable="0"' in old


# ---------------------------------------------------------------- rails


def _summary_with_rails(nodes: dict, rules: dict) -> dict:
    """summary.json as the topology role writes it for ``nodes`` under ``rules`` (host -> aligned_dra_rails)."""
    from ansible_collections.aligned.dra.plugins.module_utils.controller.topology.summary import (
        node_summary,
        site_summary_of,
    )

    per_node = {host: node_summary(t, rails=rules.get(host), node_name=host) for host, t in nodes.items()}
    return json.loads(json.dumps(site_summary_of("s", per_node)))


def test_site_page_labels_nics_with_their_rails_in_the_picture_matrix_and_inventory():
    nodes = identical_site("dgx-h100", 2)
    rule = {"by": "pci_order", "count": 8, "exclude": ["eno*"]}
    html = pages.site_report("s", nodes, summary_file=_summary_with_rails(nodes, dict.fromkeys(nodes, rule)))["html"]
    tags = parse(html)
    header = {a["data-nic"]: a.get("data-rail") for t, a in tags if t == "th" and a.get("data-nic")}
    assert header["0000:1d:00.0"] == "rail 0" and header["0000:d0:00.0"] == "rail 7"
    assert header["0000:5a:00.0"] == "no rail"
    drawn = {a["data-bdf"]: a.get("data-rail") for t, a in tags if t == "g" and a.get("data-bdf")}
    assert drawn["0000:9d:00.0"] == "rail 4" and drawn["0000:5a:00.1"] == "no rail"
    assert "NUMA 1 \u00b7 rail 4" in html
    # on no rail: short in the box, the label and its reason in the text's title
    assert "<title>NUMA 0 \u00b7 no rail: excluded by the rule</title>NUMA 0 \u00b7 rail \u2013</text>" in html
    assert [a["data-rails"] for t, a in tags if t == "td" and a.get("data-rails")] == sorted(nodes)
    assert ">rails 0-7, 2 on no rail</td>" in html
    assert "RDMA NICs per rail: rail 0 2, rail 1 2," in html and "; 4 on no rail" in html


def test_a_layout_whose_nodes_disagree_says_the_rail_varies():
    nodes = identical_site("dgx-h100", 2)
    first, second = sorted(nodes)
    rules = {first: {"by": "pci_order", "exclude": ["eno*"]}, second: {"by": "map", "map": {"0000:1d:00.0": 5}}}
    html = pages.site_report("s", nodes, summary_file=_summary_with_rails(nodes, rules))["html"]
    header = {a["data-nic"]: a.get("data-rail") for t, a in parse(html) if t == "th" and a.get("data-nic")}
    assert header["0000:1d:00.0"] == header["0000:2e:00.0"] == "rail varies"
    assert header["0000:5a:00.0"] == "no rail"
    assert f"rail varies: rail 0 on {first}; rail 5 on {second}" in html
    assert (
        f"<title>NUMA 0 \u00b7 rail varies: rail 0 on {first}; rail 5 on {second}</title>NUMA 0 \u00b7 rail ?" in html
    )


def test_rails_a_subnet_rule_cannot_read_on_captured_trees_are_unknown_never_none():
    nodes = identical_site("dgx-h100", 2)
    assert all(t.get("netdev_addresses") is None for t in nodes.values())  # captured: no addresses read
    subnets = [f"192.168.{128 + 8 * r}.0/21" for r in range(8)]
    rule = {"by": "subnet", "subnets": subnets, "count": 8, "exclude": ["eno*"]}
    result = pages.site_report("s", nodes, summary_file=_summary_with_rails(nodes, dict.fromkeys(nodes, rule)))
    html, tags = result["html"], parse(result["html"])
    header = {a["data-nic"]: a.get("data-rail") for t, a in tags if t == "th" and a.get("data-nic")}
    assert header["0000:1d:00.0"] == "rail unknown" and header["0000:5a:00.0"] == "no rail"
    drawn = {a["data-bdf"]: a.get("data-rail") for t, a in tags if t == "g" and a.get("data-bdf")}
    assert drawn["0000:9d:00.0"] == "rail unknown"
    assert "<title>NUMA 1 \u00b7 rail unknown: addresses not read</title>NUMA 1 \u00b7 rail ?</text>" in html
    assert "rail unknown: addresses not read" in html  # the NIC legend
    assert ">8 rails unknown, 2 on no rail</td>" in html
    assert "; 4 on no rail; 16 on an unknown rail" in html
    assert "8 NICs on an unknown rail" in html and "no RDMA NIC on a rail" not in html
    # unknown is not wrong: no rails warning (count 8 is not "missing")
    assert not [w for w in result["summary"]["warnings"] if "rails:" in w]


def test_a_site_without_rules_shows_no_rails():
    nodes = {"a": topology_of("dgx-h100")}
    html = pages.site_report("s", nodes, summary_file=_summary_with_rails(nodes, {}))["html"]
    body = html.split("<body", 1)[1]  # the page's style sheet names the rail label's class
    assert "rail" not in body.lower()
    assert html == pages.site_report("s", nodes)["html"]


def test_plan_section_shows_capacity_per_rail_when_the_plan_has_it():
    nodes = identical_site("dgx-h100", 2)
    plan = plan_for("s", nodes)
    assert "Capacity per rail" not in pages.plan_html(plan)
    plan["templates"][0]["fits_per_rail"] = {"1": 2, "0": 2}
    html = pages.plan_html(plan)
    assert "Capacity per rail" in html
    cells = [(a["data-rail"]) for t, a in parse(html) if t == "td" and a.get("data-rail")]
    assert cells == ["0", "1"]
    assert '<td class="num" data-rail="0">2</td>' in html
    plan["templates"][1]["fits_per_rail"] = {"3": 0}
    html = pages.plan_html(plan)
    assert '<td class="num" data-rail="3">-</td>' in html and '<td class="num" data-rail="3">0</td>' in html


def test_build_reports_reads_the_rails_of_summary_json_and_refuses_bad_ones(tmp_path):
    nodes = identical_site("mi300x", 2)
    write_site(tmp_path, "s", nodes)
    summary = _summary_with_rails(nodes, dict.fromkeys(nodes, {"by": "pci_order", "count": 8}))
    (tmp_path / "s" / "summary.json").write_text(json.dumps(summary))
    html = pages.build_reports(str(tmp_path))["files"]["s/report.html"]
    assert 'data-rail="rail 7"' in html
    summary["per_node"][sorted(nodes)[0]]["rails"] = {"rule": "by pci_order"}
    (tmp_path / "s" / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(inputs.ReportError, match=r"summary\.json: per_node\.gpu-0001\.rails must be an object"):
        pages.build_reports(str(tmp_path))


def test_what_the_validation_would_refuse_is_a_warning_of_the_layout():
    nodes = identical_site("dgx-h100", 2)
    rule = {"by": "pci_order", "count": 9, "exclude": ["eno*"]}
    result = pages.site_report("s", nodes, summary_file=_summary_with_rails(nodes, dict.fromkeys(nodes, rule)))
    warning = "rails: rails 8 of count 9: no RDMA NIC is on them (rule by pci_order)"
    assert f"<li>{warning} &mdash; all nodes of this layout</li>" in result["html"]
    assert f"gpu-0001: {warning}" in result["summary"]["warnings"]


def test_site_page_shows_kai_queues_and_the_fair_share_what_if(tmp_path):
    from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
    from ansible_collections.aligned.dra.plugins.module_utils.controller.stages import teams_render as teams

    nvidia = {"drivers": ["gpu.nvidia.com", "dra.net"], "gpu_driver": "gpu.nvidia.com", "nic_driver": "dra.net"}
    objects = claims.render(nvidia, "east", "1.36")["objects"]
    raw = {
        "engine": "kai",
        "teams": [
            {"name": "vision", "tier": "production", "quotas": {"nvidia-gpu": 2}},
            {"name": "llm", "tier": "research", "quotas": {"nvidia-gpu": 2}, "borrowing_limit": {"nvidia-gpu": 1}},
        ],
        "kai": {"what_if": {"vision": {"gpu": 6}, "llm": {"gpu": 4}}},
    }
    plan = {"classes": {"nvidia-gpu": {"devices": 8}}, "gpu_counts": {"n1": {"published": 8, "counted_by_kai": 8}}}
    keys = claims.settings(nvidia)["classes"]
    drivers = {"gpu": "gpu.nvidia.com", "nic": "dra.net"}
    rendered = teams.render(raw, "east", objects, "1.36", plan=plan, class_keys=keys, drivers=drivers)
    summary = {k: rendered[k] for k in ("teams", "capacity", "engine", "kueue", "kai")}
    summary = json.loads(json.dumps(dict(summary, schema_version=1)))
    page = pages.site_report("east", identical_site("vm-flat", 1), teams=summary)["html"]
    assert "<h3>KAI Scheduler queues</h3>" in page and "<code>kai.scheduler/queue</code>" in page
    assert re.search(r'data-kai-queue="llm"><td>llm</td><td>aligned-east</td><td>llm</td>'
                     r'<td class="num">10000</td><td class="num">2</td><td class="num">3</td>', page)  # fmt: skip
    # 8 GPUs: quotas 2 + 2, then production (vision) first: 4 more; llm stays at its quota
    assert re.search(r'data-fair-share="vision"><td>vision</td><td class="num">6</td><td class="num">2</td>'
                     r'<td class="num">6</td><td class="num">4</td>', page)  # fmt: skip
    assert re.search(r"Reclaim takes from first: llm</p>", page)
    assert '<tr data-kai-node="n1"><td>n1</td><td class="num">8</td><td class="num">8</td></tr>' in page
    # a damaged kai part of teams.json is refused by name
    write_site(tmp_path, "east", identical_site("vm-flat", 1))
    (tmp_path / "east" / "teams.json").write_text(json.dumps(dict(summary, kai={"queues": [{"queue": "x"}]})))
    with pytest.raises(inputs.ReportError, match=r"kai.queues\[0\] has no 'priority'"):
        pages.build_reports(str(tmp_path))


def test_plan_section_shows_the_thin_ratio_of_burstable_templates():
    from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import burst
    from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner

    gpus = [
        {
            "name": f"gpu-{i}",
            "driver": "dra.aligned.dev",
            "pool": node,
            "allowMultipleAllocations": True,
            "attributes": {"dra.aligned.dev/kind": {"string": "gpu"}},
            "capacity": {"memory": {"value": "80Gi"}, "compute": {"value": "100"}},
        }
        for node, i in (("n1", 0), ("n2", 0))
    ]
    planned = {"n1": {"devices": [gpus[0]]}, "n2": {"devices": [gpus[1]]}}
    rendered = burst.render({}, "s", "1.36", fractional_burst={"memory": 2})["objects"]
    classes = [o for o in rendered if o["kind"] == "DeviceClass"]
    templates = [o for o in rendered if o["kind"] != "DeviceClass"]
    plan = inputs.validate_plan(planner.plan("s", planned, classes, templates, kubernetes_version="1.36"))
    html = pages.plan_html(plan)
    assert [a.get("class") for t, a in parse(html) if t == "table" and a.get("class") == "thin"] == ["thin"]
    assert "Thin provisioning of burstable fractional GPUs" in html
    # 4 claims of 20Gi on each 80Gi GPU, each promised 40Gi: 160 of 80Gi
    assert '<tr data-template="fractional-gpu-burst"><td>fractional-gpu-burst</td><td class="num">20 GiB</td>' in html
    assert '<td class="num warn">2.00</td>' in html
    assert "thin ratio 2.00: 2 nodes (n1, n2)" in html
    assert "evicting the pod" in html
    # no burstable template: no section
    plain = [t for t in templates if t["metadata"]["name"] != "fractional-gpu-burst"]
    assert "Thin provisioning" not in pages.plan_html(inputs.validate_plan(planner.plan("s", planned, classes, plain)))
