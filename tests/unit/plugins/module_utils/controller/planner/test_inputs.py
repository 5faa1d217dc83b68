# SPDX-License-Identifier: Apache-2.0
"""planner.inputs: a site's planner input from module options, and the errors the module tests do not reach.

The ``plan`` module's tests (``tests/unit/plugins/modules/test_plan.py``) cover the messages a user
sees through the module; here the library on its own: options a module does not have, counter
quantities and templates that do not compile, the ``required`` check left out, and inputs left as given.
"""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.controller.planner import inputs as planner_inputs
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    NIC_NAME_RULE,
    aligned_node,
    pair_objects,
    template,
)
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import PAIR_NODE_TOPOLOGY as TOPOLOGY


def test_a_module_without_the_other_options_reads_them_as_not_given():
    site = planner_inputs.load_site({"objects": pair_objects(), "topologies": {"n1": TOPOLOGY}})
    assert sorted(site.nodes) == ["n1"] and site.warnings == []
    objects = pair_objects()
    assert site.templates == [o for o in objects if o["kind"] in ("ResourceClaimTemplate", "ResourceClaim")]
    assert site.classes == [o for o in objects if o["kind"] == "DeviceClass"] and site.classes
    assert site.accounted == {"nodes_failed": {}, "node_counts": {"ok": 1, "failed": 0, "unreachable": 0}}


def test_the_rail_rules_give_the_nics_their_rails_and_the_problems_are_warnings():
    params = {"objects": pair_objects(), "topologies": {"a": aligned_node(2)},
              "rail_rules": {"a": dict(NIC_NAME_RULE, count=3)}}  # fmt: skip
    site = planner_inputs.load_site(params)
    assert site.nodes["a"]["rails"] == {"0000:12:00.0": 0, "0000:22:00.0": 1}
    assert len(site.warnings) == 1 and site.warnings[0].startswith("rails: a: ") and "2" in site.warnings[0]


def test_required_is_checked_only_when_given():
    params = {"objects": pair_objects(), "topologies": {"n1": TOPOLOGY}}
    assert planner_inputs.load_site(params, required=None).nodes
    with pytest.raises(planner_inputs.InputError, match=r"^required: required templates that are not given: ghost"):
        planner_inputs.load_site(params, required=["ghost"])


def test_node_counts_of_the_wrong_shape_name_the_option():
    params = {"objects": pair_objects(), "topologies": {"n1": TOPOLOGY}, "node_counts": {"ok": -1}}
    with pytest.raises(planner_inputs.InputError, match=r"^node_counts: needs counts 'ok', 'failed' and 'unreachable'"):
        planner_inputs.load_site(params)


def test_a_template_on_a_class_that_is_not_given_names_objects():
    objects = pair_objects() + [template("lost", [{"name": "r", "exactly": {"deviceClassName": "ghost"}}])]
    with pytest.raises(planner_inputs.InputError, match=r"^objects: template lost: request r uses DeviceClass 'ghost'"):
        planner_inputs.compiled_objects(objects)


@pytest.mark.parametrize("option", ["slices", "slice_files"])
def test_a_counter_that_is_no_quantity_names_the_slices_option(tmp_path, option):
    slices = dra_slices.resource_slices("n1", dra.devices_from_topology(TOPOLOGY))
    slices[0]["spec"]["sharedCounters"] = [{"name": "set", "counters": {"memory": {"value": "lots"}}}]
    params = {"objects": pair_objects(), "slices": slices}
    if option == "slice_files":
        path = tmp_path / "slices.json"
        path.write_text(json.dumps(slices))
        params = {"objects": pair_objects(), "slice_files": [str(path)]}
    with pytest.raises(planner_inputs.InputError, match=rf"^{option}: .*lots"):
        planner_inputs.load_site(params)


def test_topology_files_beside_slices_are_all_read_first_and_a_bad_one_names_the_node(tmp_path):
    good = tmp_path / "n1.json"
    good.write_text(json.dumps(TOPOLOGY))
    slices = dra_slices.resource_slices("n1", dra.devices_from_topology(TOPOLOGY))
    params = {"objects": pair_objects(), "slices": slices,
              "topology_files": {"n1": str(good), "n2": str(tmp_path / "missing.json")}}  # fmt: skip
    with pytest.raises(planner_inputs.InputError, match=r"^topology_files\.n2: cannot read .*missing\.json"):
        planner_inputs.load_site(params)
    # a failed node's file is never read
    params["nodes_failed"] = {"n2": {"state": "unreachable", "stage": "probe"}}
    site = planner_inputs.load_site(params)
    assert sorted(site.nodes) == ["n1"] and site.accounted["node_counts"]["unreachable"] == 1


def test_a_bad_topology_dir_names_the_option(tmp_path):
    (tmp_path / "n1.json").write_text("{broken")
    with pytest.raises(planner_inputs.InputError, match=r"^topology_dir: cannot read"):
        planner_inputs.topology_source({"topology_dir": str(tmp_path)})


def test_no_devices_at_all_is_refused():
    with pytest.raises(
        planner_inputs.InputError, match=r"^topologies, topology_files, topology_dir, slices or slice_files"
    ):
        planner_inputs.load_site({"objects": pair_objects()})


def test_bad_input_changes_nothing_it_was_given():
    params = {"objects": pair_objects(), "topologies": {"n1": TOPOLOGY, "n2": {"devices": 5}},
              "rail_rules": {"n1": NIC_NAME_RULE}}  # fmt: skip
    before = copy.deepcopy(params)
    with pytest.raises(planner_inputs.InputError, match=r"^topologies\.n2\.devices: must be a list"):
        planner_inputs.load_site(params)
    assert params == before
    good = {"objects": pair_objects(), "topologies": {"n1": TOPOLOGY}, "rail_rules": {"n1": NIC_NAME_RULE}}
    before = copy.deepcopy(good)
    planner_inputs.load_site(good)
    assert good == before
