# SPDX-License-Identifier: Apache-2.0
"""Gang and topology scheduling of a job per Kubernetes minor: the Workload API objects and gates.

kube-scheduler's Workload API (``scheduling.k8s.io``) changes shape every minor:

- 1.34: none;
- 1.35 (``v1alpha1``, KEP-4671): a ``Workload`` with ``podGroups`` (gang ``minCount``); pods name it
  in ``spec.workloadRef``; no topology constraint;
- 1.36 (``v1alpha2``, KEP-5832/5732/5710): a ``Workload`` of ``podGroupTemplates`` and a standalone
  ``PodGroup`` made from one; pods name the PodGroup in ``spec.schedulingGroup``; a topology
  constraint (one node label key: every pod in one domain) and a disruption mode, each behind its gate;
- 1.37 (``v1beta1``): the same with ``PodGroup.spec.workloadRef`` and ``disruptionMode {all: {}}``;
  ``GangScheduling`` and ``WorkloadAwarePreemption`` are merged into ``GenericWorkload``; with
  ``WorkloadWithJob`` the Job's own ``spec.scheduling`` makes the Job controller create both objects.

:func:`gang` returns what a job gets on one minor with the site's gates: the objects, the pod field that
links a worker to its group, the Job's ``spec.scheduling``, whether the scheduler enforces the job's
level itself, and what was left out and why. The objects need their API version served too
(``--runtime-config=scheduling.k8s.io/<version>=true`` on kube-apiserver: alpha and new beta APIs are
off by default); the inventory has no setting for it, so a site that declares the gates is taken to
serve the version, and every reason says so.

:data:`WORKLOAD_GATES` names the gates of these features; their defaults per minor are in
``dra.gates.FEATURE_GATES``. Runs on the controller; no Ansible imports.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ansible_collections.aligned.dra.plugins.module_utils.dra import gates as dra_gates

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

GENERIC_WORKLOAD = "GenericWorkload"
GANG_SCHEDULING = "GangScheduling"
TOPOLOGY = "TopologyAwareWorkloadScheduling"
PREEMPTION = "WorkloadAwarePreemption"
WITH_JOB = "WorkloadWithJob"

# The gates of these features; their defaults per minor are in the DRA gate catalogue
# (``dra.gates.FEATURE_GATES``), which also lets a site declare them.
WORKLOAD_GATES = (GENERIC_WORKLOAD, GANG_SCHEDULING, TOPOLOGY, PREEMPTION, WITH_JOB)

# The components each gate must be on for, as the reasons tell the site.
GATE_COMPONENTS = {
    # kube-controller-manager from 1.37 (workload-aware preemption, the Job integration); harmless before
    GENERIC_WORKLOAD: "kube-apiserver, kube-scheduler, kube-controller-manager",
    GANG_SCHEDULING: "kube-scheduler",
    TOPOLOGY: "kube-apiserver, kube-scheduler",
    PREEMPTION: "kube-apiserver, kube-scheduler",
    WITH_JOB: "kube-apiserver, kube-controller-manager",
}

GROUP = "scheduling.k8s.io"
TEMPLATE = "workers"  # the one pod group (template) of a job's Workload

# What each minor's API has; a minor missing here has no Workload API.
API: dict[str, dict[str, Any]] = {
    "1.35": {"version": "v1alpha1", "gates": (GENERIC_WORKLOAD, GANG_SCHEDULING), "pod_group": False},
    "1.36": {
        "version": "v1alpha2",
        "gates": (GENERIC_WORKLOAD, GANG_SCHEDULING),
        "pod_group": True,
        "topology": TOPOLOGY,
        "disruption": (PREEMPTION, "PodGroup"),
    },
    "1.37": {
        "version": "v1beta1",
        "gates": (GENERIC_WORKLOAD,),
        "pod_group": True,
        "topology": TOPOLOGY,
        "disruption": (None, {"all": {}}),  # served with GenericWorkload itself
        "job_scheduling": WITH_JOB,
    },
}


def gate_on(gate: str, minor: str, overrides: dict[str, bool] | None = None) -> bool:
    """Whether ``gate`` is on for ``minor`` with the site's declared gates winning over the default."""
    return dra_gates.gate_enabled(gate, minor, overrides)


def _gates_text(gates: tuple[str, ...] | list[str]) -> str:
    """``feature gate A (components)`` or ``feature gates A (...), B (...)``."""
    named = ", ".join(f"{g} ({GATE_COMPONENTS[g]})" for g in gates)
    return f"feature gate{'s' if len(gates) > 1 else ''} {named}"


def _missing(gates: tuple[str, ...] | list[str], minor: str, overrides: dict[str, bool] | None) -> list[str]:
    return [g for g in gates if not gate_on(g, minor, overrides)]


def _runtime_config(minor: str) -> str:
    return f"--runtime-config={GROUP}/{API[minor]['version']}=true on kube-apiserver"


@dataclass
class Gang:
    """What one job gets on one minor: see :func:`gang`."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    pod_link: dict[str, Any] = field(default_factory=dict)  # merged into the pod spec
    job_scheduling: dict[str, Any] | None = None  # the Job's spec.scheduling (1.37, WorkloadWithJob)
    topology_enforced: bool = False  # the scheduler keeps every worker in one domain of the level
    left_out: list[dict[str, str]] = field(default_factory=list)


def _policy(workers: int) -> dict[str, Any]:
    return {"gang": {"minCount": workers}}


def _group_fields(minor: str, workers: int, topology_key: str | None, disruption: Any) -> dict[str, Any]:
    """schedulingPolicy, schedulingConstraints and disruptionMode as a 1.36+ template and PodGroup share them."""
    out: dict[str, Any] = {"schedulingPolicy": _policy(workers)}
    if topology_key:
        out["schedulingConstraints"] = {"topology": [{"key": topology_key}]}
    if disruption is not None:
        out["disruptionMode"] = disruption
    return out


def _meta(name: str, namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": dict(labels)}


def _workload(
    minor: str, name: str, namespace: str, labels: dict[str, str], workers: int, fields: dict[str, Any]
) -> dict[str, Any]:
    spec: dict[str, Any] = {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": name}}
    if minor == "1.35":
        spec["podGroups"] = [{"name": TEMPLATE, "policy": _policy(workers)}]
    else:
        spec["podGroupTemplates"] = [dict({"name": TEMPLATE}, **fields)]
    return {
        "apiVersion": f"{GROUP}/{API[minor]['version']}",
        "kind": "Workload",
        "metadata": _meta(name, namespace, labels),
        "spec": spec,
    }


def _pod_group(minor: str, name: str, namespace: str, labels: dict[str, str], fields: dict[str, Any]) -> dict[str, Any]:
    if minor == "1.36":
        ref = {"podGroupTemplateRef": {"workload": {"workloadName": name, "podGroupTemplateName": TEMPLATE}}}
    else:
        ref = {"workloadRef": {"workloadName": name, "templateName": TEMPLATE}}
    return {
        "apiVersion": f"{GROUP}/{API[minor]['version']}",
        "kind": "PodGroup",
        "metadata": _meta(name, namespace, labels),
        "spec": dict(ref, **fields),
    }


def gang(
    name: str,
    namespace: str,
    workers: int,
    minor: str,
    overrides: dict[str, bool] | None,
    required_key: str | None,
    labels: dict[str, str],
) -> Gang:
    """Gang (``minCount`` = ``workers``) and, for a required level, the topology constraint on ``required_key``.

    The Workload and PodGroup are named like the job (the Job controller's own objects, 1.37 with
    WorkloadWithJob, are not rendered). Without the gates nothing is linked: a pod naming a group
    that does not exist never schedules.
    """
    minor = dra_gates.minor_of(minor)
    out = Gang()
    api = API.get(minor)
    if api is None:
        out.left_out.append(
            {
                "name": name,
                "reason": f"gang scheduling left out: Kubernetes {minor} has no Workload API ({GROUP}, from 1.35)",
            }
        )
        return out
    missing = _missing(api["gates"], minor, overrides)
    if missing:
        out.left_out.append(
            {
                "name": name,
                "reason": f"Workload{'/PodGroup' if api['pod_group'] else ''} (gang of {workers}) left out: "
                f"Kubernetes {minor} serves it with {_gates_text(missing)} and {_runtime_config(minor)}; "
                "declare the gates in aligned_dra_feature_gates once the cluster has them",
            }
        )
        return out
    key = None
    if required_key and api.get("topology"):
        if gate_on(api["topology"], minor, overrides):
            key = required_key
        else:
            out.left_out.append(
                {
                    "name": name,
                    "reason": f"topology constraint on {required_key} left out: it needs "
                    f"{_gates_text([api['topology']])}; the workers keep to one domain by pod affinity instead",
                }
            )
    elif required_key:
        out.left_out.append(
            {
                "name": name,
                "reason": f"topology constraint on {required_key} left out: the Workload API of Kubernetes {minor} "
                "has none (from 1.36); the workers keep to one domain by pod affinity instead",
            }
        )
    out.topology_enforced = key is not None
    disruption = None
    if api.get("disruption"):
        gate, value = api["disruption"]
        if gate is None or gate_on(gate, minor, overrides):
            disruption = value
        else:
            out.left_out.append(
                {
                    "name": name,
                    "reason": f"disruptionMode {value} left out: it needs {_gates_text([gate])}; "
                    "a disrupted worker is then disrupted alone",
                }
            )
    fields = _group_fields(minor, workers, key, disruption)
    if api.get("job_scheduling") and gate_on(api["job_scheduling"], minor, overrides):
        out.job_scheduling = fields
        out.left_out.append(
            {
                "name": name,
                "reason": f"Workload/PodGroup files left out: with {WITH_JOB} the Job controller creates them "
                "from the Job's spec.scheduling and links the pods",
            }
        )
        return out
    out.objects.append(_workload(minor, name, namespace, labels, workers, fields))
    if api["pod_group"]:
        out.objects.append(_pod_group(minor, name, namespace, labels, fields))
        out.pod_link = {"schedulingGroup": {"podGroupName": name}}
    else:
        out.pod_link = {"workloadRef": {"name": name, "podGroup": TEMPLATE}}
    return out
