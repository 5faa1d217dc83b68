# SPDX-License-Identifier: Apache-2.0
"""The placement filter: one site's levels, domains, node names, problems and node label objects."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.aligned.dra.plugins.filter.placement import FilterModule, placement_filter
from ansible_collections.aligned.dra.plugins.filter.rails import rail_rules

LEVELS = [{"name": "block", "label": "aligned.dev/block"}, {"name": "rack", "label": "aligned.dev/rack"}]


def node(block: str, rack: str, site: str = "lab", **more: object) -> dict:
    return {
        "aligned_dra_site": site,
        "aligned_dra_placement_levels": LEVELS,
        "aligned_dra_placement": {"block": block, "rack": rack},
        **more,
    }


HOSTVARS = {
    "gpu-01": node("b1", "r1"),
    "gpu-02": node("b1", "r2", aligned_dra_driver_node_name="gpu-02.k8s"),
    "gpu-03": node("b1", "r2", aligned_dra_driver_node_name=""),
    "w-01": node("x", "y", site="west"),
}


def test_the_filter_is_registered():
    assert FilterModule().filters()["placement"] is placement_filter


def test_one_site_with_its_node_names_and_label_objects():
    result = placement_filter(HOSTVARS, list(HOSTVARS), "lab")
    assert result["problems"] == []
    assert result["levels"] == LEVELS
    assert result["domains"] == {
        "gpu-01": {"block": "b1", "rack": "r1"},
        "gpu-02": {"block": "b1", "rack": "r2"},
        "gpu-03": {"block": "b1", "rack": "r2"},
    }
    # the driver's node name (rail_rules' rule): aligned_dra_driver_node_name, else the host
    assert result["node_names"] == {"gpu-01": "gpu-01", "gpu-02": "gpu-02.k8s", "gpu-03": "gpu-03"}
    assert [o["metadata"]["name"] for o in result["label_objects"]] == ["gpu-01", "gpu-02.k8s", "gpu-03"]
    assert result["label_objects"][1] == {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "gpu-02.k8s",
            "labels": {"aligned.dev/block": "b1", "aligned.dev/rack": "r2", "aligned.dev/site": "lab"},
        },
    }


def test_a_site_without_levels_gets_empty_labels_and_an_unknown_site_nothing():
    hostvars = {"a": {"aligned_dra_site": "lab"}, "b": {}}
    result = placement_filter(hostvars, ["a", "b"], "lab")
    assert result["problems"] == [] and result["levels"] == []
    assert result["label_objects"] == [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "a", "labels": {}}}]
    # a host without a site is in the roles' default site
    assert [o["metadata"]["name"] for o in placement_filter(hostvars, ["a", "b"], "default")["label_objects"]] == ["b"]
    assert placement_filter(hostvars, ["a", "b"], "east") == {
        "levels": [],
        "domains": {},
        "node_names": {},
        "problems": [],
        "label_objects": [],
    }


def test_a_host_without_a_site_is_where_rail_rules_puts_it():
    # hostvars hold no role defaults: a host outside the play (--limit) that sets no aligned_dra_site
    # reaches the filters without one; both read it in the roles' default site, so a site's placement
    # and its rails come from the same hosts
    rule = {"by": "pci_order", "count": 1}
    hostvars = {
        "a": {"aligned_dra_site": "default", "aligned_dra_rails": rule},
        "b": {"aligned_dra_rails": rule},
        "c": {"aligned_dra_site": "lab", "aligned_dra_rails": rule},
    }
    for site in ("default", "lab"):
        placed = placement_filter(hostvars, list(hostvars), site)["node_names"]
        assert placed == rail_rules(hostvars, list(hostvars), site)["node_names"]
    assert list(placement_filter(hostvars, list(hostvars), "default")["node_names"]) == ["a", "b"]


def test_problems_leave_no_label_object():
    hostvars = dict(HOSTVARS, **{"gpu-04": node("b2", "r2")})
    result = placement_filter(hostvars, list(hostvars), "lab")
    assert result["problems"] == [
        '3 hosts (gpu-02, gpu-03, gpu-04): aligned_dra_placement.rack = "r2": rack r2 is in block b1 '
        "(2 hosts (gpu-02, gpu-03)) and block b2 (host gpu-04); a domain sits inside one domain of the level above"
    ]
    assert result["label_objects"] == []


def test_levels_that_differ_from_the_first_hosts_or_are_wrong():
    hostvars = dict(HOSTVARS, **{"gpu-04": node("b1", "r1", aligned_dra_placement_levels=LEVELS[:1])})
    result = placement_filter(hostvars, list(hostvars), "lab")
    assert any(
        p.startswith("gpu-04: aligned_dra_placement_levels differs from the site's first host gpu-01")
        for p in result["problems"]
    )
    assert result["label_objects"] == []
    wrong = {"a": {"aligned_dra_site": "lab", "aligned_dra_placement_levels": [{"name": "rack"}]}}
    result = placement_filter(wrong, ["a"], "lab")
    assert result["levels"] == [] and result["label_objects"] == []
    assert result["problems"] == [
        "site lab: aligned_dra_placement_levels[0].label: None is not a label key ([DNS subdomain/]name, the name "
        "at most 63 letters, digits, '-', '_' or '.')"
    ]


def test_a_site_name_that_is_no_label_value():
    hostvars = {"a": node("b1", "r1", site="lab_")}
    (problem,) = placement_filter(hostvars, ["a"], "lab_")["problems"]
    assert "site lab_: site name 'lab_' is not a valid label value" in problem


def test_bad_arguments():
    with pytest.raises(AnsibleFilterError, match="hosts must be a list"):
        placement_filter(HOSTVARS, "gpu-01", "lab")
    with pytest.raises(AnsibleFilterError, match="'nope' is not an inventory host"):
        placement_filter(HOSTVARS, ["nope"], "lab")
    with pytest.raises(AnsibleFilterError, match="site must be a site name"):
        placement_filter(HOSTVARS, ["gpu-01"], None)


def test_two_thousand_hosts_are_read_once_each():
    reads: dict[str, int] = {}

    class Counted(dict):
        def __init__(self, host: str, values: dict) -> None:
            super().__init__(values)
            self.host = host

        def get(self, key, default=None):
            reads[self.host] = reads.get(self.host, 0) + 1
            return super().get(key, default)

    hostvars = {f"n{i:04}": Counted(f"n{i:04}", node(f"b{i // 200}", f"r{i // 20}")) for i in range(2000)}
    result = placement_filter(hostvars, list(hostvars), "lab")
    assert result["problems"] == [] and len(result["label_objects"]) == 2000
    # the site, the levels, the placement and the node name: a handful of reads per host, never per pair
    assert max(reads.values()) <= 6
