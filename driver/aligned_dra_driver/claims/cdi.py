# SPDX-License-Identifier: Apache-2.0
"""CDI specs: one per prepared claim and driver, plus look-ups in the vendors' own specs.

A claim's spec is ``<cdi-dir>/aligned.dev-claim_<claim uid>.json`` for the
default driver name ``dra.aligned.dev`` (the name every release before the
split wrote, so an upgrade finds its specs) and
``<cdi-dir>/aligned.dev-claim-<driver name>_<claim uid>.json`` for any other
(:func:`spec_prefix`). A driver name is a DNS subdomain and a UID has no
``_`` either: the first ``_`` ends the prefix, so neither driver's names match
the other's files, and two drivers of ours on one node (split by kind, one
CDI directory) each restore and clean up only their own specs.

A spec has ``cdiVersion`` 0.5.0 (the highest podman 4 accepts; ``hostPath`` on
device nodes needs 0.5.0), kind ``aligned.dev/claim`` and one CDI device per
allocated device, named ``<claim uid>-<device name>`` so that two claims never
define the same CDI name; two drivers of ours split by kind never publish the
same device name (``gpu-…``/``acc-…`` against ``nic-…``/``vf-…``), so the specs
of one claim by both define distinct CDI names too. Both specs set the claim-wide
``ALIGNED_DRA_CLAIM_UID``: a container that gets devices of both sees it once,
with the one value (a runtime applying CDI edits replaces an env entry of the
same name).
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from .. import CDI_CLASS, CDI_KIND, CDI_VENDOR, DEFAULT_DRIVER_NAME
from ..fsutil import TMP_SUFFIX, atomic_write, remove_if_present
from ..validation import is_dns_subdomain, show

CDI_VERSION = "0.5.0"
# Specs hold no secret (device paths, the hook's arguments, the claim's UID) and are read by the
# container runtime and CDI tools; 0644 as the vendor toolkits write theirs, whatever the umask.
SPEC_MODE = 0o644
# the start of every claim spec file of ours, whichever driver wrote it
SPEC_STEM = f"{CDI_VENDOR}-{CDI_CLASS}"
# the default driver's prefix (the only one before the split by kind); other drivers: spec_prefix()
SPEC_PREFIX = f"{SPEC_STEM}_"
_CDI_NAME_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.:-]*")
_UID_IN_NAME = r"[0-9a-zA-Z][0-9a-zA-Z-]{0,127}"
_UID_IN_NAME_RE = re.compile(_UID_IN_NAME)
# Vendor kinds whose devices the driver hands on by name (driver libraries,
# firmware and hooks stay the vendor toolkit's job).
VENDOR_GPU_KINDS = ("nvidia.com/gpu", "amd.com/gpu")


def spec_prefix(driver_name: str = DEFAULT_DRIVER_NAME) -> str:
    """The start of a driver's spec file names: ``aligned.dev-claim_`` for the default driver name (as
    before the split by kind), ``aligned.dev-claim-<driver name>_`` for any other; a name that is no DNS
    subdomain is refused (its ``_`` or ``/`` would make the names ambiguous or leave the directory)."""
    if driver_name == DEFAULT_DRIVER_NAME:
        return SPEC_PREFIX
    if not is_dns_subdomain(driver_name):
        raise ValueError(f"driver name {show(driver_name)} cannot be part of a CDI spec file name")
    return f"{SPEC_STEM}-{driver_name}_"


def _spec_re(driver_name: str) -> re.Pattern[str]:
    return re.compile(re.escape(spec_prefix(driver_name)) + f"({_UID_IN_NAME})" + r"\.json")


def spec_path(cdi_dir: str, claim_uid: str, driver_name: str = DEFAULT_DRIVER_NAME) -> str:
    """The claim's spec file of this driver; a UID that could leave ``cdi_dir`` (or is no UID at all) is refused."""
    if not isinstance(claim_uid, str) or not _UID_IN_NAME_RE.fullmatch(claim_uid):
        raise ValueError(f"{show(claim_uid)} cannot be part of a CDI spec file name")
    return os.path.join(cdi_dir, f"{spec_prefix(driver_name)}{claim_uid}.json")


def cdi_device_name(claim_uid: str, device: str) -> str:
    name = f"{claim_uid}-{device}"
    if not _CDI_NAME_RE.fullmatch(name):
        raise ValueError(f"{show(name)} is not a valid CDI device name")
    return name


def qualified(name: str) -> str:
    return f"{CDI_KIND}={name}"


def build_spec(devices: list[dict[str, Any]], env: list[str] | None = None) -> dict[str, Any]:
    """A spec from ``[{"name": ..., "containerEdits": {...}}]`` and claim-wide env."""
    spec: dict[str, Any] = {"cdiVersion": CDI_VERSION, "kind": CDI_KIND, "devices": devices}
    if env:
        spec["containerEdits"] = {"env": env}
    return spec


def write_spec(
    cdi_dir: str,
    claim_uid: str,
    spec: dict[str, Any],
    durable: bool = False,
    driver_name: str = DEFAULT_DRIVER_NAME,
) -> str:
    os.makedirs(cdi_dir, exist_ok=True)
    path = spec_path(cdi_dir, claim_uid, driver_name)
    atomic_write(path, json.dumps(spec, indent=1, sort_keys=True).encode(), mode=SPEC_MODE, durable=durable)
    return path


def read_spec(cdi_dir: str, claim_uid: str, driver_name: str = DEFAULT_DRIVER_NAME) -> dict[str, Any] | None:
    try:
        with open(spec_path(cdi_dir, claim_uid, driver_name), "rb") as handle:
            return json.loads(handle.read())
    except (FileNotFoundError, ValueError):
        return None


def remove_spec(cdi_dir: str, claim_uid: str, driver_name: str = DEFAULT_DRIVER_NAME) -> bool:
    return remove_if_present(spec_path(cdi_dir, claim_uid, driver_name))


def remove_spec_quietly(cdi_dir: str, claim_uid: str, driver_name: str = DEFAULT_DRIVER_NAME) -> None:
    """Remove a spec on a failure path; a directory that refuses it leaves it (restore removes it later)."""
    try:
        remove_spec(cdi_dir, claim_uid, driver_name)
    except (OSError, ValueError):
        pass


_KIND_RE = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?/[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?")
_ENV_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=[^\0]*")
_HOOK_NAMES = ("prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop")
# Per CDI device: device nodes of one GPU or NIC, env, one hook with at most 16 addresses and 32 routes.
MAX_SPEC_BYTES_PER_DEVICE = 8192


def _edits_problem(edits: object, where: str) -> str | None:
    if not isinstance(edits, dict):
        return f"{where} is not an object"
    env = edits.get("env", [])
    if not isinstance(env, list) or not all(isinstance(e, str) and _ENV_RE.fullmatch(e) for e in env):
        return f"{where}.env must be a list of NAME=VALUE"
    for index, node in enumerate(edits.get("deviceNodes", [])):
        if not isinstance(node, dict) or not str(node.get("path", "")).startswith("/"):
            return f"{where}.deviceNodes[{index}].path must be an absolute path"
        if "hostPath" in node and not str(node["hostPath"]).startswith("/"):
            return f"{where}.deviceNodes[{index}].hostPath must be an absolute path"
    for index, hook in enumerate(edits.get("hooks", [])):
        if not isinstance(hook, dict) or hook.get("hookName") not in _HOOK_NAMES:
            return f"{where}.hooks[{index}].hookName must be one of {', '.join(_HOOK_NAMES)}"
        if not str(hook.get("path", "")).startswith("/"):
            return f"{where}.hooks[{index}].path must be an absolute path"
        if not all(isinstance(a, str) and "\0" not in a for a in hook.get("args", [])):
            return f"{where}.hooks[{index}].args must be strings"
    for index, mount in enumerate(edits.get("mounts", [])):
        if not isinstance(mount, dict) or not all(
            str(mount.get(k, "")).startswith("/") for k in ("hostPath", "containerPath")
        ):
            return f"{where}.mounts[{index}] needs absolute hostPath and containerPath"
    return None


def spec_problem(spec: dict[str, Any]) -> str | None:
    """Why a claim spec would be refused by a CDI consumer (the rules of the CDI spec), or None.

    At least one device, unique valid names, a ``vendor/class`` kind, ``NAME=VALUE``
    env, absolute paths, known hook names; and at most ``MAX_SPEC_BYTES_PER_DEVICE``
    per device, so a spec grows in proportion to the claim's results.
    """
    if spec.get("cdiVersion") != CDI_VERSION:
        return f"cdiVersion must be {CDI_VERSION}"
    if not isinstance(spec.get("kind"), str) or not _KIND_RE.fullmatch(spec["kind"]):
        return f"kind {show(spec.get('kind'))} is not vendor/class"
    devices = spec.get("devices")
    if not isinstance(devices, list) or not devices:
        return "a spec needs at least one device"
    names = set()
    for index, device in enumerate(devices):
        name = device.get("name") if isinstance(device, dict) else None
        if not isinstance(name, str) or not _CDI_NAME_RE.fullmatch(name):
            return f"devices[{index}].name {show(name)} is not a CDI device name"
        if name in names:
            return f"devices[{index}].name {name!r} is defined twice"
        names.add(name)
        problem = _edits_problem(device.get("containerEdits"), f"devices[{index}].containerEdits")
        if problem:
            return problem
    if "containerEdits" in spec:
        problem = _edits_problem(spec["containerEdits"], "containerEdits")
        if problem:
            return problem
    size = len(json.dumps(spec, indent=1, sort_keys=True))
    if size > MAX_SPEC_BYTES_PER_DEVICE * len(devices):
        return f"{size} bytes for {len(devices)} device(s) is above {MAX_SPEC_BYTES_PER_DEVICE} bytes per device"
    return None


def claim_specs(cdi_dir: str, driver_name: str = DEFAULT_DRIVER_NAME) -> dict[str, str]:
    """``{claim uid: path}`` of this driver's specs in ``cdi_dir`` (never another driver's of ours)."""
    pattern = _spec_re(driver_name)
    try:
        names = os.listdir(cdi_dir)
    except FileNotFoundError:
        return {}
    found = {}
    for name in names:
        match = pattern.fullmatch(name)
        if match:
            found[match.group(1)] = os.path.join(cdi_dir, name)
    return found


def remove_temporary(cdi_dir: str, driver_name: str = DEFAULT_DRIVER_NAME) -> list[str]:
    """Remove half-written spec files of this driver left by a crash; return their paths."""
    prefix = "." + spec_prefix(driver_name)
    removed = []
    try:
        names = os.listdir(cdi_dir)
    except FileNotFoundError:
        return removed
    for name in names:
        if name.startswith(prefix) and name.endswith(TMP_SUFFIX):
            path = os.path.join(cdi_dir, name)
            if remove_if_present(path):
                removed.append(path)
    return removed


class VendorSpecs:
    """Devices of vendor CDI specs (``nvidia.com/gpu=<uuid>``...), re-read when a directory changes."""

    def __init__(self, directories: list[str]) -> None:
        self.directories = directories
        self._stamp: tuple[Any, ...] | None = None
        self._names: dict[str, str] = {}

    def _current_stamp(self) -> tuple[Any, ...]:
        stamp = []
        for directory in self.directories:
            try:
                stat = os.stat(directory)
                stamp.append((directory, stat.st_mtime_ns, stat.st_ino))
            except OSError:
                stamp.append((directory, None, None))
        return tuple(stamp)

    def _load(self) -> dict[str, str]:
        names: dict[str, str] = {}
        for directory in self.directories:
            try:
                entries = sorted(os.listdir(directory))
            except OSError:
                continue
            for entry in entries:
                if not entry.endswith(".json") or entry.startswith((SPEC_PREFIX, SPEC_STEM + "-")):
                    continue  # claim specs of ours (any driver); YAML: the vendor toolkits write JSON by default
                try:
                    with open(os.path.join(directory, entry), "rb") as handle:
                        spec = json.loads(handle.read())
                except (OSError, ValueError):
                    continue
                kind = spec.get("kind") if isinstance(spec, dict) else None
                if kind not in VENDOR_GPU_KINDS:
                    continue
                for device in spec.get("devices") or []:
                    name = device.get("name") if isinstance(device, dict) else None
                    if isinstance(name, str) and name:
                        names.setdefault(name.lower(), f"{kind}={name}")
        return names

    def lookup(self, *keys: str | None) -> str | None:
        """The qualified vendor CDI name of the first key (UUID, PCI address) a vendor spec defines."""
        stamp = self._current_stamp()
        if stamp != self._stamp:
            self._names = self._load()
            self._stamp = stamp
        for key in keys:
            if key and key.lower() in self._names:
                return self._names[key.lower()]
        return None
