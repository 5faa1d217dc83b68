# SPDX-License-Identifier: Apache-2.0
"""Parsers of sysfs and procfs file contents (pure functions, unit-tested on their own)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


def parse_cpulist(text: str | None) -> list[int] | None:
    """Parse a kernel cpulist (``0-3,8,10-11``) into sorted CPU ids."""
    if text is None:
        return None
    cpus = set()
    for part in text.replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        stride = 1
        if ":" in part:  # 0-15:2/4 groups are rare; keep the stride only
            part, _colon, grp = part.partition(":")
            stride = int(grp.split("/")[0])
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                cpus.update(range(int(lo), int(hi) + 1, max(stride, 1)))
            else:
                cpus.add(int(lo))
        except ValueError:
            return None
    return sorted(cpus)


def parse_cpumask(text: str | None) -> list[int] | None:
    """Parse a kernel cpumask (``00000000,0000ff00``) into CPU ids."""
    if text is None:
        return None
    try:
        value = int(text.replace(",", "").strip() or "0", 16)
    except ValueError:
        return None
    cpus = []
    bit = 0
    while value:
        if value & 1:
            cpus.append(bit)
        value >>= 1
        bit += 1
    return cpus


def format_cpulist(cpus: Iterable[int]) -> str:
    """Inverse of :func:`parse_cpulist`: ``[0,1,2,5]`` -> ``0-2,5``."""
    out = []
    run: list[int] = []
    for cpu in sorted(cpus):
        if run and cpu == run[-1] + 1:
            run.append(cpu)
            continue
        if run:
            out.append(_run(run))
        run = [cpu]
    if run:
        out.append(_run(run))
    return ",".join(out)


def _run(run: list[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"


def parse_int(text: str | None, base: int = 10) -> int | None:
    if text is None or text == "":
        return None
    try:
        return int(text, base)
    except ValueError:
        return None


_HEX_WIDTHS = {4: "04x", 6: "06x"}


def hex_id(value: int | None, width: int) -> str | None:
    return None if value is None else "0x" + format(value, _HEX_WIDTHS[width])


def _leading_number(text: str | None, unit: str) -> float | None:
    """``"16.0 GT/s PCIe"``, ``"GT/s"`` -> 16.0; None when the unit differs."""
    if not text:
        return None
    words = text.split()
    if len(words) < 2 or not words[1].startswith(unit):
        return None
    try:
        return float(words[0])
    except ValueError:
        return None


def parse_link_speed(text: str | None) -> float | None:
    """``"16.0 GT/s PCIe"`` -> 16.0; ``"Unknown"`` -> None."""
    return _leading_number(text, "GT/s")


def parse_rate(text: str | None) -> float | None:
    """RDMA port rate ``"400 Gb/sec (4X NDR)"`` -> 400.0."""
    return _leading_number(text, "Gb/sec")


def parse_enum(text: str | None) -> str | None:
    """``"4: ACTIVE"`` -> ``"ACTIVE"``."""
    if text is None:
        return None
    return text.partition(":")[2].strip() or text.strip()


def parse_uevent(text: str | None) -> dict[str, str]:
    result: dict[str, str] = {}
    if text:
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                result[key] = value
    return result


def parse_nvidia_information(text: str | None) -> dict[str, Any]:
    """Parse ``/proc/driver/nvidia/gpus/<bdf>/information``."""
    fields: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip():
            fields[key.strip()] = value.strip()
    if not fields:
        return {}
    return {
        "minor": parse_int(fields.get("Device Minor")),
        "uuid": fields.get("GPU UUID") or None,
        "model": fields.get("Model") or None,
    }
