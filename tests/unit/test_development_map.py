# SPDX-License-Identifier: Apache-2.0
"""The maps of docs/development.md against the tree, and the packages' own docstrings.

- The package map names every folder of Python in ``plugins/``, ``driver/``
  and ``tests/`` once, and nothing else.
- The code map has one row per package of ``plugins/module_utils/`` and of
  the driver, and each row names every module of its package.
- The layer map puts every controller package in exactly one layer; the
  house-rule test checks the imports against it.
- Each package's ``__init__.py`` docstring names its modules.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MODULE_UTILS = REPO / "plugins" / "module_utils"
DRIVER = REPO / "driver" / "aligned_dra_driver"
DEVELOPMENT_DOC = REPO / "docs" / "development.md"
# tests/unit and tests/integration mirror the code layout below them: one line each in the package map.
MIRRORS = ("tests/unit", "tests/integration")


def section(text: str, title: str) -> str:
    """The body of the ``## title`` section (up to the next ``## ``)."""
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def first_column(body: str) -> dict[str, str]:
    """``{path in the first column: the whole row}`` of a section's table rows."""
    return {row.split("`")[1]: row for row in body.splitlines() if row.startswith("| `")}


def doc() -> str:
    return DEVELOPMENT_DOC.read_text(encoding="utf-8")


# -- the package map --------------------------------------------------------------------------------


def python_packages() -> list[str]:
    """Every folder of plugins/, driver/ and tests/ that holds Python (mirrors counted once), as ``path/``."""
    found = set()
    for tree in ("plugins", "driver", "tests"):
        for path in (REPO / tree).rglob("*.py"):
            folder = path.parent.relative_to(REPO).as_posix()
            if "__pycache__" in folder or folder.startswith("tests/output"):
                continue
            mirror = next((m for m in MIRRORS if folder == m or folder.startswith(m + "/")), None)
            found.add(f"{mirror or folder}/")
    return sorted(found)


def test_the_package_map_names_every_package_once():
    assert "plugins/module_utils/controller/planner/" in python_packages()
    mapped = set(first_column(section(doc(), "Package map")))
    assert [p for p in python_packages() if p not in mapped] == [], "packages missing from the map"
    assert [p for p in sorted(mapped) if p not in python_packages()] == [], "the map names folders that hold no code"


def test_the_map_check_reads_the_table():
    text = "# x\n\n## Package map\n\n| path | what |\n|---|---|\n| `a/` | one |\n| `b/c/` | two |\n\n## Next\n| `d/` | no |\n"
    assert set(first_column(section(text, "Package map"))) == {"a/", "b/c/"}


# -- the code map -----------------------------------------------------------------------------------


def code_packages() -> dict[str, list[str]]:
    """``{package as the code map names it: its module names}`` for module_utils' packages and the driver."""
    found: dict[str, list[str]] = {}
    for init in sorted(MODULE_UTILS.rglob("__init__.py")):
        folder = init.parent
        # A package of packages only (``controller/``, ``node/``) has no row: its packages have theirs.
        if folder != MODULE_UTILS and modules_of(folder):
            found[folder.relative_to(MODULE_UTILS).as_posix() + "/"] = modules_of(folder)
    for folder in driver_packages():
        found[f"driver/{folder.relative_to(DRIVER.parent).as_posix()}/"] = modules_of(folder)
    return found


def driver_packages() -> list[Path]:
    """The driver's package and each of its packages, the generated gRPC code aside (``kubelet/proto/``)."""
    return [DRIVER] + sorted(i.parent for i in DRIVER.rglob("*/__init__.py") if i.parent.name != "proto")


def modules_of(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))


def named(stem: str, text: str) -> bool:
    """Whether ``text`` names the module ``stem`` in backticks (alone or as the last part of a dotted name)."""
    return re.search(rf"`(?:[\w./]+[./])?{re.escape(stem)}(?:\.py)?`", text) is not None


def missing_from_code_map(text: str, packages: dict[str, list[str]]) -> list[str]:
    rows = first_column(section(text, "Code map"))
    problems = [f"{package}: no row" for package in packages if package not in rows]
    problems += [f"{package}: names no package of the tree" for package in rows if package not in packages]
    for package, stems in packages.items():
        if package in rows:
            problems += [f"{package}{stem}: not named" for stem in stems if not named(stem, rows[package])]
    return problems


def test_the_code_map_names_every_module_of_every_package():
    packages = code_packages()
    assert "controller/planner/" in packages and "allocator" in packages["controller/planner/"]
    assert "hook" in packages["driver/aligned_dra_driver/network/"] and "cli" in packages["driver/aligned_dra_driver/"]
    assert missing_from_code_map(doc(), packages) == []


def test_the_code_map_check_sees_a_missing_module_and_a_stale_row():
    text = "# x\n\n## Code map\n\n| package | owns |\n|---|---|\n| `a/` | one (`one`), `a/two.py` |\n| `gone/` | x |\n"
    assert missing_from_code_map(text, {"a/": ["one", "two"]}) == ["gone/: names no package of the tree"]
    assert missing_from_code_map(text, {"a/": ["one", "three"], "gone/": []}) == ["a/three: not named"]
    assert missing_from_code_map(text, {"a/": [], "b/": [], "gone/": []}) == ["b/: no row"]


# -- the packages' own docstrings -------------------------------------------------------------------


def unnamed_in_docstring(folder: Path) -> list[str]:
    docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))) or ""
    return [stem for stem in modules_of(folder) if re.search(rf"\b{re.escape(stem)}\b", docstring) is None]


@pytest.mark.parametrize(
    "folder",
    sorted(init.parent for init in MODULE_UTILS.rglob("__init__.py") if init.parent != MODULE_UTILS)
    + driver_packages(),
    ids=lambda folder: folder.relative_to(REPO).as_posix(),
)
def test_each_package_docstring_names_its_modules(folder):
    assert unnamed_in_docstring(folder) == []


def test_the_docstring_check_sees_an_unnamed_module(tmp_path):
    (tmp_path / "__init__.py").write_text('"""Holds ``alpha``."""\n', encoding="utf-8")
    (tmp_path / "alpha.py").write_text("", encoding="utf-8")
    assert unnamed_in_docstring(tmp_path) == []
    (tmp_path / "beta.py").write_text("", encoding="utf-8")
    assert unnamed_in_docstring(tmp_path) == ["beta"]
