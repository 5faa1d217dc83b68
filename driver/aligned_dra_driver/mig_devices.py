# SPDX-License-Identifier: Apache-2.0
"""Publishing MIG (``--mig=static|dynamic``): the selected GPUs' devices replaced by their MIG devices.

At every scan :class:`MigScanner` reads each selected NVIDIA GPU's MIG state through NVML
(``node/mig/nvml_state``) and asks the device model (``dra/mig``) what to publish in its place:

- ``static``: the instances that exist, each a device with its MIG UUID; a GPU with MIG mode off stays whole.
  A layout the role changed is picked up at the next scan once no claim on that GPU is prepared: while one
  is, the GPU's devices stay as they were published.
- ``dynamic``: the partitionable GPU (its counter set, a device per profile and placement, the GPU whole).
  Profiles and placements come from NVML only, which answers them only while MIG mode is on; they are kept
  per GPU UUID in the state directory (``mig-profiles.json``), so a GPU whose whole is allocated (MIG mode off)
  is still published the same way, across restarts too. Placements an instance no claim holds still occupies
  (a process runs on it: :func:`mig_prepare.held_placements`) are left out, with the GPU whole.

A GPU the driver runs as MIG is never an MPS-shared GPU: :attr:`MigScanner.mig_gpus` names them for the
scan's fractional step. Where NVML cannot be loaded or cannot read a GPU, that GPU is published whole, as
without ``--mig``, and a warning says why (once per reason).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from typing import Any

from .collection import dra_mig, mig_state
from .fsutil import atomic_write
from .usage import load_pynvml

LOG = logging.getLogger(__name__)

NVIDIA = "0x10de"
PROFILES_FILE = "mig-profiles.json"


def _value(device: dict[str, Any], name: str) -> Any:
    value = (device.get("attributes") or {}).get(name)
    return next(iter(value.values())) if isinstance(value, dict) and len(value) == 1 else None


def _overlaps(device: dict[str, Any], held: list[tuple[int, int]]) -> bool:
    start = _value(device, "dra.aligned.dev/placementStart")
    size = _value(device, "dra.aligned.dev/placementSize")
    if start is None or size is None:  # the GPU whole: it overlaps every held placement
        return bool(held)
    return any(start < h_start + h_size and h_start < start + size for h_start, h_size in held)


class MigScanner:
    """The MIG part of the driver's scan; one per driver process (kept on its Options)."""

    def __init__(
        self,
        mode: str,
        gpus: list[str] | None,
        state_dir: str,
        loader: Callable[[], Any] | None = None,
        busy: Callable[[str], bool] | None = None,
        held: Callable[[], dict[str, list[tuple[int, int]]]] | None = None,
    ) -> None:
        self.mode = mode
        self.gpus = {g.lower() for g in gpus or [] if g != "all"}
        self.path = os.path.join(state_dir, PROFILES_FILE)
        self.loader = loader or load_pynvml
        self.busy = busy or (lambda pci: False)
        self.held = held or dict
        self.nvml: Any = None
        self.cache = self._load_cache()
        self.last: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}  # pci -> (devices, sets)
        self.mig_gpus: set[str] = set()  # device names of the GPUs run as MIG at the last scan
        self._warned: set[str] = set()

    # -- NVML and the profile cache ------------------------------------------------------

    def _warn(self, key: str, message: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            LOG.warning(message, *args)

    def _lib(self) -> Any:
        if self.nvml is None:
            try:
                lib = self.loader()
                lib.nvmlInit()
            except Exception as exc:  # ImportError, NVMLError: the GPUs stay whole
                self._warn("nvml", "--mig=%s: NVML is not usable (%s): GPUs are published whole", self.mode, exc)
                return None
            self.nvml = lib
        return self.nvml

    def _load_cache(self) -> dict[str, Any]:
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.load(handle)
            return data if isinstance(data, dict) else {}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:  # damaged: read again from NVML where MIG mode is on
            LOG.warning("%s is not readable (%s): MIG profiles are read from NVML again", self.path, exc)
            return {}

    def _remember(self, uuid: str, state: dict[str, Any]) -> None:
        entry = {"profiles": state["profiles"], "memory_slices": state.get("memory_slices")}
        if self.cache.get(uuid) == entry:
            return
        self.cache[uuid] = entry
        try:
            data = json.dumps(self.cache, sort_keys=True).encode()
            atomic_write(self.path, data, 0o600)
        except OSError as exc:  # a full or read-only disk: kept in memory, written at the next change
            LOG.warning("writing %s failed: %s", self.path, exc)

    # -- the scan ------------------------------------------------------------------------

    def selects(self, device: dict[str, Any]) -> bool:
        if _value(device, "dra.aligned.dev/kind") != "gpu" or _value(device, "dra.aligned.dev/vendorID") != NVIDIA:
            return False
        pci = str(_value(device, "resource.kubernetes.io/pciBusID") or "").lower()
        return bool(pci) and (not self.gpus or pci in self.gpus)

    def apply(self, devices: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The devices with each selected GPU replaced by its MIG devices, and the counter sets to publish."""
        out: list[dict[str, Any]] = []
        sets: list[dict[str, Any]] = []
        self.mig_gpus = set()
        for device in devices:
            replaced = self._gpu(device) if self.selects(device) else None
            if replaced is None:
                out.append(device)
                continue
            mig_devices, mig_sets = replaced
            out.extend(mig_devices)
            sets.extend(mig_sets)
            self.mig_gpus.add(device["name"])
        return out, sets

    def _gpu(self, device: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        pci = str(_value(device, "resource.kubernetes.io/pciBusID")).lower()
        if self.mode == "static" and pci in self.last and self.busy(pci):
            return self.last[pci]  # a prepared claim holds the GPU: its layout is taken up once it is free
        lib = self._lib()
        if lib is None:
            return None
        state = mig_state.read_gpu(lib, pci)
        if state.get("error"):
            self._warn(f"read {pci}", "--mig: GPU %s is published whole: %s", pci, state["error"])
            return None
        if not state.get("mig_capable"):
            return None
        result = self._static(device, state) if self.mode == "static" else self._dynamic(device, state, pci)
        if result is not None:
            self.last[pci] = result
        return result

    def _static(self, device: dict[str, Any], state: dict[str, Any]) -> tuple[list, list] | None:
        if not (state.get("mig_mode") or {}).get("current"):
            return None  # MIG mode off: the GPU whole, as without --mig (and shareable where GPUs are)
        return dra_mig.static_devices(device, state), []

    def _dynamic(self, device: dict[str, Any], state: dict[str, Any], pci: str) -> tuple[list, list] | None:
        uuid = state.get("uuid") or _value(device, "dra.aligned.dev/uuid") or pci
        if state.get("profiles"):
            self._remember(uuid, state)
        cached = self.cache.get(uuid)
        if not cached or not cached.get("profiles"):
            self._warn(
                f"profiles {pci}",
                "--mig=dynamic: GPU %s has MIG mode off and its profiles were never read: published whole "
                "until MIG mode is on (the driver turns it on at start on Hopper and newer; Ampere needs the role)",
                pci,
            )
            return None
        model_state = dict(state, profiles=cached["profiles"], memory_slices=cached.get("memory_slices"))
        devices = dra_mig.dynamic_devices(device, model_state)
        held = self.held().get(pci) or []
        if held:
            devices = [d for d in devices if not _overlaps(d, held)]
        return devices, [dra_mig.counter_set(device, model_state)]
