# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.network_plan's action through real ansible-playbook runs: the plan the probe made in its
round (topology_info with network_plan and fact) is returned once, for exactly the options it was made
with, and the node is not read again; other options, a second call, or a probe without the option read
the node.

Whether the node was read again shows in the tree: after the probe, the PF's sriov_totalvfs is lowered
below the wanted count, so a plan read from the node now is refused while the probe's plan is pending.
"""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import run_on_localhost, write_play
from ansible_collections.aligned.dra.tests.support.node_side.sysfs_builder import build_tree, load_layout

LAYOUT = Path(__file__).resolve().parents[3] / "fixtures" / "network" / "sriov-lab.yml"
CX0 = "0000:01:00.0"


def plan_task(name: str, options: dict, register: str) -> dict:
    return {
        "name": name,
        "aligned.dra.network_plan": options,
        "register": register,
        "ignore_errors": True,
        "diff": True,
    }


def run(tmp_path: Path, probe_plans: bool, calls: list[tuple[str, bool]]) -> dict:
    """Probe (planning or not), lower the PF's VFs, then one network_plan per ``calls`` entry
    (registered name, whether with the probe's options); the registered results."""
    root = build_tree(load_layout(LAYOUT), tmp_path / "node")
    options = {
        "sysfs_root": str(root / "sys"),
        "procfs_root": str(root / "proc"),
        "driver_state_dir": str(tmp_path / "state"),
        "pfs": [{"pci_address": CX0, "numvfs": 4}],
    }
    probe = {"sysfs_root": options["sysfs_root"], "procfs_root": options["procfs_root"], "fact": True}
    if probe_plans:
        probe["network_plan"] = options
    totalvfs = root / "sys" / "bus" / "pci" / "devices" / CX0 / "sriov_totalvfs"
    out = tmp_path / "results.json"
    tasks = [
        {"name": "Probe, planning the network", "aligned.dra.topology_info": probe},
        {"name": "The PF now offers fewer VFs", "ansible.builtin.copy": {"content": "2\n", "dest": str(totalvfs)}},
        *[
            plan_task(f"Plan {name}", options if same else dict(options, vf_drivers=["vfio-pci"]), name)
            for name, same in calls
        ],
        {
            "name": "Keep the results",
            "ansible.builtin.copy": {
                "content": "{{ {" + ", ".join(f"'{name}': {name}" for name, _same in calls) + "} | to_json }}",
                "dest": str(out),
            },
        },
    ]
    result = run_on_localhost(
        write_play(tmp_path / "play.yml", [{"hosts": "localhost", "gather_facts": False, "tasks": tasks}])
    )
    assert result.returncode == 0, result.output
    return json.loads(out.read_text())


REFUSED = f"pfs[0].numvfs: 4 is above sriov_totalvfs 2 of {CX0}"


def test_the_probes_plan_is_returned_once_for_its_own_options(tmp_path):
    results = run(tmp_path, True, [("same", True), ("again", True)])
    same = results["same"]
    assert not same.get("failed") and same["pending"] and same["disruptive"] and same["changed"]
    assert [diff["before_header"] for diff in same["diff"]] == ["sriov now"]
    assert same["invocation"]["module_args"]["pfs"][0]["numvfs"] == 4
    # taken once: the next call reads the node as it is now
    assert results["again"]["failed"] and results["again"]["msg"] == REFUSED


def test_other_options_read_the_node_and_the_probes_plan_is_gone(tmp_path):
    results = run(tmp_path, True, [("other", False), ("same", True)])
    assert results["other"]["failed"] and results["other"]["msg"] == REFUSED
    # the next call for the node takes the kept plan, whatever its options: never a plan older than a read
    assert results["same"]["failed"] and results["same"]["msg"] == REFUSED


def test_without_the_probes_plan_the_node_is_read(tmp_path):
    results = run(tmp_path, False, [("same", True)])
    assert results["same"]["failed"] and results["same"]["msg"] == REFUSED
