# SPDX-License-Identifier: Apache-2.0
"""Site report pictures: what the SVG of a layout draws, and texts cut to fit their boxes."""

from __future__ import annotations

import re

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import layouts, pages
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.svg import (
    NUMA_COLOURS,
    fit_text,
    text_width,
)
from ansible_collections.aligned.dra.tests.support.sites.report_sites import DEMO_FIXTURES, parse, topology_of

# ---------------------------------------------------------------- picture


@pytest.mark.parametrize("fixture", DEMO_FIXTURES)
def test_picture_draws_every_gpu_and_physical_nic_once(fixture):
    topology = topology_of(fixture)
    model = layouts.layout_model(topology)
    svg = pages.node_svg(model)
    tags = parse(svg)
    drawn = [a["data-bdf"] for t, a in tags if t == "g" and "dev" in (a.get("class") or "").split()]
    shown = [a["data-bdf"] for t, a in tags if t == "g" and {"gpu", "nic"} & set((a.get("class") or "").split())]
    plain = {a["data-bdf"] for t, a in tags if t == "g" and "plain" in (a.get("class") or "").split()}
    # NICs the planner does not pair with (no RDMA device) are drawn, marked plain.
    assert plain == {d["pci_address"] for d in topology["devices"] if d["kind"] == "nic" and not d.get("physfn")}
    expected = sorted(
        d["pci_address"]
        for d in topology["devices"]
        if d["kind"] in ("gpu", "accelerator", "nic", "rdma") and not d.get("physfn")
    )
    assert sorted(shown) == expected
    assert len(drawn) == len(set(drawn))
    numa_bands = {a["data-numa"] for t, a in tags if t == "g" and a.get("class") == "numa"}
    assert numa_bands >= {str(n["id"]) for n in topology["numa_nodes"]}


def test_picture_highlights_the_nearest_nic_of_each_gpu():
    topology = topology_of("dgx-h100")
    svg = pages.node_svg(layouts.layout_model(topology))
    pairs = {
        (a["data-gpu"], a["data-nic"], a["data-level"]) for t, a in parse(svg) if t == "path" and a.get("data-gpu")
    }
    expected = {(gpu, nic, e["level"]) for gpu, e in topology["nearest_nics"].items() for nic in e["nics"]}
    assert pairs == expected


def test_vfs_are_not_drawn_one_by_one():
    topology = topology_of("sriov-8x64")
    svg = pages.node_svg(layouts.layout_model(topology))
    assert svg.count("+64 VFs") == 8
    vf = next(d["pci_address"] for d in topology["devices"] if d.get("physfn"))
    assert f'data-bdf="{vf}"' not in svg


def test_numa_colours_follow_the_device_numa_node():
    svg = pages.node_svg(layouts.layout_model(topology_of("mi300x")))
    gpu_on_0 = re.search(r'data-bdf="0000:01:00.0"><rect [^>]*stroke="([^"]+)"', svg).group(1)
    gpu_on_1 = re.search(r'data-bdf="0000:81:00.0"><rect [^>]*stroke="([^"]+)"', svg).group(1)
    assert (gpu_on_0, gpu_on_1) == (NUMA_COLOURS[0], NUMA_COLOURS[1])


def test_unknown_numa_gets_its_own_band():
    topology = topology_of("vm-flat")
    for device in topology["devices"]:
        device["numa_node"] = None
        device["numa_node_inferred"] = None
    svg = pages.node_svg(layouts.layout_model(topology))
    assert 'data-numa="unknown"' in svg and "NUMA node unknown (-1)" in svg


# ---------------------------------------------------------------- texts


def test_long_labels_are_cut_to_their_box_with_the_full_text_in_a_title():
    topology = topology_of("dgx-h100")
    long_model = "NVIDIA H100 80GB HBM3 Extremely Long Model Name For Testing WWWWMMMM"
    for device in topology["devices"]:
        if device.get("gpu"):
            device["gpu"]["model"] = long_model
    page = pages.site_report("s", {"a": topology})["html"]
    assert f"<title>{long_model}</title>" in page
    sizes = {"band": 13.0, "sub": 10.0, "vfs": 10.0}
    found = re.findall(r'(?: class="(\w+)")? data-width="(\d+)">(?:<title>[^<]*</title>)?([^<]*)</text>', page)
    assert len(found) > 50
    for cls, width, text in found:
        assert text_width(text, sizes.get(cls, 11.0)) <= int(width) + 1, text


@pytest.mark.parametrize(
    "text", ["WWWWWWWWWWWWWWWWWWWW", "iiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiiii", "0000:1a:00.0 mlx5_0 x"]
)
def test_fit_text_keeps_the_bound(text):
    fitted = fit_text(text, 60, 11)
    assert text_width(fitted["text"], 11) <= 60
    assert fitted["full"] in ("", text)
