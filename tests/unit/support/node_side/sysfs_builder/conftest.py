# SPDX-License-Identifier: Apache-2.0
"""The tree of every layout, built once for the tests of tests/support/node_side/sysfs_builder/."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.node_side import sysfs_builder as sb
from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import LAYOUTS


@pytest.fixture(scope="session")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every layout built once for the session (the sriov one takes about a second)."""
    base = tmp_path_factory.mktemp("layouts")
    return {name: sb.build_tree(sb.load_layout(name), base / name) for name in LAYOUTS}
