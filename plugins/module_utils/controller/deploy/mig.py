# SPDX-License-Identifier: Apache-2.0
"""MIG as the driver role installs it (``aligned_dra_mig``, docs/driver-install.md#mig).

The inventory's ``aligned_dra_mig`` (the ``mig`` role's setting: ``mode``, ``gpus``, ``mig_configs``,
``layout``, ``partitionable_devices_gate``) is read here for what the driver needs. Mode ``off`` (the
default, or unset), the install is exactly what it is without the setting. ``static`` or ``dynamic``:

- :func:`args`: the plugin that publishes GPUs gets ``--mig=<mode>`` and ``--mig-gpus``: the PCI
  addresses where the selector ``gpus`` names GPUs by PCI address only, else ``all`` (the driver then
  runs as MIG the GPUs whose MIG mode is on: those the ``mig`` role's layout partitioned);
- the role gives that plugin NVML (``aligned_dra_driver_nvml``): ``nvidia-ml-py`` in the venv or the
  image;
- DaemonSet mode (:func:`pod_spec`, :data:`DAEMONSET_ARGS`): NVML through the NVIDIA Container
  Toolkit as the reclaim watcher gets it, with its MIG monitor capability (and the config capability in
  ``dynamic``: the driver creates the instances), which the toolkit grants only to a container with
  ``CAP_SYS_ADMIN``; the host's ``/proc`` read-only at ``/host/proc`` as the driver's procfs root (the
  toolkit masks the container's ``/proc/driver/nvidia`` with the GPUs it saw at start, so the
  ``capabilities/gpu<N>/mig/gi<G>/ci<C>/access`` files of instances made later would not show there,
  and the runtime refuses mounts below ``/proc``); ``/dev/nvidia-caps`` is below the pod's read-only
  ``/dev`` mount already;
- :func:`partitionable_problems`: ``dynamic`` publishes partitionable devices (``DRAPartitionableDevices``),
  on from 1.36 and on 1.34 and 1.35 only where the site says so (``partitionable_devices_gate`` or
  ``aligned_dra_feature_gates``); the role refuses the rest before any change, with the words the
  validation stage says (controller/mig/checks.py asks the same function).

MIG and ``--fractional-gpus`` on the same GPUs: the driver never shares a GPU it runs as MIG; the
validation stage refuses a site whose fractions would find no GPU.

Controller-side; no Ansible imports.
"""

from __future__ import annotations

import json
import re

from ansible_collections.aligned.dra.plugins.module_utils.controller.deploy import monitoring, reclaim
from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VARIABLE = "aligned_dra_mig"
GATE = "DRAPartitionableDevices"
MODES = ("off", "static", "dynamic")
SELECTOR_KEYS = ("pci_addresses", "device_ids", "models", "indices")
_PCI_ADDRESS = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
# DaemonSet mode: the host's procfs, read-only, as the driver's procfs root
HOST_PROC = "/host/proc"
PROC_VOLUME = "host-proc"
DAEMONSET_ARGS = (f"--procfs-root={HOST_PROC}",)
# The NVIDIA Container Toolkit's MIG capabilities (granted only with CAP_SYS_ADMIN in the container):
# monitor lists every GPU's instances, config creates and destroys them.
MONITOR_ENV = {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"}
CONFIG_ENV = {"name": "NVIDIA_MIG_CONFIG_DEVICES", "value": "all"}
CAPABILITY = "SYS_ADMIN"


def mode(value: Any) -> str:
    """The setting's mode: ``off`` where it is unset, empty or not a dict (YAML 1.1 reads off as false)."""
    if not isinstance(value, dict):
        return "off"
    found = value.get("mode", "off")
    return "off" if found is False or found is None else str(found)


def problems(value: Any, kubernetes_version: Any = None, feature_gates: Any = None) -> list[tuple[str, Any, str]]:
    """``(variable, value, reason)`` for what the driver cannot run with; empty when it holds (or is off).

    The setting's own shape as far as the driver reads it (the ``mig`` role's argument spec and the
    validation stage check the rest), and ``dynamic`` on a minor whose partitionable devices are off.
    """
    if value is None or value == {}:
        return []
    if not isinstance(value, dict):
        return [(VARIABLE, value, "must be a dict with mode (off, static or dynamic) and gpus")]
    found: list[tuple[str, Any, str]] = []
    if mode(value) not in MODES:
        found.append((f"{VARIABLE}.mode", value.get("mode"), f"must be one of {', '.join(MODES)}"))
    gpus = value.get("gpus") or {}
    if not isinstance(gpus, dict):
        found.append((f"{VARIABLE}.gpus", gpus, f"must be a dict of {', '.join(SELECTOR_KEYS)}"))
        gpus = {}
    addresses = gpus.get("pci_addresses") or []
    if not isinstance(addresses, list) or not all(isinstance(a, str) and _PCI_ADDRESS.match(a) for a in addresses):
        found.append(
            (f"{VARIABLE}.gpus.pci_addresses", addresses, "must be a list of PCI addresses such as 0000:18:00.0")
        )
    if mode(value) == "dynamic" and kubernetes_version:
        try:
            minor = dra_gates.minor_of(str(kubernetes_version))
        except dra.DeviceModelError as exc:
            return [*found, ("aligned_dra_kubernetes_version", kubernetes_version, str(exc))]
        found += [(VARIABLE, value, reason) for reason in partitionable_problems(value, minor, feature_gates)]
    return found


def problem_lines(found: list[tuple[str, Any, str]]) -> list[str]:
    """``<variable> = <value as JSON>: <reason>``, as the role's other preflight checks say them."""
    return [f"{variable} = {json.dumps(value, default=str)}: {reason}" for variable, value, reason in found]


def partitionable_problems(mig: dict[str, Any], minor: str, gates: Any) -> list[str]:
    """Mode ``dynamic`` on a minor whose partitionable devices are off, unless the site turns the gate on.

    ``minor`` is the site's Kubernetes minor; ``gates`` its ``aligned_dra_feature_gates``. The words of the
    validation stage and of the role's preflight (one function for both).
    """
    said = mig.get("partitionable_devices_gate")
    overrides = {k: bool(v) for k, v in (gates or {}).items()} if isinstance(gates, dict) else {}
    if said is not None and GATE in overrides and bool(said) != overrides[GATE]:
        return [
            f"partitionable_devices_gate is {str(bool(said)).lower()} and aligned_dra_feature_gates.{GATE} "
            f"{str(overrides[GATE]).lower()}: the site says one thing"
        ]
    if said:
        overrides[GATE] = True
    try:
        on = dra_gates.gate_enabled(GATE, minor, overrides)
    except dra.DeviceModelError:
        return []  # a bad minor is reported once per site
    if on:
        return []
    return [
        f"mode dynamic publishes partitionable devices ({GATE}), off by default on Kubernetes {minor}: turn the "
        "gate on in the cluster and say so (partitionable_devices_gate: true), or use mode static"
    ]


def mig_gpus(value: Any) -> str:
    """``--mig-gpus``: the selector's PCI addresses (lowercase, in the inventory's order) where it picks GPUs
    by PCI address only; else ``all`` (device IDs, models and indices are the ``mig`` role's to resolve)."""
    gpus = value.get("gpus") if isinstance(value, dict) else None
    gpus = gpus if isinstance(gpus, dict) else {}
    addresses = gpus.get("pci_addresses") or []
    others = [key for key in SELECTOR_KEYS if key != "pci_addresses" and gpus.get(key)]
    if not addresses or others:
        return "all"
    seen: list[str] = []
    for address in addresses:
        if str(address).lower() not in seen:
            seen.append(str(address).lower())
    return ",".join(seen)


def args(value: Any) -> list[str]:
    """The driver's MIG options for a checked setting: none where it is off (or unset)."""
    if mode(value) == "off":
        return []
    found = problems(value)
    if found:
        raise ValueError("; ".join(problem_lines(found)))
    return [f"--mig={mode(value)}", f"--mig-gpus={mig_gpus(value)}"]


def daemonset_args(value: Any) -> list[str]:
    """What the DaemonSet's GPU container adds to :func:`args`: the host's procfs as the driver's."""
    return list(DAEMONSET_ARGS) if mode(value) != "off" else []


def _env(names: list[dict[str, str]], container: dict[str, Any]) -> None:
    have = {item.get("name") for item in container.get("env", [])}
    container["env"] = [*container.get("env", []), *(dict(item) for item in names if item["name"] not in have)]


def _runtime_class(settings: dict[str, Any]) -> str:
    """The RuntimeClass the site names for NVML (reclaim's, else monitoring's), '' where none."""
    value = settings.get("reclaim")
    if reclaim.is_on(value) and value.get("runtime_class"):
        return str(value["runtime_class"])
    setting = monitoring.setting(settings.get("monitoring"))
    return str(setting.get("runtime_class") or "") if setting else ""


# A node the MIG role changes gets this label, which the driver's DaemonSet excludes (pod_spec)
PAUSE_LABEL = "aligned.dra/deploy.driver"
PAUSED = "paused-for-mig-change"


def pod_spec(value: Any, settings: dict[str, Any], spec: dict[str, Any], container: dict[str, Any]) -> None:
    """With MIG on, the DaemonSet's pod ``spec`` and the GPU plugin's ``container`` as MIG needs them; what the
    reclaim watcher gave already stays as it is. Off: unchanged."""
    if mode(value) == "off":
        return
    _env([*reclaim.NVML_ENV, MONITOR_ENV, *([CONFIG_ENV] if mode(value) == "dynamic" else [])], container)
    capabilities = container.setdefault("securityContext", {}).setdefault("capabilities", {})
    if CAPABILITY not in capabilities.setdefault("add", []):
        capabilities["add"] = [*capabilities["add"], CAPABILITY]
    if not any(item.get("name") == PROC_VOLUME for item in spec.get("volumes", [])):
        spec.setdefault("volumes", []).append({"name": PROC_VOLUME, "hostPath": {"path": "/proc", "type": "Directory"}})
    container.setdefault("volumeMounts", []).append(
        # recursively where the runtime can: the host's /proc holds mounts of its own (binfmt_misc)
        {"name": PROC_VOLUME, "mountPath": HOST_PROC, "readOnly": True, "recursiveReadOnly": "IfPossible"}
    )
    if not spec.get("runtimeClassName") and _runtime_class(settings):
        spec["runtimeClassName"] = _runtime_class(settings)
    # the MIG role pauses the driver on a node it changes (roles/mig, aligned_dra_mig_gpu_clients): a node
    # labelled PAUSE_LABEL=PAUSED is left by the DaemonSet, which comes back once the label is put back
    affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({})
    paused = {"key": PAUSE_LABEL, "operator": "NotIn", "values": [PAUSED]}
    for term in terms:  # the terms are ORed: each excludes the paused node
        if paused not in term.setdefault("matchExpressions", []):
            term["matchExpressions"].append(paused)


def without_mig(container: dict[str, Any]) -> dict[str, Any]:
    """A container of the pod that publishes no GPUs (the NIC plugin, split by kind): none of MIG's grants."""
    names = {MONITOR_ENV["name"], CONFIG_ENV["name"]}
    container["env"] = [item for item in container.get("env", []) if item.get("name") not in names]
    capabilities = (container.get("securityContext") or {}).get("capabilities") or {}
    if "add" in capabilities:
        capabilities["add"] = [cap for cap in capabilities["add"] if cap != CAPABILITY]
    container["volumeMounts"] = [m for m in container.get("volumeMounts", []) if m.get("name") != PROC_VOLUME]
    return container
