# SPDX-License-Identifier: Apache-2.0
"""Burstable fractional GPU templates: the fractional template's request, and a limit above it.

The site setting ``aligned_dra_fractional_burst`` (``{memory: 2.0, compute: 1.5, name: ...}``,
docs/claims.md "Burstable fractional GPUs") gives each limit as a factor of the request. Where the
site's minor renders the fractional template (consumable capacity), :func:`render` adds a template
beside it (``fractional-gpu-burst``) with the same request and a ``GpuConfig`` whose
``sharing.mps.limits`` the GPU driver reads: memory ``factor x request`` (the driver caps it at the
GPU's memory, the plan's thin ratio too), compute ``factor x`` the template's compute request (or,
without one, the MPS share of its ``sharing_config``), capped at 100 %.
Where the fractional template falls back to a shared claim, a pod has no request of its own for a
limit to exceed: the burstable template is left out with the reason.

:func:`render` is :func:`render.render` plus this template (the ``claims_render`` module calls it).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

import copy
import math
from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller.claims import render as claims
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra
from ansible_collections.aligned.dra.plugins.module_utils.dra.labels import TEMPLATE_LABEL

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SETTING = "aligned_dra_fractional_burst"
FACTORS = ("memory", "compute")
DEFAULT_NAME = "fractional-gpu-burst"
GPU_CONFIG_API = "dra.aligned.dev/v1alpha1"
_UNITS = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def check(raw: Any) -> dict[str, Any] | None:
    """The setting checked: ``{"name", "memory", "compute"}`` (factors or None); None when it is unset or empty."""
    if raw is None or raw == {}:
        return None
    if not isinstance(raw, dict):
        raise claims.ClaimsError(f"{SETTING} must be a mapping of factors, such as {{memory: 2.0}}")
    unknown = sorted(set(raw) - set(FACTORS) - {"name"})
    if unknown:
        raise claims.ClaimsError(f"{SETTING}: unknown key {unknown[0]!r} (known: compute, memory, name)")
    if not any(key in raw for key in FACTORS):
        raise claims.ClaimsError(f"{SETTING}: give a factor for memory, compute or both (limit = factor x request)")
    checked: dict[str, Any] = {"name": raw.get("name", DEFAULT_NAME), "memory": None, "compute": None}
    if not dra.is_dns_subdomain(checked["name"]):
        raise claims.ClaimsError(f"{SETTING}.name: {checked['name']!r} is not a DNS subdomain")
    for key in FACTORS:
        if key not in raw:
            continue
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise claims.ClaimsError(f"{SETTING}.{key}: {value!r} is not a number (a factor such as 2.0)")
        if value < 1:
            raise claims.ClaimsError(f"{SETTING}.{key}: {value!r} is below 1: a limit is at least the request")
        checked[key] = Fraction(repr(value)) if isinstance(value, float) else Fraction(value)
    return checked


def quantity(amount: Fraction) -> str:
    """Bytes as a Kubernetes quantity, rounded up to a whole byte, in the largest binary unit that is exact."""
    whole = math.ceil(amount)
    for suffix, size in _UNITS:
        if whole and whole % size == 0:
            return f"{whole // size}{suffix}"
    return str(whole)


def limits(conf: dict[str, Any], factors: dict[str, Any]) -> dict[str, Any]:
    """``{"memory": quantity, "compute": percent}``: each factor times its request (compute capped at 100)."""
    fractional = conf["templates"]["fractional_gpu"]
    out: dict[str, Any] = {}
    if factors["memory"] is not None:
        try:
            request = dra_cel.parse_quantity(str(fractional["memory"]))
        except ValueError as exc:
            raise claims.ClaimsError(f"aligned_dra_claims.templates.fractional_gpu.memory: {exc}") from None
        out["memory"] = quantity(request * factors["memory"])
    if factors["compute"] is not None:
        # the compute the scheduler grants (the template's request), else the GpuConfig's MPS share
        share = fractional["compute"]
        if share is None:
            share = _mps(fractional["sharing_config"]).get("activeThreadPercentage")
        if isinstance(share, bool) or not isinstance(share, int) or not 1 <= share <= 100:
            raise claims.ClaimsError(
                f"{SETTING}.compute: the fractional template asks for no compute share for the factor to multiply: "
                "set aligned_dra_claims.templates.fractional_gpu.compute (1..100) or its sharing_config "
                "(parameters.sharing.mps.activeThreadPercentage, 1..100), or leave compute out"
            )
        out["compute"] = min(100, math.ceil(share * factors["compute"]))
    return out


def _mps(sharing_config: Any) -> dict[str, Any]:
    """The ``sharing.mps`` of the fractional template's GpuConfig (``sharing_config``), or ``{}``."""
    parameters = (sharing_config or {}).get("parameters") if isinstance(sharing_config, dict) else None
    sharing = (parameters or {}).get("sharing") if isinstance(parameters, dict) else None
    mps = (sharing or {}).get("mps") if isinstance(sharing, dict) else None
    return mps if isinstance(mps, dict) else {}


def gpu_config(conf: dict[str, Any], gpu_driver: str, found: dict[str, Any]) -> dict[str, Any]:
    """The opaque config of the burstable request: the site's GpuConfig (if it has one) with ``sharing.mps.limits``."""
    sharing_config = conf["templates"]["fractional_gpu"]["sharing_config"]
    own = isinstance(sharing_config, dict) and sharing_config.get("driver") in (dra.DRIVER_NAME, gpu_driver)
    parameters = copy.deepcopy(sharing_config["parameters"]) if own else None
    if not isinstance(parameters, dict) or parameters.get("kind") != "GpuConfig":
        parameters = {"apiVersion": GPU_CONFIG_API, "kind": "GpuConfig"}
    sharing = parameters.setdefault("sharing", {})
    if sharing.setdefault("strategy", "MPS") != "MPS":
        raise claims.ClaimsError(
            f"{SETTING}: limits are MPS limits, and aligned_dra_claims.templates.fractional_gpu.sharing_config "
            f"asks for strategy {sharing['strategy']!r}; use MPS or leave out {SETTING}"
        )
    sharing.setdefault("mps", {})["limits"] = found
    return {"driver": gpu_driver, "parameters": parameters}


def template(
    conf: dict[str, Any], rendered: dict[str, Any], factors: dict[str, Any], gpu_driver: str
) -> tuple[dict[str, Any] | None, str | None]:
    """``(burstable template, None)`` beside the rendered fractional template, or ``(None, why not)``."""
    fractional = conf["templates"]["fractional_gpu"]
    if not fractional["enabled"]:
        return None, "aligned_dra_claims.templates.fractional_gpu is disabled: nothing to burst from"
    if conf["gpu_driver"] != dra.DRIVER_NAME:
        return None, (
            f"the limits are read by the collection's GPU driver, and aligned_dra_claims.gpu_driver is "
            f"{conf['gpu_driver']}"
        )
    base = next(
        (
            o
            for o in rendered["objects"]
            if o["kind"] == "ResourceClaimTemplate" and o["metadata"]["name"] == fractional["name"]
        ),
        None,
    )
    if base is None:
        why = next((s["reason"] for s in rendered["skipped"] if s["name"] == fractional["name"]), "it is not rendered")
        return None, (
            f"the fractional template {fractional['name']} is not a template on Kubernetes {rendered['minor']} "
            f"({why}): a shared claim gives a pod no request of its own for a limit to exceed"
        )
    found = limits(conf, factors)
    out = copy.deepcopy(base)
    out["metadata"]["name"] = factors["name"]
    out["spec"]["metadata"]["labels"][TEMPLATE_LABEL] = factors["name"]
    devices = out["spec"]["spec"]["devices"]
    request = devices["requests"][0]["name"]
    devices["config"] = [{"requests": [request], "opaque": gpu_config(conf, gpu_driver, found)}]
    return out, None


def render(
    raw_settings: dict[str, Any] | None,
    site: str,
    kubernetes_version: str,
    feature_gates: dict[str, bool] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    rail_rules: dict[str, Any] | None = None,
    device_options: dict[str, Any] | None = None,
    fractional_burst: dict[str, Any] | None = None,
    mig: dict[str, Any] | None = None,
    topologies: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """:func:`render.render`, with the burstable template after the fractional one (or its reason in ``skipped``).

    ``required`` may name the burstable template: refused, like any required
    template, where it is not rendered. ``mig`` and ``topologies``: the site's MIG (claims/mig.py).
    """
    factors = check(fractional_burst)
    conf = claims.settings(raw_settings)
    name = factors["name"] if factors else DEFAULT_NAME
    required = list(conf["required"])
    raw = dict(raw_settings or {})
    if name in required:
        raw["required"] = [n for n in required if n != name]
    rendered = claims.render(
        raw,
        site,
        kubernetes_version,
        feature_gates,
        tolerations,
        rail_rules,
        device_options=device_options,
        mig=mig,
        topologies=topologies,
    )
    rendered["required"] = required
    if factors is None:
        if name in required:
            raise claims.ClaimsError(f"aligned_dra_claims.required: {name!r} is not rendered: {SETTING} is not set")
        return rendered
    if any(o["metadata"]["name"] == name for o in rendered["objects"] if o["kind"] != "DeviceClass"):
        raise claims.ClaimsError(f"{SETTING}.name: {name!r} is the name of another template")
    drivers = claims.published_drivers(conf, device_options)
    made, reason = template(conf, rendered, factors, drivers["gpu"])
    if made is None:
        if name in required:
            raise claims.ClaimsError(
                f"aligned_dra_claims.required: {name!r} is not rendered for Kubernetes {rendered['minor']}: {reason}"
            )
        rendered["skipped"].append({"name": name, "reason": reason})
        return rendered
    fractional = conf["templates"]["fractional_gpu"]["name"]
    at = next(
        i
        for i, o in enumerate(rendered["objects"])
        if o["kind"] == "ResourceClaimTemplate" and o["metadata"]["name"] == fractional
    )
    rendered["objects"].insert(at + 1, made)
    return rendered
