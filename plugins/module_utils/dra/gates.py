# SPDX-License-Identifier: Apache-2.0
"""Kubernetes minors and DRA feature gates: which fields each minor serves.

:func:`minor_of` reads a Kubernetes version as one of :data:`SUPPORTED_MINORS`;
:data:`FEATURE_GATES` says per minor whether a DRA gate is on by default and
:func:`gate_enabled` lets a site's declared gates win; :func:`gated_fields` and
:func:`fields_disabled` find the fields (and CEL functions) of a DRA object that a
gate serves, so that what a minor would drop is refused before it is applied.

The code runs on nodes (Python >= 3.9) and imports nothing from Ansible.
"""

from __future__ import annotations

import re

from ansible_collections.aligned.dra.plugins.module_utils.dra.model import DeviceModelError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SUPPORTED_MINORS = ("1.34", "1.35", "1.36", "1.37")

# -- feature gates per minor --------------------------------------------------
#
# The value is the default of the gate on that minor (True: served without any
# flag). Sites that turn a gate on (or off) say so in their inventory; the
# renderer then follows the site. Fields that a gate controls are listed in
# GATED_FIELDS.
FEATURE_GATES = {
    # firstAvailable in a request (beta and on from 1.34, GA 1.36)
    "DRAPrioritizedList": {"1.34": True, "1.35": True, "1.36": True, "1.37": True},
    # adminAccess in a request (beta and on from 1.34)
    "DRAAdminAccess": {"1.34": True, "1.35": True, "1.36": True, "1.37": True},
    # capacity.requests, allowMultipleAllocations, distinctAttribute (alpha 1.34, beta 1.36)
    "DRAConsumableCapacity": {"1.34": False, "1.35": False, "1.36": True, "1.37": True},
    # sharedCounters / consumesCounters (alpha 1.34, beta 1.36)
    "DRAPartitionableDevices": {"1.34": False, "1.35": False, "1.36": True, "1.37": True},
    # device taints and request tolerations (alpha 1.34, beta 1.36)
    "DRADeviceTaints": {"1.34": False, "1.35": False, "1.36": True, "1.37": True},
    # list-typed attribute values (ints, bools, strings, versions), set semantics of
    # matchAttribute/distinctAttribute, CEL includes() (KEP-5491: alpha 1.36, still alpha 1.37)
    "DRAListTypeAttributes": {"1.34": False, "1.35": False, "1.36": False, "1.37": False},
    # DeviceClass extendedResourceName (KEP-5004: alpha 1.34, beta 1.36, GA 1.37)
    "DRAExtendedResource": {"1.34": False, "1.35": False, "1.36": True, "1.37": True},
    # Workload API: scheduling.k8s.io Workload/PodGroup and the pod's workloadRef/schedulingGroup; from 1.37
    # also gang scheduling and workload-aware preemption (KEP-4671: alpha 1.35, beta 1.37, off by default)
    "GenericWorkload": {"1.34": False, "1.35": False, "1.36": False, "1.37": False},
    # kube-scheduler's gang plugin (KEP-4671: alpha 1.35 and 1.36; merged into GenericWorkload in 1.37)
    "GangScheduling": {"1.34": False, "1.35": False, "1.36": False, "1.37": False},
    # PodGroup schedulingConstraints.topology (KEP-5732: alpha 1.36, still off by default in 1.37)
    "TopologyAwareWorkloadScheduling": {"1.34": False, "1.35": False, "1.36": False, "1.37": False},
    # PodGroup disruptionMode and priority (KEP-5710: alpha 1.36; merged into GenericWorkload in 1.37)
    "WorkloadAwarePreemption": {"1.34": False, "1.35": False, "1.36": False, "1.37": False},
    # the Job controller's Workload/PodGroup, Job.spec.scheduling in 1.37 (KEP-5547/6089: alpha 1.36, 1.37)
    "WorkloadWithJob": {"1.34": False, "1.35": False, "1.36": False, "1.37": False},
}

# Where each gated field lives, as a path with ``[]`` for list items, and the
# gate that serves it.
GATED_FIELDS = (
    ("spec.spec.devices.requests[].firstAvailable", "DRAPrioritizedList"),
    ("spec.spec.devices.requests[].exactly.adminAccess", "DRAAdminAccess"),
    ("spec.spec.devices.requests[].exactly.capacity", "DRAConsumableCapacity"),
    ("spec.spec.devices.requests[].firstAvailable[].capacity", "DRAConsumableCapacity"),
    ("spec.spec.devices.constraints[].distinctAttribute", "DRAConsumableCapacity"),
    ("spec.spec.devices.requests[].exactly.tolerations", "DRADeviceTaints"),
    ("spec.spec.devices.requests[].firstAvailable[].tolerations", "DRADeviceTaints"),
    ("spec.devices.requests[].firstAvailable", "DRAPrioritizedList"),
    ("spec.devices.requests[].exactly.adminAccess", "DRAAdminAccess"),
    ("spec.devices.requests[].exactly.capacity", "DRAConsumableCapacity"),
    ("spec.devices.requests[].firstAvailable[].capacity", "DRAConsumableCapacity"),
    ("spec.devices.constraints[].distinctAttribute", "DRAConsumableCapacity"),
    ("spec.devices[].allowMultipleAllocations", "DRAConsumableCapacity"),
    ("spec.devices[].consumesCounters", "DRAPartitionableDevices"),
    ("spec.sharedCounters", "DRAPartitionableDevices"),
    ("spec.devices[].taints", "DRADeviceTaints"),
    ("spec.devices[].attributes{}.ints", "DRAListTypeAttributes"),
    ("spec.devices[].attributes{}.bools", "DRAListTypeAttributes"),
    ("spec.devices[].attributes{}.strings", "DRAListTypeAttributes"),
    ("spec.devices[].attributes{}.versions", "DRAListTypeAttributes"),
    ("spec.extendedResourceName", "DRAExtendedResource"),  # DeviceClass
)


def minor_of(version: str) -> str:
    """``"1.36"`` from ``"1.36"``, ``"v1.36.2"`` or ``"1.36.0"``; refuses other minors."""
    text = str(version).strip().lstrip("v")
    parts = text.split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        raise DeviceModelError(f"kubernetes_version: {version!r} is not of the form 1.N")
    minor = f"{int(parts[0])}.{int(parts[1])}"
    if minor not in SUPPORTED_MINORS:
        raise DeviceModelError(f"kubernetes_version: {version!r}: supported minors are {', '.join(SUPPORTED_MINORS)}")
    return minor


def gate_enabled(gate: str, minor: str, overrides: dict[str, bool] | None = None) -> bool:
    """Whether ``gate`` is on for a cluster of ``minor`` with the site's overrides."""
    if gate not in FEATURE_GATES:
        raise DeviceModelError(f"unknown feature gate {gate!r} (known: {', '.join(sorted(FEATURE_GATES))})")
    if overrides and gate in overrides:
        return bool(overrides[gate])
    return FEATURE_GATES[gate][minor_of(minor)]


def shares_gpus(minor: str | None, overrides: dict[str, bool] | None = None) -> bool:
    """Whether GPUs are shared by capacity on a cluster of ``minor``: ``DRAConsumableCapacity`` is on.

    The claims render's rule for the fractional template (its ``capacity`` requests are gated
    fields; where the gate is off it renders the shared ResourceClaim instead) and the bundled
    driver's (``--fractional-gpus=auto``: on from 1.36, where the gate is on by default); the
    planner plans on shareable GPUs (:func:`model.make_shareable`) exactly then. No minor: False.
    """
    return minor is not None and gate_enabled("DRAConsumableCapacity", minor, overrides)


def list_attributes_problem(minor: str, overrides: dict[str, bool] | None = None) -> str | None:
    """Why the ``list_attributes`` device option cannot be used on ``minor``; None where it can.

    Decided from the gates alone, before any device is known: with the gate off the API server
    drops list values and then refuses the attribute left without a value.
    """
    if gate_enabled("DRAListTypeAttributes", minor, overrides):
        return None
    return (
        "list_attributes: list-typed attributes need feature gate DRAListTypeAttributes, which is off on "
        f"Kubernetes {minor_of(minor)}; turn it on in aligned_dra_feature_gates or drop the option"
    )


def _walk(value: Any, parts: list[str], trail: str) -> list[str]:
    """Concrete paths under ``value`` that reach the pattern ``parts``."""
    if not parts:
        return [trail]
    head, rest = parts[0], parts[1:]
    is_list = head.endswith("[]")
    is_map = head.endswith("{}")  # every value of a mapping (attributes by name)
    key = head[:-2] if is_list or is_map else head
    if not isinstance(value, dict) or key not in value or value[key] in (None, [], {}):
        return []
    child = value[key]
    here = f"{trail}.{key}" if trail else key
    if not is_list and not is_map:
        return _walk(child, rest, here)
    found = []
    if is_list and isinstance(child, list):
        for index, item in enumerate(child):
            found.extend(_walk(item, rest, f"{here}[{index}]"))
    if is_map and isinstance(child, dict):
        for name, item in child.items():
            found.extend(_walk(item, rest, f"{here}[{name}]"))
    return found


def gated_fields(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """``(path, gate)`` for every gated field present in a DRA object."""
    found = []
    for pattern, gate in GATED_FIELDS:
        for path in _walk(obj, pattern.split("."), ""):
            found.append((path, gate))
    return found


# CEL functions that only exist while a gate is on (the API server refuses the
# expression otherwise), as a pattern on the expression text.
GATED_CEL_FUNCTIONS = ((re.compile(r"\.\s*includes\s*\("), "includes()", "DRAListTypeAttributes"),)


def _cel_expressions(value: Any, trail: str) -> list[tuple[str, str]]:
    """``(path, expression)`` of every ``cel.expression`` under ``value``."""
    found = []
    if isinstance(value, dict):
        for key, child in value.items():
            here = f"{trail}.{key}" if trail else str(key)
            if key == "cel" and isinstance(child, dict) and isinstance(child.get("expression"), str):
                found.append((here + ".expression", child["expression"]))
            else:
                found.extend(_cel_expressions(child, here))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(_cel_expressions(item, f"{trail}[{index}]"))
    return found


def fields_disabled(obj: dict[str, Any], minor: str, overrides: dict[str, bool] | None = None) -> list[str]:
    """Messages for each field of ``obj`` whose gate is off for ``minor``, and each CEL
    expression that calls a function whose gate is off."""
    messages = []
    for path, gate in gated_fields(obj):
        if not gate_enabled(gate, minor, overrides):
            messages.append(f"{path} needs feature gate {gate}, which is off on Kubernetes {minor_of(minor)}")
    for path, expression in _cel_expressions(obj, ""):
        for pattern, function, gate in GATED_CEL_FUNCTIONS:
            if pattern.search(expression) and not gate_enabled(gate, minor, overrides):
                messages.append(
                    f"{path} calls {function}, which needs feature gate {gate}, off on Kubernetes {minor_of(minor)}"
                )
    return messages
