# SPDX-License-Identifier: Apache-2.0
"""Publishing MIG (``--mig=static|dynamic``): the selected GPUs' devices replaced by their MIG devices.

At every scan :class:`MigScanner` reads each selected NVIDIA GPU's MIG state through NVML
(``node/mig/nvml_state``), holding the GPU's lock that Prepare and Unprepare hold (``MigPreparer.lock``), so a
scan never reads a GPU halfway through a change, and asks the device model (``dra/mig``) what to publish in its
place:

- ``static``: the instances that exist, each a device with its MIG UUID; a GPU with MIG mode off stays whole.
  A layout the role changed is picked up at the next scan once no claim on that GPU is prepared: while one
  is, the GPU's devices stay as they were published.
- ``dynamic``: the partitionable GPU (its counter set, a device per profile and placement, the GPU whole
  where the driver can prepare it: the model leaves it out on Ampere with MIG mode on, as turning the mode
  off needs a GPU reset). Profiles and placements come from NVML only, which answers them only while MIG mode
  is on; they are kept per GPU UUID in the state directory (``mig-profiles.json``), so a GPU whose whole is
  allocated (MIG mode off) is still published the same way, across restarts too; except on a GPU that cannot
  change MIG mode live (Ampere): with MIG mode off there Prepare could never make a partition, so it is
  published whole, as without MIG, and a warning says why. Placements an instance no claim holds still
  occupies (a process runs on it: :func:`.prepare.held_placements`) are left out, with the GPU whole.

**Fail closed.** A selected GPU the scan cannot read (NVML cannot be loaded, answers any error for that GPU,
or offers no MIG profile while MIG mode is on: its instances cannot be listed then), or whose state the
device model refuses (``DeviceModelError``: names that collide or are no DNS label), keeps what was last
published for it; a GPU never published since the start is withdrawn (nothing is published in its place).
It is never published whole in doubt: the scheduler could allocate it over a live partition. A warning
names the GPU and the reason each time that changes, ``aligned_dra_mig_unreadable_gpus`` counts such GPUs
(by cause), and the next good read publishes the GPU again. Where NVML never loaded (no
``nvidia-ml-py``, no driver), every selected GPU is withdrawn: ``--mig-gpus`` naming the MIG GPUs keeps the
others untouched (a GPU not selected is always published as without ``--mig``).

A GPU the driver runs as MIG is never an MPS-shared GPU: :attr:`MigScanner.mig_gpus` names them for the
scan's fractional step.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Callable
from typing import Any

from ..collection import dra_mig, mig_state
from ..fsutil import atomic_write
from ..usage.watcher import load_pynvml

LOG = logging.getLogger(__name__)

NVIDIA = "0x10de"
PROFILES_FILE = "mig-profiles.json"
CAUSES = ("nvml", "device-model")  # why a GPU is not read: NVML failed, or the device model refused its state
Published = tuple[list[dict[str, Any]], list[dict[str, Any]]]  # (devices, counter sets)


class _Unpublishable(Exception):
    """A GPU whose MIG devices cannot be published from this scan: ``cause`` one of :data:`CAUSES`."""

    def __init__(self, cause: str, reason: str) -> None:
        super().__init__(reason)
        self.cause = cause


def _value(device: dict[str, Any], name: str) -> Any:
    value = (device.get("attributes") or {}).get(name)
    return next(iter(value.values())) if isinstance(value, dict) and len(value) == 1 else None


def _overlaps(device: dict[str, Any], held: list[tuple[int, int]]) -> bool:
    start = _value(device, "dra.aligned.dev/placementStart")
    size = _value(device, "dra.aligned.dev/placementSize")
    if start is None or size is None:  # the GPU whole: it overlaps every held placement
        return bool(held)
    return any(start < h_start + h_size and h_start < start + size for h_start, h_size in held)


def _no_lock(pci: str) -> contextlib.AbstractContextManager:
    return contextlib.nullcontext()


class MigScanner:
    """The MIG part of the driver's scan; one per driver process (kept on its Options).

    ``lock(pci)``: the context manager Prepare and Unprepare hold for a GPU (``MigPreparer.lock``), held
    around each NVML read of that GPU. ``metrics``: the driver's (``aligned_dra_mig_unreadable_gpus``).
    """

    def __init__(
        self,
        mode: str,
        gpus: list[str] | None,
        state_dir: str,
        loader: Callable[[], Any] | None = None,
        busy: Callable[[str], bool] | None = None,
        held: Callable[[], dict[str, list[tuple[int, int]]]] | None = None,
        lock: Callable[[str], Any] | None = None,
        metrics: Any | None = None,
    ) -> None:
        self.mode = mode
        self.gpus = {g.lower() for g in gpus or [] if g != "all"}
        self.path = os.path.join(state_dir, PROFILES_FILE)
        self.loader = loader or load_pynvml
        self.busy = busy or (lambda pci: False)
        self.held = held or dict
        self.lock = lock or _no_lock
        self.metrics = metrics
        self.nvml: Any = None
        self.cache = self._load_cache()
        # pci -> what was last published in the GPU's place from a good read; None: the GPU whole, as without MIG
        self.last: dict[str, Published | None] = {}
        self.mig_gpus: set[str] = set()  # device names of the GPUs run as MIG at the last scan
        self.unreadable: dict[str, tuple[str, str]] = {}  # pci -> (cause, reason) of the GPUs the last scan kept
        self._said: dict[str, str] = {}  # pci -> the condition last logged for it (a warning each time it changes)
        self._now: set[str] = set()  # the GPUs a condition was noted for in this scan

    # -- NVML, the profile cache and what is said ----------------------------------------

    def _note(self, pci: str, key: str, level: int, message: str, *args: Any) -> None:
        """Log ``message`` when the GPU's condition ``key`` is new (not once per process: once per change)."""
        self._now.add(pci)
        if self._said.get(pci) != key:
            self._said[pci] = key
            LOG.log(level, message, *args)

    def _lib(self) -> Any:
        """NVML, loaded and initialized; raises :class:`_Unpublishable` while it cannot be (tried every scan)."""
        if self.nvml is None:
            try:
                lib = self.loader()
                lib.nvmlInit()
            except Exception as exc:  # ImportError (no nvidia-ml-py), NVMLError (no driver, no libnvidia-ml)
                raise _Unpublishable("nvml", f"NVML is not usable ({type(exc).__name__}: {exc})") from exc
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

    def apply(self, devices: list[dict[str, Any]]) -> Published:
        """The devices with each selected GPU replaced by its MIG devices, and the counter sets to publish."""
        out: list[dict[str, Any]] = []
        sets: list[dict[str, Any]] = []
        self.mig_gpus = set()
        self._now = set()
        unreadable: dict[str, tuple[str, str]] = {}
        for device in devices:
            if not self.selects(device):
                out.append(device)
                continue
            pci = str(_value(device, "resource.kubernetes.io/pciBusID")).lower()
            try:
                replaced = self._gpu(device, pci)
            except _Unpublishable as exc:
                unreadable[pci] = (exc.cause, str(exc))
                self._keep(pci, exc)
                if pci not in self.last:
                    continue  # withdrawn: nothing in its place
                replaced = self.last[pci]
            else:
                self.last[pci] = replaced
                self._recovered(pci)
            if replaced is None:
                out.append(device)
                continue
            mig_devices, mig_sets = replaced
            out.extend(mig_devices)
            sets.extend(mig_sets)
            self.mig_gpus.add(device["name"])
        self.unreadable = unreadable
        self._count(unreadable)
        return out, sets

    def _recovered(self, pci: str) -> None:
        """A good read: a condition logged before and not noted in this scan is over."""
        if pci in self._now:
            return
        said = self._said.pop(pci, None)
        if said is not None and said.split(":", 1)[0] in CAUSES:
            LOG.info("--mig: GPU %s is read again: published from NVML", pci)

    def _keep(self, pci: str, exc: _Unpublishable) -> None:
        """Say what a GPU that cannot be read publishes: what was last published for it, else nothing."""
        level = logging.ERROR if exc.cause == "device-model" else logging.WARNING
        key = f"{exc.cause}: {exc}"
        if pci not in self.last:
            self._note(pci, key, level, "--mig: GPU %s is withdrawn (never published since the start): %s", pci, exc)
            return
        what = "as a GPU without MIG" if self.last[pci] is None else "with its MIG devices"
        self._note(pci, key, level, "--mig: GPU %s keeps what was last published (%s): %s", pci, what, exc)

    def _count(self, unreadable: dict[str, tuple[str, str]]) -> None:
        gauge = getattr(self.metrics, "mig_unreadable_gpus", None)
        if gauge is None:
            return
        for cause in CAUSES:
            gauge.labels(cause=cause).set(sum(1 for c, _r in unreadable.values() if c == cause))

    def _gpu(self, device: dict[str, Any], pci: str) -> Published | None:
        """The GPU's MIG devices and counter sets, or None for the GPU whole (as without ``--mig``)."""
        if self.mode == "static" and self.last.get(pci) is not None and self.busy(pci):
            return self.last[pci]  # a prepared claim holds the GPU: its layout is taken up once it is free
        lib = self._lib()
        with self.lock(pci):  # never a read halfway through a Prepare or an Unprepare of this GPU
            state = mig_state.read_gpu(lib, pci)
        if state.get("error"):
            raise _Unpublishable("nvml", f"NVML cannot read it: {state['error']}")
        if not state.get("mig_capable"):
            return None
        if (state.get("mig_mode") or {}).get("current") and not state.get("profiles"):
            # its instances are listed per profile: none readable says nothing of them (a partition may be live)
            raise _Unpublishable(
                "nvml", "NVML offers no MIG profile while MIG mode is on, so its instances cannot be read"
            )
        try:
            return self._static(device, state) if self.mode == "static" else self._dynamic(device, state, pci)
        except dra_mig.DeviceModelError as exc:
            raise _Unpublishable("device-model", f"the device model refuses its MIG state: {exc}") from exc

    def _static(self, device: dict[str, Any], state: dict[str, Any]) -> Published | None:
        if not (state.get("mig_mode") or {}).get("current"):
            return None  # MIG mode off: the GPU whole, as without --mig (and shareable where GPUs are)
        return dra_mig.static_devices(device, state), []

    def _dynamic(self, device: dict[str, Any], state: dict[str, Any], pci: str) -> Published | None:
        uuid = state.get("uuid") or _value(device, "dra.aligned.dev/uuid") or pci
        if state.get("profiles"):
            self._remember(uuid, state)
        cached = self.cache.get(uuid)
        mode_on = bool((state.get("mig_mode") or {}).get("current"))
        architecture = state.get("architecture") or "unknown"
        if not cached or not cached.get("profiles"):
            self._note(
                pci,
                "profiles never read",
                logging.WARNING,
                "--mig=dynamic: GPU %s has MIG mode off and its profiles were never read: published whole "
                "until MIG mode is on (the driver turns it on at start on Hopper and newer; Ampere needs the role)",
                pci,
            )
            return None
        if not mode_on and not dra_mig.mode_changes_live(architecture):
            self._note(
                pci,
                "mode off, not live",
                logging.WARNING,
                "--mig=dynamic: GPU %s (%s) has MIG mode off and cannot turn it on without a GPU reset: published "
                "whole, as without MIG, not with its cached partitions (Prepare could not make them); turn MIG mode "
                "on with the role aligned.dra.mig",
                pci,
                architecture,
            )
            return None
        # the live state (architecture, MIG mode) with the profiles NVML gave while MIG mode was on
        model_state = dict(state, profiles=cached["profiles"], memory_slices=cached.get("memory_slices"))
        devices = dra_mig.dynamic_devices(device, model_state)
        held = self.held().get(pci) or []
        if held:
            devices = [d for d in devices if not _overlaps(d, held)]
        return devices, [dra_mig.counter_set(device, model_state)]
