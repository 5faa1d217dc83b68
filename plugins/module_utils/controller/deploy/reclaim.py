# SPDX-License-Identifier: Apache-2.0
"""The driver's reclaim watcher as the role installs it (``aligned_dra_driver_reclaim``).

``{mode: off|evict, margin: PERCENT, interval: SECONDS, runtime_class: NAME}``
(docs/thin-provisioning.md#turning-it-on). Off (the default, or unset), the
install is exactly what it is without the setting. With ``evict``:

- :func:`args`: the driver's ``--reclaim``, ``--reclaim-margin`` and
  ``--reclaim-interval`` (the plugin that publishes GPUs only, split by kind);
- :data:`RULES`: the ClusterRole's rights to read pods, evict them and write
  Events (cluster-wide: RBAC cannot limit an eviction to the pods of the
  credential's node);
- :func:`pod_spec`: in the DaemonSet, the host's PID namespace (NVML names a
  GPU's processes by their host PID) and, for NVML in the container, the
  NVIDIA Container Toolkit's variables on the watcher's container and, where
  the site names one, its RuntimeClass.

:func:`problems` checks the setting's shape against the driver's own bounds.

Controller-side; no Ansible imports.
"""

from __future__ import annotations

import math

from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

VARIABLE = "aligned_dra_driver_reclaim"
DEFAULTS: dict[str, Any] = {"mode": "off", "margin": 5, "interval": 2, "runtime_class": ""}
# The driver's own bounds (aligned_dra_driver.cli): low, high, whether they are allowed, what the number is
BOUNDS = {
    "margin": (0.0, 100.0, False, "a number of percent more than 0 and less than 100 (of the GPU's memory)"),
    "interval": (0.1, 3600.0, True, "a number of seconds from 0.1 to 3600"),
}
# The reclaim watcher's rights: the pods of a claim, their eviction (the Eviction API honours
# PodDisruptionBudgets) and the Events that say why.
RULES = (
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]},
)
# What the NVIDIA Container Toolkit reads to give a container the node's NVML (libnvidia-ml and the GPUs'
# device nodes): every GPU, the management library only (no compute, no CUDA).
NVML_ENV = (
    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
)


def _mode(value: Any) -> str | None:
    # YAML 1.1 reads an unquoted off as false
    if value is False:
        return "off"
    return value if isinstance(value, str) and value in ("off", "evict") else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def problems(value: Any) -> list[tuple[str, Any, str]]:
    """``(variable, value, reason)`` for every part of the setting that is wrong; empty when it holds.

    Each key is optional (:data:`DEFAULTS`); None or ``{}``: off.
    """
    if value is None or value == {}:
        return []
    if not isinstance(value, dict):
        return [(VARIABLE, value, "must be a dict with mode (off or evict), margin, interval and runtime_class")]
    found = [
        (f"{VARIABLE}.{key}", value[key], f"is no key of it ({', '.join(DEFAULTS)})")
        for key in value
        if key not in DEFAULTS
    ]
    if _mode(value.get("mode", "off")) is None:
        found.append((f"{VARIABLE}.mode", value.get("mode"), "must be off or evict"))
    for key, (low, high, closed, what) in BOUNDS.items():
        number = _number(value.get(key, DEFAULTS[key]))
        if number is None or not (low <= number <= high if closed else low < number < high):
            found.append((f"{VARIABLE}.{key}", value.get(key), f"must be {what}"))
    runtime_class = value.get("runtime_class", "")
    if runtime_class != "" and not dra.is_dns_subdomain(runtime_class):
        found.append(
            (f"{VARIABLE}.runtime_class", runtime_class, "must be a RuntimeClass name (a DNS subdomain), or empty")
        )
    return found


def is_on(value: Any) -> bool:
    """Whether a checked setting turns the watcher on."""
    return isinstance(value, dict) and _mode(value.get("mode", "off")) == "evict"


def args(value: Any) -> list[str]:
    """The driver's reclaim options for a checked setting: none where it is off (or unset)."""
    if not is_on(value):
        return []
    numbers = {key: _number(value.get(key, DEFAULTS[key])) for key in BOUNDS}
    shown = {key: str(int(n)) if n is not None and n.is_integer() else repr(n) for key, n in numbers.items()}
    return ["--reclaim=evict", f"--reclaim-margin={shown['margin']}", f"--reclaim-interval={shown['interval']}"]


def pod_spec(value: Any, spec: dict[str, Any], container: dict[str, Any]) -> None:
    """With the watcher on, the DaemonSet pod ``spec`` and the watcher's ``container`` as it needs them."""
    if not is_on(value):
        return
    # NVML names a GPU's processes by their host PID; the watcher finds each one's pod in /proc/<pid>/cgroup
    spec["hostPID"] = True
    container["env"] = [*container.get("env", []), *(dict(item) for item in NVML_ENV)]
    if value.get("runtime_class"):
        spec["runtimeClassName"] = value["runtime_class"]


def without_nvml(container: dict[str, Any]) -> dict[str, Any]:
    """A container of the pod that runs no watcher (the NIC plugin, split by kind): no GPU given to it."""
    names = {item["name"] for item in NVML_ENV}
    container["env"] = [item for item in container.get("env", []) if item.get("name") not in names]
    return container
