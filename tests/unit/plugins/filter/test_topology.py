# SPDX-License-Identifier: Apache-2.0
"""Site summary filters over per-node topology facts."""

from __future__ import annotations

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.filter.topology import (
    FilterModule,
    topology_site_index,
    topology_site_summaries,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import fact as topology_fact


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


def test_the_probes_slim_facts_summarise_like_whole_topologies(tmp_path):
    slim = {}
    for host, facts in HOSTVARS.items():
        path = str(tmp_path / f"{host}.json")
        topology_fact.keep(path, facts["aligned_dra_topology"])
        slim[host] = dict(facts, aligned_dra_topology=topology_fact.fact_of(facts["aligned_dra_topology"], path))
    hosts = ["a1", "a2", "b1"]
    assert topology_site_summaries(slim, hosts) == topology_site_summaries(HOSTVARS, hosts)
    (tmp_path / "a2.json").unlink()
    with pytest.raises(AnsibleFilterError, match=r"a2: the topology of aligned_dra_topology.file cannot be read"):
        topology_site_summaries(slim, hosts)


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


def test_index_keeps_the_sites_of_a_run_limited_to_others(tmp_path):
    """--limit east, then --limit west: index.json lists both, as long as east's summary is there."""
    summaries = topology_site_summaries(HOSTVARS, ["a1", "a2", "b1"])
    east_only = topology_site_index({"east": summaries["east"]}, str(tmp_path))
    (tmp_path / "index.json").write_text(json.dumps(east_only))
    (tmp_path / "east").mkdir()
    (tmp_path / "east" / "summary.json").write_text("{}")
    both = topology_site_index({"west": summaries["west"]}, str(tmp_path))
    assert [s["site"] for s in both["sites"]] == ["east", "west"]
    assert both["sites"][0] == east_only["sites"][0]
    # a site summarised now replaces its earlier entry
    again = topology_site_index({"east": {**summaries["east"], "warnings": []}}, str(tmp_path))
    assert [s["site"] for s in again["sites"]] == ["east"] and again["sites"][0]["warnings"] == 0
    # a site whose directory is gone, a damaged entry or a damaged index.json: not kept
    (tmp_path / "east" / "summary.json").unlink()
    assert [s["site"] for s in topology_site_index({"west": summaries["west"]}, str(tmp_path))["sites"]] == ["west"]
    (tmp_path / "index.json").write_text('{"sites": [5, {"site": "../up"}, {"site": 7}]}')
    assert [s["site"] for s in topology_site_index({"west": summaries["west"]}, str(tmp_path))["sites"]] == ["west"]
    (tmp_path / "index.json").write_text("not json")
    assert [s["site"] for s in topology_site_index({}, str(tmp_path))["sites"]] == []


def test_failed_and_unreachable_nodes_are_accounted_for_and_left_out(tmp_path):
    from ansible_collections.aligned.dra.plugins.filter.topology import topology_node_accounting

    hostvars = {
        **HOSTVARS,
        "a3": {
            "aligned_dra_site": "east",
            "aligned_dra_node_failure": {"state": "failed", "stage": "network", "task": "SR-IOV", "error": "boom"},
        },
        "a4": {"aligned_dra_site": "east"},
        "c1": {"aligned_dra_site": "gone", "aligned_dra_topology": node({})},
    }
    (tmp_path / "east" / "nodes").mkdir(parents=True)
    (tmp_path / "east" / "nodes" / "a3.json").write_text("{}")
    targeted = ["a1", "a2", "a3", "a4", "b1", "c1"]
    accounting = topology_node_accounting(hostvars, targeted, ["a1", "a2", "a3", "b1"], "probe", str(tmp_path))
    east = accounting["east"]
    assert east["node_counts"] == {"ok": 2, "failed": 1, "unreachable": 1}
    assert east["nodes_failed"]["a3"]["stage"] == "network" and east["nodes_failed"]["a3"]["task"] == "SR-IOV"
    stale = east["nodes_failed"]["a3"]["stale_facts"]
    assert stale["file"] == "nodes/a3.json" and stale["used"] is False and 0 <= stale["age_s"] < 60
    assert east["nodes_failed"]["a4"] == {
        "state": "unreachable",
        "stage": "probe",
        "task": None,
        "error": east["nodes_failed"]["a4"]["error"],
        "stale_facts": None,
    }
    assert east["unrecorded"] == ["a4"]
    assert east["line"] == "site east: nodes 2 ok / 1 failed / 1 unreachable"
    assert accounting["gone"]["node_counts"] == {"ok": 0, "failed": 0, "unreachable": 1}

    # a3 still in the hosts (failing right now) is left out; a site whose nodes all failed gets a summary
    summaries = topology_site_summaries(hostvars, ["a1", "a2", "b1"], ["SYS"], accounting)
    assert sorted(summaries["east"]["per_node"]) == ["a1", "a2"] and summaries["east"]["nodes"] == 2
    assert summaries["east"]["node_counts"] == east["node_counts"]
    assert summaries["gone"]["nodes"] == 0 and list(summaries["gone"]["nodes_failed"]) == ["c1"]
    assert "- a3: failed in stage network, task SR-IOV: boom (facts file of an earlier run" in (
        FilterModule().filters()["topology_summary_markdown"](summaries["east"])
    )
    assert topology_site_index(summaries)["sites"][0]["node_counts"] == east["node_counts"]


def test_a_bad_failure_fact_is_named():
    from ansible_collections.aligned.dra.plugins.filter.topology import topology_node_accounting

    bad = {"x": {"aligned_dra_site": "s", "aligned_dra_node_failure": {"state": "lost", "stage": "probe"}}}
    with pytest.raises(AnsibleFilterError, match="x: aligned_dra_node_failure.state 'lost'"):
        topology_node_accounting(bad, ["x"], [], "probe")
    with pytest.raises(AnsibleFilterError, match="x: aligned_dra_node_failure must be a dict"):
        topology_node_accounting({"x": {"aligned_dra_node_failure": "oops"}}, ["x"], [], "probe")


def test_each_hosts_rails_rule_is_read_against_its_probe_with_its_node_name():
    rdma = node({"0000:01:00.0": "PIX"}, nics=2)
    hostvars = {
        "a1": {"aligned_dra_site": "east", "aligned_dra_topology": rdma, "aligned_dra_rails": {"by": "pci_order"}},
        "a2": {
            "aligned_dra_site": "east",
            "aligned_dra_topology": rdma,
            "aligned_dra_driver_node_name": "k8s-a2",
            "aligned_dra_rails": {"by": "map", "nodes": {"k8s-a2": {"0000:91:00.0": 0}}},
        },
        "a3": {"aligned_dra_site": "east", "aligned_dra_topology": rdma},
    }
    east = topology_site_summaries(hostvars, ["a1", "a2", "a3"])["east"]
    assert [n["rail"] for n in east["per_node"]["a1"]["rails"]["nics"]] == [0, 1]
    assert [n["rail"] for n in east["per_node"]["a2"]["rails"]["nics"]] == [None, 0]
    assert east["per_node"]["a3"]["rails"] is None
    assert east["rails"] == {"nodes": 2, "per_rail": {"0": 2, "1": 1}, "on_no_rail": 1, "unknown": 0}
