# SPDX-License-Identifier: Apache-2.0
"""The rdma and sriov roles' removal of the library's earlier layouts, run as the roles run it (the task's
own shell script, with the unit directory moved under tmp_path): kept while either boot-time unit still
runs it, removed once neither does, and nothing but this collection's tree is touched."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
TASK = "Remove the library's earlier layouts once no unit runs them"


def script(role: str, library: Path, units: Path) -> str:
    tasks = yaml.safe_load((REPO / "roles" / role / "tasks" / "persist.yml").read_text())
    (task,) = [t for t in tasks if t["name"] == TASK]
    cmd = task["ansible.builtin.shell"]["cmd"]
    assert "/etc/systemd/system/" in cmd
    return cmd.replace("{{ aligned_dra_network_library_dir }}", str(library)).replace(
        "/etc/systemd/system/", f"{units}/"
    )


def earlier_node(tmp_path: Path) -> tuple[Path, Path]:
    library, units = tmp_path / "lib", tmp_path / "units"
    tree = library / "ansible_collections" / "aligned" / "dra" / "plugins" / "module_utils" / "node" / "network"
    tree.mkdir(parents=True)
    (tree / "netconf.py").write_text("# the earlier copy\n")
    (library / "ansible_collections" / "other" / "coll").mkdir(parents=True)  # not ours: never touched
    units.mkdir()
    return library, units


def run(role: str, library: Path, units: Path) -> str:
    done = subprocess.run(["sh", "-c", script(role, library, units)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("role", ["rdma", "sriov"])
def test_kept_while_the_other_unit_still_runs_it_then_removed(tmp_path, role):
    library, units = earlier_node(tmp_path)
    other = "sriov" if role == "rdma" else "rdma"
    (units / f"aligned-dra-{role}.service").write_text(f"Environment=PYTHONPATH={library}/network.zip\n")
    (units / f"aligned-dra-{other}.service").write_text(f"[Service]\nEnvironment=PYTHONPATH={library}\n")
    assert run(role, library, units) == "kept: a boot-time unit still runs it"
    assert (library / "ansible_collections" / "aligned" / "dra").is_dir()
    # the other role installs its new unit: now nothing runs the earlier copy
    (units / f"aligned-dra-{other}.service").write_text(f"Environment=PYTHONPATH={library}/network.zip\n")
    assert run(role, library, units) == "removed"
    assert not (library / "ansible_collections" / "aligned").exists()
    assert (library / "ansible_collections" / "other" / "coll").is_dir()
    assert run(role, library, units) == ""  # nothing left to do


def test_empty_parents_go_with_the_tree_and_a_missing_unit_runs_nothing(tmp_path):
    library, units = earlier_node(tmp_path)
    (library / "ansible_collections" / "other" / "coll").rmdir()
    (library / "ansible_collections" / "other").rmdir()
    assert run("sriov", library, units) == "removed"
    assert not (library / "ansible_collections").exists()
