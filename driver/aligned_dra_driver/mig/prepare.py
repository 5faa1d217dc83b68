# SPDX-License-Identifier: Apache-2.0
"""MIG devices in the driver (``--mig=static|dynamic``): Prepare, Unprepare, and crash safety at start.

A MIG device is published (:mod:`aligned_dra_driver.mig.devices`) with the attributes ``kind`` ``mig``,
``profile``, ``placementStart``, ``placementSize`` and ``parentUUID``; the scan maps its name to the
parent GPU's topology entry. Its checkpoint record (``devices[i].mig``, see
:mod:`aligned_dra_driver.checkpoint`) names the profile, the placement, the GPU and compute instance
and the MIG UUID.

Prepare of a dynamic MIG device, in this order: the claim is recorded as started in the checkpoint
(``mig_started``), MIG mode is turned on where it is off (Hopper and newer only: an Ampere GPU needs a
reset, which the driver never does: the claim fails naming the GPU), the GPU instance is created at the
allocated placement (``nvmlDeviceCreateGpuInstanceWithPlacement``) and the compute instance that spans
it, then the driver writes the CDI spec and commits the claim, and the same checkpoint write drops the
started record. A claim that fails at any step is rolled back (its instances destroyed, MIG mode put
back) before the answer; a placement NVML refuses fails with a message naming the GPU and placement.
Unprepare destroys the compute and GPU instance; an instance a process runs on (NVML's ``IN_USE``) is
kept, and Unprepare fails (the kubelet retries) until the process ends. The GPU whole of a dynamic GPU
runs with MIG mode off: Prepare turns it off (Hopper and newer, no instance left) or fails naming the
instances. A static device is found (never created) and never destroyed.

At start (:meth:`MigPreparer.restore`, from ``Driver.restore``): the started records of claims that
were not committed are rolled back (the kubelet's retry prepares them again); each committed claim's
instance is found again, or, after a new boot (``<procfs>/sys/kernel/random/boot_id`` differs from the
checkpoint's: instances do not survive a reboot) or when it is missing, created again, and its CDI spec
rewritten with the nvidia-caps minors of now. An instance of a dynamic GPU that no committed claim holds
is destroyed when no process runs on it; one with a process is kept, logged as a warning, counted in
``aligned_dra_mig_kept_instances``, and :func:`held_placements` names its placement so that the
publishing leaves the devices over those memory slices out. Each rescan (:meth:`MigPreparer.sweep`)
destroys the kept ones whose processes ended.

NVML comes from :func:`aligned_dra_driver.usage.load_pynvml` (initialized on first use). Tests set
:attr:`MigPreparer.fault` to stop at a step (``STEPS``) as a crash would.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from ..collection import topology
from ..container_edits import PrepareError, mig_edits
from .nvml import Instance, Nvml, at, text
from ..usage import load_pynvml

LOG = logging.getLogger(__name__)

ATTRIBUTE_PREFIX = "dra.aligned.dev/"
NVIDIA = "0x10de"
HOPPER = 9  # NVML_DEVICE_ARCH_HOPPER: MIG mode changes without a reset from here on
ARCHITECTURES = {7: "Ampere", 8: "Ada", 9: "Hopper", 10: "Blackwell"}
STEPS = ("started", "mig-mode", "gpu-instance", "compute-instance", "cdi-spec")

_HELD: dict[str, list[tuple[int, int]]] = {}  # PCI address -> placements kept with a process (replaced whole)


def held_placements() -> dict[str, list[tuple[int, int]]]:
    """``{pci_address: [(start, size)]}``: instances no claim holds that a process keeps (not to publish)."""
    return {pci: list(placements) for pci, placements in _HELD.items()}


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


def attribute(device: dict[str, Any] | None, name: str) -> Any:
    """A published device's ``dra.aligned.dev/<name>`` value (``{"string": v}`` → v), or None."""
    value = ((device or {}).get("attributes") or {}).get(ATTRIBUTE_PREFIX + name)
    if not isinstance(value, dict) or len(value) != 1:
        return None
    return next(iter(value.values()))


def is_mig(device: dict[str, Any] | None) -> bool:
    return attribute(device, "kind") == "mig"


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


class MigPreparer:
    """The MIG side of one :class:`~aligned_dra_driver.driver.Driver`."""

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
            gauge.set(sum(len(v) for v in self.kept.values()))

    def _publish_held(self) -> None:
        global _HELD
        _HELD = {pci: [(i.start, i.size) for i in kept] for pci, kept in self.kept.items() if kept}
        self._metric()

    # -- Prepare -----------------------------------------------------------------------

    def prepare(
        self, uid: str, topo: dict[str, Any], inventory: Any, name: str
    ) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """A GPU result: a MIG device's record and edits; None for a GPU whole (MIG mode off where dynamic)."""
        device = next((d for d in inventory.devices if d.get("name") == name), None)
        if is_mig(device):
            return self.prepare_device(uid, topo, device)  # type: ignore[arg-type]
        self.prepare_whole(topo["pci_address"])
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
        with self.lock(pci):
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
        self._mig_mode_on(pci, handle)
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

    def _mig_mode_on(self, pci: str, handle: Any) -> None:
        nvml = self.lib()
        if nvml.mig_mode(handle):
            return
        arch = nvml.architecture(handle)
        name = ARCHITECTURES.get(arch, f"architecture {arch}")
        if arch < HOPPER:
            raise PrepareError(
                f"GPU {pci} ({name}) has MIG mode off: the driver never turns it on below Hopper (it needs a GPU "
                "reset); turn it on with the role aligned.dra.mig"
            )
        try:
            nvml.lib.nvmlDeviceSetMigMode(handle, 1)
        except Exception as exc:
            raise PrepareError(f"GPU {pci}: turning MIG mode on failed (NVML: {exc})") from exc
        if not nvml.mig_mode(handle):
            raise PrepareError(f"GPU {pci}: MIG mode is still off after turning it on")
        LOG.info("GPU %s: MIG mode turned on", pci)

    def prepare_whole(self, pci: str) -> None:
        """The GPU whole of a dynamic GPU runs with MIG mode off (turned off where it may be)."""
        if self.mode != "dynamic" or not self.manages(pci):
            return
        nvml = self.lib()
        with self.lock(pci):
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
                nvml.lib.nvmlDeviceSetMigMode(handle, 0)
            except Exception as exc:
                raise PrepareError(f"GPU {pci}: turning MIG mode off failed (NVML: {exc})") from exc
            LOG.info("GPU %s: MIG mode turned off for the GPU whole", pci)

    def settle(self, answers: dict[str, dict[str, Any]]) -> None:
        """After a Prepare call (claim locks held): roll back the claims that failed, forget the committed."""
        checkpoint = self.driver.checkpoint
        for uid in list(checkpoint.mig_started):
            if uid in checkpoint.claims:
                with self.driver.state_lock:  # the commit's write already left its record out
                    checkpoint.mig_started = {u: r for u, r in checkpoint.mig_started.items() if u != uid}
            elif "error" in answers.get(uid, {}):
                self.roll_back(uid)

    def roll_back(self, uid: str) -> bool:
        """Destroy what a started claim created; its started record goes once nothing is left. True: done."""
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
        """Destroy the instance at a started record's placement (none there: done). False: kept."""
        pci, place = record["pci_address"], record["placement"]
        try:
            nvml = self.lib()
            with self.lock(pci):
                handle = nvml.handle(pci)
                if not nvml.mig_mode(handle):
                    return True
                found = at(nvml.instances(handle), place["start"], place["size"], record["profile"])
                if found is None:
                    return True
                pids = nvml.processes(handle, found.id)
                if pids:
                    LOG.warning("GPU %s: MIG instance %s runs process(es) %s: kept", pci, found.id, pids)
                    self.kept.setdefault(pci, []).append(found)
                    self._publish_held()
                    return True
                nvml.destroy(found)
                LOG.info("GPU %s: rolled back MIG %s at memory slice %s", pci, found.profile, found.start)
        except Exception as exc:
            LOG.error("GPU %s: rolling back MIG %s at memory slice %s failed: %s", pci, record["profile"], place, exc)
            return False
        return True

    # -- Unprepare ---------------------------------------------------------------------

    def _mode_back_on(self, pci: str, handle: Any, claims: list[dict[str, Any]]) -> None:
        """A dynamic GPU whose whole no claim holds goes back to MIG mode (Hopper and newer), so that its MIG
        devices are published again; a failure is logged (a process on the GPU: tried again at the next start)."""
        nvml = self.lib()
        if self.mode != "dynamic" or nvml.mig_mode(handle) is not False or nvml.architecture(handle) < HOPPER:
            return
        if any(d["pci_address"] == pci and "mig" not in d and d["kind"] == "gpu" for e in claims for d in e["devices"]):
            return
        try:
            nvml.lib.nvmlDeviceSetMigMode(handle, 1)
        except Exception as exc:
            LOG.warning("GPU %s: turning MIG mode back on failed: %s", pci, exc)
            return
        LOG.info("GPU %s: MIG mode back on (no claim holds the GPU whole)", pci)

    def unprepare(self, entry: dict[str, Any] | None) -> None:
        """Destroy a claim's dynamic MIG instances; raises PrepareError (the claim stays) while one is in use.
        A dynamic GPU whole goes back to MIG mode."""
        for device in (entry or {}).get("devices") or []:
            if device["kind"] == "gpu" and "mig" not in device and self.mode == "dynamic":
                if self.manages(device["pci_address"]):
                    others = [e for e in self.driver.checkpoint.claims.values() if e is not entry]
                    with self.lock(device["pci_address"]):
                        self._mode_back_on(device["pci_address"], self.lib().handle(device["pci_address"]), others)
            mig = device.get("mig")
            if not isinstance(mig, dict) or mig.get("mode") != "dynamic":
                continue  # a static instance is never destroyed
            pci, place = device["pci_address"], mig["placement"]
            nvml = self.lib()
            with self.lock(pci):
                try:
                    handle = nvml.handle(pci)
                    found = at(nvml.instances(handle), place["start"], place["size"], mig["profile"])
                except Exception as exc:
                    if not (nvml.is_error(exc, "GPU_IS_LOST") or nvml.is_error(exc, "NOT_FOUND")):
                        raise
                    LOG.warning("GPU %s is gone (%s): its MIG instance went with it", pci, exc)
                    continue
                if found is None:
                    continue  # destroyed by an earlier try, or by a reboot
                try:
                    nvml.destroy(found)
                except Exception as exc:
                    if nvml.is_error(exc, "IN_USE"):
                        pids = nvml.processes(handle, found.id)
                        raise PrepareError(
                            f"GPU {pci}: MIG {mig['profile']} at memory slice {place['start']} (GPU instance "
                            f"{found.id}) still runs process(es) {pids or '?'}: kept until they end"
                        ) from exc
                    raise

    # -- start-up ----------------------------------------------------------------------

    def restore(self) -> dict[str, list[str]]:
        """Crash safety at start (module docstring); what it did: rolled back, recreated, destroyed, kept."""
        outcome: dict[str, list[str]] = {"rolled_back": [], "recreated": [], "destroyed": [], "kept": []}
        checkpoint = self.driver.checkpoint
        try:
            self.lib()
        except PrepareError as exc:
            LOG.error("MIG: %s; instances left by an earlier run are not checked", exc)
            return outcome
        boot = read_boot_id(self.opts.procfs_root)
        new_boot = boot is not None and checkpoint.boot_id is not None and boot != checkpoint.boot_id
        self.new_boot = new_boot
        if new_boot:
            LOG.info("MIG: a new boot since the last run: the prepared claims' instances are created again")
        for uid in sorted(checkpoint.mig_started):
            if uid not in checkpoint.claims and self.roll_back(uid):
                outcome["rolled_back"].append(uid)
        claims = dict(checkpoint.claims)
        changed: dict[str, dict[str, Any]] = {}
        for uid, entry in sorted(claims.items()):
            fresh = self._refresh(uid, entry, outcome)
            if fresh is not None:
                changed[uid] = fresh
        if self.mode == "dynamic":
            self._sweep_unknown(outcome, dict(checkpoint.claims, **changed))
        with self.driver.state_lock:
            candidate = dict(checkpoint.claims, **changed)
            before = checkpoint.boot_id
            checkpoint.mig_started = {u: r for u, r in checkpoint.mig_started.items() if u not in candidate}
            checkpoint.boot_id = boot or before
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
        for device in entry["devices"]:
            mig = device.get("mig")
            if not isinstance(mig, dict) or not self.manages(device["pci_address"]):
                devices.append(device)
                continue
            try:
                fresh, topo = self._find_again(uid, device, outcome)
                edits = mig_edits(self.opts, topo, fresh)
            except Exception as exc:  # the claim stays prepared as it was; its pod sees what NVML left
                LOG.error("MIG: claim %s: %s cannot be found or created again: %s", uid, device["device"], exc)
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
            minor = int(nvml.lib.nvmlDeviceGetMinorNumber(handle))
            topo = {"pci_address": pci, "gpu": {"minor": minor, "uuid": text(nvml.lib.nvmlDeviceGetUUID(handle))}}
            if mig["mode"] == "dynamic" and self.new_boot:
                self._mig_mode_on(pci, handle)
            found = at(nvml.instances(handle) if nvml.mig_mode(handle) else [], place["start"], place["size"])
            if found is None and (mig["mode"] == "static" or not self.new_boot):
                # in the same boot: an Unprepare cut short after the destroy, or destroyed by hand; its slices
                # may be allocated again already, so it is not made again
                raise PrepareError(
                    f"its {mig['mode']} instance {mig['profile']} at memory slice {place['start']} is gone in this "
                    "boot: not made again (the kubelet's Unprepare removes the claim)"
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

    def _sweep_unknown(self, outcome: dict[str, list[str]], claims: dict[str, Any]) -> None:
        """Destroy the idle instances of the dynamic GPUs that no claim holds; keep (and name) those in use."""
        nvml = self.lib()
        held = claimed_placements(claims)
        started = {
            (r["pci_address"], r["placement"]["start"], r["placement"]["size"])
            for records in self.driver.checkpoint.mig_started.values()
            for r in records
        }
        self.kept = {}
        for pci in nvidia_gpus(self.opts.sysfs_root, self.opts.procfs_root):
            if not self.manages(pci):
                continue
            try:
                with self.lock(pci):
                    handle = nvml.handle(pci)
                    if not nvml.mig_mode(handle):
                        self._mode_back_on(pci, handle, list(claims.values()))
                        continue
                    for instance in nvml.instances(handle):
                        place = (instance.start, instance.size)
                        if place in held.get(pci, []) or (pci, *place) in started:
                            continue
                        what = f"GPU {pci}: MIG {instance.profile} at memory slice {instance.start}"
                        pids = nvml.processes(handle, instance.id)
                        if pids:
                            LOG.warning(
                                "%s is held by no claim but runs process(es) %s: kept, not published", what, pids
                            )
                            self.kept.setdefault(pci, []).append(instance)
                            outcome["kept"].append(f"{pci}/{instance.start}")
                            continue
                        nvml.destroy(instance)
                        LOG.info("%s was held by no claim: destroyed", what)
                        outcome["destroyed"].append(f"{pci}/{instance.start}")
            except Exception as exc:
                LOG.error("MIG: checking the instances of GPU %s failed: %s", pci, exc)
        self._publish_held()

    def sweep(self) -> list[str]:
        """Destroy the kept instances whose processes ended (each rescan); their ``<pci>/<start>``."""
        if not self.kept or self.nvml is None:
            return []
        done = []
        nvml = self.nvml
        held = claimed_placements(self.driver.checkpoint.claims)
        for pci, kept in sorted(self.kept.items()):
            left = []
            try:
                with self.lock(pci):
                    handle = nvml.handle(pci)
                    now = nvml.instances(handle)
                    for old in kept:
                        instance = at(now, old.start, old.size, old.profile)
                        if instance is None or (old.start, old.size) in held.get(pci, []):
                            continue
                        if nvml.processes(handle, instance.id):
                            left.append(instance)
                            continue
                        nvml.destroy(instance)
                        LOG.info(
                            "GPU %s: MIG %s at memory slice %s: its processes ended, destroyed",
                            pci,
                            old.profile,
                            old.start,
                        )
                        done.append(f"{pci}/{old.start}")
            except Exception as exc:
                LOG.error("MIG: GPU %s: the kept instances cannot be checked (retried): %s", pci, exc)
                left = kept
            self.kept[pci] = left
        self.kept = {pci: kept for pci, kept in self.kept.items() if kept}
        self._publish_held()
        return done
