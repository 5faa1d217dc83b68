# SPDX-License-Identifier: Apache-2.0
"""What a pod takes under the ``mig`` policy: the smallest profile holding its memory and its GPU share.

The rules (docs/replay.md, "What a pod takes"):

- **Memory**: the pod's peak measured use where the replay has ``usage`` samples of it (``measured``), else the
  trace's ``gpu_memory`` (``gpu_memory``), else none (``compute_share``). A profile's memory is the figure its
  GPU's state gives: NVML's where the probe read it, else the documented one (marked ``documented``).
- **Headroom** (``mig_headroom``, a fraction of the device's memory, default 0.05) is kept free of a **measured**
  peak only: a peak is a sample, and the next run may use a little more, so a profile holds it only where
  ``peak <= memory x (1 - headroom)``. A trace's ``gpu_memory`` is a request, the amount the pod asks to be
  guaranteed; the scheduler fits requests exactly, so it fits as it is (no headroom).
- **Compute**: the pod's share of the GPU (the trace's ``gpus`` below 1, openb's ``gpu_milli``) in compute slices,
  rounded up (``0.5`` of 7: 4). The usage's ``sm_ratio`` is a share of time, not of multiprocessors: not used.
- The smallest profile (the driver's order: memory slices, then compute slices; no ``+me`` profile) holding
  both; where none does, the GPU whole on a GPU published whole where the memory fits the GPU's (with the
  headroom for a measured peak); else nothing on that GPU.
- **What decided** (``decided_by``): ``memory`` (the profile memory alone picks, compute alone a smaller one),
  ``compute`` (the other way round), ``both`` (each alone picks the same profile, or only both together pick
  it), ``whole`` (a pod of whole GPUs: nothing was rounded). A share that no profile holds is decided by memory.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.replay import GPU_MILLI, ReplayError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ansible_collections.aligned.dra.plugins.module_utils.controller.replay.trace import Pod

# What sized a pod, and what decided its profile (the result's ``sized_by`` and ``decided_by``).
BASES = ("measured", "gpu_memory", "compute_share", "whole")
DECIDERS = ("memory", "compute", "both", "whole")
# Kept free of a measured peak, a fraction of the device's memory (the usage advice's setting of the same name).
DEFAULT_HEADROOM = mig_model.DEFAULT_HEADROOM
GIB = 1 << 30
MIB = 1 << 20


def headroom_of(value: Any) -> float:
    """``mig_headroom`` checked: a fraction of the device's memory, at least 0 and below 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ReplayError(f"mig_headroom: {value!r} is not a fraction (0.05 keeps 5 % of a profile's memory free)")
    try:
        found = float(value)
    except ValueError:
        raise ReplayError(
            f"mig_headroom: {value!r} is not a fraction (0.05 keeps 5 % of a profile's memory free)"
        ) from None
    if not 0.0 <= found < 1.0:
        raise ReplayError(
            f"mig_headroom: {value!r} is out of range (a fraction of a profile's memory: at least 0, below 1)"
        )
    return found


def sizing_of(pod: Pod, measured: int | None) -> tuple[tuple, int]:
    """``((basis, memory, milli), devices)``: what a GPU pod is sized by, and how many devices it takes.

    ``basis``: ``whole`` (whole GPUs: ``milli`` is their count), ``measured`` or ``gpu_memory`` (``memory`` in
    bytes), ``compute_share`` (no memory known); ``milli`` the pod's share of one GPU.
    """
    if pod.num_gpu > 1 or pod.gpu_milli >= GPU_MILLI:
        return ("whole", None, pod.num_gpu), pod.num_gpu
    if measured is not None:
        return ("measured", int(measured), pod.gpu_milli), 1
    if pod.gpu_memory_bytes is not None:
        return ("gpu_memory", int(pod.gpu_memory_bytes), pod.gpu_milli), 1
    return ("compute_share", None, pod.gpu_milli), 1


def _name(profile: dict[str, Any] | None) -> str | None:
    return None if profile is None else str(profile["name"])


def target(
    profiles: list[dict[str, Any]], whole: bool, gpu_memory: int, sizing: tuple, headroom: float
) -> tuple[str | None | bool, str]:
    """``(what the pod takes, what decided it)`` on a GPU of ``profiles``: a profile's name, None (the GPU
    whole, where ``whole``: the GPU is published whole) or False (nothing on this GPU holds it)."""
    basis, memory, milli = sizing
    if basis == "whole":
        return (None if whole else False), "whole"
    room = headroom if basis == "measured" else 0.0
    fraction = milli / GPU_MILLI
    both = _name(mig_model.smallest_profile(profiles, memory_bytes=memory, compute_fraction=fraction, headroom=room))
    decided = mig_model.decided_by(profiles, memory, fraction, room, both)
    if both is not None:
        return both, decided
    if whole and (memory is None or memory <= gpu_memory * (1.0 - room)):
        return None, decided
    return False, decided


def amount_text(sizing: tuple) -> str:
    """The pod's size in words: ``4 GiB of memory (gpu_memory) and 500 milli of a GPU's compute``."""
    basis, memory, milli = sizing
    if basis == "whole":
        return f"{milli} whole GPU(s)"
    compute = f"{milli} milli of a GPU's compute"
    if memory is None:
        return compute
    said = "measured peak" if basis == "measured" else "gpu_memory"
    return f"{memory / GIB:.3g} GiB of memory ({said}) and {compute}"


def profile_sizes(kinds: list[Any]) -> list[dict[str, Any]]:
    """Per GPU model, mode and source, the profiles a pod may be rounded to, with the figures the replay used:
    ``memory_bytes`` (NVML's where the probe read it, else the documented one: ``source``), ``memory_slices``,
    ``compute_slices``."""
    found: dict[tuple, dict[str, Any]] = {}
    for kind in kinds:
        key = (kind.model, kind.mode, kind.source)
        entry = found.setdefault(
            key, {"model": kind.model, "mode": kind.mode, "source": kind.source, "gpus": 0, "profiles": {}}
        )
        entry["gpus"] += kind.gpus
        for profile in kind.profiles:
            entry["profiles"][str(profile["name"])] = {
                "memory_bytes": int(profile.get("memory_bytes") or 0),
                "memory_slices": max((int(p["size"]) for p in profile.get("placements") or []), default=0),
                "compute_slices": int(profile.get("slices") or 0),
            }
        if kind.whole:
            entry["gpu_whole_memory_bytes"] = kind.memory_bytes
    return [found[key] for key in sorted(found)]
