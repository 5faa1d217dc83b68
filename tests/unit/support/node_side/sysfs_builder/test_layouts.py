# SPDX-License-Identifier: Apache-2.0
"""The layouts of tests/fixtures/layouts and the errors a bad layout gets (tests/support/node_side/sysfs_builder/layouts.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.aligned.dra.tests.support.node_side import sysfs_builder as sb
from ansible_collections.aligned.dra.tests.unit.support.node_side.sysfs_builder.trees import LAYOUTS, NUMA1


def test_expected_layouts_exist() -> None:
    assert set(LAYOUTS) >= {"dgx-h100", "mi300x", "sriov-8x64", "vm-flat", "pci-domain-5digit", "hyperv-ndv4"}


def test_layout_errors_are_reported(tmp_path: Path) -> None:
    dup = {
        "numa": NUMA1,
        "hostbridges": [
            {
                "children": [
                    {"addr": "01.0", "vendor": 1, "device": 2, "class": 0x020000},
                    {"addr": "01.0", "vendor": 1, "device": 2, "class": 0x020000},
                ]
            }
        ],
    }
    with pytest.raises(sb.LayoutError, match="duplicate PCI address 0000:00:01.0"):
        sb.build(dup, tmp_path / "dup")
    no_class = {"numa": NUMA1, "hostbridges": [{"children": [{"vendor": 1, "device": 2}]}]}
    with pytest.raises(sb.LayoutError, match="class is required"):
        sb.build(no_class, tmp_path / "no-class")
    with pytest.raises(sb.LayoutError, match="numa.nodes"):
        sb.build({"hostbridges": []}, tmp_path / "no-numa")
