# SPDX-License-Identifier: Apache-2.0
"""The report shows what flows (issue 77): per node GPUDirect RDMA ready or not and why, per pair the path,
the site's counts; a site of older facts gets the page it got before."""

from __future__ import annotations

import re

from ansible_collections.aligned.dra.plugins.module_utils.controller.report import pages as report
from ansible_collections.aligned.dra.plugins.module_utils.controller.report.layouts import layout_fingerprint
from ansible_collections.aligned.dra.tests.unit.plugins.module_utils.controller.topology.gpudirect_sites import (
    GPU,
    NIC,
    dgx_topology,
    without_gpudirect,
)


def test_the_site_page_shows_each_nodes_gpudirect_and_each_pairs_path():
    nodes = {"blocked": dgx_topology(ready=False), "old": without_gpudirect(dgx_topology())}
    html = str(report.site_report("s", nodes)["html"])
    assert "<h2>GPUDirect RDMA</h2>" in html
    counts = re.search(r'<p class="gpudirect-counts"([^>]*)>', html).group(1)
    assert 'data-not-ready="1"' in counts and 'data-unknown="1"' in counts
    assert 'data-rerouted="1"' in counts and 'data-unverified="1"' in counts
    row = re.search(r'<tr data-gpudirect-host="blocked".*?</tr>', html).group(0)
    assert 'data-ready="no"' in row and "the IOMMU translates (group type DMA-FQ)" in row
    assert "PIX \u2192 PHB, host bridge (ACS redirect at 0000:22:00.0)" in row
    assert "unverified (ACS not readable at 0000:32:01.0)" in row
    assert 'data-gpudirect-host="old" data-ready="unknown"' in html
    # the matrix keeps nvidia-smi's level and shows the one traffic flows at
    cell = re.search(rf'<td class="lv-PHB best path-host_bridge" data-gpu="{GPU["B"]}" data-nic="{NIC["B"]}"[^>]*>'
                     r"([^<]*)</td>", html)  # fmt: skip
    assert cell.group(1) == "PIX &rarr; PHB"
    # the node whose ACS was read and the one that predates it are drawn apart
    assert layout_fingerprint(nodes["blocked"]) != layout_fingerprint(nodes["old"])


def test_a_site_of_older_facts_has_no_gpudirect_section_and_its_layout_is_unchanged():
    old = without_gpudirect(dgx_topology())
    html = str(report.site_report("s", {"n": old})["html"])
    assert "GPUDirect" not in html and "data-path" not in html and "&rarr;" not in html
    model_keys = report.group_layouts({"n": old})[0]["model"].keys()
    assert set(model_keys) == {"numa_nodes", "devices", "switches", "links", "nearest_nics"}
