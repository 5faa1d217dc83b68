# SPDX-License-Identifier: Apache-2.0
"""Rail templates: which are rendered for which rules, their shape, settings, and validation per minor."""

from __future__ import annotations

import kubernetes_validate
import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates

RULE_4 = {"by": "pci_order", "count": 4}
RAIL = 'device.attributes["dra.aligned.dev"].rail'


def names(rendered: dict) -> list[str]:
    return [o["metadata"]["name"] for o in rendered["objects"] if o["kind"] == "ResourceClaimTemplate"]


def rail_names(rendered: dict) -> list[str]:
    return [n for n in names(rendered) if n.startswith("gpu-nic-rail")]


def by_name(rendered: dict, name: str) -> dict:
    return next(o for o in rendered["objects"] if o["metadata"]["name"] == name)


@pytest.mark.parametrize("rules", [None, {}, {"h1": None}, {"h1": {}}])
def test_without_rails_nothing_new_is_rendered(rules):
    plain = claims.render({}, "s", "1.36")
    rendered = claims.render({}, "s", "1.36", rail_rules=rules)
    assert rendered["objects"] == plain["objects"] and rendered["skipped"] == plain["skipped"]
    assert rendered["rails"] is None


def test_a_site_of_four_rails_gets_a_template_per_rail_and_blocks_of_two_and_four():
    rendered = claims.render({}, "s", "1.36", rail_rules={"h1": RULE_4, "h2": RULE_4})
    assert rendered["rails"] == [0, 1, 2, 3]
    assert rail_names(rendered) == [
        "gpu-nic-rail-0", "gpu-nic-rail-1", "gpu-nic-rail-2", "gpu-nic-rail-3",
        "gpu-nic-rails-2-0", "gpu-nic-rails-2-2", "gpu-nic-rails-4-0",
    ]  # fmt: skip
    assert {"name": "gpu-nic-rails-8-*", "reason": "the site declares 4 rails (0, 1, 2, 3), fewer than 8"} in rendered[
        "skipped"
    ]
    assert by_name(rendered, "gpu-nic-rails-2-2")["metadata"]["annotations"] == {"aligned.dev/rails": "2,3"}


@pytest.mark.parametrize("minor", dra_gates.SUPPORTED_MINORS)
def test_rail_templates_are_valid_for_every_minor(minor):
    settings = {"templates": {"rails": {"counts": [1, 2, 4, 8], "sets": {"even-rails": [0, 2, 4, 6]}}}}
    rules = {"h1": {"by": "netdev_name", "pattern": r"^nic(\d+)$", "count": 8}}
    rendered = claims.render(settings, "s", minor, rail_rules=rules)
    pinned = [o for o in rendered["objects"] if o["metadata"]["name"].startswith(("gpu-nic-rail", "even-rails"))]
    assert len(pinned) == 8 + 4 + 2 + 1 + 1
    assert claims.validate_all(pinned, minor) == []
    for obj in pinned:
        kubernetes_validate.validate(obj, minor + ".0", strict=True)


def test_one_rail_one_gpu_and_the_nic_of_that_rail_nearest_first():
    template = by_name(claims.render({}, "s", "1.36", rail_rules={"h1": RULE_4}), "gpu-nic-rail-2")
    devices = template["spec"]["spec"]["devices"]
    nic, gpu = devices["requests"]
    # the NIC first, so that the scheduler looks for a GPU on the NIC's root before settling for less
    assert nic["name"] == "nic-0" and gpu["name"] == "gpu-0"
    assert [a["name"] for a in nic["firstAvailable"]] == ["same-root", "same-numa", "any"]
    for alternative in nic["firstAvailable"]:
        assert alternative["deviceClassName"] == "aligned-nic"
        assert alternative["selectors"] == [{"cel": {"expression": f"has({RAIL}) && {RAIL} == 2"}}]
    assert gpu["exactly"]["deviceClassName"] == "aligned-gpu"
    assert devices["constraints"] == [
        {"requests": ["gpu-0", "nic-0/same-root"], "matchAttribute": "resource.kubernetes.io/pcieRoot"},
        {"requests": ["gpu-0", "nic-0/same-numa"], "matchAttribute": "resource.kubernetes.io/numaNode"},
    ]


def test_k_rails_k_pairs_each_on_one_root_each_nic_on_its_rail():
    template = by_name(claims.render({}, "s", "1.36", rail_rules={"h1": RULE_4}), "gpu-nic-rails-2-2")
    devices = template["spec"]["spec"]["devices"]
    assert [r["name"] for r in devices["requests"]] == ["nic-0", "gpu-0", "nic-1", "gpu-1"]
    assert devices["requests"][0]["exactly"]["selectors"][0]["cel"]["expression"] == f"has({RAIL}) && {RAIL} == 2"
    assert devices["requests"][2]["exactly"]["selectors"][0]["cel"]["expression"] == f"has({RAIL}) && {RAIL} == 3"
    assert devices["constraints"] == [
        {"requests": ["gpu-0", "nic-0"], "matchAttribute": "resource.kubernetes.io/pcieRoot"},
        {"requests": ["gpu-1", "nic-1"], "matchAttribute": "resource.kubernetes.io/pcieRoot"},
    ]


@pytest.mark.parametrize(
    ("rules", "rails"),
    [
        ({"h1": {"by": "subnet", "subnets": ["10.0.0.0/24", "10.0.1.0/24", "10.0.2.0/24"]}}, [0, 1, 2]),
        ({"h1": {"by": "map", "map": {"0000:1d:00.0": 0}, "nodes": {"n2": {"0000:1d:00.0": 5}}}}, [0, 5]),
        (
            {"h1": {"by": "pci_order", "count": 2}, "h2": {"by": "netdev_name", "pattern": "^n(\\d)$", "count": 3}},
            [0, 1, 2],
        ),
    ],
)
def test_the_rails_come_from_count_subnets_or_the_map(rules, rails):
    rendered = claims.render({"templates": {"rails": {"counts": [1]}}}, "s", "1.36", rail_rules=rules)
    assert rendered["rails"] == rails
    assert rail_names(rendered) == [f"gpu-nic-rail-{r}" for r in rails]


def test_a_rule_without_count_that_names_rails_only_on_the_node_says_so():
    rules = {"h1": {"by": "pci_order"}, "h2": {"by": "pci_order", "count": 1}}
    rendered = claims.render({"templates": {"rails": {"counts": [1]}}}, "s", "1.36", rail_rules=rules)
    assert rail_names(rendered) == ["gpu-nic-rail-0"]
    (note,) = [s for s in rendered["skipped"] if s["name"] == "gpu-nic-rail-*"]
    assert note["reason"].startswith("h1: aligned_dra_rails by pci_order has no count")


def test_other_nic_drivers_publish_no_rail_so_no_rail_template_is_rendered():
    settings = {"drivers": ["dra.aligned.dev", "dra.net"], "nic_driver": "dra.net"}
    rendered = claims.render(settings, "s", "1.36", rail_rules={"h1": RULE_4})
    assert rail_names(rendered) == []
    reasons = {s["name"]: s["reason"] for s in rendered["skipped"]}
    assert "publish no rail (dra.aligned.dev/rail)" in reasons["gpu-nic-rail-*"]
    assert "gpu-nic-rails-*-*" in reasons


def test_named_sets_and_sets_on_rails_the_site_lacks():
    settings = {"templates": {"rails": {"counts": [], "sets": {"outer": [0, 3], "far": [1, 7]}}}}
    rendered = claims.render(settings, "s", "1.36", rail_rules={"h1": RULE_4})
    assert rail_names(rendered) == [] and "outer" in names(rendered) and "far" not in names(rendered)
    assert {"name": "far", "reason": "rails 7 are not among the site's (0, 1, 2, 3)"} in rendered["skipped"]
    requests = by_name(rendered, "outer")["spec"]["spec"]["devices"]["requests"]
    assert requests[2]["exactly"]["selectors"][0]["cel"]["expression"].endswith("== 3")


def test_rail_templates_take_the_settings_names_and_selectors():
    settings = {
        "templates": {
            "rails": {
                "counts": [1, 2],
                "name": "r{rail}-pair",
                "blocks_name": "x{k}-from-{first}",
                "selectors": {"nic": ['device.attributes["dra.aligned.dev"].linkSpeed >= 400']},
            }
        }
    }
    rendered = claims.render(settings, "s", "1.36", rail_rules={"h1": {"by": "pci_order", "count": 2}})
    assert [n for n in names(rendered) if n.startswith(("r", "x"))] == ["r0-pair", "r1-pair", "x2-from-0"]
    selectors = by_name(rendered, "r1-pair")["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"][1]["selectors"]
    assert [s["cel"]["expression"] for s in selectors][1] == 'device.attributes["dra.aligned.dev"].linkSpeed >= 400'


def test_prioritized_list_off_leaves_out_the_per_rail_templates_only():
    rendered = claims.render({}, "s", "1.36", {"DRAPrioritizedList": False}, rail_rules={"h1": RULE_4})
    assert rail_names(rendered) == ["gpu-nic-rails-2-0", "gpu-nic-rails-2-2", "gpu-nic-rails-4-0"]
    reasons = {s["name"]: s["reason"] for s in rendered["skipped"]}
    assert "needs feature gate DRAPrioritizedList" in reasons["gpu-nic-rail-3"]


def test_disabled_rail_templates_are_not_rendered_nor_said():
    rendered = claims.render(
        {"templates": {"rails": {"enabled": False}}}, "s", "1.36", rail_rules={"h1": {"by": "pci_order"}}
    )
    assert rail_names(rendered) == [] and rendered["skipped"] == claims.render({}, "s", "1.36")["skipped"]


def test_tolerations_reach_every_rail_alternative():
    toleration = {"key": "dra.aligned.dev/unhealthy", "operator": "Exists"}
    rendered = claims.render({}, "s", "1.36", tolerations=[toleration], rail_rules={"h1": RULE_4})
    for alternative in by_name(rendered, "gpu-nic-rail-0")["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"]:
        assert alternative["tolerations"] == [toleration]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"counts": [17]}, "templates.rails.counts must be a list of integers 1..16"),
        ({"counts": [True]}, "templates.rails.counts must be a list of integers 1..16"),
        ({"sets": [[0, 1]]}, "templates.rails.sets must be a mapping"),
        ({"sets": {"Bad_Name": [0]}}, "templates.rails.sets: 'Bad_Name' is not a DNS subdomain"),
        ({"sets": {"two": [1, 1]}}, "templates.rails.sets.two: 1 to 16 different rails"),
        ({"sets": {"far": [64]}}, "templates.rails.sets.far: 1 to 16 different rails, each 0..63"),
        ({"name": "gpu-nic-rail"}, "templates.rails.name: 'gpu-nic-rail' must contain {rail}"),
        ({"name": "rail-{r}"}, "templates.rails.name: 'rail-{r}' is not a name pattern with {rail}"),
        ({"blocks_name": "rails-{k}"}, "templates.rails.blocks_name: 'rails-{k}' must contain {k}, {first}"),
        ({"bogus": 1}, "aligned_dra_claims.templates.rails: unknown option 'bogus'"),
        ({"selectors": {"cpus": []}}, "templates.rails.selectors: 'cpus' is not one of gpu, nic"),
    ],
)
def test_bad_rail_settings_name_the_setting(settings, message):
    with pytest.raises(claims.ClaimsError) as caught:
        claims.render({"templates": {"rails": settings}}, "s", "1.36")
    assert message in str(caught.value)


def test_a_malformed_rule_names_the_host_and_the_field():
    with pytest.raises(claims.ClaimsError) as caught:
        claims.render({}, "s", "1.36", rail_rules={"gpu-a01": {"by": "pci_order", "count": 0}})
    assert str(caught.value).startswith("gpu-a01: aligned_dra_rails.count: an integer from 1 to 64")


def test_two_templates_of_one_name_are_refused():
    settings = {"templates": {"rails": {"counts": [1], "sets": {"gpu-nic-rail-0": [1]}}}}
    with pytest.raises(claims.ClaimsError, match="two templates are named 'gpu-nic-rail-0'"):
        claims.render(settings, "s", "1.36", rail_rules={"h1": RULE_4})


def test_the_validation_knows_the_rail_attribute_and_its_type():
    assert dra_cel.KNOWN_ATTRIBUTES["dra.aligned.dev"]["rail"] == "int"
    template = by_name(claims.render({}, "s", "1.36", rail_rules={"h1": RULE_4}), "gpu-nic-rail-1")
    broken = template["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"][0]
    broken["selectors"] = [{"cel": {"expression": f'{RAIL} == "1"'}}]
    (problem,) = claims.validate(template, "1.36")
    assert 'is an int but is compared with "1"' in problem
