# SPDX-License-Identifier: Apache-2.0
"""Which processes hold a GPU, named for the messages of a refused MIG change (PID and command).

NVML refuses a MIG mode change while the GPU is not idle (the activation status ``IN_USE``: the change unbinds
or resets the GPU, which any open client of its device file prevents), and refuses to destroy an instance a
process runs on. NVML's own list (``nvmlDeviceGetComputeRunningProcesses``) names the compute processes only;
an NVML client such as DCGM's host engine, the DCGM exporter or a device plugin holds ``/dev/nvidia<minor>``
open without a compute context. So the holders of a GPU are NVML's PIDs and the processes with that device
file open (``<procfs>/<pid>/fd``), each with its command (``<procfs>/<pid>/comm``, else ``cmdline``). This
process (``<procfs>/self``) is left out: the caller of a change is never its own obstacle.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

MOST = 8  # processes named in one message


def command(procfs_root: str, pid: int) -> str:
    """The process's command (``comm``; else the first word of ``cmdline``); ``?`` when it cannot be read."""
    base = os.path.join(procfs_root, str(pid))
    try:
        with open(os.path.join(base, "comm"), encoding="utf-8", errors="replace") as handle:
            name = handle.read().strip()
        if name:
            return name
    except OSError:
        pass
    try:
        with open(os.path.join(base, "cmdline"), "rb") as handle:
            first = handle.read().split(b"\0", 1)[0].decode("utf-8", "replace")
    except OSError:
        return "?"
    return os.path.basename(first) or "?"


def own_pid(procfs_root: str) -> int:
    """This process's PID as ``procfs_root`` numbers it (the host's procfs from a container)."""
    try:
        return int(os.readlink(os.path.join(procfs_root, "self")))
    except (OSError, ValueError):
        return os.getpid()


def with_device_open(procfs_root: str, minor: int) -> list[int]:
    """PIDs of the processes with ``/dev/nvidia<minor>`` open (those this process may read), this one left out."""
    wanted = f"/dev/nvidia{minor}"
    me = own_pid(procfs_root)
    found: list[int] = []
    try:
        entries = os.listdir(procfs_root)
    except OSError:
        return found
    for entry in sorted((e for e in entries if e.isdigit()), key=int):
        if int(entry) == me:
            continue
        fds = os.path.join(procfs_root, entry, "fd")
        try:
            links = os.listdir(fds)
        except OSError:  # gone, or not ours to read
            continue
        for fd in links:
            try:
                target = os.readlink(os.path.join(fds, fd))
            except OSError:
                continue
            if target == wanted:
                found.append(int(entry))
                break
        if len(found) >= MOST:
            break
    return found


def holders(procfs_root: str, nvml_pids: Iterable[int], minor: int | None) -> list[tuple[int, str]]:
    """(PID, command) of the processes holding the GPU: NVML's, then those with its device file open."""
    me = own_pid(procfs_root)
    pids = [p for p in dict.fromkeys(int(p) for p in nvml_pids) if p != me]
    if minor is not None:
        pids += [p for p in with_device_open(procfs_root, minor) if p not in pids]
    return [(pid, command(procfs_root, pid)) for pid in pids[:MOST]]


def describe(found: list[tuple[int, str]]) -> str:
    """``process 4242 (dcgm-exporter) holds the GPU``; several: ``processes 1 (a), 2 (b) hold the GPU``."""
    if not found:
        return "a process holds the GPU (NVML lists none, and none this driver can see has its device file open)"
    shown = ", ".join(f"{pid} ({name})" for pid, name in found)
    return f"process {shown} holds the GPU" if len(found) == 1 else f"processes {shown} hold the GPU"
