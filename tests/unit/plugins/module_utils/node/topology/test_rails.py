# SPDX-License-Identifier: Apache-2.0
"""node/topology/rails.py: the rule reader, and the rails it gives on every fixture tree.

The first part checks ``check_rule`` and ``assign`` on small topologies
written here. The second is the held-out check: for every sysfs tree the
fixtures know (real snapshots and builder layouts, listed by
``materialize.names()``, so a tree added later is covered) and each rule, the
rails ``assign`` gives from the probe equal the rails an independent reading
gives: :class:`Oracle` reads the RDMA NIC physical functions straight from
the tree (``class/infiniband/*/device``, no ``physfn`` link, by PCI address)
with their interface names (``bus/pci/devices/<bdf>/net/``) and applies the
rule's documented meaning itself.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import re
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import probe, rails
from ansible_collections.aligned.dra.tests.fixtures import materialize as fixtures

TREES = Path(__file__).resolve().parents[6] / ".cache" / "sysfs"


def nic(address: str, *names: str, vfs: tuple[str, ...] = ()) -> list[dict]:
    pf = {"pci_address": address, "kind": "rdma", "netdevs": [{"name": n} for n in names], "physfn": None}
    return [pf, *({"pci_address": vf, "kind": "rdma", "physfn": address, "netdevs": []} for vf in vfs)]


def topology(*nics: list[dict]) -> dict:
    return {"devices": [device for group in nics for device in group]}


# Four rails of nic0..nic3 (a VF on nic1), a management port and a plain Ethernet NIC.
NODE = topology(
    nic("0000:1d:00.0", "nic0"),
    nic("0000:2e:00.0", "nic1", vfs=("0000:2e:00.2", "0000:2e:00.3")),
    nic("0000:3f:00.0", "nic2"),
    nic("0000:50:00.0", "nic3"),
    nic("0000:5a:00.0", "eno1np0"),
    [{"pci_address": "0000:60:00.0", "kind": "nic", "netdevs": [{"name": "eth9"}], "physfn": None}],
)
GKE_SUBNETS = [f"192.168.{128 + 8 * rail}.0/21" for rail in range(8)]


def rails_of(result: dict) -> dict[str, int | None]:
    return {entry["pci_address"]: entry["rail"] for entry in result["nics"]}


# -- check_rule --------------------------------------------------------------------------------


def test_check_rule_fills_the_defaults():
    assert rails.check_rule({"by": "pci_order"}) == {"by": "pci_order", "count": None, "exclude": []}
    checked = rails.check_rule({"by": "map", "nodes": {"n1": {"0000:1D:00.0": 2}}})
    assert checked["map"] == {} and checked["nodes"] == {"n1": {"0000:1d:00.0": 2}}


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        ("pci_order", r"^aligned_dra_rails: a mapping with 'by'"),
        ({"by": "cabling"}, r"^aligned_dra_rails\.by: one of pci_order, netdev_name, subnet, map"),
        ({"by": "pci_order", "pattern": "x(1)"}, r"^aligned_dra_rails: pattern not used with by: pci_order"),
        ({"by": "pci_order", "count": 0}, r"^aligned_dra_rails\.count: an integer from 1 to 64"),
        ({"by": "pci_order", "count": True}, r"^aligned_dra_rails\.count"),
        ({"by": "pci_order", "exclude": "eno*"}, r"^aligned_dra_rails\.exclude: a list of globs"),
        ({"by": "netdev_name"}, r"^aligned_dra_rails\.pattern: a regular expression"),
        ({"by": "netdev_name", "pattern": "nic"}, r"^aligned_dra_rails\.pattern: 'nic' has no group"),
        ({"by": "netdev_name", "pattern": "nic(\\d"}, r"^aligned_dra_rails\.pattern: .* is not a regular expression"),
        ({"by": "subnet", "subnets": []}, r"^aligned_dra_rails\.subnets: a list of 1 to 64 IPv4 networks"),
        ({"by": "subnet", "subnets": ["10.0.0.1/8"]}, r"^aligned_dra_rails\.subnets\[0\]: .* is not an IPv4 network"),
        (
            {"by": "subnet", "subnets": ["10.0.0.0/8", "10.1.0.0/16"]},
            r"^aligned_dra_rails\.subnets\[1\]: 10\.1\.0\.0/16 overlaps rail 0's 10\.0\.0\.0/8",
        ),
        ({"by": "map"}, r"^aligned_dra_rails: by: map needs 'map' \(every node\) or 'nodes' \(per node\)"),
        ({"by": "map", "map": {"1d:00.0": 0}}, r"^aligned_dra_rails\.map: '1d:00\.0' is not a PCI address"),
        ({"by": "map", "map": {"0000:1d:00.0": 64}}, r"^aligned_dra_rails\.map\[0000:1d:00\.0\]: a rail is an integer"),
        ({"by": "map", "nodes": {"n1": []}}, r"^aligned_dra_rails\.nodes\[n1\]: a mapping of PCI address to rail"),
    ],
)
def test_check_rule_names_the_bad_field(rule, message):
    with pytest.raises(rails.RailRuleError, match=message):
        rails.check_rule(rule)


# -- assign on a small node --------------------------------------------------------------------


def test_pci_order_with_exclude_puts_the_management_port_on_no_rail_and_vfs_on_their_pf():
    result = rails.assign(NODE, rails.check_rule({"by": "pci_order", "count": 4, "exclude": ["eno*"]}))
    assert rails_of(result) == {
        "0000:1d:00.0": 0,
        "0000:2e:00.0": 1,
        "0000:3f:00.0": 2,
        "0000:50:00.0": 3,
        "0000:5a:00.0": None,
    }
    assert next(e for e in result["nics"] if e["rail"] is None)["why"] == "excluded by the rule"
    assert result["rails"]["0000:2e:00.2"] == result["rails"]["0000:2e:00.3"] == 1
    assert "0000:60:00.0" not in result["rails"]  # not an RDMA NIC: no rule looks at it
    assert result["problems"] == []


def test_exclude_matches_pci_addresses_too():
    result = rails.assign(NODE, rails.check_rule({"by": "pci_order", "exclude": ["0000:5a:*", "0000:1d:00.0"]}))
    assert [e["rail"] for e in result["nics"]] == [None, 0, 1, 2, None]


def test_netdev_name_reads_the_first_group_and_says_why_a_nic_is_on_no_rail():
    result = rails.assign(NODE, rails.check_rule({"by": "netdev_name", "pattern": r"^nic(\d+)$", "count": 4}))
    assert rails_of(result)["0000:50:00.0"] == 3
    assert result["nics"][4] == {
        "pci_address": "0000:5a:00.0",
        "netdevs": ["eno1np0"],
        "rail": None,
        "why": "no interface name matches the pattern",
    }
    assert result["problems"] == []


def test_netdev_name_group_beyond_the_last_rail_is_a_problem_naming_the_nic():
    node = topology(nic("0000:1d:00.0", "nic0"), nic("0000:2e:00.0", "nic99"))
    result = rails.assign(node, rails.check_rule({"by": "netdev_name", "pattern": r"^nic(\d+)$"}))
    assert rails_of(result)["0000:2e:00.0"] is None
    assert result["problems"] == [
        "0000:2e:00.0 (nic99): interface nic99: the pattern's first group '99' is not a rail number "
        "(rule by netdev_name '^nic(\\d+)$')"
    ]


def test_subnet_places_nics_by_their_addresses():
    addresses = {"nic0": ["192.168.136.4/21"], "nic1": ["192.168.128.4/21"], "nic2": [], "eno1np0": ["10.0.0.2/8"]}
    result = rails.assign(NODE, rails.check_rule({"by": "subnet", "subnets": GKE_SUBNETS}), addresses=addresses)
    assert rails_of(result) == {
        "0000:1d:00.0": 1,
        "0000:2e:00.0": 0,
        "0000:3f:00.0": None,
        "0000:50:00.0": None,
        "0000:5a:00.0": None,
    }
    assert result["nics"][0]["why"] == "nic0 192.168.136.4/21"
    assert result["nics"][2]["why"] == "no IPv4 address in a rail subnet"
    assert result["problems"] == []


def test_subnet_without_addresses_places_nothing_and_says_so_once():
    result = rails.assign(NODE, rails.check_rule({"by": "subnet", "subnets": GKE_SUBNETS, "count": 8}))
    assert result["rails"] == {}
    assert {e["why"] for e in result["nics"]} == {"addresses not read"}
    assert result["problems"] == [
        "rule by subnet (8 subnets) needs the NICs' IPv4 addresses, and none were read on this node"
    ]


def test_map_per_node_wins_and_an_entry_that_is_no_rdma_nic_is_a_problem():
    rule = rails.check_rule(
        {
            "by": "map",
            "map": {"0000:1d:00.0": 0, "0000:2e:00.0": 1, "0000:60:00.0": 5},
            "nodes": {"gpu-b01": {"0000:2e:00.0": 3}},
        }
    )
    result = rails.assign(NODE, rule, node="gpu-b01")
    assert rails_of(result)["0000:2e:00.0"] == 3
    assert rails_of(result)["0000:3f:00.0"] is None
    assert result["nics"][2]["why"] == "not in the map"
    assert result["problems"] == ["0000:60:00.0: not an RDMA NIC of this node (rule by map, entry 0000:60:00.0: 5)"]
    assert rails_of(rails.assign(NODE, rule, node="gpu-b02"))["0000:2e:00.0"] == 1


def test_count_duplicates_and_a_rule_that_matches_nothing_are_problems():
    missing = rails.assign(NODE, rails.check_rule({"by": "pci_order", "count": 8, "exclude": ["eno*"]}))
    assert missing["problems"] == ["rails 4, 5, 6, 7 of count 8: no RDMA NIC is on them (rule by pci_order)"]
    outside = rails.assign(NODE, rails.check_rule({"by": "pci_order", "count": 4}))
    assert outside["problems"] == [
        "0000:5a:00.0 (eno1np0): rail 4 is outside count 4 (rails 0 to 3; rule by pci_order, PCI order 4)"
    ]
    twice = rails.assign(NODE, rails.check_rule({"by": "map", "map": {"0000:1d:00.0": 0, "0000:3f:00.0": 0}}))
    assert twice["problems"] == ["rail 0 given to 2 NICs: 0000:1d:00.0 (nic0) and 0000:3f:00.0 (nic2) (rule by map)"]
    nothing = rails.assign(NODE, rails.check_rule({"by": "netdev_name", "pattern": r"^rail(\d+)$"}))
    assert nothing["problems"] == [
        "rule by netdev_name '^rail(\\d+)$' matches none of the RDMA NICs 0000:1d:00.0 (nic0), "
        "0000:2e:00.0 (nic1), 0000:3f:00.0 (nic2), 0000:50:00.0 (nic3), 0000:5a:00.0 (eno1np0)"
    ]


def test_a_node_without_rdma_nics_has_no_rails_and_no_problem_without_count():
    plain = topology([{"pci_address": "0000:60:00.0", "kind": "nic", "netdevs": [{"name": "eth9"}]}])
    assert rails.assign(plain, rails.check_rule({"by": "pci_order"})) == {"nics": [], "rails": {}, "problems": []}


def test_rule_for_node_reads_the_driver_rails_file():
    document = {"version": 1, "rules": [{"by": "pci_order"}], "nodes": {"n1": 0}}
    assert rails.rule_for_node(document, "n1") == rails.check_rule({"by": "pci_order"})
    assert rails.rule_for_node(document, "n2") is None
    with pytest.raises(ValueError, match=r"nodes\[n1\] = 3 is not an index"):
        rails.rule_for_node(dict(document, nodes={"n1": 3}), "n1")
    with pytest.raises(ValueError, match=r"rules\[0\]: aligned_dra_rails\.by"):
        rails.rule_for_node(dict(document, rules=[{"by": "x"}]), "n1")


# -- held-out trees: the probe's rails against an independent reading of the tree -------------

_BDF = re.compile(r"^[0-9a-f]{4,}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$")


class Oracle:
    """The rails of one sysfs tree, read from the tree itself (not from the probe)."""

    def __init__(self, sys_root: Path) -> None:
        found: dict[str, list[str]] = {}
        infiniband = sys_root / "class" / "infiniband"
        for entry in sorted(infiniband.iterdir()) if infiniband.is_dir() else []:
            device = entry / "device"
            if not device.exists():
                continue  # a non-PCI RDMA device (hwloc's scif0)
            function = device.resolve()
            if not _BDF.match(function.name) or os.path.lexists(function / "physfn"):
                continue
            net = sys_root / "bus" / "pci" / "devices" / function.name / "net"
            found[function.name] = sorted(os.listdir(net)) if net.is_dir() else []
        self.nics = sorted(found.items())
        self.vfs: dict[str, str] = {}
        devices = sys_root / "bus" / "pci" / "devices"
        for function in sorted(devices.iterdir()) if devices.is_dir() else []:
            if os.path.lexists(function / "physfn"):
                self.vfs[function.name] = (function / "physfn").resolve().name

    def placeable(self, exclude: list[str]) -> list[tuple[str, list[str]]]:
        return [
            (bdf, names)
            for bdf, names in self.nics
            if not any(fnmatch.fnmatchcase(key, glob) for key in [bdf, *names] for glob in exclude)
        ]

    def with_vfs(self, pf_rails: dict[str, int]) -> dict[str, int]:
        found = dict(pf_rails)
        found.update({vf: pf_rails[pf] for vf, pf in self.vfs.items() if pf in pf_rails})
        return found

    def pci_order(self, exclude: list[str]) -> dict[str, int]:
        return self.with_vfs({bdf: rail for rail, (bdf, _names) in enumerate(self.placeable(exclude))})

    def netdev_name(self, pattern: str) -> dict[str, int]:
        found = {}
        for bdf, names in self.nics:
            for name in names:
                match = re.fullmatch(pattern, name)
                if match:
                    if int(match.group(1)) < rails.MAX_RAILS:
                        found[bdf] = int(match.group(1))
                    break
        return self.with_vfs(found)

    def subnet(self, subnets: list[str], addresses: dict[str, list[str]]) -> dict[str, int]:
        networks = [ipaddress.ip_network(s) for s in subnets]
        found = {}
        for bdf, names in self.nics:
            hits = {
                rail
                for name in names
                for text in addresses.get(name, [])
                for rail, network in enumerate(networks)
                if ipaddress.ip_interface(text).ip in network
            }
            if len(hits) == 1:
                found[bdf] = hits.pop()
        return self.with_vfs(found)


TREE_NAMES = fixtures.names()


@pytest.fixture(scope="module")
def trees():
    """``trees(name)``: ``(topology, oracle)`` of one fixture tree, materialised in .cache/sysfs (as the demo's)."""
    cache: dict[str, tuple[dict, Oracle]] = {}

    def get(name: str) -> tuple[dict, Oracle]:
        if name not in cache:
            root = fixtures.materialize(name, TREES)
            cache[name] = (probe(str(root / "sys"), str(root / "proc")), Oracle(root / "sys"))
        return cache[name]

    return get


def test_the_tree_list_is_discovered_and_holds_snapshots_and_layouts():
    assert set(fixtures.layout_names()) <= set(TREE_NAMES)
    assert set(fixtures.SNAPSHOTS) <= set(TREE_NAMES)
    assert {"dgx-h100", "sriov-8x64", "hwloc-32em64t-mic"} <= set(TREE_NAMES)


@pytest.mark.parametrize("name", TREE_NAMES)
def test_held_out_tree_rails_equal_an_independent_reading(trees, name):
    topology, oracle = trees(name)
    assert [
        (e["pci_address"], e["netdevs"]) for e in rails.assign(topology, rails.check_rule({"by": "pci_order"}))["nics"]
    ] == oracle.nics

    def check(rule: dict, expected: dict[str, int], node: str | None = None, addresses=None) -> None:
        got = rails.assign(topology, rails.check_rule(rule), node, addresses)
        assert got["rails"] == expected, rule

    check({"by": "pci_order"}, oracle.pci_order([]))
    names = [n for _bdf, nic_names in oracle.nics for n in nic_names]
    exclude = ["eno*", *(names[:1] or [b for b, _n in oracle.nics[:1]])]
    check({"by": "pci_order", "exclude": exclude}, oracle.pci_order(exclude))
    if oracle.nics:
        count = len(oracle.placeable([]))
        full = rails.assign(topology, rails.check_rule({"by": "pci_order", "count": count}))
        assert full["problems"] == []
        more = rails.assign(topology, rails.check_rule({"by": "pci_order", "count": count + 1}))
        assert more["problems"] == [f"rails {count} of count {count + 1}: no RDMA NIC is on them (rule by pci_order)"]

    # The tree's own names: the first run of digits, whatever the naming scheme (ib0, ibp29s0, enp25s0np0).
    pattern = r"^\D*(\d+).*$"
    check({"by": "netdev_name", "pattern": pattern}, oracle.netdev_name(pattern))

    # Addresses as the node would have them: each NIC with an interface in the subnet of the
    # reverse of its PCI order, and one outside every subnet.
    subnets = [f"10.{rail}.0.0/16" for rail in range(max(len(oracle.nics), 1))]
    addresses = {}
    for index, (_bdf, nic_names) in enumerate(oracle.nics):
        if nic_names:
            rail = len(oracle.nics) - 1 - index
            addresses[nic_names[0]] = [f"10.{rail}.3.{index + 1}/16" if index else "172.16.0.1/24"]
    check({"by": "subnet", "subnets": subnets}, oracle.subnet(subnets, addresses), addresses=addresses)

    if oracle.nics:
        every = {bdf: len(oracle.nics) - 1 - index for index, (bdf, _n) in enumerate(oracle.nics) if index % 2 == 0}
        own = {oracle.nics[0][0]: 63}
        rule = {"by": "map", "map": every, "nodes": {"this-node": own}}
        check(rule, oracle.with_vfs({**every, **own}), node="this-node")
        check(rule, oracle.with_vfs(every), node="another-node")
