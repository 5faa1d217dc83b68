# SPDX-License-Identifier: Apache-2.0
"""The topology role through real ansible-playbook runs on fixture trees."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize
from ansible_collections.aligned.dra.tests.support.harnesses import playbook_runs
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    environment,
    recap,
    run_playbook,
    tree_vars,
    write_play,
)


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    out = tmp_path_factory.mktemp("trees")
    return {name: materialize(name, out) for name in ("hwloc-32intel64-8ve", "dgx-h100", "vm-flat")}


def write_inventory(path: Path, trees: dict, output: Path, **extra) -> Path:
    hosts = {
        "ve1": {**tree_vars(trees["hwloc-32intel64-8ve"]), "aligned_dra_site": "east"},
        "dgx1": {**tree_vars(trees["dgx-h100"]), "aligned_dra_site": "west"},
        "vm1": {**tree_vars(trees["vm-flat"]), "aligned_dra_site": "west"},
    }
    return playbook_runs.write_inventory(path, hosts, {"aligned_dra_output_dir": str(output), **extra})


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


def test_the_fact_is_slim_the_whole_topology_lives_for_the_run_and_no_fact_cache_keeps_it(tmp_path, trees):
    """The probe's fact holds counts and a file of the run's store; the node file holds the topology.

    With a persistent fact cache (jsonfile), the fact is not cached: a later
    run would otherwise find a fact whose file the earlier run took with it.
    """
    output = tmp_path / "out"
    inventory = write_inventory(tmp_path / "hosts.yml", trees, output)
    seen = tmp_path / "seen.json"
    gpus_seen = tmp_path / "gpus_seen.json"
    play = write_play(
        tmp_path / "probe_and_look.yml",
        [
            {"ansible.builtin.import_playbook": str(PLAYBOOKS / "probe.yml")},
            {
                "name": "Look at the fact and its file while the run lasts",
                "hosts": "aligned_dra_nodes",
                "gather_facts": False,
                "tasks": [
                    {
                        # the expression docs/topology.md gives for a play of one's own
                        "name": "The GPUs of this node's probe",
                        "ansible.builtin.set_fact": {
                            "gpus_read_from_the_file": "{{ (lookup('ansible.builtin.file',"
                            " aligned_dra_topology.file) | from_json).devices"
                            " | selectattr('kind', 'eq', 'gpu') | map(attribute='pci_address') | list }}"
                        },
                    },
                    {
                        "name": "Record what each node read",
                        "ansible.builtin.copy": {
                            "dest": str(gpus_seen),
                            "content": "{{ dict(ansible_play_hosts | zip(ansible_play_hosts"
                            " | map('extract', hostvars, 'gpus_read_from_the_file'))) | to_json }}",
                        },
                        "run_once": True,
                        "delegate_to": "localhost",
                    },
                    {
                        "name": "Record every node's fact and whether its file is there",
                        "ansible.builtin.copy": {
                            "dest": str(seen),
                            "content": "{{ dict(ansible_play_hosts | zip(ansible_play_hosts"
                            " | map('extract', hostvars, 'aligned_dra_topology')"
                            " | map('combine', {'present': true}))) | to_json }}",
                        },
                        "run_once": True,
                        "delegate_to": "localhost",
                    },
                    {
                        "name": "The file is there while the run lasts",
                        "ansible.builtin.assert": {"that": ["aligned_dra_topology.file is file"]},
                    },
                ],
            },
        ],
    )
    cache = tmp_path / "facts"
    env = environment(ANSIBLE_CACHE_PLUGIN="ansible.builtin.jsonfile", ANSIBLE_CACHE_PLUGIN_CONNECTION=str(cache))
    result = run_playbook(inventory, play, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    facts = json.loads(seen.read_text())
    assert sorted(facts) == ["dgx1", "ve1", "vm1"]
    for host, fact in facts.items():
        assert sorted(fact) == ["counts", "file", "hostname", "present", "schema_version", "warnings"], host
        node_file = output / ("east" if host == "ve1" else "west") / "nodes" / f"{host}.json"
        whole = json.loads(node_file.read_text())
        assert fact["counts"] == whole["counts"] and whole["devices"], host
        # the store went with the run
        assert not os.path.exists(fact["file"]), host
    assert facts["ve1"]["counts"]["accelerator"] == 8
    gpus = json.loads(gpus_seen.read_text())
    for host, site in (("dgx1", "west"), ("vm1", "west"), ("ve1", "east")):
        whole = json.loads((output / site / "nodes" / f"{host}.json").read_text())
        assert gpus[host] == [d["pci_address"] for d in whole["devices"] if d["kind"] == "gpu"], host
    assert len(gpus["dgx1"]) == 8 and len(gpus["vm1"]) == 2 and gpus["ve1"] == []
    # jsonfile keeps one file per host, its facts as a JSON string: none holds the fact
    cached = {path.name: path.read_text() for path in cache.iterdir()} if cache.exists() else {}
    assert not [name for name, text in cached.items() if "aligned_dra_topology" in text], cached
