# SPDX-License-Identifier: Apache-2.0
"""The driver's checkpoint: what it prepared, kept across restarts and reboots.

``<state-dir>/checkpoint.json`` (written atomically: temporary file, fdatasync,
rename)::

    {
      "version": 1,
      "driver": "dra.aligned.dev",
      "node": "node-a",
      "claims": {
        "<claim uid>": {
          "namespace": "default", "name": "claim",
          "devices": [                       # one per allocated device of ours
            {"pool": "node-a", "device": "nic-0000-1d-00-0", "request_names": ["nic"],
             "pci_address": "0000:1d:00.0", "kind": "nic",
             "cdi_device_ids": ["aligned.dev/claim=<uid>-nic-0000-1d-00-0"],
             "share_id": null,
             "netdev": {"original_name": "ens1f0", "interface_name": "net1", "original_mtu": 1500,
                        "original_up": true,
                        "original_addresses": [{"address": "192.168.128.5/21", "broadcast": "192.168.135.255",
                                                "metric": 0, "noprefixroute": false}],
                        "original_routes": [{"destination": "10.200.0.0/16", "gateway": "192.168.128.1",
                                             "metric": 0, "source": null, "scope": 0, "protocol": 4,
                                             "table": 254, "onlink": false}]}}
          ],
          "cdi_spec": {...}                  # the claim's CDI spec, rewritten on start
        }
      }
    }

``share`` (fractional GPUs only, absent in entries of earlier releases and of
whole GPUs): ``{"request": {"memory": <bytes>, "compute": <percent>}, "limit":
{...}}``, each key only when known: what the share is guaranteed and what MPS
lets it use (:mod:`aligned_dra_driver.sharing.limits`); the reclaim watcher reads
it. Adding it keeps ``version`` 1: earlier releases keep keys they do not know.

``returning`` (only while there is one): ``{"<PCI address>": <netdev record>}``,
the NICs whose claim was unprepared while their interface was not back in the
host namespace yet (the kernel moves a NIC back when the pod's namespace is
destroyed, which may come after Unprepare); the driver puts their name, MTU,
state, addresses and routes back when they appear (every rescan, and at start).

``mig`` (MIG devices only, :mod:`aligned_dra_driver.mig.prepare`): ``{"mode": "static" | "dynamic",
"profile": "1g.10gb", "profile_id": <NVML's>, "placement": {"start": <slice>, "size": <slices>},
"gpu_instance": <id>, "compute_instance": <id>, "uuid": "MIG-…" | null}``; the device's ``kind`` is
``gpu`` and its ``pci_address`` the parent GPU's. ``mig_started`` (only while there is one):
``{"<claim uid>": [{"pci_address", "device", "profile", "placement"}]}``, the dynamic MIG devices a
Prepare began creating and has not committed yet (a start rolls them back). ``boot_id`` (with
``--mig`` on): the ``boot_id`` of the boot the instances were made in; a start in another boot creates
the prepared claims' instances again. All three keep ``version`` 1, absent in files of earlier releases.

``claims`` → ``devices`` → ``pci_address`` is the shape the ``sriov`` module
reads to refuse destroying VFs in use (docs/network.md). A claim is in the
checkpoint exactly when it is prepared: Prepare writes the CDI spec first and
the checkpoint second, Unprepare removes the CDI spec and restores the NIC
first and the checkpoint entry last, and a start after a crash removes the CDI
specs the checkpoint does not name and rewrites those it does.

:meth:`Checkpoint.load` trusts nothing it reads: every field the driver uses
later is checked, so a damaged file stops the start with one line (a
:class:`CheckpointError`, exit status 2) that says what is wrong and what to
do, never with a traceback or a ``KeyError`` in a later call. Keys it does not
know are kept (a later release may add some within version 1). Its decisions,
given the UIDs of this driver's claim specs now in the CDI directory
(``own_spec_uids``):

- missing, and no spec of ours: start empty (a first start, or a reboot
  emptied the tmpfs CDI directory);
- missing while specs of ours exist: refused (their claims would be
  forgotten and their specs deleted): restore the file from a backup, or
  delete the specs once no pod on this node uses their claims;
- a symbolic link (dangling or not: the driver only ever renames a regular
  file there), a directory or another non-regular file, unreadable (any
  ``OSError``): refused, naming the errno;
- empty, truncated or not JSON, not UTF-8: refused: restore it from a backup or
  move it away (``mv checkpoint.json checkpoint.json.bad``), and deal with
  the specs of ours, if any (see above);
- top level not an object, ``version`` not the integer 1 (``true`` is not),
  ``claims`` not an object: refused;
- ``driver`` or ``node`` missing or another one: refused (the state directory
  belongs to another driver or node);
- ``returning`` not an object, a key that is no PCI address, a malformed
  netdev record: refused, naming the field path (``returning["<bdf>"]``);
- a claim entry with a malformed field (UID key, namespace, name, each device's
  pool, device, request names, PCI address, kind, CDI device IDs, share ID,
  netdev (with the NIC's host state, addresses and routes where recorded),
  mps, share (its request and limit: memory an integer >= 0, compute an
  integer 1..100), the CDI spec's version, kind and device names): refused, naming the
  field path (``claims["<uid>"].devices[0].pci_address``).

:meth:`Checkpoint.check_writable` refuses a state directory that cannot be
written (read-only file system, permissions) before anything is prepared; a
full disk is not refused (Prepare answers it per claim).
:meth:`Checkpoint.remove_stale_temporary` removes the temporary files a crash
left. :meth:`Checkpoint.save` writes a candidate set of claims without
changing :attr:`Checkpoint.claims`: the caller replaces its memory only after
the write succeeded.
"""

from __future__ import annotations

import errno
import json
import os
import re
import secrets
import shlex
import stat
from collections.abc import Collection, Mapping
from typing import Any

from .. import CDI_KIND
from ..collection import dra
from ..fsutil import TMP_SUFFIX, atomic_write
from ..network import addresses as layer3
from ..validation import is_bdf, is_dns_label, is_dns_subdomain, is_ifname, is_uid, show
from . import cdi

FILE_NAME = "checkpoint.json"
VERSION = 1
# the temporary file atomic_write uses for the checkpoint, and the prefix of check_writable's probes
TMP_NAME = "." + FILE_NAME + TMP_SUFFIX
PROBE_PREFIX = "." + FILE_NAME + ".probe-"
# the kinds Prepare records: dra.NAME_PREFIX's kinds (a device name's prefix, "acc" read as "accelerator")
DEVICE_KINDS = tuple(dra.DEVICE_KINDS)
MIN_MTU, MAX_MTU = 68, 65535
SHOWN_UIDS = 3
# what cdi.spec_path accepts: printed as is; anything else goes through show()
_FILE_SAFE_UID_RE = re.compile(r"[0-9a-zA-Z][0-9a-zA-Z-]{0,127}")
_FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


class CheckpointError(RuntimeError):
    """A checkpoint (or state directory) the driver cannot trust: it refuses to guess.

    The message is one line: what is wrong and what the operator should do.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message.replace("\r", "\\r").replace("\n", "\\n"))


class _Invalid(Exception):
    """A malformed field: its path in the file and what is wrong with it."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


def _is_int(value: object) -> bool:
    """An integer that is not a bool (JSON's ``true`` must not pass as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _shown_path(path: str) -> str:
    return path if path.isprintable() else repr(path)


def _os_error(exc: OSError) -> str:
    """``EACCES: Permission denied`` (one line, whatever the exception carries)."""
    if exc.errno is None:
        return str(exc)
    name = errno.errorcode.get(exc.errno, f"errno {exc.errno}")
    return f"{name}: {exc.strerror or os.strerror(exc.errno)}"


def _kind_of(value: object) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _field(obj: Mapping[str, Any], key: str, where: str) -> Any:
    if key not in obj:
        raise _Invalid(f"{where}.{key}", "missing")
    return obj[key]


def _object(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(where, f"{_kind_of(value)}, not an object")
    return value


def _list(value: object, where: str, non_empty: bool = False) -> list[Any]:
    if not isinstance(value, list):
        raise _Invalid(where, f"{_kind_of(value)}, not a list")
    if non_empty and not value:
        raise _Invalid(where, "an empty list (at least one entry is needed)")
    return value


def _string(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise _Invalid(where, f"{show(value)} is not a string")
    return value


def _request_name_ok(value: object) -> bool:
    """``name`` or ``name/subrequest`` (firstAvailable), each a DNS label."""
    return isinstance(value, str) and all(is_dns_label(part) for part in value.split("/", 1))


def _check_netdev(value: object, where: str) -> None:
    netdev = _object(value, where)
    for key in ("original_name", "interface_name"):
        name = _field(netdev, key, where)
        if not is_ifname(name):
            raise _Invalid(f"{where}.{key}", f"{show(name)} is not an interface name")
    mtu = _field(netdev, "original_mtu", where)
    if mtu is not None and (not _is_int(mtu) or not MIN_MTU <= mtu <= MAX_MTU):
        raise _Invalid(f"{where}.original_mtu", f"{show(mtu)} is not null or an MTU ({MIN_MTU} to {MAX_MTU})")
    # the state, addresses and routes the NIC had on the host (entries of earlier releases have none)
    if "original_up" in netdev and not isinstance(netdev["original_up"], bool):
        raise _Invalid(f"{where}.original_up", f"{show(netdev['original_up'])} is not true or false")
    for key, most, problem in (
        ("original_addresses", layer3.MAX_HOST_ADDRESSES, layer3.address_problem),
        ("original_routes", layer3.MAX_HOST_ROUTES, layer3.route_problem),
    ):
        if key not in netdev:
            continue
        records = _list(netdev[key], f"{where}.{key}")
        if len(records) > most:
            raise _Invalid(f"{where}.{key}", f"{len(records)} entries, at most {most}")
        for index, record in enumerate(records):
            bad = problem(record)
            if bad:
                raise _Invalid(f"{where}.{key}[{index}]", bad)


def _check_share(value: object, where: str) -> None:
    """``{"request": {memory, compute}, "limit": {...}}``; keys of later releases are kept unchecked."""
    share = _object(value, where)
    for part in ("request", "limit"):
        amounts = _object(_field(share, part, where), f"{where}.{part}")
        memory = amounts.get("memory")
        if "memory" in amounts and (not _is_int(memory) or memory < 0):
            raise _Invalid(f"{where}.{part}.memory", f"{show(memory)} is not a number of bytes")
        compute = amounts.get("compute")
        if "compute" in amounts and (not _is_int(compute) or not 1 <= compute <= 100):
            raise _Invalid(f"{where}.{part}.compute", f"{show(compute)} is not a percent (an integer 1 to 100)")


def _check_placement(value: object, where: str) -> None:
    placement = _object(value, where)
    for key in ("start", "size"):
        number = _field(placement, key, where)
        if not _is_int(number) or number < 0:
            raise _Invalid(f"{where}.{key}", f"{show(number)} is not a memory slice number")


def _check_mig(value: object, where: str) -> None:
    """A MIG device's record (keys of later releases are kept unchecked)."""
    mig = _object(value, where)
    mode = _field(mig, "mode", where)
    if mode not in ("static", "dynamic"):
        raise _Invalid(f"{where}.mode", f"{show(mode)} is not static or dynamic")
    _string(_field(mig, "profile", where), f"{where}.profile")
    _check_placement(_field(mig, "placement", where), f"{where}.placement")
    for key in ("profile_id", "gpu_instance", "compute_instance"):
        number = _field(mig, key, where)
        if not _is_int(number) or number < 0:
            raise _Invalid(f"{where}.{key}", f"{show(number)} is not an NVML identifier")
    uuid = _field(mig, "uuid", where)
    if uuid is not None:
        _string(uuid, f"{where}.uuid")


def _check_mig_started(value: object, where: str = "mig_started") -> dict[str, list[dict[str, Any]]]:
    started = _object(value, where)
    for uid, records in started.items():
        if not is_uid(uid):
            raise _Invalid(where, f"key {show(uid)} is not a Kubernetes UID")
        at = f'{where}["{uid}"]'
        for index, record in enumerate(_list(records, at)):
            record = _object(record, f"{at}[{index}]")
            if not is_bdf(_field(record, "pci_address", f"{at}[{index}]")):
                raise _Invalid(f"{at}[{index}].pci_address", f"{show(record['pci_address'])} is not a PCI address")
            _string(_field(record, "profile", f"{at}[{index}]"), f"{at}[{index}].profile")
            _check_placement(_field(record, "placement", f"{at}[{index}]"), f"{at}[{index}].placement")
    return {uid: list(records) for uid, records in started.items()}


def _check_device(value: object, where: str, node: str) -> None:
    device = _object(value, where)
    pool = _field(device, "pool", where)
    if pool != node:
        raise _Invalid(f"{where}.pool", f"{show(pool)} is not this node ({show(node)})")
    name = _field(device, "device", where)
    if not is_dns_label(name):
        raise _Invalid(f"{where}.device", f"{show(name)} is not a device name (a DNS label)")
    requests = _list(_field(device, "request_names", where), f"{where}.request_names")
    for index, request in enumerate(requests):
        if not _request_name_ok(request):
            raise _Invalid(f"{where}.request_names[{index}]", f"{show(request)} is not a request name")
    bdf = _field(device, "pci_address", where)
    if not is_bdf(bdf):
        raise _Invalid(f"{where}.pci_address", f"{show(bdf)} is not a PCI address")
    kind = _field(device, "kind", where)
    if not isinstance(kind, str) or kind not in DEVICE_KINDS:
        raise _Invalid(f"{where}.kind", f"{show(kind)} is not one of {', '.join(DEVICE_KINDS)}")
    ids = _list(_field(device, "cdi_device_ids", where), f"{where}.cdi_device_ids", non_empty=True)
    for index, cdi_id in enumerate(ids):
        _string(cdi_id, f"{where}.cdi_device_ids[{index}]")
    share_id = _field(device, "share_id", where)
    if share_id is not None and not is_uid(share_id):
        raise _Invalid(f"{where}.share_id", f"{show(share_id)} is not null or a UID")
    if "netdev" in device:
        _check_netdev(device["netdev"], f"{where}.netdev")
    if "mps" in device and not isinstance(device["mps"], bool):
        raise _Invalid(f"{where}.mps", f"{show(device['mps'])} is not true or false")
    if "share" in device:
        _check_share(device["share"], f"{where}.share")
    if "mig" in device:
        _check_mig(device["mig"], f"{where}.mig")


def _check_spec(value: object, where: str, uid: str) -> None:
    spec = _object(value, where)
    _string(_field(spec, "cdiVersion", where), f"{where}.cdiVersion")
    kind = _field(spec, "kind", where)
    if kind != CDI_KIND:
        raise _Invalid(f"{where}.kind", f"{show(kind)} is not {CDI_KIND!r}")
    devices = _list(_field(spec, "devices", where), f"{where}.devices", non_empty=True)
    for index, device in enumerate(devices):
        at = f"{where}.devices[{index}]"
        device = _object(device, at)
        name = _string(_field(device, "name", at), f"{at}.name")
        if not name.startswith(f"{uid}-"):
            raise _Invalid(f"{at}.name", f"{show(name)} does not start with the claim UID and '-'")
        _object(_field(device, "containerEdits", at), f"{at}.containerEdits")


def entry_problem(uid: object, entry: object, node: str) -> tuple[str, str] | None:
    """Why ``claims[uid] = entry`` is not a checkpoint entry of this node: ``(field path, problem)``, or None."""
    try:
        if not is_uid(uid):
            raise _Invalid("claims", f"key {show(uid)} is not a Kubernetes UID (8-4-4-4-12 hexadecimal digits)")
        where = f'claims["{uid}"]'
        claim = _object(entry, where)
        namespace = _field(claim, "namespace", where)
        if not is_dns_label(namespace):
            raise _Invalid(f"{where}.namespace", f"{show(namespace)} is not a DNS label")
        name = _field(claim, "name", where)
        if not is_dns_subdomain(name):
            raise _Invalid(f"{where}.name", f"{show(name)} is not a DNS subdomain")
        devices = _list(_field(claim, "devices", where), f"{where}.devices", non_empty=True)
        for index, device in enumerate(devices):
            _check_device(device, f"{where}.devices[{index}]", node)
        _check_spec(_field(claim, "cdi_spec", where), f"{where}.cdi_spec", str(uid))
    except _Invalid as bad:
        return bad.field, bad.problem
    return None


class Checkpoint:
    def __init__(self, state_dir: str, driver: str, node: str, durable: bool = True) -> None:
        self.state_dir = state_dir
        self.path = os.path.join(state_dir, FILE_NAME)
        self.driver = driver
        self.node = node
        self.durable = durable
        self.claims: dict[str, dict[str, Any]] = {}
        # NICs unprepared while still in a pod's namespace: {PCI address: netdev record}, put back when they return
        self.returning: dict[str, dict[str, Any]] = {}
        # dynamic MIG devices a Prepare began and did not commit: {claim uid: [record]} (mig_prepare)
        self.mig_started: dict[str, list[dict[str, Any]]] = {}
        self.boot_id: str | None = None  # the boot the MIG instances were made in (recorded with --mig on)

    # -- messages --------------------------------------------------------------------

    def _where(self) -> str:
        return f"checkpoint {_shown_path(self.path)}"

    @staticmethod
    def _specs(own: list[str]) -> str:
        """``2 CDI spec(s) of this driver exist (claims a, b)``."""
        shown = [u if _FILE_SAFE_UID_RE.fullmatch(u) else show(u) for u in own[:SHOWN_UIDS]]
        more = f", and {len(own) - SHOWN_UIDS} more" if len(own) > SHOWN_UIDS else ""
        return f"{len(own)} CDI spec(s) of this driver exist (claims {', '.join(shown)}{more})"

    def _delete_specs(self) -> str:
        return f"delete their specs ({cdi.spec_prefix(self.driver)}<uid>.json in the CDI directory)"

    def _start_over(self, own: list[str]) -> str:
        """What to do with a checkpoint that cannot be used."""
        path = _shown_path(self.path)
        advice = f"restore it from a backup, or move it away (mv {shlex.quote(path)} {shlex.quote(path + '.bad')})"
        if not own:
            return advice + " to start with no prepared claims"
        return (
            f"{advice}; {self._specs(own)} and a missing checkpoint is refused while they do: "
            f"once no pod on this node uses those claims, {self._delete_specs()}"
        )

    # -- reading ---------------------------------------------------------------------

    def load(self, own_spec_uids: Collection[str] = ()) -> dict[str, dict[str, Any]]:
        """Read and check the file; ``own_spec_uids``: this driver's claim specs in the CDI directory.

        Returns (and keeps in :attr:`claims`) the claims exactly as stored. Raises
        :class:`CheckpointError` (one line) for every case the module docstring refuses.
        """
        own = sorted({str(u) for u in own_spec_uids})
        try:
            os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
        except OSError as exc:
            if exc.errno not in _FULL_DISK:  # a full disk: the checkpoint is missing, Prepare reports it
                raise CheckpointError(
                    f"state directory {_shown_path(self.state_dir)} cannot be created ({_os_error(exc)}): "
                    "make it a writable directory"
                ) from None
        raw = self._read(own)
        if raw is None:
            if own:
                raise CheckpointError(
                    f"{self._where()} is missing but {self._specs(own)}: starting empty would forget those "
                    f"claims and delete their specs; restore {_shown_path(self.path)} from a backup, or, once "
                    f"no pod on this node uses those claims, {self._delete_specs()}"
                )
            self.claims = {}
            self.returning = {}
            self.mig_started = {}
            self.boot_id = None
            return self.claims
        data = self._parse(raw, own)
        claims = self._check(data, own)
        self.returning = self._check_returning(data.get("returning", {}), own)
        self.mig_started, self.boot_id = self._check_mig_state(data, own)
        self.claims = claims
        return claims

    def _read(self, own: list[str]) -> bytes | None:
        """The file's bytes; None when it does not exist."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise self._unreadable(exc, own) from None
        if stat.S_ISLNK(info.st_mode):
            try:
                target = os.readlink(self.path)
            except OSError:
                target = "?"
            dangling = "" if os.path.exists(self.path) else ", which does not exist"
            raise CheckpointError(
                f"{self._where()} is a symbolic link (to {show(target)}{dangling}); the driver only ever writes "
                f"a regular file there: replace the link by the file itself, or {self._start_over(own)}"
            )
        if stat.S_ISDIR(info.st_mode):
            raise CheckpointError(f"{self._where()} is a directory, not a file: {self._start_over(own)}")
        if not stat.S_ISREG(info.st_mode):
            raise CheckpointError(f"{self._where()} is not a regular file: {self._start_over(own)}")
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            with open(self.path, "rb", opener=lambda path, _: os.open(path, flags)) as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):  # replaced since the lstat
                    raise CheckpointError(f"{self._where()} is not a regular file: {self._start_over(own)}")
                return handle.read()
        except FileNotFoundError:
            return None  # removed since the lstat: missing
        except OSError as exc:
            raise self._unreadable(exc, own) from None

    def _unreadable(self, exc: OSError, own: list[str]) -> CheckpointError:
        return CheckpointError(
            f"{self._where()} cannot be read ({_os_error(exc)}): fix its permissions or the disk, "
            f"or {self._start_over(own)}"
        )

    def _parse(self, raw: bytes, own: list[str]) -> Any:
        if not raw:
            raise CheckpointError(f"{self._where()} is empty (0 bytes): {self._start_over(own)}")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CheckpointError(
                f"{self._where()} is not UTF-8 (byte {raw[exc.start]:#04x} at offset {exc.start}), "
                f"so damaged: {self._start_over(own)}"
            ) from None
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, too long integers, deep nesting
            problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CheckpointError(
                f"{self._where()} is truncated or not valid JSON ({problem}): {self._start_over(own)}"
            ) from None

    def _check(self, data: Any, own: list[str]) -> dict[str, dict[str, Any]]:
        where = self._where()
        if not isinstance(data, dict):
            raise CheckpointError(
                f"{where}: the top level is {_kind_of(data)}, not an object: not a checkpoint of this driver; "
                f"{self._start_over(own)}"
            )
        version = data.get("version")
        if not _is_int(version) or version != VERSION:
            raise CheckpointError(
                f"{where}: version {show(version)} is not {VERSION} (written by another release of the driver): "
                f"run that release, or {self._start_over(own)}"
            )
        for key, current, option in (("driver", self.driver, "--driver-name"), ("node", self.node, "--node-name")):
            if key not in data:
                raise CheckpointError(f"{where}: the field {key!r} is missing; {self._start_over(own)}")
            if data[key] != current:
                raise CheckpointError(
                    f"{where}: written for {key} {show(data[key])}, this is {key} {show(current)}: the state "
                    f"directory belongs to another {key}; give each {key} its own --state-dir (or check {option}), "
                    f"or {self._start_over(own)}"
                )
        claims = data.get("claims")
        if not isinstance(claims, dict):
            problem = "missing" if "claims" not in data else f"{_kind_of(claims)}, not an object"
            raise CheckpointError(f"{where}: claims: {problem}; {self._start_over(own)}")
        for uid, entry in claims.items():
            bad = entry_problem(uid, entry, self.node)
            if bad:
                field, problem = bad
                raise CheckpointError(
                    f"{where}: {field}: {problem}; the file is damaged or was edited: fix that field, or "
                    f"{self._start_over(own)}"
                )
        return claims

    def _check_returning(self, returning: Any, own: list[str]) -> dict[str, dict[str, Any]]:
        """``returning``: ``{PCI address: netdev record}`` (absent in files of earlier releases)."""
        try:
            checked = _object(returning, "returning")
            for bdf, record in checked.items():
                if not is_bdf(bdf):
                    raise _Invalid("returning", f"key {show(bdf)} is not a PCI address")
                _check_netdev(record, f'returning["{bdf}"]')
        except _Invalid as bad:
            raise CheckpointError(
                f"{self._where()}: {bad.field}: {bad.problem}; the file is damaged or was edited: fix that field, "
                f"or {self._start_over(own)}"
            ) from None
        return dict(checked)

    def _check_mig_state(self, data: Mapping[str, Any], own: list[str]) -> tuple[dict[str, Any], str | None]:
        """``mig_started`` and ``boot_id`` (absent in files of earlier releases)."""
        try:
            started = _check_mig_started(data.get("mig_started", {}))
            boot_id = data.get("boot_id")
            if boot_id is not None:
                _string(boot_id, "boot_id")
        except _Invalid as bad:
            raise CheckpointError(
                f"{self._where()}: {bad.field}: {bad.problem}; the file is damaged or was edited: fix that field, "
                f"or {self._start_over(own)}"
            ) from None
        return started, boot_id

    # -- the state directory -----------------------------------------------------------

    def check_writable(self) -> None:
        """Refuse a state directory that cannot be written (read-only, permissions); a full disk passes."""
        directory = _shown_path(self.state_dir)
        try:
            os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
        except OSError as exc:
            if exc.errno in _FULL_DISK:
                return
            raise CheckpointError(
                f"state directory {directory} cannot be created ({_os_error(exc)}): make it a writable directory"
            ) from None
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        for _attempt in range(3):
            probe = os.path.join(self.state_dir, f"{PROBE_PREFIX}{os.getpid()}-{secrets.token_hex(4)}{TMP_SUFFIX}")
            try:
                fd = os.open(probe, flags, 0o600)
            except FileExistsError:
                continue  # a leftover with the same name: another name
            except OSError as exc:
                if exc.errno in _FULL_DISK:
                    return  # Prepare answers a full disk per claim; the driver still serves Unprepare
                raise CheckpointError(
                    f"state directory {directory} cannot be written ({_os_error(exc)}): the driver could not "
                    "record what it prepares; mount it read-write and let this user write it"
                ) from None
            os.close(fd)
            try:
                os.unlink(probe)
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise CheckpointError(
                    f"state directory {directory}: the probe file {_shown_path(probe)} cannot be removed "
                    f"({_os_error(exc)}): the checkpoint could not be replaced either; fix the directory"
                ) from None
            return

    def remove_stale_temporary(self) -> list[str]:
        """Remove the checkpoint's temporary files a crash left (and probe files); their paths."""
        try:
            names = os.listdir(self.state_dir)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise CheckpointError(
                f"state directory {_shown_path(self.state_dir)} cannot be listed ({_os_error(exc)}): "
                "fix its permissions or the disk"
            ) from None
        removed = []
        for name in sorted(names):
            if name != TMP_NAME and not (name.startswith(PROBE_PREFIX) and name.endswith(TMP_SUFFIX)):
                continue
            path = os.path.join(self.state_dir, name)
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise CheckpointError(
                    f"the temporary file {_shown_path(path)} cannot be removed ({_os_error(exc)}): the checkpoint "
                    "cannot be written while it is there; remove it"
                ) from None
            removed.append(path)
        return removed

    # -- writing ---------------------------------------------------------------------

    def save(
        self,
        claims: Mapping[str, Mapping[str, Any]] | None = None,
        returning: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        """Write ``claims`` and ``returning`` (default :attr:`claims`, :attr:`returning`); neither attribute is
        changed. Raises OSError."""
        data: dict[str, Any] = {
            "version": VERSION,
            "driver": self.driver,
            "node": self.node,
            "claims": dict(self.claims if claims is None else claims),
        }
        returning = self.returning if returning is None else returning
        if returning:  # only then: the file keeps the shape earlier releases and the sriov module read
            data["returning"] = dict(returning)
        # a claim committed in this write is no longer started: its record goes in the same write
        started = {uid: records for uid, records in self.mig_started.items() if uid not in data["claims"]}
        if started:
            data["mig_started"] = started
        if self.boot_id is not None:
            data["boot_id"] = self.boot_id
        atomic_write(
            self.path,
            json.dumps(data, separators=(",", ":"), sort_keys=True).encode(),
            mode=0o600,
            durable=self.durable,
        )
