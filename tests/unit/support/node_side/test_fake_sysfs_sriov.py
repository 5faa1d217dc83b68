# SPDX-License-Identifier: Apache-2.0
"""The fake kernel's command line, in this process.

Its watch mode, the test fault and its standalone copy on Molecule nodes are
tests/integration/support/node_side/test_fake_sysfs_sriov.py's.
"""

from __future__ import annotations

import pytest

from ansible_collections.aligned.dra.tests.support.node_side import fake_sysfs_sriov


def test_command_line(monkeypatch):
    seen = {}
    monkeypatch.setattr(fake_sysfs_sriov, "watch", lambda root, **kwargs: seen.update(root=root, **kwargs))
    fake_sysfs_sriov.main(["watch", "/fixture/sys", "--drop-vfs-above", "2", "--drop-after", "1.5"])
    assert seen == {"root": "/fixture/sys", "drop_vfs_above": 2, "drop_after": 1.5}
    fake_sysfs_sriov.main(["watch", "/fixture/sys"])
    assert seen["drop_vfs_above"] is None
    with pytest.raises(SystemExit):
        fake_sysfs_sriov.main(["watch"])
