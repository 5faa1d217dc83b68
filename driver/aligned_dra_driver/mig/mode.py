# SPDX-License-Identifier: Apache-2.0
"""A MIG mode change, read back: :func:`set_mode`.

``nvmlDeviceSetMigMode`` returns an activation status besides its own error: ``SUCCESS`` when the mode
changed now, ``IN_USE`` when the GPU is not idle (the change needs it unbound, which any open client
prevents), ``RESET_REQUIRED`` where only a GPU reset applies it (Ampere, pass-through). Either way NVML keeps
the wanted mode as *pending*. So the status is read, the mode is read again from a new handle (the change may
unbind and reset the GPU: handles taken before it are no longer valid), and a change that did not happen
fails naming why and the processes that hold the GPU (the collection's ``node/mig/holders``, vendored); the
pending mode is put back to the current one, so that a later GPU reset or reboot brings no change nobody asked
for.
"""

from __future__ import annotations

import logging
from typing import Any

from ..claims.container_edits import PrepareError
from ..collection import mig_holders
from .nvml import Nvml

LOG = logging.getLogger(__name__)


class ModeRefused(PrepareError):
    """NVML did not change the MIG mode (the message says why); the GPU keeps its mode."""


def _word(mode: bool | None) -> str:
    return "on" if mode else "off"


def _why(nvml: Nvml, pci: str, handle: Any, status: int, procfs_root: str) -> str:
    lib = nvml.lib
    if status == getattr(lib, "NVML_ERROR_IN_USE", 19):
        found, errors = mig_holders.read(procfs_root, lambda: nvml.gpu_processes(handle), lambda: nvml.minor(handle))
        for exc in errors:  # the reason stays: the GPU is in use; who holds it is known in part or not at all
            LOG.warning("GPU %s: the processes holding it cannot be read: %s", pci, exc)
        return mig_holders.describe(found)
    if status == getattr(lib, "NVML_ERROR_RESET_REQUIRED", 16):
        return "the change needs a GPU reset, which the driver never does"
    if status == getattr(lib, "NVML_SUCCESS", 0):
        return "NVML reported the change done, but the mode reads unchanged"
    return f"NVML's activation status is {status}"


def set_mode(nvml: Nvml, pci: str, handle: Any, want: bool, procfs_root: str) -> Any:
    """Turn MIG mode ``want`` (on: True) and read it back; the GPU's new handle. ModeRefused naming why when
    the mode did not change (a process that holds the GPU by PID and command); PrepareError for an NVML error."""
    try:
        status = nvml.lib.nvmlDeviceSetMigMode(handle, 1 if want else 0)
    except Exception as exc:
        if not nvml.is_error(exc, "IN_USE"):
            raise PrepareError(f"GPU {pci}: turning MIG mode {_word(want)} failed (NVML: {exc})") from exc
        status = getattr(nvml.lib, "NVML_ERROR_IN_USE", 19)  # refused as the call's own error
    try:
        handle = nvml.handle(pci)  # a new handle: the change may have unbound and reset the GPU
        current = nvml.mig_mode(handle)
    except Exception as exc:
        raise PrepareError(f"GPU {pci}: MIG mode cannot be read after turning it {_word(want)}: {exc}") from exc
    if current is want:
        return handle
    why = _why(nvml, pci, handle, int(status or 0), procfs_root)
    try:  # nothing left pending: a later reset or reboot keeps the mode of now
        nvml.lib.nvmlDeviceSetMigMode(handle, 1 if current else 0)
    except Exception as exc:
        LOG.warning("GPU %s: putting its pending MIG mode back %s failed: %s", pci, _word(current), exc)
    raise ModeRefused(f"GPU {pci}: MIG mode stays {_word(current)}: {why}")
