# SPDX-License-Identifier: Apache-2.0
"""The site summary counts what flows (issue 77): nearest NICs at the level traffic flows at, per node
GPUDirect RDMA ready or not, the aligned pairs through the host bridge and the unverified ones."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import summary as topo_summary
from ansible_collections.aligned.dra.tests.unit.plugins.module_utils.controller.topology.gpudirect_sites import (
    GPU,
    NIC,
    dgx_topology,
    without_gpudirect,
)


def test_node_and_site_summaries_count_pairs_through_the_host_bridge_and_unverified_ones():
    nodes = {"ready": dgx_topology(), "blocked": dgx_topology(ready=False), "old": without_gpudirect(dgx_topology())}
    found = topo_summary.site_summary("s", nodes)
    node = found["per_node"]["ready"]
    assert node["best_level_per_gpu"][GPU["B"]] == {"level": "PHB", "nics": [NIC["B"]]}
    assert node["best_rdma_level_per_accelerator"][GPU["B"]]["level"] == "PHB"
    assert node["level_histogram"] == {"PIX": 2, "PHB": 1}
    gpudirect = node["gpudirect"]
    assert (gpudirect["ready"], gpudirect["iommu"], gpudirect["peer_memory"]) == (True, "passthrough", "dma_buf")
    assert gpudirect["paths"] == {"aligned": 3, "direct": 1, "host_bridge": 1, "unknown": 1, "rerouted": 1}
    assert [(p["gpu"], p["path"], p["level"], p["ready"]) for p in gpudirect["pairs"]] == [
        (GPU["A"], "direct", "PIX", True),
        (GPU["B"], "host_bridge", "PHB", False),
        (GPU["C"], "unknown", "PIX", False),  # unverified: never GPUDirect-ready
    ]
    assert gpudirect["pairs"][1]["text"] == "host bridge (ACS redirect at 0000:22:00.0)"
    assert gpudirect["pairs"][2]["text"] == "unverified (ACS not readable at 0000:32:01.0)"
    blocked = found["per_node"]["blocked"]["gpudirect"]
    assert (blocked["ready"], blocked["reasons"]) == (False, ["the IOMMU translates (group type DMA-FQ)"])
    assert not any(p["ready"] for p in blocked["pairs"])
    assert found["gpudirect"] == {
        "nodes": {"ready": 1, "not_ready": 1, "unknown": 1},
        "pairs": {"aligned": 6, "direct": 2, "host_bridge": 2, "unknown": 2, "rerouted": 2},
    }
    text = topo_summary.site_summary_markdown(found)
    assert "## GPUDirect RDMA" in text
    assert "2 through the host bridge (counted at PHB), 2 unverified" in text
    assert "| old | unknown | not probed | - |" in text


def test_a_site_of_older_facts_summarises_as_before():
    old = without_gpudirect(dgx_topology())
    found = topo_summary.site_summary("s", {"n": old})
    assert "gpudirect" not in found and "gpudirect" not in found["per_node"]["n"]
    assert found["per_node"]["n"]["best_level_per_gpu"] == old["nearest_nics"]
    assert "GPUDirect" not in topo_summary.site_summary_markdown(found)
