# SPDX-License-Identifier: Apache-2.0
"""mig-parted's ``mig-configs``, the selection of a node's GPUs, and what each selected GPU should become.

The format is NVIDIA mig-parted's (``version: v1``), read as mig-parted reads it, so a team's layout file works
as it is::

    mig-configs:
      all-balanced:
        - device-filter: ["0x20B010DE", "0x20B110DE"]   # optional: a string or a list of them
          devices: all                                  # or a list of GPU indices
          mig-enabled: true
          mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}

- ``devices`` and ``mig-enabled`` are required; ``mig-devices`` is required with ``mig-enabled: true`` (``{}``:
  MIG mode on, no instance) and must be empty with ``false``; counts are whole numbers >= 0, not all 0; no other
  key; every config has at least one entry. A whole file (``version`` and ``mig-configs``) is read too.
- ``device-filter`` is the PCI device ID and vendor as one 32-bit number (device in the high 16 bits, vendor in
  the low: ``0x20B010DE`` is an A100-SXM4-40GB), optionally ``:`` and the subsystem's the same way; mig-parted
  reads it with Go's base prefixes (``0x`` hex, ``0`` octal, else decimal). A filter that is no number is refused
  here (mig-parted would silently match nothing).
- ``devices`` indexes the node's NVIDIA GPUs in PCI address order, as mig-parted and NVML enumerate them.
- A profile is ``[<C>c.]<G>g.<GB>gb`` with ``+attributes`` or ``-attributes`` (``1g.10gb+me``,
  ``1g.24gb-me``, ``1g.24gb+me.all``): it names the NVML profile with the same figures and attributes. The
  collection makes one compute instance spanning each GPU instance, so ``<C>`` must equal ``<G>``.

A GPU that two entries of the chosen config match is refused (mig-parted would apply both, the last winning).

:func:`select` picks the GPUs the module manages (the contract's ``gpus``: ``pci_addresses``, ``device_ids``,
``models``, ``indices``, each given key must match; empty: every MIG-capable GPU); :func:`wanted` gives each
selected GPU its entry of the chosen config; :func:`profile_counts` checks an entry's counts against the GPU's
profiles from NVML (names, then whether they fit, with ``packing``). Errors are :class:`LayoutError`, their
message starting with the input's path (``mig_configs.all-balanced[1].mig-devices.1g.10gb``).

Node side: Python 3.9, standard library only.
"""

from __future__ import annotations

import fnmatch
import re

from . import packing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VERSION = "v1"
ENTRY_KEYS = ("device-filter", "devices", "mig-enabled", "mig-devices")
SELECTOR_KEYS = ("pci_addresses", "device_ids", "models", "indices")
_PCI = re.compile(r"^(?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_DEVICE_ID = re.compile(r"^0x[0-9a-f]{4}$")
_ATTRIBUTE = re.compile(r"^[A-Za-z][A-Za-z0-9.]*$")


class LayoutError(ValueError):
    """A layout, a selector or a config's counts that cannot be applied; the message names the input."""


# -- profiles ---------------------------------------------------------------------------------------------


def parse_profile(text: Any) -> tuple[int, int, int, tuple[str, ...], bool]:
    """``(C, G, GB, sorted attributes, negative)`` of a MIG profile name; ValueError with why it is none."""
    if not isinstance(text, str) or not text:
        raise ValueError("a profile is a non-empty string")
    plus, minus = text.split("+", 1), text.split("-", 1)
    if len(plus) == 2 and len(minus) == 2:
        raise ValueError("both + and - attributes")
    parts = plus if len(plus) == 2 else minus
    fields = parts[0].split(".")
    if len(fields) not in (2, 3):
        raise ValueError("expected [<C>c.]<G>g.<GB>gb")
    suffixes = ("c", "g", "gb")[3 - len(fields) :]
    numbers = []
    for field, suffix in zip(fields, suffixes):
        digits = field[: -len(suffix)] if field.endswith(suffix) else ""
        if not digits.isdigit() or not digits.isascii():
            raise ValueError(f"{field!r} is not <number>{suffix}")
        numbers.append(int(digits))
    c, g, gb = numbers if len(numbers) == 3 else [numbers[0], *numbers]
    attributes: tuple[str, ...] = ()
    if len(parts) == 2:
        items = parts[1].split(",")
        if len(set(items)) != len(items) or not all(_ATTRIBUTE.match(a) and not a.endswith(".") for a in items):
            raise ValueError(f"attributes {parts[1]!r}: unique, comma separated, a letter first, letters, digits, dots")
        attributes = tuple(sorted(items))
    return c, g, gb, attributes, len(minus) == 2 and len(plus) == 1


def _profile_key(text: str) -> tuple[int, int, tuple[str, ...], bool] | None:
    """What identifies a GPU instance profile (G, GB, attributes, negative); None for a name that is none."""
    try:
        _c, g, gb, attributes, negative = parse_profile(text)
    except ValueError:
        return None
    return g, gb, attributes, negative


# -- parsing --------------------------------------------------------------------------------------------


def parse_configs(value: Any, where: str = "mig_configs") -> dict[str, list[dict[str, Any]]]:
    """The configs of ``value`` (mig-parted's ``mig-configs`` mapping, or a whole file with ``version``), each
    entry as ``{"devices": "all" | [int], "mig_enabled", "mig_devices": {profile: count}, "device_filter":
    [(device, vendor, subsystem | None)] | None, "where"}``."""
    if isinstance(value, dict) and isinstance(value.get("version"), str):
        if value["version"] != VERSION:
            raise LayoutError(f"{where}.version: unknown version {value['version']!r} (mig-parted reads {VERSION})")
        extra = sorted(set(value) - {"version", "mig-configs"})
        if extra:
            raise LayoutError(f"{where}.{extra[0]}: unexpected field (a mig-parted file has version, mig-configs)")
        value, where = value.get("mig-configs"), f"{where}.mig-configs"
    if not isinstance(value, dict) or not value:
        raise LayoutError(f"{where}: a mapping of config names to their entries, with at least one config")
    configs = {}
    for name, entries in value.items():
        path = f"{where}.{name}"
        if not isinstance(name, str) or not name:
            raise LayoutError(f"{where}: config names are non-empty strings, not {name!r}")
        if not isinstance(entries, list) or not entries:
            raise LayoutError(f"{path}: a list of at least one entry ({{devices, mig-enabled, mig-devices}})")
        configs[name] = [_entry(entry, f"{path}[{i}]") for i, entry in enumerate(entries)]
    return configs


def _entry(entry: Any, where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise LayoutError(f"{where}: an entry is a mapping (devices, mig-enabled, mig-devices, device-filter)")
    for key in entry:
        if key not in ENTRY_KEYS:
            raise LayoutError(f"{where}.{key}: unexpected field (devices, mig-enabled, mig-devices, device-filter)")
    for key in ("devices", "mig-enabled"):
        if key not in entry:
            raise LayoutError(f"{where}.{key}: missing required field")
    devices = entry["devices"]
    if isinstance(devices, str):
        if devices != "all":
            raise LayoutError(f"{where}.devices: 'all' or a list of GPU indices, not {devices!r}")
    elif not isinstance(devices, list) or not all(_whole(d) for d in devices):
        raise LayoutError(f"{where}.devices: 'all' or a list of GPU indices (whole numbers >= 0), not {devices!r}")
    enabled = entry["mig-enabled"]
    if not isinstance(enabled, bool):
        raise LayoutError(f"{where}.mig-enabled: true or false, not {enabled!r}")
    counts = entry.get("mig-devices")
    if enabled and counts is None:
        raise LayoutError(f"{where}.mig-devices: missing required field when mig-enabled is true")
    if counts is None:
        counts = {}
    if not isinstance(counts, dict):
        raise LayoutError(f"{where}.mig-devices: a mapping of MIG profile to count, not {counts!r}")
    if counts and not enabled:
        raise LayoutError(f"{where}.mig-devices: MIG devices included when mig-enabled is false")
    for profile, count in counts.items():
        try:
            parse_profile(profile)
        except ValueError as exc:
            raise LayoutError(f"{where}.mig-devices.{profile}: not a MIG profile ({exc})") from None
        if not _whole(count):
            raise LayoutError(f"{where}.mig-devices.{profile}: the count is a whole number >= 0, not {count!r}")
    if counts and not any(counts.values()):
        raise LayoutError(f"{where}.mig-devices: all counts are 0 (use {{}} for MIG mode on without instances)")
    return {
        "devices": devices,
        "mig_enabled": enabled,
        "mig_devices": dict(counts),
        "device_filter": _filters(entry.get("device-filter"), f"{where}.device-filter"),
        "where": where,
    }


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _filters(value: Any, where: str) -> list[tuple[int, int, tuple[int, int] | None]] | None:
    if value is None or value == "":
        return None
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise LayoutError(f"{where}: a PCI device ID (0x20B010DE) or a list of them, not {value!r}")
    return [device_id(text, f"{where}[{i}]" if isinstance(value, list) else where) for i, text in enumerate(texts)]


def _go_uint(text: str) -> int:
    """A number as Go's ``strconv.ParseUint(s, 0, 32)`` reads it (``0x`` hex, ``0b`` binary, ``0o`` or a
    leading ``0`` octal, else decimal; no underscores here)."""
    lowered = text.lower()
    if re.fullmatch(r"0x[0-9a-f]+", lowered):
        number = int(lowered[2:], 16)
    elif re.fullmatch(r"0b[01]+", lowered):
        number = int(lowered[2:], 2)
    elif re.fullmatch(r"0o?[0-7]+", lowered):
        number = int(lowered.lstrip("0o") or "0", 8)
    elif re.fullmatch(r"[1-9][0-9]*|0", lowered):
        number = int(lowered)
    else:
        raise ValueError(text)
    if number >= 1 << 32:
        raise ValueError(text)
    return number


def device_id(text: str, where: str) -> tuple[int, int, tuple[int, int] | None]:
    """``(device, vendor, (subsystem device, subsystem vendor) | None)`` of a device-filter string."""
    parts = text.split(":")
    try:
        if len(parts) > 2:
            raise ValueError(text)
        numbers = [_go_uint(part) for part in parts]
    except ValueError:
        raise LayoutError(
            f"{where}: {text!r} is not a PCI device ID (device and vendor as one 32-bit number: 0x20B010DE, "
            "optionally :0x<subsystem device><subsystem vendor>)"
        ) from None
    sub = (numbers[1] >> 16, numbers[1] & 0xFFFF) if len(numbers) == 2 else None
    return numbers[0] >> 16, numbers[0] & 0xFFFF, sub


def choose(configs: dict[str, list[dict[str, Any]]], name: Any) -> list[dict[str, Any]]:
    """The entries of the config ``name`` (the module's ``layout``)."""
    if not isinstance(name, str) or not name:
        raise LayoutError("layout: the name of the config to apply is required with mode static")
    if name not in configs:
        known = ", ".join(sorted(configs))
        raise LayoutError(f"layout: no config {name!r} in mig_configs (its configs: {known})")
    return configs[name]


# -- the node's GPUs and the selector ----------------------------------------------------------------------


def _matches_filter(entry: dict[str, Any], gpu: dict[str, Any]) -> bool:
    if not entry["device_filter"]:
        return True
    mine = (gpu["device_id"], gpu["vendor_id"])
    return any(
        (device, vendor) == mine and (sub is None or sub == gpu.get("subsystem"))
        for device, vendor, sub in entry["device_filter"]
    )


def _matches_devices(entry: dict[str, Any], gpu: dict[str, Any]) -> bool:
    return entry["devices"] == "all" or gpu["index"] in entry["devices"]


def normalize_pci(value: str) -> str:
    """``dddd:bb:dd.f`` of a PCI address (NVML's ``00000000:18:00.0`` too); ValueError where it is none."""
    text = value.strip().lower() if isinstance(value, str) else ""
    if not _PCI.match(text):
        raise ValueError(value)
    if text.count(":") == 1:
        return f"0000:{text}"
    domain, rest = text.split(":", 1)
    return f"{int(domain, 16):04x}:{rest}"


def describe(gpu: dict[str, Any]) -> str:
    """``GPU 0000:18:00.0 (NVIDIA A100-SXM4-40GB)``."""
    return f"GPU {gpu['pci_address']} ({gpu.get('name') or 'unknown model'})"


def _selector(selector: Any) -> dict[str, list[Any]]:
    if selector is None:
        return {}
    if not isinstance(selector, dict):
        raise LayoutError(f"gpus: a mapping with {', '.join(SELECTOR_KEYS)}, not {selector!r}")
    checked: dict[str, list[Any]] = {}
    for key, values in selector.items():
        if key not in SELECTOR_KEYS:
            raise LayoutError(f"gpus.{key}: unknown key ({', '.join(SELECTOR_KEYS)})")
        if values is None:
            continue
        if not isinstance(values, list):
            raise LayoutError(f"gpus.{key}: a list, not {values!r}")
        checked[key] = []
        for i, item in enumerate(values):
            checked[key].append(_selector_item(key, item, f"gpus.{key}[{i}]"))
    return checked


def _selector_item(key: str, item: Any, where: str) -> Any:
    if key == "indices":
        if not _whole(item):
            raise LayoutError(f"{where}: a GPU index is a whole number >= 0, not {item!r}")
        return item
    if not isinstance(item, str) or not item:
        raise LayoutError(f"{where}: a non-empty string, not {item!r}")
    if key == "pci_addresses":
        try:
            return normalize_pci(item)
        except ValueError:
            raise LayoutError(f"{where}: {item!r} is not a PCI address (0000:18:00.0)") from None
    if key == "device_ids":
        if not _DEVICE_ID.match(item.lower()):
            raise LayoutError(f"{where}: {item!r} is not a PCI device ID (4 hex digits: 0x20b0)")
        return int(item, 16)
    return item


def select(gpus: list[dict[str, Any]], selector: Any) -> list[dict[str, Any]]:
    """The GPUs the module manages. ``gpus``: the node's, each ``{"index", "pci_address", "name", "device_id",
    "vendor_id", "subsystem", "mig_capable"}``. A PCI address or index of no GPU, or of one without MIG, is
    refused; device IDs and models pick among the MIG-capable GPUs."""
    wanted = _selector(selector)
    by_address = {g["pci_address"]: g for g in gpus}
    by_index = {g["index"]: g for g in gpus}
    for key, table in (("pci_addresses", by_address), ("indices", by_index)):
        for i, item in enumerate(wanted.get(key, [])):
            gpu = table.get(item)
            if gpu is None:
                found = ", ".join(f"{g['index']}: {g['pci_address']}" for g in gpus) or "none"
                raise LayoutError(f"gpus.{key}[{i}]: no GPU {item} on this node (its GPUs: {found})")
            if not gpu["mig_capable"]:
                raise LayoutError(f"gpus.{key}[{i}]: {describe(gpu)} is not MIG-capable")
    chosen = []
    for gpu in gpus:
        if not gpu["mig_capable"]:
            continue
        if "pci_addresses" in wanted and gpu["pci_address"] not in wanted["pci_addresses"]:
            continue
        if "indices" in wanted and gpu["index"] not in wanted["indices"]:
            continue
        if "device_ids" in wanted and gpu["device_id"] not in wanted["device_ids"]:
            continue
        if "models" in wanted and not any(fnmatch.fnmatchcase(gpu.get("name") or "", m) for m in wanted["models"]):
            continue
        chosen.append(gpu)
    if any(wanted.values()) and not chosen:
        shown = ", ".join(f"{describe(g)} 0x{g['device_id']:04x}" for g in gpus if g["mig_capable"]) or "none"
        raise LayoutError(f"gpus: selects no MIG-capable GPU of this node (its MIG-capable GPUs: {shown})")
    return chosen


# -- what each GPU should become ------------------------------------------------------------------------


def wanted(entries: list[dict[str, Any]], gpus: list[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """Per selected GPU (by PCI address) the entry of the chosen config that matches it (mig-parted's match:
    device filter, then devices), or None where none does; a GPU two entries match is refused."""
    found: dict[str, dict[str, Any] | None] = {}
    for gpu in gpus:
        matching = [e for e in entries if _matches_filter(e, gpu) and _matches_devices(e, gpu)]
        if len(matching) > 1:
            raise LayoutError(
                f"{matching[1]['where']}: {describe(gpu)} (index {gpu['index']}) is matched by "
                f"{matching[0]['where']} too; give each GPU one entry"
            )
        found[gpu["pci_address"]] = matching[0] if matching else None
    return found


def profile_counts(entry: dict[str, Any], state: dict[str, Any]) -> dict[str, int]:
    """The entry's counts by this GPU's NVML profile names (MIG mode on: ``state["profiles"]``): a profile the
    GPU lacks, or a compute-instance profile (``1c.3g.20gb``), is refused naming the GPU and the profile."""
    profiles = state.get("profiles") or []
    by_key = {}
    for profile in profiles:
        key = _profile_key(profile["name"])
        if key is not None:
            by_key.setdefault(key, profile["name"])
    counts: dict[str, int] = {}
    for name, count in entry["mig_devices"].items():
        where = f"{entry['where']}.mig-devices.{name}"
        c, g, gb, attributes, negative = parse_profile(name)
        if c != g:
            raise LayoutError(
                f"{where}: compute-instance profiles ({c}c of a {g}g instance) are not supported: the collection "
                "makes one compute instance spanning each GPU instance"
            )
        nvml_name = by_key.get((g, gb, attributes, negative))
        if nvml_name is None:
            offered = ", ".join(p["name"] for p in profiles) or "none: MIG mode is off"
            raise LayoutError(f"{where}: {describe(state)} has no MIG profile {name} (its profiles: {offered})")
        if count:
            counts[nvml_name] = counts.get(nvml_name, 0) + count
    return counts


def check_fits(entry: dict[str, Any], state: dict[str, Any], counts: dict[str, int]) -> list[dict[str, Any]]:
    """Placements for ``counts`` on the empty GPU (``packing.pack``); refused naming the entry and the GPU."""
    try:
        return packing.pack(state["profiles"], [], counts)
    except packing.PackingError as exc:
        raise LayoutError(f"{entry['where']}.mig-devices: the counts do not fit {describe(state)}: {exc}") from None
