# SPDX-License-Identifier: Apache-2.0
"""Every module says what it needs (DOCUMENTATION requirements), and says it truly."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.aligned.dra.plugins.module_utils.controller.validation import preflight

MODULES = Path(__file__).resolve().parents[4] / "plugins" / "modules"


def documentation(path: Path) -> dict:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DOCUMENTATION" for t in node.targets):
            return yaml.safe_load(node.value.value)
    raise AssertionError(f"{path.name} has no DOCUMENTATION")


@pytest.mark.parametrize("path", sorted(MODULES.glob("*.py")), ids=lambda p: p.stem)
def test_module_lists_its_requirements(path):
    doc = documentation(path)
    assert doc.get("requirements"), f"{path.name}: DOCUMENTATION has no requirements"
    source = path.read_text()
    text = " ".join(doc["requirements"])
    # A module whose code reaches the CEL library or the schemas names the package, with the preflight's range.
    # A requirement names a package by starting with it: "requests" further on is a word of its prose.
    for item in preflight.PYTHON:
        if item["interpreter"] != "modules":
            continue
        minimum = item["version"].lstrip(">=")
        for entry in doc["requirements"]:
            if re.match(rf"{re.escape(item['name'])}(?![\w-])", entry):
                assert entry.startswith(f"{item['name']} >= {minimum}"), (path.name, entry)
    if "dra_cel" in source:
        assert "cel-expr-python" in text, path.name
