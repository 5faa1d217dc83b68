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

    from ansible_collections.aligned.dra.tests.support.fakes.apiserver import FakeApiServer

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
        api.upgrade("1.36", gates=dict(...))          # a control-plane upgrade: /version, schemas, rules, gates

Kueue (v0.19.2) as a cluster with its CRDs installed serves it:
``/apis/kueue.x-k8s.io/v1beta2/{clusterqueues, cohorts, resourceflavors,
topologies, workloadpriorityclasses}`` and namespaced ``localqueues``, each validated
against the openAPIV3Schema of Kueue's own CRD (``tests/fixtures/kueue-v0.19.2``),
strict: fields a schema does not declare are refused. The CRDs' CEL rules and
Kueue's webhook are not run here (``kueue.validate_objects`` is tested against
them). KAI Scheduler (v0.17.0) likewise: ``/apis/scheduling.run.ai/v2/queues``,
namespaced ``/apis/scheduling.run.ai/v2alpha2/.../podgroups`` and
``/apis/kai.scheduler/v1alpha1/topologies`` (``tests/fixtures/kai-scheduler-v0.17.0``;
its Topology and PodGroup are stored under ``topologies.kai.scheduler`` and
``podgroups.scheduling.run.ai``, apart from Kueue's Topology and Kubernetes' PodGroup).

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
(``apiserver.apply``: a manager's apply removes the label keys it applied
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
A 422 of the server's own rules has ``details`` (``name``, ``group``, ``kind``)
with one cause per wrong field, as the real server answers:
``{"field": "spec.devices[2]", "message": "Duplicate value: \\"gpu-0\\"",
"reason": "FieldValueDuplicate"}``. Where a pool's counter sets may be
follows the minor (``DRAPartitionableDevices`` on): on 1.34 a device consumes
a set of its own slice, from 1.35 a slice has ``sharedCounters`` or
``devices``, never both.
Discovery (``/api``, ``/apis``, ``/apis/GROUP``, ``/apis/GROUP/VERSION``) lists
every served group and version, ``pods/eviction`` included.

Modules
=======

By concern; the server composes the others' mixins into one class:

- ``resources``: the kinds served per minor, ``ApiError``, and the store
  (create, update, delete, the garbage and token controllers);
- ``validation``: the schemas (kubernetes-validate, Kueue's CRDs), the DRA
  limits and every other rule a write is checked against, feature gates;
- ``apply``: patches (merge, strategic merge, JSON patch) and server-side
  apply with its label ownership;
- ``selector``: label and field selectors, lists;
- ``disruption``: evictions and PodDisruptionBudgets (what a drain meets);
- ``server``: ``FakeApiServer``, its HTTP handler, routing and discovery;
- ``serving``: ``Serving``, a server's accept loop on a thread that stops at
  once (``FakeApiServer`` and the tests' other fake servers run on it);
- ``daemon``: the background runner for Molecule scenarios (a script).
"""

from __future__ import annotations

from .apply import merge
from .resources import WORKLOAD_API, ApiError
from .selector import match_label_selector
from .server import FakeApiServer, write_kubeconfig
from .validation import qualified_name_problem, schema_error

__all__ = [
    "WORKLOAD_API",
    "ApiError",
    "FakeApiServer",
    "match_label_selector",
    "merge",
    "qualified_name_problem",
    "schema_error",
    "write_kubeconfig",
]
