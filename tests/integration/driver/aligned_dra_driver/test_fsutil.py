# SPDX-License-Identifier: Apache-2.0
"""Atomic writes on a real full disk: a small tmpfs, mounted for the test (root), filled by the write.

Everything else about atomic writes is tests/unit/driver/aligned_dra_driver/test_fsutil.py's.
"""

from __future__ import annotations

import subprocess

import pytest
from aligned_dra_driver import fsutil


@pytest.mark.parametrize("durable", [True, False])
def test_a_full_disk_leaves_the_old_file_and_no_temporary_file(tmp_path, durable):
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)], check=False).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        target = disk / "checkpoint.json"
        fsutil.atomic_write(str(target), b"old", durable=durable)
        with pytest.raises(OSError) as raised:
            fsutil.atomic_write(str(target), b"x" * 64 * 1024, durable=durable)  # larger than the disk
        assert raised.value.errno == 28  # ENOSPC
        assert target.read_bytes() == b"old"
        assert sorted(p.name for p in disk.iterdir()) == ["checkpoint.json"]
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
