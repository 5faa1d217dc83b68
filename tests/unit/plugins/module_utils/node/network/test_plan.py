# SPDX-License-Identifier: Apache-2.0
"""The network plan the network_plan module and the validation probe share (``node.network.plan``).

Planned on the SR-IOV lab tree (tests/fixtures/network/sriov-lab.yml): read-only, so no fake kernel
is needed; a VF count change is a pending, disruptive plan, a count above sriov_totalvfs is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.module_utils.node.network import plan
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout

LAYOUT = Path(__file__).resolve().parents[5] / "fixtures" / "network" / "sriov-lab.yml"
CX0 = "0000:01:00.0"


@pytest.fixture
def roots(tmp_path):
    root = build_tree(load_layout(LAYOUT), tmp_path / "node")
    return {"sysfs_root": str(root / "sys"), "procfs_root": str(root / "proc"), "driver_state_dir": str(tmp_path)}


def test_probe_plans_what_the_module_plans(roots):
    options = dict(roots, pfs=[{"pci_address": CX0, "numvfs": 4}])
    planned = plan.for_probe(options)
    # the module's defaults filled in, as AnsibleModule fills them
    assert planned["module_args"]["modprobe_dir"] == "/etc/modprobe.d"
    assert planned["module_args"]["pfs"][0]["missing"] == "fail"
    assert planned["result"]["pending"] and planned["result"]["disruptive"]
    assert planned["result"]["rdma"] is not None and "diff" not in planned["result"]["sriov"]
    assert [diff["before_header"] for diff in planned["diffs"]] == ["sriov now"]
    direct = plan.outcome(planned["module_args"])
    assert direct == {key: planned[key] for key in ("result", "warnings", "diffs")}


def test_nothing_to_change_is_not_pending(roots):
    planned = plan.for_probe(dict(roots, pfs=[{"pci_address": CX0}]))
    assert planned["result"]["pending"] is False and planned["diffs"] == []


def test_a_refused_plan_keeps_the_module_message(roots):
    planned = plan.for_probe(dict(roots, pfs=[{"pci_address": CX0, "numvfs": 99}]))
    assert planned["refused"] == f"pfs[0].numvfs: 99 is above sriov_totalvfs 8 of {CX0}"
    assert "result" not in planned


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"netns_mode": "private"}, "netns_mode"),
        ({"pfs": [{"pci_address": CX0, "numvfs": "many"}]}, "numvfs"),
        ({"nonsense": 1}, "nonsense"),
    ],
)
def test_options_the_module_would_refuse_are_left_to_the_module(roots, options, message):
    planned = plan.for_probe(dict(roots, **options))
    assert list(planned) == ["not_planned"] and message in planned["not_planned"]
