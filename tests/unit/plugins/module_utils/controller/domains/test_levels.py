# SPDX-License-Identifier: Apache-2.0
"""controller/domains/levels.py: the levels, a site's placement and its problems, node labels, the tree."""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.domains import levels
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.levels import (
    check_levels,
    domain_tree,
    node_label_objects,
    site_placement,
)
from ansible_collections.aligned.dra.plugins.module_utils.controller.domains.shared import PlacementError

LEVELS = [{"name": "block", "label": "aligned.dev/block"}, {"name": "rack", "label": "aligned.dev/rack"}]


def site(**placements: dict | None) -> tuple[dict, list[str]]:
    return site_placement(LEVELS, placements, {})


# -- check_levels ---------------------------------------------------------------------------------


def test_good_levels_come_back_normalised():
    assert check_levels(LEVELS) == LEVELS
    assert check_levels(None) == [] and check_levels([]) == []
    assert check_levels([{"name": "zone", "label": "topology.kubernetes.io/zone"}]) == [
        {"name": "zone", "label": "topology.kubernetes.io/zone"}
    ]
    assert check_levels([{"name": "rack", "label": "rack_Id.2"}])[0]["label"] == "rack_Id.2"  # no prefix: fine


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"name": "rack"}, r"^aligned_dra_placement_levels: must be a list .*\(got dict\)"),
        (["rack"], r"^aligned_dra_placement_levels\[0\]: must be a mapping"),
        ([{"name": "rack", "lable": "a/b"}], r"\[0\]: unknown key 'lable'; did you mean label\?"),
        ([{"name": "Rack", "label": "a/b"}], r"^aligned_dra_placement_levels\[0\]\.name: 'Rack' is not a DNS label"),
        ([{"label": "a/b"}], r"\[0\]\.name: None is not a DNS label"),
        (
            [LEVELS[0], {"name": "block", "label": "x/y"}],
            r"^aligned_dra_placement_levels\[1\]\.name: 'block' is also the name of level 0",
        ),
        ([{"name": "rack", "label": "bad key/rack"}], r"\[0\]\.label: 'bad key/rack' is not a label key"),
        ([{"name": "rack", "label": "a/" + "r" * 64}], r"\[0\]\.label: .* is not a label key"),
        ([{"name": "rack", "label": "a/b/c"}], r"\[0\]\.label: 'a/b/c' is not a label key"),
        ([{"name": "rack", "label": "/rack"}], r"\[0\]\.label: '/rack' is not a label key"),
        ([{"name": "rack", "label": 7}], r"\[0\]\.label: 7 is not a label key"),
        ([{"name": "host", "label": "kubernetes.io/hostname"}], r"\[0\]\.label: kubernetes.io/hostname is the implied"),
        ([{"name": "site", "label": "aligned.dev/site"}], r"\[0\]\.label: aligned.dev/site is set by the collection"),
        (
            [LEVELS[0], {"name": "rack", "label": "aligned.dev/block"}],
            r"^aligned_dra_placement_levels\[1\]\.label: 'aligned.dev/block' is also the label of level 0",
        ),
    ],
)
def test_bad_levels_name_the_field(raw, message):
    with pytest.raises(PlacementError, match=message):
        check_levels(raw)


def test_at_most_fifteen_levels_kueue_adds_the_hostname():
    many = [{"name": f"l{i}", "label": f"aligned.dev/l{i}"} for i in range(16)]
    assert len(check_levels(many[:15])) == 15
    with pytest.raises(PlacementError, match="16 levels; at most 15"):
        check_levels(many)


def test_the_field_name_is_the_callers():
    with pytest.raises(PlacementError, match=r"^levels\[0\]\.name"):
        check_levels([{"name": "X", "label": "a"}], where="levels")


# -- site_placement -------------------------------------------------------------------------------


def test_a_good_site():
    placement, problems = site_placement(
        LEVELS,
        {
            "h1": {"block": "b1", "rack": "r07"},
            "h2": {"block": "b1", "rack": "r08"},
            "h3": {"block": "b2", "rack": "r09"},
        },
        {"h1": "node-1"},
    )
    assert problems == []
    assert placement == {
        "levels": LEVELS,
        "domains": {
            "h1": {"block": "b1", "rack": "r07"},
            "h2": {"block": "b1", "rack": "r08"},
            "h3": {"block": "b2", "rack": "r09"},
        },
        "node_names": {"h1": "node-1", "h2": "h2", "h3": "h3"},
    }


def test_a_host_without_a_level():
    placement, problems = site(h1={"block": "b1", "rack": "r1"}, h2={"block": "b1"}, h3=None)
    assert problems == [
        "2 hosts (h2, h3): aligned_dra_placement.rack = (not set): every host needs a domain at every level "
        "(levels: block, rack)",
        "host h3: aligned_dra_placement.block = (not set): every host needs a domain at every level "
        "(levels: block, rack)",
    ]
    # every host, every level: None where the domain is missing
    assert placement["domains"]["h2"] == {"block": "b1", "rack": None}
    assert placement["domains"]["h3"] == {"block": None, "rack": None}


def test_a_level_the_site_does_not_declare_suggests_the_closest():
    _placement, problems = site(h1={"block": "b1", "rack": "r1", "racks": "r1"}, h2={"block": "b1", "rak": "r1"})
    assert problems == [
        "host h1: aligned_dra_placement.racks = \"r1\": the site declares no level 'racks'; did you mean rack? "
        "(levels: block, rack)",
        "host h2: aligned_dra_placement.rack = (not set): every host needs a domain at every level "
        "(levels: block, rack)",
        "host h2: aligned_dra_placement.rak = \"r1\": the site declares no level 'rak'; did you mean rack? "
        "(levels: block, rack)",
    ]


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("r 07", "'r 07' is not a valid label value"),
        ("-r07", "'-r07' is not a valid label value"),
        ("r" * 64, "is not a valid label value"),
        ("", "must not be empty"),
        (7, "7 is not a string (quote numbers"),
        (True, "True is not a string"),
    ],
)
def test_a_domain_that_is_not_a_label_value(value, reason):
    placement, problems = site(h1={"block": "b1", "rack": value})
    assert len(problems) == 1 and problems[0].startswith("host h1: aligned_dra_placement.rack = ")
    assert reason in problems[0]
    assert placement["domains"]["h1"]["rack"] is None


def test_the_longest_label_value_is_fine():
    assert site(h1={"block": "b1", "rack": "r" * 63})[1] == []


def test_a_domain_inside_two_domains_of_the_level_above():
    _placement, problems = site(
        a={"block": "b1", "rack": "r07"},
        b={"block": "b1", "rack": "r07"},
        c={"block": "b2", "rack": "r07"},
        d={"block": "b2", "rack": "r08"},
    )
    assert problems == [
        '3 hosts (a, b, c): aligned_dra_placement.rack = "r07": rack r07 is in block b1 (2 hosts (a, b)) '
        "and block b2 (host c); a domain sits inside one domain of the level above"
    ]


def test_nesting_is_checked_at_every_pair_of_levels():
    three = [*LEVELS, {"name": "shelf", "label": "aligned.dev/shelf"}]
    _placement, problems = site_placement(
        three,
        {"a": {"block": "b1", "rack": "r1", "shelf": "s1"}, "b": {"block": "b1", "rack": "r2", "shelf": "s1"}},
        {},
    )
    assert len(problems) == 1 and "shelf s1 is in rack r1 (host a) and rack r2 (host b)" in problems[0]


def test_many_hosts_with_one_problem_are_said_once_with_the_count():
    placements = {f"h{i:03}": {"block": "b1"} for i in range(200)}
    _placement, problems = site_placement(LEVELS, placements, {})
    assert problems == [
        "200 hosts (h000, h001, h002 and 197 more): aligned_dra_placement.rack = (not set): every host needs a "
        "domain at every level (levels: block, rack)"
    ]


def test_a_placement_on_a_site_without_levels():
    placement, problems = site_placement([], {"h1": {"rack": "r1"}, "h2": {}, "h3": None}, {})
    assert problems == [
        'host h1: aligned_dra_placement = {"rack": "r1"}: the site declares no levels '
        "(aligned_dra_placement_levels); set them in the site's group_vars"
    ]
    assert placement["domains"] == {"h1": {}, "h2": {}, "h3": {}}


def test_a_placement_that_is_not_a_mapping():
    assert site(h1=["b1", "r1"])[1] == [
        'host h1: aligned_dra_placement = ["b1", "r1"]: must map each level name to the host\'s domain'
    ]


def test_two_hosts_on_one_node():
    _placement, problems = site_placement(
        LEVELS, {"a": {"block": "b", "rack": "r"}, "b": {"block": "b", "rack": "r"}}, {"a": "n1", "b": "n1"}
    )
    assert problems == [
        '2 hosts (a, b): aligned_dra_driver_node_name = "n1": 2 hosts (a, b) are all Kubernetes node n1; '
        "one host per node"
    ]


def test_bad_levels_raise():
    with pytest.raises(PlacementError, match="aligned_dra_placement_levels"):
        site_placement([{"name": "rack"}], {}, {})


# -- node labels ----------------------------------------------------------------------------------


def test_one_apply_configuration_per_node_with_only_the_level_labels():
    placement, _problems = site_placement(
        LEVELS, {"h2": {"block": "b1", "rack": "r2"}, "h1": {"block": "b1", "rack": "r1"}}, {"h2": "a-node"}
    )
    assert node_label_objects(placement) == [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "a-node", "labels": {"aligned.dev/block": "b1", "aligned.dev/rack": "r2"}},
        },
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "h1", "labels": {"aligned.dev/block": "b1", "aligned.dev/rack": "r1"}},
        },
    ]
    with_site = node_label_objects(placement, "lab")
    assert with_site[1]["metadata"]["labels"] == {
        "aligned.dev/block": "b1",
        "aligned.dev/rack": "r1",
        levels.SITE_LABEL: "lab",
    }


def test_without_levels_every_node_gets_empty_labels_so_the_owned_keys_go():
    placement, _problems = site_placement([], {"h1": {}, "h2": None}, {})
    assert node_label_objects(placement, "lab") == [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "h1", "labels": {}}},
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "h2", "labels": {}}},
    ]


def test_the_site_label_problem():
    assert levels.site_label_problem("lab-east") is None
    assert "not a valid label value" in levels.site_label_problem("lab_")
    assert "not a valid label value" in levels.site_label_problem("s" * 64)


# -- the tree -------------------------------------------------------------------------------------


def test_the_domain_tree_orders_domains_by_parent_then_naturally():
    placement, problems = site_placement(
        LEVELS,
        {
            "n10": {"block": "b2", "rack": "r10"},
            "n2": {"block": "b2", "rack": "r2"},
            "n3": {"block": "b2", "rack": "r2"},
            "n1": {"block": "b1", "rack": "r9"},
        },
        {},
    )
    assert problems == []
    assert domain_tree(placement) == {
        "levels": ["block", "rack"],
        "domains": {
            "block": [
                {"name": "b1", "parent": None, "hosts": ["n1"]},
                {"name": "b2", "parent": None, "hosts": ["n2", "n3", "n10"]},
            ],
            "rack": [
                {"name": "r9", "parent": "b1", "hosts": ["n1"]},
                {"name": "r2", "parent": "b2", "hosts": ["n2", "n3"]},
                {"name": "r10", "parent": "b2", "hosts": ["n10"]},
            ],
        },
    }


def test_the_tree_of_a_site_without_levels_is_empty():
    placement, _problems = site_placement([], {"h1": None}, {})
    assert domain_tree(placement) == {"levels": [], "domains": {}}
