# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.plan: inputs, plan.json writing with check mode and diff, required templates."""

from __future__ import annotations

import json

import pytest
import yaml
from ansible.module_utils.testing import patch_module_args

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
from ansible_collections.aligned.dra.plugins.modules import plan
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import PAIR_NODE_TOPOLOGY as TOPOLOGY
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import (
    device_class,
    exactly,
    resource_slice,
    template,
)
from ansible_collections.aligned.dra.tests.support.sites.plan_inputs import pair_objects as objects
from ansible_collections.aligned.dra.tests.support.sites.report_sites import topology_of


def run(capsys, args: dict) -> dict:
    with patch_module_args(args), pytest.raises(SystemExit):
        plan.main()
    return json.loads(capsys.readouterr().out)


def test_plan_from_topologies_writes_plan_json_once(tmp_path, capsys):
    dest = tmp_path / "site" / "plan.json"
    args = {"site": "s", "kubernetes_version": "1.36", "objects": objects(), "topologies": {"n1": TOPOLOGY},
            "required": ["gpu-nic-pair-1"], "dest": str(dest)}  # fmt: skip
    first = run(capsys, dict(args, _ansible_diff=True))
    assert first["changed"] is True and "diff" in first
    written = json.loads(dest.read_text())
    pair1 = next(t for t in written["templates"] if t["name"] == "gpu-nic-pair-1")
    assert pair1["fits_total"] == 1 and pair1["worst_level"] == "PIX" and pair1["required"] is True
    pair2 = next(t for t in written["templates"] if t["name"] == "gpu-nic-pair-2")
    assert pair2["fits_total"] == 0 and pair2["satisfiable"] is False
    assert run(capsys, args)["changed"] is False


def test_check_mode_writes_nothing(tmp_path, capsys):
    dest = tmp_path / "plan.json"
    result = run(capsys, {"site": "s", "objects": objects(), "topologies": {"n1": TOPOLOGY}, "dest": str(dest),
                          "_ansible_check_mode": True})  # fmt: skip
    assert result["changed"] is True
    assert not dest.exists()


def test_required_unsatisfied_fails_with_the_reason(capsys):
    result = run(capsys, {"site": "s", "objects": objects(), "topologies": {"n1": TOPOLOGY},
                          "required": ["gpu-nic-pair-2"]})  # fmt: skip
    assert result["failed"] is True
    assert "gpu-nic-pair-2: no node can allocate" in result["msg"]
    assert result["unsatisfied"] == ["gpu-nic-pair-2"]
    relaxed = run(capsys, {"site": "s", "objects": objects(), "topologies": {"n1": TOPOLOGY},
                           "required": ["gpu-nic-pair-2"], "fail_on_unsatisfied": False})  # fmt: skip
    assert "failed" not in relaxed


def test_plan_from_slice_files_and_topology_dir(tmp_path, capsys):
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    (nodes / "n1.json").write_text(json.dumps(TOPOLOGY))
    slices = dra_slices.resource_slices("n1", dra.devices_from_topology(TOPOLOGY))
    slice_file = tmp_path / "slices.yaml"
    slice_file.write_text(yaml.safe_dump_all(slices))
    from_files = run(capsys, {"site": "s", "objects": objects(), "slice_files": [str(slice_file)],
                              "topology_dir": str(nodes)})  # fmt: skip
    from_dir = run(capsys, {"site": "s", "objects": objects(), "topology_dir": str(nodes)})
    assert from_files["plan"]["templates"] == from_dir["plan"]["templates"]


def test_a_broken_node_file_in_topology_dir_fails_on_the_option(tmp_path, capsys):
    (tmp_path / "n1.json").write_text("{half a file")
    result = run(capsys, {"site": "s", "objects": objects(), "topology_dir": str(tmp_path)})
    assert result["failed"] is True
    assert result["msg"].startswith(f"topology_dir: cannot read {tmp_path / 'n1.json'}")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "topologies, topology_files, topology_dir, slices or slice_files"),
        ({"topology_dir": "/nonexistent"}, "topology_dir: /nonexistent is not a directory"),
        ({"topologies": {"n1": TOPOLOGY}, "required": ["ghost"]}, "required templates that are not given: ghost"),
        ({"topologies": {"n1": TOPOLOGY}, "device_options": {"bogus": 1}}, "unknown key 'bogus'"),
        ({"slice_files": ["/nonexistent.yaml"]}, "slice_files: cannot read /nonexistent.yaml"),
    ],
)
def test_bad_input_names_the_option(capsys, args, message):
    result = run(capsys, dict({"site": "s", "objects": objects()}, **args))
    assert result["failed"] is True
    assert message in result["msg"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"kind": "DeviceClass", "metadata": "x"}, "objects[3].metadata: must be a mapping (got str)"),
        ({"kind": "DeviceClass"}, "objects[3].metadata.name: must be a non-empty string"),
        (
            {
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t"},
                "spec": {"spec": {"devices": {"requests": "x"}}},
            },
            "objects[3].spec.spec.devices.requests: must be a list (got str)",
        ),
        (
            {"kind": "DeviceClass", "metadata": {"name": "x"}, "spec": {"selectors": [{"cel": {"expression": "1 +"}}]}},
            "objects: ",
        ),
    ],
)
def test_objects_of_the_wrong_shape_fail_naming_the_path(capsys, extra, message):
    given = objects()[:3] + [extra]
    result = run(capsys, {"site": "s", "objects": given, "topologies": {"n1": TOPOLOGY}})
    assert result["failed"] is True and result["msg"].startswith(message)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"slices": [{"spec": {"nodeName": "n", "devices": "x"}}]}, "slices[0].spec.devices: must be a list"),
        ({"topologies": {"n1": {"devices": 5}}}, "topologies.n1.devices: must be a list (got int)"),
        ({"topologies": {"n1": TOPOLOGY}, "device_options": {"exclude": 5}}, "device_options.exclude must be a list"),
    ],
)
def test_devices_of_the_wrong_shape_fail_naming_the_path(capsys, args, message):
    result = run(capsys, dict({"site": "s", "objects": objects()}, **args))
    assert result["failed"] is True and result["msg"].startswith(message)


def test_slice_file_with_items_that_are_no_list_is_refused(capsys, tmp_path):
    path = tmp_path / "slices.yaml"
    path.write_text("kind: ResourceSliceList\nitems: 5\n")
    result = run(capsys, {"site": "s", "objects": objects(), "slice_files": [str(path)]})
    assert result["failed"] is True
    assert result["msg"] == f"slice_files: {path}: 'items' of a ResourceSliceList must be a list"


@pytest.mark.parametrize("where", ["a directory", "under a file"])
def test_dest_that_cannot_be_written_fails_on_dest_and_writes_nothing(capsys, tmp_path, where):
    (tmp_path / "afile").write_text("x")
    dest = tmp_path / "adir" if where == "a directory" else tmp_path / "afile" / "plan.json"
    (tmp_path / "adir").mkdir()
    result = run(capsys, {"site": "s", "objects": objects(), "topologies": {"n1": TOPOLOGY}, "dest": str(dest)})
    assert result["failed"] is True and not result.get("changed")
    assert result["msg"].startswith(f"dest: cannot write {dest}: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"] and not list((tmp_path / "adir").iterdir())


def test_a_failed_nodes_file_is_never_planned_on_and_the_plan_lists_it(tmp_path, capsys):
    nodes = tmp_path / "nodes"
    nodes.mkdir()
    (nodes / "n1.json").write_text(json.dumps(TOPOLOGY))
    (nodes / "old.json").write_text(json.dumps(TOPOLOGY))  # an earlier run's facts of a node that failed now
    failed = {"old": {"state": "failed", "stage": "probe", "task": "t", "error": "e",
                      "stale_facts": {"file": "nodes/old.json", "age_s": 5, "used": False}}}  # fmt: skip
    args = {"site": "s", "objects": objects(), "topology_dir": str(nodes), "nodes_failed": failed}
    result = run(capsys, args)
    pair1 = next(t for t in result["plan"]["templates"] if t["name"] == "gpu-nic-pair-1")
    assert set(pair1["nodes"]) == {"n1"} and pair1["fits_total"] == 1
    assert result["plan"]["nodes_failed"] == failed
    assert result["plan"]["node_counts"] == {"ok": 1, "failed": 1, "unreachable": 0}
    # the same from facts: a failed node's topology is left out too
    from_facts = run(capsys, {"site": "s", "objects": objects(), "topologies": {"n1": TOPOLOGY, "old": TOPOLOGY},
                              "nodes_failed": failed, "node_counts": {"ok": 1, "failed": 1, "unreachable": 2}})  # fmt: skip
    assert set(next(t for t in from_facts["plan"]["templates"] if t["name"] == "gpu-nic-pair-1")["nodes"]) == {"n1"}
    assert from_facts["plan"]["node_counts"]["unreachable"] == 2
    bad = run(capsys, dict(args, nodes_failed={"old": {"state": "gone"}}))
    assert bad["failed"] is True and bad["msg"].startswith("nodes_failed.old: needs 'state'")


def test_topology_files_plan_only_the_named_nodes_like_the_topologies_do(tmp_path, capsys):
    (tmp_path / "n1.json").write_text(json.dumps(TOPOLOGY))
    # a node taken out of the inventory: its file is still in the directory, but not named
    (tmp_path / "gone.json").write_text(json.dumps(TOPOLOGY))
    from_files = run(capsys, {"site": "s", "objects": objects(), "topology_files": {"n1": str(tmp_path / "n1.json")}})
    from_facts = run(capsys, {"site": "s", "objects": objects(), "topologies": {"n1": TOPOLOGY}})
    assert from_files["plan"] == from_facts["plan"]
    from_dir = run(capsys, {"site": "s", "objects": objects(), "topology_dir": str(tmp_path)})
    assert from_dir["plan"]["node_counts"]["ok"] == 2 and from_files["plan"]["node_counts"]["ok"] == 1


def test_topology_files_with_slices_add_the_levels(tmp_path, capsys):
    (tmp_path / "n1.json").write_text(json.dumps(TOPOLOGY))
    slices = dra_slices.resource_slices("n1", dra.devices_from_topology(TOPOLOGY))
    with_files = run(capsys, {"site": "s", "objects": objects(), "slices": slices,
                              "topology_files": {"n1": str(tmp_path / "n1.json")}})  # fmt: skip
    with_facts = run(capsys, {"site": "s", "objects": objects(), "slices": slices, "topologies": {"n1": TOPOLOGY}})
    assert with_files["plan"]["templates"] == with_facts["plan"]["templates"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "topology_files.n1: cannot read {path}: No such file or directory"),
        ("{half a file", "topology_files.n1: cannot read {path}: "),
        ("[]", "topology_files.n1: must be a mapping"),
        ('{"devices": [{"kind": "gpu"}]}', "topology_files.n1.devices[0].pci_address: must be a string"),
    ],
)
def test_a_bad_topology_file_fails_naming_the_node_and_the_file(tmp_path, capsys, content, message):
    path = tmp_path / "n1.json"
    if content is not None:
        path.write_text(content)
    result = run(capsys, {"site": "s", "objects": objects(), "topology_files": {"n1": str(path)}})
    assert result["failed"] is True
    assert result["msg"].startswith(message.format(path=path)), result["msg"]


def test_a_failed_node_named_in_topology_files_is_not_read(tmp_path, capsys):
    (tmp_path / "n1.json").write_text(json.dumps(TOPOLOGY))
    failed = {"n2": {"state": "failed", "stage": "probe", "task": "Probe", "error": "boom"}}
    result = run(capsys, {"site": "s", "objects": objects(), "nodes_failed": failed,
                          "topology_files": {"n1": str(tmp_path / "n1.json"), "n2": str(tmp_path / "absent.json")}})  # fmt: skip
    assert "failed" not in result, result.get("msg")
    assert result["plan"]["node_counts"] == {"ok": 1, "failed": 1, "unreachable": 0}


def test_return_plan_summary_returns_all_but_the_per_node_entries_which_dest_keeps(tmp_path, capsys):
    dest = tmp_path / "plan.json"
    args = {"site": "s", "objects": objects(), "topologies": {"n1": TOPOLOGY, "n2": TOPOLOGY},
            "required": ["gpu-nic-pair-2"], "dest": str(dest)}  # fmt: skip
    full = run(capsys, args)
    summary = run(capsys, dict(args, return_plan="summary"))
    whole = json.loads(dest.read_text())
    assert full["plan"] == whole and summary["changed"] is False
    assert all(entry["nodes"].keys() == {"n1", "n2"} for entry in whole["templates"])
    assert [sorted(entry) for entry in summary["plan"]["templates"]] == [
        sorted(set(entry) - {"nodes"}) for entry in whole["templates"]
    ]
    assert {k: v for k, v in summary["plan"].items() if k != "templates"} == {
        k: v for k, v in whole.items() if k != "templates"
    }
    # the failure still says why, from the summary
    assert summary["failed"] is True and "gpu-nic-pair-2: no node can allocate" in summary["msg"]
    assert summary["unsatisfied"] == ["gpu-nic-pair-2"]


def test_return_plan_summary_needs_dest(capsys):
    result = run(capsys, {"site": "s", "objects": objects(), "topologies": {"n1": TOPOLOGY}, "return_plan": "summary"})
    assert result["failed"] is True
    assert "return_plan is summary" in result["msg"] and "dest" in result["msg"]


# -- rails ---------------------------------------------------------------------------------------------
#
# TOPOLOGY's one RDMA NIC (0000:11:00.0) shares GPU 0000:10:00.0's root; by PCI order it is rail 0.
PCI_ORDER = {"by": "pci_order", "count": 1}


def rail_args(**extra) -> dict:
    rendered = claims.render({"templates": {"pairs": {"counts": [1]}}}, "s", "1.36", rail_rules={"n1": PCI_ORDER})
    return {"site": "s", "objects": rendered["objects"], **extra}


def test_rail_rules_give_the_allocations_their_rails_from_every_source_of_topologies(tmp_path, capsys):
    (tmp_path / "n1.json").write_text(json.dumps(TOPOLOGY))
    from_facts = run(capsys, rail_args(topologies={"n1": TOPOLOGY}, rail_rules={"n1": PCI_ORDER}))
    template = next(t for t in from_facts["plan"]["templates"] if t["name"] == "gpu-nic-rail-0")
    assert template["fits_total"] == 1 and template["fits_per_rail"] == {"0": 1}
    assert template["nodes"]["n1"]["allocations"][0]["rails"] == [0]
    assert from_facts["plan"]["rails"] == [0] and from_facts["plan"]["warnings"] == []
    from_files = run(capsys, rail_args(topology_files={"n1": str(tmp_path / "n1.json")}, rail_rules={"n1": PCI_ORDER}))
    one_rule = run(capsys, rail_args(topology_dir=str(tmp_path), rail_rule=PCI_ORDER))
    assert from_files["plan"] == from_facts["plan"] == one_rule["plan"]
    # without a rule, no rail: the rail template fits nothing, and no allocation's rail is known
    without = run(capsys, rail_args(topologies={"n1": TOPOLOGY}))
    pair = next(t for t in without["plan"]["templates"] if t["name"] == "gpu-nic-pair-1")
    assert pair["nodes"]["n1"]["allocations"][0]["rails"] == [None] and pair["fits_per_rail"] is None


def test_rail_problems_are_warnings_and_other_drivers_nics_get_the_rules_rail(capsys):
    slices = [resource_slice("n1", "dra.net", [{"name": "pci-0000-11-00-0", "attributes": {
        "dra.net/pciAddress": {"string": "0000:11:00.0"}}}])]  # fmt: skip
    settings = {"drivers": ["gpu.nvidia.com", "dra.net"], "nic_driver": "dra.net", "gpu_driver": "gpu.nvidia.com"}
    rendered = claims.render(settings, "s", "1.36")
    result = run(capsys, {"site": "s", "objects": rendered["objects"], "slices": slices, "topologies": {"n1": TOPOLOGY},
                          "rail_rules": {"n1": {"by": "pci_order", "count": 2}}})  # fmt: skip
    nic_only = next(t for t in result["plan"]["templates"] if t["name"] == "nic-only")
    # not pinned to a rail: no count per rail (the scheduler may pick another NIC)
    assert nic_only["nodes"]["n1"]["allocations"][0]["rails"] == [0] and nic_only["fits_per_rail"] is None
    assert result["plan"]["warnings"] == ["rails: n1: rails 1 of count 2: no RDMA NIC is on them (rule by pci_order)"]


def test_a_malformed_rail_rule_fails_naming_the_option_and_the_node(capsys):
    result = run(capsys, rail_args(topologies={"n1": TOPOLOGY}, rail_rules={"n1": {"by": "subnet"}}))
    assert result["failed"] is True
    assert result["msg"].startswith("rail_rules.n1: aligned_dra_rails.subnets: a list of 1 to 64 IPv4 networks")
    result = run(capsys, rail_args(topologies={"n1": TOPOLOGY}, rail_rule={"by": "pci_order", "pattern": "x"}))
    assert result["failed"] is True and result["msg"].startswith("rail_rule: aligned_dra_rails: pattern not used")


# -- MIG -------------------------------------------------------------------------------------------------


def test_mig_publishes_the_gpus_as_the_driver_does_and_plan_json_says_what_each_gpu_holds(tmp_path, capsys):
    """The role's way: topology files, mig from the inventory, the summary returned and plan.json whole."""
    topology = topology_of("dgx-h100")
    files = {}
    for node in ("n1", "n2"):
        files[node] = str(tmp_path / f"{node}.json")
        (tmp_path / f"{node}.json").write_text(json.dumps(topology))
    kind = 'device.attributes["dra.aligned.dev"].kind'
    mig_class = device_class("mig", f'device.driver == "dra.aligned.dev" && {kind} == "mig"')
    any_mig = template("any-mig", [exactly("mig", "mig")])
    dest = tmp_path / "plan.json"
    args = {"site": "s", "kubernetes_version": "1.36", "objects": [mig_class, any_mig], "topology_files": files,
            "mig": {"n1": {"mode": "dynamic"}}, "dest": str(dest), "return_plan": "summary"}  # fmt: skip
    summary = run(capsys, args)["plan"]
    written = json.loads(dest.read_text())
    # eight H100s, each 7 x 1g.10gb (the smallest profile first, placements from 6 down); n2 runs no MIG
    assert written["templates"][0]["fits_total"] == 56 and written["templates"][0]["nodes"]["n2"]["fits"] == 0
    assert written["mig"]["templates"] == {"any-mig": {"gpus": 8, "alone": 56, "mix": 56, "bound": False}}
    assert list(written["mig"]["nodes"]) == ["n1"] and len(written["mig"]["nodes"]["n1"]["gpus"]) == 8
    assert written["mig"]["sources"] == {"documented": 8}
    assert summary["mig"] == {k: v for k, v in written["mig"].items() if k != "nodes"}
    # without mig the same site has no section
    run(capsys, dict(args, mig={}))
    assert "mig" not in json.loads(dest.read_text())
