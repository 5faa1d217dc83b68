# SPDX-License-Identifier: Apache-2.0
"""The site's rails on the controller: every host's rule against its probe, and the driver's rails file."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.fabric import rails as fabric
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import rails as rail_rule


def _nic(address: str, name: str, vfs: tuple[str, ...] = ()) -> list[dict]:
    pf = {"pci_address": address, "kind": "rdma", "netdevs": [{"name": name}], "rdma_devices": ["mlx5_x"]}
    return [pf] + [{"pci_address": vf, "kind": "rdma", "physfn": address, "netdevs": []} for vf in vfs]


def _topology(*nics: list[dict]) -> dict:
    return {"devices": [device for nic in nics for device in nic]}


TWO_RAILS = _topology(_nic("0000:1d:00.0", "nic0", ("0000:1d:00.2",)), _nic("0000:2e:00.0", "nic1"))


def every_host_rails(hosts: dict) -> dict:
    """``{"hosts", "problems"}`` of several hosts, each read by :func:`fabric.host_rails`.

    ``hosts`` maps host to ``rule``, ``node_name`` and ``topology`` (``None``:
    not probed). ``hosts`` keeps the hosts with a well-formed rule and a probe
    (one with a rule and no probe has unknown rails, not none); ``problems``
    are every host's, prefixed with the host.
    """
    found = {}
    problems = []
    for host in sorted(hosts):
        values = hosts[host]
        entry = fabric.host_rails(host, values.get("rule"), values.get("node_name"), values.get("topology"))
        if entry is None:
            continue
        problems.extend(f"{host}: {problem}" for problem in entry["problems"])
        if entry["rule"] is not None and values.get("topology") is not None:
            found[host] = entry
    return {"hosts": found, "problems": problems}


def test_every_host_with_a_rule_and_a_probe_gets_its_rails_vfs_included():
    found = every_host_rails(
        {
            "a": {"rule": {"by": "netdev_name", "pattern": r"^nic(\d+)$", "count": 2}, "topology": TWO_RAILS},
            "b": {"rule": None, "topology": TWO_RAILS},
        }
    )
    assert found["problems"] == []
    assert list(found["hosts"]) == ["a"]
    assert found["hosts"]["a"]["rails"] == {"0000:1d:00.0": 0, "0000:1d:00.2": 0, "0000:2e:00.0": 1}
    assert found["hosts"]["a"]["node_name"] == "a"


def test_a_host_without_a_probe_has_unknown_rails_not_none():
    found = every_host_rails({"a": {"rule": {"by": "pci_order"}, "topology": None}})
    assert found == {"hosts": {}, "problems": []}
    # not probed, the rule is still checked for its shape
    found = every_host_rails({"a": {"rule": {"by": "pci_order", "count": 0}, "topology": None}})
    assert found["problems"] == ["a: aligned_dra_rails.count: an integer from 1 to 64 (got 0)"]


def test_problems_name_the_host_the_nic_and_the_rule():
    found = every_host_rails(
        {
            "a": {"rule": {"by": "map", "map": {"0000:1d:00.0": 0, "0000:2e:00.0": 0}}, "topology": TWO_RAILS},
            "b": {"rule": {"by": "pci_order", "count": 3}, "topology": TWO_RAILS},
            "c": {"rule": {"by": "netdev_name", "pattern": "nic"}, "topology": TWO_RAILS},
        }
    )
    assert found["problems"] == [
        "a: rail 0 given to 2 NICs: 0000:1d:00.0 (nic0) and 0000:2e:00.0 (nic1) (rule by map)",
        "b: rails 2 of count 3: no RDMA NIC is on them (rule by pci_order)",
        "c: aligned_dra_rails.pattern: 'nic' has no group; its first group is the rail (e.g. '^nic(\\d+)$')",
    ]
    assert sorted(found["hosts"]) == ["a", "b"]  # c's rule is malformed: no rails to give


SUBNETS = {"by": "subnet", "subnets": ["192.168.128.0/21", "192.168.136.0/21"], "exclude": ["nic1"]}


def test_a_subnet_rule_without_addresses_gives_unknown_rails_and_no_problem():
    # a captured tree (netdev_addresses null): the rule cannot place nic0; nic1 is excluded, so on no rail
    entry = fabric.host_rails("a", dict(SUBNETS, count=2), "k8s-a", dict(TWO_RAILS, netdev_addresses=None))
    assert [(n["rail"], n["unknown"], n["why"]) for n in entry["nics"]] == [
        (None, True, "addresses not read"),
        (None, False, "excluded by the rule"),
    ]
    assert entry["rails"] == {} and entry["problems"] == []  # count 2 is not "missing": it is unknown
    assert entry["unknown"] == (
        "rails unknown: rule by subnet (2 subnets) places NICs by their IPv4 addresses, "
        "and none were read on this node (a captured tree)"
    )
    assert entry["node_name"] == "k8s-a"
    # the same rule with the addresses read: known rails, and what is wrong is a problem again
    live = dict(TWO_RAILS, netdev_addresses={"nic0": ["192.168.136.4/21"]})
    entry = fabric.host_rails("a", dict(SUBNETS, count=2), None, live)
    assert [(n["rail"], n["unknown"]) for n in entry["nics"]] == [(1, False), (None, False)]
    assert entry["unknown"] is None and entry["rails"] == {"0000:1d:00.0": 1, "0000:1d:00.2": 1}
    assert entry["problems"] == ["rails 0 of count 2: no RDMA NIC is on them (rule by subnet (2 subnets))"]


def test_host_rails_without_a_rule_a_probe_or_a_good_rule():
    assert fabric.host_rails("a", None, None, TWO_RAILS) is None
    assert fabric.host_rails("a", {}, None, TWO_RAILS) is None
    not_probed = fabric.host_rails("a", {"by": "pci_order"}, None, None)
    assert (not_probed["nics"], not_probed["problems"]) == ([], [])
    assert not_probed["unknown"] == "rails unknown: the node was not probed in this run"
    bad = fabric.host_rails("a", {"by": "cabling"}, None, None)
    assert bad["rule"] is None and bad["problems"][0].startswith("aligned_dra_rails.by: one of")


def test_a_nic_is_unknown_by_its_flag_or_in_an_older_summary_by_its_reason():
    assert fabric.nic_unknown({"rail": None, "why": "x", "unknown": True})
    assert fabric.nic_unknown({"rail": None, "why": "addresses not read"})  # written before the flag
    assert not fabric.nic_unknown({"rail": None, "why": "excluded by the rule", "unknown": False})
    assert not fabric.nic_unknown({"rail": 2, "why": "map entry", "unknown": False})


def test_per_node_map_uses_the_kubernetes_node_name():
    rule = {"by": "map", "map": {"0000:1d:00.0": 0}, "nodes": {"k8s-a": {"0000:1d:00.0": 1, "0000:2e:00.0": 0}}}
    found = every_host_rails({"a": {"rule": rule, "node_name": "k8s-a", "topology": TWO_RAILS}})
    assert found["hosts"]["a"]["rails"]["0000:1d:00.0"] == 1
    assert found["hosts"]["a"]["rails"]["0000:2e:00.0"] == 0


def test_rails_file_shares_one_rule_between_nodes_and_round_trips():
    rule = {"by": "pci_order", "count": 2, "exclude": ["eno*"]}
    other = {"by": "netdev_name", "pattern": r"^nic(\d+)$"}
    document = fabric.rails_file({"a": rule, "b": dict(rule), "c": other, "d": None}, {"a": "node-a"})
    assert document["version"] == rail_rule.RAILS_FILE_VERSION
    assert document["nodes"] == {"b": 0, "c": 1, "node-a": 0}
    assert len(document["rules"]) == 2
    assert rail_rule.rule_for_node(document, "node-a") == rail_rule.check_rule(rule)
    assert rail_rule.rule_for_node(document, "c") == rail_rule.check_rule(other)
    assert rail_rule.rule_for_node(document, "d") is None


def test_rails_file_refuses_a_bad_rule_naming_the_host():
    with pytest.raises(rail_rule.RailRuleError, match=r"^b: aligned_dra_rails.by: one of"):
        fabric.rails_file({"a": {"by": "pci_order"}, "b": {"by": "cabling"}})


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"version": 2, "rules": [], "nodes": {}}, "version 1 expected"),
        ({"version": 1, "rules": {}, "nodes": {}}, "'rules' .a list."),
        ({"version": 1, "rules": [], "nodes": {"n": 0}}, r"nodes\[n\] = 0 is not an index"),
        ({"version": 1, "rules": [{"by": "x"}], "nodes": {"n": 0}}, r"rules\[0\]: aligned_dra_rails.by"),
        ([], "version 1 expected"),
    ],
)
def test_a_damaged_rails_file_is_refused_with_the_reason(document, message):
    with pytest.raises(ValueError, match=message):
        rail_rule.rule_for_node(document, "n")


@pytest.mark.parametrize(
    "rule",
    [
        {"by": "map", "nodes": {"n": {"0000:1d:00.0": 0}}},
        {"by": "map", "map": {"0000:1d:00.0": 0}},
        {"by": "subnet", "subnets": ["192.168.128.0/21"], "count": 1},
        {"by": "netdev_name", "pattern": r"^nic(\d+)$", "exclude": ["eno*"]},
    ],
)
def test_a_checked_rule_checks_again_as_it_is(rule):
    checked = rail_rule.check_rule(rule)
    assert rail_rule.check_rule(checked) == checked
    assert rail_rule.rule_for_node(fabric.rails_file({"n": rule}), "n") == checked
