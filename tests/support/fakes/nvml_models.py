# SPDX-License-Identifier: Apache-2.0
"""FAKE NVML, its GPU models, for the tests (never shipped): what ``nvml_mig`` offers per model.

Figures from NVIDIA's MIG user guide ("Supported MIG Profiles") and ``nvidia-smi mig -lgip`` / ``-lgipp`` as
the GPUs answer them: profile IDs, instance counts, multiprocessors, engines, memory and placements. ``index``
is the ``NVML_GPU_INSTANCE_PROFILE_*`` value a profile is asked by (``nvmlDeviceGetGpuInstanceProfileInfo``),
``id`` the profile ID NVML answers and every later call takes.

- ``A100-SXM4-40GB`` (Ampere, 0x20B0): 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb; 8 memory slices;
- ``H100-SXM5-80GB`` (Hopper, 0x2330): 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb;
- ``RTX-PRO-6000-96GB`` (RTX PRO 6000 Blackwell Server Edition, Blackwell, 0x2BB5): profile variants of one
  size as NVML offers them: ``1g.24gb`` with ``+me`` (an OFA engine, once per GPU), ``+gfx`` (graphics),
  ``+me.all`` (every media engine, once per GPU) and ``-me`` (no media engine); ``2g.48gb`` with ``+gfx``,
  ``+me.all`` and ``-me``; ``4g.96gb`` and ``4g.96gb+gfx``. Its memory is a grid of 12 placement units:
  1g at 0, 3, 6, 9 (3 units), 2g at 0, 6 (6 units), 4g at 0 (12 units). Variants share one size's
  placements, and folding ``+``, ``-`` and ``.`` of their names gives one token for ``1g.24gb+me`` and
  ``1g.24gb-me``: the collision the device model must never publish;
- ``L40S`` (Ada, 0x26B9): no MIG.
"""

from __future__ import annotations

from typing import NamedTuple

MIB = 1 << 20


class Profile(NamedTuple):
    """A GPU instance profile: ``index`` the NVML_GPU_INSTANCE_PROFILE_* value, ``size`` its placements' memory
    slices, ``slices`` NVML's sliceCount (compute slices)."""

    index: int
    id: int
    name: str
    slices: int
    instances: int
    sms: int
    engines: tuple[int, int, int, int, int]  # copy engines, decoders, encoders, jpeg, ofa
    memory_mib: int
    size: int
    starts: tuple[int, ...]


class GpuModel(NamedTuple):
    name: str
    architecture: int
    device_id: int
    memory_mib: int
    profiles: tuple[Profile, ...]


def memory_units(model: GpuModel) -> int:
    """The memory slices of a model: the end of its furthest placement (8 on A100 and H100, 12 on RTX PRO)."""
    return max((start + p.size for p in model.profiles for start in p.starts), default=0)


def gi_id(size: int, start: int, units: int = 8) -> int:
    """The GPU instance ID NVML gives a placement (its swizzle ID): the whole 0, then each halving in turn
    (on 8 slices: size 4 -> 1 + start/4, size 2 -> 3 + start/2, size 1 -> 7 + start; on 12: size 6 ->
    1 + start/6, size 3 -> 3 + start/3)."""
    return units // size - 1 + start // size


_SEVEN = tuple(range(7))
# NVML_GPU_INSTANCE_PROFILE_*: 1_SLICE 0, 2_SLICE 1, 4_SLICE 3, 1_SLICE_REV1 7 (+me), 1_SLICE_GFX 10, 2_SLICE_GFX 11,
# 4_SLICE_GFX 12, 1_SLICE_NO_ME 13, 2_SLICE_NO_ME 14, 1_SLICE_ALL_ME 15, 2_SLICE_ALL_ME 16
_QUARTERS, _HALVES = (0, 3, 6, 9), (0, 6)
MODELS = {
    "A100-SXM4-40GB": GpuModel(
        "NVIDIA A100-SXM4-40GB",
        7,
        0x20B0,
        40960,
        (
            Profile(0, 19, "1g.5gb", 1, 7, 14, (1, 0, 0, 0, 0), 4864, 1, _SEVEN),
            Profile(1, 14, "2g.10gb", 2, 3, 28, (2, 1, 0, 0, 0), 9856, 2, (0, 2, 4)),
            Profile(2, 9, "3g.20gb", 3, 2, 42, (3, 2, 0, 0, 0), 19968, 4, (0, 4)),
            Profile(3, 5, "4g.20gb", 4, 1, 56, (4, 2, 0, 0, 0), 19968, 4, (0,)),
            Profile(4, 0, "7g.40gb", 7, 1, 98, (7, 5, 0, 1, 1), 40192, 8, (0,)),
        ),
    ),
    "H100-SXM5-80GB": GpuModel(
        "NVIDIA H100 80GB HBM3",
        9,
        0x2330,
        81559,
        (
            Profile(0, 19, "1g.10gb", 1, 7, 16, (1, 1, 0, 1, 0), 9984, 1, _SEVEN),
            Profile(7, 20, "1g.10gb+me", 1, 1, 16, (1, 1, 0, 1, 1), 9984, 1, _SEVEN),
            Profile(9, 15, "1g.20gb", 1, 4, 26, (1, 1, 0, 1, 0), 20096, 2, (0, 2, 4, 6)),
            Profile(1, 14, "2g.20gb", 2, 3, 32, (2, 2, 0, 2, 0), 20096, 2, (0, 2, 4)),
            Profile(2, 9, "3g.40gb", 3, 2, 60, (3, 3, 0, 3, 0), 40448, 4, (0, 4)),
            Profile(3, 5, "4g.40gb", 4, 1, 64, (4, 4, 0, 4, 0), 40448, 4, (0,)),
            Profile(4, 0, "7g.80gb", 7, 1, 132, (8, 7, 0, 7, 1), 81152, 8, (0,)),
        ),
    ),
    "RTX-PRO-6000-96GB": GpuModel(
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        10,
        0x2BB5,
        97887,
        (
            Profile(0, 14, "1g.24gb", 1, 4, 46, (1, 1, 1, 1, 0), 24192, 3, _QUARTERS),
            Profile(7, 21, "1g.24gb+me", 1, 1, 46, (1, 1, 1, 1, 1), 24192, 3, _QUARTERS),
            Profile(10, 47, "1g.24gb+gfx", 1, 4, 46, (1, 1, 1, 1, 0), 24192, 3, _QUARTERS),
            Profile(15, 65, "1g.24gb+me.all", 1, 1, 46, (1, 4, 4, 4, 1), 24192, 3, _QUARTERS),
            Profile(13, 67, "1g.24gb-me", 1, 4, 46, (1, 0, 0, 0, 0), 24192, 3, _QUARTERS),
            Profile(1, 5, "2g.48gb", 2, 2, 94, (2, 2, 2, 2, 0), 48512, 6, _HALVES),
            Profile(11, 35, "2g.48gb+gfx", 2, 2, 94, (2, 2, 2, 2, 0), 48512, 6, _HALVES),
            Profile(16, 64, "2g.48gb+me.all", 2, 1, 94, (2, 4, 4, 4, 1), 48512, 6, _HALVES),
            Profile(14, 66, "2g.48gb-me", 2, 2, 94, (2, 0, 0, 0, 0), 48512, 6, _HALVES),
            Profile(3, 0, "4g.96gb", 4, 1, 188, (4, 4, 4, 4, 1), 97408, 12, (0,)),
            Profile(12, 32, "4g.96gb+gfx", 4, 1, 188, (4, 4, 4, 4, 1), 97408, 12, (0,)),
        ),
    ),
    "L40S": GpuModel("NVIDIA L40S", 8, 0x26B9, 46068, ()),
}
DEFAULT_MODEL = "L40S"
