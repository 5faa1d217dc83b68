# SPDX-License-Identifier: Apache-2.0
"""Every node accounted for (playbooks/site.yml): a node that fails or is unreachable in any
stage is listed in summary.json and plan.json with the stage and the error, an earlier run's
facts file of it is shown as stale and not used, and the run ends with one count line per site.
Check mode on a fresh project writes nothing; the output directory follows the inventory."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize
from ansible_collections.aligned.dra.tests.support.harnesses import playbook_runs
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import PLAYBOOKS, recap, run_playbook

pytestmark = pytest.mark.slow

SITE_VARS = {
    "aligned_dra_site": "fra1",
    "aligned_dra_sysfs_root": "{{ fixture_tree }}/sys",
    "aligned_dra_procfs_root": "{{ fixture_tree }}/proc",
    "aligned_dra_network_check_only": True,
    "aligned_dra_driver_mode": "daemonset",
    "aligned_dra_driver_image": "localhost/aligned-dra-driver:0.1.0",
    "aligned_dra_claims": {"drivers": ["dra.aligned.dev"], "templates": {"pairs": {"counts": [1]}}},
}


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    out = tmp_path_factory.mktemp("trees")
    return {name: materialize(name, out) for name in ("dgx-h100", "vm-flat")}


def write_inventory(path: Path, hosts: dict, **settings) -> Path:
    return playbook_runs.write_inventory(path, hosts, {**SITE_VARS, **settings})


def site(inventory: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return run_playbook(inventory, PLAYBOOKS / "site.yml", *args, cwd=cwd)


def count_lines(stdout: str) -> list[str]:
    return re.findall(r"site \S+: nodes \d+ ok / \d+ failed / \d+ unreachable", stdout)


def test_failed_and_unreachable_nodes_are_listed_and_counted_and_stale_facts_not_used(tmp_path, trees):
    output = tmp_path / "output"
    inventory = write_inventory(
        tmp_path / "hosts.yml",
        {
            "gpu-01": {"fixture_tree": str(trees["dgx-h100"])},
            # the probe fails: its tree is not there
            "broken-01": {"fixture_tree": str(tmp_path / "no-such-tree")},
            # nothing listens on port 1: unreachable at once
            "gone-01": {
                "fixture_tree": str(trees["vm-flat"]),
                "ansible_connection": "ssh",
                "ansible_host": "127.0.0.1",
                "ansible_port": 1,
            },
        },
        aligned_dra_output_dir=str(output),
    )
    # broken-01's facts from an earlier run, when it was a DGX: must not be planned on or reported
    old = output / "fra1" / "nodes" / "broken-01.json"
    old.parent.mkdir(parents=True)
    probe = subprocess.run(
        [
            "ansible",
            "localhost",
            "-m",
            "aligned.dra.topology_info",
            "-a",
            f"sysfs_root={trees['dgx-h100']}/sys procfs_root={trees['dgx-h100']}/proc",
            "-o",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    old.write_text(json.dumps(json.loads(probe.stdout.split("=>", 1)[1])["topology"]))
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))

    result = site(inventory)
    assert result.returncode != 0  # a node failed and one was unreachable
    assert "PLAY [Nodes - every node of every site accounted for]" in result.stdout, result.stdout[-3000:]
    # once, at the end: the probe stage's own count line is left to the last play
    assert count_lines(result.stdout) == ["site fra1: nodes 1 ok / 1 failed / 1 unreachable"]
    assert result.stdout.rindex("site fra1: nodes") > result.stdout.rindex("PLAY [Nodes - every node")

    summary = json.loads((output / "fra1" / "summary.json").read_text())
    plan = json.loads((output / "fra1" / "plan.json").read_text())
    for document in (summary, plan):
        assert document["node_counts"] == {"ok": 1, "failed": 1, "unreachable": 1}
        broken, gone = document["nodes_failed"]["broken-01"], document["nodes_failed"]["gone-01"]
        assert (broken["state"], broken["stage"], broken["task"]) == (
            "failed",
            "probe",
            "Probe | Read the node's PCIe/NUMA topology",
        )
        assert "no-such-tree/sys is not a directory" in broken["error"]
        assert broken["stale_facts"]["file"] == "nodes/broken-01.json"
        assert broken["stale_facts"]["used"] is False
        assert 3600 <= broken["stale_facts"]["age_s"] < 3600 + 600
        assert (gone["state"], gone["stage"], gone["task"], gone["stale_facts"]) == ("unreachable", "probe", None, None)
    assert list(summary["per_node"]) == ["gpu-01"] and summary["nodes"] == 1
    assert all(set(t["nodes"]) <= {"gpu-01"} for t in plan["templates"])
    index = json.loads((output / "index.json").read_text())
    assert index["sites"][0]["node_files"] == ["fra1/nodes/gpu-01.json"]

    # The claims stage alone has no facts and plans on the files: broken-01's stale
    # file (a DGX, it would fit pairs) stays out, as the last probe's summary says.
    alone = run_playbook(inventory, PLAYBOOKS / "claims.yml", "--limit", "gpu-01,broken-01")
    assert alone.returncode == 0, alone.stdout[-3000:]
    plan = json.loads((output / "fra1" / "plan.json").read_text())
    assert all(set(t["nodes"]) <= {"gpu-01"} for t in plan["templates"])
    assert plan["nodes_failed"]["broken-01"]["stage"] == "probe"
    assert plan["node_counts"] == {"ok": 1, "failed": 1, "unreachable": 0}


def test_a_node_failing_in_the_network_stage_is_failed_in_stage_network(tmp_path, trees):
    output = tmp_path / "output"
    inventory = write_inventory(
        tmp_path / "hosts.yml",
        {
            "gpu-01": {"fixture_tree": str(trees["dgx-h100"])},
            # a PF this node does not have, and missing: fail (the default)
            "net-01": {
                "fixture_tree": str(trees["vm-flat"]),
                "aligned_dra_sriov_pfs": [{"pci_address": "0000:e7:00.0", "numvfs": 2}],
            },
        },
        aligned_dra_output_dir=str(output),
    )
    # The validation stage refuses a PF the probe did not find before any
    # change; left out here, the network stage itself fails on the node.
    result = site(inventory, "--skip-tags", "validate")
    assert result.returncode != 0
    assert "Validate | Every host" not in result.stdout
    # the rollout stops at the failed node (max_fail_percentage 0): its line is the run's last
    assert count_lines(result.stdout) == ["site fra1: nodes 1 ok / 1 failed / 0 unreachable"], result.stdout[-3000:]
    summary = json.loads((output / "fra1" / "summary.json").read_text())
    failed = summary["nodes_failed"]["net-01"]
    assert (failed["state"], failed["stage"]) == ("failed", "network")
    assert "0000:e7:00.0" in failed["error"]
    # probed in this run, but failed: its facts are left out, its file not used
    assert failed["stale_facts"]["used"] is False
    assert list(summary["per_node"]) == ["gpu-01"]
    assert summary["node_counts"] == {"ok": 1, "failed": 1, "unreachable": 0}
    index = json.loads((output / "index.json").read_text())
    assert index["sites"][0]["node_files"] == ["fra1/nodes/gpu-01.json"]


def test_nodes_the_driver_stage_left_out_on_purpose_stay_ok_when_the_sites_first_host_fails(tmp_path, trees):
    """DaemonSet mode: only the site's first host goes on in the driver stage, the others are ended there
    (meta: end_host), which Ansible counts out of the play's hosts as it does a failed one. The first host
    fails writing the site's objects: it is failed in stage driver, the others stay ok."""
    output = tmp_path / "output"
    inventory = write_inventory(
        tmp_path / "hosts.yml",
        {name: {"fixture_tree": str(trees["vm-flat"])} for name in ("gpu-01", "gpu-02", "gpu-03")},
        aligned_dra_output_dir=str(output),
    )
    (output / "fra1").mkdir(parents=True)
    (output / "fra1" / "driver").write_text("a file where the site's driver objects go")
    result = site(inventory)
    assert result.returncode != 0
    assert "PLAY [DRA driver - checks and each site's objects" in result.stdout, result.stdout[-3000:]
    summary = json.loads((output / "fra1" / "summary.json").read_text())
    assert summary["node_counts"] == {"ok": 2, "failed": 1, "unreachable": 0}, result.stdout[-3000:]
    assert list(summary["nodes_failed"]) == ["gpu-01"] and summary["nodes_failed"]["gpu-01"]["stage"] == "driver"
    assert sorted(summary["per_node"]) == ["gpu-02", "gpu-03"]


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_check_mode_on_a_fresh_project_writes_nothing_and_output_follows_the_inventory(tmp_path, trees):
    project = tmp_path / "project"
    inventory = write_inventory(
        project / "inventory" / "hosts.yml",
        {"gpu-01": {"fixture_tree": str(trees["dgx-h100"])}, "vm-01": {"fixture_tree": str(trees["vm-flat"])}},
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    before = listing(tmp_path)

    result = site(inventory, "--check", cwd=elsewhere)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    assert recap(result.stdout)["changed"] > 0
    # the closing line, once (site.yml's probe stage used to print it too)
    assert count_lines(result.stdout) == ["site fra1: nodes 2 ok / 0 failed / 0 unreachable"]
    # the default output directory is next to the inventory, not in the working directory
    assert f"written to {project / 'inventory' / 'output'}" in result.stdout
    assert str(elsewhere / "output") not in result.stdout
    assert listing(tmp_path) == before
    shutil.rmtree(elsewhere)
