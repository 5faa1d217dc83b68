# SPDX-License-Identifier: Apache-2.0
"""node/mig/holders.py, on a procfs tree: the processes that hold a GPU are NVML's PIDs, then the processes with
the GPU's device file open (an NVML client such as DCGM's host engine), this process left out, each named by its
``comm``, else its ``cmdline``; the NVML calls are the caller's, and one that fails leaves only its part out."""

from __future__ import annotations

import os

from ansible_collections.aligned.dra.plugins.module_utils.node.mig import holders


def proc(root, pid, comm=None, cmdline=None, fds=()):
    base = root / str(pid)
    (base / "fd").mkdir(parents=True)
    if comm is not None:
        (base / "comm").write_text(comm + "\n")
    if cmdline is not None:
        (base / "cmdline").write_bytes(cmdline)
    for number, target in enumerate(fds):
        (base / "fd" / str(number)).symlink_to(target)
    return pid


def node(root):
    """A GPU's minor 0 held by NVML's 4242 (gone from procfs), DCGM's host engine and an exporter; this process
    (40) has it open too, another GPU's file is open in 10 and 50."""
    proc(root, 10, comm="python", fds=["/dev/nvidia1"])
    proc(root, 20, comm="nv-hostengine", fds=["/dev/null", "/dev/nvidiactl", "/dev/nvidia0"])
    proc(root, 30, cmdline=b"/usr/bin/dcgm-exporter\0--collectors\0", fds=["/dev/nvidia0"])
    proc(root, 40, comm="driver", fds=["/dev/nvidia0"])
    proc(root, 50, fds=["/dev/nvidia10"])  # another GPU's file
    os.symlink("40", root / "self")  # this process, as procfs numbers it
    return str(root)


def test_holders_are_nvml_s_then_those_with_the_device_file_open_but_this_process(tmp_path):
    root = node(tmp_path)
    found = holders.holders(root, [4242, 40, 4242], 0)
    assert found == [(4242, "?"), (20, "nv-hostengine"), (30, "dcgm-exporter")]
    assert holders.describe(found[1:2]) == "process 20 (nv-hostengine) holds the GPU"
    assert holders.describe(found) == "processes 4242 (?), 20 (nv-hostengine), 30 (dcgm-exporter) hold the GPU"
    assert "NVML lists none" in holders.describe([])
    assert holders.holders(root, [], None) == []  # no minor: NVML's list only
    assert holders.holders(root, [20], 0) == [(20, "nv-hostengine"), (30, "dcgm-exporter")]  # each named once
    assert holders.with_device_open(str(tmp_path / "missing"), 0) == []


def test_a_command_is_comm_else_cmdline_s_first_word_else_unknown(tmp_path):
    proc(tmp_path, 1, comm="", cmdline=b"/opt/bin/trainer\0--epochs\0")
    proc(tmp_path, 2, comm="python3", cmdline=b"/usr/bin/python3\0")
    proc(tmp_path, 3)
    root = str(tmp_path)
    assert [holders.command(root, pid) for pid in (1, 2, 3, 4)] == ["trainer", "python3", "?", "?"]
    assert holders.command(root, 3, unknown="") == ""
    assert holders.command("/proc\0bad", 1) == "?"  # a procfs_root no path can hold
    assert holders.with_device_open("/proc\0bad", 0) == []
    assert holders.listed([(4242, "python3"), (77, "")]) == "4242 (python3), 77"


def test_at_most_eight_are_named_and_this_process_counts_by_its_pid_without_procfs_self(tmp_path):
    for pid in range(100, 112):
        proc(tmp_path, pid, comm=f"client{pid}", fds=["/dev/nvidia3"])
    proc(tmp_path, os.getpid(), comm="me", fds=["/dev/nvidia3"])  # no <procfs>/self: os.getpid()
    root = str(tmp_path)
    assert holders.own_pid(root) == os.getpid()
    assert holders.with_device_open(root, 3) == list(range(100, 100 + holders.MOST))
    found = holders.holders(root, [os.getpid(), 7], 3)
    assert len(found) == holders.MOST and found[0] == (7, "?") and found[1] == (100, "client100")


def test_read_asks_the_callers_nvml_and_an_error_leaves_only_its_part_out(tmp_path):
    root = node(tmp_path)
    asked = []

    def pids():
        asked.append("pids")
        return iter([4242])

    def minor():
        asked.append("minor")
        return 0

    def failing():
        raise RuntimeError("NVML_ERROR_UNKNOWN")

    assert holders.read(root, pids, minor) == ([(4242, "?"), (20, "nv-hostengine"), (30, "dcgm-exporter")], [])
    assert asked == ["pids", "minor"]
    found, errors = holders.read(root, failing, minor)
    assert found == [(20, "nv-hostengine"), (30, "dcgm-exporter")] and [str(e) for e in errors] == [
        "NVML_ERROR_UNKNOWN"
    ]
    found, errors = holders.read(root, pids, failing)
    assert found == [(4242, "?")] and len(errors) == 1  # no minor: no device file searched
    found, errors = holders.read(root, failing, failing)
    assert found == [] and len(errors) == 2
