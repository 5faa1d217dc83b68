# SPDX-License-Identifier: Apache-2.0
"""Layouts: finding and loading the YAML files, and reading their values.

PyYAML is imported only when a layout file is loaded, so the rest of the
package (the VF writer the fake kernel uses on Molecule nodes) needs nothing
but the standard library.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

Spec = dict[str, Any]

LAYOUT_DIR = Path(__file__).resolve().parents[3] / "fixtures" / "layouts"

_LINK_SPEEDS = {1: "2.5", 2: "5.0", 3: "8.0", 4: "16.0", 5: "32.0", 6: "64.0"}


class LayoutError(ValueError):
    """A layout description is inconsistent or incomplete."""


def integer(value: Any, what: str) -> int:
    """An integer of a layout: ``16``, ``"0x10de"``; not a boolean."""
    if isinstance(value, bool):
        raise LayoutError(f"{what}: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value, 0)
        except ValueError:
            pass
    raise LayoutError(f"{what}: expected an integer, got {value!r}")


def parse_link(value: Any, what: str) -> tuple[str, str] | None:
    """Return (speed text, width text) from ``gen5x16`` / mapping / None."""
    if value is None or value == "none":
        return None
    if isinstance(value, str):
        text = value.lower().replace(" ", "")
        if text.startswith("gen") and "x" in text:
            gen, width = text[3:].split("x", 1)
            speed = _LINK_SPEEDS.get(int(gen))
            if speed is None:
                raise LayoutError(f"{what}: unknown PCIe generation in {value!r}")
            return f"{speed} GT/s PCIe", str(int(width))
        raise LayoutError(f"{what}: link must look like 'gen5x16', got {value!r}")
    if isinstance(value, dict):
        if "gen" in value:
            speed = f"{_LINK_SPEEDS[int(value['gen'])]} GT/s PCIe"
        else:
            speed = str(value["speed"])
        return speed, str(int(value.get("width", 16)))
    raise LayoutError(f"{what}: bad link {value!r}")


def parse_addr(entry: Spec, default_dev: int, what: str) -> tuple[int, int]:
    """(device, function) of a node: ``addr: "DD.F"`` or ``dev:``/``fn:``."""
    if "addr" in entry:
        text = str(entry["addr"])
        if "." not in text:
            raise LayoutError(f"{what}: addr must be 'DD.F' (quoted), got {text!r}")
        dev_s, fn_s = text.split(".", 1)
        dev, fn = int(dev_s, 16), int(fn_s, 16)
    else:
        dev = integer(entry.get("dev", default_dev), f"{what}.dev")
        fn = integer(entry.get("fn", 0), f"{what}.fn")
    if not (0 <= dev < 32 and 0 <= fn < 8):
        raise LayoutError(f"{what}: device {dev:#x} function {fn} out of range")
    return dev, fn


def layout_path(name_or_path: str | Path) -> Path:
    """Resolve a layout name (``dgx-h100``) or a path to its YAML file."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yml", ".yaml") or candidate.exists():
        return candidate
    return LAYOUT_DIR / f"{name_or_path}.yml"


def load_layout(name_or_path: str | Path) -> Spec:
    """Load a layout by stem (looked up in ``tests/fixtures/layouts``) or path."""
    import yaml

    path = layout_path(name_or_path)
    with open(path, encoding="utf-8") as fh:
        spec = yaml.safe_load(fh)
    if not isinstance(spec, dict):
        raise LayoutError(f"{path}: a layout must be a YAML mapping")
    spec.setdefault("name", path.stem)
    return spec
