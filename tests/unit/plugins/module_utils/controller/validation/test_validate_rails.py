# SPDX-License-Identifier: Apache-2.0
"""The validation stage's rails check (controller/validation/validate_rails.py), through validate.validate."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.topology import fact as topology_fact
from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import validate, validate_rails
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import rail_record, rails


def nic(address: str, name: str, vfs: tuple[str, ...] = ()) -> list[dict]:
    pf = {"pci_address": address, "kind": "rdma", "netdevs": [{"name": name}], "physfn": None}
    return [pf, *({"pci_address": vf, "kind": "rdma", "physfn": address, "netdevs": []} for vf in vfs)]


# nic0..nic3 (one with a VF) and the management port eno1np0.
FOUR = {
    "devices": [
        *nic("0000:1d:00.0", "nic0"),
        *nic("0000:2e:00.0", "nic1", ("0000:2e:00.2",)),
        *nic("0000:3f:00.0", "nic2"),
        *nic("0000:50:00.0", "nic3"),
        *nic("0000:5a:00.0", "eno1np0"),
    ]
}
GOOD = {"by": "pci_order", "count": 4, "exclude": ["eno*"]}
SUBNETS = [f"192.168.{128 + 8 * rail}.0/21" for rail in range(4)]


def run(settings: dict[str, dict], stages=validate.STAGES):
    return validate.validate(list(settings), lambda h: list(settings[h]), lambda h, n, d: settings[h].get(n, d), stages)


def lines(settings: dict[str, dict], stages=validate.STAGES) -> list[str]:
    return [p.line() for p in run(settings, stages)[0]]


def host(rule, topology=..., **more) -> dict:
    """A host's settings; ``topology=None``: not probed (the default: FOUR)."""
    topology = FOUR if topology is ... else topology
    values = {"aligned_dra_site": "lab", "aligned_dra_rails": rule, **more}
    if topology is not None:
        values["aligned_dra_topology"] = topology
    return values


def test_a_good_site_passes_every_rule():
    addresses = dict(FOUR, netdev_addresses={f"nic{r}": [f"192.168.{128 + 8 * r}.9/21"] for r in range(4)})
    assert (
        lines(
            {
                "a": host(GOOD),
                "b": host({"by": "netdev_name", "pattern": r"^nic(\d+)$", "count": 4}),
                "c": host({"by": "subnet", "subnets": SUBNETS, "count": 4}, addresses),
                "d": host({"by": "map", "map": {"0000:1d:00.0": 1, "0000:2e:00.0": 0}, "count": 2}),
                "e": {"aligned_dra_site": "lab", "aligned_dra_topology": FOUR},  # no rule: no rails, no check
                "f": host({}),  # set empty: the same
            }
        )
        == []
    )


@pytest.mark.parametrize(
    ("rule", "reason"),
    [
        ({"by": "cabling"}, "aligned_dra_rails.by: one of pci_order, netdev_name, subnet, map (got 'cabling')"),
        ({"by": "pci_order", "count": 0}, "aligned_dra_rails.count: an integer from 1 to 64 (got 0)"),
        ({"by": "netdev_name", "pattern": "nic"}, "aligned_dra_rails.pattern: 'nic' has no group;"),
        ({"by": "subnet", "subnets": ["192.168.128.1/21"]}, "aligned_dra_rails.subnets[0]: '192.168.128.1/21' is not"),
        ({"by": "map", "map": {"1d:00.0": 0}}, "aligned_dra_rails.map: '1d:00.0' is not a PCI address"),
        ({"by": "pci_order", "pattern": "x"}, "aligned_dra_rails: pattern not used with by: pci_order"),
    ],
)
@pytest.mark.parametrize("probed", [True, False], ids=["probed", "not-probed"])
def test_a_malformed_rule_is_refused_with_or_without_a_probe(rule, reason, probed):
    (problem,) = run({"a": host(rule, FOUR if probed else None)})[0]
    assert (problem.host, problem.variable, problem.value) == ("a", "aligned_dra_rails", validate.show(rule))
    assert problem.reason.startswith(reason)


def test_a_node_missing_a_rail_of_count_names_host_rails_and_rule():
    assert lines({"a": host(dict(GOOD, count=6))}) == [
        'a: aligned_dra_rails = {"by": "pci_order", "count": 6, "exclude": ["eno*"]}: '
        "rails 4, 5 of count 6: no RDMA NIC is on them (rule by pci_order)"
    ]


def test_a_rail_given_to_two_nics_names_both_nics_and_the_rule():
    rule = {"by": "map", "map": {"0000:1d:00.0": 0, "0000:3f:00.0": 0}}
    assert lines({"a": host(rule)}) == [
        f"a: aligned_dra_rails = {validate.show(rule)}: "
        "rail 0 given to 2 NICs: 0000:1d:00.0 (nic0) and 0000:3f:00.0 (nic2) (rule by map)"
    ]


def test_a_rule_that_matches_nothing_names_the_nics_it_saw():
    rule = {"by": "netdev_name", "pattern": r"^rail(\d+)$"}
    (line,) = lines({"a": host(rule)})
    assert line.endswith(
        "rule by netdev_name '^rail(\\d+)$' matches none of the RDMA NICs 0000:1d:00.0 (nic0), 0000:2e:00.0 (nic1), "
        "0000:3f:00.0 (nic2), 0000:50:00.0 (nic3), 0000:5a:00.0 (eno1np0)"
    )


def test_a_map_entry_that_is_not_an_rdma_nic_of_the_node():
    rule = {"by": "map", "map": {"0000:1d:00.0": 0, "0000:99:00.0": 1}}
    assert lines({"a": host(rule)}) == [
        f"a: aligned_dra_rails = {validate.show(rule)}: "
        "0000:99:00.0: not an RDMA NIC of this node (rule by map, entry 0000:99:00.0: 1)"
    ]


def test_a_rail_outside_count_names_the_nic():
    (line,) = lines({"a": host({"by": "pci_order", "count": 4})})
    assert line.endswith(
        "0000:5a:00.0 (eno1np0): rail 4 is outside count 4 (rails 0 to 3; rule by pci_order, PCI order 4)"
    )


def test_without_a_probe_a_well_formed_rule_is_not_judged():
    # The stages that do not probe: the node's NICs are unknown, so is whether the rule fits them.
    assert lines({"a": host(dict(GOOD, count=64), None)}, ["claims"]) == []


def test_subnet_on_a_probe_without_addresses_is_unknown_not_wrong():
    # A captured tree: the probe read no addresses (netdev_addresses null).
    rule = {"by": "subnet", "subnets": SUBNETS, "count": 4}
    assert lines({"a": host(rule, dict(FOUR, netdev_addresses=None))}) == []
    wrong = dict(FOUR, netdev_addresses={"nic0": ["192.168.128.3/21"], "nic1": ["192.168.128.4/21"]})
    assert lines({"a": host(rule, wrong)}) == [
        f"a: aligned_dra_rails = {validate.show(rule)}: "
        "rail 0 given to 2 NICs: 0000:1d:00.0 (nic0) and 0000:2e:00.0 (nic1) (rule by subnet (4 subnets))",
        f"a: aligned_dra_rails = {validate.show(rule)}: "
        "rails 1, 2, 3 of count 4: no RDMA NIC is on them (rule by subnet (4 subnets))",
    ]


def test_per_node_map_is_keyed_by_the_kubernetes_node_name():
    rule = {"by": "map", "nodes": {"k8s-a": {"0000:1d:00.0": 0}}}
    assert lines({"a": host(rule, aligned_dra_driver_node_name="k8s-a")}) == []
    (line,) = lines({"a": host(rule)})
    assert "rule by map matches none of the RDMA NICs" in line


def test_the_same_problem_on_many_hosts_is_said_once_per_site_with_the_count():
    settings = {f"gpu-{i:03}": host(dict(GOOD, count=5)) for i in range(40)}
    problems, sites = run(settings)
    assert len(problems) == 40
    assert validate.report(problems, sites).splitlines()[1:] == [
        '- site lab, 40 hosts (gpu-000, gpu-001, gpu-002 and 37 more): aligned_dra_rails = {"by": "pci_order", '
        '"count": 5, "exclude": ["eno*"]}: rails 4 of count 5: no RDMA NIC is on them (rule by pci_order)'
    ]


def test_a_rule_that_is_not_a_mapping_is_refused_once_by_its_argument_spec():
    problems = run({"a": host("pci_order")})[0]
    assert [(p.variable, "dict" in p.reason) for p in problems] == [("aligned_dra_rails", True)]


def test_the_name_is_known_and_a_typo_is_pointed_at_it():
    assert "aligned_dra_rails" in validate.known_names()
    assert validate.role_specs()["topology"]["aligned_dra_rails"]["type"] == "dict"
    (problem,) = run({"a": {"aligned_dra_rail": GOOD}})[0]
    assert problem.reason == "unknown variable; did you mean aligned_dra_rails?"


def test_the_rails_check_reads_the_topology_behind_the_probes_slim_fact(tmp_path):
    path = tmp_path / "a.json"
    topology_fact.keep(str(path), FOUR)
    fact = topology_fact.fact_of(FOUR, str(path))
    (line,) = lines({"a": host(dict(GOOD, count=5), fact)})
    assert line.endswith("rails 4 of count 5: no RDMA NIC is on them (rule by pci_order)")
    path.unlink()
    (problem,) = run({"a": host(GOOD, fact)}, ["claims"])[0]
    assert problem.variable == "aligned_dra_topology"
    assert "the file lives as long as the run that probed the node" in problem.reason


def test_rail_problems_alone_give_variable_and_reason():
    assert validate_rails.rail_problems("a", {"aligned_dra_rails": {"by": "x"}}) == [
        ("aligned_dra_rails", "aligned_dra_rails.by: one of pci_order, netdev_name, subnet, map (got 'x')")
    ]
    assert validate_rails.rail_problems("a", {}) == []


def test_a_team_and_the_required_list_may_name_the_rail_templates_the_rules_declare():
    claims = {"templates": {"rails": {"counts": [1]}}, "required": ["gpu-nic-rail-3"]}
    teams = {
        "teams": [{"name": "train", "namespaces": ["train"], "tier": "production", "templates": ["gpu-nic-rail-0"]}]
    }
    railed = {"aligned_dra_kubernetes_version": "1.36", "aligned_dra_claims": claims, "aligned_dra_teams": teams}
    assert lines({"a": host(GOOD, **railed)}) == []
    # without a rule no rail template is rendered: the names are refused
    assert any("gpu-nic-rail-3" in line for line in lines({"a": host(None, **railed)}))
    no_required = {**railed, "aligned_dra_claims": {"templates": {"rails": {"counts": [1]}}}}
    assert any("gpu-nic-rail-0" in line for line in lines({"a": host(None, **no_required)}))


# -- a NIC in a pod: the probe reads it as the driver's record has it ----------------------------

IN_POD = "0000:2e:00.0"  # nic1, with its VF
RECORD = {
    f"0000:{bus}:00.0": {"rdma": True, "netdevs": [name], "addresses": {name: [f"192.168.{128 + 8 * rail}.9/21"]}}
    for rail, (bus, name) in enumerate([("1d", "nic0"), ("2e", "nic1"), ("3f", "nic2"), ("50", "nic3")])
}


def held(exclusive: bool) -> dict:
    """FOUR as the host sees it while a pod holds nic1: a plain NIC (exclusive RDMA mode) or no interface."""
    devices = [
        dict(d, kind="nic" if exclusive else "rdma", netdevs=[]) if d["pci_address"] == IN_POD else d
        for d in FOUR["devices"]
    ]
    addresses = {n: list(a) for nic in RECORD.values() for n, a in nic["addresses"].items() if n != "nic1"}
    return {"devices": devices, "netdev_addresses": dict(addresses, eno1np0=[])}


RULES = {
    "pci_order": GOOD,
    "netdev_name": {"by": "netdev_name", "pattern": r"^nic(\d+)$", "count": 4},
    "subnet": {"by": "subnet", "subnets": SUBNETS, "count": 4},
}


@pytest.mark.parametrize("exclusive", [True, False], ids=["rdma-exclusive", "rdma-shared"])
@pytest.mark.parametrize("by", sorted(RULES))
def test_a_site_whose_node_has_a_nic_in_a_pod_passes_with_the_drivers_record(tmp_path, by, exclusive):
    probed = rail_record.with_last_seen(held(exclusive), RECORD)  # what topology_info returns on the live node
    assert [d["pci_address"] for d in probed["devices"] if d.get("out_of_view")] == [IN_POD]
    path = tmp_path / "a.json"
    topology_fact.keep(str(path), probed)
    assert lines({"a": host(RULES[by], topology_fact.fact_of(probed, str(path)))}) == []
    # without a record (no driver, or it never saw the NIC) the node is read as the host sees it: refused,
    # but for pci_order in shared mode, where the NIC is still an RDMA NIC of the host
    found = lines({"a": host(RULES[by], held(exclusive))})
    if (by, exclusive) == ("pci_order", False):
        assert found == []
    else:
        missing = 3 if by == "pci_order" else 1  # pci_order renumbers the NICs after it
        rule_text = rails.describe(rails.check_rule(RULES[by]))
        (line,) = found
        assert line.endswith(f": rails {missing} of count 4: no RDMA NIC is on them (rule {rule_text})")
