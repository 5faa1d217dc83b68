# SPDX-License-Identifier: Apache-2.0
"""controller/topology/summary.py: the rails in a node's and a site's summary, and in summary.md."""

from __future__ import annotations

import json

from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import summary

DGX_RULE = {"by": "pci_order", "count": 8, "exclude": ["eno*"]}


def test_node_summary_gives_each_rdma_nic_its_rail_on_a_probed_dgx(layouts):
    node = summary.node_summary(layouts("dgx-h100"), rails=DGX_RULE, node_name="dgx-01")
    entry = node["rails"]
    assert entry["rule"] == "by pci_order" and entry["count"] == 8 and entry["problems"] == []
    on = {nic["pci_address"]: nic["rail"] for nic in entry["nics"] if nic["rail"] is not None}
    assert on == {
        "0000:1d:00.0": 0,
        "0000:2e:00.0": 1,
        "0000:3f:00.0": 2,
        "0000:50:00.0": 3,
        "0000:9d:00.0": 4,
        "0000:ae:00.0": 5,
        "0000:bf:00.0": 6,
        "0000:d0:00.0": 7,
    }
    off = [(nic["netdevs"], nic["why"]) for nic in entry["nics"] if nic["rail"] is None]
    assert off == [(["eno1np0"], "excluded by the rule"), (["eno2np1"], "excluded by the rule")]
    json.dumps(node)  # summary.json is written as JSON


def test_no_rule_gives_no_rails_and_changes_nothing_else(layouts):
    without = summary.node_summary(layouts("dgx-h100"))
    assert without["rails"] is None
    with_rule = summary.node_summary(layouts("dgx-h100"), rails=DGX_RULE)
    assert {k: v for k, v in with_rule.items() if k != "rails"} == {k: v for k, v in without.items() if k != "rails"}


def test_what_the_validation_refuses_is_a_warning_of_the_summary(layouts):
    node = summary.node_summary(layouts("dgx-h100"), rails=dict(DGX_RULE, count=9), node_name="dgx-01")
    assert node["warnings"][-1] == "rails: rails 8 of count 9: no RDMA NIC is on them (rule by pci_order)"


def test_site_summary_counts_nics_per_rail_and_markdown_lists_every_nic(layouts):
    nodes = {
        "dgx-01": summary.node_summary(layouts("dgx-h100"), rails=DGX_RULE, node_name="dgx-01"),
        "vm-01": summary.node_summary(layouts("vm-flat"), rails={"by": "map", "map": {"0000:00:03.0": 0}}),
        "old-01": summary.node_summary(layouts("vm-flat")),
    }
    del nodes["old-01"]["rails"]  # a node summary from before rails: no rule
    site = summary.site_summary_of("west", nodes)
    assert site["rails"] == {
        "nodes": 2,
        "per_rail": {"0": 2, **{str(r): 1 for r in range(1, 8)}},
        "on_no_rail": 2,
        "unknown": 0,
    }
    text = summary.site_summary_markdown(site)
    assert "## Rails" in text
    assert "2 nodes with a rule (aligned_dra_rails); RDMA NICs per rail: rail 0 2, rail 1 1," in text
    rails_part = text.split("## Rails")[1].split("\n## ")[0]  # up to the next section (GPUDirect RDMA)
    dgx = next(line for line in rails_part.splitlines() if line.startswith("| dgx-01 |"))
    assert "0000:1d:00.0 (ibp29s0): rail 0" in dgx
    assert "0000:5a:00.0 (eno1np0): on no rail (excluded by the rule)" in dgx
    assert "| vm-01 | by map | 0000:00:03.0: rail 0 |" in text
    assert "| old-01 |" not in rails_part


def test_a_site_without_rules_has_no_rails_section(layouts):
    site = summary.site_summary("east", {"a": layouts("vm-flat")})
    assert site["rails"] is None
    assert "## Rails" not in summary.site_summary_markdown(site)


def test_a_pattern_with_alternation_does_not_break_the_markdown_table(layouts):
    rule = {"by": "netdev_name", "pattern": r"^(?:ib|mlx)(\d+)$"}
    site = summary.site_summary_of("s", {"a": summary.node_summary(layouts("hyperv-ndv4"), rails=rule)})
    (row,) = [line for line in summary.site_summary_markdown(site).splitlines() if line.startswith("| a | by netdev")]
    assert row.startswith("| a | by netdev_name '^(?:ib\\|mlx)(\\d+)$' | 0101:00:00.0 (ib0): rail 0;")


def test_a_subnet_rule_on_a_captured_tree_is_an_unknown_rail_in_the_markdown(layouts):
    rule = {"by": "subnet", "subnets": ["192.168.128.0/21", "192.168.136.0/21"]}
    node = summary.node_summary(layouts("dgx-h100"), rails=rule, node_name="dgx-01")
    site = summary.site_summary_of("s", {"dgx-01": node})
    assert site["rails"]["unknown"] == 10 and site["rails"]["on_no_rail"] == 0
    assert "10 on an unknown rail" in summary.site_summary_markdown(site)
