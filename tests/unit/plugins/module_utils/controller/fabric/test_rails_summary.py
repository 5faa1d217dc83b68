# SPDX-License-Identifier: Apache-2.0
"""controller/fabric/rails_summary.py: a node's rails as summary.json and the report show them."""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.fabric import rails_summary


def nic(address: str, name: str | None, vfs: tuple[str, ...] = ()) -> list[dict]:
    pf = {"pci_address": address, "kind": "rdma", "netdevs": [{"name": name}] if name else [], "physfn": None}
    return [pf, *({"pci_address": vf, "kind": "rdma", "physfn": address, "netdevs": []} for vf in vfs)]


NODE = {
    "devices": [
        *nic("0000:1d:00.0", "nic0", ("0000:1d:00.2",)),
        *nic("0000:2e:00.0", "nic1"),
        *nic("0000:5a:00.0", "eno1np0"),
    ]
}


def test_no_rule_no_rails():
    assert rails_summary.node_rails_summary(NODE, None, "a") is None
    assert rails_summary.node_rails_summary(NODE, {}, "a") is None


def test_each_rdma_nic_gets_its_rail_or_why_it_has_none():
    entry = rails_summary.node_rails_summary(NODE, {"by": "pci_order", "count": 2, "exclude": ["eno*"]}, "a")
    assert entry == {
        "rule": "by pci_order",
        "count": 2,
        "nics": [
            {"pci_address": "0000:1d:00.0", "netdevs": ["nic0"], "rail": 0, "why": "PCI order 0", "unknown": False},
            {"pci_address": "0000:2e:00.0", "netdevs": ["nic1"], "rail": 1, "why": "PCI order 1", "unknown": False},
            {
                "pci_address": "0000:5a:00.0",
                "netdevs": ["eno1np0"],
                "rail": None,
                "why": "excluded by the rule",
                "unknown": False,
            },
        ],
        "problems": [],
    }


def test_problems_lose_the_host_prefix_and_a_malformed_rule_is_said():
    entry = rails_summary.node_rails_summary(NODE, {"by": "pci_order", "count": 4, "exclude": ["eno*"]}, "gpu-01")
    assert entry["problems"] == ["rails 2, 3 of count 4: no RDMA NIC is on them (rule by pci_order)"]
    bad = rails_summary.node_rails_summary(NODE, {"by": "cabling"}, "gpu-01")
    assert bad["rule"] is None and bad["nics"] == []
    assert bad["problems"] == ["aligned_dra_rails.by: one of pci_order, netdev_name, subnet, map (got 'cabling')"]


def test_subnet_reads_the_probes_addresses_and_on_a_captured_tree_the_rails_are_unknown_not_none():
    rule = {"by": "subnet", "subnets": ["192.168.128.0/21", "192.168.136.0/21"], "exclude": ["eno*"]}
    live = dict(NODE, netdev_addresses={"nic0": ["192.168.136.7/21"], "nic1": ["192.168.128.7/21"], "eno1np0": []})
    assert [n["rail"] for n in rails_summary.node_rails_summary(live, rule, "a")["nics"]] == [1, 0, None]
    captured = dict(NODE, netdev_addresses=None)
    entry = rails_summary.node_rails_summary(captured, dict(rule, count=2), "a")
    assert [(n["rail"], n["unknown"], n["why"]) for n in entry["nics"]] == [
        (None, True, "addresses not read"),
        (None, True, "addresses not read"),
        (None, False, "excluded by the rule"),
    ]
    assert entry["problems"] == []  # unknown is not wrong: the validation does not refuse it either
    assert rails_summary.rails_in_short(entry) == "2 rails unknown, 1 on no rail"
    assert rails_summary.nic_rail_text(entry["nics"][0]) == "rail unknown (addresses not read)"
    assert rails_summary.site_rails_summary([entry]) == {"nodes": 1, "per_rail": {}, "on_no_rail": 1, "unknown": 2}


def test_per_node_map_uses_the_node_name():
    rule = {"by": "map", "nodes": {"k8s-a": {"0000:2e:00.0": 0}}}
    assert [n["rail"] for n in rails_summary.node_rails_summary(NODE, rule, "k8s-a")["nics"]] == [None, 0, None]


def test_an_empty_probe_is_a_node_without_nics():
    entry = rails_summary.node_rails_summary({}, {"by": "pci_order"}, "a")
    assert (entry["rule"], entry["nics"], entry["problems"]) == ("by pci_order", [], [])


def test_site_rails_counts_nics_per_rail_and_on_no_rail():
    one = rails_summary.node_rails_summary(NODE, {"by": "pci_order", "exclude": ["eno*"]}, "a")
    two = rails_summary.node_rails_summary(NODE, {"by": "pci_order"}, "b")
    assert rails_summary.site_rails_summary([one, two, None]) == {
        "nodes": 2,
        "per_rail": {"0": 2, "1": 2, "2": 1},
        "on_no_rail": 1,
        "unknown": 0,
    }
    # a summary.json written before the flag: the reason still tells an unknown rail from none
    older = {"rule": "by subnet (1 subnets)", "nics": [{"rail": None, "why": "addresses not read"}]}
    assert (
        rails_summary.site_rails_summary([older])["unknown"] == 1
        and rails_summary.site_rails_summary([older])["on_no_rail"] == 0
    )
    assert rails_summary.site_rails_summary([None, None]) is None


def test_texts():
    entry = rails_summary.node_rails_summary(NODE, {"by": "pci_order", "exclude": ["eno*"]}, "a")
    assert rails_summary.rails_in_short(entry) == "rails 0-1, 1 on no rail"
    assert rails_summary.rails_in_short(None) == "-"
    assert rails_summary.rails_in_short({"rule": None, "nics": []}) == "rule not readable"
    gaps = {"rule": "by map", "nics": [{"rail": r} for r in (0, 2, 3, 5, 3)]}
    assert rails_summary.rails_in_short(gaps) == "rails 0, 2-3, 5"
    assert rails_summary.rails_in_short({"rule": "by map", "nics": [{"rail": 4}]}) == "rail 4"
    assert (
        rails_summary.rails_in_short({"rule": "by map", "nics": [{"rail": None}]}) == "no NIC on a rail, 1 on no rail"
    )
    mixed = {"rule": "by subnet", "nics": [{"rail": 0}, {"rail": None, "unknown": True, "why": "addresses not read"}]}
    assert rails_summary.rails_in_short(mixed) == "rail 0, 1 rail unknown"
    assert rails_summary.nic_rail_text(entry["nics"][2]) == "on no rail (excluded by the rule)"
    assert rails_summary.nic_rail_text(entry["nics"][0]) == "rail 0"
    assert rails_summary.nic_label(entry["nics"][0]) == "0000:1d:00.0 (nic0)"
    assert rails_summary.nic_label({"pci_address": "0000:00:03.0", "netdevs": []}) == "0000:00:03.0"
