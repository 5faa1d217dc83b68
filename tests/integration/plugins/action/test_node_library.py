# SPDX-License-Identifier: Apache-2.0
"""aligned.dra.node_library through real ansible-playbook runs: the zip lands with its mode, a second
run copies nothing, check mode copies nothing, a changed library is copied again, a bad path fails
naming it, and the module's documentation is the action's argument spec."""

from __future__ import annotations

import zipfile
from pathlib import Path

import yaml

from ansible_collections.aligned.dra.plugins.action import node_library as action
from ansible_collections.aligned.dra.plugins.modules import node_library as module
from ansible_collections.aligned.dra.tests.support.harnesses.playbook_runs import recap, run_on_localhost, write_play

FILES = ["node/__init__.py", "node/network/__init__.py", "node/network/kmod.py"]


def play(tmp_path: Path, dest: Path, files: list[str]) -> Path:
    task = {"name": "Install", "aligned.dra.node_library": {"dest": str(dest), "files": files, "mode": "0640"}}
    return write_play(tmp_path / "play.yml", [{"hosts": "localhost", "gather_facts": False, "tasks": [task]}])


def test_installs_once_and_again_only_when_the_library_changes(tmp_path):
    dest = tmp_path / "lib" / "network.zip"
    dest.parent.mkdir()
    check = run_on_localhost(play(tmp_path, dest, FILES), "--check")
    assert check.returncode == 0 and recap(check.stdout)["changed"] == 1, check.output
    assert not dest.exists()
    first = run_on_localhost(play(tmp_path, dest, FILES))
    assert first.returncode == 0 and recap(first.stdout)["changed"] == 1, first.output
    assert oct(dest.stat().st_mode & 0o777) == "0o640"
    names = zipfile.ZipFile(dest).namelist()
    assert "ansible_collections/aligned/dra/plugins/module_utils/node/network/kmod.py" in names
    again = run_on_localhost(play(tmp_path, dest, FILES))
    assert again.returncode == 0 and recap(again.stdout)["changed"] == 0, again.output
    more = run_on_localhost(play(tmp_path, dest, [*FILES, "node/network/rdma_config.py"]))
    assert more.returncode == 0 and recap(more.stdout)["changed"] == 1, more.output


def test_a_path_outside_module_utils_fails_naming_it(tmp_path):
    dest = tmp_path / "network.zip"
    result = run_on_localhost(play(tmp_path, dest, [*FILES, "../action/node_library.py"]))
    assert result.returncode != 0
    assert "files: '../action/node_library.py' is not a Python module under module_utils" in result.output
    assert not dest.exists()


def test_the_documentation_is_the_actions_argument_spec():
    documented = yaml.safe_load(module.DOCUMENTATION)["options"]
    shape = {
        key: {k: entry.get(k) for k in ("type", "elements", "required", "default")}
        for key, entry in action.ARGUMENT_SPEC.items()
    }
    assert shape == {
        key: {k: entry.get(k) for k in ("type", "elements", "required", "default")} for key, entry in documented.items()
    }
