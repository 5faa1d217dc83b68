# SPDX-License-Identifier: Apache-2.0
"""Which processes hold a GPU, named (PID and command) for the message of a refused MIG change.

NVML refuses a MIG mode change while the GPU is not idle (``IN_USE``, as the call's error or its activation
status: the change unbinds or resets the GPU, which any open client of its device file prevents), and refuses
to destroy an instance a process runs on. NVML's own list (``nvmlDeviceGetComputeRunningProcesses``) names the
compute processes only; an NVML client such as DCGM's host engine, the DCGM exporter or a device plugin holds
``/dev/nvidia<minor>`` open without a compute context. So the holders of a GPU are NVML's PIDs, then the
processes with that device file open (``<procfs>/<pid>/fd``), each with its command (``<procfs>/<pid>/comm``,
else the first word of ``cmdline``). This process (``<procfs>/self``) is left out: the maker of a change is
never its own obstacle. At most :data:`MOST` processes are named.

The caller passes the procfs root (the host's, seen from a container) and its NVML answers: :func:`read` takes
the two NVML calls as functions, so that one that fails leaves only its part out. The rollout's module
(``apply``) and the driver (``aligned_dra_driver.mig``, which vendors this package) both name holders here.

Node side: Python 3.9, standard library only.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

MOST = 8  # processes named in one message


def command(procfs_root: str, pid: int, unknown: str = "?") -> str:
    """The process's command (``comm``; else the first word of ``cmdline``); ``unknown`` when neither reads."""
    base = os.path.join(procfs_root, str(pid))
    try:
        with open(os.path.join(base, "comm"), encoding="utf-8", errors="replace") as handle:
            name = handle.read().strip()
        if name:
            return name
    except (OSError, ValueError):  # gone, unreadable, or a procfs_root no path can hold
        pass
    try:
        with open(os.path.join(base, "cmdline"), "rb") as handle:
            first = handle.read().split(b"\0", 1)[0].decode("utf-8", "replace")
    except (OSError, ValueError):
        return unknown
    return os.path.basename(first) or unknown


def listed(found: Iterable[tuple[int, str]]) -> str:
    """``4242 (python3), 77``: each PID with its command, the PID alone where the command is empty."""
    return ", ".join(f"{pid} ({name})" if name else str(pid) for pid, name in found)


def own_pid(procfs_root: str) -> int:
    """This process's PID as ``procfs_root`` numbers it (the host's procfs from a container)."""
    try:
        return int(os.readlink(os.path.join(procfs_root, "self")))
    except (OSError, ValueError):
        return os.getpid()


def with_device_open(procfs_root: str, minor: int) -> list[int]:
    """PIDs of the processes with ``/dev/nvidia<minor>`` open (those this process may read), this one left out;
    at most :data:`MOST`."""
    wanted = f"/dev/nvidia{minor}"
    me = own_pid(procfs_root)
    found: list[int] = []
    try:
        entries = os.listdir(procfs_root)
    except (OSError, ValueError):
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
    """(PID, command) of the processes holding the GPU: NVML's, then those with its device file open (none
    searched where ``minor`` is None); this process left out, at most :data:`MOST`."""
    me = own_pid(procfs_root)
    pids = [p for p in dict.fromkeys(int(p) for p in nvml_pids) if p != me]
    if minor is not None:
        pids += [p for p in with_device_open(procfs_root, minor) if p not in pids]
    return [(pid, command(procfs_root, pid)) for pid in pids[:MOST]]


def read(
    procfs_root: str, nvml_pids: Callable[[], Iterable[int]], minor: Callable[[], int]
) -> tuple[list[tuple[int, str]], list[Exception]]:
    """:func:`holders` with NVML asked here: ``nvml_pids`` (the GPU's compute processes) and ``minor`` (its
    minor number) are the caller's NVML calls. One that fails leaves its part out (no PIDs; no device file
    searched), its error returned beside the holders: the refusal is the error to tell, who holds the GPU a
    help."""
    errors: list[Exception] = []
    pids: Iterable[int] = []
    number: int | None = None
    try:
        pids = list(nvml_pids())
    except Exception as exc:  # NVMLError, or a broken binding
        errors.append(exc)
    try:
        number = int(minor())
    except Exception as exc:
        errors.append(exc)
    return holders(procfs_root, pids, number), errors


def describe(found: list[tuple[int, str]]) -> str:
    """``process 4242 (dcgm-exporter) holds the GPU``; several: ``processes 1 (a), 2 (b) hold the GPU``."""
    if not found:
        return "a process holds the GPU (NVML lists none, and none this process can see has its device file open)"
    shown = listed(found)
    return f"process {shown} holds the GPU" if len(found) == 1 else f"processes {shown} hold the GPU"
