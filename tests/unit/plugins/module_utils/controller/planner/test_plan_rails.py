# SPDX-License-Identifier: Apache-2.0
"""Rails in the plan: each allocation's rails, claims per rail, templates pinned to rails, other drivers' NICs.

The sites are small enough to work out by hand (``tests/support/sites/plan_inputs.py``: pair i of a node is GPU i
and NIC i on one PCIe root, NIC i's interface is ``nic<i>``, so ``by: netdev_name`` puts it on rail i).
"""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import plan as planner
from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import rails as plan_rails
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
from ansible_collections.aligned.dra.plugins.module_utils.node.topology import rails as rail_rule
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    NIC_NAME_RULE,
    aligned_node,
    rail_node,
    rail_objects,
    resource_slice,
)


def rules_with_count(topologies: dict, count: int | None = None) -> dict:
    return {node: dict(NIC_NAME_RULE, **({"count": count} if count else {})) for node in topologies}


def plan_site(topologies: dict, rules: dict, objects: list | None = None, **kwargs) -> dict:
    """Plan the rail objects on probed nodes, the NICs published with the rails of the nodes' rules."""
    rails, problems = {}, []
    for node, topology in topologies.items():
        rails[node], found = plan_rails.node_rails(node, topology, rules.get(node))
        problems += found
    objects = objects if objects is not None else rail_objects(rules)
    classes = [o for o in objects if o["kind"] == "DeviceClass"]
    templates = [o for o in objects if o["kind"] != "DeviceClass"]
    nodes = planner.nodes_from_topologies(topologies, rails=rails)
    result = planner.plan("s", nodes, classes, templates, warnings=problems, **kwargs)
    return {t["name"]: t for t in result["templates"]} | {"_plan": result}


def node_rails_of(template: dict, node: str) -> list:
    return [a["rails"] for a in template["nodes"][node]["allocations"]]


# n1: four aligned pairs on rails 0..3; n2: two, on rails 0 and 1.
SITE = {"n1": aligned_node(4), "n2": aligned_node(2)}
SITE_RULES = {"n1": dict(NIC_NAME_RULE, count=4), "n2": dict(NIC_NAME_RULE, count=2)}


def test_fits_per_rail_of_a_small_site_worked_by_hand():
    plan = plan_site(SITE, SITE_RULES)
    assert plan["_plan"]["rails"] == [0, 1, 2, 3] and plan["_plan"]["warnings"] == []
    # one pair per claim: each node's pairs, one claim per rail; not pinned, so no count per rail (the
    # rails are the planner's picks, the scheduler may pick others)
    pair = plan["gpu-nic-pair-1"]
    assert node_rails_of(pair, "n1") == [[0], [1], [2], [3]] and node_rails_of(pair, "n2") == [[0], [1]]
    assert pair["fits_per_rail"] is None and pair["nodes"]["n2"]["fits_per_rail"] is None
    two = plan["gpu-nic-pair-2"]
    assert node_rails_of(two, "n1") == [[0, 1], [2, 3]] and two["fits_per_rail"] is None
    # pinned: one NIC per rail and node, so one claim per node that has the rail; a claim counts on each rail
    assert plan["gpu-nic-rail-1"]["fits_per_rail"] == {"0": 0, "1": 2, "2": 0, "3": 0}
    assert plan["gpu-nic-rail-3"]["fits_per_rail"] == {"0": 0, "1": 0, "2": 0, "3": 1}
    assert plan["gpu-nic-rails-2-0"]["fits_per_rail"] == {"0": 2, "1": 2, "2": 0, "3": 0}
    assert plan["gpu-nic-rails-2-2"]["fits_per_rail"] == {"0": 0, "1": 0, "2": 1, "3": 1}
    assert plan["gpu-nic-rails-4-0"]["fits_per_rail"] == {"0": 1, "1": 1, "2": 1, "3": 1}
    assert plan["gpu-nic-rail-1"]["nodes"]["n2"]["fits_per_rail"] == {"0": 0, "1": 1}
    assert [plan[f"gpu-nic-rail-{r}"]["fits_total"] for r in range(4)] == [2, 2, 1, 1]
    assert [plan[name]["fits_total"] for name in ("gpu-nic-pair-1", "gpu-nic-pair-2")] == [6, 3]
    assert [plan[f"gpu-nic-rails-{k}"]["fits_total"] for k in ("2-0", "2-2", "4-0")] == [2, 1, 1]
    assert plan["gpu-nic-rail-3"]["nodes"]["n2"]["fits"] == 0
    assert plan["gpu-nic-rails-4-0"]["nodes"]["n1"]["allocations"][0]["worst_level"] == "NODE"
    assert plan["gpu-nic-rails-4-0"]["nodes"]["n1"]["allocations"][0]["aligned_level"] == "PIX"


def test_a_template_not_pinned_to_a_rail_gets_no_count_per_rail():
    # one GPU, NICs on rails 0 and 1: the planner's one pair takes rail 0, but the scheduler may
    # take rail 1, so "0: 1, 1: 0" would be wrong; the pinned templates say what each rail holds
    one_gpu = rail_node(
        [("0000:11:00.0", "pci0000:10", 0)], [("0000:12:00.0", "pci0000:10", 0), ("0000:22:00.0", "pci0000:20", 0)]
    )
    plan = plan_site({"n": one_gpu}, {"n": dict(NIC_NAME_RULE, count=2)})
    pair = plan["gpu-nic-pair-1"]
    assert pair["fits_total"] == 1 and node_rails_of(pair, "n") == [[0]]
    assert pair["fits_per_rail"] is None and pair["nodes"]["n"]["fits_per_rail"] is None
    assert plan["gpu-nic-rail-0"]["fits_per_rail"] == {"0": 1, "1": 0}
    assert plan["gpu-nic-rail-1"]["fits_per_rail"] == {"0": 0, "1": 1}
    pinned = [t["name"] for t in plan["_plan"]["templates"] if t["fits_per_rail"] is not None]
    assert pinned == ["gpu-nic-rail-0", "gpu-nic-rail-1", "gpu-nic-rails-2-0"]


def test_a_template_is_pinned_by_the_rails_annotation():
    assert plan_rails.pinned_to_rails({"metadata": {"annotations": {"aligned.dev/rails": "2,3"}}})
    assert not plan_rails.pinned_to_rails({"metadata": {"annotations": {"aligned.dev/rails": " "}}})
    assert not plan_rails.pinned_to_rails({"metadata": {"name": "gpu-nic-pair-1"}})
    assert not plan_rails.pinned_to_rails({})


def test_the_plan_is_the_same_planned_node_by_node():
    objects = rail_objects(SITE_RULES)
    assert plan_site(SITE, SITE_RULES, objects) == plan_site(SITE, SITE_RULES, objects, shape_cache=False)


def test_a_rail_template_gets_only_nics_of_its_rail_and_fits_nothing_without_that_rail():
    # the rail-0 NIC shares the GPU's root, the rail-1 NIC is on the other socket
    far = rail_node(
        [("0000:11:00.0", "pci0000:10", 0)], [("0000:12:00.0", "pci0000:10", 0), ("0000:92:00.0", "pci0000:90", 1)]
    )
    only_rail_0 = aligned_node(1)
    plan = plan_site({"far": far, "one": only_rail_0}, {"far": dict(NIC_NAME_RULE, count=2), "one": NIC_NAME_RULE})
    rail_1 = plan["gpu-nic-rail-1"]
    assert node_rails_of(rail_1, "far") == [[1]]
    allocation = rail_1["nodes"]["far"]["allocations"][0]
    assert allocation["devices"]["nic-0"] == ["nic-0000-92-00-0"] and allocation["subrequests"] == {"nic-0": "any"}
    assert allocation["worst_level"] == "SYS"
    assert rail_1["nodes"]["one"]["fits"] == 0 and rail_1["nodes"]["one"]["fits_per_rail"] == {"0": 0}
    assert "not enough matching devices" in rail_1["nodes"]["one"]["reason"]
    assert rail_1["fits_per_rail"] == {"0": 0, "1": 1}
    # and the rail-0 template never takes the rail-1 NIC, even once the rail-0 NIC is held
    assert node_rails_of(plan["gpu-nic-rail-0"], "far") == [[0]] and plan["gpu-nic-rail-0"]["nodes"]["far"]["fits"] == 1


@pytest.mark.parametrize(
    ("nic_1", "subrequest", "level"),
    [
        (("0000:32:00.0", "pci0000:30", 0), "same-numa", "NODE"),  # no GPU on its root, one on its NUMA node
        (("0000:92:00.0", "pci0000:90", 1), "any", "SYS"),  # nothing on its NUMA node either
    ],
)
def test_a_rail_template_falls_back_to_the_best_level_the_node_allows(nic_1, subrequest, level):
    gpus = [("0000:11:00.0", "pci0000:10", 0), ("0000:21:00.0", "pci0000:20", 0)]
    node = rail_node(gpus, [("0000:12:00.0", "pci0000:10", 0), nic_1])
    rail_1 = plan_site({"n": node}, {"n": dict(NIC_NAME_RULE, count=2)})["gpu-nic-rail-1"]
    (allocation,) = rail_1["nodes"]["n"]["allocations"]
    assert allocation["subrequests"] == {"nic-0": subrequest} and allocation["worst_level"] == level
    assert allocation["rails"] == [1]


def test_the_nic_of_the_rail_gets_the_gpu_on_its_root_even_when_another_gpu_comes_first():
    # GPU 0 has no NIC on its root; the rail-1 NIC shares GPU 1's: the claim is PIX, not NODE
    gpus = [("0000:11:00.0", "pci0000:10", 0), ("0000:21:00.0", "pci0000:20", 0)]
    node = rail_node(gpus, [("0000:32:00.0", "pci0000:30", 0), ("0000:22:00.0", "pci0000:20", 0)])
    plan = plan_site({"n": node}, {"n": dict(NIC_NAME_RULE, count=2)})
    (allocation,) = plan["gpu-nic-rail-1"]["nodes"]["n"]["allocations"]
    assert allocation["devices"]["gpu-0"] == ["gpu-0000-21-00-0"] and allocation["subrequests"] == {
        "nic-0": "same-root"
    }


def test_k_rails_need_k_distinct_rails_each_pair_on_one_root():
    # two aligned pairs, but both NICs on rail 0 (a map that gives one rail twice)
    twice = aligned_node(2)
    rule = {"by": "map", "map": {"0000:12:00.0": 0, "0000:22:00.0": 0}, "count": 2}
    objects = rail_objects({"n": {"by": "pci_order", "count": 2}})
    plan = plan_site({"n": twice}, {"n": rule}, objects)
    assert plan["gpu-nic-rails-2-0"]["fits_total"] == 0
    assert any("rail 0 given to 2 NICs" in w for w in plan["_plan"]["warnings"])
    assert plan["gpu-nic-pair-2"]["fits_total"] == 1 and node_rails_of(plan["gpu-nic-pair-2"], "n") == [[0, 0]]
    assert plan["gpu-nic-pair-2"]["fits_per_rail"] is None  # not pinned
    # rails 0 and 1, but the rail-1 NIC shares no root with a GPU
    unaligned = rail_node(
        [("0000:11:00.0", "pci0000:10", 0), ("0000:21:00.0", "pci0000:20", 0)],
        [("0000:12:00.0", "pci0000:10", 0), ("0000:32:00.0", "pci0000:30", 0)],
    )
    plan = plan_site({"n": unaligned, "ok": aligned_node(2)}, {"n": NIC_NAME_RULE, "ok": NIC_NAME_RULE}, objects)
    blocks = plan["gpu-nic-rails-2-0"]
    assert blocks["nodes"]["n"]["fits"] == 0 and blocks["nodes"]["ok"]["fits"] == 1
    (allocation,) = blocks["nodes"]["ok"]["allocations"]
    assert allocation["rails"] == [0, 1] and allocation["aligned_level"] == "PIX"
    assert allocation["devices"] == {"nic-0": ["nic-0000-12-00-0"], "gpu-0": ["gpu-0000-11-00-0"],
                                     "nic-1": ["nic-0000-22-00-0"], "gpu-1": ["gpu-0000-21-00-0"]}  # fmt: skip


def test_without_a_rule_no_rail_is_known_and_none_is_guessed():
    plan = plan_site({"n": aligned_node(2)}, {}, rail_objects({"other": dict(NIC_NAME_RULE, count=1)}))
    pair = plan["gpu-nic-pair-1"]
    assert node_rails_of(pair, "n") == [[None], [None]] and pair["fits_per_rail"] is None
    assert plan["gpu-nic-rail-0"]["fits_per_rail"] == {}  # pinned, on a site without rails
    assert plan["_plan"]["rails"] == [] and plan["gpu-nic-rail-0"]["fits_total"] == 0
    # a NIC without a rail is no match for a rail template, not an error that aborts every allocation
    assert plan["gpu-nic-rail-0"]["errors"] == []
    assert plan["gpu-nic-rail-0"]["nodes"]["n"]["reason"].startswith("request nic-0/same-root, nic-0/same-numa")
    assert node_rails_of(plan["gpu-only"], "n") == [[], []]


# -- other drivers' NICs, and what our driver publishes --------------------------------------------


def dranet_slices(node: str, topology: dict, stray: str | None = None) -> list[dict]:
    """NVIDIA's GPUs and DRANET's NICs of a probed node, by PCI address; ``stray``: a NIC the probe lacks."""
    gpus, nics = [], []
    for device in topology["devices"]:
        bdf, root = device["pci_address"], {"resource.kubernetes.io/pcieRoot": {"string": device["pcie_root"]}}
        name = "pci-" + bdf.replace(":", "-").replace(".", "-")
        if device["kind"] == "gpu":
            gpus.append({"name": f"gpu-{len(gpus)}", "attributes": {"type": {"string": "gpu"},
                         "resource.kubernetes.io/pciBusID": {"string": bdf}, **root}})  # fmt: skip
        else:
            nics.append({"name": name, "attributes": {"dra.net/pciAddress": {"string": bdf}, **root}})
    if stray:
        nics.append({"name": "pci-stray", "attributes": {"dra.net/pciAddress": {"string": stray}}})
    return [resource_slice(node, "gpu.nvidia.com", gpus), resource_slice(node, "dra.net", nics)]


def other_driver_objects() -> list[dict]:
    return rail_objects(
        {"n": NIC_NAME_RULE},
        {"drivers": ["gpu.nvidia.com", "dra.net"], "gpu_driver": "gpu.nvidia.com", "nic_driver": "dra.net"},
    )


def plan_slices(slices: list, topologies: dict, rails: dict, objects: list, **kwargs) -> dict:
    classes = [o for o in objects if o["kind"] == "DeviceClass"]
    templates = [o for o in objects if o["kind"] != "DeviceClass"]
    nodes = planner.nodes_from_slices(slices, topologies, rails)
    result = planner.plan("s", nodes, classes, templates, **kwargs)
    return {t["name"]: t for t in result["templates"]} | {"_plan": result}


def test_other_drivers_nics_get_their_rails_from_the_rule():
    topology = aligned_node(2)
    rails, _problems = plan_rails.node_rails("n", topology, NIC_NAME_RULE)
    slices = dranet_slices("n", topology, stray="0000:ee:00.0")
    plan = plan_slices(slices, {"n": topology}, {"n": rails}, other_driver_objects())
    nic_only = plan["nic-only"]
    assert [(a["devices"]["device"], a["rails"]) for a in nic_only["nodes"]["n"]["allocations"]] == [
        (["dra.net/pci-0000-12-00-0"], [0]),
        (["dra.net/pci-0000-22-00-0"], [1]),
        (["dra.net/pci-stray"], [None]),  # not a function of the probed node: its rail is unknown
    ]
    assert nic_only["fits_per_rail"] is None  # not pinned to a rail
    assert node_rails_of(plan["gpu-nic-pair-1"], "n") == [[0], [1]]
    assert not [n for n in plan if n.startswith("gpu-nic-rail")]  # DRANET publishes no rail to select on


def test_other_drivers_nics_of_nodes_that_look_alike_keep_their_own_rails():
    # one shape to the selectors, but the map gives the NICs other rails on the second node
    topology = aligned_node(2)
    rule = {
        "by": "map",
        "map": {"0000:12:00.0": 0, "0000:22:00.0": 1},
        "nodes": {"b": {"0000:12:00.0": 1, "0000:22:00.0": 0}},
    }
    rails = {node: plan_rails.node_rails(node, topology, rule)[0] for node in ("a", "b")}
    slices = dranet_slices("a", topology) + dranet_slices("b", topology)
    objects = other_driver_objects()
    plan = plan_slices(slices, {"a": topology, "b": topology}, rails, objects)
    assert plan == plan_slices(slices, {"a": topology, "b": topology}, rails, objects, shape_cache=False)
    assert node_rails_of(plan["nic-only"], "a") == [[0], [1]] and node_rails_of(plan["nic-only"], "b") == [[1], [0]]


def test_a_published_rail_wins_over_the_rule_and_the_plan_says_they_disagree():
    topology = aligned_node(2)
    rule_rails, _problems = plan_rails.node_rails("n", topology, NIC_NAME_RULE)  # nic0 on rail 0, nic1 on rail 1
    published = dra.devices_from_topology(topology, rails={"0000:12:00.0": 1, "0000:22:00.0": 0})
    slices = dra_slices.resource_slices("n", published)
    plan = plan_slices(slices, {"n": topology}, {"n": rule_rails}, rail_objects({"n": dict(NIC_NAME_RULE, count=2)}))
    assert node_rails_of(plan["nic-only"], "n") == [[1], [0]]
    # the scheduler selects on the published rail: the rail-1 template gets the NIC the driver says is on rail 1
    assert plan["gpu-nic-rail-1"]["nodes"]["n"]["allocations"][0]["devices"]["nic-0"] == ["nic-0000-12-00-0"]
    assert plan["_plan"]["warnings"] == [
        "n: nic-0000-12-00-0 publishes dra.aligned.dev/rail 1, the site's rule puts 0000:12:00.0 on rail 0; "
        "the published rail is planned (the scheduler selects on it)",
        "n: nic-0000-22-00-0 publishes dra.aligned.dev/rail 0, the site's rule puts 0000:22:00.0 on rail 1; "
        "the published rail is planned (the scheduler selects on it)",
    ]


def test_our_nics_without_a_published_rail_are_on_the_rules_rail_and_no_rail_template_gets_them():
    topology = aligned_node(1)
    rule_rails, _problems = plan_rails.node_rails("n", topology, NIC_NAME_RULE)
    slices = dra_slices.resource_slices("n", dra.devices_from_topology(topology))
    plan = plan_slices(slices, {"n": topology}, {"n": rule_rails}, rail_objects({"n": dict(NIC_NAME_RULE, count=1)}))
    assert node_rails_of(plan["gpu-nic-pair-1"], "n") == [[0]]
    assert plan["gpu-nic-rail-0"]["fits_total"] == 0
    (warning,) = plan["_plan"]["warnings"]
    assert warning.startswith(
        "n: nic-0000-12-00-0 publishes no dra.aligned.dev/rail; the site's rule puts 0000:12:00.0 on rail 0"
    )


# -- the rule on each node, as the plan module reads it ------------------------------------------------


def test_node_rules_check_every_rule_and_name_the_node():
    assert plan_rails.node_rules(["a", "b", "c"], {"a": NIC_NAME_RULE, "b": None}, {"by": "pci_order"}) == {
        "a": NIC_NAME_RULE,
        "c": {"by": "pci_order"},
    }
    with pytest.raises(planner.PlanError, match=r"^rail_rules\.b: aligned_dra_rails\.by: one of"):
        plan_rails.node_rules(["a"], {"b": {"by": "rows"}})
    with pytest.raises(planner.PlanError, match=r"^rail_rule: aligned_dra_rails\.pattern"):
        plan_rails.node_rules(["a"], {}, {"by": "netdev_name"})


def test_the_subnet_rule_reads_the_addresses_the_probe_read():
    topology = aligned_node(2)
    rule = {"by": "subnet", "subnets": ["192.168.128.0/21", "192.168.136.0/21"]}
    addresses = {"nic0": ["192.168.137.4/21"], "nic1": ["192.168.130.9/21"]}
    assert plan_rails.node_rails("n", dict(topology, netdev_addresses=addresses), rule) == (
        {"0000:12:00.0": 1, "0000:22:00.0": 0},
        [],
    )
    # a captured tree has no addresses: the rails are unknown (no rail in the plan), and the plan says why
    rails, notes = plan_rails.node_rails("n", dict(topology, netdev_addresses=None), dict(rule, count=2))
    assert rails == {} and notes == [
        f"n: rails unknown: rule {rail_rule.describe(rail_rule.check_rule(rule))} places NICs by their IPv4 "
        "addresses, and none were read on this node (a captured tree)"
    ]  # not "rails 0, 1 of count 2: no RDMA NIC is on them": unknown is not missing
    # addresses given (the plan module's rail_addresses) win over the topology's
    assert plan_rails.node_rails("n", dict(topology, netdev_addresses=None), rule, addresses=addresses)[0] == {
        "0000:12:00.0": 1,
        "0000:22:00.0": 0,
    }


def test_a_shared_claims_rails_count_once_on_the_site():
    result = {"fits_per_rail": {"0": 1}}
    assert plan_rails.site_fits_per_rail([result, result], [0, 1], cap=1) == {"0": 1, "1": 0}
    assert plan_rails.site_fits_per_rail([result, result], [0, 1]) == {"0": 2, "1": 0}


def test_the_summary_keeps_the_first_warnings_only():
    result = {"templates": [], "warnings": [f"w{i}" for i in range(25)]}
    summary = planner.plan_summary(result)
    assert summary["warnings"][:20] == result["warnings"][:20]
    assert summary["warnings"][20:] == ["... and 5 more (the whole plan has them)"] and len(result["warnings"]) == 25
