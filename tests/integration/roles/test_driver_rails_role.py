# SPDX-License-Identifier: Apache-2.0
"""The driver role hands the site's rails (aligned_dra_rails) to the driver: real ansible-playbook runs, no node.

DaemonSet mode through playbooks/driver.yml: the site's rails file written
once, in a ConfigMap the DaemonSet mounts, ``--rails-file`` in its
arguments, by a run with ``--limit`` as by the whole site's (every node of the
site in the file); a changed rule changes the ConfigMap and not the pod
template; no rule anywhere, none of it; with a kubeconfig, the ConfigMap lands on the strict fake API server
(tests/support/fakes/apiserver/) and is removed once the site has no rails. Host
mode: the unit's ``--rails-file`` (rendered from the role's template), the
node's copy of the file (the role's own tasks, in check mode with a diff,
then for real). ``state: absent`` removing it from the node and the
controller is tested with the rest of removal
(tests/integration/roles/test_driver_role_removal.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.node.topology import rails as rail_rule
from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer
from ansible_collections.aligned.dra.tests.support.harnesses.driver_role import exec_start_argv, render
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import (
    PLAYBOOKS,
    recap,
    run_on_localhost,
    run_playbook,
    write_inventory,
    write_play,
)

REPO = Path(__file__).resolve().parents[3]
IMAGE = "registry.example.com/aligned-dra-driver:0.1.0"
PCI = {"by": "pci_order", "count": 2}
NAMES = {"by": "netdev_name", "pattern": r"^nic(\d+)$"}


def inventory(tmp_path: Path, rules: dict[str, dict | None], **common) -> Path:
    hosts = {}
    for host, rule in rules.items():
        hosts[host] = {"aligned_dra_driver_node_name": f"{host}.example.com"}
        if rule is not None:
            hosts[host]["aligned_dra_rails"] = rule
    variables = {
        "aligned_dra_output_dir": str(tmp_path / "output"),
        "aligned_dra_site": "lab",
        "aligned_dra_driver_mode": "daemonset",
        "aligned_dra_driver_image": IMAGE,
        "aligned_dra_driver_image_context": False,
        **common,
    }
    return write_inventory(tmp_path / "inventory.yml", hosts, variables)


def driver_play(tmp_path: Path, rules: dict[str, dict | None], *args: str) -> subprocess.CompletedProcess:
    proc = run_playbook(inventory(tmp_path, rules), PLAYBOOKS / "driver.yml", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def written(tmp_path: Path) -> tuple[dict | None, dict | None, dict]:
    """The written rails file, the ConfigMap and the DaemonSet of daemonset.yaml."""
    out = tmp_path / "output" / "lab" / "driver"
    objects = [o for o in yaml.safe_load_all((out / "daemonset.yaml").read_text()) if o]
    configmaps = [o for o in objects if o["kind"] == "ConfigMap"]
    daemonset = next(o for o in objects if o["kind"] == "DaemonSet")
    rails = json.loads((out / "rails.json").read_text()) if (out / "rails.json").exists() else None
    return rails, (configmaps[0] if configmaps else None), daemonset


def test_daemonset_mode_hands_the_site_file_to_the_driver_and_a_rule_change_rolls_no_pod(tmp_path):
    rules = {"node-a": PCI, "node-b": NAMES, "node-c": None}
    # --limit node-b first: the one ConfigMap every node's driver reads still holds node-a, or its driver
    # would drop rail
    first = driver_play(tmp_path, rules, "--limit", "node-b")
    assert "node-a" not in first.stdout.split("PLAY RECAP")[-1]  # node-a was not in the play
    written_once = "TASK [aligned.dra.driver : Cluster | Write the site's rails file and the objects, mode daemonset]"
    assert first.stdout.count(written_once) == 1
    rails, configmap, daemonset = written(tmp_path)
    assert rails["nodes"] == {"node-a.example.com": 0, "node-b.example.com": 1}
    assert rail_rule.rule_for_node(rails, "node-a.example.com") == rail_rule.check_rule(PCI)
    assert rail_rule.rule_for_node(rails, "node-b.example.com") == rail_rule.check_rule(NAMES)
    assert json.loads(configmap["data"]["rails.json"]) == rails
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    assert "--rails-file=/etc/aligned-dra/rails/rails.json" in container["args"]
    # the whole site's run writes the same file: nothing changes
    assert recap(driver_play(tmp_path, rules).stdout)["changed"] == 0

    changed = driver_play(tmp_path, {**rules, "node-c": {"by": "map", "map": {"0000:1d:00.0": 0}}})
    rails_after, configmap_after, daemonset_after = written(tmp_path)
    assert rails_after["nodes"]["node-c.example.com"] == 2 and configmap_after != configmap
    assert daemonset_after == daemonset  # the pod template is the same: nothing rolls
    assert recap(changed.stdout)["changed"] == 1  # the one task that writes rails.json and daemonset.yaml

    driver_play(tmp_path, {"node-a": None, "node-b": None})
    rails, configmap, daemonset = written(tmp_path)
    assert (rails, configmap) == (None, None)
    assert not [a for a in daemonset["spec"]["template"]["spec"]["containers"][0]["args"] if "rails" in a]


@pytest.fixture
def api():
    with FakeApiServer(minor="1.35") as server:
        yield server


def test_the_configmap_is_applied_and_removed_once_the_site_has_no_rails(api, tmp_path):
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    rules = {"node-a": PCI, "node-b": None}
    inv = inventory(tmp_path, rules, aligned_dra_driver_kubeconfig=kubeconfig, aligned_dra_driver_preflight=False)
    first = run_playbook(inv, PLAYBOOKS / "driver.yml", "--tags", "render,apply")
    assert first.returncode == 0, first.stdout + first.stderr
    assert api.rejections == []
    stored = api.get("configmaps", "aligned-dra-driver-rails", "aligned-dra")
    assert json.loads(stored["data"]["rails.json"])["nodes"] == {"node-a.example.com": 0}
    mounted = api.get("daemonsets", "aligned-dra-driver", "aligned-dra")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "rails", "configMap": {"name": "aligned-dra-driver-rails"}} in mounted

    inv = inventory(tmp_path, dict.fromkeys(rules), aligned_dra_driver_kubeconfig=kubeconfig,
                    aligned_dra_driver_preflight=False)  # fmt: skip
    second = run_playbook(inv, PLAYBOOKS / "driver.yml", "--tags", "render,apply")
    assert second.returncode == 0, second.stdout + second.stderr
    assert api.get("configmaps", "aligned-dra-driver-rails", "aligned-dra") is None
    assert "TASK [aligned.dra.driver : Cluster | Remove the rails ConfigMap of a site without rails]" in second.stdout
    # gone already: a third run changes nothing
    third = run_playbook(inv, PLAYBOOKS / "driver.yml", "--tags", "render,apply")
    assert third.returncode == 0 and recap(third.stdout)["changed"] == 0, third.stdout


def test_check_mode_shows_the_rails_file_and_writes_nothing(tmp_path):
    proc = driver_play(tmp_path, {"node-a": PCI}, "--check", "--diff")
    assert '"node-a.example.com": 0' in proc.stdout
    assert "kind: ConfigMap" in proc.stdout
    assert not (tmp_path / "output").exists()


def test_a_bad_rule_is_refused_naming_the_host_and_the_field(tmp_path):
    proc = run_playbook(inventory(tmp_path, {"node-a": {"by": "pci_order", "count": 0}}), PLAYBOOKS / "driver.yml")
    assert proc.returncode != 0
    assert "node-a" in proc.stdout and "aligned_dra_rails.count" in proc.stdout, proc.stdout
    assert not (tmp_path / "output" / "lab" / "driver" / "rails.json").exists()


# -- host mode ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("document", "flag"), [({"version": 1}, True), ({}, False)])
def test_the_unit_passes_the_rails_file_only_where_the_site_has_rails(tmp_path, document, flag):
    argv = exec_start_argv(
        render(tmp_path, "aligned-dra-driver.service.j2", aligned_dra_driver_rails_document=document)
    )
    assert ("--rails-file=/etc/aligned-dra/rails.json" in argv) is flag


def node_rails_play(tmp_path: Path, document: dict, *args: str) -> subprocess.CompletedProcess:
    """The rails tasks of the role's host.yml against a configuration directory under tmp_path."""
    tasks = yaml.safe_load((REPO / "roles" / "driver" / "tasks" / "host.yml").read_text())
    mine = [t for t in tasks if "rails file" in t["name"]]
    assert len(mine) == 2
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "aligned_dra_driver_config_dir": str(tmp_path / "etc"),
                "aligned_dra_driver_rails_document": document,
            },
            "tasks": mine,
            "handlers": [
                {
                    "name": "Record that the driver on the node would change",
                    "ansible.builtin.set_fact": {"rails_node_changed": True},
                    "listen": "aligned-dra driver node changed",
                }
            ],
        }
    ]
    (tmp_path / "etc").mkdir(exist_ok=True)
    proc = run_on_localhost(write_play(tmp_path / "play.yml", play), *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_the_node_gets_the_file_with_check_mode_and_diff_and_no_restart(tmp_path):
    document = {"version": 1, "rules": [rail_rule.check_rule(PCI)], "nodes": {"node-a": 0}}
    path = tmp_path / "etc" / "rails.json"
    rehearsed = node_rails_play(tmp_path, document, "--check", "--diff")
    assert '"node-a": 0' in rehearsed.stdout and recap(rehearsed.stdout)["changed"] == 1
    assert not path.exists()
    node_rails_play(tmp_path, document)
    assert json.loads(path.read_text()) == document
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert recap(node_rails_play(tmp_path, document).stdout)["changed"] == 0
    node_rails_play(tmp_path, {})
    assert not path.exists()
    # a new file reaches the driver at its next scan: the tasks put the node in the driver stage's
    # batch (aligned-dra driver node changed) and never restart the service
    tasks = yaml.safe_load((REPO / "roles" / "driver" / "tasks" / "host.yml").read_text())
    for task in (t for t in tasks if "rails file" in t["name"]):
        assert task["notify"] == "aligned-dra driver node changed"
