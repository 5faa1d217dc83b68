# SPDX-License-Identifier: Apache-2.0
"""The site's rails (``--rails-file``): the rail of each RDMA NIC and VF, published as ``<domain>/rail``.

The rails file is the one the ``driver`` role renders for a site
(``controller/fabric/rails.rails_file``): ``{"version": 1, "rules": [...],
"nodes": {node name: index}}``. Every scan stats it and reads it again only
when its device, inode, size or modification time changed (the role replaces
it with a rename; a ConfigMap volume swaps a symbolic link), takes this node's
rule (``node/topology/rails.rule_for_node``) and reads it against the probe
(``node/topology/rails.assign``), the code the validation stage and the
planner run, so the published rail is the one they computed. A file that is
missing, unreadable, not JSON or malformed publishes no rail, says why once
(log, ``aligned_dra_rails_file_error``), and is read again when it changes:
the driver never stops for it. The rule's problems on this node (a missing
rail of ``count``, a rail given twice) are logged once per change and counted
(``aligned_dra_rail_problems``); the NICs the rule does place keep their rail.

A NIC given to a pod leaves the host's view: its interface (and, in RDMA
exclusive mode, its RDMA device) moves into the pod's namespace, so the probe
sees a PCI function without an interface, or a plain NIC. Read as it is, the
``pci_order`` rule would renumber the other NICs and ``netdev_name`` or
``subnet`` would lose it. So every scan records what the rules read of each
NIC PF in the host's view (RDMA or not, interface names, none for an RDMA NIC
without one such as InfiniBand without IPoIB, IPv4 addresses when the rule is
``subnet``) in ``<state-dir>/rails-nics.json``, and a NIC PF that is still on
the PCI bus but out of view (recorded as RDMA and not RDMA now, recorded with
interfaces and without one now) is read as it was last seen; so is a NIC the
kernel gave back from a pod under its pod name before the driver renamed it
(the checkpoint's ``returning``). The record, its reader and that reading
(``node/topology/rail_record``: ``read_record``, ``nics_in_view``,
``with_last_seen``) are shared with the probe module, which reads this file
on the live node, so the validation, the summaries and the planner read the
NIC in the pod as the driver does. The file outlives a restart of the driver
(and a reboot), so a driver started while a NIC is in a pod keeps the rails it
had. A NIC held by a prepared claim that the driver has no record of and that
has no interface on the host (handed out before the driver read the rails, or
the record was lost) cannot be read as it was on the host (an RDMA NIC without
an interface may have one in the pod): it is read as the host sees it now, is
not recorded, and is a problem of the node, said like the rule's, until it is
back.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import threading
from collections.abc import Callable, Collection
from typing import Any

from ..collection import rail_record, rail_rule, topology_addresses
from ..fsutil import atomic_write

LOG = logging.getLogger(__name__)

# the record of what the rules read of each NIC (node/topology/rail_record: record_document, read_record)
FACTS_NAME = rail_record.RECORD_NAME
FACTS_VERSION = rail_record.RECORD_VERSION
# a site's file is a few rules and one line per node; a ConfigMap holds at most 1 MiB
MAX_FILE_BYTES = 4 * 1024 * 1024


def held_addresses(checkpoint: Any) -> set[str]:
    """PCI addresses of the devices that prepared claims hold (the checkpoint, read without its lock)."""
    claims = list(checkpoint.claims.values())  # replaced whole on every commit: one version
    return {device["pci_address"] for claim in claims for device in claim["devices"]}


def returning_addresses(checkpoint: Any) -> set[str]:
    """PCI addresses of NICs unprepared while still in a pod, not given their host settings back yet.

    The kernel moves such a NIC back under whatever name it had in the pod, without its addresses,
    and the driver renames it after the scan: until then it is not read as it is.
    """
    return set(getattr(checkpoint, "returning", None) or {})


class Rails:
    """The rails of this node's NICs, from the site's rails file, evaluated at every scan.

    ``held`` gives the PCI addresses prepared claims hold and ``away`` those of
    NICs back from a pod but not given their host settings yet (set after the
    driver exists: :func:`held_addresses` and :func:`returning_addresses` of its
    checkpoint); an ``away`` NIC is read as last seen, like one out of view.
    ``read_addresses`` reads interfaces' IPv4 addresses
    (``node/topology/addresses.ipv4_addresses``).
    """

    def __init__(
        self,
        path: str,
        node_name: str,
        state_dir: str,
        metrics: Any | None = None,
        durable: bool = True,
        read_addresses: Callable[[list[str]], dict[str, list[str]]] | None = None,
    ) -> None:
        self.path = path
        self.node_name = node_name
        self.facts_path = os.path.join(state_dir, FACTS_NAME)
        self.metrics = metrics
        self.durable = durable
        self.read_addresses = read_addresses or topology_addresses.ipv4_addresses
        self.held: Callable[[], Collection[str]] = frozenset
        self.away: Callable[[], Collection[str]] = frozenset
        self.rule: dict[str, Any] | None = None
        self.file_error: str | None = None  # why the file gives no rule (None: it was read)
        self.problems: list[str] = []
        self.rails: dict[str, int] = {}  # PCI address -> rail at the last scan (VFs included)
        self.nics_on_rails = 0  # NIC PFs with a rail at the last scan
        self._key: tuple[Any, ...] | None = None  # what os.stat said of the file last read
        self._facts: dict[str, dict[str, Any]] | None = None  # loaded at the first scan
        self._facts_written: dict[str, dict[str, Any]] | None = None
        self._facts_error: str | None = None
        self._said: dict[str, Any] = {}
        self._lock = threading.Lock()

    # -- the rails file ------------------------------------------------------------------

    def _read_file(self) -> None:
        """Read the file again when it changed; sets ``rule`` and ``file_error``."""
        try:
            info = os.stat(self.path)
        except OSError as exc:
            key: tuple[Any, ...] = ("absent", exc.errno)
            if key != self._key:
                self._key = key
                self.rule = None
                self.file_error = "not found" if isinstance(exc, FileNotFoundError) else f"cannot be read: {exc}"
            return
        key = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_mode)
        if key == self._key:
            return
        self._key = key
        self.rule, self.file_error = None, None
        if not stat.S_ISREG(info.st_mode):
            self.file_error = "is not a regular file"
            return
        if info.st_size > MAX_FILE_BYTES:
            self.file_error = f"is larger than {MAX_FILE_BYTES} bytes"
            return
        try:
            with open(self.path, "rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            self.file_error = f"cannot be read: {exc}"
            return
        try:
            document = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            self.file_error = f"is not JSON: {exc}"
            return
        try:
            self.rule = rail_rule.rule_for_node(document, self.node_name)
        except ValueError as exc:
            self.file_error = str(exc)

    # -- what the rules read of each NIC, kept across a NIC's time in a pod and restarts ------

    def _load_facts(self) -> dict[str, dict[str, Any]]:
        if self._facts is not None:
            return self._facts
        facts: dict[str, dict[str, Any]] = {}
        try:
            facts = rail_record.read_record(self.facts_path, self.node_name) or {}
        except rail_record.RailRecordError as exc:
            # only the NICs now out of the host's view need it: said, and written anew at this scan
            LOG.warning("%s is unusable (%s): NICs out of the host's view are read without it", self.facts_path, exc)
        self._facts = facts
        self._facts_written = dict(facts)
        return facts

    def _save_facts(self, facts: dict[str, dict[str, Any]]) -> None:
        if facts == self._facts_written:
            return
        document = rail_record.record_document(self.node_name, facts)
        data = json.dumps(document, indent=1, sort_keys=True).encode()
        try:
            atomic_write(self.facts_path, data, mode=0o600, durable=self.durable)
        except OSError as exc:
            if self._facts_error != str(exc):
                LOG.error("writing %s failed (retried at the next change): %s", self.facts_path, exc)
            self._facts_error = str(exc)
            return
        if self._facts_error:
            LOG.info("%s written again", self.facts_path)
        self._facts_error = None
        self._facts_written = dict(facts)

    def _view(
        self, topology: dict[str, Any], subnet: bool
    ) -> tuple[dict[str, Any], dict[str, list[str]] | None, list[str]]:
        """The topology the rule reads (NICs out of view as last seen), their addresses, and problems."""
        facts = self._load_facts()
        away = set(self.away())
        held = set(self.held())
        seen = rail_record.nics_in_view(topology, facts, away)
        # A held RDMA NIC without an interface that the record does not have: an InfiniBand NIC
        # without IPoIB, or one whose interface is in the pod. Not recorded until it is back.
        unsure = {bdf for bdf, nic in seen.items() if bdf in held and bdf not in facts and not nic["netdevs"]}
        for bdf in unsure:
            del seen[bdf]
        rdma = {bdf for bdf, nic in seen.items() if nic["rdma"]}
        read = self.read_addresses(sorted({n for bdf in rdma for n in seen[bdf]["netdevs"]})) if subnet else {}
        fresh: dict[str, dict[str, Any]] = {}
        for bdf, nic in seen.items():
            names = nic["netdevs"]
            fact: dict[str, Any] = {"rdma": nic["rdma"], "netdevs": names}
            if subnet and nic["rdma"]:
                fact["addresses"] = {n: list(read.get(n) or []) for n in names}
            elif facts.get(bdf, {}).get("netdevs") == names and "addresses" in facts[bdf]:
                fact["addresses"] = facts[bdf]["addresses"]  # read under a subnet rule before: kept
            fresh[bdf] = fact
        problems = []
        for bdf in sorted(set(rail_record.nic_pfs(topology)) - set(seen)):
            if bdf in facts:
                fresh[bdf] = facts[bdf]  # kept while the function is on the bus
            elif bdf in held:
                problems.append(
                    f"{bdf}: held by a prepared claim, and {self.facts_path} has no record of it on the host (it "
                    "was handed out before the driver read the rails, or the record was lost): read as the host "
                    "sees it now, without an interface, until it is back on the host"
                )
        self._facts = fresh
        self._save_facts(fresh)
        probe = dict(topology, netdev_addresses=read) if subnet else topology
        view = rail_record.with_last_seen(probe, facts, away)  # unsure: not in facts, so not patched
        return view, (view["netdev_addresses"] if subnet else None), problems

    # -- every scan ------------------------------------------------------------------------

    def evaluate(self, topology: dict[str, Any]) -> dict[str, int] | None:
        """PCI address -> rail for ``devices_from_topology``; None when no rule applies. Never raises."""
        with self._lock:
            try:
                self._read_file()
                rule = self.rule
                view, addresses, problems = self._view(topology, rule is not None and rule["by"] == "subnet")
                if rule is None:  # what the facts record is kept for a rule to come; nothing to say now
                    self.rails, self.nics_on_rails, problems = {}, 0, []
                else:
                    result = rail_rule.assign(view, rule, self.node_name, addresses)
                    self.rails = dict(result["rails"])
                    self.nics_on_rails = sum(1 for nic in result["nics"] if nic["rail"] is not None)
                    problems = problems + list(result["problems"])
                self.problems = problems
            except Exception as exc:  # a bug here must never stop the scan: the devices are published without rails
                LOG.exception("evaluating the rails failed")
                self.rails, self.nics_on_rails = {}, 0
                self.problems = [f"evaluating the rails failed: {exc}"]
            self._report()
            return dict(self.rails) if self.rule is not None else None

    def _report(self) -> None:
        """Log what changed since the last scan (once per change) and set the metrics."""
        said = self._said
        if self.file_error != said.get("file_error"):
            if self.file_error:
                LOG.error("--rails-file %s %s: no rail is published until it is fixed", self.path, self.file_error)
            elif "file_error" in said:
                LOG.info("--rails-file %s is read again", self.path)
        rule = json.dumps(self.rule, sort_keys=True) if self.rule is not None else None
        if not self.file_error and (rule != said.get("rule") or said.get("file_error")):
            if self.rule is None:
                LOG.info("--rails-file %s has no rule for node %s: no rail is published", self.path, self.node_name)
            else:
                LOG.info("rails of node %s: rule %s", self.node_name, rail_rule.describe(self.rule))
        if self.rails != said.get("rails") and self.rule is not None:
            shown = ", ".join(f"{bdf}: {rail}" for bdf, rail in sorted(self.rails.items())) or "none"
            LOG.info("rails: %s", shown)
        if self.problems != said.get("problems"):
            for problem in self.problems:
                LOG.warning("rail rule problem on this node: %s", problem)
            if not self.problems and said.get("problems") and self.rule is not None:
                LOG.info("the rail rule has no problem on this node any more")
        self._said = {"file_error": self.file_error, "rule": rule, "rails": self.rails, "problems": self.problems}
        if self.metrics is not None:
            self.metrics.rails_file_error.set(1 if self.file_error else 0)
            self.metrics.rail_problems.set(len(self.problems))
            self.metrics.rail_nics.set(self.nics_on_rails)
