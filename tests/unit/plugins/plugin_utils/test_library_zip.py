# SPDX-License-Identifier: Apache-2.0
"""library_zip: the node library as one zip whose bytes depend on the files' content only, with a
regular package at every level; paths outside module_utils are refused, named.

Python importing and running the zip with ``-m`` from ``PYTHONPATH`` (as the boot-time units do) is
tests/integration/plugins/plugin_utils/test_library_zip.py's."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from ansible_collections.aligned.dra.plugins.plugin_utils.library_zip import (
    PACKAGE_PREFIX,
    LibraryError,
    library_zip,
)


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


@pytest.mark.parametrize("name", ["../etc/passwd.py", "/abs.py", "node/README.md", "node//x.py", "node/missing.py"])
def test_a_path_that_is_not_a_module_under_module_utils_is_refused(tmp_path, name):
    root = fake_tree(tmp_path)
    with pytest.raises(LibraryError, match=r"^files: "):
        library_zip(str(root), ["node/helper.py", name])
