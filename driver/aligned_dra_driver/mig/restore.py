# SPDX-License-Identifier: Apache-2.0
"""MIG crash safety at start (:meth:`MigRestore.restore`, from ``Driver.restore``) and the retries at each rescan
(:meth:`MigRestore.sweep`), mixed into :class:`aligned_dra_driver.mig.prepare.MigPreparer`.

At start: the started records of claims that were not committed are rolled back (the kubelet's retry prepares
them again); each committed claim's instance is found again, or, after a new boot
(``<procfs>/sys/kernel/random/boot_id`` differs from the checkpoint's: instances do not survive a reboot),
created again, and its CDI spec rewritten with the nvidia-caps minors of now. An instance of a dynamic GPU that
no committed claim holds is destroyed when no process runs on it; one with a process is kept, logged as a
warning, counted in ``aligned_dra_mig_kept_instances``, and ``held_placements`` names its placement so that the
publishing leaves the devices over those memory slices out. A dynamic GPU (Hopper and newer) left with MIG mode
off that no claim holds whole goes back to MIG mode.

Fail closed: an NVML error never reads as "nothing there". A roll back that meets one keeps its started record,
a GPU whose instances cannot be listed is not swept, and a MIG mode change NVML refuses (a process holds the GPU:
named by PID and command) leaves the GPU as it is. Each rescan (:meth:`MigRestore.sweep`) tries again: the
started records left (of claims no call works on), the GPUs not swept, the kept instances whose processes
ended, and MIG mode on for the GPUs where it was refused, until the GPU is idle. A reason is logged when it
changes, not at every scan. Each check of a GPU reads the committed claims and the started records together
(state lock) while it holds the GPU's lock, so that an instance whose Prepare committed meanwhile is never
taken for a leftover. A start while NVML cannot be loaded leaves the whole check pending
(``restore_pending``); the first rescan that loads NVML makes it, CDI specs included. A committed claim whose
instance NVML fails to find or make again (``unrefreshed``), or a static claim whose instance is not there (the
driver started before the boot unit made the layout; the driver never makes one), is tried again at each rescan
and at the kubelet's next Prepare of it, which answers an error until it is done (its pod never starts on a stale
CDI spec, never with the old instance's UUID); until then the checkpoint keeps the old boot, so that a restart
meanwhile still makes a dynamic instance again. A GPU's kept instances are read and written under its lock.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ..claims.container_edits import PrepareError, mig_edits
from ..collection import topology
from .nvml import Instance, Nvml, at, text

LOG = logging.getLogger(__name__)

NVIDIA = "0x10de"
HOPPER = 9  # NVML_DEVICE_ARCH_HOPPER: MIG mode changes without a reset from here on


class InstanceGone(PrepareError):
    """A committed dynamic claim's instance is gone in this boot: it is not made again, and not tried again."""


def claimed_placements(claims: dict[str, Any]) -> dict[str, list[tuple[int, int]]]:
    """``{pci_address: [(start, size)]}`` of the MIG devices the prepared claims hold."""
    out: dict[str, list[tuple[int, int]]] = {}
    for entry in claims.values():
        for device in entry.get("devices") or []:
            mig = device.get("mig")
            if isinstance(mig, dict):
                place = mig["placement"]
                out.setdefault(device["pci_address"], []).append((place["start"], place["size"]))
    return out


def read_boot_id(procfs_root: str) -> str | None:
    try:
        with open(os.path.join(procfs_root, "sys", "kernel", "random", "boot_id"), encoding="ascii") as handle:
            return handle.read().strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def nvidia_gpus(sysfs_root: str, procfs_root: str) -> list[str]:
    """PCI addresses of the node's NVIDIA GPUs (the GPUs NVML may know), as the topology probe sees them."""
    topo = topology.probe(sysfs_root, procfs_root)
    return [
        d["pci_address"] for d in topo.get("devices") or [] if d.get("kind") == "gpu" and d.get("vendor_id") == NVIDIA
    ]


class MigRestore:
    """Start-up and rescan of :class:`~aligned_dra_driver.mig.prepare.MigPreparer` (which gives the rest)."""

    driver: Any
    opts: Any
    mode: str
    nvml: Nvml | None
    kept: dict[str, list[Instance]]
    new_boot: bool
    mode_retry: dict[str, str]
    _whole: dict[str, str]
    unswept: set[str]  # GPUs whose instances could not be checked at start (retried at each rescan)
    unrefreshed: dict[str, str]  # committed claims whose instances NVML failed to find or make again: why
    boot: str | None  # this boot's ID, recorded in the checkpoint once no claim is left unrefreshed
    restore_pending: bool  # NVML could not be loaded at start: the start-up check is done at the first rescan it is

    # given by MigPreparer
    lib: Any
    lock: Any
    manages: Any
    roll_back: Any
    _record: Any
    _mig_mode_on: Any
    _mode_back_on: Any
    _publish_held: Any
    _gone: Any

    def restore(self) -> dict[str, list[str]]:
        """Crash safety at start (module docstring); what it did: rolled back, recreated, destroyed, kept. Where
        NVML cannot be loaded yet, the check stays pending and the first rescan that loads NVML does it."""
        outcome: dict[str, list[str]] = {"rolled_back": [], "recreated": [], "destroyed": [], "kept": []}
        checkpoint = self.driver.checkpoint
        self.unswept = set()
        try:
            self.lib()
        except PrepareError as exc:
            if not self.restore_pending:
                LOG.error("MIG: %s; the start-up check of MIG instances is done once NVML loads (each rescan)", exc)
            self.restore_pending = True
            return outcome
        self.restore_pending = False
        boot = read_boot_id(self.opts.procfs_root)
        self.boot = boot
        new_boot = boot is not None and checkpoint.boot_id is not None and boot != checkpoint.boot_id
        self.new_boot = new_boot
        if new_boot:
            LOG.info("MIG: a new boot since the last run: the prepared claims' instances are created again")
        outcome["rolled_back"] = self._retry_roll_backs()
        claims = dict(checkpoint.claims)
        changed: dict[str, dict[str, Any]] = {}
        for uid, entry in sorted(claims.items()):
            fresh = self._refresh(uid, entry, outcome)
            if fresh is not None:
                changed[uid] = fresh
        if self.mode == "dynamic":
            self._sweep_unknown(outcome, changed)
        with self.driver.state_lock:  # a claim unprepared meanwhile (a late check runs beside the calls) stays out
            candidate = dict(checkpoint.claims, **{u: e for u, e in changed.items() if u in checkpoint.claims})
            before = checkpoint.boot_id
            checkpoint.mig_started = {u: r for u, r in checkpoint.mig_started.items() if u not in candidate}
            checkpoint.boot_id = before if self.unrefreshed else (boot or before)
            try:
                checkpoint.save(candidate)
            except OSError as exc:
                checkpoint.boot_id = before
                LOG.error("MIG: writing the checkpoint after the start-up check failed: %s", exc)
            else:
                checkpoint.claims = candidate
        return outcome

    def _refresh(self, uid: str, entry: dict[str, Any], outcome: dict[str, list[str]]) -> dict[str, Any] | None:
        """A committed claim's MIG devices found again (created again where missing); the new entry if changed."""
        devices = []
        spec = entry["cdi_spec"]
        names = {d["name"]: d for d in spec["devices"]}
        changed = False
        previous = self.unrefreshed.pop(uid, None)  # the reason last logged
        for device in entry["devices"]:
            mig = device.get("mig")
            if not isinstance(mig, dict) or not self.manages(device["pci_address"]):
                devices.append(device)
                continue
            try:
                fresh, topo = self._find_again(uid, device, outcome)
                edits = mig_edits(self.opts, topo, fresh)
            except InstanceGone as exc:  # the claim stays prepared as it was; the kubelet's Unprepare removes it
                LOG.error("MIG: claim %s: %s cannot be found or created again: %s", uid, device["device"], exc)
                devices.append(device)
                continue
            except Exception as exc:  # NVML failed: tried again (rescan, Prepare); Prepare refuses it until then
                reason = f"{device['device']}: {exc}"
                if previous != reason:
                    LOG.error(
                        "MIG: claim %s: %s cannot be found or created again (tried again at each rescan and at its "
                        "Prepare): %s",
                        uid,
                        device["device"],
                        exc,
                    )
                self.unrefreshed[uid] = reason
                devices.append(device)
                continue
            cdi_name = device["cdi_device_ids"][0].split("=", 1)[1]
            if cdi_name in names and names[cdi_name].get("containerEdits") != edits:
                names[cdi_name] = dict(names[cdi_name], containerEdits=edits)  # new nvidia-caps minors
                changed = True
            changed = changed or fresh != mig
            devices.append(dict(device, mig=fresh))
        if not changed:
            return None
        new_spec = dict(spec, devices=[names[d["name"]] for d in spec["devices"]])
        return dict(entry, devices=devices, cdi_spec=new_spec)

    def _find_again(
        self, uid: str, device: dict[str, Any], outcome: dict[str, list[str]]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The device's ``mig`` record as NVML has it now (a missing dynamic instance made again), and its topo."""
        mig, pci = device["mig"], device["pci_address"]
        place = mig["placement"]
        nvml = self.lib()
        with self.lock(pci):
            handle = nvml.handle(pci)
            if mig["mode"] == "dynamic" and self.new_boot:
                handle = self._mig_mode_on(pci, handle)  # a new handle: the change may reset the GPU
            minor = nvml.minor(handle)
            topo = {"pci_address": pci, "gpu": {"minor": minor, "uuid": text(nvml.lib.nvmlDeviceGetUUID(handle))}}
            listed = nvml.instances(handle) if nvml.mig_mode(handle) else []
            found = at(listed, place["start"], place["size"], mig["profile"])
            if mig["mode"] == "static" and (found is None or not found.cis):
                # the node's layout is not made (yet): the driver started before the boot unit, or the layout
                # changed. The driver never makes a static instance: the claim is refused until it exists
                raise PrepareError(
                    f"GPU {pci} has no static MIG instance {mig['profile']} at memory slice {place['start']} with "
                    "its compute instance: refused until the node's MIG layout makes it (aligned-dra-mig.service at "
                    "boot, or playbooks/mig.yml)"
                )
            if found is None and not self.new_boot:
                # in the same boot: an Unprepare cut short after the destroy, or destroyed by hand; its slices
                # may be allocated again already, so it is not made again
                raise InstanceGone(
                    f"its dynamic instance {mig['profile']} at memory slice {place['start']} is gone in this boot: "
                    "not made again (the kubelet's Unprepare removes the claim)"
                )
            if found is None:
                info = nvml.profile(handle, mig["profile"], pci)
                nvml.create(handle, info, place["start"], place["size"])
                found = at(nvml.instances(handle), place["start"], place["size"])
                LOG.info("MIG: claim %s: %s created again at memory slice %s", uid, mig["profile"], place["start"])
                outcome["recreated"].append(uid)
            if found is None:
                raise PrepareError("the GPU instance NVML created is not found")
            ci_id = found.cis[0][1] if found.cis else nvml.create_ci(found.gi, found.slices)
            return self._record(mig["mode"], found, ci_id, nvml.mig_uuid(handle, found.id, ci_id)), topo

    def _sweep_unknown(self, outcome: dict[str, list[str]], changed: dict[str, Any]) -> None:
        """Destroy the idle instances of the dynamic GPUs that no claim holds; keep (and name) those in use. A GPU
        NVML fails to read is left as it is and tried again at each rescan."""
        self.kept = {}
        for pci in nvidia_gpus(self.opts.sysfs_root, self.opts.procfs_root):
            if not self.manages(pci):
                continue
            try:
                self._sweep_gpu(pci, outcome, changed)
            except Exception as exc:
                LOG.error("MIG: checking the instances of GPU %s failed (nothing destroyed, tried again): %s", pci, exc)
                self.unswept.add(pci)
        self._publish_held()

    def _taken(
        self, pci: str, changed: dict[str, Any] | None = None
    ) -> tuple[set[tuple[int, int]], list[Any], set[tuple[int, int]]]:
        """The placements of the GPU that committed claims hold or started records name, the committed claims
        (``changed``: their entries found again at start), and the placements of the started records alone: read
        together under the state lock, by a caller that holds the GPU's lock, so that a Prepare committed
        meanwhile is seen in one or the other."""
        checkpoint = self.driver.checkpoint
        with self.driver.state_lock:
            claims = dict(checkpoint.claims, **{u: e for u, e in (changed or {}).items() if u in checkpoint.claims})
            started = {
                (r["placement"]["start"], r["placement"]["size"])
                for records in checkpoint.mig_started.values()
                for r in records
                if r["pci_address"] == pci
            }
        return started | set(claimed_placements(claims).get(pci, [])), list(claims.values()), started

    def _sweep_gpu(self, pci: str, outcome: dict[str, list[str]], changed: dict[str, Any] | None = None) -> None:
        """One GPU of :meth:`_sweep_unknown`, under its lock; NVML's errors raise (nothing counts as absent)."""
        nvml = self.lib()
        with self.lock(pci):
            taken, claims, started = self._taken(pci, changed)
            handle = nvml.handle(pci)
            if not nvml.mig_mode(handle):
                self._mode_back_on(pci, handle, claims)
                return
            self.mode_retry.pop(pci, None)
            kept, before = [], self.kept.get(pci, [])
            for instance in nvml.instances(handle):
                if (instance.start, instance.size) in taken:
                    if (instance.start, instance.size) in started and at(
                        before, instance.start, instance.size, instance.profile
                    ):
                        kept.append(instance)  # a roll back kept it; its started record is being dropped
                    continue
                what = f"GPU {pci}: MIG {instance.profile} at memory slice {instance.start}"
                pids = nvml.processes(handle, instance.id)
                if pids:
                    LOG.warning("%s is held by no claim but runs process(es) %s: kept, not published", what, pids)
                    kept.append(instance)
                    outcome["kept"].append(f"{pci}/{instance.start}")
                    continue
                nvml.destroy(instance)
                LOG.info("%s was held by no claim: destroyed", what)
                outcome["destroyed"].append(f"{pci}/{instance.start}")
            self.kept[pci] = kept  # every instance of the GPU no claim holds that runs a process

    # -- each rescan ---------------------------------------------------------------------

    def sweep(self) -> list[str]:
        """Each rescan: what the start left to retry (module docstring); the ``<pci>/<start>`` destroyed."""
        if self.restore_pending:
            return self._restore_late()
        if self.nvml is None:
            return []  # NVML never loaded: nothing was done that needs a retry
        self._retry_roll_backs()
        if self.unrefreshed:
            self._retry_unrefreshed()
        done = self._retry_unswept()
        done += self._retry_kept()
        self._retry_mode()
        return done

    def refresh_claim(self, uid: str) -> str | None:
        """A committed claim the start could not find or make again (``unrefreshed``), tried again; the caller
        holds the claim's lock. None when done (or never pending), else why not (the kubelet retries)."""
        reason = self.unrefreshed.get(uid)
        if reason is None:
            return None
        checkpoint = self.driver.checkpoint
        entry = checkpoint.claims.get(uid)
        if entry is None:  # unprepared meanwhile
            self.unrefreshed.pop(uid, None)
            return None
        outcome: dict[str, list[str]] = {"rolled_back": [], "recreated": [], "destroyed": [], "kept": []}
        fresh = self._refresh(uid, entry, outcome)
        if uid in self.unrefreshed:
            since = "the reboot" if self.new_boot else "the driver's start"
            return f"its MIG instance is not found or made again since {since} yet ({self.unrefreshed[uid]})"
        with self.driver.state_lock:
            candidate = dict(checkpoint.claims, **({uid: fresh} if fresh is not None else {}))
            before = checkpoint.boot_id
            if not self.unrefreshed and self.boot:
                checkpoint.boot_id = self.boot
            try:
                checkpoint.save(candidate)
            except OSError as exc:
                checkpoint.boot_id = before
                self.unrefreshed[uid] = f"writing the checkpoint: {exc}"
                return f"its MIG instance is made again, but {self.unrefreshed[uid]}"
            checkpoint.claims = candidate
        LOG.info("MIG: claim %s: its instances are found again since the reboot", uid)
        return None

    def _retry_unrefreshed(self) -> None:
        """Each rescan: the claims left unrefreshed that no call works on, their CDI specs rewritten."""
        locks, done = self.driver.claim_locks, False
        for uid in sorted(self.unrefreshed):
            if not locks.acquire(uid, timeout=0):
                continue  # a Prepare or Unprepare of it decides
            try:
                done = self.refresh_claim(uid) is None or done
            finally:
                locks.release(uid)
        if done:
            self.driver.retry_restore()  # the specs with the instances' minors and MIG UUIDs of now

    def _restore_late(self) -> list[str]:
        """The start-up check that NVML's absence at start left pending, done once NVML loads (each rescan tries):
        committed claims' instances found or made again after a reboot, their CDI specs rewritten, leftovers
        swept, MIG mode turned on, the boot recorded. The ``<pci>/<start>`` destroyed."""
        try:
            self.lib()
        except PrepareError as exc:
            LOG.debug("MIG: the start-up check waits for NVML: %s", exc)
            return []
        LOG.info("MIG: NVML loads now: the start-up check of MIG instances is done")
        outcome = self.restore()
        self.driver.retry_restore()  # the CDI specs with the instances' minors and MIG UUIDs of now, as at start
        return outcome["destroyed"]

    def _retry_roll_backs(self) -> list[str]:
        """The started records (left by a crash or a failed roll back) of claims not committed that no call
        works on (a Prepare in flight holds its claim's lock): rolled back; the claims done."""
        checkpoint, locks = self.driver.checkpoint, self.driver.claim_locks
        done = []
        for uid in sorted(checkpoint.mig_started):
            if uid in checkpoint.claims or not locks.acquire(uid, timeout=0):
                continue
            try:
                if uid in checkpoint.mig_started and uid not in checkpoint.claims and self.roll_back(uid):
                    LOG.info("claim %s: its MIG roll back is done", uid)
                    done.append(uid)
            finally:
                locks.release(uid)
        return done

    def _retry_unswept(self) -> list[str]:
        outcome: dict[str, list[str]] = {"destroyed": [], "kept": []}
        for pci in sorted(self.unswept):
            try:
                self._sweep_gpu(pci, outcome)  # the claims are read under the GPU's lock, not before
            except Exception as exc:
                LOG.debug("MIG: GPU %s: its instances still cannot be checked: %s", pci, exc)
                continue
            self.unswept.discard(pci)
            LOG.info("MIG: GPU %s: its instances are checked", pci)
        if outcome["destroyed"] or outcome["kept"]:
            self._publish_held()
        return outcome["destroyed"]

    def _retry_kept(self) -> list[str]:
        """Destroy the kept instances whose processes ended; their ``<pci>/<start>``. A GPU's kept instances are
        read and written under its lock: one a roll back keeps meanwhile (under that lock) is never dropped."""
        if not self.kept:
            return []
        nvml = self.lib()
        done: list[str] = []
        for pci in sorted(self.kept):
            try:
                with self.lock(pci):
                    self._retry_kept_gpu(nvml, pci, done)
            except Exception as exc:  # the GPU's kept instances stay as they were
                LOG.error("MIG: GPU %s: the kept instances cannot be checked (retried): %s", pci, exc)
        self._publish_held()
        return done

    def _retry_kept_gpu(self, nvml: Nvml, pci: str, done: list[str]) -> None:
        """One GPU of :meth:`_retry_kept`; the caller holds its lock. An NVML error raises and leaves the GPU's
        kept instances as they were (one destroyed meanwhile is not found at the next try)."""
        taken, _claims, started = self._taken(pci)
        handle = nvml.handle(pci)
        now = nvml.instances(handle)
        left = []
        for old in self.kept.get(pci, []):
            instance = at(now, old.start, old.size, old.profile)
            if instance is None or (old.start, old.size) in taken - started:  # gone, or a claim's now
                continue
            if (old.start, old.size) in started:  # a roll back that kept it is dropping its record: kept
                left.append(instance)
                continue
            if nvml.processes(handle, instance.id):
                left.append(instance)
                continue
            nvml.destroy(instance)
            LOG.info("GPU %s: MIG %s at memory slice %s: its processes ended, destroyed", pci, old.profile, old.start)
            done.append(f"{pci}/{old.start}")
        if left:
            self.kept[pci] = left
        else:
            self.kept.pop(pci, None)

    def _retry_mode(self) -> None:
        """MIG mode back on for the dynamic GPUs where it was refused or failed, now that they may be idle."""
        nvml = self.lib()
        for pci in sorted(self.mode_retry):
            try:
                with self.lock(pci):
                    if pci in self._whole:
                        continue  # a Prepare of the GPU whole is in flight: it decides
                    try:
                        handle = nvml.handle(pci)
                    except Exception as exc:
                        if self._gone(nvml, pci, exc, lookup=True):
                            self.mode_retry.pop(pci, None)
                            continue
                        raise
                    self._mode_back_on(pci, handle, list(self.driver.checkpoint.claims.values()))
            except Exception as exc:
                reason = f"GPU {pci}: turning MIG mode back on failed ({exc}); tried again at each rescan"
                if self.mode_retry.get(pci) != reason:
                    LOG.warning("%s", reason)
                self.mode_retry[pci] = reason
