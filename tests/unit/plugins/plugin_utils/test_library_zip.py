# SPDX-License-Identifier: Apache-2.0
"""library_zip: the node library as one zip whose bytes depend on the files' content only, with a
regular package at every level, that Python imports and runs with ``-m`` from ``PYTHONPATH`` (as the
boot-time units do); paths outside module_utils are refused, named."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.plugin_utils.library_zip import (
    PACKAGE_PREFIX,
    LibraryError,
    library_zip,
)

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


def test_every_package_gets_an_init_and_the_checkout_s_own_are_kept(tmp_path):
    root = fake_tree(tmp_path)
    (root / "node" / "__init__.py").write_text("KIND = 'node'\n")
    archive = zipfile.ZipFile(io.BytesIO(library_zip(str(root), ["node/network/tool.py", "node/__init__.py"])))
    names = archive.namelist()
    assert names == sorted(names)
    assert set(names) == {
        "ansible_collections/__init__.py",
        "ansible_collections/aligned/__init__.py",
        "ansible_collections/aligned/dra/__init__.py",
        "ansible_collections/aligned/dra/plugins/__init__.py",
        f"{PACKAGE_PREFIX}/__init__.py",
        f"{PACKAGE_PREFIX}/node/__init__.py",
        f"{PACKAGE_PREFIX}/node/network/__init__.py",
        f"{PACKAGE_PREFIX}/node/network/tool.py",
    }
    assert archive.read(f"{PACKAGE_PREFIX}/node/__init__.py") == b"KIND = 'node'\n"
    assert archive.read(f"{PACKAGE_PREFIX}/node/network/__init__.py") == b""  # the tree has none
    assert archive.read(f"{PACKAGE_PREFIX}/__init__.py") == b""  # above module_utils: none
    # a package whose __init__ is not listed still gets the checkout's own
    (root / "node" / "network" / "__init__.py").write_text("VOCABULARY = 1\n")
    archive = zipfile.ZipFile(io.BytesIO(library_zip(str(root), ["node/network/tool.py"])))
    assert archive.read(f"{PACKAGE_PREFIX}/node/network/__init__.py") == b"VOCABULARY = 1\n"
    assert archive.read(f"{PACKAGE_PREFIX}/node/__init__.py") == b"KIND = 'node'\n"
    assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}


def test_the_same_files_give_the_same_bytes_and_a_changed_file_other_bytes(tmp_path):
    root = fake_tree(tmp_path)
    files = ["node/__init__.py", "node/helper.py", "node/network/tool.py"]
    first = library_zip(str(root), files)
    (root / "node" / "helper.py").touch()  # a new mtime alone changes nothing
    assert library_zip(str(root), list(reversed(files))) == first
    (root / "node" / "helper.py").write_text("ANSWER = 43\n")
    assert library_zip(str(root), files) != first


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


@pytest.mark.parametrize("name", ["../etc/passwd.py", "/abs.py", "node/README.md", "node//x.py", "node/missing.py"])
def test_a_path_that_is_not_a_module_under_module_utils_is_refused(tmp_path, name):
    root = fake_tree(tmp_path)
    with pytest.raises(LibraryError, match=r"^files: "):
        library_zip(str(root), ["node/helper.py", name])
