# SPDX-License-Identifier: Apache-2.0
"""Kueue's API as the kueue modules use it: names, labels, feature gates, limits and amounts.

Kueue v0.19.2, API ``kueue.x-k8s.io/v1beta2``. Also :class:`KueueError`, raised
for team settings Kueue cannot serve, and amounts: a device count (int) or a
capacity (Kubernetes quantity string) as an exact number (:func:`amount`) and
back as objects and rows show it (:func:`amount_out`); and the names Kueue takes
for resources (:func:`resource_name_problem`).

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from fractions import Fraction

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kueue import schemas as kueue_schemas
from ansible_collections.aligned.dra.plugins.module_utils.dra import cel as dra_cel
from ansible_collections.aligned.dra.plugins.module_utils.dra import labels
from ansible_collections.aligned.dra.plugins.module_utils.dra import model as dra

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

API_GROUP = "kueue.x-k8s.io"
API_VERSION = API_GROUP + "/v1beta2"
CONFIG_API_VERSION = "config.kueue.x-k8s.io/v1beta2"
KUEUE_VERSION = kueue_schemas.KUEUE_VERSION
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
# Topology Aware Scheduling's pod-template annotations, per placement mode; the value is a level's node label.
TOPOLOGY_ANNOTATIONS = {
    "required": "kueue.x-k8s.io/podset-required-topology",
    "preferred": "kueue.x-k8s.io/podset-preferred-topology",
}
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
TEAM_LABEL = labels.TEAM_LABEL
TIER_LABEL = labels.TIER_LABEL
# the collection's own labels (dra/labels.py), named here with Kueue's for the kueue modules
SITE_LABEL = labels.SITE_LABEL
MANAGED = labels.MANAGED
RESOURCE_PREFIX = "aligned.dev/"
GATE_DRA = "KueueDRAIntegration"
GATE_CAPACITY = "KueueDRAIntegrationConsumableCapacity"
GATE_QUOTA_CHECK = "QuotaCheckStrategy"
GATE_PARTITIONABLE = "KueueDRAIntegrationPartitionableDevices"
KNOWN_GATES = (
    GATE_DRA,
    GATE_CAPACITY,
    GATE_QUOTA_CHECK,
    "KueueDRAIntegrationExtendedResource",
    GATE_PARTITIONABLE,
    "KueueDRARejectWorkloadsWhenDRADisabled",
)
# The Kueue minors the collection renders for (aligned_dra_teams.kueue.version) and the defaults of the gates
# its configuration fragment sets, from Kueue's pkg/features/kube_features.go at v0.18.6 and v0.19.2. A gate
# missing from a minor does not exist there (Kueue refuses to start with it).
KUEUE_MINORS = ("0.18", "0.19")
DEFAULT_KUEUE_MINOR = "0.19"  # the embedded CRD schemas' (KUEUE_VERSION)
GATE_DEFAULTS: dict[str, dict[str, bool]] = {
    "0.18": {GATE_DRA: True, GATE_QUOTA_CHECK: False, GATE_PARTITIONABLE: False},
    "0.19": {GATE_DRA: True, GATE_QUOTA_CHECK: True, GATE_PARTITIONABLE: True, GATE_CAPACITY: False},
}
MAX_MAPPINGS = 16  # deviceClassMappings
MAX_CLASSES_PER_MAPPING = 8
MAX_NODE_LABELS = 8  # ResourceFlavor.spec.nodeLabels
INT32 = (-(2**31), 2**31 - 1)
NATIVE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "storage", "pods")
UNIT_DEVICES = "devices"
UNIT_CAPACITY = "capacity"
# GPU memory of partitionable devices (MIG), charged from each device's consumesCounters (kueue/mig.py)
UNIT_COUNTER = "counter"


class KueueError(schedulers.SchedulerError):
    """Team settings Kueue cannot serve; the message names the setting."""


# -- amounts ------------------------------------------------------------------------------


def amount(value: Any) -> Fraction:
    """A device count (int) or capacity (Kubernetes quantity string) as an exact number."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an amount")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, Fraction):
        return value
    if isinstance(value, str):
        return dra_cel.parse_quantity(value)
    raise ValueError(f"{value!r} is not an amount (an integer or a Kubernetes quantity string)")


_BINARY_SUFFIXES = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def quantity_text(value: Fraction) -> str:
    """The shortest exact quantity string of ``value`` (binary suffixes first: memory)."""
    if value.denominator == 1:
        number = value.numerator
        if number == 0:
            return "0"
        for suffix, factor in _BINARY_SUFFIXES:
            if number % factor == 0:
                return f"{number // factor}{suffix}"
        return str(number)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    raise ValueError(f"{value} has no exact quantity string")


def amount_out(value: Fraction | None, unit: str) -> int | str | None:
    """An amount as it appears in objects and rows: an int (devices) or a quantity string (capacity)."""
    if value is None:
        return None
    if unit == UNIT_DEVICES and value.denominator == 1:
        return int(value)
    return quantity_text(value)


def kueue_minor(version: Any) -> str | None:
    """``"0.18"`` from ``"0.18"``, ``"v0.18.6"`` or ``"0.18.0"``; None when it is not of the form 0.N."""
    parts = str(version).strip().lstrip("v").split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        return None
    return f"{int(parts[0])}.{int(parts[1])}"


def gate_default(gate: str, minor: str) -> bool | None:
    """Whether ``gate`` is on by default in Kueue ``minor``; None where the gate does not exist there."""
    return GATE_DEFAULTS.get(minor, {}).get(gate)


# -- names ---------------------------------------------------------------------------------


def resource_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be a deviceClassMappings name (Kueue: a label key), or None."""
    if not isinstance(name, str) or not name:
        return "must be a non-empty string"
    if len(name) > 253:
        return "must be at most 253 characters"
    prefix, sep, part = name.rpartition("/")
    if sep and not dra.is_dns_subdomain(prefix):
        return "the prefix before / must be a DNS subdomain"
    if not dra.is_dns_label(part):
        # Kueue's Configuration: an optional DNS subdomain prefix, then a DNS label
        return "the name after the prefix must be a DNS label (at most 63 lower-case letters, digits and '-')"
    if prefix in ("kubernetes.io", "k8s.io") or prefix.endswith((".kubernetes.io", ".k8s.io")):
        return "the kubernetes.io and k8s.io prefixes are reserved for Kubernetes' own resources"
    if not sep and (name in NATIVE_RESOURCES or name.startswith(("hugepages-", "requests."))):
        return "is a resource of the pods themselves, which Kueue counts from their requests"
    return None


def class_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot be one of a mapping's ``deviceClassNames`` (Kueue: a label key), or None.

    Kueue v0.19.2's ``validateDeviceClassMappings`` checks ``content.IsLabelKey``, whose name part may hold
    dots (``mig.aligned.dev`` is a valid entry), unlike the logical resource names this module gives.
    """
    if not labels.is_label_name(name):
        return "is not a label key ([prefix/]name, the name at most 63 letters, digits, '-', '_' or '.')"
    return None
