# SPDX-License-Identifier: Apache-2.0
"""The MIG geometry NVIDIA documents per GPU model, by PCI device ID: marked ``documented``.

NVML on the node is authoritative (profile sizes and placements change with the GPU driver's version); the
controller uses this table only where it has no NVML answer for a GPU: before the probe ran, on a GPU whose
MIG mode is off (NVML lists no profiles then), or where the probe could not read NVML. Each profile as
:mod:`node.mig.nvml_state` describes one (``name``, ``slices`` (compute slices), ``instance_count``,
``placements`` in memory slices, ``ofa_engines``), plus ``memory_gb`` (the figure in its name) and
``source: "documented"``. Of the engines only the optical flow accelerator (OFA) is listed: it is the figure that
tells a ``+me`` profile from its plain twin, and its counter refuses a second ``+me`` partition (one OFA per GPU:
the ``+me`` profile or the GPU whole); the other engines' figures are not in the guide's table.

Figures from NVIDIA's MIG user guide, "Supported MIG Profiles" (A30, A100 40GB and 80GB, H100 80GB and
94GB (NVL), H200 141GB, B200 180GB); the ``+me`` profiles (media extensions) take one 1g placement and
exist once per GPU; the ``+me`` profiles and the full profile (``7g``; ``4g.24gb`` on an A30) have one OFA engine,
the others none. Each model carries its architecture (``ampere``, ``hopper``, ``blackwell``, NVML's names): an
Ampere GPU changes MIG mode only with a GPU reset, so in dynamic MIG its GPU whole is not published
(``dra/mig.publishes_whole``). Runs on the controller; standard library only.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DOCUMENTED = "documented"
NVML = "nvml"
UNKNOWN = "unknown"


# (name, compute slices, instance count, placement starts, placement size, OFA engines)
Profile = tuple[str, int, int, tuple[int, ...], int, int]


def _eight(one: int, two: int, three: int, seven: int) -> tuple[Profile, ...]:
    """The profiles of a GPU with 8 memory slices and 7 compute slices (A100, H100, H200, B200): ``(name,
    compute slices, instance count, placement starts, placement size, OFA engines)``; the names from the memory
    per 1, 2, 4 and 8 memory slices."""
    return (
        (f"1g.{one}gb", 1, 7, (0, 1, 2, 3, 4, 5, 6), 1, 0),
        (f"1g.{one}gb+me", 1, 1, (0, 1, 2, 3, 4, 5, 6), 1, 1),
        (f"1g.{two}gb", 1, 4, (0, 2, 4, 6), 2, 0),
        (f"2g.{two}gb", 2, 3, (0, 2, 4), 2, 0),
        (f"3g.{three}gb", 3, 2, (0, 4), 4, 0),
        (f"4g.{three}gb", 4, 1, (0,), 4, 0),
        (f"7g.{seven}gb", 7, 1, (0,), 8, 1),
    )


_A30: tuple[Profile, ...] = (
    ("1g.6gb", 1, 4, (0, 1, 2, 3), 1, 0),
    ("1g.6gb+me", 1, 1, (0, 1, 2, 3), 1, 1),
    ("2g.12gb", 2, 2, (0, 2), 2, 0),
    ("2g.12gb+me", 2, 1, (0, 2), 2, 1),
    ("4g.24gb", 4, 1, (0,), 4, 1),
)
# A100 40GB: 1g.10gb (two memory slices) since R525, as the guide lists it
_A100_40 = _eight(5, 10, 20, 40)
_A100_80 = _eight(10, 20, 40, 80)
_H100_80 = _eight(10, 20, 40, 80)
_H100_94 = _eight(12, 24, 47, 94)
_H200 = _eight(18, 35, 71, 141)
_B200 = _eight(23, 45, 90, 180)

AMPERE, HOPPER, BLACKWELL = "ampere", "hopper", "blackwell"  # node/mig/nvml_state's names

# PCI device ID (lower case, as the probe writes it) -> (model, architecture, memory slices, profiles)
MODELS: dict[str, tuple[str, str, int, tuple[Profile, ...]]] = {
    "0x20b7": ("A30", AMPERE, 4, _A30),
    "0x20b0": ("A100-SXM4-40GB", AMPERE, 8, _A100_40),
    "0x20f1": ("A100-PCIE-40GB", AMPERE, 8, _A100_40),
    "0x20b2": ("A100-SXM4-80GB", AMPERE, 8, _A100_80),
    "0x20b5": ("A100-PCIE-80GB", AMPERE, 8, _A100_80),
    "0x2330": ("H100-SXM5-80GB", HOPPER, 8, _H100_80),
    "0x2331": ("H100-PCIE-80GB", HOPPER, 8, _H100_80),
    "0x2321": ("H100-NVL-94GB", HOPPER, 8, _H100_94),
    "0x2335": ("H200-SXM-141GB", HOPPER, 8, _H200),
    "0x233b": ("H200-NVL-141GB", HOPPER, 8, _H200),
    "0x2901": ("B200-180GB", BLACKWELL, 8, _B200),
}


def device_id(value: Any) -> str | None:
    """A PCI device ID as the table keys it (``0x20b0``): from ``0x20B0``, ``20b0`` or mig-parted's
    ``device-filter`` form ``0x20B010DE`` (device ID, then the vendor's); None when it is not one."""
    text = str(value).strip().lower()
    text = text[2:] if text.startswith("0x") else text
    if len(text) == 8 and text.endswith("10de"):
        text = text[:4]
    if len(text) != 4 or any(c not in "0123456789abcdef" for c in text):
        return None
    return "0x" + text


def documented(pci_device_id: Any) -> dict[str, Any] | None:
    """The documented geometry of a GPU model: ``{"model", "architecture", "memory_slices", "profiles",
    "source"}``, or None for a device ID the table does not know (no MIG, or a model NVIDIA documents
    elsewhere)."""
    key = device_id(pci_device_id)
    if key not in MODELS:
        return None
    model, architecture, memory_slices, profiles = MODELS[key]
    return {
        "model": model,
        "architecture": architecture,
        "device_id": key,
        "memory_slices": memory_slices,
        "source": DOCUMENTED,
        "profiles": [
            {
                "id": index,
                "name": name,
                "slices": slices,
                "memory_gb": int(name.split(".", 1)[1].split("gb", 1)[0]),
                "instance_count": count,
                "placements": [{"start": start, "size": size} for start in starts],
                "ofa_engines": ofa,
            }
            for index, (name, slices, count, starts, size, ofa) in enumerate(profiles)
        ],
    }


def of_gpu(device: dict[str, Any]) -> dict[str, Any] | None:
    """A probed GPU's geometry: NVML's profiles from its ``mig`` entry where the probe read them (MIG mode on),
    else the documented one for its device ID; None for a GPU without MIG (NVML says so, or no table entry).

    ``architecture`` is NVML's where the probe read the GPU (also with MIG mode off, when it lists no
    profiles), else the table's; ``unknown`` where neither names one (the device model then fails closed)."""
    entry = device.get("mig")
    readable = isinstance(entry, dict) and bool(entry.get("readable"))
    probed = entry.get("architecture") if readable and entry.get("architecture") not in (None, "unknown") else None
    if readable:
        if not entry.get("mig_capable"):
            return None
        if entry.get("profiles"):
            key = device_id(device.get("device_id"))
            return {
                "model": entry.get("name") or device.get("device_id"),
                "architecture": probed or (MODELS[key][1] if key in MODELS else UNKNOWN),
                "device_id": key,
                "memory_slices": entry.get("memory_slices"),
                "source": NVML,
                "profiles": entry["profiles"],
            }
    found = documented(device.get("device_id"))
    if found is not None and probed:
        found["architecture"] = probed
    return found
