# SPDX-License-Identifier: Apache-2.0
"""MIG layouts from measured use: advice, never a change.

Per team and GPU model, for each whole-GPU claim and each share the window measured:

- **the smallest profile** of the claim's own GPU (its model's profiles: NVML's from the probe, else the
  documented geometry, ``controller/mig/model.gpu_state``) that holds the claim's **peak memory** (the
  largest sample of the window) with **headroom** (``mig_headroom``, default 0.05: the peak must stay within
  ``(1 - headroom)`` of the profile's memory) and its **p95 compute** in compute slices
  (``model.smallest_profile``). The compute figure is the share of SMs busy that NVML's GPM measured where the
  driver exported it (Hopper and newer: ``sms_busy_ratio``), else the per-process SM figure, a share of *time*
  (``sm_ratio``: a kernel on any SM counts the whole time, so it is at least the share of SMs busy and never
  chooses a smaller profile). ``compute_source`` says which. A claim that even the largest profile cannot hold
  keeps a whole GPU. ``decided_by`` says which need chose the profile: ``memory``, ``compute``, ``both`` (each
  alone would choose it, or only the two together need it) or ``whole GPU``; each group counts them.
- **GPUs needed**: the profiles packed onto GPUs of the model with the node's own solver
  (``node/mig/packing``): first fit, largest first (a count found, not proven the fewest), beside a lower
  bound that no layout can beat (memory and compute slices summed over the GPU's); and **today**: the
  GPU-equivalents the same claims hold (1 per whole GPU, a share's request over its GPU's memory) and the
  distinct GPUs they sit on.
- **a layout snippet**: a ready ``aligned_dra_mig`` (``model.layout_snippet``), one layout for every GPU of
  the model (``gpus.device_ids``), so that ``gpus`` of them hold the team's profiles; where no single
  layout repeated does, the snippet is None and the reason and the per-GPU layouts found are given.

Every figure says its source (``figure_sources`` per group, ``*_source`` per claim): a profile's memory is
NVML's where the probe read it (``nvml``: the GPU driver's own size, e.g. 4864 MiB for an A100 40GB's
``1g.5gb``), else the nominal size of its name (``documented``: the GPU driver may give a little less); a
peak is measured, and a lower bound where the claim was not measured at every step; GPUs needed is a count
found, its lower bound a bound.

Unknown stays unknown: a claim without a measured sample has no advice (listed in ``not_advised`` with the
reason), nor one whose GPU model is not known or has no MIG; a claim measured at only some of its steps
may have peaked in the others, so its profile is at least the one advised (``peak_lower_bound``); without
a compute sample the profile rests on memory alone (``compute_known: false``).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import math

from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import checks as mig_checks
from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import geometry
from ansible_collections.aligned.dra.plugins.module_utils.controller.mig import model as mig_model
from ansible_collections.aligned.dra.plugins.module_utils.controller.usage.settings import MIG_HEADROOM_DEFAULT
from ansible_collections.aligned.dra.plugins.module_utils.dra import device_model
from ansible_collections.aligned.dra.plugins.module_utils.dra import mig as dra_mig
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra import slices as dra_slices
from ansible_collections.aligned.dra.plugins.module_utils.node.mig import packing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

ADVISED_KINDS = ("whole", "share")
# A peak fits a profile only within (1 - headroom) of its memory (usage/settings: mig_headroom).
DEFAULT_HEADROOM = MIG_HEADROOM_DEFAULT
DIGITS = 4
ATTR_KIND = f"{dra.DRIVER_NAME}/kind"
ATTR_DEVICE_ID = f"{dra.DRIVER_NAME}/deviceID"
ATTR_PCI = "resource.kubernetes.io/pciBusID"


def site_gpus(
    topologies: dict[str, Any] | None, slices: list[dict[str, Any]] | None = None
) -> dict[tuple[str, str], dict[str, Any] | None]:
    """``{(node, GPU device name): MIG state or None}`` of the site's NVIDIA GPUs: from the probes (NVML's
    profiles, else the documented geometry of the device ID), else from the device ID the published GPU (or
    its MIG devices) carry. None: a GPU known to have no MIG (or a model without documented geometry)."""
    found: dict[tuple[str, str], dict[str, Any] | None] = {}
    for node, topology in sorted((topologies or {}).items()):
        for device in mig_checks.node_gpus(topology):
            state = mig_model.gpu_state(device)
            if state is not None:
                state = dict(state, device_id=geometry.device_id(device.get("device_id")))
            found[(node, dra.device_name("gpu", str(device.get("pci_address"))))] = state
    for node, devices in dra_slices.devices_from_slices(slices or []).items():
        for device in devices:
            if device["driver"] != dra.DRIVER_NAME:
                continue
            attributes = device_model.flat_attributes(device, device["driver"])
            if attributes.get(ATTR_KIND) not in ("gpu", "mig"):
                continue
            key = (node, device["name"].split("-mig-", 1)[0])
            if key in found:
                continue
            address = device_model.normalize_pci_address(attributes.get(ATTR_PCI))
            state = mig_model.gpu_state({"device_id": attributes.get(ATTR_DEVICE_ID), "pci_address": address})
            found[key] = (
                None if state is None else dict(state, device_id=geometry.device_id(attributes[ATTR_DEVICE_ID]))
            )
    return found


def _size(profile: dict[str, Any]) -> int:
    return max((int(p["size"]) for p in profile.get("placements") or []), default=0)


# What a claim's compute figure is: GPM's share of SMs busy, else NVML's per-process share of time.
SMS_BUSY = "sms busy"
TIME_SHARE = "time share"
DECIDED = ("memory", "compute", "both", "whole GPU")
PROFILE_SOURCES = {geometry.NVML: "nvml", geometry.DOCUMENTED: "documented nominal"}


def _compute(claim: dict[str, Any]) -> tuple[float | None, str | None, bool]:
    """The claim's p95 compute, what it is, and whether it covers every measured step: GPM's share of SMs busy
    where the driver measured it, else NVML's per-process figure (a share of time, at least the SMs' share)."""
    points = claim["memory_used_bytes"]["points"]
    for key, source in (("sms_busy_ratio", SMS_BUSY), ("sm_ratio", TIME_SHARE)):
        figure = claim.get(key)
        if figure:
            return figure["p95"], source, figure["points"] == points
    return None, None, False


def _claim_advice(claim: dict[str, Any], state: dict[str, Any], headroom: float) -> dict[str, Any]:
    """One measured claim's smallest profile (None: it needs the GPU whole), each figure with its source."""
    memory = claim["memory_used_bytes"]
    compute, compute_source, compute_known = _compute(claim)
    profiles = state.get("profiles") or []
    profile = mig_model.smallest_profile(profiles, int(memory["max"]), compute, headroom)
    lower = bool(claim["hours"]["unknown"])
    profile_memory = int(profile.get("memory_bytes") or 0) if profile else None
    return {
        "namespace": claim["namespace"],
        "claim": claim["claim"],
        "kind": claim["kind"],
        "node": claim["node"],
        "device": claim["device"],
        "gpu_fraction": claim["gpu_fraction"],
        "peak_bytes": memory["max"],
        "peak_lower_bound": lower,
        "peak_source": "measured, lower bound" if lower else "measured",
        "compute_p95": compute,
        "compute_source": compute_source,
        # the compute figure covers the window only where it was measured at every measured step
        "compute_known": compute_known,
        "profile": profile["name"] if profile else None,
        "profile_memory_bytes": profile_memory,
        "profile_memory_source": PROFILE_SOURCES.get(state.get("source"), state.get("source")) if profile else None,
        # what the peak may fill of the profile: its memory less the headroom
        "usable_memory_bytes": math.floor(profile_memory * (1.0 - headroom)) if profile else None,
        "decided_by": (
            "whole GPU"
            if profile is None
            else mig_model.decided_by(profiles, int(memory["max"]), compute, headroom, profile["name"])
        ),
        "needs_whole_gpu": profile is None,
    }


def _not_advised(claim: dict[str, Any], reason: str) -> dict[str, Any]:
    return {k: claim[k] for k in ("namespace", "claim", "team", "kind", "node", "device")} | {"reason": reason}


class _Packer:
    """``packing.pack`` of one GPU model, its answers kept (a team's bins repeat the same counts)."""

    def __init__(self, profiles: list[dict[str, Any]]) -> None:
        self.profiles = profiles
        self.seen: dict[tuple[tuple[str, int], ...], bool] = {}

    def fits(self, counts: dict[str, int]) -> bool:
        key = tuple(sorted((k, v) for k, v in counts.items() if v))
        if key not in self.seen:
            try:
                packing.pack(self.profiles, [], dict(key))
                self.seen[key] = True
            except packing.PackingError:
                self.seen[key] = False
        return self.seen[key]


def _first_fit(packer: _Packer, counts: dict[str, int]) -> list[dict[str, int]]:
    """Per-GPU layouts holding ``counts``: first fit, largest profile first."""
    by_name = {p["name"]: p for p in packer.profiles}
    items = sorted(
        (name for name, count in counts.items() for _copy in range(count)),
        key=lambda n: (-_size(by_name[n]), -int(by_name[n].get("slices") or 0), n),
    )
    bins: list[dict[str, int]] = []
    for name in items:
        for layout in bins:
            if packer.fits(dict(layout, **{name: layout.get(name, 0) + 1})):
                layout[name] = layout.get(name, 0) + 1
                break
        else:
            bins.append({name: 1})
    return bins


def _uniform(packer: _Packer, counts: dict[str, int], start: int, stop: int) -> tuple[dict[str, int], int] | None:
    """The fewest GPUs ``k`` (``start`` … ``stop``) for which one layout, ``ceil(count / k)`` of each profile,
    fits a GPU: ``(layout, k)``; None when no single layout repeated holds the profiles."""
    for gpus in range(max(1, start), max(1, stop) + 1):
        layout = {name: math.ceil(count / gpus) for name, count in counts.items()}
        if packer.fits(layout):
            return layout, gpus
    return None


def _lower_bound(profiles: list[dict[str, Any]], memory_slices: int, counts: dict[str, int]) -> int:
    by_name = {p["name"]: p for p in profiles}
    memory = sum(_size(by_name[n]) * c for n, c in counts.items())
    compute = sum(int(by_name[n].get("slices") or 0) * c for n, c in counts.items())
    compute_slices = mig_model.compute_slices(profiles)
    return max(
        math.ceil(memory / memory_slices) if memory_slices else 0,
        math.ceil(compute / compute_slices) if compute_slices else 0,
    )


def _figure_sources(state: dict[str, Any], rows: list[dict[str, Any]]) -> dict[str, str]:
    """Where each of a group's figures comes from."""
    lower = any(r["peak_lower_bound"] for r in rows)
    return {
        "profiles": "NVML from the probe" if state.get("source") == geometry.NVML else "documented nominal sizes",
        "peaks": "measured (some a lower bound: not measured at every step)" if lower else "measured",
        "gpus_today": "allocated (the claims' GPU-equivalents and GPUs)",
        "gpus_needed": "first fit, largest first: a count found, not proven the fewest",
        "gpus_needed_lower_bound": "lower bound (memory and compute slices summed)",
    }


def _group(
    team: str, state: dict[str, Any], rows: list[dict[str, Any]], claims: list[dict[str, Any]], headroom: float
) -> dict[str, Any]:
    """One team's advice on one GPU model."""
    profiles = [p for p in state.get("profiles") or [] if "+" not in p["name"]]
    counts: dict[str, int] = {}
    for row in rows:
        if row["profile"]:
            counts[row["profile"]] = counts.get(row["profile"], 0) + 1
    whole = sum(1 for row in rows if row["needs_whole_gpu"])
    packer = _Packer(profiles)
    layouts = _first_fit(packer, counts) if counts else []
    lower = _lower_bound(profiles, int(state.get("memory_slices") or dra_mig.memory_slices(state)), counts)
    uniform = _uniform(packer, counts, lower, sum(counts.values())) if counts else None
    out: dict[str, Any] = {
        "team": team,
        "model": state.get("model"),
        "device_id": state.get("device_id"),
        "source": state.get("source"),
        "claims": rows,
        "profiles": dict(sorted(counts.items())),
        "whole_gpus": whole,
        "gpus_today": {
            "gpu_equivalents": round(sum(c["gpu_fraction"] or 0 for c in claims), DIGITS),
            "gpus": len({(c["node"], c.get("gpu_uuid") or c["device"]) for c in claims}),
        },
        "gpus_needed": len(layouts) + whole,
        "gpus_needed_lower_bound": lower + whole,
        "layouts": [dict(sorted(layout.items())) for layout in layouts],
        "peaks_lower_bound": any(r["peak_lower_bound"] for r in rows),
        "compute_known": all(r["compute_known"] for r in rows),
        "headroom": headroom,
        "decided_by": {name: sum(1 for r in rows if r["decided_by"] == name) for name in DECIDED},
        "compute_sources": {
            name: sum(1 for r in rows if r["compute_source"] == source)
            for name, source in ((SMS_BUSY, SMS_BUSY), (TIME_SHARE, TIME_SHARE), ("none", None))
        },
        "figure_sources": _figure_sources(state, rows),
    }
    if uniform is not None:
        layout, gpus = uniform
        selector = {"device_ids": [state["device_id"]]} if state.get("device_id") else None
        out["uniform_layout"] = {"mig-devices": dict(sorted(layout.items())), "gpus": gpus}
        out["snippet"] = mig_model.layout_snippet(layout, selector)
    else:
        out["uniform_layout"] = None
        out["snippet"] = None
        out["reason"] = (
            "every claim needs a GPU whole: no MIG layout helps"
            if not counts
            else "no single layout repeated on every GPU holds these profiles: see layouts (one per GPU)"
        )
    return out


def advise(
    summary: dict[str, Any],
    gpus: dict[tuple[str, str], dict[str, Any] | None],
    headroom: float = DEFAULT_HEADROOM,
) -> dict[str, Any]:
    """``usage.advice.mig``: ``groups`` (per team and GPU model) and ``not_advised`` (each with the reason).
    ``gpus``: :func:`site_gpus`; ``headroom``: the share of a profile's memory a peak leaves free (``mig_headroom``,
    0 <= headroom < 1). A site with no MIG-capable GPU known gets no groups and says so once."""
    if not 0.0 <= float(headroom) < 1.0:
        raise ValueError(f"mig_headroom {headroom!r} is not a fraction in [0, 1)")
    if not any(state is not None for state in gpus.values()):
        return {
            "headroom": headroom,
            "groups": [],
            "not_advised": [],
            "reason": "no GPU of the site is known to offer MIG (no probe, no "
            "published device ID of a MIG-capable model)",
        }
    grouped: dict[tuple[str, str], tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]] = {}
    skipped = []
    for claim in summary["claims"]:
        if claim["kind"] not in ADVISED_KINDS:
            if claim["kind"] == "unknown":
                skipped.append(_not_advised(claim, "its size is unknown (no request or GPU memory series)"))
            continue
        key = (claim["node"], claim["device"])
        state = gpus.get(key)
        if key not in gpus:
            skipped.append(_not_advised(claim, "its GPU's model is unknown (no probe of its node, no published GPU)"))
        elif state is None:
            skipped.append(_not_advised(claim, "its GPU has no MIG"))
        elif not claim["memory_used_bytes"]:
            skipped.append(_not_advised(claim, "no measured sample: its peak is unknown"))
        else:
            model_key = str(state.get("device_id") or state.get("model"))
            entry = grouped.setdefault((claim["team"], model_key), (state, [], []))
            entry[1].append(_claim_advice(claim, state, headroom))
            entry[2].append(claim)
    groups = [
        _group(team, state, rows, claims, headroom) for (team, _m), (state, rows, claims) in sorted(grouped.items())
    ]
    return {"headroom": headroom, "groups": groups, "not_advised": skipped}
