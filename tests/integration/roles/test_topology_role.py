# SPDX-License-Identifier: Apache-2.0
"""The topology role through real ansible-playbook runs on fixture trees."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize
from ansible_collections.aligned.dra.tests.playbook_runs import PLAYBOOKS, recap, run_playbook


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    out = tmp_path_factory.mktemp("trees")
    return {name: materialize(name, out) for name in ("hwloc-32intel64-8ve", "dgx-h100", "vm-flat")}


def write_inventory(path: Path, trees: dict, output: Path, **extra) -> Path:
    hosts = {
        "ve1": {"aligned_dra_fixture": trees["hwloc-32intel64-8ve"], "aligned_dra_site": "east"},
        "dgx1": {"aligned_dra_fixture": trees["dgx-h100"], "aligned_dra_site": "west"},
        "vm1": {"aligned_dra_fixture": trees["vm-flat"], "aligned_dra_site": "west"},
    }
    inventory = {
        "aligned_dra_nodes": {
            "hosts": {
                name: {
                    "aligned_dra_sysfs_root": str(v["aligned_dra_fixture"] / "sys"),
                    "aligned_dra_procfs_root": str(v["aligned_dra_fixture"] / "proc"),
                    "aligned_dra_site": v["aligned_dra_site"],
                }
                for name, v in hosts.items()
            },
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": "{{ ansible_playbook_python }}",
                "aligned_dra_output_dir": str(output),
                **extra,
            },
        }
    }
    path.write_text(yaml.safe_dump(inventory))
    return path


def playbook(inventory: Path, *args: str) -> subprocess.CompletedProcess:
    return run_playbook(inventory, PLAYBOOKS / "probe.yml", *args)


def test_probe_writes_nodes_summaries_and_index_and_is_idempotent(tmp_path, trees):
    output = tmp_path / "out"
    inventory = write_inventory(tmp_path / "hosts.yml", trees, output)
    first = playbook(inventory)
    assert first.returncode == 0, first.stdout + first.stderr
    assert recap(first.stdout)["changed"] > 0
    assert f"written to {output}" in first.stdout

    ve1 = json.loads((output / "east" / "nodes" / "ve1.json").read_text())
    assert ve1["counts"]["accelerator"] == 8
    west = json.loads((output / "west" / "summary.json").read_text())
    assert (west["nodes"], west["gpus"]) == (2, 8 + 2)
    assert west["per_node"]["dgx1"]["level_histogram"] == {"PXB": 8}
    index = json.loads((output / "index.json").read_text())
    assert [s["site"] for s in index["sites"]] == ["east", "west"]
    assert "# Site west" in (output / "west" / "summary.md").read_text()

    second = playbook(inventory)
    assert second.returncode == 0, second.stdout + second.stderr
    assert recap(second.stdout)["changed"] == 0


def test_check_mode_writes_nothing_and_shows_a_diff(tmp_path, trees):
    output = tmp_path / "out"
    inventory = write_inventory(tmp_path / "hosts.yml", trees, output)
    result = playbook(inventory, "--check", "--diff")
    assert result.returncode == 0, result.stdout + result.stderr
    assert recap(result.stdout)["changed"] > 0
    assert "+++ after" in result.stdout
    assert not output.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"aligned_dra_topology_warn_levels": ["CLOSE"]}, "aligned_dra_topology_warn_levels"),
        ({"aligned_dra_topology_warn_levels": "SYS,NODE,"}, "aligned_dra_topology_warn_levels"),
        ({"aligned_dra_site": "east/../../etc"}, "aligned_dra_site must be"),
    ],
)
def test_bad_input_is_refused_before_anything_runs(tmp_path, trees, extra, message):
    output = tmp_path / "out"
    inventory = write_inventory(tmp_path / "hosts.yml", trees, output, **extra)
    if "aligned_dra_site" in extra:  # host vars win over group vars: set it per host
        data = yaml.safe_load(inventory.read_text())
        for host in data["aligned_dra_nodes"]["hosts"].values():
            host["aligned_dra_site"] = extra["aligned_dra_site"]
        inventory.write_text(yaml.safe_dump(data))
    result = playbook(inventory)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr
    # Refused in the validation play: the read-only probe may have run, nothing was written.
    assert "PLAY [Probe the PCIe/NUMA topology" not in result.stdout
    assert "Output |" not in result.stdout
    assert not output.exists()


def test_a_missing_tree_fails_with_the_option_named(tmp_path, trees):
    output = tmp_path / "out"
    inventory = write_inventory(tmp_path / "hosts.yml", trees, output)
    data = yaml.safe_load(inventory.read_text())
    data["aligned_dra_nodes"]["hosts"]["vm1"]["aligned_dra_sysfs_root"] = str(tmp_path / "nowhere")
    inventory.write_text(yaml.safe_dump(data))
    result = playbook(inventory, "--limit", "vm1")
    assert result.returncode != 0
    assert "sysfs_root:" in result.stdout and "is not a directory" in result.stdout
