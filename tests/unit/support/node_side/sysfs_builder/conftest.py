# SPDX-License-Identifier: Apache-2.0
"""The tree of every layout, built once for the tests of tests/support/node_side/sysfs_builder/."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.fixtures.materialize import materialize
from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import LAYOUTS, TESTS

TREES = TESTS.parent / ".cache" / "sysfs"


@pytest.fixture(scope="session")
def trees() -> dict[str, Path]:
    """Every layout's tree as this builder makes it: tests/fixtures/materialize.py's in .cache/sysfs, which
    scripts/test.sh builds before the tests start and rebuilds whenever a layout or the builder changed (its
    stamp is a checksum of both), so a run reads them without building them again. Read only."""
    return {name: materialize(name, TREES) for name in LAYOUTS}
