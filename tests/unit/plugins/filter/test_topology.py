# SPDX-License-Identifier: Apache-2.0
"""Site summary filters over per-node topology facts."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.filter.topology import (
    FilterModule,
    topology_site_index,
    topology_site_summaries,
)


def node(gpus: dict[str, str | None], nics: int = 1, vfs: int = 0, warnings=()):
    """A topology fact with GPUs whose nearest NIC is at the given level."""
    devices = [{"pci_address": bdf, "kind": "gpu", "physfn": None} for bdf in gpus]
    devices += [{"pci_address": f"0000:9{i}:00.0", "kind": "rdma", "physfn": None} for i in range(nics)]
    devices += [{"pci_address": f"0000:a0:00.{i}", "kind": "rdma", "physfn": "0000:90:00.0"} for i in range(vfs)]
    nearest = {bdf: {"level": level, "nics": ["0000:90:00.0"] if level else []} for bdf, level in gpus.items()}
    return {"devices": devices, "nearest_nics": nearest, "numa_nodes": [{"id": 0}], "warnings": list(warnings)}


HOSTVARS = {
    "a1": {"aligned_dra_site": "east", "aligned_dra_topology": node({"0000:01:00.0": "PIX", "0000:02:00.0": "SYS"})},
    "a2": {"aligned_dra_site": "east", "aligned_dra_topology": node({"0000:01:00.0": "PXB"}, vfs=4, warnings=["w"])},
    "b1": {"aligned_dra_site": "west", "aligned_dra_topology": node({"0000:01:00.0": None}, nics=0)},
}


def test_sites_are_grouped_and_counted():
    summaries = topology_site_summaries(HOSTVARS, ["a1", "a2", "b1"])
    assert sorted(summaries) == ["east", "west"]
    east = summaries["east"]
    assert (east["nodes"], east["gpus"], east["nics"], east["vfs"]) == (2, 3, 2, 4)
    assert east["level_histogram"] == {"PIX": 1, "PXB": 1, "SYS": 1}
    assert east["per_node"]["a1"]["best_level_per_gpu"]["0000:02:00.0"]["level"] == "SYS"
    assert east["warnings"] == ["a1: gpu 0000:02:00.0 has no NIC closer than SYS", "a2: w"]
    assert summaries["west"]["warnings"] == ["b1: gpu 0000:01:00.0 has no NIC on this node"]


def test_warn_levels_widen_the_warnings():
    east = topology_site_summaries(HOSTVARS, ["a1", "a2"], ["PXB", "SYS"])["east"]
    assert "a2: gpu 0000:01:00.0 has no NIC closer than PXB" in east["warnings"]


def test_only_play_hosts_are_summarised():
    assert list(topology_site_summaries(HOSTVARS, ["b1"])) == ["west"]


def test_bad_input_is_named():
    with pytest.raises(AnsibleFilterError, match="warn_levels"):
        topology_site_summaries(HOSTVARS, ["a1"], ["CLOSE"])
    with pytest.raises(AnsibleFilterError, match="c9: no aligned_dra_topology"):
        topology_site_summaries({"c9": {"aligned_dra_site": "x"}}, ["c9"])


def test_index_and_markdown():
    summaries = topology_site_summaries(HOSTVARS, ["a1", "a2", "b1"])
    index = topology_site_index(summaries)
    assert [s["site"] for s in index["sites"]] == ["east", "west"]
    assert index["sites"][0]["node_files"] == ["east/nodes/a1.json", "east/nodes/a2.json"]
    markdown = FilterModule().filters()["topology_summary_markdown"](summaries["east"])
    assert markdown.startswith("# Site east\n")
    assert "| a1 | 1 | 2 | 1 | 0 | 0000:01:00.0: 0000:90:00.0 (PIX); 0000:02:00.0: 0000:90:00.0 (SYS) |" in markdown
    assert "- a1: gpu 0000:02:00.0 has no NIC closer than SYS" in markdown
