# SPDX-License-Identifier: Apache-2.0
"""docs/reference/ is what antsibull-docs generates from the checkout, for every module, filter and role."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "docs" / "reference"

pytestmark = pytest.mark.slow


def test_reference_is_up_to_date_and_lints_clean():
    check = subprocess.run(
        [str(REPO / "scripts" / "docs.sh"), "--check"], capture_output=True, text=True, check=False, cwd=REPO
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_every_module_filter_lookup_and_role_has_a_page():
    modules = {p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__"}
    filters = {p.stem for p in (REPO / "plugins" / "filter").glob("*.yml")}
    lookups = {p.stem for p in (REPO / "plugins" / "lookup").glob("*.py") if p.stem != "__init__"}
    roles = {p.parent.parent.name for p in (REPO / "roles").glob("*/meta/argument_specs.yml")}
    expected = (
        {f"{m}_module.rst" for m in modules}
        | {f"{f}_filter.rst" for f in filters}
        | {f"{name}_lookup.rst" for name in lookups}
        | {f"{r}_role.rst" for r in roles}
    )
    assert "site_settings_lookup.rst" in expected
    pages = {p.name for p in REFERENCE.glob("*.rst")} - {"index.rst"}
    assert pages == expected
    index = (REFERENCE / "index.rst").read_text()
    for page in sorted(expected):
        assert f"<{page}>" in index, page
