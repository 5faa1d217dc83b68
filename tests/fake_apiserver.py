# SPDX-License-Identifier: Apache-2.0
"""TEST FAKE: a strict, in-memory Kubernetes API server for the DRA objects.

This module lives in ``tests/`` and is never shipped. No real kube-apiserver
can run on the development machines, so the driver, the apply path and the
roles are tested against this server instead. It is a real HTTP server on
127.0.0.1 that the official ``kubernetes`` Python client (and
``kubernetes.core``'s dynamic client, through the discovery endpoints) talks
to unchanged. It is *strict*: every object written is validated with
``kubernetes-validate`` (strict schema: unknown fields are refused) for the
served Kubernetes minor, plus the rules the real API server adds on top of the
schema for ``resource.k8s.io/v1`` (the DRA limits, name formats, one-of rules,
immutable fields). Fields behind feature gates that are off for the served
minor are dropped silently, as the real server does. Device taints are
checked (label key and value, effect) only where ``DRADeviceTaints`` is on,
and get ``timeAdded`` when the client sent none, written as the real server
writes a metav1.Time (RFC 3339, UTC, ``Z``).

Interface
=========

::

    from ansible_collections.aligned.dra.tests.fake_apiserver import FakeApiServer

    with FakeApiServer(minor="1.35") as api:          # gates=dict(...) to override defaults
        api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}})
        kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")   # for subprocesses
        client = api.api_client()                     # kubernetes.client.ApiClient
        kubernetes.client.ResourceV1Api(client).list_resource_slice()
        api.list("resourceslices")                    # stored objects (deep copies)
        api.get("resourceclaims", "claim", "default") # None when absent
        api.rejections                                # every refused write: (method, path, code, message)
        api.requests                                  # every request: (method, path, content_type)
        api.fail_next("PATCH", r"/status$", code=500) # fault injection for the next matching request

Kueue (v0.19.2) as a cluster with its CRDs installed serves it:
``/apis/kueue.x-k8s.io/v1beta2/{clusterqueues, cohorts, resourceflavors,
topologies, workloadpriorityclasses}`` and namespaced ``localqueues``, each validated
against the openAPIV3Schema of Kueue's own CRD (``tests/fixtures/kueue-v0.19.2``),
strict: fields a schema does not declare are refused. The CRDs' CEL rules and
Kueue's webhook are not run here (``kueue.validate_objects`` is tested against
them).

A patch whose ``metadata.uid`` differs from the stored object's answers 409
(``Precondition failed: UID in precondition``), as on the real server.

Served resources (cluster-scoped unless noted): ``/api/v1/nodes``,
``/apis/resource.k8s.io/v1/{resourceslices, deviceclasses}``, namespaced
``/apis/resource.k8s.io/v1/namespaces/NS/{resourceclaims,
resourceclaimtemplates}`` (and the all-namespaces lists). ResourceClaims and
Nodes have a ``/status`` subresource: writes to the main resource keep the
stored status, writes to ``/status`` keep everything but status.

For node rollouts (``kubernetes.core.k8s_drain``: cordon, drain, uncordon):
namespaced ``/api/v1/namespaces/NS/pods`` (with ``/status``; a Pod's spec is
immutable except images, tolerations, ``activeDeadlineSeconds`` and
``terminationGracePeriodSeconds``; a Pod written without status reads
``phase: Pending``), ``/apis/policy/v1/namespaces/NS/poddisruptionbudgets``,
``/apis/apps/v1/namespaces/NS/{daemonsets, replicasets}`` (stored only:
nothing runs them, they own pods through ``ownerReferences``; the selector
must match the template's labels and is immutable). Nodes always answer a
``spec``, and ``spec.unschedulable: false`` is not stored (``omitempty``), as
on a real server. ``POST .../pods/NAME/eviction`` takes a policy/v1 Eviction
(apiVersion and kind default to it, as the real server decodes it; the name
must match the URL) and deletes the pod at once (there is no kubelet to wait
for graceful termination) unless the one PodDisruptionBudget that selects it
forbids it: 429 TooManyRequests ("Cannot evict pod as it would violate the
pod's disruption budget.", cause ``DisruptionBudget``) when no disruption is
allowed, 500 when more than one budget selects the pod. Pending, Succeeded and
Failed pods ignore budgets; an unready pod is let go without using the budget
when the budget is met (``unhealthyPodEvictionPolicy`` ``IfHealthyBudget``) or
always (``AlwaysAllow``). The fake plays the disruption controller: every
write or deletion of a Pod or budget recomputes the namespace's budget
statuses (``expectedPods`` is the number of pods the selector matches, healthy
means Running and Ready; percentages round up). Pod lists refuse field
selectors a real server does not support (400 ``field label not supported``).

Verbs: get, list (``labelSelector`` with ``=``, ``==``, ``!=``, ``in``,
``notin``, existence; ``fieldSelector`` on ``metadata.name``,
``metadata.namespace``, ``spec.nodeName``, ``spec.driver``,
``spec.pool.name``), create (``generateName`` too), update (PUT, with
``resourceVersion`` conflict detection: 409), patch with
``application/merge-patch+json``, ``application/strategic-merge-patch+json``
(merged like merge-patch, except that the list-map fields listed in
``LIST_MAP_KEYS`` merge by key), ``application/json-patch+json`` and
server-side apply ``application/apply-patch+yaml`` (``fieldManager`` required;
the applied configuration is merged into the live object with the same list-map
rules; field ownership is modelled for the keys of ``metadata.labels`` only
(``fake_apiserver_apply``: a manager's apply removes the label keys it applied
before and leaves out, unless another manager owns them, and a changed value of
a key another manager owns is a 409 conflict without ``force=true``; no
``managedFields`` are shown; ``api.label_owners.of(key)`` tells the owners), delete, deletecollection. ``dryRun=All`` validates
and answers without storing. Deleting a Node deletes the objects whose
controlling owner it is (the garbage collector). ``watch`` is refused (400):
nothing here needs it.

For the driver role's credentials and the teams role: ``/api/v1/namespaces``
(a Namespace gets ``spec.finalizers: [kubernetes]``, ``status.phase: Active``
and the ``kubernetes.io/metadata.name`` label; deleting it deletes what is in
it at once; objects in a namespace that does not exist are still accepted),
namespaced ``serviceaccounts``, ``secrets`` (``stringData`` folded into
``data``, ``data`` must be base64, ``type`` immutable), ``configmaps`` (the
driver role's rails file in DaemonSet mode: keys of ``data`` and
``binaryData`` are config keys and not in both, ``binaryData`` is base64, at
most 1 MiB, nothing changes once ``immutable`` is true) and
``resourcequotas`` (no quota controller: status stays as written),
``/apis/rbac.authorization.k8s.io/v1/{clusterroles, clusterrolebindings}``
(``roleRef`` immutable), ``/apis/admissionregistration.k8s.io/v1/
{validatingadmissionpolicies, validatingadmissionpolicybindings}`` (schema
only: CEL expressions are not compiled, nothing is admitted or denied by
them) and ``/apis/scheduling.k8s.io/v1/priorityclasses`` (``value``
immutable, ``system-`` names reserved). The fake also plays the token
controller: a ``kubernetes.io/service-account-token`` Secret whose
ServiceAccount exists gets ``data.token`` (a fake token), ``ca.crt``,
``namespace`` and the ``kubernetes.io/service-account.uid`` annotation.

For the placement role's jobs: namespaced ``/api/v1/namespaces/NS/services``,
``/apis/batch/v1/namespaces/NS/jobs`` (schema only: no Job controller, nothing
runs) and the minor's Workload API, as a cluster started with its
``--runtime-config`` serves it: ``/apis/scheduling.k8s.io/VERSION/namespaces/NS/
{workloads, podgroups}``, v1alpha1 on 1.35 (no PodGroup), v1alpha2 on 1.36,
v1beta1 on 1.37 (``WORKLOAD_API``), next to ``priorityclasses`` in v1.

Errors are ``Status`` objects with the real codes and reasons: 400
BadRequest, 403 Forbidden, 404 NotFound, 409 AlreadyExists/Conflict, 422
Invalid, 405 MethodNotAllowed, 415 UnsupportedMediaType, 429 TooManyRequests.
Discovery (``/api``, ``/apis``, ``/apis/GROUP``, ``/apis/GROUP/VERSION``) lists
every served group and version, ``pods/eviction`` included.
"""

from __future__ import annotations

import base64
import binascii
import copy
import ipaddress
import itertools
import json
import re
import socket
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jsonschema
import yaml

try:
    from ansible_collections.aligned.dra.tests import fake_apiserver_apply
except ImportError:  # imported as a top-level module (tests/fake_apiserver_daemon.py)
    import fake_apiserver_apply  # type: ignore[no-redef]

SUPPORTED_MINORS = ("1.34", "1.35", "1.36", "1.37")

# Feature gate defaults per minor (docs: kubelet-plugin-protocol.md, section 6).
GATE_DEFAULTS: dict[str, dict[str, bool]] = {
    "DRAConsumableCapacity": {"1.34": False, "1.35": False, "1.36": True, "1.37": True},
    "DRAPartitionableDevices": {"1.34": False, "1.35": False, "1.36": True, "1.37": True},
    "DRADeviceTaints": {"1.34": False, "1.35": False, "1.36": True, "1.37": True},
    "DRAExtendedResource": {"1.34": False, "1.35": False, "1.36": True, "1.37": True},
    "DRAResourceClaimDeviceStatus": {"1.34": True, "1.35": True, "1.36": True, "1.37": True},
    "DRAPrioritizedList": {"1.34": True, "1.35": True, "1.36": True, "1.37": True},
    "DRAAdminAccess": {"1.34": True, "1.35": True, "1.36": True, "1.37": True},
}


KUEUE_GROUP = "kueue.x-k8s.io"
# Kueue's CustomResourceDefinitions, copied unmodified from Kueue v0.19.2 (see tests/fixtures/kueue-v0.19.2).
KUEUE_CRDS = Path(__file__).resolve().parent / "fixtures" / "kueue-v0.19.2"


class Resource:
    """One served resource type; ``subresources`` names the ones besides ``status`` (``eviction``)."""

    def __init__(
        self,
        group: str,
        version: str,
        plural: str,
        kind: str,
        namespaced: bool,
        status: bool,
        subresources: tuple[str, ...] = (),
    ) -> None:
        self.group = group
        self.version = version
        self.plural = plural
        self.kind = kind
        self.namespaced = namespaced
        self.status = status
        self.subresources = subresources

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCES = {
    r.plural: r
    for r in (
        Resource("", "v1", "nodes", "Node", namespaced=False, status=True),
        Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False, status=False),
        Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False, status=False),
        Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", namespaced=True, status=True),
        Resource(
            "resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", namespaced=True, status=False
        ),
        # What a node rollout (kubernetes.core.k8s_drain) reads and writes.
        Resource("", "v1", "pods", "Pod", namespaced=True, status=True, subresources=("eviction",)),
        Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", namespaced=True, status=True),
        Resource("apps", "v1", "daemonsets", "DaemonSet", namespaced=True, status=True),
        Resource("apps", "v1", "replicasets", "ReplicaSet", namespaced=True, status=True),
        # What the driver role's credentials and the teams role apply.
        Resource("", "v1", "namespaces", "Namespace", namespaced=False, status=True),
        Resource("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True, status=False),
        Resource("", "v1", "secrets", "Secret", namespaced=True, status=False),
        # The driver role's rails file in DaemonSet mode.
        Resource("", "v1", "configmaps", "ConfigMap", namespaced=True, status=False),
        Resource("", "v1", "resourcequotas", "ResourceQuota", namespaced=True, status=True),
        Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False, status=False),
        Resource(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
            namespaced=False,
            status=False,
        ),
        Resource(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicies",
            "ValidatingAdmissionPolicy",
            namespaced=False,
            status=True,
        ),
        Resource(
            "admissionregistration.k8s.io",
            "v1",
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
            namespaced=False,
            status=False,
        ),
        Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False, status=False),
        # What the placement role creates for a job (and the minor's Workload API, served_resources).
        Resource("", "v1", "services", "Service", namespaced=True, status=True),
        Resource("batch", "v1", "jobs", "Job", namespaced=True, status=True),
        # Kueue's CRDs (v0.19.2, served version v1beta2), as a cluster with Kueue installed serves them.
        Resource(KUEUE_GROUP, "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False, status=True),
        Resource(KUEUE_GROUP, "v1beta2", "cohorts", "Cohort", namespaced=False, status=True),
        Resource(KUEUE_GROUP, "v1beta2", "localqueues", "LocalQueue", namespaced=True, status=True),
        Resource(KUEUE_GROUP, "v1beta2", "resourceflavors", "ResourceFlavor", namespaced=False, status=False),
        Resource(KUEUE_GROUP, "v1beta2", "topologies", "Topology", namespaced=False, status=False),
        Resource(
            KUEUE_GROUP, "v1beta2", "workloadpriorityclasses", "WorkloadPriorityClass", namespaced=False, status=False
        ),
    )
}


# The Workload API (scheduling.k8s.io) a minor serves, as with its --runtime-config: the version, and
# whether PodGroup is a resource of its own (docs/jobs.md).
WORKLOAD_API = {"1.35": ("v1alpha1", False), "1.36": ("v1alpha2", True), "1.37": ("v1beta1", True)}


def served_resources(minor: str) -> dict[str, Resource]:
    """RESOURCES and the Workload API of ``minor`` (none before 1.35)."""
    resources = dict(RESOURCES)
    if minor in WORKLOAD_API:
        version, pod_group = WORKLOAD_API[minor]
        resources["workloads"] = Resource("scheduling.k8s.io", version, "workloads", "Workload", True, status=False)
        if pod_group:
            resources["podgroups"] = Resource("scheduling.k8s.io", version, "podgroups", "PodGroup", True, status=True)
    return resources


# What the token controller writes into a kubernetes.io/service-account-token Secret.
FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nfake CA of the fake API server\n-----END CERTIFICATE-----\n")

# Field selectors the real server accepts, per resource (others: 400). Resources not listed take any field.
FIELD_SELECTORS: dict[str, frozenset[str]] = {
    "pods": frozenset(
        {
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        }
    ),
    "poddisruptionbudgets": frozenset({"metadata.name", "metadata.namespace"}),
    "daemonsets": frozenset({"metadata.name", "metadata.namespace"}),
    "replicasets": frozenset({"metadata.name", "metadata.namespace", "status.replicas"}),
}

# Pod spec fields an update may change (the rest is immutable, as on the real server).
POD_MUTABLE_SPEC = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")

# Lists that strategic merge and server-side apply merge by key (x-kubernetes-list-map-keys).
LIST_MAP_KEYS: dict[str, tuple[str, ...]] = {
    "metadata.ownerReferences": ("uid",),
    "status.devices": ("driver", "pool", "device", "shareID"),
    "status.devices.conditions": ("type",),
    "status.conditions": ("type",),
    "status.reservedFor": ("uid",),
    "spec.containers": ("name",),
    "spec.initContainers": ("name",),
    "spec.tolerations": ("key",),
    "status.disruptedPods": ("name",),
}

# DRA limits enforced by the real API server beyond the schema.
MAX_DEVICES_PER_SLICE = 128
MAX_DEVICES_PER_SLICE_WITH_EXTRAS = 64  # taints, counters or list attributes (1.35+)
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_STRING = 64
MAX_ID_LENGTH = 32
MAX_STATUS_CONDITIONS = 8
MAX_NETWORK_IPS = 16

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_QUANTITY = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i|[numkMGTPE])?$")


class ApiError(Exception):
    """An error answered as a Kubernetes Status object."""

    REASONS = {
        400: "BadRequest",
        404: "NotFound",
        405: "MethodNotAllowed",
        403: "Forbidden",
        409: "Conflict",
        415: "UnsupportedMediaType",
        422: "Invalid",
        429: "TooManyRequests",
        500: "InternalError",
    }

    def __init__(
        self, code: int, message: str, reason: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or self.REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> dict[str, Any]:
        answer = {
            "apiVersion": "v1",
            "kind": "Status",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            answer["details"] = self.details
        return answer


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


def is_dns_label(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 63 and bool(_DNS_LABEL.match(value))


def is_dns_subdomain(value: Any, limit: int = 253) -> bool:
    return isinstance(value, str) and len(value) <= limit and bool(_DNS_SUBDOMAIN.match(value))


def qualified_name_problem(name: str) -> str | None:
    """Check a DRA attribute/capacity name: C identifier <= 32, optional DNS prefix <= 63."""
    prefix, sep, ident = name.rpartition("/")
    if sep and not is_dns_subdomain(prefix, 63):
        return f"{name!r}: the domain must be a DNS subdomain of at most 63 characters"
    if not ident or len(ident) > MAX_ID_LENGTH or not _C_IDENTIFIER.match(ident):
        return f"{name!r}: must be a C identifier of at most {MAX_ID_LENGTH} characters, optionally prefixed"
    return None


def is_extended_resource_name(name: str) -> bool:
    """A pod's extended resource name: ``domain/name`` outside ``kubernetes.io/``, not ``requests.*``,
    and its quota name ``requests.<name>`` a qualified name (prefix a DNS subdomain, name <= 63)."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    prefix, _sep, rest = ("requests." + name).partition("/")
    return (
        "/" not in rest
        and is_dns_subdomain(prefix)
        and bool(re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]", rest))
    )


def _validate_metadata(obj: dict[str, Any], resource: Resource, errors: list[str]) -> None:
    meta = obj.get("metadata") or {}
    name = meta.get("name")
    if not is_dns_subdomain(name):
        errors.append(f"metadata.name: Invalid value {name!r}: must be a DNS subdomain (lowercase, <= 253)")
    for key in ("labels", "annotations"):
        for label, value in (meta.get(key) or {}).items():
            if not isinstance(value, str):
                errors.append(f"metadata.{key}[{label}]: must be a string")
    controllers = [ref for ref in meta.get("ownerReferences") or [] if ref.get("controller")]
    if len(controllers) > 1:
        errors.append("metadata.ownerReferences: Invalid value: only one reference can have Controller set to true")


def _validate_attribute(path: str, value: dict[str, Any], errors: list[str]) -> None:
    kinds = [k for k in ("int", "bool", "string", "version") if k in value]
    if len(kinds) != 1:
        errors.append(f"{path}: exactly one value must be specified (int, bool, string or version), found {kinds}")
        return
    if "string" in kinds and len(value["string"]) > MAX_ATTRIBUTE_STRING:
        errors.append(f"{path}.string: Too long: may not be more than {MAX_ATTRIBUTE_STRING} bytes")
    if "version" in kinds:
        version = value["version"]
        if len(version) > MAX_ATTRIBUTE_STRING or not _SEMVER.match(version):
            errors.append(f"{path}.version: Invalid value {version!r}: must be semantic version")


def validate_resource_slice(obj: dict[str, Any], minor: str, errors: list[str]) -> None:
    spec = obj.get("spec") or {}
    if not is_dns_subdomain(spec.get("driver"), 63):
        errors.append(f"spec.driver: Invalid value {spec.get('driver')!r}: must be a DNS subdomain of <= 63")
    pool = spec.get("pool") or {}
    pool_name = pool.get("name", "")
    if not pool_name or len(pool_name) > 253 or not all(is_dns_subdomain(p) for p in pool_name.split("/")):
        errors.append(f"spec.pool.name: Invalid value {pool_name!r}: must be DNS subdomains separated by '/'")
    if pool.get("generation", 0) < 0:
        errors.append("spec.pool.generation: must be >= 0")
    if pool.get("resourceSliceCount", 0) < 1:
        errors.append("spec.pool.resourceSliceCount: must be >= 1")
    selectors = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(k)]
    if len(selectors) != 1:
        errors.append(
            f"spec: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection is required, got {selectors}"
        )
    if "nodeName" in spec and not is_dns_subdomain(spec["nodeName"]):
        errors.append(f"spec.nodeName: Invalid value {spec['nodeName']!r}")
    devices = spec.get("devices") or []
    extras = bool(spec.get("sharedCounters")) or any(
        d.get("taints")
        or d.get("consumesCounters")
        or any("list" in str(k).lower() for a in (d.get("attributes") or {}).values() for k in a)
        for d in devices
    )
    limit = MAX_DEVICES_PER_SLICE_WITH_EXTRAS if extras and minor >= "1.35" else MAX_DEVICES_PER_SLICE
    if len(devices) > limit:
        errors.append(f"spec.devices: Too many: {len(devices)}: must have at most {limit} items")
    seen: set[str] = set()
    for index, device in enumerate(devices):
        path = f"spec.devices[{index}]"
        name = device.get("name")
        if not is_dns_label(name):
            errors.append(f"{path}.name: Invalid value {name!r}: must be a DNS label")
        if name in seen:
            errors.append(f"{path}.name: Duplicate value {name!r}")
        seen.add(name)
        attributes = device.get("attributes") or {}
        capacity = device.get("capacity") or {}
        if len(attributes) + len(capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
            errors.append(
                f"{path}: Too many: {len(attributes) + len(capacity)} attributes and capacities, "
                f"at most {MAX_ATTRIBUTES_AND_CAPACITIES}"
            )
        for attr_name, value in attributes.items():
            problem = qualified_name_problem(attr_name)
            if problem:
                errors.append(f"{path}.attributes: Invalid value {problem}")
            _validate_attribute(f"{path}.attributes[{attr_name}]", value, errors)
        multiple = bool(device.get("allowMultipleAllocations"))
        for cap_name, cap in capacity.items():
            problem = qualified_name_problem(cap_name)
            if problem:
                errors.append(f"{path}.capacity: Invalid value {problem}")
            if not _QUANTITY.match(str(cap.get("value", ""))):
                errors.append(f"{path}.capacity[{cap_name}].value: Invalid value {cap.get('value')!r}: not a quantity")
            if cap.get("requestPolicy") and not multiple:
                errors.append(
                    f"{path}.capacity[{cap_name}].requestPolicy: Forbidden: only allowed when "
                    "allowMultipleAllocations is true"
                )


_LABEL_NAME_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
TAINT_EFFECTS = ("None", "NoSchedule", "NoExecute")  # "None" from 1.35 (v1 DeviceTaint)


def validate_device_taints(obj: dict[str, Any], minor: str, errors: list[str]) -> None:
    """v1 DeviceTaint rules: key a label name, value a label value, a known effect, at most 16 (1.36 types)."""
    for index, device in enumerate((obj.get("spec") or {}).get("devices") or []):
        taints = device.get("taints") or []
        if len(taints) > 16:
            errors.append(f"spec.devices[{index}].taints: Too many: {len(taints)}: must have at most 16 items")
        for number, taint in enumerate(taints):
            path = f"spec.devices[{index}].taints[{number}]"
            key = str(taint.get("key") or "")
            prefix, sep, name = key.rpartition("/")
            if (sep and not is_dns_subdomain(prefix)) or len(name) > 63 or not _LABEL_NAME_PART.match(name):
                errors.append(f"{path}.key: Invalid value {key!r}: must be a qualified label name")
            value = taint.get("value") or ""
            if value and (len(value) > 63 or not _LABEL_NAME_PART.match(value)):
                errors.append(f"{path}.value: Invalid value {value!r}: must be a label value")
            effects = TAINT_EFFECTS if minor >= "1.35" else TAINT_EFFECTS[1:]
            if taint.get("effect") not in effects:
                errors.append(f"{path}.effect: Unsupported value {taint.get('effect')!r}: supported values {effects}")


def default_taint_times(obj: dict[str, Any]) -> None:
    """The API server sets a taint's timeAdded on create or update when the client did not.

    A metav1.Time is stored in seconds and answered as RFC 3339 UTC with ``Z``,
    whatever offset form the client sent (the Python client sends ``+00:00``).
    """
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for device in (obj.get("spec") or {}).get("devices") or []:
        for taint in device.get("taints") or []:
            sent = taint.get("timeAdded")
            if not sent:
                taint["timeAdded"] = now
                continue
            try:
                parsed = datetime.fromisoformat(str(sent).replace("Z", "+00:00"))
            except ValueError as exc:
                raise ApiError(422, f"timeAdded: Invalid value {sent!r}: not an RFC 3339 time") from exc
            taint["timeAdded"] = parsed.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
CONFIG_MAP_MAX_BYTES = 1024 * 1024


def validate_config_map(obj: dict[str, Any], errors: list[str]) -> None:
    """What the real server checks on a ConfigMap beyond its schema: keys, binaryData's base64, the size."""
    data, binary = obj.get("data") or {}, obj.get("binaryData") or {}
    size = 0
    for field, entries in (("data", data), ("binaryData", binary)):
        for key, value in entries.items():
            if len(key) > 253 or not CONFIG_MAP_KEY.fullmatch(key) or key in (".", ".."):
                errors.append(f"{field}[{key}]: Invalid value: {key!r}: a valid config key must consist of "
                              "alphanumeric characters, '-', '_' or '.'")  # fmt: skip
            if field == "binaryData":
                try:
                    size += len(base64.b64decode(value, validate=True))
                except (binascii.Error, ValueError):
                    errors.append(f"binaryData[{key}]: Invalid value: illegal base64 data")
            else:
                size += len(str(value).encode())
            size += len(key)
    for key in sorted(set(data) & set(binary)):
        errors.append(f"data[{key}]: Invalid value: {key!r}: duplicate of key present in binaryData")
    if size > CONFIG_MAP_MAX_BYTES:
        errors.append(f"[]: Too long: must have at most {CONFIG_MAP_MAX_BYTES} bytes")


def validate_resource_claim_status(obj: dict[str, Any], errors: list[str]) -> None:
    status = obj.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    allocated = {(r.get("driver"), r.get("pool"), r.get("device"), r.get("shareID")) for r in results}
    seen = set()
    for index, entry in enumerate(status.get("devices") or []):
        path = f"status.devices[{index}]"
        key = (entry.get("driver"), entry.get("pool"), entry.get("device"), entry.get("shareID"))
        if key not in allocated:
            errors.append(f"{path}: Invalid value {key}: must be an allocated device in the claim")
        if key in seen:
            errors.append(f"{path}: Duplicate value {key}")
        seen.add(key)
        conditions = entry.get("conditions") or []
        if len(conditions) > MAX_STATUS_CONDITIONS:
            errors.append(f"{path}.conditions: Too many: must have at most {MAX_STATUS_CONDITIONS} items")
        for cond in conditions:
            for field in ("type", "status", "lastTransitionTime", "reason", "message"):
                if field not in cond:
                    errors.append(f"{path}.conditions: Required value: {field}")
        network = entry.get("networkData") or {}
        if len(network.get("interfaceName", "")) > 256:
            errors.append(f"{path}.networkData.interfaceName: Too long: may not be more than 256 bytes")
        if len(network.get("hardwareAddress", "")) > 128:
            errors.append(f"{path}.networkData.hardwareAddress: Too long: may not be more than 128 bytes")
        ips = network.get("ips") or []
        if len(ips) > MAX_NETWORK_IPS:
            errors.append(f"{path}.networkData.ips: Too many: must have at most {MAX_NETWORK_IPS} items")
        for ip in ips:
            try:
                ipaddress.ip_interface(ip)
                if "/" not in ip:
                    raise ValueError(ip)
            except ValueError:
                errors.append(f"{path}.networkData.ips: Invalid value {ip!r}: must be an IP address in CIDR form")
        if len(set(ips)) != len(ips):
            errors.append(f"{path}.networkData.ips: Duplicate value")
    if len(status.get("reservedFor") or []) > 256:
        errors.append("status.reservedFor: Too many: must have at most 256 items")


_VALIDATORS: dict[tuple[str, str, str], Any] = {}
_VALIDATORS_LOCK = threading.Lock()


def _closed(schema: Any) -> Any:
    """An OpenAPI schema of a CRD where objects with ``properties`` refuse other fields (strict field validation)."""
    if isinstance(schema, list):
        return [_closed(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: _closed(value) for key, value in schema.items()}
    if "properties" in schema and "additionalProperties" not in schema:
        if not schema.get("x-kubernetes-preserve-unknown-fields"):
            closed["additionalProperties"] = False
    return closed


def crd_schema_error(obj: dict[str, Any]) -> Any:
    """The first error of a Kueue object against the openAPIV3Schema of its CRD (strict), or None."""
    kind = obj.get("kind", "")
    key = ("crd", obj.get("apiVersion", ""), kind)
    with _VALIDATORS_LOCK:
        validator = _VALIDATORS.get(key)
        if validator is None:
            version = obj.get("apiVersion", "").split("/")[-1]
            for path in sorted(KUEUE_CRDS.glob("kueue.x-k8s.io_*.yaml")):
                crd = yaml.safe_load(path.read_text(encoding="utf-8"))
                if crd["spec"]["names"]["kind"] != kind:
                    continue
                for served in crd["spec"]["versions"]:
                    if served["name"] == version and served.get("served"):
                        schema = _closed(served["schema"]["openAPIV3Schema"])
                        # metadata is the server's ObjectMeta, checked by _validate_metadata
                        schema["properties"]["metadata"] = {"type": "object"}
                        validator = jsonschema.validators.Draft202012Validator(schema)
            if validator is None:
                raise ApiError(404, f"no CRD serves {kind} {obj.get('apiVersion')}", "NotFound")
            _VALIDATORS[key] = validator
    return jsonschema.exceptions.best_match(validator.iter_errors(obj))


def schema_error(obj: dict[str, Any], minor: str) -> Any:
    """The first error of ``obj`` against kubernetes-validate's strict schema for ``minor``, or None.

    Same schema files and the same validator class as ``kubernetes_validate.validate``
    (which a test checks), but each compiled validator is kept: loading the schema
    files is most of the 10-50 ms that a call costs.
    """
    key = (minor, obj.get("apiVersion", ""), obj.get("kind", ""))
    with _VALIDATORS_LOCK:
        validator = _VALIDATORS.get(key)
        if validator is None:
            validator = _VALIDATORS[key] = _compile(*key)
    return jsonschema.exceptions.best_match(validator.iter_errors(obj))


def _compile(minor: str, api_version: str, kind: str) -> Any:
    from kubernetes_validate import utils
    from referencing import Registry, Resource

    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema_dir = f"v{minor}.0-local-strict"
    schema = utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/{kind.lower()}-{group_version}.json", minor)
    definitions = utils.schema_contents(f"kubernetes-json-schema/{schema_dir}/_definitions.json", minor)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.validators.Draft202012Validator(schema, registry=registry)


def drop_disabled_fields(obj: dict[str, Any], gates: dict[str, bool]) -> None:
    """Remove fields whose feature gate is off, as the real API server does on write."""
    if obj.get("kind") == "DeviceClass" and not gates["DRAExtendedResource"]:
        (obj.get("spec") or {}).pop("extendedResourceName", None)
    if obj.get("kind") != "ResourceSlice":
        return
    spec = obj.get("spec") or {}
    if not gates["DRAPartitionableDevices"]:
        spec.pop("sharedCounters", None)
        spec.pop("perDeviceNodeSelection", None)
    for device in spec.get("devices") or []:
        if not gates["DRAConsumableCapacity"]:
            device.pop("allowMultipleAllocations", None)
            for cap in (device.get("capacity") or {}).values():
                cap.pop("requestPolicy", None)
        if not gates["DRAPartitionableDevices"]:
            for key in ("consumesCounters", "nodeName", "nodeSelector", "allNodes"):
                device.pop(key, None)
        if not gates["DRADeviceTaints"]:
            device.pop("taints", None)


# ---------------------------------------------------------------------------
# Merging
# ---------------------------------------------------------------------------


def merge(live: Any, patch: Any, path: str = "", delete_nulls: bool = True) -> Any:
    """Merge ``patch`` into ``live`` (RFC 7386), merging known list-maps by key."""
    if isinstance(patch, dict) and isinstance(live, dict):
        out = dict(live)
        for key, value in patch.items():
            child = f"{path}.{key}" if path else key
            if value is None and delete_nulls:
                out.pop(key, None)
            elif key in out:
                out[key] = merge(out[key], value, child, delete_nulls)
            else:
                out[key] = copy.deepcopy(value)
        return out
    keys = LIST_MAP_KEYS.get(path)
    if keys and isinstance(patch, list) and isinstance(live, list):
        out = [copy.deepcopy(item) for item in live]
        index = {tuple(item.get(k) for k in keys): i for i, item in enumerate(out)}
        for item in patch:
            key = tuple(item.get(k) for k in keys)
            if key in index:
                out[index[key]] = merge(out[index[key]], item, path, delete_nulls)
            else:
                index[key] = len(out)
                out.append(copy.deepcopy(item))
        return out
    return copy.deepcopy(patch)


def json_patch(doc: Any, operations: list[dict[str, Any]]) -> Any:
    """Apply an RFC 6902 JSON patch (add, remove, replace, test)."""
    doc = copy.deepcopy(doc)
    for op in operations:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op.get("path", "").split("/")[1:]]
        if not parts:
            raise ApiError(400, "json patch: empty path")
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        kind = op.get("op")
        try:
            if kind == "add":
                if isinstance(parent, list):
                    parent.insert(len(parent) if last == "-" else int(last), op["value"])
                else:
                    parent[last] = op["value"]
            elif kind == "replace":
                target_key: Any = int(last) if isinstance(parent, list) else last
                if not isinstance(parent, list) and last not in parent:
                    raise ApiError(422, f"json patch: replace of missing path {op['path']}")
                parent[target_key] = op["value"]
            elif kind == "remove":
                del parent[int(last) if isinstance(parent, list) else last]
            elif kind == "test":
                if parent[int(last) if isinstance(parent, list) else last] != op.get("value"):
                    raise ApiError(422, f"json patch: test failed at {op['path']}")
            else:
                raise ApiError(400, f"json patch: unsupported op {kind!r}")
        except (KeyError, IndexError, ValueError) as exc:
            raise ApiError(422, f"json patch: {op.get('path')}: {exc}") from exc
    return doc


# ---------------------------------------------------------------------------
# Selectors
# ---------------------------------------------------------------------------


def _field(obj: dict[str, Any], dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def match_field_selector(obj: dict[str, Any], selector: str) -> bool:
    for term in filter(None, selector.split(",")):
        negate = "!=" in term
        key, _sep, value = term.partition("!=" if negate else "=")
        value = value.lstrip("=")
        actual = _field(obj, key.strip())
        actual = "" if actual is None else str(actual)
        if (actual == value) == negate:
            return False
    return True


def _split_terms(selector: str) -> list[str]:
    terms, depth, current = [], 0, ""
    for char in selector:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    if current:
        terms.append(current)
    return [t.strip() for t in terms if t.strip()]


def match_label_selector(labels: dict[str, str], selector: str) -> bool:
    for term in _split_terms(selector):
        found = re.match(r"^([^\s!=]+)\s+(in|notin)\s+\((.*)\)$", term)
        if found:
            key, op, values = found.group(1), found.group(2), {v.strip() for v in found.group(3).split(",")}
            if (op == "in") != (labels.get(key) in values):
                return False
        elif "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = re.split(r"==?", term, maxsplit=1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


def match_selector_object(labels: dict[str, str], selector: dict[str, Any] | None) -> bool:
    """Match a ``LabelSelector`` object (matchLabels, matchExpressions); an empty selector matches everything."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator, values = expression["key"], expression["operator"], expression.get("values") or []
        if operator == "In" and labels.get(key) not in values:
            return False
        if operator == "NotIn" and key in labels and labels[key] in values:
            return False
        if operator == "Exists" and key not in labels:
            return False
        if operator == "DoesNotExist" and key in labels:
            return False
    return True


def selector_problem(selector: dict[str, Any] | None, path: str) -> str | None:
    """The API server's check of a LabelSelector's operators and values, or None."""
    for index, expression in enumerate((selector or {}).get("matchExpressions") or []):
        operator, values = expression.get("operator"), expression.get("values") or []
        where = f"{path}.matchExpressions[{index}]"
        if operator in ("In", "NotIn") and not values:
            return f"{where}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
        if operator in ("Exists", "DoesNotExist") and values:
            return f"{where}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return f"{where}.operator: Invalid value: {operator!r}: not a valid selector operator"
    return None


def pod_is_ready(pod: dict[str, Any]) -> bool:
    """Running, Ready and not being deleted: what the disruption controller counts as healthy."""
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    return ready and status.get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")


def _scaled(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        share = int(value[:-1]) * total
        return -(-share // 100) if round_up else share // 100
    return int(value)


def pdb_status(pdb: dict[str, Any], pods: list[dict[str, Any]], now: str) -> dict[str, Any]:
    """What the disruption controller writes into a PodDisruptionBudget's status.

    The expected pod count is the number of pods the selector matches (the real
    controller asks the pods' controllers for their scale; without controllers
    running here, the pods are the truth).
    """
    spec = pdb.get("spec") or {}
    matching = [p for p in pods if match_selector_object(p["metadata"].get("labels") or {}, spec.get("selector"))]
    expected = len(matching)
    healthy = sum(1 for p in matching if pod_is_ready(p))
    if spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected, round_up=True))
    elif spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected, round_up=True)
    else:
        desired = 0
    allowed = max(0, healthy - desired) if expected > 0 else 0
    return {
        "observedGeneration": pdb["metadata"].get("generation", 1),
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "True" if allowed > 0 else "False",
                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods",
                "message": "",
                "observedGeneration": pdb["metadata"].get("generation", 1),
                "lastTransitionTime": now,
            }
        ],
    }


# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------


def write_kubeconfig(path: str | Path, server: str) -> Path:
    """A kubeconfig for ``server`` (a fake token: the fake does not authenticate); returns its path."""
    path = Path(path)
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "fake", "cluster": {"server": server}}],
        "users": [{"name": "fake", "user": {"token": "fake-token"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
        "current-context": "fake",
    }
    path.write_text(yaml.safe_dump(config))
    return path


class FakeApiServer:
    """A strict fake API server for ``resource.k8s.io/v1``, Nodes and Pods (see the module docstring)."""

    def __init__(self, minor: str = "1.35", gates: dict[str, bool] | None = None) -> None:
        if minor not in SUPPORTED_MINORS:
            raise ValueError(f"minor {minor!r} not served; choose one of {SUPPORTED_MINORS}")
        self.minor = minor
        self.resources = served_resources(minor)
        self.gates = {name: per_minor[minor] for name, per_minor in GATE_DEFAULTS.items()}
        for name, value in (gates or {}).items():
            if name not in self.gates:
                raise ValueError(f"unknown feature gate {name!r}")
            self.gates[name] = value
        self.lock = threading.RLock()
        self.store: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.requests: list[tuple[str, str, str]] = []
        self.rejections: list[tuple[str, str, int, str]] = []
        self._faults: list[tuple[str, re.Pattern[str], int, int]] = []
        self._rv = itertools.count(1)
        # label keys per field manager (fake_apiserver_apply); the request's writer is set by handle()
        self.label_owners = fake_apiserver_apply.LabelOwnership()
        self._writer: tuple[str, dict[Any, set[str]] | None] | None = None
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle -----------------------------------------------------------

    def start(self) -> FakeApiServer:
        server = self

        class Handler(_Handler):
            api = server

        self._httpd = _Server(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-apiserver", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def write_kubeconfig(self, path: str | Path) -> Path:
        """Write a kubeconfig that points at this server and return its path."""
        return write_kubeconfig(path, self.url)

    def api_client(self) -> Any:
        """A ``kubernetes.client.ApiClient`` connected to this server."""
        import kubernetes.client

        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        return kubernetes.client.ApiClient(configuration)

    # -- direct access for tests ---------------------------------------------

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store an object as a POST would (validated), status included; returns the stored copy."""
        resource = self._resource_for(obj)
        namespace = (obj.get("metadata") or {}).get("namespace", "default") if resource.namespaced else ""
        with self.lock:
            self._writer = None
            stored = self._create(resource, namespace, copy.deepcopy(obj), keep_status=True, dry_run=False)
        return copy.deepcopy(stored)

    def get(self, plural: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        with self.lock:
            obj = self.store.get((plural, namespace, name))
            return copy.deepcopy(obj) if obj is not None else None

    def list(self, plural: str, namespace: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [
                copy.deepcopy(obj)
                for (kind, ns, _name), obj in sorted(self.store.items())
                if kind == plural and (namespace is None or ns == namespace)
            ]

    def delete(self, plural: str, name: str, namespace: str = "") -> None:
        with self.lock:
            self._delete(self.resources[plural], namespace, name)

    def fail_next(self, method: str, path_pattern: str, code: int = 500, times: int = 1) -> None:
        """Answer the next ``times`` requests matching method and path regex with ``code``."""
        with self.lock:
            self._faults.append((method.upper(), re.compile(path_pattern), code, times))

    # -- internals -------------------------------------------------------------

    def _resource_for(self, obj: dict[str, Any]) -> Resource:
        for resource in self.resources.values():
            if resource.kind == obj.get("kind") and resource.api_version == obj.get("apiVersion"):
                return resource
        raise ApiError(400, f"no kind {obj.get('kind')!r} is registered for version {obj.get('apiVersion')!r}")

    def _validate(self, resource: Resource, obj: dict[str, Any]) -> None:
        if obj.get("apiVersion") != resource.api_version or obj.get("kind") != resource.kind:
            raise ApiError(
                400,
                f"the body's apiVersion/kind {obj.get('apiVersion')}/{obj.get('kind')} does not match "
                f"{resource.api_version}/{resource.kind}",
            )
        if resource.group == KUEUE_GROUP:
            error = crd_schema_error(obj)
        else:
            error = schema_error(obj, self.minor)
        if error is not None:
            where = ".".join(str(p) for p in error.path) or "(root)"
            schema = "Kueue v0.19.2 CRD" if resource.group == KUEUE_GROUP else f"schema {self.minor}"
            raise ApiError(422, f"{resource.kind} {where}: {error.message} ({schema}, strict)")
        errors: list[str] = []
        _validate_metadata(obj, resource, errors)
        if resource.kind == "ResourceSlice":
            validate_resource_slice(obj, self.minor, errors)
            if self.gates["DRADeviceTaints"]:  # with the gate off the field is dropped, never validated
                validate_device_taints(obj, self.minor, errors)
        elif resource.kind == "DeviceClass":
            name = (obj.get("spec") or {}).get("extendedResourceName")
            if name is not None and not is_extended_resource_name(name):
                errors.append(
                    f"spec.extendedResourceName: Invalid value: {name!r}: must be a valid extended resource name"
                )
        elif resource.kind == "ResourceClaim":
            validate_resource_claim_status(obj, errors)
        elif resource.kind == "PodDisruptionBudget":
            spec = obj.get("spec") or {}
            if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
                errors.append("spec: Invalid value: minAvailable and maxUnavailable cannot be both set")
            problem = selector_problem(spec.get("selector"), "spec.selector")
            if problem:
                errors.append(problem)
        elif resource.kind == "Secret":
            for key, value in (obj.get("data") or {}).items():
                try:
                    base64.b64decode(value, validate=True)
                except (binascii.Error, ValueError):
                    errors.append(f"data[{key}]: Invalid value: illegal base64 data")
            if obj.get("type") == "kubernetes.io/service-account-token" and not (
                obj["metadata"].get("annotations") or {}
            ).get("kubernetes.io/service-account.name"):
                errors.append(
                    "metadata.annotations[kubernetes.io/service-account.name]: Required value: "
                    "a service-account-token Secret names its ServiceAccount"
                )
        elif resource.kind == "ConfigMap":
            validate_config_map(obj, errors)
        elif resource.kind == "PriorityClass":
            name = obj["metadata"].get("name", "")
            if name.startswith("system-") and name not in ("system-cluster-critical", "system-node-critical"):
                errors.append(
                    f"metadata.name: Invalid value {name!r}: priority class names with 'system-' prefix are reserved"
                )
        elif resource.kind in ("DaemonSet", "ReplicaSet"):
            spec = obj.get("spec") or {}
            problem = selector_problem(spec.get("selector"), "spec.selector")
            if problem:
                errors.append(problem)
            elif not spec.get("selector", {}).get("matchLabels") and not spec.get("selector", {}).get(
                "matchExpressions"
            ):
                errors.append("spec.selector: Invalid value: empty selector is invalid for deployment")
            template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
            if not problem and not match_selector_object(template_labels, spec.get("selector")):
                errors.append(
                    "spec.template.metadata.labels: Invalid value: `selector` does not match template `labels`"
                )
        if errors:
            name = (obj.get("metadata") or {}).get("name")
            raise ApiError(422, f'{resource.kind} "{name}" is invalid: ' + "; ".join(errors))

    def _finish_write(self, resource: Resource, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        if resource.kind == "Secret" and isinstance(obj.get("stringData"), dict):
            # the real server folds stringData into data on write and never stores it
            data = obj.setdefault("data", {})
            for key, value in obj.pop("stringData").items():
                data[key] = base64.b64encode(str(value).encode()).decode()
        self._validate(resource, obj)
        drop_disabled_fields(obj, self.gates)
        if resource.kind == "ResourceSlice":
            default_taint_times(obj)
        if resource.kind == "Node":
            # A real server always answers a spec (clients read spec.unschedulable), and never stores
            # unschedulable: false (omitempty).
            spec = obj.setdefault("spec", {})
            if spec.get("unschedulable") is False:
                del spec["unschedulable"]
        if resource.kind == "Pod":
            obj.setdefault("status", {}).setdefault("phase", "Pending")
        if old is not None and resource.kind == "Pod":

            def frozen(spec: dict[str, Any]) -> dict[str, Any]:
                spec = copy.deepcopy(spec or {})
                for field in POD_MUTABLE_SPEC:
                    spec.pop(field, None)
                for key in ("containers", "initContainers"):
                    for container in spec.get(key) or []:
                        container.pop("image", None)
                return spec

            if frozen(old.get("spec")) != frozen(obj.get("spec")):
                name = obj["metadata"]["name"]
                raise ApiError(
                    422,
                    f'Pod "{name}" is invalid: spec: Forbidden: pod updates may not change fields other than '
                    "`spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, "
                    "`spec.tolerations` (only additions to existing tolerations), "
                    "`spec.terminationGracePeriodSeconds`",
                )
        if resource.kind == "Namespace":
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj.setdefault("status", {}).setdefault("phase", "Active")
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"]["name"]
        if old is not None:
            immutable = {
                "Secret": ("type",),
                "PriorityClass": ("value",),
                "ClusterRoleBinding": ("roleRef",),
            }.get(resource.kind, ())
            for field in immutable:
                if old.get(field) != obj.get(field):
                    raise ApiError(
                        422,
                        f'{resource.kind} "{obj["metadata"]["name"]}" is invalid: {field}: Invalid value: field is immutable',
                    )
        if old is not None and resource.kind == "ConfigMap" and old.get("immutable"):
            for field in ("data", "binaryData", "immutable"):
                if old.get(field) != obj.get(field):
                    raise ApiError(
                        422,
                        f'ConfigMap "{obj["metadata"]["name"]}" is invalid: {field}: Forbidden: '
                        "field is immutable when `immutable` is set",
                    )
        if old is not None and resource.kind in ("DaemonSet", "ReplicaSet"):
            if (old.get("spec") or {}).get("selector") != (obj.get("spec") or {}).get("selector"):
                raise ApiError(422, f"{resource.kind} spec.selector: Invalid value: field is immutable")
        if old is not None and resource.kind == "ResourceSlice":
            for field in ("driver", "nodeName", "nodeSelector", "allNodes"):
                if old["spec"].get(field) != obj["spec"].get(field):
                    raise ApiError(422, f"ResourceSlice spec.{field}: Invalid value: field is immutable")
            if old["spec"]["pool"]["name"] != obj["spec"]["pool"]["name"]:
                raise ApiError(422, "ResourceSlice spec.pool.name: Invalid value: field is immutable")
        if old is not None and resource.kind == "ResourceClaim" and old.get("spec") != obj.get("spec"):
            raise ApiError(422, "ResourceClaim spec: Invalid value: field is immutable")

    def _create(
        self, resource: Resource, namespace: str, obj: dict[str, Any], keep_status: bool, dry_run: bool
    ) -> dict[str, Any]:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if resource.namespaced:
            if meta.get("namespace", namespace) != namespace:
                raise ApiError(400, "the namespace of the object does not match the namespace on the request")
            meta["namespace"] = namespace
        elif "namespace" in meta:
            meta.pop("namespace")
        if resource.status and not keep_status:
            obj.pop("status", None)
        key = (resource.plural, namespace, meta.get("name", ""))
        if key in self.store:
            raise ApiError(409, f'{resource.plural} "{meta["name"]}" already exists', "AlreadyExists")
        for field in ("uid", "resourceVersion", "creationTimestamp", "generation"):
            meta.pop(field, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        meta["generation"] = 1
        self._finish_write(resource, obj, None)
        if not dry_run:
            meta["resourceVersion"] = str(next(self._rv))
            self.store[key] = obj
            self._owned(key, None, obj)
            self._controllers(resource, namespace)
        return obj

    def _update(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        new: dict[str, Any],
        subresource: str,
        dry_run: bool,
        check_version: bool = True,
    ) -> dict[str, Any]:
        key = (resource.plural, namespace, name)
        old = self.store.get(key)
        if old is None:
            raise ApiError(404, f'{resource.plural} "{name}" not found', "NotFound")
        meta = new.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise ApiError(400, "the name of the object does not match the name on the URL")
        wanted = meta.get("resourceVersion")
        if check_version and wanted and wanted != old["metadata"]["resourceVersion"]:
            raise ApiError(
                409,
                f'Operation cannot be fulfilled on {resource.plural} "{name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
            )
        if subresource == "status":
            merged = copy.deepcopy(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            new = merged
        else:
            if resource.status:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
            for field in ("uid", "creationTimestamp", "namespace"):
                if field in old["metadata"]:
                    new["metadata"][field] = old["metadata"][field]
            new["metadata"]["name"] = name
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + (
                1 if new.get("spec") != old.get("spec") else 0
            )
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        self._finish_write(resource, new, old)
        if new == old:
            if not dry_run:
                self._owned(key, old, old)
            return old
        if not dry_run:
            new["metadata"]["resourceVersion"] = str(next(self._rv))
            self.store[key] = new
            self._owned(key, old, new)
            self._controllers(resource, namespace)
        return new

    def _delete(self, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
        obj = self.store.pop((resource.plural, namespace, name), None)
        if obj is None:
            raise ApiError(404, f'{resource.plural} "{name}" not found', "NotFound")
        uid = obj["metadata"]["uid"]
        touched = {(resource.plural, namespace)}
        if resource.kind == "Namespace":
            # what the namespace controller ends with (a real server goes through Terminating first)
            for key in [k for k in self.store if k[1] == name and self.resources[k[0]].namespaced]:
                del self.store[key]
        for key, other in list(self.store.items()):
            refs = other["metadata"].get("ownerReferences") or []
            if any(ref.get("uid") == uid and ref.get("controller") for ref in refs):
                del self.store[key]
                touched.add((key[0], key[1]))
        for plural, ns in sorted(touched):
            self._controllers(self.resources[plural], ns)
        return obj

    def _controllers(self, resource: Resource, namespace: str) -> None:
        """The controllers played here: disruption (PDB status) and token (service-account-token Secrets)."""
        if resource.kind in ("Secret", "ServiceAccount"):
            self._token_controller(namespace)
        if resource.kind not in ("Pod", "PodDisruptionBudget"):
            return
        pods = [obj for (plural, ns, _name), obj in self.store.items() if plural == "pods" and ns == namespace]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for key, pdb in list(self.store.items()):
            if key[0] != "poddisruptionbudgets" or key[1] != namespace:
                continue
            status = pdb_status(pdb, pods, now)
            old = pdb.get("status") or {}
            for new_cond in status["conditions"]:
                for old_cond in old.get("conditions") or []:
                    if old_cond.get("type") == new_cond["type"] and old_cond.get("status") == new_cond["status"]:
                        new_cond["lastTransitionTime"] = old_cond.get("lastTransitionTime", now)
            if old != status:
                updated = copy.deepcopy(pdb)
                updated["status"] = status
                updated["metadata"]["resourceVersion"] = str(next(self._rv))
                self.store[key] = updated

    def _token_controller(self, namespace: str) -> None:
        """Fill service-account-token Secrets whose ServiceAccount exists (token, ca.crt, namespace, uid)."""
        for key, secret in list(self.store.items()):
            if (
                key[0] != "secrets"
                or key[1] != namespace
                or secret.get("type") != "kubernetes.io/service-account-token"
            ):
                continue
            annotations = secret["metadata"].get("annotations") or {}
            account = self.store.get(
                ("serviceaccounts", namespace, annotations.get("kubernetes.io/service-account.name"))
            )
            if account is None or (secret.get("data") or {}).get("token"):
                continue
            updated = copy.deepcopy(secret)
            token = f"fake-token.{namespace}.{account['metadata']['name']}.{uuid.uuid4().hex}".encode()
            updated.setdefault("data", {}).update(
                {
                    "token": base64.b64encode(token).decode(),
                    "ca.crt": FAKE_CA.decode(),
                    "namespace": base64.b64encode(namespace.encode()).decode(),
                }
            )
            updated["metadata"].setdefault("annotations", {})["kubernetes.io/service-account.uid"] = account[
                "metadata"
            ]["uid"]
            updated["metadata"]["resourceVersion"] = str(next(self._rv))
            self.store[key] = updated

    def _evict(self, namespace: str, name: str, body: Any, dry_run: bool) -> tuple[int, Any]:
        """POST pods/NAME/eviction: delete the pod unless its PodDisruptionBudget forbids it (429)."""
        if not isinstance(body, dict):
            raise ApiError(400, "body must be a JSON object")
        eviction = copy.deepcopy(body)
        # The real server decodes the body with the subresource's kind as the default.
        eviction.setdefault("apiVersion", "policy/v1")
        eviction.setdefault("kind", "Eviction")
        if eviction["apiVersion"] != "policy/v1" or eviction["kind"] != "Eviction":
            raise ApiError(
                400, f"the body must be a policy/v1 Eviction, not {eviction['apiVersion']}/{eviction['kind']}"
            )
        error = schema_error(eviction, self.minor)
        if error is not None:
            where = ".".join(str(p) for p in error.path) or "(root)"
            raise ApiError(422, f"Eviction {where}: {error.message} (schema {self.minor}, strict)")
        meta = eviction.get("metadata") or {}
        if meta.get("name", name) != name:
            raise ApiError(400, "name in URL does not match name in Eviction object")
        if meta.get("namespace", namespace) != namespace:
            raise ApiError(400, "the namespace of the object does not match the namespace on the request")
        pod = self.store.get(("pods", namespace, name))
        if pod is None:
            raise ApiError(404, f'pods "{name}" not found', "NotFound")
        phase = (pod.get("status") or {}).get("phase")
        if phase not in ("Succeeded", "Failed", "Pending") and not pod["metadata"].get("deletionTimestamp"):
            labels = pod["metadata"].get("labels") or {}
            budgets = [
                obj
                for (plural, ns, _n), obj in sorted(self.store.items())
                if plural == "poddisruptionbudgets"
                and ns == namespace
                and match_selector_object(labels, (obj.get("spec") or {}).get("selector"))
            ]
            if len(budgets) > 1:
                raise ApiError(
                    500,
                    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
                )
            if budgets:
                self._check_budget(budgets[0], pod, dry_run)
        if not dry_run:
            self._delete(self.resources["pods"], namespace, name)
        return 201, {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Success", "code": 201}

    def _check_budget(self, pdb: dict[str, Any], pod: dict[str, Any], dry_run: bool) -> None:
        status = pdb.get("status") or {}
        name = pdb["metadata"]["name"]
        if status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
            raise ApiError(
                429,
                "Cannot evict pod as it would violate the pod's disruption budget.",
                details={
                    "causes": [{"reason": "DisruptionBudget", "message": "observedGeneration is less than generation"}]
                },
            )
        allowed = status.get("disruptionsAllowed", 0)
        if not pod_is_ready(pod):
            # unhealthyPodEvictionPolicy: IfHealthyBudget (default) lets an unhealthy pod go only when the
            # budget is met without it; AlwaysAllow always does. Neither uses up a disruption.
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy", "IfHealthyBudget")
            if policy == "AlwaysAllow" or status.get("currentHealthy", 0) >= status.get("desiredHealthy", 0):
                return
        elif allowed > 0:
            if not dry_run:
                updated = copy.deepcopy(pdb)
                updated["status"]["disruptionsAllowed"] = allowed - 1
                updated["metadata"]["resourceVersion"] = str(next(self._rv))
                self.store[("poddisruptionbudgets", pdb["metadata"]["namespace"], name)] = updated
            return
        elif allowed < 0:
            raise ApiError(403, "pdb disruptions allowed is negative")
        raise ApiError(
            429,
            "Cannot evict pod as it would violate the pod's disruption budget.",
            details={
                "causes": [
                    {
                        "reason": "DisruptionBudget",
                        "message": f"The disruption budget {name} needs {status.get('desiredHealthy', 0)} healthy "
                        f"pods and has {status.get('currentHealthy', 0)} currently",
                    }
                ]
            },
        )

    def _list(self, plural: str, namespace: str | None, query: dict[str, str]) -> list[dict[str, Any]]:
        allowed = FIELD_SELECTORS.get(plural)
        if allowed is not None and query.get("fieldSelector"):
            for term in filter(None, query["fieldSelector"].split(",")):
                field = re.split(r"!=|==|=", term, maxsplit=1)[0].strip()
                if field not in allowed:
                    raise ApiError(400, f"field label not supported: {field}")
        items = []
        for (kind, ns, _name), obj in sorted(self.store.items()):
            if kind != plural or (namespace is not None and ns != namespace):
                continue
            if "labelSelector" in query and not match_label_selector(
                obj["metadata"].get("labels") or {}, query["labelSelector"]
            ):
                continue
            if "fieldSelector" in query and not match_field_selector(obj, query["fieldSelector"]):
                continue
            items.append(obj)
        return items

    def handle(self, method: str, path: str, query: dict[str, str], headers: Any, body: bytes) -> tuple[int, Any]:
        """Serve one request; returns (HTTP code, JSON-able answer)."""
        content_type = (headers.get("Content-Type") or "").split(";")[0].strip()
        with self.lock:
            self.requests.append((method, path, content_type))
            self._writer = (fake_apiserver_apply.manager_of(query, headers), None)
            for index, (f_method, pattern, code, times) in enumerate(self._faults):
                if f_method == method and pattern.search(path):
                    if times <= 1:
                        del self._faults[index]
                    else:
                        self._faults[index] = (f_method, pattern, code, times - 1)
                    raise ApiError(code, f"injected failure for {method} {path}")
            discovery = self._discovery(path)
            if discovery is not None:
                if method != "GET":
                    raise ApiError(405, f"{method} is not allowed on {path}")
                return 200, discovery
            resource, namespace, name, subresource = self._route(path)
            if query.get("watch") in ("true", "1"):
                raise ApiError(400, "watch is not served by this fake API server")
            dry_run = query.get("dryRun") == "All"
            if "dryRun" in query and not dry_run:
                raise ApiError(400, f"invalid dryRun value {query['dryRun']!r}: only 'All' is valid")
            if method == "GET":
                if name:
                    obj = self.store.get((resource.plural, namespace or "", name))
                    if obj is None:
                        raise ApiError(404, f'{resource.plural} "{name}" not found', "NotFound")
                    return 200, obj
                items = self._list(resource.plural, namespace if resource.namespaced else None, query)
                return 200, {
                    "apiVersion": resource.api_version,
                    "kind": resource.kind + "List",
                    "metadata": {"resourceVersion": str(next(self._rv))},
                    "items": items,
                }
            if method in ("POST", "PUT", "PATCH") and not body:
                raise ApiError(400, "request body is required")
            ns = namespace or ""
            if subresource in resource.subresources:
                if method != "POST":
                    raise ApiError(405, f"{method} is not allowed on {path}")
                return self._evict(ns, name, self._decode(body, content_type), dry_run)
            if method == "POST":
                if name:
                    raise ApiError(405, "POST to a named object is not allowed")
                obj = self._decode(body, content_type)
                return 201, self._create(resource, ns, obj, keep_status=False, dry_run=dry_run)
            if method == "PUT":
                if not name:
                    raise ApiError(405, "PUT needs an object name")
                obj = self._decode(body, content_type)
                return 200, self._update(resource, ns, name, obj, subresource, dry_run)
            if method == "PATCH":
                if not name:
                    raise ApiError(405, "PATCH needs an object name")
                return self._patch(resource, ns, name, subresource, query, content_type, body, dry_run)
            if method == "DELETE":
                if name:
                    if dry_run:
                        obj = self.store.get((resource.plural, ns, name))
                        if obj is None:
                            raise ApiError(404, f'{resource.plural} "{name}" not found', "NotFound")
                        return 200, obj
                    return 200, self._delete(resource, ns, name)
                items = self._list(resource.plural, namespace if resource.namespaced else None, query)
                if not dry_run:
                    for obj in list(items):
                        self._delete(resource, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                return 200, {"apiVersion": resource.api_version, "kind": resource.kind + "List", "items": items}
            raise ApiError(405, f"method {method} not allowed")

    def _decode(self, body: bytes, content_type: str) -> dict[str, Any]:
        try:
            if content_type.endswith("yaml"):
                obj = yaml.safe_load(body)
            else:
                obj = json.loads(body)
        except (ValueError, yaml.YAMLError) as exc:
            raise ApiError(400, f"cannot decode body: {exc}") from exc
        if not isinstance(obj, (dict, list)):
            raise ApiError(400, "body must be a JSON object")
        return obj

    def _patch(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        subresource: str,
        query: dict[str, str],
        content_type: str,
        body: bytes,
        dry_run: bool,
    ) -> tuple[int, Any]:
        key = (resource.plural, namespace, name)
        live = copy.deepcopy(self.store.get(key))
        patch = self._decode(body, content_type)
        wanted_uid = ((patch.get("metadata") or {}) if isinstance(patch, dict) else {}).get("uid")
        if live is not None and wanted_uid and wanted_uid != live["metadata"].get("uid"):
            # metadata.uid in a patch is a precondition on the real server too
            raise ApiError(
                409,
                f"Precondition failed: UID in precondition: {wanted_uid}, UID in object meta: {live['metadata']['uid']}",
                "Conflict",
            )
        if content_type == "application/apply-patch+yaml":
            if not query.get("fieldManager"):
                raise ApiError(422, "PatchOptions.meta.k8s.io: fieldManager: Required value: is required for apply")
            if not isinstance(patch, dict):
                raise ApiError(400, "apply patch must be an object")
            if live is None:
                if subresource:
                    raise ApiError(404, f'{resource.plural} "{name}" not found', "NotFound")
                patch.setdefault("metadata", {})["name"] = name
                self._apply_labels(key, None, patch, patch, query)
                return 201, self._create(resource, namespace, patch, keep_status=False, dry_run=dry_run)
            if patch.get("apiVersion") != resource.api_version or patch.get("kind") != resource.kind:
                raise ApiError(400, "apply patch must carry the resource's apiVersion and kind")
            meta_patch = patch.get("metadata") or {}
            if meta_patch.get("name", name) != name:
                raise ApiError(400, "the name of the object does not match the name on the URL")
            merged = merge(live, patch, delete_nulls=False)
            if not subresource:
                self._apply_labels(key, live, patch, merged, query)
            return 200, self._update(resource, namespace, name, merged, subresource, dry_run, check_version=False)
        if live is None:
            raise ApiError(404, f'{resource.plural} "{name}" not found', "NotFound")
        if content_type == "application/json-patch+json":
            if not isinstance(patch, list):
                raise ApiError(400, "json patch must be a list of operations")
            merged = json_patch(live, patch)
        elif content_type in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
            if not isinstance(patch, dict):
                raise ApiError(400, "merge patch must be an object")
            merged = merge(live, patch) if content_type.startswith("application/strategic") else _rfc7386(live, patch)
        else:
            raise ApiError(415, f"the patch content type {content_type!r} is not supported", "UnsupportedMediaType")
        return 200, self._update(resource, namespace, name, merged, subresource, dry_run)

    def _apply_labels(
        self, key: tuple[str, str, str], live: Any, patch: dict[str, Any], merged: dict[str, Any], query: dict[str, str]
    ) -> None:
        """Set ``merged``'s labels as the apply leaves them (fake_apiserver_apply); 409 on a conflict."""
        manager = query["fieldManager"]
        try:
            labels, owners = self.label_owners.apply(key, live, patch, manager, query.get("force") == "true")
        except fake_apiserver_apply.ApplyConflict as exc:
            raise ApiError(409, str(exc), "Conflict") from None
        meta = merged.setdefault("metadata", {})
        if labels:
            meta["labels"] = labels
        else:
            meta.pop("labels", None)  # an empty map is not kept (omitempty)
        self._writer = (manager, owners)

    def _owned(self, key: tuple[str, str, str], old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        """Record the label ownership of the request's write; writes of the fake's own change none."""
        writer, self._writer = self._writer, None
        if writer is None:
            if old is None:
                self.label_owners.store(key, {})
            return
        manager, owners = writer
        self.label_owners.store(
            key, owners if owners is not None else self.label_owners.updated(key, old, new, manager)
        )

    def _route(self, path: str) -> tuple[Resource, str | None, str, str]:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, api_version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, api_version, rest = parts[1], f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise ApiError(404, f"the server could not find the requested resource ({path})", "NotFound")
        namespace = None
        # /api/v1/namespaces[/NAME[/status]] is the Namespace resource itself; longer paths are inside one
        is_namespace_object = group == "" and (len(rest) <= 2 or (len(rest) == 3 and rest[2] == "status"))
        if len(rest) >= 2 and rest[0] == "namespaces" and not is_namespace_object:
            namespace, rest = rest[1], rest[2:]
        if not rest or rest[0] not in self.resources or self.resources[rest[0]].api_version != api_version:
            raise ApiError(404, f"the server could not find the requested resource ({path})", "NotFound")
        resource = self.resources[rest[0]]
        if namespace is not None and not resource.namespaced:
            raise ApiError(404, f"{resource.plural} is not namespaced", "NotFound")
        name = rest[1] if len(rest) > 1 else ""
        subresource = rest[2] if len(rest) > 2 else ""
        known = (("status",) if resource.status else ()) + resource.subresources
        if subresource and subresource not in known or len(rest) > 3:
            raise ApiError(404, f"the server could not find the requested resource ({path})", "NotFound")
        if resource.namespaced and name and namespace is None:
            raise ApiError(404, f"{resource.plural} is namespaced: the URL needs a namespace", "NotFound")
        return resource, namespace, name, subresource

    def _discovery(self, path: str) -> dict[str, Any] | None:
        path = path.rstrip("/")
        if path == "/version":
            major, minor = self.minor.split(".")
            return {
                "major": major,
                "minor": minor,
                "gitVersion": f"v{self.minor}.0",
                "gitCommit": "0" * 40,
                "gitTreeState": "clean",
                "buildDate": "2026-01-01T00:00:00Z",
                "goVersion": "go1.25.0",
                "compiler": "gc",
                "platform": "linux/amd64",
            }
        if path == "/api":
            return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
        groups = list(dict.fromkeys(r.group for r in self.resources.values() if r.group))
        if path == "/apis":
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [self._group(g) for g in groups]}
        for group in groups:
            if path == f"/apis/{group}":
                return {"kind": "APIGroup", "apiVersion": "v1", **self._group(group)}
        for group_version in ["v1"] + [f"{g}/{v}" for g in groups for v in self._versions(g)]:
            prefix = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
            if path == prefix:
                return {
                    "kind": "APIResourceList",
                    "apiVersion": "v1",
                    "groupVersion": group_version,
                    "resources": self._resource_list(group_version),
                }
        return None

    def _versions(self, group: str) -> list[str]:
        """The versions the fake serves of an API group, the preferred one first (v1, Kueue's v1beta2)."""
        return list(dict.fromkeys(r.version for r in self.resources.values() if r.group == group))

    def _group(self, group: str) -> dict[str, Any]:
        versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in self._versions(group)]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    def _resource_list(self, group_version: str) -> list[dict[str, Any]]:
        resources: list[dict[str, Any]] = []
        for resource in self.resources.values():
            if resource.api_version != group_version:
                continue
            verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update"]
            resources.append(
                {
                    "name": resource.plural,
                    "singularName": resource.kind.lower(),
                    "namespaced": resource.namespaced,
                    "kind": resource.kind,
                    "verbs": verbs,
                }
            )
            if resource.status:
                resources.append(
                    {
                        "name": resource.plural + "/status",
                        "singularName": "",
                        "namespaced": resource.namespaced,
                        "kind": resource.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
            if "eviction" in resource.subresources:
                resources.append(
                    {
                        "name": resource.plural + "/eviction",
                        "singularName": "",
                        "namespaced": resource.namespaced,
                        "group": "policy",
                        "version": "v1",
                        "kind": "Eviction",
                        "verbs": ["create"],
                    }
                )
        return resources


def _rfc7386(live: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(live) if isinstance(live, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _rfc7386(out.get(key), value)
    return out


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client killed mid-request (the driver under kill -9) is not an error of the server."""
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    api: FakeApiServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without this, Nagle and delayed ACKs add ~40 ms per request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _serve(self) -> None:
        split = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        try:
            code, answer = self.api.handle(self.command, split.path, query, self.headers, body)
        except ApiError as exc:
            if self.command != "GET":
                with self.api.lock:
                    self.api.rejections.append((self.command, split.path, exc.code, exc.message))
            code, answer = exc.code, exc.status()
        except Exception as exc:  # an unexpected bug in the fake: answer 500, keep serving
            code, answer = 500, ApiError(500, f"fake API server error: {exc!r}").status()
        data = json.dumps(answer).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve
