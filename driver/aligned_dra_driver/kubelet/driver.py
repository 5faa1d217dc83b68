# SPDX-License-Identifier: Apache-2.0
"""The driver's state: Prepare, Unprepare, and the start-up restore.

Prepare follows the kubelet plugin contract: fetch the ResourceClaim, check
its UID and allocation, use only the results of this driver, apply class then
claim configuration, write one CDI spec per claim, checkpoint, answer every
claim. The order of writes makes every claim either fully prepared or absent
after a crash at any point (see :mod:`aligned_dra_driver.claims.checkpoint`).

Concurrency: calls are serialized per claim UID, never by one global lock; no
lock is held across a network call except the claim's own (a call waits for
another call on the *same* claim at most until its budget runs out). The
checkpoint is written under a short state lock: a call writes the committed
claims plus its own, and memory changes only after the write succeeded.
Claim status writes go to a background queue (:mod:`aligned_dra_driver.claims.status`)
and are never part of an answer.

The node's devices come from :mod:`aligned_dra_driver.devices.inventory`, the CDI
container edits of each prepared device from
:mod:`aligned_dra_driver.claims.container_edits`, the per-claim locks from
:mod:`aligned_dra_driver.claims.locks`, a fractional GPU's request and limit
(recorded in the checkpoint and the claim's status) from
:mod:`aligned_dra_driver.sharing.limits`. With ``--mig``, MIG devices' instances
(made at Prepare, destroyed at Unprepare, checked at start) come from
:mod:`aligned_dra_driver.mig.prepare`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from .. import config
from ..claims import cdi
from ..claims.checkpoint import Checkpoint
from ..claims.container_edits import PrepareError, gpu_edits, nic_edits
from ..claims.locks import ClaimLocks
from ..claims.pods import ClaimPods, reserved_pods
from ..collection import dra
from ..devices.inventory import Inventory, Options, scan
from ..mig.prepare import MigPreparer
from ..network.interfaces import netdevs_of, restore_name
from ..sharing.fractional import SharingError
from ..sharing.limits import checked_share
from ..validation import claim_ref_problem, is_dns_label, is_uid, show

LOG = logging.getLogger(__name__)

GPU_KINDS = ("gpu", "accelerator")
MAX_RESULTS = dra.LIMITS["allocation_max_devices"]  # AllocationResultsMaxSize


def _request_name_ok(request: str) -> bool:
    """A result's request: ``name`` or ``name/subrequest`` (firstAvailable), each a DNS label; or empty."""
    return request == "" or all(is_dns_label(part) for part in request.split("/", 1))


def _unique_sorted(claims: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Each UID once (a UID named twice: its first entry decides), in UID order.

    Claim locks are taken in this order, so two calls sharing claims never wait on each other in a cycle.
    """
    unique: dict[Any, tuple[str, str, str]] = {}
    for namespace, uid, name in claims:
        unique.setdefault(uid, (namespace, uid, name))
    return [unique[uid] for uid in sorted(unique, key=str)]


class Driver:
    """Prepare/Unprepare and the checkpoint, safe to call from several gRPC threads."""

    def __init__(
        self, opts: Options, kube: Any | None, metrics: Any | None = None, status_queue: Any | None = None
    ) -> None:
        self.opts = opts
        self.kube = kube
        self.metrics = metrics
        self.status = status_queue
        self.claim_locks = ClaimLocks()
        # guards the committed claims and the checkpoint file; never held across a network call
        self.state_lock = threading.Lock()
        self.checkpoint = Checkpoint(opts.state_dir, opts.driver_name, opts.node_name, opts.durable_checkpoint)
        self.vendor = cdi.VendorSpecs(opts.vendor_cdi_dirs)
        self.inventory = Inventory([], {}, {}, False)
        # CDI specs that could not be written or removed on start: {uid: error}, retried by retry_restore
        self.restore_pending: dict[str, str] = {}
        # serializes putting back the NICs of checkpoint.returning (the scan thread and Prepare)
        self.returns_lock = threading.Lock()
        self.remove_unknown_specs = True  # off when the CDI directory could not be listed at start
        # the pods of each prepared claim (status.reservedFor as Prepare read it): the GPU watcher's, no API cost
        self.claim_pods = ClaimPods()
        self.mig = MigPreparer(self) if opts.mig != "off" else None  # --mig=static|dynamic
        if self.mig is not None and opts.mig_scanner is None:  # what each scan publishes in the MIG GPUs' place
            from ..mig.devices import MigScanner
            from ..mig.prepare import held_placements

            opts.mig_scanner = MigScanner(
                opts.mig,
                opts.mig_gpus,
                opts.state_dir,
                busy=self._holds,
                held=held_placements,
                lock=self.mig.lock,  # a scan reads a GPU only between its Prepares and Unprepares
                metrics=metrics,
            )

    # -- start-up ------------------------------------------------------------------

    def restore(self) -> dict[str, list[str]]:
        """Load the checkpoint, rewrite the CDI specs of prepared claims, remove the others.

        A checkpoint that cannot be trusted raises CheckpointError (the caller exits 2);
        a CDI directory that cannot be written is not fatal: the affected claims are
        kept in ``restore_pending`` and retried (:meth:`retry_restore`).
        """
        with self.state_lock:
            try:
                own = cdi.claim_specs(self.opts.cdi_dir, driver_name=self.opts.driver_name)
            except OSError as exc:
                # specs that could not be seen cannot be weighed against the checkpoint: never remove any
                own = {}
                self.remove_unknown_specs = False
                LOG.error("listing %s failed (%s): specs of unknown claims are kept", self.opts.cdi_dir, exc)
            self.checkpoint.check_writable()
            self.checkpoint.remove_stale_temporary()
            self.checkpoint.claims = self.checkpoint.load(own_spec_uids=list(own))
            if not os.path.lexists(self.checkpoint.path):
                try:  # a first start leaves an empty checkpoint: the sriov module reads it (docs/network.md)
                    self.checkpoint.save({})
                except OSError as exc:  # a full disk is no reason not to start
                    LOG.warning("writing an empty checkpoint %s failed: %s", self.checkpoint.path, exc)
            self._stop_orphan_mps()
            if self.metrics is not None:
                self.metrics.prepared_claims.set(len(self.checkpoint.claims))
        if self.mig is not None:  # before the specs are rewritten: a recreated instance has new nvidia-caps minors
            self.mig.restore()
        outcome = self.retry_restore(own)
        return outcome

    def retry_restore(self, own: dict[str, str] | None = None) -> dict[str, list[str]]:
        """(Re)write the specs of checkpointed claims, remove specs of claims not checkpointed."""
        rewritten: list[str] = []
        removed: list[str] = []
        pending: dict[str, str] = {}
        claims = self.checkpoint.claims
        try:
            if own is None:
                own = cdi.claim_specs(self.opts.cdi_dir, driver_name=self.opts.driver_name)
            removed.extend(cdi.remove_temporary(self.opts.cdi_dir, driver_name=self.opts.driver_name))
        except OSError as exc:
            own = own or {}
            pending["*"] = f"{self.opts.cdi_dir}: {exc}"
        for uid, entry in claims.items():
            if not self.claim_locks.acquire(uid, timeout=0):
                continue  # a call works on it right now and decides itself
            try:
                spec = entry.get("cdi_spec")
                if spec and cdi.read_spec(self.opts.cdi_dir, uid, driver_name=self.opts.driver_name) != spec:
                    cdi.write_spec(self.opts.cdi_dir, uid, spec, driver_name=self.opts.driver_name)
                    rewritten.append(uid)
            except OSError as exc:
                pending[uid] = f"writing its CDI spec: {exc}"
            finally:
                self.claim_locks.release(uid)
        for uid, path in own.items() if self.remove_unknown_specs else ():
            if uid in self.checkpoint.claims or not self.claim_locks.acquire(uid, timeout=0):
                continue
            try:
                if cdi.remove_spec(self.opts.cdi_dir, uid, driver_name=self.opts.driver_name):
                    removed.append(path)
            except OSError as exc:
                pending[uid] = f"removing its stale CDI spec: {exc}"
            finally:
                self.claim_locks.release(uid)
        was = set(self.restore_pending)
        self.restore_pending = pending
        for uid, why in sorted(pending.items()):
            if uid not in was:
                LOG.error("CDI restore of claim %s failed (retried): %s", uid, why)
        for uid in sorted(was - set(pending)):
            LOG.info("CDI restore of claim %s done", uid)
        if self.metrics is not None:
            self.metrics.restore_pending.set(len(pending))
        if rewritten or removed:
            LOG.info("restored CDI specs of %d claim(s), removed %d stale file(s)", len(rewritten), len(removed))
        return {"rewritten": rewritten, "removed": removed, "pending": sorted(pending)}

    def rescan(self) -> bool:
        """Probe again; True when the published devices changed. NICs back from a pod get their state back."""
        if self.mig is not None:
            self.mig.sweep()  # instances kept at start whose processes ended: destroyed, published again
        inventory = scan(self.opts)
        changed = inventory.devices != self.inventory.devices or inventory.counter_sets != self.inventory.counter_sets
        self.inventory = inventory
        if self.checkpoint.returning:
            self.finish_returns()
        return changed

    def _holds(self, pci_address: str) -> bool:
        """Whether a prepared claim holds a device of the PCI function (a MIG GPU's layout waits for it)."""
        claims = list(self.checkpoint.claims.values())
        return any(d.get("pci_address") == pci_address for c in claims for d in c.get("devices") or [])

    # -- NICs back from a pod ------------------------------------------------------------

    def _restore_nic(self, pci_address: str, netdev: dict[str, Any]) -> str:
        """Name, MTU, state, addresses and routes of a NIC back on the host (netdev.restore_name's outcome)."""
        # entries written before the state and addresses were recorded have neither
        return restore_name(
            self.opts.sysfs_root,
            pci_address,
            netdev["original_name"],
            netdev.get("original_mtu"),
            up=netdev.get("original_up"),
            records={
                "addresses": netdev.get("original_addresses") or [],
                "routes": netdev.get("original_routes") or [],
            },
        )

    def _pci_present(self, pci_address: str) -> bool:
        return os.path.isdir(os.path.join(self.opts.sysfs_root, "bus", "pci", "devices", pci_address))

    def _in_a_pod(self, pci_address: str) -> bool:
        """The PCI function is on the node, and none of its interfaces is in the host namespace (sysfs lists none)."""
        return self._pci_present(pci_address) and not netdevs_of(self.opts.sysfs_root, pci_address)

    def finish_returns(self) -> list[str]:
        """Put back the NICs unprepared while still in a pod's namespace that are on the host now; their addresses.

        The kernel moves a NIC back when the pod's namespace is destroyed, which may come after
        Unprepare. One whose PCI function is gone is dropped; a failure is logged and retried.
        """
        done: list[str] = []
        with self.returns_lock:
            for pci_address, netdev in sorted(self.checkpoint.returning.items()):
                if not self._pci_present(pci_address):
                    LOG.warning("%s is no longer on this node: its host settings are dropped", pci_address)
                    done.append(pci_address)
                    continue
                try:
                    outcome = self._restore_nic(pci_address, netdev)
                except Exception as exc:  # netlink errors carry their own type; retried on the next scan
                    LOG.error("putting %s back on the host failed (retried): %s", pci_address, exc)
                    continue
                if outcome != "absent":
                    LOG.info("%s is back on the host: %s, with its addresses and routes", pci_address, outcome)
                    done.append(pci_address)
            if done:
                error = self._commit(returned=done)
                if error:
                    return []
        return done

    # -- shared by Prepare and Unprepare -----------------------------------------------

    def _deadline(self, budget: float | None) -> float:
        seconds = self.opts.call_budget if budget is None else min(self.opts.call_budget, budget)
        return time.monotonic() + max(seconds, 0.0)

    # -- Prepare ---------------------------------------------------------------------

    def prepare(self, claims: list[tuple[str, str, str]], budget: float | None = None) -> dict[str, dict[str, Any]]:
        """Prepare claims given as (namespace, uid, name); returns ``{uid: {"devices": [...]} | {"error": ...}}``.

        ``budget``: seconds the caller still has (the kubelet's deadline); the call answers
        within ``min(budget, call_budget)`` plus the checkpoint write.
        """
        deadline = self._deadline(budget)
        answers: dict[str, dict[str, Any]] = {}
        fresh: dict[str, dict[str, Any]] = {}
        fresh_pods: dict[str, list[tuple[str, str]]] = {}
        statuses: list[tuple[str, str, str, list[dict[str, Any]]]] = []
        held: list[str] = []
        try:
            for namespace, uid, name in _unique_sorted(claims):
                started = time.perf_counter()
                problem = claim_ref_problem(namespace, uid, name)
                if problem:  # never reaches the API, a file name or the checkpoint
                    answers[uid] = {"error": f"refused: {problem}"}
                    self._count("prepare", "error", started)
                    continue
                where = f"claim {namespace}/{name} ({uid})"
                if not self.claim_locks.acquire(uid, deadline - time.monotonic()):
                    answers[uid] = {"error": f"{where}: another call on this claim did not finish within the budget"}
                    self._count("prepare", "error", started)
                    continue
                held.append(uid)
                entry = self.checkpoint.claims.get(uid)
                if entry is not None:  # prepared before: the same answer (its spec rewritten if it was lost)
                    error = self.mig.refresh_claim(uid) if self.mig is not None else None
                    entry = self.checkpoint.claims.get(uid, entry)  # its instance made again since a reboot
                    error = error or self._ensure_spec(uid, entry)
                    answers[uid] = {"error": f"{where}: {error}"} if error else {"devices": entry["devices"]}
                    continue
                if time.monotonic() >= deadline:
                    answers[uid] = {"error": f"{where}: not reached within the call's budget; the kubelet retries"}
                    self._count("prepare", "error", started)
                    continue
                try:
                    claim = self._fetch_claim(namespace, uid, name, deadline)
                    entry, status = self._plan(namespace, uid, name, claim)
                    cdi.write_spec(self.opts.cdi_dir, uid, entry["cdi_spec"], driver_name=self.opts.driver_name)
                except OSError as exc:
                    # a spec half-way in place is not left behind
                    cdi.remove_spec_quietly(self.opts.cdi_dir, uid, driver_name=self.opts.driver_name)
                    answers[uid] = {"error": f"{where}: writing the CDI spec in {self.opts.cdi_dir}: {exc}"}
                    self._count("prepare", "error", started)
                    continue
                except (PrepareError, config.ConfigError, SharingError, ValueError) as exc:
                    answers[uid] = {"error": f"{where}: {exc}"}
                    self._count("prepare", "error", started)
                    continue
                except Exception as exc:  # a bug must fail this claim, not the kubelet's whole call
                    LOG.exception("preparing claim %s/%s (%s) failed", namespace, name, uid)
                    answers[uid] = {"error": f"{where}: internal error: {show(exc, 200)}"}
                    self._count("prepare", "error", started)
                    continue
                fresh[uid] = entry
                fresh_pods[uid] = reserved_pods(claim)
                answers[uid] = {"devices": entry["devices"]}
                statuses.append((namespace, name, uid, status))
                self._count("prepare", "ok", started)
            if fresh:
                error = self._commit(add=fresh)
                if error:
                    for uid in fresh:
                        cdi.remove_spec_quietly(self.opts.cdi_dir, uid, driver_name=self.opts.driver_name)
                        answers[uid] = {"error": f"claim {uid} not prepared: {error}"}
                    statuses = []
                    fresh_pods = {}
            for uid, pods in fresh_pods.items():
                self.claim_pods.set(uid, pods)
            if self.mig is not None:  # MIG instances of the claims that failed are destroyed
                self.mig.settle(answers)
            if self.status is not None:
                # queued while the claims are still held: a later Unprepare's clear comes after this apply
                for namespace, name, uid, status in statuses:
                    self.status.apply(namespace, name, uid, status)
        finally:
            for uid in held:
                self.claim_locks.release(uid)
        return answers

    def _commit(
        self,
        add: dict[str, dict[str, Any]] | None = None,
        remove: list[str] | None = None,
        returning: dict[str, dict[str, Any]] | None = None,
        returned: list[str] | None = None,
    ) -> str | None:
        """Write the committed claims with ``add`` and without ``remove``, the NICs still to come back from a pod
        with ``returning`` and without ``returned``; memory follows only a good write.

        Returns None, or the error (the checkpoint on disk and in memory are unchanged).
        """
        with self.state_lock:
            candidate = dict(self.checkpoint.claims)
            candidate.update(add or {})
            for uid in remove or []:
                candidate.pop(uid, None)
            coming = dict(self.checkpoint.returning)
            coming.update(returning or {})
            for pci_address in returned or []:
                coming.pop(pci_address, None)
            try:
                self.checkpoint.save(candidate, coming)
            except OSError as exc:
                LOG.error("writing the checkpoint %s failed: %s", self.checkpoint.path, exc)
                if self.metrics is not None:
                    self.metrics.errors.labels(operation="checkpoint").inc()
                return f"writing the checkpoint {self.checkpoint.path}: {exc}"
            self.checkpoint.claims = candidate  # replaced whole: readers without the lock see one version
            self.checkpoint.returning = coming
            if self.metrics is not None:
                self.metrics.prepared_claims.set(len(candidate))
        return None

    def _ensure_spec(self, uid: str, entry: dict[str, Any]) -> str | None:
        """Rewrite a checkpointed claim's CDI spec when it is missing or differs; the error, or None."""
        spec = entry.get("cdi_spec")
        try:
            if spec and cdi.read_spec(self.opts.cdi_dir, uid, driver_name=self.opts.driver_name) != spec:
                cdi.write_spec(self.opts.cdi_dir, uid, spec, driver_name=self.opts.driver_name)
        except OSError as exc:
            self.restore_pending[uid] = f"writing its CDI spec: {exc}"
            return f"prepared, but its CDI spec cannot be written in {self.opts.cdi_dir}: {exc}"
        self.restore_pending.pop(uid, None)
        return None

    def _count(self, op: str, result: str, started: float) -> None:
        if self.metrics is not None:
            self.metrics.observe(op, result, time.perf_counter() - started)

    def _fetch_claim(self, namespace: str, uid: str, name: str, deadline: float | None = None) -> dict[str, Any]:
        if self.kube is None:
            raise PrepareError("no Kubernetes API configured")
        from ..kube import ApiError

        try:
            claim = self.kube.get_claim(namespace, name, deadline=deadline)
        except ApiError as exc:
            raise PrepareError(f"reading the ResourceClaim failed: {exc}") from exc
        if not isinstance(claim, dict):
            raise PrepareError("the API server's answer is not an object")
        metadata = claim.get("metadata")
        actual = metadata.get("uid") if isinstance(metadata, dict) else None
        if actual != uid:
            raise PrepareError(f"the ResourceClaim {namespace}/{name} now has UID {show(actual)}, not {uid}")
        status = claim.get("status")
        allocation = status.get("allocation") if isinstance(status, dict) else None
        if not allocation:
            raise PrepareError("the ResourceClaim is not allocated")
        if not isinstance(allocation, dict):
            raise PrepareError("status.allocation is not an object")
        devices = allocation.get("devices")
        if devices is not None and not isinstance(devices, dict):
            raise PrepareError("status.allocation.devices is not an object")
        results = (devices or {}).get("results")
        if results is not None and not isinstance(results, list):
            raise PrepareError("status.allocation.devices.results is not a list")
        return claim

    def _plan(
        self, namespace: str, uid: str, name: str, claim: dict[str, Any]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """Everything Prepare does for one claim, as data: checkpoint entry and claim status."""
        allocation = claim["status"]["allocation"]
        devices_alloc = allocation.get("devices") or {}
        configs = devices_alloc.get("config") or []
        results = devices_alloc.get("results") or []
        if not all(isinstance(r, dict) for r in results):
            raise PrepareError("status.allocation.devices.results has an entry that is not an object")
        if len(results) > MAX_RESULTS:
            raise PrepareError(
                f"status.allocation.devices.results has {len(results)} entries; the API allows {MAX_RESULTS}"
            )
        ours = [r for r in results if r.get("driver") == self.opts.driver_name]
        if not ours:
            raise PrepareError(f"no device of driver {self.opts.driver_name} is allocated to this claim")
        seen: dict[Any, int] = {}
        for index, result in enumerate(ours):
            key = (str(result.get("pool")), str(result.get("device")), str(result.get("shareID")))
            if key in seen:
                raise PrepareError(
                    f"device {show(result.get('device'))} is allocated twice (results of this driver "
                    f"{seen[key]} and {index}); refused"
                )
            seen[key] = index
        inventory = self.inventory
        cdi_devices: list[dict[str, Any]] = []
        answer: list[dict[str, Any]] = []
        status: list[dict[str, Any]] = []
        interface_names: dict[str, str] = {}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        for index, result in enumerate(ours):
            pool, device_name, request = result.get("pool"), result.get("device"), result.get("request", "")
            if pool != self.opts.node_name:
                raise PrepareError(f"device {show(device_name)} comes from pool {show(pool)}, not this node's")
            topo = inventory.by_name.get(device_name) if isinstance(device_name, str) else None
            if topo is None:
                raise PrepareError(f"device {show(device_name)} is not on this node (any more)")
            if not isinstance(request, str) or not _request_name_ok(request):
                raise PrepareError(f"results[{index}].request {show(request)} is not a request name")
            kind = device_name.split("-", 1)[0]
            kind = {"acc": "accelerator"}.get(kind, kind)
            cfg = config.effective(configs, self.opts.driver_name, request, kind)
            share_id = result.get("shareID")
            if share_id is not None and not is_uid(share_id):
                raise PrepareError(f"results[{index}].shareID {show(share_id)} is not a UID")
            suffix = f"-{share_id}" if share_id else ""
            cdi_name = cdi.cdi_device_name(uid, device_name + suffix)
            ids = [cdi.qualified(cdi_name)]
            record: dict[str, Any] = {
                "pool": pool,
                "device": device_name,
                "request_names": [request] if request else [],
                "pci_address": topo["pci_address"],
                "kind": kind,
                "share_id": share_id,
            }
            entry_status: dict[str, Any] = {
                "driver": self.opts.driver_name,
                "pool": pool,
                "device": device_name,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "lastTransitionTime": now,
                        "reason": "Prepared",
                        "message": f"prepared on {self.opts.node_name}",
                    }
                ],
            }
            if share_id:
                entry_status["shareID"] = share_id
            mig = self.mig.prepare(uid, topo, inventory, device_name) if self.mig and kind in GPU_KINDS else None
            if mig is not None:  # a MIG device (created in dynamic mode); a GPU whole: MIG mode off
                record["mig"], edits = mig
            elif kind in GPU_KINDS:
                published = next((d for d in inventory.devices if d.get("name") == device_name), None)
                at = f"results[{index}] (request {request!r}, device {device_name})"
                share = checked_share(result, cfg, published, at, f"claim {namespace}/{name} ({uid})", claim)
                edits = gpu_edits(self.opts, topo, uid, result, cfg, claim)
                if "ALIGNED_DRA_GPU_SHARING=MPS" in edits["env"]:
                    record["mps"] = True
                if share is not None:  # thin provisioning: what is guaranteed and what may be used
                    record["share"] = entry_status["data"] = share
                vendor = self.vendor.lookup((topo.get("gpu") or {}).get("uuid"), topo["pci_address"])
                if vendor:
                    ids.append(vendor)
            else:
                if (
                    topo["pci_address"] in self.checkpoint.returning
                    and topo["pci_address"] not in self.finish_returns()
                ):
                    raise PrepareError(
                        f"{device_name} has not come back to the host from its last pod yet (the kernel moves it "
                        "back when that pod's network namespace is destroyed); the kubelet retries"
                    )
                edits, netdev, network = nic_edits(self.opts, topo, cfg, inventory)
                if netdev:
                    record["netdev"] = netdev
                    previous = interface_names.get(netdev["interface_name"])
                    if previous:
                        raise PrepareError(
                            f"devices {previous} and {device_name} would both be named "
                            f"{netdev['interface_name']!r} in the pod; set interfaceName per request"
                        )
                    interface_names[netdev["interface_name"]] = device_name
                if network:
                    entry_status["networkData"] = network
            record["cdi_device_ids"] = ids
            cdi_devices.append({"name": cdi_name, "containerEdits": edits})
            answer.append(record)
            status.append(entry_status)
        spec = cdi.build_spec(cdi_devices, env=[f"ALIGNED_DRA_CLAIM_UID={uid}"])
        problem = cdi.spec_problem(spec)
        if problem:  # never handed to the container runtime
            raise PrepareError(f"the CDI spec would be invalid: {problem}")
        entry = {"namespace": namespace, "name": name, "devices": answer, "cdi_spec": spec}
        return entry, status

    def _stop_orphan_mps(self) -> None:
        """Stop MPS daemons that no checkpointed claim uses (left by a claim that failed, or a crash).

        A driver that publishes no GPUs leaves them alone: split by kind, they are the GPU plugin's.
        """
        from ..sharing.fractional import mps_daemons, stop_mps_daemon

        if not self.opts.device_options.get("gpus", dra.DEFAULT_OPTIONS["gpus"]):
            return
        used = {d["pci_address"] for c in self.checkpoint.claims.values() for d in c["devices"] if d.get("mps")}
        for pci_address in mps_daemons(self.opts.mps_root):
            if pci_address not in used and stop_mps_daemon(self.opts.mps_root, pci_address):
                LOG.info("stopped the unused MPS daemon of %s", pci_address)

    def _stop_unused_mps(self, entry: dict[str, Any]) -> None:
        """Stop the MPS daemon of each GPU this claim shared once no prepared claim uses it."""
        from ..sharing.fractional import stop_mps_daemon

        for device in entry["devices"]:
            if not device.get("mps"):
                continue
            in_use = any(
                other.get("mps") and other["pci_address"] == device["pci_address"]
                for claim in self.checkpoint.claims.values()
                for other in claim["devices"]
            )
            if not in_use and stop_mps_daemon(self.opts.mps_root, device["pci_address"]):
                LOG.info("stopped the MPS daemon of %s", device["pci_address"])

    # -- Unprepare ---------------------------------------------------------------------

    def unprepare(self, claims: list[tuple[str, str, str]], budget: float | None = None) -> dict[str, str]:
        """Unprepare claims; returns ``{uid: error or ""}`` (unknown claims succeed).

        A claim leaves memory only after the checkpoint without it is on disk; when that
        write fails, its CDI spec is put back and the claim stays prepared (kubelet retries).
        """
        deadline = self._deadline(budget)
        answers: dict[str, str] = {}
        removed: dict[str, dict[str, Any]] = {}
        requested: dict[str, tuple[str, str]] = {}
        returning: dict[str, dict[str, Any]] = {}
        held: list[str] = []
        try:
            for namespace, uid, name in _unique_sorted(claims):
                started = time.perf_counter()
                problem = claim_ref_problem(namespace, uid, name)
                if problem and uid not in self.checkpoint.claims:
                    answers[uid] = f"refused: {problem}"
                    self._count("unprepare", "error", started)
                    continue
                if not self.claim_locks.acquire(uid, deadline - time.monotonic()):
                    answers[uid] = f"claim {uid}: another call on this claim did not finish within the budget"
                    self._count("unprepare", "error", started)
                    continue
                held.append(uid)
                entry = self.checkpoint.claims.get(uid)
                coming: dict[str, dict[str, Any]] = {}
                try:
                    cdi.remove_spec(self.opts.cdi_dir, uid, driver_name=self.opts.driver_name)
                    for device in (entry or {}).get("devices", []):
                        netdev = device.get("netdev")
                        if netdev:
                            outcome = self._restore_nic(device["pci_address"], netdev)
                            LOG.info("claim %s: %s %s", uid, device["pci_address"], outcome)
                            if outcome == "absent" and self._in_a_pod(device["pci_address"]):
                                # still in the pod's namespace (the kernel moves it back when that goes):
                                # put back when it appears
                                coming[device["pci_address"]] = netdev
                    if self.mig is not None:  # a MIG instance a process runs on fails this (the claim stays)
                        self.mig.unprepare(entry)
                except Exception as exc:  # netlink or file errors: keep the claim so that kubelet retries
                    if entry is not None:
                        self._ensure_spec(uid, entry)
                    answers[uid] = f"unprepare of claim {uid}: {exc}"
                    self._count("unprepare", "error", started)
                    continue
                answers[uid] = ""
                self._count("unprepare", "ok", started)
                if entry is not None:
                    removed[uid] = entry
                    requested[uid] = (namespace, name)
                    returning.update(coming)
            if removed:
                error = self._commit(remove=list(removed), returning=returning)
                if error:
                    for uid, entry in removed.items():
                        self._ensure_spec(uid, entry)  # still prepared: its spec stays usable
                        answers[uid] = f"unprepare of claim {uid}: {error}; the claim stays prepared"
                    removed = {}
            for uid, entry in removed.items():
                self.claim_pods.forget(uid)  # its usage series go with it
                self._stop_unused_mps(entry)
            if self.mig is not None:  # committed: a GPU whole goes back to MIG mode at the next rescan
                self.mig.unprepared(list(removed.values()))
            if self.status is not None:
                for uid, entry in removed.items():
                    namespace, name = requested[uid]
                    self.status.clear(entry.get("namespace", namespace), entry.get("name", name), uid)
        finally:
            for uid in held:
                self.claim_locks.release(uid)
        return answers
