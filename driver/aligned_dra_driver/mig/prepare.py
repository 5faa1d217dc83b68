# SPDX-License-Identifier: Apache-2.0
"""MIG devices in the driver (``--mig=static|dynamic``): Prepare and Unprepare (:class:`MigPreparer`).

A MIG device is published (:mod:`aligned_dra_driver.mig.devices`) with the attributes ``kind`` ``mig``,
``profile``, ``placementStart``, ``placementSize`` and ``parentUUID``; the scan maps its name to the
parent GPU's topology entry. Its checkpoint record (``devices[i].mig``, see
:mod:`aligned_dra_driver.claims.checkpoint`) names the profile, the placement, the GPU and compute instance
and the MIG UUID.

Prepare of a dynamic MIG device, in this order: the claim is recorded as started in the checkpoint
(``mig_started``), MIG mode is turned on where it is off (Hopper and newer only: an Ampere GPU needs a
reset, which the driver never does: the claim fails naming the GPU), the GPU instance is created at the
allocated placement (``nvmlDeviceCreateGpuInstanceWithPlacement``) and the compute instance that spans
it, then the driver writes the CDI spec and commits the claim, and the same checkpoint write drops the
started record. A claim that fails at any step is rolled back (its instances destroyed, MIG mode put
back) before the answer; a placement NVML refuses fails with a message naming the GPU and placement.
Unprepare destroys the compute and GPU instance; an instance a process runs on (NVML's ``IN_USE``) is
kept, and Unprepare fails (the kubelet retries) until the process ends, naming the PIDs and commands. Any
other NVML error fails the Unprepare too and keeps the claim: an error never reads as "no instance". Only a
GPU that is gone counts its instance gone with it: NVML's ``GPU_IS_LOST``, or ``NOT_FOUND`` for its bus ID
while the PCI function is gone from sysfs as well (an instance lives in the GPU's own state: a GPU comes back
only through a reset or a reload of the NVIDIA driver, which destroy every instance). The GPU whole of a
dynamic GPU runs with MIG mode off: Prepare turns it off (Hopper and newer, no instance left) and reads it
back, or fails naming why (the instances; the process that holds the GPU, :mod:`.mode`). A partition is
never created while MIG mode is off, nor MIG mode turned on while a claim holds the GPU whole: the Unprepare
of the GPU whole leaves that to the next rescan, once it is committed. A static device is found (never
created) and never destroyed; a static GPU whole is never given while MIG mode is on.

Crash safety at start and the retries at each rescan are :mod:`.restore`.

NVML comes from :func:`aligned_dra_driver.usage.watcher.load_pynvml` (initialized on first use). Tests set
:attr:`MigPreparer.fault` to stop at a step (``STEPS``) as a crash would.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..claims.container_edits import PrepareError, mig_edits
from ..collection import mig_holders
from ..usage.watcher import load_pynvml
from .mode import ModeRefused, set_mode
from .nvml import Instance, Nvml, at
from .restore import HOPPER, MigRestore, claimed_placements, nvidia_gpus, read_boot_id

__all__ = ["MigPreparer", "PrepareError", "claimed_placements", "held_placements", "nvidia_gpus", "read_boot_id"]

LOG = logging.getLogger(__name__)

ATTRIBUTE_PREFIX = "dra.aligned.dev/"
ARCHITECTURES = {7: "Ampere", 8: "Ada", 9: "Hopper", 10: "Blackwell"}
STEPS = ("started", "mig-mode", "gpu-instance", "compute-instance", "cdi-spec")

_HELD: dict[str, list[tuple[int, int]]] = {}  # PCI address -> placements kept with a process (replaced whole)
_HELD_LOCK = threading.Lock()  # each publication reads the kept instances of now: the last one written is the latest


def held_placements() -> dict[str, list[tuple[int, int]]]:
    """``{pci_address: [(start, size)]}``: instances no claim holds that a process keeps (not to publish)."""
    return {pci: list(placements) for pci, placements in _HELD.items()}


def attribute(device: dict[str, Any] | None, name: str) -> Any:
    """A published device's ``dra.aligned.dev/<name>`` value (``{"string": v}`` → v), or None."""
    value = ((device or {}).get("attributes") or {}).get(ATTRIBUTE_PREFIX + name)
    if not isinstance(value, dict) or len(value) != 1:
        return None
    return next(iter(value.values()))


def is_mig(device: dict[str, Any] | None) -> bool:
    return attribute(device, "kind") == "mig"


class MigPreparer(MigRestore):
    """The MIG side of one :class:`~aligned_dra_driver.kubelet.driver.Driver`."""

    def __init__(self, driver: Any, loader: Callable[[], Any] | None = None) -> None:
        self.driver = driver
        self.opts = driver.opts
        self.mode = self.opts.mig
        self.gpus = {g.lower() for g in self.opts.mig_gpus or [] if g != "all"}
        self.loader = loader
        self.nvml: Nvml | None = None
        self._locks: dict[str, threading.Lock] = {}
        self._locks_lock = threading.Lock()
        self.kept: dict[str, list[Instance]] = {}  # PCI address -> instances kept with a process
        self.new_boot = False  # restore: the checkpoint's boot is not this one (instances are made again)
        self.fault: Callable[[str, str], None] | None = None  # tests: (step, claim uid); raise to stop there
        # dynamic GPUs whose MIG mode is to be turned back on (refused: a process held the GPU), retried each
        # rescan; the reason last logged for each (logged again only when it changes)
        self.mode_retry: dict[str, str] = {}
        self._whole: dict[str, str] = {}  # PCI address -> claim uid: a Prepare of the GPU whole in flight
        self.unswept: set[str] = set()  # GPUs whose instances could not be checked at start (retried)
        self.restore_pending = False  # NVML not loadable at start: the start-up check waits for it (each rescan)
        self.unrefreshed: dict[str, str] = {}  # committed claims whose instances NVML failed to make again: why
        self.boot: str | None = None  # this boot's ID (restore)

    # -- shared ------------------------------------------------------------------------

    def manages(self, pci: str) -> bool:
        return self.mode != "off" and (not self.gpus or pci.lower() in self.gpus)

    def lib(self) -> Nvml:
        if self.nvml is None:
            try:
                lib = (self.loader or load_pynvml)()
                lib.nvmlInit()
            except Exception as exc:
                raise PrepareError(f"NVML is not usable, MIG devices cannot be prepared: {exc}") from exc
            self.nvml = Nvml(lib)
        return self.nvml

    def lock(self, pci: str) -> threading.Lock:
        with self._locks_lock:
            return self._locks.setdefault(pci, threading.Lock())

    def _step(self, step: str, uid: str) -> None:
        if self.fault is not None:
            self.fault(step, uid)

    def _save_started(self, uid: str, records: list[dict[str, Any]]) -> None:
        """Write the checkpoint with the claim's started records (none: dropped); memory follows a good write.

        Read, changed and written under the state lock: concurrent Prepares of other claims keep theirs."""
        checkpoint = self.driver.checkpoint
        with self.driver.state_lock:
            before = checkpoint.mig_started
            checkpoint.mig_started = {u: r for u, r in before.items() if u != uid}
            if records:
                checkpoint.mig_started[uid] = records
            try:
                checkpoint.save()
            except OSError:
                checkpoint.mig_started = before
                raise

    def _metric(self) -> None:
        metrics = self.driver.metrics
        gauge = getattr(metrics, "mig_kept_instances", None)
        if gauge is not None:
            gauge.set(sum(len(v) for v in list(self.kept.values())))

    def _publish_held(self) -> None:
        global _HELD
        with _HELD_LOCK:
            _HELD = {pci: [(i.start, i.size) for i in kept] for pci, kept in list(self.kept.items()) if kept}
            self._metric()

    def _gone(self, nvml: Nvml, pci: str, exc: BaseException, lookup: bool = False) -> bool:
        """Whether the error says the GPU is gone (its instances with it): GPU_IS_LOST, or (``lookup``: the
        bus ID's handle) NOT_FOUND while sysfs has no PCI function at the address either."""
        if nvml.is_error(exc, "GPU_IS_LOST"):
            return True
        if not lookup or not nvml.is_error(exc, "NOT_FOUND"):
            return False
        return not os.path.lexists(os.path.join(self.opts.sysfs_root, "bus", "pci", "devices", pci))

    def _handle_unless_gone(self, nvml: Nvml, pci: str) -> Any:
        """The GPU's handle; None where the GPU is gone (:meth:`_gone`: its instances went with it). Any other
        NVML error passes through."""
        try:
            return nvml.handle(pci)
        except Exception as exc:
            if not self._gone(nvml, pci, exc, lookup=True):
                raise
            LOG.warning("GPU %s is gone (%s): its MIG instance went with it", pci, exc)
            return None

    @staticmethod
    @contextlib.contextmanager
    def _nvml_failure(nvml: Nvml, what: str) -> Iterator[None]:
        """An NVML error fails the Prepare as a PrepareError naming what it was doing (the claim is rolled back)."""
        try:
            yield
        except PrepareError:
            raise
        except Exception as exc:
            if nvml.code(exc) is None:
                raise
            raise PrepareError(f"{what}: NVML failed ({exc})") from exc

    def holds_whole(self, pci: str, claims: list[dict[str, Any]] | None = None) -> bool:
        """Whether a committed claim (of ``claims``, default every one) holds the GPU whole, or one is being
        prepared: its MIG mode stays off."""
        if pci in self._whole:
            return True
        entries = list(self.driver.checkpoint.claims.values()) if claims is None else claims
        return any(
            d["pci_address"] == pci and "mig" not in d and d["kind"] == "gpu" for e in entries for d in e["devices"]
        )

    # -- Prepare -----------------------------------------------------------------------

    def prepare(
        self, uid: str, topo: dict[str, Any], inventory: Any, name: str
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """A GPU result: a MIG device's record and edits; None for a GPU whole (MIG mode off where dynamic)."""
        device = next((d for d in inventory.devices if d.get("name") == name), None)
        if is_mig(device):
            return self.prepare_device(uid, topo, device)  # type: ignore[arg-type]
        self.prepare_whole(topo["pci_address"], uid)
        return None

    def prepare_device(
        self, uid: str, topo: dict[str, Any], published: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """A MIG device's record (``mig``) and its CDI edits: created (dynamic) or found (static)."""
        pci = topo["pci_address"]
        if not self.manages(pci):
            raise PrepareError(f"{published['name']}: GPU {pci} is not run as MIG by this driver (--mig, --mig-gpus)")
        profile, start, size = (attribute(published, k) for k in ("profile", "placementStart", "placementSize"))
        if not isinstance(profile, str) or not isinstance(start, int) or not isinstance(size, int):
            raise PrepareError(f"{published['name']}: no MIG profile and placement published")
        nvml = self.lib()
        with self.lock(pci), self._nvml_failure(nvml, f"GPU {pci}: MIG {profile} at memory slice {start}"):
            handle = nvml.handle(pci)
            if self.mode == "static":
                found = at(nvml.instances(handle), start, size, profile)
                if found is None or not found.cis:
                    raise PrepareError(f"GPU {pci}: no MIG instance {profile} at memory slice {start} (any more)")
                mig = self._record("static", found, found.cis[0][1], nvml.mig_uuid(handle, found.id, found.cis[0][1]))
            else:
                mig = self._create(uid, pci, handle, profile, start, size, published["name"])
        edits = mig_edits(self.opts, topo, mig)
        self._step("cdi-spec", uid)
        return mig, edits

    @staticmethod
    def _record(mode: str, gi: Instance, ci_id: int, uuid: str | None) -> dict[str, Any]:
        return {
            "mode": mode,
            "profile": gi.profile,
            "profile_id": gi.profile_id,
            "placement": {"start": gi.start, "size": gi.size},
            "gpu_instance": gi.id,
            "compute_instance": ci_id,
            "uuid": uuid,
        }

    def _create(
        self, uid: str, pci: str, handle: Any, profile: str, start: int, size: int, device: str
    ) -> dict[str, Any]:
        """Started record, MIG mode, GPU instance, compute instance: the device's ``mig`` record."""
        nvml = self.lib()
        record = {"pci_address": pci, "device": device, "profile": profile, "placement": {"start": start, "size": size}}
        self._save_started(uid, [*self.driver.checkpoint.mig_started.get(uid, []), record])
        self._step("started", uid)
        handle = self._mig_mode_on(pci, handle)
        self._step("mig-mode", uid)
        where = f"GPU {pci}: MIG {profile} at memory slice {start} (size {size})"
        info = nvml.profile(handle, profile, pci)
        try:
            nvml.create(handle, info, start, size)
        except Exception as exc:
            if nvml.is_error(exc, "INSUFFICIENT_RESOURCES"):
                raise PrepareError(f"{where}: its memory slices are taken (NVML: {exc})") from exc
            if nvml.is_error(exc, "INVALID_ARGUMENT"):
                raise PrepareError(f"{where}: NVML does not offer this placement (NVML: {exc})") from exc
            raise PrepareError(f"{where}: creating the GPU instance failed: {exc}") from exc
        self._step("gpu-instance", uid)
        gi = at(nvml.instances(handle), start, size, profile)
        if gi is None:
            raise PrepareError(f"{where}: the GPU instance NVML created is not found")
        ci_id = nvml.create_ci(gi.gi, gi.slices)
        self._step("compute-instance", uid)
        return self._record("dynamic", gi, ci_id, nvml.mig_uuid(handle, gi.id, ci_id))

    def _mig_mode_on(self, pci: str, handle: Any) -> Any:
        """MIG mode on (turned on where it is off and may be), read back; the GPU's handle of now."""
        nvml = self.lib()
        if nvml.mig_mode(handle):
            return handle
        arch = nvml.architecture(handle)
        name = ARCHITECTURES.get(arch, f"architecture {arch}")
        if arch < HOPPER:
            raise PrepareError(
                f"GPU {pci} ({name}) has MIG mode off: the driver never turns it on below Hopper (it needs a GPU "
                "reset); turn it on with the role aligned.dra.mig"
            )
        if self.holds_whole(pci):
            raise PrepareError(f"GPU {pci} has MIG mode off: a claim holds the GPU whole")
        handle = set_mode(nvml, pci, handle, True, self.opts.procfs_root)
        self.mode_retry.pop(pci, None)
        LOG.info("GPU %s: MIG mode turned on", pci)
        return handle

    def prepare_whole(self, pci: str, uid: str = "") -> None:
        """The GPU whole runs with MIG mode off: dynamic, turned off where it may be, and read back; static, never
        given while MIG mode is on (turned on since the GPU was published whole) or cannot be read."""
        if not self.manages(pci):
            return
        nvml = self.lib()
        if self.mode == "static":
            with self.lock(pci), self._nvml_failure(nvml, f"GPU {pci} as a whole"):
                if nvml.mig_mode(nvml.handle(pci)):
                    raise PrepareError(
                        f"GPU {pci} has MIG mode on (--mig=static): the GPU whole is not given while it is; its MIG "
                        "devices are published at the next scan"
                    )
            return
        with self.lock(pci), self._nvml_failure(nvml, f"GPU {pci} as a whole"):
            self._whole[pci] = uid  # MIG mode is not turned back on behind it (settle forgets it)
            self.mode_retry.pop(pci, None)
            handle = nvml.handle(pci)
            if not nvml.mig_mode(handle):
                return
            instances = nvml.instances(handle)
            if instances:
                shown = ", ".join(f"{i.profile} at memory slice {i.start} (GPU instance {i.id})" for i in instances)
                raise PrepareError(f"GPU {pci} as a whole needs MIG mode off, but it has MIG instances: {shown}")
            arch = nvml.architecture(handle)
            if arch < HOPPER:
                raise PrepareError(
                    f"GPU {pci} ({ARCHITECTURES.get(arch, arch)}) has MIG mode on: turning it off needs a GPU reset, "
                    "which the driver never does"
                )
            try:
                set_mode(nvml, pci, handle, False, self.opts.procfs_root)
            except ModeRefused as exc:
                raise PrepareError(f"{exc}: the GPU whole is not given while MIG mode is on") from exc
            LOG.info("GPU %s: MIG mode turned off for the GPU whole", pci)

    def settle(self, answers: dict[str, dict[str, Any]]) -> None:
        """After a Prepare call (claim locks held): roll back the claims that failed, forget the committed. A
        GPU whole that a failed claim turned to MIG mode off goes back to MIG mode at the next rescan."""
        checkpoint = self.driver.checkpoint
        for pci, uid in list(self._whole.items()):
            if uid in answers:
                del self._whole[pci]
                if uid not in checkpoint.claims and self.mode == "dynamic":
                    self.mode_retry.setdefault(pci, "")
        for uid in list(checkpoint.mig_started):
            if uid in checkpoint.claims:
                with self.driver.state_lock:  # the commit's write already left its record out
                    checkpoint.mig_started = {u: r for u, r in checkpoint.mig_started.items() if u != uid}
            elif "error" in answers.get(uid, {}):
                self.roll_back(uid)

    def roll_back(self, uid: str) -> bool:
        """Destroy what a started claim created; its started record goes once nothing is left (an NVML error
        keeps it: retried at each rescan and start). True: done."""
        records = self.driver.checkpoint.mig_started.get(uid, [])
        left = []
        for record in records:
            if not self._undo(record):
                left.append(record)
        try:
            self._save_started(uid, left)
        except OSError as exc:
            LOG.error("claim %s: recording its MIG roll back failed (done again at the next start): %s", uid, exc)
            return False
        return not left

    def _undo(self, record: dict[str, Any]) -> bool:
        """Destroy the instance at a started record's placement (none there, or the GPU gone: done). False: kept
        (an NVML error never reads as "nothing there")."""
        pci, place = record["pci_address"], record["placement"]
        nvml = None
        try:
            nvml = self.lib()
            with self.lock(pci):
                handle = self._handle_unless_gone(nvml, pci)
                if handle is None:
                    return True
                if not nvml.mig_mode(handle):
                    return True  # MIG mode off: no instance
                found = at(nvml.instances(handle), place["start"], place["size"], record["profile"])
                if found is None:
                    return True
                pids = nvml.processes(handle, found.id)
                if pids:
                    LOG.warning("GPU %s: MIG instance %s runs process(es) %s: kept", pci, found.id, pids)
                    kept = self.kept.setdefault(pci, [])
                    if at(kept, found.start, found.size) is None:  # a retried Prepare's roll back meets it again
                        kept.append(found)
                    self._publish_held()
                    return True
                nvml.destroy(found)
                LOG.info("GPU %s: rolled back MIG %s at memory slice %s", pci, found.profile, found.start)
        except Exception as exc:
            if nvml is not None and self._gone(nvml, pci, exc):
                LOG.warning("GPU %s is gone (%s): its MIG instance went with it", pci, exc)
                return True
            LOG.error(
                "GPU %s: rolling back MIG %s at memory slice %s failed (kept, retried at each rescan): %s",
                pci,
                record["profile"],
                place["start"],
                exc,
            )
            return False
        return True

    # -- Unprepare ---------------------------------------------------------------------

    def _mode_back_on(self, pci: str, handle: Any, claims: list[dict[str, Any]]) -> bool:
        """A dynamic GPU whose whole no claim holds goes back to MIG mode (Hopper and newer), so that its MIG
        devices are published again. Refused (a process holds the GPU): False, the GPU stays in ``mode_retry``
        (each rescan tries again) and the reason is logged when it changes. True: nothing (more) to do."""
        nvml = self.lib()
        if self.mode != "dynamic" or nvml.mig_mode(handle) is not False or nvml.architecture(handle) < HOPPER:
            self.mode_retry.pop(pci, None)
            return True
        if self.holds_whole(pci, claims):
            self.mode_retry.pop(pci, None)
            return True
        try:
            set_mode(nvml, pci, handle, True, self.opts.procfs_root)
        except PrepareError as exc:
            reason = f"{exc}; tried again at each rescan"
            if self.mode_retry.get(pci) != reason:
                LOG.warning("%s", reason)
            self.mode_retry[pci] = reason
            return False
        self.mode_retry.pop(pci, None)
        LOG.info("GPU %s: MIG mode back on (no claim holds the GPU whole)", pci)
        return True

    def unprepare(self, entry: dict[str, Any] | None) -> None:
        """Destroy a claim's dynamic MIG instances; raises PrepareError (the claim stays) while one is in use or
        NVML fails. A dynamic GPU whole goes back to MIG mode once the Unprepare is committed (:meth:`unprepared`)."""
        for device in (entry or {}).get("devices") or []:
            pci = device["pci_address"]
            mig = device.get("mig")
            if isinstance(mig, dict) and mig.get("mode") == "dynamic":  # a static instance is never destroyed
                self._destroy_claimed(pci, mig)

    def unprepared(self, entries: list[dict[str, Any]]) -> None:
        """After the commit of an Unprepare (the claims' locks held): a dynamic GPU whole one of them held goes back
        to MIG mode at the next rescan (:meth:`_retry_mode`), decided then under the GPU's lock from the claims
        committed then, so that a whole claim committed meanwhile never gets MIG mode under it. Queued only once
        committed: a rescan between the Unprepare and its commit still sees the claim, and would drop the retry."""
        for entry in entries:
            for device in entry.get("devices") or []:
                pci = device["pci_address"]
                if device["kind"] == "gpu" and "mig" not in device and self.mode == "dynamic" and self.manages(pci):
                    self.mode_retry.setdefault(pci, "")

    def _destroy_claimed(self, pci: str, mig: dict[str, Any]) -> None:
        """Destroy a claim's instance; PrepareError (the claim stays, the kubelet retries) on any NVML error but
        the GPU's being gone."""
        nvml, place = self.lib(), mig["placement"]
        what = f"GPU {pci}: MIG {mig['profile']} at memory slice {place['start']}"
        with self.lock(pci):
            try:
                handle = self._handle_unless_gone(nvml, pci)
            except Exception as exc:
                raise PrepareError(f"{what}: NVML cannot find the GPU ({exc}): the claim stays prepared") from exc
            if handle is None:
                return
            found = None
            try:
                found = at(nvml.instances(handle), place["start"], place["size"], mig["profile"])
                if found is None:
                    return  # destroyed by an earlier try, or by a reboot
                nvml.destroy(found)
            except Exception as exc:
                if self._gone(nvml, pci, exc):
                    LOG.warning("GPU %s is gone (%s): its MIG instance went with it", pci, exc)
                    return
                if found is not None and nvml.is_error(exc, "IN_USE"):
                    raise PrepareError(f"{what} (GPU instance {found.id}) {self._users(handle, found.id)}") from exc
                raise PrepareError(
                    f"{what}: NVML failed ({exc}): the claim stays prepared, the kubelet retries"
                ) from exc

    def _users(self, handle: Any, gi_id: int) -> str:
        """``still runs process(es) 4242 (python): kept until they end``: the instance's processes, named."""
        try:
            pids = self.lib().processes(handle, gi_id)
        except Exception as exc:  # the refusal stands; who holds it is not known
            LOG.warning("the processes of GPU instance %s cannot be read: %s", gi_id, exc)
            pids = []
        shown = mig_holders.listed((pid, mig_holders.command(self.opts.procfs_root, pid)) for pid in pids) or "?"
        return f"still runs process(es) {shown}: kept until they end"
