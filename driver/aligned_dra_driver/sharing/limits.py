# SPDX-License-Identifier: Apache-2.0
"""Thin provisioning of fractional GPUs: a share's request and its limit.

The *request* is what the scheduler placed and what is guaranteed: the
allocation result's ``consumedCapacity`` (``memory`` in bytes, ``compute`` in
percent) on clusters with consumable capacity, else the ``sharing.mps`` values
of the claim's ``GpuConfig`` (``pinnedDeviceMemoryLimit``,
``activeThreadPercentage``), each key on its own: a key the scheduler did not
grant comes from the ``GpuConfig``, as the MPS limits always did.

The *limit* is what the workload may use while the GPU has room:
``sharing.mps.limits`` (each key on its own), else the request. MPS enforces
the limit (``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT``,
``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE``); memory above the request can be taken
back by evicting the pod. Both are recorded in the checkpoint's device entry
and in the claim's ``status.devices[].data`` as
``{"request": {...}, "limit": {...}}``, keys present only when known.

Refused (a :class:`~aligned_dra_driver.config.ConfigError`, so the claim's
Prepare fails and the other claims of the call go on): a share whose request
asked for no memory (compute only: the scheduler's default of 1 GiB would pin
it), ``sharing.strategy: TimeSlicing`` on a share (time slicing cannot enforce
it), a limit below the request, a memory limit above the GPU's published memory, ``limits`` on a GPU
that is not shared (no ``consumedCapacity`` and no MPS share: ``sharing.strategy``
MPS with ``pinnedDeviceMemoryLimit`` or ``activeThreadPercentage``). A compute limit
above 100 never gets here: :mod:`aligned_dra_driver.config` refuses it.
"""

from __future__ import annotations

import logging
from typing import Any

from ..config import ConfigError, parse_quantity
from ..validation import show

LOG = logging.getLogger(__name__)

GIB = 2**30
KEYS = ("memory", "compute")


def shown(key: str, value: int) -> str:
    """``40Gi`` / ``12345 bytes`` for memory, ``80%`` for compute."""
    if key == "compute":
        return f"{value}%"
    if value % GIB == 0:
        return f"{value // GIB}Gi"
    if value % 2**20 == 0:
        return f"{value // 2**20}Mi"
    return f"{value} bytes"


def _compute(value: Any, where: str) -> int:
    text = str(value)
    if not text.isdigit() or not 1 <= int(text) <= 100:
        raise ConfigError(f"{where}: {show(value)} is not a percent in 1..100")
    return int(text)


def share_request(result: dict[str, Any], cfg: dict[str, Any]) -> dict[str, int] | None:
    """The share's request ``{memory: bytes, compute: percent}`` (keys when known); None for a whole GPU.

    A whole GPU: no ``consumedCapacity`` and no MPS share (``sharing.strategy`` MPS with
    ``pinnedDeviceMemoryLimit`` or ``activeThreadPercentage``); pods sharing a claim under MPS
    without either have no share of their own.
    """
    consumed = result.get("consumedCapacity") or {}
    sharing = cfg.get("sharing") or {}
    mps = sharing.get("mps") or {}
    shared = sharing.get("strategy") == "MPS" and ("pinnedDeviceMemoryLimit" in mps or "activeThreadPercentage" in mps)
    if not consumed and not shared:
        return None
    request: dict[str, int] = {}
    if "pinnedDeviceMemoryLimit" in mps:
        request["memory"] = mps["pinnedDeviceMemoryLimit"]
    if "activeThreadPercentage" in mps:
        request["compute"] = mps["activeThreadPercentage"]
    if "memory" in consumed:
        request["memory"] = parse_quantity(consumed["memory"], "consumedCapacity.memory")
    if "compute" in consumed:
        request["compute"] = _compute(consumed["compute"], "consumedCapacity.compute")
    return request


def gpu_share(result: dict[str, Any], cfg: dict[str, Any], where: str = "") -> dict[str, dict[str, int]] | None:
    """``{"request": {...}, "limit": {...}}`` of a fractional GPU; None for a whole GPU (unchanged).

    ``where`` names the result in errors (``results[0] (request 'gpu', device gpu-...)``).
    Raises ConfigError for ``limits`` on a whole GPU and for a limit below the request.
    """
    limits = ((cfg.get("sharing") or {}).get("mps") or {}).get("limits")
    prefix = f"{where}: " if where else ""
    if result.get("consumedCapacity") and (cfg.get("sharing") or {}).get("strategy") == "TimeSlicing":
        raise ConfigError(
            f"{prefix}sharing.strategy is TimeSlicing, but the scheduler gave this claim a share of the GPU "
            f"(consumedCapacity {show(result['consumedCapacity'])}), which time slicing cannot enforce; set "
            "sharing.strategy to MPS or leave it out (a share is enforced with MPS)"
        )
    request = share_request(result, cfg)
    if request is None:
        if limits:
            raise ConfigError(
                f"{prefix}sharing.mps.limits is set, but this GPU is not shared (no consumedCapacity from the "
                "scheduler, no sharing.strategy MPS with pinnedDeviceMemoryLimit or activeThreadPercentage): "
                "a whole GPU has no request to exceed; remove the limits or give the request"
            )
        return None
    limit = dict(request)
    limit.update(limits or {})
    for key in KEYS:
        if key in limit and key in request and limit[key] < request[key]:
            raise ConfigError(
                f"{prefix}sharing.mps.limits.{key} {shown(key, limit[key])} is below the request "
                f"{shown(key, request[key])}; a limit is at least the request"
            )
    return {"request": request, "limit": limit}


def unasked_memory(claim: dict[str, Any], result: dict[str, Any]) -> str | None:
    """Why a share on a GPU with a ``memory`` capacity cannot be prepared as the scheduler gave it; None if it can.

    A request that asks for no memory (``capacity.requests.memory``; compute only, or no capacity at all)
    is given the published capacity's default (1 GiB) by the scheduler, and MPS would pin the workload to
    it: refused, with what to write instead.
    """
    consumed = result.get("consumedCapacity") or {}
    if "memory" not in consumed:
        return None
    request = str(result.get("request") or "")
    name, _sep, sub = request.partition("/")
    spec = (claim.get("spec") or {}).get("devices") or {}
    entry = next((r for r in spec.get("requests") or [] if isinstance(r, dict) and r.get("name") == name), None)
    if isinstance(entry, dict) and sub:
        entry = next(
            (r for r in entry.get("firstAvailable") or [] if isinstance(r, dict) and r.get("name") == sub), None
        )
    elif isinstance(entry, dict):
        entry = entry.get("exactly")
    if not isinstance(entry, dict):
        return None  # the request cannot be found: the scheduler's figure stands
    asked = ((entry.get("capacity") or {}).get("requests") or {}) if isinstance(entry.get("capacity"), dict) else {}
    if isinstance(asked, dict) and "memory" in asked:
        return None
    field = f"spec.devices.requests[{name}]" + (f".firstAvailable[{sub}]" if sub else ".exactly") + ".capacity.requests"
    return (
        f"the request asks for no GPU memory ({field}.memory is not set), so the scheduler gave it the shared "
        f"GPU's default of {show(consumed['memory'])} and MPS would pin the workload to it; ask for the memory it "
        'needs (capacity: {requests: {memory: 16Gi, compute: "25"}}), or for a whole GPU from a class '
        "without sharing"
    )


def published_memory(device: dict[str, Any] | None) -> int | None:
    """Bytes of a published device's ``memory`` capacity; None when it has none (or an unreadable one)."""
    value = (((device or {}).get("capacity") or {}).get("memory") or {}).get("value")
    if value is None:
        return None
    try:
        return parse_quantity(value, "capacity.memory")
    except ConfigError:
        return None


def room_problem(share: dict[str, dict[str, int]], cfg: dict[str, Any], memory: int | None) -> str | None:
    """Why the share's memory limit cannot fit the GPU (``memory`` bytes, None: unknown); None when it can.

    Only a limit given in ``sharing.mps.limits`` is weighed: a limit that is the request is what
    Prepare always accepted. With the GPU's memory unknown nothing more can be proven wrong.
    """
    given = ((cfg.get("sharing") or {}).get("mps") or {}).get("limits") or {}
    if "memory" not in given or memory is None:
        return None
    limit = share["limit"]["memory"]
    if limit <= memory:
        return None
    request = share["request"].get("memory")
    asked = f" (request {shown('memory', request)})" if request is not None else ""
    given_text = shown("memory", limit)
    return f"sharing.mps.limits.memory {given_text}{asked} is above the GPU's memory {shown('memory', memory)}"


def unchecked_memory(share: dict[str, dict[str, int]], cfg: dict[str, Any], memory: int | None) -> bool:
    """A memory limit was given but the GPU's memory is unknown: it cannot be checked (the caller says so)."""
    given = ((cfg.get("sharing") or {}).get("mps") or {}).get("limits") or {}
    return memory is None and "memory" in given and "memory" in share["limit"]


def checked_share(
    result: dict[str, Any],
    cfg: dict[str, Any],
    device: dict[str, Any] | None,
    where: str,
    claim: str,
    full_claim: dict[str, Any] | None = None,
) -> dict[str, dict[str, int]] | None:
    """:func:`gpu_share` weighed against the published ``device``'s memory; None for a whole GPU.

    ``where`` names the result in errors, ``claim`` the claim in the warning about a GPU whose memory is
    not published (its memory limit is then taken unchecked). ``full_claim`` (the ResourceClaim) shows
    whether the request asked for memory at all (:func:`unasked_memory`).
    """
    share = gpu_share(result, cfg, where)
    if share is None:
        return None
    unasked = unasked_memory(full_claim or {}, result)
    if unasked:
        raise ConfigError(f"{where}: {unasked}")
    memory = published_memory(device)
    problem = room_problem(share, cfg, memory)
    if problem:
        raise ConfigError(f"{where}: {problem}")
    if unchecked_memory(share, cfg, memory):
        LOG.warning(
            "%s: %s: the GPU's memory is not known (not published), so sharing.mps.limits.memory %s is not "
            "checked against it",
            claim,
            where,
            shown("memory", share["limit"]["memory"]),
        )
    return share
