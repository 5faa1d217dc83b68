# SPDX-License-Identifier: Apache-2.0
"""TEST FAKE: the kinds the fake API server serves, its errors, and its store (see the package docstring)."""

from __future__ import annotations

import base64
import copy
import itertools
import threading
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
_FIXTURES = Path(__file__).resolve().parents[3] / "fixtures"
# The schedulers' CustomResourceDefinitions, copied unmodified (tests/fixtures/kueue-v0.19.2 and
# tests/fixtures/kai-scheduler-v0.17.0): per API group, the folder of its CRD files and the name errors give.
CRD_GROUPS = {
    KUEUE_GROUP: (_FIXTURES / "kueue-v0.19.2", "Kueue v0.19.2 CRD"),
    "scheduling.run.ai": (_FIXTURES / "kai-scheduler-v0.17.0", "KAI Scheduler v0.17.0 CRD"),
    "kai.scheduler": (_FIXTURES / "kai-scheduler-v0.17.0", "KAI Scheduler v0.17.0 CRD"),
}


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
        key: str | None = None,
    ) -> None:
        # the store's and the table's key: the plural, or plural.group where two groups serve one plural
        self.key = key or plural
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
    r.key: r
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
        # KAI Scheduler's CRDs (v0.17.0: Queue v2, PodGroup v2alpha2, Topology v1alpha1).
        Resource("scheduling.run.ai", "v2", "queues", "Queue", namespaced=False, status=True),
        Resource(
            "scheduling.run.ai",
            "v2alpha2",
            "podgroups",
            "PodGroup",
            True,
            status=True,
            key="podgroups.scheduling.run.ai",
        ),
        Resource(
            "kai.scheduler", "v1alpha1", "topologies", "Topology", False, status=True, key="topologies.kai.scheduler"
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
# The store
# ---------------------------------------------------------------------------


class Storage:
    """The stored objects and every write to them (mixed into FakeApiServer).

    Every write goes through ``_finish_write`` (validation.Admission); ``_controllers`` plays the
    controllers a real cluster runs after a write (token here, disruption in disruption.Disruption).
    """

    resources: dict[str, Resource]
    lock: threading.RLock
    store: dict[tuple[str, str, str], dict[str, Any]]
    _rv: itertools.count[int]

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

    # -- internals -------------------------------------------------------------

    def _resource_for(self, obj: dict[str, Any]) -> Resource:
        for resource in self.resources.values():
            if resource.kind == obj.get("kind") and resource.api_version == obj.get("apiVersion"):
                return resource
        raise ApiError(400, f"no kind {obj.get('kind')!r} is registered for version {obj.get('apiVersion')!r}")

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
        key = (resource.key, namespace, meta.get("name", ""))
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
        key = (resource.key, namespace, name)
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
        obj = self.store.pop((resource.key, namespace, name), None)
        if obj is None:
            raise ApiError(404, f'{resource.plural} "{name}" not found', "NotFound")
        uid = obj["metadata"]["uid"]
        touched = {(resource.key, namespace)}
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
        if resource.kind in ("Pod", "PodDisruptionBudget"):
            self._disruption_controller(namespace)
        self._daemonset_controller()  # daemonsets.DaemonSets: off unless a test runs it

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
