# SPDX-License-Identifier: Apache-2.0
"""The checkpoint's state directory on a real read-only bind mount (root): refused for writing, still read.

The checkpoint itself, and the refusals of what cannot be created in-process, are
tests/unit/driver/aligned_dra_driver/claims/test_checkpoint.py's.
"""

from __future__ import annotations

import subprocess

import pytest
from aligned_dra_driver.claims.checkpoint import Checkpoint, CheckpointError

DRIVER = "dra.aligned.dev"
NODE = "node-a"


def test_check_writable_refuses_a_read_only_bind_mount(tmp_path):
    directory = tmp_path / "ro"
    directory.mkdir()
    Checkpoint(str(directory), DRIVER, NODE).save({})  # a checkpoint with no claims: its shape is the unit tests'
    if subprocess.run(["mount", "--bind", str(directory), str(directory)], capture_output=True, check=False).returncode:
        pytest.skip("cannot bind-mount (not root, or no mount namespace)")
    try:
        if subprocess.run(
            ["mount", "-o", "remount,ro,bind", str(directory)], capture_output=True, check=False
        ).returncode:
            pytest.skip("cannot remount read-only")
        checkpoint = Checkpoint(str(directory), DRIVER, NODE)
        with pytest.raises(CheckpointError) as info:
            checkpoint.check_writable()
        message = str(info.value)
        assert "\n" not in message and str(directory) in message and "EROFS: Read-only file system" in message
        assert checkpoint.load() == {}  # a read-only checkpoint is still read
    finally:
        subprocess.run(["umount", str(directory)], check=True)
