# SPDX-License-Identifier: Apache-2.0
"""KAI Scheduler's API as the kai modules use it: kinds, labels, annotations, special values, its GPU rule.

KAI Scheduler v0.17.0 (kai-scheduler/KAI-Scheduler): Queue
``scheduling.run.ai/v2``, PodGroup ``scheduling.run.ai/v2alpha2``, Topology
``kai.scheduler/v1alpha1`` (:mod:`kai_schemas`). Also :func:`counts_as_gpu`,
KAI's rule for what a DRA GPU is, and :class:`KaiError` for team settings KAI
cannot serve.

KAI counts GPUs by name (its ``IsGPUDeviceClass``, case-insensitive): a
node's DRA GPUs are every device of the ResourceSlices whose *driver* name
contains ``gpu``; a claim's GPUs are its ``exactly`` requests whose *device
class* name contains ``gpu`` (``ExactCount``: the count, at least 1; ``All``:
1), ``firstAvailable`` requests are not counted, nor claims annotated as
extended-resource claims.

Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from ansible_collections.aligned.dra.plugins.module_utils.controller import schedulers
from ansible_collections.aligned.dra.plugins.module_utils.controller.schedulers.kai import schemas as kai_schemas
from ansible_collections.aligned.dra.plugins.module_utils.dra.scheduler_counts import kai_counts_as_gpu

KAI_VERSION = kai_schemas.KAI_VERSION
QUEUE_API_VERSION = kai_schemas.API_VERSIONS["Queue"]
POD_GROUP_API_VERSION = kai_schemas.API_VERSIONS["PodGroup"]
TOPOLOGY_API_VERSION = kai_schemas.API_VERSIONS["Topology"]
API_GROUPS = tuple(sorted({v.rpartition("/")[0] for v in kai_schemas.API_VERSIONS.values()}))
# KAI reads a workload's queue from this label on the pod or its top owner (never from its namespace).
QUEUE_LABEL = "kai.scheduler/queue"
TOPOLOGY_ANNOTATION = "kai.scheduler/topology"
TOPOLOGY_PLACEMENT_ANNOTATIONS = {
    "required": "kai.scheduler/topology-required-placement",
    "preferred": "kai.scheduler/topology-preferred-placement",
}
DEFAULT_SCHEDULER_NAME = "kai-scheduler"
# Queue.spec.resources.<r>: quota -1 is unlimited, 0 (or unset) guarantees nothing; limit -1 is no
# limit, 0 (or unset) allows nothing at all, not even the quota. Queue.spec.priority unset reads 100.
UNLIMITED = -1
DEFAULT_QUEUE_PRIORITY = 100
# the queues KAI's own installation makes: a PodGroup of a workload that names no queue goes to the first
DEFAULT_QUEUE = "default-queue"
RESERVED_QUEUES = (DEFAULT_QUEUE, "default-parent-queue")
# the workload kinds whose queue label the admission policy checks: pods, and the owners KAI reads it from
POLICY_RESOURCES = (
    ("", "v1", "pods"),
    ("batch", "v1", "jobs"),
    ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
    ("scheduling.run.ai", "v2alpha2", "podgroups"),
)


class KaiError(schedulers.SchedulerError):
    """Team settings KAI Scheduler cannot serve (or would miscount); the message names the setting."""


# KAI's rule: a device class (of a claim request) or a driver (of a slice) whose name contains ``gpu``
counts_as_gpu = kai_counts_as_gpu
