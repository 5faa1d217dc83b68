# SPDX-License-Identifier: Apache-2.0
"""library_zip's zip in a Python of its own: imported and run with ``-m`` from ``PYTHONPATH``, as the
boot-time units do, on this machine's Python and on the oldest a node may run.

The zip's bytes and its refusals are tests/unit/plugins/plugin_utils/test_library_zip.py's.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from ansible_collections.aligned.dra.plugins.plugin_utils.library_zip import library_zip

REPO = Path(__file__).resolve().parents[4]
# A Python 3.9 where this machine has one (pyenv's): the node side's oldest.
OLDEST_NODE_PYTHON = [str(p) for p in sorted(Path("/root/.pyenv/versions").glob("3.9.*/bin/python3"))[:1]]
MODULE_UTILS = REPO / "plugins" / "module_utils"


def fake_tree(root: Path) -> Path:
    (root / "node" / "network").mkdir(parents=True)
    (root / "node" / "__init__.py").write_text("")
    (root / "node" / "network" / "tool.py").write_text(
        "import sys\nfrom ansible_collections.aligned.dra.plugins.module_utils.node import helper\n"
        "if __name__ == '__main__':\n    print(helper.ANSWER, sys.argv[1:])\n"
    )
    (root / "node" / "helper.py").write_text("ANSWER = 42\n")
    return root


def test_python_runs_a_module_of_the_zip_with_dash_m(tmp_path):
    root = fake_tree(tmp_path / "src")
    zipped = tmp_path / "network.zip"
    zipped.write_bytes(library_zip(str(root), ["node/__init__.py", "node/helper.py", "node/network/tool.py"]))
    run = subprocess.run(
        [sys.executable, "-I", "-c", "import runpy, sys; sys.path.insert(0, sys.argv[1]); sys.argv[1:] = ['x']; "
         "runpy.run_module('ansible_collections.aligned.dra.plugins.module_utils.node.network.tool', "
         "run_name='__main__')", str(zipped)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stdout == "42 ['x']\n"


def test_the_boot_units_entry_point_imports_from_the_zip_of_the_roles_list(tmp_path):
    tasks = yaml.safe_load((REPO / "roles" / "sriov" / "tasks" / "persist.yml").read_text())
    (install,) = [task for task in tasks if task["name"] == "Install the network library"]
    zipped = tmp_path / "network.zip"
    zipped.write_bytes(library_zip(str(MODULE_UTILS), install["aligned.dra.node_library"]["files"]))
    # as the unit runs it: PYTHONPATH names the zip (-S: nothing of this machine's site-packages)
    run = subprocess.run(
        [sys.executable, "-S", "-m", "ansible_collections.aligned.dra.plugins.module_utils.node.network.netconf"],
        capture_output=True, text=True, check=False, env={"PYTHONPATH": str(zipped), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert "No module named" not in run.stderr, run.stderr
    assert run.returncode != 0 and "usage" in (run.stderr + run.stdout).lower()
    # what netconf imports only when it applies a state: every module of the list, on this machine's
    # Python and on the oldest a node may run (3.9), from the zip alone
    modules = [f.removesuffix(".py").replace("/", ".") for f in install["aligned.dra.node_library"]["files"]]
    imports = "; ".join(f"import ansible_collections.aligned.dra.plugins.module_utils.{m}" for m in modules)
    for python in (sys.executable, *OLDEST_NODE_PYTHON):
        run = subprocess.run(
            [python, "-S", "-c", imports + "; print('ok')"],
            capture_output=True, text=True, check=False, env={"PYTHONPATH": str(zipped), "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert run.stdout == "ok\n", (python, run.stderr)
