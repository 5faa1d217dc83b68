# SPDX-License-Identifier: Apache-2.0
"""Which processes hold a GPU (aligned_dra_driver/mig/holders.py), on a procfs tree: NVML's PIDs, then the
processes with the GPU's device file open (an NVML client such as DCGM's host engine), this process left out."""

from __future__ import annotations

import os

from aligned_dra_driver.mig import holders


def proc(root, pid, comm=None, cmdline=None, fds=()):
    base = root / str(pid)
    (base / "fd").mkdir(parents=True)
    if comm is not None:
        (base / "comm").write_text(comm + "\n")
    if cmdline is not None:
        (base / "cmdline").write_bytes(cmdline)
    for number, target in enumerate(fds):
        (base / "fd" / str(number)).symlink_to(target)


def test_holders_are_nvml_s_then_those_with_the_device_file_open_but_this_process(tmp_path):
    proc(tmp_path, 10, comm="python", fds=["/dev/nvidia1"])
    proc(tmp_path, 20, comm="nv-hostengine", fds=["/dev/null", "/dev/nvidiactl", "/dev/nvidia0"])
    proc(tmp_path, 30, cmdline=b"/usr/bin/dcgm-exporter\0--collectors\0", fds=["/dev/nvidia0"])
    proc(tmp_path, 40, comm="driver", fds=["/dev/nvidia0"])
    proc(tmp_path, 50, fds=["/dev/nvidia10"])  # another GPU's file
    os.symlink("40", tmp_path / "self")  # this process, as procfs numbers it
    found = holders.holders(str(tmp_path), [4242, 40], 0)
    assert found == [(4242, "?"), (20, "nv-hostengine"), (30, "dcgm-exporter")]
    assert holders.describe(found[1:2]) == "process 20 (nv-hostengine) holds the GPU"
    assert holders.describe(found) == "processes 4242 (?), 20 (nv-hostengine), 30 (dcgm-exporter) hold the GPU"
    assert "NVML lists none" in holders.describe([])
    assert holders.holders(str(tmp_path), [], None) == []  # no minor: NVML's list only
    assert holders.with_device_open(str(tmp_path / "missing"), 0) == []
